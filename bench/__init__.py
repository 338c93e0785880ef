"""Benchmarks: ``python -m bench COMMAND [options]`` (see ``python -m bench --help``)."""
