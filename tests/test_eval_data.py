"""LoCoMo questions and evidence ids, and LoCoMo-Plus stitching, against the rule and the real dev files."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from tmem.errors import InputError, NotFoundError
from tmem.eval.locomo_data import load_questions, normalise_evidence
from tmem.eval.plus_data import PlusProbe, load_probes, parse_gap_days, stitch, summarise
from tmem.ingest.reader import read_file
from tmem.ingest.types import SpaceInput
from tmem.models import SessionInput, TurnInput

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
LOCOMO = DATA / "locomo10.dev.json"
PLUS = DATA / "locomo_plus.dev.json"
needs_data = pytest.mark.skipif(not LOCOMO.exists(), reason="dev data not present")


# ------------------------------------------------------------------------------------------------ LoCoMo evidence


def test_evidence_forms_seen_in_the_data() -> None:
    known = {"D8:6", "D9:17", "D11:26", "D1:3"}
    ev = normalise_evidence(["D8:6; D9:17", "D:11:26", "D", "D10:0", "D1:3", "D1:3"], known)
    assert ev.turn_ids == ["D8:6", "D9:17", "D11:26", "D1:3"]
    problems = {(i.raw, i.problem) for i in ev.issues}
    assert problems == {
        ("D8:6; D9:17", "normalised"),
        ("D:11:26", "normalised"),
        ("D", "unparsable"),
        ("D10:0", "unknown turn"),
    }
    assert normalise_evidence(None, known).issues[0].problem == "missing"
    assert normalise_evidence([], known).issues[0].problem == "missing"


@needs_data
def test_load_questions_matches_the_file() -> None:
    raw = json.loads(LOCOMO.read_text())
    expected = sum(1 for s in raw for q in s["qa"] if q["category"] in (1, 2, 3, 4))
    questions = load_questions(LOCOMO)
    assert len(questions) == expected
    assert {q.category for q in questions} == {1, 2, 3, 4}
    assert len({q.key for q in questions}) == len(questions)
    assert all(isinstance(q.answer, str) for q in questions)  # numeric answers (e.g. 2022) become text
    one = load_questions(LOCOMO, conversations=["conv-30"])
    assert {q.space for q in one} == {"conv-30"}
    with pytest.raises(NotFoundError, match="conv-99"):
        load_questions(LOCOMO, conversations=["conv-99"])


@needs_data
def test_every_malformed_evidence_in_the_dev_file_is_handled() -> None:
    spaces = {s.name: {t.id for x in s.sessions for t in x.turns} for s in read_file(LOCOMO, "locomo")}
    issues = []
    for q in load_questions(LOCOMO):
        ev = normalise_evidence(q.evidence_raw, spaces[q.space])
        assert all(t in spaces[q.space] for t in ev.turn_ids)
        issues += [(q.space, i.raw, i.problem) for i in ev.issues]
    assert ("conv-26", "D8:6; D9:17", "normalised") in issues
    assert ("conv-43", "D:11:26", "normalised") in issues
    assert ("conv-42", "D", "unparsable") in issues


def test_bad_locomo_file_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('[{"sample_id": "x", "qa": [{"question": "q", "category": "two"}]}]')
    with pytest.raises(InputError, match=r"\$\[0\]\.qa\[0\]\.category"):
        load_questions(bad)
    bad.write_text("{not json")
    with pytest.raises(InputError, match="not valid JSON"):
        load_questions(bad)
    with pytest.raises(NotFoundError, match=r"pass the LoCoMo JSON \(e\.g\. locomo10\.json\) with --data"):
        load_questions(tmp_path / "missing.json")


def test_bad_plus_file_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "plus.json"
    bad.write_text('{"cue_dialogue": "A: hi"}')
    with pytest.raises(InputError, match=r"\$ must be a list of LoCoMo-Plus probes"):
        load_probes(bad)
    bad.write_text("[{oops")
    with pytest.raises(InputError, match="not valid JSON"):
        load_probes(bad)
    with pytest.raises(NotFoundError, match=r"pass the LoCoMo-Plus JSON \(e\.g\. locomo_plus\.json\) with --data"):
        load_probes(tmp_path / "missing.json")


# ------------------------------------------------------------------------------------------------ LoCoMo-Plus


@pytest.mark.parametrize(
    ("text", "days", "parsed"),
    [
        ("one week later", 7, True),
        ("about three months later", 90, True),
        ("six weeks later", 42, True),
        ("a year after", 365, True),
        ("an hour? no: a month later", 30, True),
        ("twelve months later", 360, True),
        ("two months after the challenge ended", 60, True),
        ("10 days later", 10, True),
        ("1.5 years later", 0, False),  # not "5 years": a decimal count is not one of the rule's numbers
        ("several months later", 0, False),
        ("a few weeks later", 0, False),
        ("several years later", 0, False),
        ("later", 0, False),
    ],
)
def test_gap_parsing(text: str, days: int, parsed: bool) -> None:
    gap = parse_gap_days(text)
    assert (gap.days, gap.parsed) == (days, parsed)


def _conv(name: str, a: str, b: str, dates: list[datetime]) -> SpaceInput:
    sessions = [
        SessionInput(
            id=f"session_{n}",
            started_at=d,
            turns=[TurnInput(id=f"D{n}:1", speaker=a, text="hi"), TurnInput(id=f"D{n}:2", speaker=b, text="hey")],
        )
        for n, d in enumerate(dates, start=1)
    ]
    return SpaceInput(name=name, speakers=[a, b], sessions=sessions)


def _probe(i: int, gap: str, cue: str = "A: I broke my wrist skiing.\nB: Ouch, take care.") -> PlusProbe:
    return PlusProbe(
        index=i, relation_type="causal", cue_dialogue=cue, trigger_query="A: Typing is slow.", time_gap=gap
    )


def test_stitching_follows_the_rule() -> None:
    c0 = _conv("c0", "Ann", "Bob", [datetime(2023, 1, 1), datetime(2023, 3, 1), datetime(2023, 6, 1)])
    c1 = _conv("c1", "Cat", "Dan", [datetime(2022, 5, 1)])
    probes = [_probe(0, "three months later"), _probe(1, "one week later"), _probe(2, "several months later")]
    spaces = stitch([c0, c1], probes)
    assert [s.name for s in spaces] == ["plus-c0", "plus-c1"]  # probe i -> conversation i mod 2
    s0 = spaces[0]
    assert [p.probe.index for p in s0.probes] == [0, 2]
    p0, p2 = s0.probes
    query_time = datetime(2023, 6, 1) + timedelta(days=7)  # 7 days after the last session
    assert p0.query_time == query_time == p2.query_time
    assert p0.cue_time == query_time - timedelta(days=90)  # 2023-03-10
    assert p2.cue_time == query_time and not p2.gap.parsed  # unparsable gap = 0 days
    # speakers: A -> speaker_a, B -> speaker_b; the query keeps its speaker and loses its prefix
    cue0 = next(s for s in s0.sessions if s.id == "plus_0")
    assert [(t.speaker, t.text) for t in cue0.turns] == [
        ("Ann", "I broke my wrist skiing."),
        ("Bob", "Ouch, take care."),
    ]
    assert all(t.time == p0.cue_time for t in cue0.turns) and cue0.started_at == p0.cue_time
    assert p0.query == "Typing is slow." and p0.query_speaker == "Ann"
    assert p0.cue_turn_ids == ["P0:1", "P0:2"]
    # placement: each cue is its own session, after every session dated at or before it
    assert [s.id for s in s0.sessions] == ["session_1", "session_2", "plus_0", "session_3", "plus_2"]
    s1 = spaces[1]
    assert s1.probes[0].query_speaker == "Cat"
    assert [s.id for s in s1.sessions] == ["session_1", "plus_1"]
    assert s1.probes[0].cue_time == datetime(2022, 5, 1)  # one week before a query one week after the session


def test_the_judges_cue_names_the_speakers_as_the_stitched_turns_do() -> None:
    # load_probes accepts "a:" and indented lines (roles are stripped and upper-cased); the cue shown to the judge
    # must map them exactly as the stitched turns do.
    c0 = _conv("c0", "Ann", "Bob", [datetime(2023, 1, 1)])
    probe = _probe(0, "one week later", cue="  B: Did you ski?\na: Yes, and I broke my wrist.")
    (space,) = stitch([c0], [probe])
    (stitched,) = space.probes
    cue = next(s for s in space.sessions if s.id == "plus_0")
    assert [t.speaker for t in cue.turns] == ["Bob", "Ann"]
    assert stitched.cue == "Bob: Did you ski?\nAnn: Yes, and I broke my wrist."


def test_per_probe_mode_makes_one_space_per_probe() -> None:
    c0 = _conv("c0", "Ann", "Bob", [datetime(2023, 1, 1)])
    spaces = stitch([c0], [_probe(0, "one week later"), _probe(1, "a month later")], mode="per-probe")
    assert [s.name for s in spaces] == ["plus-c0-p0", "plus-c0-p1"]
    assert [len(s.sessions) for s in spaces] == [2, 2]
    summary = summarise(spaces)
    assert summary.probes == 2 and summary.spaces == 2 and summary.unparsed_gaps == []


def test_malformed_cue_line_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "plus.json"
    path.write_text(json.dumps([{"cue_dialogue": "Someone: hi", "trigger_query": "A: x", "time_gap": "a week"}]))
    with pytest.raises(InputError, match=r"\$\[0\]\.cue_dialogue"):
        load_probes(path)


@needs_data
def test_dev_split_stitches_into_seven_conversations() -> None:
    conversations = read_file(LOCOMO, "locomo")
    probes = load_probes(PLUS)
    spaces = stitch(conversations, probes)
    summary = summarise(spaces)
    assert summary.probes == len(probes) == 249 and summary.spaces == 7
    assert "several months later" in summary.unparsed_gaps
    for space in spaces:
        ids = [t.id for s in space.sessions for t in s.turns]
        assert len(ids) == len(set(ids))
        for p in space.probes:
            assert p.conversation == conversations[p.probe.index % 7].name
