"""The measurement scripts (bench/README.md: how to run them, and an index). A package so that the scripts reusing the
test suite's fixtures run as ``python -m bench.NAME`` from the repository root; no script edits ``sys.path``."""
