"""Scene segmentation by event closure (paper §3.2.1).

A sliding buffer of turns in arrival order goes to the boundary detector, which returns the scenes that closed in it
(title, summary, narrative with absolute dates) covering a prefix of the buffer; the rest stays open and is shown
again with the turns that follow. The reply is validated against the buffer (ids exist, scenes contiguous, cover a
prefix, at most ``max_scene_turns`` turns, narrative carries an absolute date); an invalid reply goes back to the
model through the LLM layer's retry.

End of build: when the buffer reaches the last imported turn, every turn must be closed, and the last scene is
recorded as *provisional* (state key ``segment.open_tail``). The next build that finds new turns puts the
provisional scene's turns back at the head of the buffer: if the model closes exactly the same turns again, the
scene and everything built on it are kept; otherwise the scene and its topic links, items and triggers are removed
(:func:`revert_scene`) and the turns are segmented with the new ones. This is what makes an incremental build end with
the same scenes as a build of all sessions at once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pydantic import BaseModel, Field

from tmem.construct.common import StageRun, checked, fmt_turns, render, stable_id
from tmem.construct.options import BuildOptions
from tmem.construct.revert import revert_scene
from tmem.errors import BuildError
from tmem.llm.base import Message
from tmem.models import BuildMode, Scene, Turn
from tmem.store.base import Store
from tmem.util.fence import Fenced, Trusted, fence, fence_inline, shown_id

STAGE = "segment"
STATE_OPEN_TAIL = "segment.open_tail"  # id of the provisional last scene of the previous build

_YEAR = re.compile(r"\b(1[89]\d\d|2\d\d\d)\b")


class SceneOut(BaseModel):
    first_turn: str = Field(description="Id of the scene's first turn as shown in square brackets, e.g. 'D1:1'.")
    last_turn: str = Field(description="Id of the scene's last turn (the same as first_turn for a one-turn scene).")
    title: str = Field(description="Short specific title, at most 12 words, naming who did what.")
    summary: str = Field(description="One to three sentences with the concrete facts of the scene.")
    narrative: str = Field(
        description="Third-person past-tense account naming the speakers, with every date absolute "
        "(e.g. 'On 7 May 2023, Caroline ...')."
    )


class SegmentReply(BaseModel):
    scenes: list[SceneOut] = Field(
        description="The scenes that closed in this buffer, in order, covering a prefix of it from its first turn "
        "without gaps or overlaps."
    )


@dataclass(frozen=True)
class Buffer:
    turns: list[Turn]
    input_ends: bool
    max_scene_turns: int

    @property
    def ids(self) -> list[str]:
        return [t.id for t in self.turns]


def check_reply(reply: SegmentReply, buffer: Buffer) -> list[tuple[int, int]]:
    """Validate a reply against its buffer; returns the (start, end) index span of each scene (end inclusive).

    Raises ValueError with a message the model can act on.
    """
    index = {tid: i for i, tid in enumerate(buffer.ids)}
    for i, tid in enumerate(buffer.ids):  # the model may quote an id as the fence showed it (escaped)
        index.setdefault(shown_id(tid), i)
    if not reply.scenes:
        raise ValueError(
            "scenes is empty: close at least the first scene of the buffer (a scene holds at most "
            f"{buffer.max_scene_turns} turns, and the buffer has {len(buffer.turns)})"
        )
    spans: list[tuple[int, int]] = []
    expected = 0
    for n, scene in enumerate(reply.scenes):
        where = f"scenes[{n}]"
        for name in ("first_turn", "last_turn"):
            tid = getattr(scene, name).strip().strip("[]")
            if tid not in index:
                raise ValueError(
                    f"{where}.{name}: {tid!r} is not a turn id of this buffer ({buffer.ids[0]} .. {buffer.ids[-1]})"
                )
        start, end = index[scene.first_turn.strip().strip("[]")], index[scene.last_turn.strip().strip("[]")]
        if start != expected:
            want = buffer.ids[expected] if expected < len(buffer.ids) else "nothing (the buffer is covered)"
            raise ValueError(
                f"{where}.first_turn is {buffer.ids[start]} but must be {want}: scenes are contiguous and start at "
                "the buffer's first turn"
            )
        if end < start:
            raise ValueError(f"{where}: last_turn {buffer.ids[end]} comes before first_turn {buffer.ids[start]}")
        if end - start + 1 > buffer.max_scene_turns:
            raise ValueError(
                f"{where} spans {end - start + 1} turns ({buffer.ids[start]} .. {buffer.ids[end]}), more than the "
                f"maximum of {buffer.max_scene_turns}: split it at a natural turning point"
            )
        for name in ("title", "summary", "narrative"):
            if not getattr(scene, name).strip():
                raise ValueError(f"{where}.{name} is empty")
        years = {str(t.time.year) for t in buffer.turns[start : end + 1]}
        if not years & set(_YEAR.findall(scene.narrative)):
            raise ValueError(
                f"{where}.narrative states no absolute date: write the date of the scene with its year, e.g. "
                f"'On {buffer.turns[start].time.day} {buffer.turns[start].time.strftime('%B %Y')}, ...'"
            )
        spans.append((start, end))
        expected = end + 1
    if buffer.input_ends and expected != len(buffer.turns):
        raise ValueError(
            f"the conversation ends at {buffer.ids[-1]}, so every turn must be in a scene, but the scenes stop at "
            f"{buffer.ids[expected - 1]}: close the remaining turns as the final scene(s)"
        )
    return spans


def reply_model(buffer: Buffer) -> type[SegmentReply]:
    """SegmentReply checked against this buffer: the LLM layer's retry shows the model any violation."""
    return checked(SegmentReply, lambda reply: check_reply(reply, buffer))


def messages_for(buffer: Buffer, previous: Scene | None) -> list[Message]:
    if buffer.input_ends:
        ending_rule = (
            "This buffer reaches the end of the conversation recorded so far: every turn must be in a scene, so "
            "close the final event too, even if it may continue later."
        )
        ending_note = "These are the last turns recorded so far: cover every turn."
    else:
        ending_rule = (
            "More turns follow this buffer; the turns after your last closed scene are shown again next time. "
            "Close at least one scene."
        )
        ending_note = "More turns follow: leave the still-running event open."
    context: Fenced | Trusted = (
        fence("previous_scene", f"{previous.title}: {previous.summary}")
        if previous is not None
        else Trusted("none, this buffer starts at the beginning of the conversation.")
    )
    return render(
        "segment.md",
        max_scene_turns=buffer.max_scene_turns,
        ending_rule=Trusted(ending_rule),
        ending_note=Trusted(ending_note),
        context=context,
        turns=fence("conversation", fmt_turns(buffer.turns)),
        count=len(buffer.turns),
        first_id=fence_inline("turn_id", buffer.ids[0]),
        last_id=fence_inline("turn_id", buffer.ids[-1]),
    )


def scene_from(out: SceneOut, turns: list[Turn], seq: int) -> Scene:
    return Scene(
        id=stable_id("s", *(t.id for t in turns)),
        seq=seq,
        title=out.title.strip(),
        summary=out.summary.strip(),
        narrative=out.narrative.strip(),
        turn_ids=[t.id for t in turns],
        start=min(t.time for t in turns),
        end=max(t.time for t in turns),
        mode=BuildMode.LLM,
    )


async def run_segment(store: Store, space: str, run: StageRun, options: BuildOptions) -> None:
    """Segment every turn not yet in a scene (plus the provisional tail of the previous build)."""
    turns = store.turns(space)
    scenes = store.scenes(space)
    covered = {tid for s in scenes for tid in s.turn_ids}
    first_open = next((i for i, t in enumerate(turns) if t.id not in covered), len(turns))
    if any(t.id in covered for t in turns[first_open:]):
        raise BuildError(
            f"Space {space!r}: turns outside any scene are not a suffix of the conversation (sessions imported out "
            "of order?). Rebuild the space from scratch: `tmem build SPACE --rebuild`."
        )
    tail_id = store.get_state(space, STATE_OPEN_TAIL)
    provisional = next((s for s in scenes if s.id == tail_id), None) if tail_id else None
    queue = turns[first_open:]
    if not queue:
        run.report.skipped += len(scenes)
        return
    if provisional is not None:
        by_id = {t.id: t for t in turns}
        queue = [by_id[tid] for tid in provisional.turn_ids] + queue
        scenes = [s for s in scenes if s.id != provisional.id]
    previous = scenes[-1] if scenes else None
    run.start(total=len(queue))
    pos = 0
    while pos < len(queue):
        buffer = Buffer(
            turns=queue[pos : pos + options.segment_window],
            input_ends=pos + options.segment_window >= len(queue),
            max_scene_turns=options.max_scene_turns,
        )
        result = await run.ask(messages_for(buffer, previous), reply_model(buffer))
        spans = check_reply(result.output, buffer)
        closed = list(zip(spans, result.output.scenes, strict=True))
        with store.transaction():
            if provisional is not None:
                (start, end), _ = closed[0]
                if [t.id for t in buffer.turns[start : end + 1]] == provisional.turn_ids:
                    # The event did close there: keep the scene and everything built on it.
                    scenes.append(provisional)
                    closed = closed[1:]
                    run.report.skipped += 1
                else:
                    revert_scene(store, space, provisional)
                    run.report.updated += 1
                provisional = None
                store.set_state(space, STATE_OPEN_TAIL, None)
            new = [
                scene_from(out, buffer.turns[start : end + 1], len(scenes) + n)
                for n, ((start, end), out) in enumerate(closed)
            ]
            store.put_scenes(space, new)
            scenes.extend(new)
            if buffer.input_ends:
                store.set_state(space, STATE_OPEN_TAIL, scenes[-1].id)
        run.report.created += len(new)
        previous = scenes[-1]
        advanced = spans[-1][1] + 1
        run.advance(advanced)
        pos += advanced
    run.close()
