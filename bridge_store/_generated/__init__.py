"""Generated from proto/ by scripts/generate_proto.py; do not edit."""
