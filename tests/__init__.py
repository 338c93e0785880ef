"""Test helpers shared by the test modules."""
