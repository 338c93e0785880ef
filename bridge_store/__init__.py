"""bridge-store: a Connect CallStore server for Cursor SDK bridge agent history."""
