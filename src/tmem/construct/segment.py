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

import json
import re
from dataclasses import dataclass
from functools import partial

from pydantic import BaseModel, Field

from tmem.construct.common import StageRun, checked, fmt_date, fmt_span, fmt_turns, render, stable_id
from tmem.construct.options import BuildOptions
from tmem.construct.report import STATE_FALLBACK, load_fallback
from tmem.construct.revert import revert_scene
from tmem.errors import LLMOutputError
from tmem.llm.base import Message
from tmem.models import BuildMode, Scene, Turn
from tmem.scope import Scope
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
    alone: bool = False  # few-rounds plan: one part segmented on its own, in parallel with the parts before it

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
    if buffer.alone:
        ending_rule = (
            "This buffer is one part of the conversation, segmented on its own: every turn must be in a scene, so "
            "close its final event too, even if it continues in the next part."
        )
        ending_note = "These are the last turns recorded so far for this part: cover every turn."
    elif buffer.input_ends:
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
    context: Fenced | Trusted
    if previous is not None:
        context = fence("previous_scene", f"{previous.title}: {previous.summary}")
    elif buffer.alone:
        context = Trusted("not shown, this part is segmented in parallel with the parts before it.")
    else:
        context = Trusted("none, this buffer starts at the beginning of the conversation.")
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


Closed = list[tuple[tuple[int, int], SceneOut]]


def fallback_scenes(buffer: Buffer) -> Closed:
    """Scenes for a window the model could not segment: split at session breaks, then into equal parts of at most
    ``max_scene_turns`` turns; title, summary and narrative are taken from the turns themselves (extractive)."""
    turns = buffer.turns
    spans: list[tuple[int, int]] = []
    start = 0
    for i in range(1, len(turns) + 1):
        if i < len(turns) and turns[i].session_id == turns[start].session_id:
            continue
        n = i - start
        size = -(-n // -(-n // buffer.max_scene_turns))  # ceil(n / ceil(n / max)): equal parts
        spans.extend((j, min(j + size, i) - 1) for j in range(start, i, size))
        start = i
    return [(span, _extractive_out(turns[span[0] : span[1] + 1])) for span in spans]


def _extractive_out(turns: list[Turn]) -> SceneOut:
    who = " and ".join(dict.fromkeys(t.speaker for t in turns))
    when = fmt_span(turns[0].time, turns[-1].time)
    longest = sorted(turns, key=lambda t: (-len(t.text.split()), t.seq))[:2]
    summary = " ".join(f"{t.speaker}: {_clip(t.text, 30)}" for t in sorted(longest, key=lambda t: t.seq))
    said = " ".join(f"{t.speaker} said: {' '.join(t.text.split())}" for t in turns)
    return SceneOut(
        first_turn=turns[0].id,
        last_turn=turns[-1].id,
        title=f"{who}, {when}",
        summary=summary or f"{who} talked.",
        narrative=f"On {fmt_date(turns[0].time)}, {who} talked. {said}",
    )


def _clip(text: str, words: int) -> str:
    parts = text.split()
    return " ".join(parts[:words]) + (" ..." if len(parts) > words else "")


async def _segment_window(
    run: StageRun, buffer: Buffer, previous: Scene | None, options: BuildOptions
) -> Closed | None:
    """The scenes closed in one window; the extractive fallback (recorded in ``run.fallback``) or None (recorded as
    a failed unit) when the model's replies stayed invalid after the retries."""
    try:
        result = await run.ask(messages_for(buffer, previous), reply_model(buffer))
    except LLMOutputError as exc:
        if not options.fallback:
            run.fail(f"segment:{buffer.ids[0]}", buffer.ids, exc)
            return None
        closed = fallback_scenes(buffer)
        for (start, end), _ in closed:
            run.fallback[stable_id("s", *buffer.ids[start : end + 1])] = f"segment: {exc}"
        return closed
    return list(zip(check_reply(result.output, buffer), result.output.scenes, strict=True))


def _parts(turns: list[Turn], window: int) -> list[list[Turn]]:
    """Runs of consecutive turns of one session, cut into equal windows of at most ``window`` turns."""
    runs: list[list[Turn]] = []
    for turn in turns:
        last = runs[-1][-1] if runs else None
        if last is not None and last.session_id == turn.session_id and last.seq + 1 == turn.seq:
            runs[-1].append(turn)
        else:
            runs.append([turn])
    parts: list[list[Turn]] = []
    for run_ in runs:
        size = -(-len(run_) // -(-len(run_) // window))
        parts.extend(run_[i : i + size] for i in range(0, len(run_), size))
    return parts


async def run_segment(store: Store, space: Scope, run: StageRun, options: BuildOptions) -> None:
    """Segment every turn not yet in a scene (plus, in the sequential plan, the provisional tail of the previous
    build). Turns left open by an earlier few-rounds build with failed windows are segmented in parallel as well."""
    turns = store.turns(space)
    scenes = store.scenes(space)
    covered = {tid for s in scenes for tid in s.turn_ids}
    first_open = next((i for i, t in enumerate(turns) if t.id not in covered), len(turns))
    queue = [t for t in turns[first_open:] if t.id not in covered]
    if not queue:
        run.report.skipped += len(scenes)
        return
    gaps = len(queue) != len(turns) - first_open
    if options.plan_few_rounds or gaps:
        await _segment_parallel(store, space, run, options, queue)
    else:
        await _segment_sequential(store, space, run, options, queue, scenes)
    if run.fallback:
        with store.transaction():
            marks = load_fallback(store.state_keys(space))
            marks.update(run.fallback)
            store.set_state(space, STATE_FALLBACK, json.dumps(dict(sorted(marks.items()))))


async def _segment_parallel(
    store: Store, space: Scope, run: StageRun, options: BuildOptions, queue: list[Turn]
) -> None:
    """Few-rounds plan: every open run of turns (a session, cut into windows) is segmented independently, all in one
    round; a scene never spans a session break here. A provisional tail of an earlier build is kept as closed."""
    parts = _parts(queue, options.segment_window)

    async def one(turns: list[Turn]) -> list[tuple[list[Turn], SceneOut]] | None:
        buffer = Buffer(turns=turns, input_ends=True, max_scene_turns=options.max_scene_turns, alone=True)
        closed = await _segment_window(run, buffer, None, options)
        if closed is None:
            return None
        return [(turns[start : end + 1], out) for (start, end), out in closed]

    run.start(total=len(parts))
    results = await run.gather([partial(one, part) for part in parts])
    closed = sorted((pair for res in results if res is not None for pair in res), key=lambda p: p[0][0].seq)
    new = [scene_from(out, scene_turns, 0) for scene_turns, out in closed]
    turn_seq = {t.id: t.seq for t in store.turns(space)}
    existing = store.scenes(space)
    before = {sc.id: sc.seq for sc in existing}
    ordered = sorted([*existing, *new], key=lambda sc: turn_seq[sc.turn_ids[0]])
    # seq is arrival order: scenes that fill a gap left by a failed window renumber the ones after them
    changed = [sc.model_copy(update={"seq": n}) for n, sc in enumerate(ordered) if before.get(sc.id) != n]
    with store.transaction():
        store.set_state(space, STATE_OPEN_TAIL, None)
        store.put_scenes(space, changed)
    run.report.created += len(new)
    run.close()


async def _segment_sequential(
    store: Store, space: Scope, run: StageRun, options: BuildOptions, queue: list[Turn], scenes: list[Scene]
) -> None:
    """Sequential plan: a sliding buffer from the first open turn; a scene may span a session break."""
    tail_id = store.get_state(space, STATE_OPEN_TAIL)
    provisional = next((s for s in scenes if s.id == tail_id), None) if tail_id else None
    if provisional is not None:
        by_id = {t.id: t for t in store.turns(space, provisional.turn_ids)}
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
        closed = await _segment_window(run, buffer, previous, options)
        if closed is None:
            break  # every later window starts where this one would have closed: they wait for the rerun
        advanced = closed[-1][0][1] + 1
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
        run.advance(advanced)
        pos += advanced
    run.close()
