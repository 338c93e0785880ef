"""The benchmarks' own tests: their commands, load generators and verdicts.

They live beside the code they test so that ``tests/`` (the product's tests) imports
nothing from ``bench``; pytest collects both (pyproject's ``testpaths``).
"""
