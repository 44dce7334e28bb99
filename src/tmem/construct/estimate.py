"""What an LLM build of a space will cost, estimated before it starts (``tmem llm cost SPACE --estimate``).

Requests follow from the build plan and the group sizes in :class:`BuildOptions` exactly as the stages form them;
what the model will return (how many scenes, topics and items) is not known in advance, so the estimate uses rates
measured on the two memories a capable model built through the batch protocol (``../shared/data/llm-built``, see
docs/construction.md): scenes per turn, topic links per scene, items per scene and output tokens per node. Prompt
tokens are the instruction text of each template (counted as the stub server counts them, words and punctuation)
times the requests, plus the data each request shows. An estimate is an order of magnitude for planning a batch
build, not a bill: docs/construction.md records how far it was from the measured builds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from pydantic import BaseModel, Field

from tmem.construct.options import BuildOptions
from tmem.scope import Scope
from tmem.store.base import Store
from tmem.util.dates import DATE_CONVENTION
from tmem.util.text import count_tokens

if TYPE_CHECKING:
    from tmem.ingest.reader import Format


class Rates(BaseModel):
    """What the model returns per input, measured on the two LLM-built dev memories (d26-plus, d30-plus)."""

    turns_per_scene: float = Field(default=5.3, description="d26: 121 turns / 27 scenes; d30: 146 / 23.")
    links_per_scene: float = Field(default=1.7, description="Topic links per scene (41/27, 43/23).")
    items_per_scene: float = Field(default=6.5, description="Items the model writes per scene (189/27, 140/23).")
    kept_after_dedup: float = Field(
        default=0.88, description="Share of written items the near-duplicate filter keeps (289 of 329 measured)."
    )
    turn_overhead: int = Field(default=12, description="Tokens of a turn line besides its text (id, date, speaker).")
    scene_line: int = Field(default=60, description="Tokens of a scene's date, title and summary line.")
    narrative: int = Field(default=100, description="Tokens of a scene narrative (89 and 109 measured).")
    item_text: int = Field(default=30, description="Tokens of an item's text (28 and 31 measured).")
    out_segment: int = Field(default=220, description="Output tokens per scene closed (209, 228).")
    out_topics: int = Field(default=50, description="Output tokens per scene assigned (51, 51).")
    out_items: int = Field(default=66, description="Output tokens per item extracted (65, 67).")
    out_item_triggers: int = Field(default=128, description="Output tokens per item, N = 3 (125, 131).")
    out_scene_triggers: int = Field(default=195, description="Output tokens per scene (200, 189).")
    out_persona: int = Field(default=14, description="Output tokens per item read (12.7, 15).")


class StageEstimate(BaseModel):
    stage: str
    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0


class BuildEstimate(BaseModel):
    space: str
    plan: str = Field(description="'few-rounds' or 'sequential'.")
    open_turns: int = Field(description="Turns not yet in a scene (what the build will read).")
    scenes: int = Field(description="Expected new scenes.")
    items: int = Field(description="Expected new items.")
    rounds: int = Field(description="Batch rounds the plan needs (one per dependency level).")
    stages: list[StageEstimate] = Field(default_factory=list)
    total: StageEstimate = Field(default_factory=lambda: StageEstimate(stage="total"))


@cache
def _instructions(name: str) -> int:
    """Tokens of a prompt template without its data (the part every request of the stage repeats)."""
    text = resources.files("tmem.construct").joinpath("prompts", name).read_text(encoding="utf-8")
    if name == "items.md":  # the relative-date convention is filled in there
        text += DATE_CONVENTION
    return count_tokens(text)


def estimate_build(
    store: Store, space: Scope, options: BuildOptions | None = None, rates: Rates | None = None
) -> BuildEstimate:
    """Requests and tokens per stage that building the open turns of ``space`` is expected to take."""
    covered = {tid for s in store.scenes(space) for tid in s.turn_ids}
    turns = [OpenTurn(t.session_id, t.speaker, t.text) for t in store.turns(space) if t.id not in covered]
    declared = len(store.get_space(space).speakers)
    return estimate_turns(space.space, turns, declared, len(store.topics(space)), options, rates)


class OpenTurn(NamedTuple):
    """What the estimate reads of a turn not yet in a scene."""

    session_id: str
    speaker: str
    text: str


def estimate_turns(
    name: str,
    turns: Sequence[OpenTurn],
    declared_speakers: int = 0,
    known_topics: int = 0,
    options: BuildOptions | None = None,
    rates: Rates | None = None,
) -> BuildEstimate:
    """:func:`estimate_build` of turns that need not be stored (a file not imported yet: :func:`estimate_file`)."""
    options = options or BuildOptions()
    r = rates or Rates()
    few = options.plan_few_rounds
    speakers = max(1, declared_speakers or len({t.speaker for t in turns}))
    turn_tokens = sum(count_tokens(t.text) + r.turn_overhead for t in turns)
    sessions: dict[str, int] = {}
    for t in turns:
        sessions[t.session_id] = sessions.get(t.session_id, 0) + 1
    # in the few-rounds plan a scene never spans a session break: at least one per session
    per_session = [max(1.0, n / r.turns_per_scene) if few else n / r.turns_per_scene for n in sessions.values()]
    scenes = sum(per_session)
    links = scenes * r.links_per_scene
    topics = min(0.6 * scenes, 4 * math.sqrt(scenes)) + known_topics
    written = scenes * r.items_per_scene  # what the extractor writes (and is paid for)
    items = written * r.kept_after_dedup  # what is stored, given triggers and read by the persona
    out: list[StageEstimate] = []

    def add(stage: str, template: str, requests: float, data: float, output: float) -> None:
        n = math.ceil(requests)
        out.append(
            StageEstimate(
                stage=stage,
                requests=n,
                input_tokens=round(n * _instructions(template) + data),
                output_tokens=round(output),
            )
        )

    if few:
        windows = sum(math.ceil(n / options.segment_window) for n in sessions.values())
        add("segment", "segment.md", windows, turn_tokens, scenes * r.out_segment)
        topic_requests = math.ceil(scenes / options.topic_scenes_per_round_call)
    else:
        advance = max(1.0, options.segment_window - r.turns_per_scene)  # the open tail is shown again
        windows = math.ceil(len(turns) / advance)
        add("segment", "segment.md", windows, turn_tokens * options.segment_window / advance, scenes * r.out_segment)
        topic_requests = math.ceil(scenes / options.topic_scenes_per_call)
    add(
        "topics",
        "topics.md",
        topic_requests,
        topic_requests * topics * 20 + scenes * r.scene_line,
        scenes * r.out_topics,
    )
    per_topic = links / topics if topics else 0.0
    item_requests = topics * math.ceil(per_topic / options.item_scenes_per_call) if topics else 0
    scene_full = (turn_tokens / scenes if scenes else 0.0) + r.narrative
    shown_items = min(options.item_existing_max, items / topics / 2 if topics else 0.0)
    add(
        "items",
        "items.md",
        item_requests,
        links * scene_full + item_requests * (per_topic * r.scene_line / 2 + shown_items * r.item_text),
        written * r.out_items,
    )
    add(
        "triggers.item",
        "item_triggers.md",
        items / options.items_per_trigger_call,
        items * r.item_text,
        items * r.out_item_triggers * options.item_triggers_n / 3,
    )
    add(
        "triggers.scene",
        "scene_triggers.md",
        scenes / options.scenes_per_trigger_call,
        scenes * (r.narrative + 20),
        scenes * r.out_scene_triggers,
    )
    chunks = math.ceil(items / speakers / options.persona_items_per_call) if items else 0
    persona_requests = speakers * (chunks + (1 if few and chunks > 1 else 0))
    add("persona", "persona.md", persona_requests, items * r.item_text, items * r.out_persona)
    total = StageEstimate(
        stage="total",
        requests=sum(s.requests for s in out),
        input_tokens=sum(s.input_tokens for s in out),
        output_tokens=sum(s.output_tokens for s in out),
    )
    rounds = 4 + (1 if chunks > 1 else 0) if few else windows + topic_requests + 2 + max(chunks, 1)
    return BuildEstimate(
        space=name,
        plan="few-rounds" if few else "sequential",
        open_turns=len(turns),
        scenes=round(scenes),
        items=round(items),
        rounds=rounds if turns else 0,
        stages=out if turns else [],
        total=total if turns else StageEstimate(stage="total"),
    )


class FileEstimate(BaseModel):
    """:func:`estimate_file`: every space of a file, as if each were built on its own, and their sum."""

    file: str
    plan: str
    spaces: list[BuildEstimate] = Field(default_factory=list)
    open_turns: int = 0
    rounds: int = Field(default=0, description="Batch rounds: the spaces' rounds run side by side, so the most.")
    stages: list[StageEstimate] = Field(default_factory=list)
    total: StageEstimate = Field(default_factory=lambda: StageEstimate(stage="total"))


def estimate_file(
    path: str | Path, fmt: Format = "auto", options: BuildOptions | None = None, rates: Rates | None = None
) -> FileEstimate:
    """What building every space of an importable file will take, read without importing it (nothing is written)."""
    from tmem.ingest.reader import read_file

    options = options or BuildOptions()
    out = FileEstimate(file=str(path), plan="few-rounds" if options.plan_few_rounds else "sequential")
    stages: dict[str, StageEstimate] = {}
    for space in read_file(path, fmt):
        turns = [OpenTurn(s.id, t.speaker, t.text) for s in space.sessions for t in s.turns]
        one = estimate_turns(space.name, turns, len(space.speakers), 0, options, rates)
        out.spaces.append(one)
        out.open_turns += one.open_turns
        out.rounds = max(out.rounds, one.rounds)
        for stage in [*one.stages, one.total]:
            into = (
                out.total
                if stage.stage == "total"
                else stages.setdefault(stage.stage, StageEstimate(stage=stage.stage))
            )
            into.requests += stage.requests
            into.input_tokens += stage.input_tokens
            into.output_tokens += stage.output_tokens
    out.stages = list(stages.values())
    return out
