"""LoCoMo-Plus probes and how they are stitched into LoCoMo conversations (../shared/DESIGN.md).

Rule: probe *i* goes into conversation *i mod N* (N conversations in the LoCoMo file, in file order); the cue
dialogue's ``A``/``B`` lines are said by that conversation's ``speaker_a``/``speaker_b``; the trigger query is asked
7 days after the conversation's last session; the cue is inserted as its own session dated query time minus the
probe's gap (week = 7 days, month = 30, year = 365; number words one..twelve or digits, "a"/"an" = 1; a gap that
does not parse, such as "several months later", is 0 days and is reported).

Two stitching modes (docs/evaluation.md): ``shared`` (default) puts every probe of a conversation into one stitched
space, so 249 probes cost 7 builds; ``per-probe`` makes one space per probe, exactly the official setting, at one
build per probe. Either way each probe keeps its own cue turns and query time.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from tmem.errors import InputError
from tmem.eval.locomo_data import read_json_list
from tmem.ingest.types import SpaceInput
from tmem.models import SessionInput, TurnInput

QUERY_DELAY = timedelta(days=7)
UNIT_DAYS = {"day": 1, "week": 7, "month": 30, "year": 365}
NUMBER_WORDS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
}  # fmt: skip
# A count preceded by a digit and a point ("1.5 years") is a decimal, not "5 years": it does not parse.
_GAP = re.compile(r"(?<![\d.])\b(?P<n>\d+|[a-z]+)\s+(?P<unit>day|week|month|year)s?\b", re.IGNORECASE)
StitchMode = Literal["shared", "per-probe"]


class PlusProbe(BaseModel):
    model_config = ConfigDict(frozen=True)

    index: int = Field(description="Position in the LoCoMo-Plus file (stable key).")
    relation_type: str
    cue_dialogue: str
    trigger_query: str
    time_gap: str


class GapParse(BaseModel):
    model_config = ConfigDict(frozen=True)

    days: int
    parsed: bool = Field(description="False when the text did not parse and 0 days was used.")


class StitchedProbe(BaseModel):
    model_config = ConfigDict(frozen=True)

    probe: PlusProbe
    conversation: str = Field(description="The LoCoMo sample the probe was stitched into.")
    space: str
    cue_session_id: str
    cue_turn_ids: list[str]
    cue_time: datetime
    cue: str = Field(description="The cue dialogue as the speakers said it ('Name: text' lines), for the judge.")
    query: str = Field(description="The trigger text without its 'A:' prefix.")
    query_speaker: str
    query_time: datetime
    gap: GapParse

    @property
    def key(self) -> str:
        return f"plus#{self.probe.index}"


class StitchedSpace(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    conversation: str
    speakers: list[str]
    sessions: list[SessionInput]
    probes: list[StitchedProbe]


def parse_gap_days(text: str) -> GapParse:
    """Days in a LoCoMo-Plus ``time_gap`` such as "about three months later" (0 and parsed=False if unreadable)."""
    for match in _GAP.finditer(text):
        word = match.group("n").lower()
        count = int(word) if word.isdigit() else NUMBER_WORDS.get(word)
        if count is not None:
            return GapParse(days=count * UNIT_DAYS[match.group("unit").lower()], parsed=True)
    return GapParse(days=0, parsed=False)


def _split_line(line: str, where: str) -> tuple[str, str]:
    role, sep, text = line.partition(":")
    role = role.strip().upper()
    if not sep or role not in ("A", "B"):
        raise InputError(f"{where}: expected lines 'A: ...' or 'B: ...', got {line[:60]!r}")
    return role, text.strip()


def load_probes(path: Path) -> list[PlusProbe]:
    data = read_json_list(path, benchmark="LoCoMo-Plus", example="locomo_plus.json", entries="probes")
    probes: list[PlusProbe] = []
    for i, raw in enumerate(data):
        if not isinstance(raw, dict):
            raise InputError(f"{path}: $[{i}] must be an object")
        missing = [k for k in ("cue_dialogue", "trigger_query", "time_gap") if not isinstance(raw.get(k), str)]
        if missing:
            raise InputError(f"{path}: $[{i}] lacks {', '.join(missing)} (strings); is this a LoCoMo-Plus file?")
        probe = PlusProbe(
            index=i,
            relation_type=str(raw.get("relation_type", "")),
            cue_dialogue=raw["cue_dialogue"],
            trigger_query=raw["trigger_query"],
            time_gap=raw["time_gap"],
        )
        for line in _cue_lines(probe):
            _split_line(line, f"{path}: $[{i}].cue_dialogue")
        _split_line(probe.trigger_query, f"{path}: $[{i}].trigger_query")
        probes.append(probe)
    return probes


def _cue_lines(probe: PlusProbe) -> list[str]:
    return [line for line in probe.cue_dialogue.splitlines() if line.strip()]


def _speaker(role: str, space: SpaceInput) -> str:
    if len(space.speakers) < 2:
        raise InputError(f"conversation {space.name} declares fewer than two speakers; cannot map A/B")
    return space.speakers[0] if role == "A" else space.speakers[1]


def _stitch_probe(probe: PlusProbe, conv: SpaceInput, space_name: str) -> tuple[StitchedProbe, SessionInput]:
    last = max(s.started_at for s in conv.sessions)
    query_time = last + QUERY_DELAY
    gap = parse_gap_days(probe.time_gap)
    cue_time = query_time - timedelta(days=gap.days)
    session_id = f"plus_{probe.index}"
    turns: list[TurnInput] = []
    for k, line in enumerate(_cue_lines(probe), start=1):
        role, text = _split_line(line, f"probe {probe.index} cue_dialogue")
        turns.append(TurnInput(id=f"P{probe.index}:{k}", speaker=_speaker(role, conv), text=text, time=cue_time))
    role, query = _split_line(probe.trigger_query, f"probe {probe.index} trigger_query")
    stitched = StitchedProbe(
        probe=probe,
        conversation=conv.name,
        space=space_name,
        cue_session_id=session_id,
        cue_turn_ids=[t.id for t in turns],
        cue_time=cue_time,
        cue="\n".join(f"{t.speaker}: {t.text}" for t in turns),
        query=query,
        query_speaker=_speaker(role, conv),
        query_time=query_time,
        gap=gap,
    )
    return stitched, SessionInput(id=session_id, started_at=cue_time, turns=turns)


def _merge(conv_sessions: Sequence[SessionInput], cues: Sequence[SessionInput]) -> list[SessionInput]:
    """Conversation sessions keep their order; each cue goes after every session dated at or before it."""
    out = list(conv_sessions)
    for cue in sorted(cues, key=lambda s: s.started_at):  # stable: equal dates keep probe order
        pos = len(out)
        while pos > 0 and out[pos - 1].started_at > cue.started_at:
            pos -= 1
        out.insert(pos, cue)
    return out


def stitch(
    conversations: Sequence[SpaceInput],
    probes: Sequence[PlusProbe],
    *,
    mode: StitchMode = "shared",
    prefix: str = "plus-",
) -> list[StitchedSpace]:
    """Stitch every probe into conversation ``index mod N``; one space per conversation or per probe."""
    if not conversations:
        raise InputError("stitching LoCoMo-Plus needs at least one LoCoMo conversation (--locomo FILE)")
    n = len(conversations)
    groups: dict[str, list[PlusProbe]] = {}
    for probe in probes:
        conv = conversations[probe.index % n]
        name = f"{prefix}{conv.name}" if mode == "shared" else f"{prefix}{conv.name}-p{probe.index}"
        groups.setdefault(name, []).append(probe)
    out: list[StitchedSpace] = []
    for name, group in groups.items():
        conv = conversations[group[0].index % n]
        pairs = [_stitch_probe(p, conv, name) for p in group]
        out.append(
            StitchedSpace(
                name=name,
                conversation=conv.name,
                speakers=list(conv.speakers),
                sessions=_merge(conv.sessions, [s for _, s in pairs]),
                probes=[p for p, _ in pairs],
            )
        )
    return out


class StitchSummary(BaseModel):
    model_config = ConfigDict(frozen=True)

    probes: int
    spaces: int
    relations: dict[str, int]
    unparsed_gaps: list[str] = Field(description="time_gap texts that did not parse (their cue is dated 0 days back).")


def summarise(spaces: Sequence[StitchedSpace]) -> StitchSummary:
    """What the report prints about the stitching: probes per relation type and gaps that did not parse."""
    probes = [p for s in spaces for p in s.probes]
    relations: dict[str, int] = {}
    for p in probes:
        relations[p.probe.relation_type] = relations.get(p.probe.relation_type, 0) + 1
    unparsed = sorted({p.probe.time_gap for p in probes if not p.gap.parsed})
    return StitchSummary(probes=len(probes), spaces=len(spaces), relations=relations, unparsed_gaps=unparsed)
