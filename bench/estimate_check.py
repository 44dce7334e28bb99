"""The pre-build cost estimate against the two real LLM builds (../shared/data/llm-built): each memory's
conversation is estimated as if nothing were built yet (sequential plan, as they were built) and compared with the
call log's totals (SPACE.cost.json). The shipped files are copied first, never opened in place.

Run (from the repository root):
    python bench/estimate_check.py --data /work/shared/data/llm-built --out bench/results/estimate_check.md
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from pathlib import Path

from tmem.construct.estimate import estimate_build
from tmem.construct.options import BuildOptions
from tmem.scope import Scope
from tmem.store.sqlite import SQLiteStore


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data/llm-built"))
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    rows = [
        "| memory | turns | requests est. / real | input tokens est. / real | output tokens est. / real |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for db in sorted(args.data.glob("*.db")):
        space = db.name.removesuffix(".db")
        real = json.loads((args.data / f"{space}.cost.json").read_text())["total"]
        with tempfile.TemporaryDirectory() as tmp:
            copy = Path(tmp) / "tmem.db"
            shutil.copyfile(db, copy)
            store = SQLiteStore.open(copy)
            with store.transaction():  # only the copy: estimate its conversation as if nothing were built
                store.delete_items(Scope.local(space), [it.id for it in store.items(Scope.local(space))])
                store.delete_scenes(Scope.local(space), [s.id for s in store.scenes(Scope.local(space))])
                store.delete_topics(Scope.local(space), [t.id for t in store.topics(Scope.local(space))])
            est = estimate_build(store, Scope.local(space), BuildOptions(few_rounds=False)).total
            turns = len(store.turns(Scope.local(space)))
            store.close()
        rows.append(
            f"| {space} | {turns} | {est.requests} / {real['calls']} | {est.input_tokens:,} / {real['input_tokens']:,} "
            f"| {est.output_tokens:,} / {real['output_tokens']:,} |"
        )
    text = "\n".join(
        [
            "# Cost estimate vs the real LLM builds",
            "",
            "Command: `python bench/estimate_check.py --data /work/shared/data/llm-built "
            "--out bench/results/estimate_check.md`",
            "",
            *rows,
            "",
        ]
    )
    if args.out is not None:
        args.out.write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
