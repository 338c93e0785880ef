"""The sql backend (being written)."""
