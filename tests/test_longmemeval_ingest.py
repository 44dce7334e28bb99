"""LongMemEval: the generator writes the official format; ``tmem import`` reads it into one space per instance."""

from __future__ import annotations

import copy
import json
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tmem.errors import InputError
from tmem.eval.longmemeval.synth import ABSTENTION, DATE_FORMAT, QUESTION_TYPES, generate, write_file
from tmem.ingest import import_file, read_file
from tmem.ingest.longmemeval import STATE_KEY, parse_date
from tmem.ingest.source import Loc
from tmem.scope import Scope
from tmem.store import open_store

FIELDS = {
    "question_id",
    "question_type",
    "question",
    "answer",
    "question_date",
    "haystack_session_ids",
    "haystack_dates",
    "haystack_sessions",
    "answer_session_ids",
}


def _dates(inst: dict[str, Any]) -> list[datetime]:
    return [datetime.strptime(d, DATE_FORMAT) for d in inst["haystack_dates"]]


@pytest.mark.parametrize("kind", ["s", "m", "oracle"])
def test_generated_files_follow_the_official_format(kind: str) -> None:
    sessions = {"s": 20, "m": 60, "oracle": None}[kind]
    data = generate(kind, instances=14, sessions=sessions, seed=5)  # type: ignore[arg-type]
    assert len(data) == 14
    types = Counter(x["question_type"] for x in data)
    assert set(types) == set(QUESTION_TYPES)
    assert sum(x["question_id"].endswith("_abs") for x in data) == 2
    for inst in data:
        assert set(inst) == FIELDS
        n = len(inst["haystack_sessions"])
        assert len(inst["haystack_session_ids"]) == len(inst["haystack_dates"]) == n
        assert set(inst["answer_session_ids"]) <= set(inst["haystack_session_ids"])
        assert all("answer" in sid for sid in inst["answer_session_ids"])
        assert not any("answer" in sid for sid in set(inst["haystack_session_ids"]) - set(inst["answer_session_ids"]))
        assert isinstance(inst["answer"], str | int)
        assert max(_dates(inst)) < datetime.strptime(inst["question_date"], DATE_FORMAT)
        if kind == "oracle":
            assert inst["haystack_session_ids"] == [s for s in inst["haystack_session_ids"] if "answer" in s]
        else:
            assert n == sessions
            assert _dates(inst) == sorted(_dates(inst))
        for sid, body in zip(inst["haystack_session_ids"], inst["haystack_sessions"], strict=True):
            assert body and all(t["role"] in ("user", "assistant") and t["content"] for t in body)
            labels = ["has_answer" in t for t in body]
            assert all(labels) if sid in inst["answer_session_ids"] else not any(labels)
        flagged = [t for s in inst["haystack_sessions"] for t in s if t.get("has_answer")]
        assert flagged, inst["question_id"]
        if inst["question_type"] == "single-session-assistant":
            assert all(t["role"] == "assistant" for t in flagged)


def test_generation_is_deterministic_and_shares_fillers() -> None:
    a = generate("s", instances=8, sessions=30, seed=11)
    assert a == generate("s", instances=8, sessions=30, seed=11)
    assert a != generate("s", instances=8, sessions=30, seed=12)
    uses = Counter(sid for inst in a for sid in inst["haystack_session_ids"] if "answer" not in sid)
    assert max(uses.values()) > 1  # filler sessions recur across instances, as in the official files
    m = generate("m", instances=2, seed=1)
    assert [len(x["haystack_sessions"]) for x in m] == [500, 500]


def test_types_and_errors() -> None:
    only = generate("oracle", instances=4, types=["knowledge-update", ABSTENTION], seed=2)
    assert only[0]["question_type"] == "knowledge-update"
    assert only[1]["question_id"].endswith("_abs") and only[3]["question_id"].endswith("_abs")
    with pytest.raises(InputError, match="Unknown question types"):
        generate("s", types=["single-hop"])


def test_import_makes_one_space_per_instance_with_hidden_metadata(tmp_path: Path) -> None:
    data = generate("s", instances=7, sessions=10, seed=3)
    path = write_file(tmp_path / "longmemeval_s.json", data)
    store = open_store(f"sqlite:///{tmp_path / 'm.db'}")
    report = import_file(store, path)
    assert [s.space for s in report.spaces] == [x["question_id"] for x in data]
    for inst in data:
        scope = Scope.local(inst["question_id"])
        sessions = store.sessions(scope)
        assert [s.id for s in sessions] == inst["haystack_session_ids"]
        assert [s.started_at.strftime(DATE_FORMAT) for s in sessions] == inst["haystack_dates"]
        turns = store.turns(scope)
        want = [
            (f"{sid}_{n}", t["role"], t["content"])
            for sid, body in zip(inst["haystack_session_ids"], inst["haystack_sessions"], strict=True)
            for n, t in enumerate(body, start=1)
        ]
        assert [(t.id, t.speaker, t.text) for t in turns] == want
        meta = json.loads(store.get_state(scope, STATE_KEY) or "{}")
        assert meta["question"] == inst["question"] and meta["answer"] == inst["answer"]
        assert meta["answer_session_ids"] == inst["answer_session_ids"]
        assert meta["abstention"] == inst["question_id"].endswith("_abs")
        flagged = [
            f"{sid}_{n}"
            for sid, body in zip(inst["haystack_session_ids"], inst["haystack_sessions"], strict=True)
            for n, t in enumerate(body, start=1)
            if t.get("has_answer")
        ]
        assert meta["evidence_turn_ids"] == flagged
        assert not any(inst["question"] == t.text for t in turns)  # the question is metadata, never a turn
    again = import_file(store, path)
    assert again.sessions_added == 0 and again.sessions_skipped == 70
    store.close()


def _broken(data: list[dict[str, Any]], tmp_path: Path, change: Any) -> Path:
    bad = copy.deepcopy(data)
    change(bad)
    return write_file(tmp_path / "bad.json", bad)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d[1].pop("question_date"), r"\$\[1\]\.question_date: missing"),
        (lambda d: d[0]["haystack_dates"].__setitem__(2, "May 5th"), r"haystack_dates\[2\]: cannot read the date"),
        (lambda d: d[0]["haystack_dates"].__setitem__(0, "2023/02/30 (Thu) 10:00"), "not a real date"),
        (lambda d: d[0]["haystack_dates"].pop(), "must have one entry per session"),
        (lambda d: d[0]["haystack_sessions"][0][0].__setitem__("role", "system"), "'user' or 'assistant'"),
        (lambda d: d[0]["haystack_sessions"][0][0].__setitem__("has_answer", "yes"), "expected true or false"),
        (lambda d: d[2].__setitem__("question_id", d[0]["question_id"]), "already used"),
        (lambda d: d[0].__setitem__("answer", None), "string or a number"),
    ],
)
def test_bad_files_say_where_and_what(tmp_path: Path, change: Any, message: str) -> None:
    data = generate("s", instances=3, sessions=5, seed=4)
    with pytest.raises(InputError, match=message):
        read_file(_broken(data, tmp_path, change))


def test_a_session_repeated_in_one_history_is_kept_at_both_dates(tmp_path: Path) -> None:
    data = generate("s", instances=1, sessions=4, seed=2)
    inst = data[0]
    inst["haystack_session_ids"].append(inst["haystack_session_ids"][0])
    inst["haystack_sessions"].append(inst["haystack_sessions"][0])
    inst["haystack_dates"].append(inst["haystack_dates"][-1])
    (space,) = read_file(write_file(tmp_path / "dup.json", data))
    first = inst["haystack_session_ids"][0]
    assert [s.id for s in space.sessions] == [*inst["haystack_session_ids"][:-1], f"{first}#2"]
    assert [t.text for t in space.sessions[-1].turns] == [t.text for t in space.sessions[0].turns]
    assert space.sessions[-1].turns[0].id == f"{first}#2_1"


def test_format_is_recognised_and_checked(tmp_path: Path) -> None:
    path = write_file(tmp_path / "o.json", generate("oracle", instances=2, seed=1))
    assert len(read_file(path, "longmemeval")) == len(read_file(path)) == 2
    native = tmp_path / "n.json"
    native.write_text(json.dumps({"space": "a", "sessions": []}), encoding="utf-8")
    with pytest.raises(InputError, match="not LongMemEval"):
        read_file(native, "longmemeval")


@given(st.datetimes(min_value=datetime(1900, 1, 1), max_value=datetime(2999, 12, 31)))
def test_official_dates_read_back(moment: datetime) -> None:
    moment = moment.replace(second=0, microsecond=0)
    assert parse_date(moment.strftime(DATE_FORMAT), Loc("f"), "a date") == moment
