"""LongMemEval (Wu et al., ICLR 2025) end to end: generated files, metrics, retrieval-only and QA runs.

``synth`` writes files in the official format (S-, M- and oracle-like) for tests and benches; the reader that turns a
file into spaces lives in :mod:`tmem.ingest.longmemeval` (``tmem import`` uses it). See docs/longmemeval.md.
"""
