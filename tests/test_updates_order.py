"""The current-value-first order does not depend on Python's string hashing: a statement on two slots (a move for a
new job) is placed by the same group in every process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = """
from datetime import datetime
from tmem.answer.budget import _Unit
from tmem.answer.updates import current_first
from tmem.models import Turn
from tmem.retrieve.types import Route

texts = [
    (3, "I moved to Lyon because I got a new job at a bakery"),
    (1, "I live in Paris now"),
    (2, "I work at the bank"),
]
units = []
for n, (day, text) in enumerate(texts):
    turn = Turn(id=f"D{n}", session_id=f"s{n}", seq=n, speaker="Dana", text=text, time=datetime(2024, 1, day))
    units.append(_Unit("turn", turn.id, 1.0, [Route(name="turn.dense", rank=n + 1, score=0.5)], turns=[turn]))
print([(u.id, u.fact) for u in current_first(units)])
"""


def test_the_order_is_the_same_under_every_hash_seed() -> None:
    root = Path(__file__).resolve().parents[1]
    outputs = set()
    for seed in range(6):
        env = {**os.environ, "PYTHONHASHSEED": str(seed), "PYTHONPATH": str(root / "src")}
        done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, check=True)
        outputs.add(done.stdout)
    assert len(outputs) == 1, outputs
