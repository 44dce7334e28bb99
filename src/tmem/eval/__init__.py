"""The evaluation harness: LoCoMo and LoCoMo-Plus end to end (see docs/evaluation.md).

Modules follow the flow of a run: ``locomo_data`` / ``plus_data`` (questions, evidence ids, stitching) ->
``harness`` (memories, variants, manifest) -> ``retrieval_only`` + ``baselines`` or ``qa`` + ``judge`` ->
``records`` (per-question JSONL, resume) -> ``report`` / ``cost`` (tables); ``runs`` ties them together for the CLI and
``demo`` is ``tmem demo``.
"""
