"""The s3 backend (being written)."""
