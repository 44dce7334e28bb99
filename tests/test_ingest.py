"""Ingest: readers against the real LoCoMo dev file, the native format, located errors, idempotent import."""

from __future__ import annotations

import copy
import json
import re
import tempfile
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.data import DEV_LOCOMO
from tmem.errors import InputError, NotFoundError
from tmem.ingest import (
    SpaceInput,
    dump_native,
    dump_native_lines,
    format_locomo,
    import_file,
    import_sessions,
    parse_timestamp,
    read_file,
)
from tmem.models import SessionInput, TurnInput
from tmem.scope import Scope
from tmem.store import open_store
from tmem.store.base import Store

LOCOMO = DEV_LOCOMO
if not LOCOMO.exists():  # the repository's own checkout layout: ../shared/data
    LOCOMO = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo10.dev.json"
SESSION_KEY = re.compile(r"^session_(\d+)$")


@pytest.fixture(scope="module")
def raw() -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = json.loads(LOCOMO.read_text(encoding="utf-8"))
    return data


def expected_counts(raw: list[dict[str, Any]]) -> dict[str, tuple[int, int]]:
    """Sessions and turns per sample, counted straight from the file (non-empty session_N lists)."""
    out = {}
    for sample in raw:
        conv = sample["conversation"]
        sessions = [v for k, v in conv.items() if SESSION_KEY.match(k) and v]
        out[sample["sample_id"]] = (len(sessions), sum(len(s) for s in sessions))
    return out


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    """An empty store on each backend (SQLite file, PostgreSQL database)."""
    s = open_store(store_url)
    yield s
    s.close()


def snapshot(store: Store) -> dict[str, Any]:
    """Everything ingest writes, for before/after comparisons."""
    return {
        s.name: (
            store.get_space(Scope.local(s.name)),
            store.sessions(Scope.local(s.name)),
            store.turns(Scope.local(s.name)),
        )
        for s in store.list_spaces()
    }


def write(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


# --------------------------------------------------------------------------------------------- timestamps


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1:56 pm on 8 May, 2023", datetime(2023, 5, 8, 13, 56)),
        ("12:09 am on 13 September, 2023", datetime(2023, 9, 13, 0, 9)),
        ("12:30 pm on 1 Jan 2024", datetime(2024, 1, 1, 12, 30)),
        ("10:37 AM on 27 June, 2023", datetime(2023, 6, 27, 10, 37)),
        ("2023-05-08", datetime(2023, 5, 8)),
        ("2023-05-08T13:56", datetime(2023, 5, 8, 13, 56)),
        ("2023-05-08 13:56:07.250", datetime(2023, 5, 8, 13, 56, 7, 250000)),
        ("2023-05-08T13:56:00Z", datetime(2023, 5, 8, 13, 56)),
        ("2023-05-08T01:30:00+02:00", datetime(2023, 5, 7, 23, 30)),
        ("2023-05-08T20:00:00-05:00", datetime(2023, 5, 9, 1, 0)),
    ],
)
def test_timestamps(text: str, expected: datetime) -> None:
    assert parse_timestamp(text) == expected


@pytest.mark.parametrize("text", ["", "yesterday", "13:10 pm on 8 May, 2023", "1:56 pm on 31 June, 2023", "8/5/23"])
def test_bad_timestamps_say_what_is_accepted(text: str) -> None:
    with pytest.raises(InputError, match="1:56 pm on 8 May, 2023"):
        parse_timestamp(text)


def test_locomo_spelling_round_trips() -> None:
    for text in ("1:56 pm on 8 May, 2023", "12:09 am on 13 September, 2023", "12:00 pm on 29 February, 2024"):
        assert format_locomo(parse_timestamp(text)) == text


# --------------------------------------------------------------------------------------------- LoCoMo


def test_read_locomo_dev_file(raw: list[dict[str, Any]]) -> None:
    spaces = read_file(LOCOMO)
    counts = expected_counts(raw)
    assert [s.name for s in spaces] == [sample["sample_id"] for sample in raw]
    assert {s.name: (len(s.sessions), sum(len(x.turns) for x in s.sessions)) for s in spaces} == counts
    for space, sample in zip(spaces, raw, strict=True):
        conv = sample["conversation"]
        assert space.speakers == [conv["speaker_a"], conv["speaker_b"]]
        numbers = [int(s.id.removeprefix("session_")) for s in space.sessions]
        assert numbers == sorted(numbers)
        for session in space.sessions:
            assert session.started_at == parse_timestamp(conv[f"{session.id}_date_time"])
            source = conv[session.id]
            assert [t.id for t in session.turns] == [t["dia_id"] for t in source]
            assert [t.caption for t in session.turns] == [t.get("blip_caption") for t in source]
            assert [(t.speaker, t.text) for t in session.turns] == [(t["speaker"], t["text"]) for t in source]
            assert all(t.time is None for t in session.turns)


def test_import_locomo_dev_file(store: Store, raw: list[dict[str, Any]]) -> None:
    report = import_file(store, LOCOMO)
    counts = expected_counts(raw)
    summaries = {s.name: s for s in store.list_spaces()}
    assert {n: (s.sessions, s.turns) for n, s in summaries.items()} == counts
    assert report.sessions_added == sum(c[0] for c in counts.values()) and report.sessions_skipped == 0
    assert report.turns_added == sum(c[1] for c in counts.values())
    sample = raw[0]
    turns = store.turns(Scope.local(sample["sample_id"]))
    assert all(re.fullmatch(r"D\d+:\d+", t.id) for t in turns)
    assert [t.seq for t in turns] == list(range(len(turns)))
    conv = sample["conversation"]
    captioned = {
        t["dia_id"]: t["blip_caption"] for s in conv.values() if isinstance(s, list) for t in s if "blip_caption" in t
    }
    assert captioned and {t.id: t.caption for t in turns if t.caption} == captioned
    sessions = store.sessions(Scope.local(sample["sample_id"]))
    assert [s.id for s in sessions] == [f"session_{n}" for n in range(1, len(sessions) + 1)]
    starts = {s.id: s.started_at for s in sessions}
    assert all(t.time == starts[t.session_id] for t in turns)
    assert store.get_space(Scope.local(sample["sample_id"])).speakers == [
        sample["conversation"]["speaker_a"],
        sample["conversation"]["speaker_b"],
    ]

    before = snapshot(store)
    again = import_file(store, LOCOMO)
    assert again.sessions_added == 0 and again.turns_added == 0
    assert again.sessions_skipped == report.sessions_added
    assert snapshot(store) == before


def test_later_sessions_append(store: Store, raw: list[dict[str, Any]], tmp_path: Path) -> None:
    sample = copy.deepcopy(raw[1])
    full_sessions, full_turns = expected_counts([sample])[sample["sample_id"]]
    early = copy.deepcopy(sample)
    for key in [k for k in early["conversation"] if (m := SESSION_KEY.match(k)) and int(m.group(1)) > 3]:
        del early["conversation"][key]
    import_file(store, write(tmp_path / "early.json", [early]))
    assert len(store.sessions(Scope.local(sample["sample_id"]))) == 3
    first_turns = store.turns(Scope.local(sample["sample_id"]))

    report = import_file(store, write(tmp_path / "full.json", [sample]))
    assert report.spaces[0].sessions_skipped == ["session_1", "session_2", "session_3"]
    assert len(report.spaces[0].sessions_added) == full_sessions - 3 and not report.spaces[0].created
    sessions = store.sessions(Scope.local(sample["sample_id"]))
    turns = store.turns(Scope.local(sample["sample_id"]))
    assert [s.seq for s in sessions] == list(range(full_sessions))
    assert [s.id for s in sessions] == [f"session_{n}" for n in range(1, full_sessions + 1)]
    assert len(turns) == full_turns and [t.seq for t in turns] == list(range(full_turns))
    assert turns[: len(first_turns)] == first_turns


def test_select_one_space_and_unknown_space(store: Store, raw: list[dict[str, Any]]) -> None:
    report = import_file(store, LOCOMO, space=raw[2]["sample_id"])
    assert [s.name for s in store.list_spaces()] == [raw[2]["sample_id"]]
    assert report.spaces[0].space == raw[2]["sample_id"]
    with pytest.raises(InputError, match=r"has no space 'conv-999'.*conv-26"):
        read_file(LOCOMO, space="conv-999")


def test_changed_session_is_a_conflict_and_nothing_is_written(
    store: Store, raw: list[dict[str, Any]], tmp_path: Path
) -> None:
    first, second = copy.deepcopy(raw[0]), copy.deepcopy(raw[1])
    import_file(store, write(tmp_path / "a.json", [first]))
    before = snapshot(store)
    first["conversation"]["session_2"][0]["text"] = "Something else entirely."
    # the second sample (a new space) comes first in the file: the conflict must roll it back too
    with pytest.raises(InputError, match=r"b\.json.*session 'session_2' is already stored with different content"):
        import_file(store, write(tmp_path / "b.json", [second, first]))
    assert snapshot(store) == before


def test_turn_id_reused_across_sessions(store: Store) -> None:
    s1 = SessionInput(id="s1", started_at=datetime(2024, 1, 1), turns=[TurnInput(id="t1", speaker="Ann", text="Hello")])
    s2 = SessionInput(id="s2", started_at=datetime(2024, 1, 2), turns=[TurnInput(id="t1", speaker="Ann", text="Again")])
    import_sessions(store, Scope.local("ann"), [s1])
    with pytest.raises(InputError, match="turn id 't1' of session 's2' is already used by session 's1'"):
        import_sessions(store, Scope.local("ann"), [s2])
    assert [s.id for s in store.sessions(Scope.local("ann"))] == ["s1"]


def test_import_sessions_appends_stitched_session(store: Store, raw: list[dict[str, Any]]) -> None:
    name = raw[0]["sample_id"]
    import_file(store, LOCOMO, space=name)
    n_sessions, n_turns = len(store.sessions(Scope.local(name))), len(store.turns(Scope.local(name)))
    cue = SessionInput(
        id="plus_cue_0",
        started_at=datetime(2023, 10, 1, 12, 0),
        turns=[
            TurnInput(id="plus_cue_0:1", speaker="Caroline", text="I've started learning the cello."),
            TurnInput(id="plus_cue_0:2", speaker="Melanie", text="That's wonderful, Caroline!"),
        ],
    )
    report = import_sessions(store, Scope.local(name), [cue])
    assert report.sessions_added == 1 and report.turns_added == 2
    sessions, turns = store.sessions(Scope.local(name)), store.turns(Scope.local(name))
    assert sessions[-1].id == "plus_cue_0" and sessions[-1].seq == n_sessions
    assert [t.seq for t in turns[-2:]] == [n_turns, n_turns + 1]
    assert turns[-1].time == datetime(2023, 10, 1, 12, 0)
    assert store.get_space(Scope.local(name)).speakers == ["Caroline", "Melanie"]
    assert import_sessions(store, Scope.local(name), [cue]).sessions_skipped == 1  # idempotent too


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (lambda c: c["session_4"][7].pop("speaker"), r"\$\[2\]\.conversation\.session_4\[7\]\.speaker: missing"),
        (lambda c: c["session_4"][7].update(speaker=7), r"session_4\[7\]\.speaker: expected a string.*number \(7\)"),
        (lambda c: c["session_4"][7].update(text=None), r"session_4\[7\]\.text: expected a string.*got null"),
        (lambda c: c.update(session_4_date_time="the 4th"), r"session_4_date_time: cannot read the date \"the 4th\""),
        (lambda c: c.pop("session_4_date_time"), r"session_4_date_time: missing"),
        (lambda c: c.update(session_4={"a": 1}), r"conversation\.session_4: expected a list"),
        (lambda c: c["session_4"].__setitem__(7, "hi"), r"session_4\[7\]: expected an object"),
        (lambda c: c["session_4"][7].update(dia_id="D4:1"), r"session_4\[7\]\.dia_id: dia_id 'D4:1' is already used"),
    ],
)
def test_malformed_locomo_names_file_and_path(
    bad: Any, message: str, raw: list[dict[str, Any]], tmp_path: Path
) -> None:
    data = copy.deepcopy(raw[:3])
    bad(data[2]["conversation"])
    path = write(tmp_path / "bad.json", data)
    with pytest.raises(InputError, match=re.escape(str(path)) + ": .*" + message):
        read_file(path)


def test_broken_json_gives_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('[\n  {"sample_id": "x",\n   "conversation": {"speaker_a": "A" "speaker_b": "B"}}\n]\n')
    with pytest.raises(InputError, match=r"broken\.json: broken JSON at line 3, column 38"):
        read_file(path)


def test_missing_and_unrecognised_files(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match="no such file"):
        read_file(tmp_path / "absent.json")
    with pytest.raises(InputError, match="cannot tell the format"):
        read_file(write(tmp_path / "odd.json", {"hello": "world"}))
    with pytest.raises(InputError, match="contains no samples"):
        read_file(write(tmp_path / "empty.json", []), "locomo")
    with pytest.raises(InputError, match=r"looks like LoCoMo.*--format locomo"):
        read_file(LOCOMO, "native")
    with pytest.raises(InputError, match="looks like tmem's native format"):
        read_file(write(tmp_path / "native.json", NATIVE_EXAMPLE), "locomo")


# --------------------------------------------------------------------------------------------- native format

NATIVE_EXAMPLE = {
    "space": "alice",
    "speakers": ["Alice", "Assistant"],
    "sessions": [
        {
            "id": "2024-03-02",
            "started_at": "2024-03-02T18:30:00+01:00",
            "turns": [
                {"speaker": "Alice", "text": "I booked the flights to Lisbon for my sister's wedding."},
                {"speaker": "Assistant", "text": "Congratulations! When is it?", "time": "2024-03-02T18:31:10+01:00"},
                {"id": "photo-1", "speaker": "Alice", "text": "Here is the venue.", "caption": "a chapel by the sea"},
            ],
        },
        {"started_at": "10:05 am on 9 March, 2024", "turns": [{"speaker": "Alice", "text": "Dress bought!"}]},
    ],
}


def test_native_json_example(tmp_path: Path) -> None:
    [space] = read_file(write(tmp_path / "alice.json", NATIVE_EXAMPLE))
    assert space.name == "alice" and space.speakers == ["Alice", "Assistant"]
    first, second = space.sessions
    assert first.started_at == datetime(2024, 3, 2, 17, 30)  # +01:00 -> UTC, naive
    assert [t.id for t in first.turns] == ["2024-03-02:1", "2024-03-02:2", "photo-1"]
    assert first.turns[1].time == datetime(2024, 3, 2, 17, 31, 10) and first.turns[0].time is None
    assert first.turns[2].caption == "a chapel by the sea"
    assert second.id == "session_20240309T100500" and second.turns[0].id == "session_20240309T100500:1"


def test_native_jsonl_and_default_space(store: Store, tmp_path: Path) -> None:
    lines = [
        {"started_at": "2024-01-05T09:00:00", "turns": [{"speaker": "Bo", "text": "Morning."}]},
        {"id": "s2", "started_at": "2024-01-06T09:00:00", "turns": [{"speaker": "Cy", "text": "Hi Bo."}]},
    ]
    path = tmp_path / "bo.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n\n")
    with pytest.raises(InputError, match=r"bo\.jsonl: line 1: \$\.space: missing; add \"space\".*--space"):
        read_file(path)
    report = import_file(store, path, space="bo")
    assert report.spaces[0].sessions_added == ["session_20240105T090000", "s2"]
    assert store.get_space(Scope.local("bo")).speakers == ["Bo", "Cy"]
    assert [t.id for t in store.turns(Scope.local("bo"))] == ["session_20240105T090000:1", "s2:1"]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({**NATIVE_EXAMPLE, "session": []}, r"\$\.session: unknown field"),
        ({"space": "a", "sessions": []}, r"\$\.sessions: is empty"),
        ({"space": "a", "sessions": [{"started_at": "2024-01-01", "turns": []}]}, r"sessions\[0\]\.turns: is empty"),
        ({"space": "a", "sessions": [{"turns": [{"speaker": "A", "text": "x"}]}]}, r"sessions\[0\]\.started_at: miss"),
        (
            {"space": "a", "sessions": [{"started_at": "2024-01-01", "turns": [{"speaker": " ", "text": "x"}]}]},
            r"sessions\[0\]\.turns\[0\]\.speaker: is empty",
        ),
        (
            {"space": "a", "sessions": [{"started_at": "2024-01-01", "turns": [{"speaker": "A", "time": "noon"}]}]},
            r"turns\[0\]\.text: missing",
        ),
        (
            {
                "space": "a",
                "sessions": [{"started_at": "2024-01-01", "turns": [{"speaker": "A", "text": "x", "time": "9"}]}],
            },
            r"turns\[0\]\.time: cannot read the date \"9\"",
        ),
        (
            {"space": "a", "sessions": [{"started_at": "2024-01-01", "turns": [{"speaker": "A", "text": "x"}]}] * 2},
            r"sessions\[1\]: session id 'session_20240101T000000' of space 'a' is already used at",
        ),
    ],
)
def test_malformed_native(data: Any, message: str, tmp_path: Path) -> None:
    with pytest.raises(InputError, match=message):
        read_file(write(tmp_path / "n.json", data))


# A space as a file could hold it: names and ids non-blank, ids unique within the space.
# Names and ids are printable (tmem.ingest.limits): no control, format, separator or unassigned characters but " ".
_printable = st.characters(exclude_categories=("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs")) | st.just(" ")
_name = st.text(_printable, min_size=1, max_size=12).filter(lambda s: s.strip() != "")
_time = st.datetimes(min_value=datetime(1900, 1, 1), max_value=datetime(2100, 12, 31))


_NO_NUL = st.characters(
    exclude_characters="\x00", exclude_categories=("Cs",)
)  # a NUL is refused by every reader (no backend stores it)


@st.composite
def _spaces(draw: st.DrawFn) -> list[SpaceInput]:
    names = draw(st.lists(_name, min_size=1, max_size=3, unique=True))
    spaces = []
    for name in names:
        session_ids = draw(st.lists(_name, min_size=1, max_size=3, unique=True))
        turn_ids = iter(draw(st.lists(_name, min_size=sum(1 for _ in session_ids) * 3, max_size=12, unique=True)))
        sessions = []
        for session_id in session_ids:
            turns = [
                TurnInput(
                    id=next(turn_ids),
                    speaker=draw(_name),
                    text=draw(st.text(_NO_NUL, max_size=40)),
                    time=draw(st.none() | _time),
                    caption=draw(st.none() | st.text(_NO_NUL, max_size=20)),
                )
                for _ in range(draw(st.integers(1, 3)))
            ]
            sessions.append(SessionInput(id=session_id, started_at=draw(_time), turns=turns))
        spaces.append(SpaceInput(name=name, speakers=draw(st.lists(_name, max_size=3, unique=True)), sessions=sessions))
    return spaces


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_spaces())
def test_native_round_trip_is_lossless(spaces: list[SpaceInput]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        as_json = Path(tmp) / "spaces.json"
        as_json.write_text(dump_native(spaces), encoding="utf-8")
        assert read_file(as_json) == spaces
        as_lines = Path(tmp) / "spaces.jsonl"
        as_lines.write_text(dump_native_lines(spaces), encoding="utf-8")
        assert read_file(as_lines) == spaces
        assert read_file(as_json, "native", space=spaces[-1].name) == [spaces[-1]]
