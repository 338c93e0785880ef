"""Fixtures and helpers: one module per external thing a test needs."""
