"""The redis backend (being written)."""
