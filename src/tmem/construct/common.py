"""Helpers shared by the LLM construction stages: prompt templates, data fencing, date formatting, stable ids and
the bounded, batch-aware way a stage runs its independent requests."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache
from importlib import resources
from string import Template
from typing import Any, TypeVar

from pydantic import BaseModel, create_model, model_validator
from tqdm import tqdm

from tmem.construct.report import FailedUnit, StageReport
from tmem.errors import BatchPending, BuildError, LLMOutputError
from tmem.llm.base import LLM, LLMResult, Message
from tmem.models import Turn
from tmem.scope import Scope
from tmem.util.dates import When, parse_when
from tmem.util.fence import Fenced, Trusted, check_value, one_line
from tmem.util.text import text_hash

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)

_USER_MARK = "<<<USER>>>"


@cache
def _template(name: str) -> tuple[Template, Template]:
    text = resources.files("tmem.construct").joinpath("prompts", name).read_text(encoding="utf-8")
    if _USER_MARK not in text:
        raise BuildError(f"Prompt template {name} lacks the {_USER_MARK} line separating system and user parts")
    system, user = text.split(_USER_MARK, 1)
    return Template(system.strip() + "\n"), Template(user.strip() + "\n")


def render(name: str, **values: Fenced | Trusted | int) -> list[Message]:
    """System + user messages from ``prompts/<name>``; ``$placeholders`` are filled, unknown ones raise.

    Values are :class:`~tmem.util.fence.Fenced` data, :class:`~tmem.util.fence.Trusted` program text or numbers
    (anything else raises TypeError), and the system part takes no data at all: conversation-derived text can only
    reach the model inside a fence of the user message (see docs/security.md).
    """
    system, user = _template(name)
    data = {k: check_value(k, v) for k, v in values.items()}
    fenced = sorted(k for k, v in values.items() if isinstance(v, Fenced))
    if any(f"${k}" in system.template or f"${{{k}}}" in system.template for k in fenced):
        raise BuildError(f"Prompt template {name}: fenced data ({', '.join(fenced)}) must not go into the system part")
    return [
        Message(role="system", content=system.substitute(data)),
        Message(role="user", content=user.substitute(data)),
    ]


def checked(base: type[M], check: Callable[[M], object]) -> type[M]:
    """``base`` validated against one request: ``check`` raises ValueError (which the LLM layer's retry shows the
    model) for a reply that does not fit the request. The class keeps ``base``'s name, so its JSON schema (and with it
    every request hash) is that of ``base``."""

    def against_request(reply: M) -> M:
        check(reply)
        return reply

    validators: dict[str, Any] = {"against_request": model_validator(mode="after")(against_request)}
    return create_model(base.__name__, __base__=base, __validators__=validators)


def fmt_date(when: datetime) -> str:
    """'8 May 2023' (no leading zero, no clock)."""
    return f"{when.day} {when.strftime('%B %Y')}"


def fmt_time(when: datetime) -> str:
    """'8 May 2023, 13:56'."""
    return f"{fmt_date(when)}, {when.strftime('%H:%M')}"


def fmt_span(start: datetime, end: datetime) -> str:
    if start.date() == end.date():
        return fmt_date(start)
    return f"{fmt_date(start)} to {fmt_date(end)}"


def fmt_turn(turn: Turn) -> str:
    """One turn as the model reads it: ``[D1:3] 8 May 2023, 13:56 · Caroline: text [image: caption]``."""
    line = f"[{one_line(turn.id)}] {fmt_time(turn.time)} · {one_line(turn.speaker)}: {one_line(turn.text)}"
    if turn.caption:
        line += f" [shares an image: {one_line(turn.caption)}]"
    return line


def fmt_turns(turns: Sequence[Turn], *, show_sessions: bool = True) -> str:
    """Turns in order; a session change is shown as a marker line (evidence, not a rule)."""
    lines: list[str] = []
    session: str | None = None
    for turn in turns:
        if show_sessions and turn.session_id != session:
            lines.append(f"--- {one_line(turn.session_id)} (from {fmt_time(turn.time)}) ---")
            session = turn.session_id
        lines.append(fmt_turn(turn))
    return "\n".join(lines)


def stable_id(prefix: str, *parts: str) -> str:
    """Id derived from content only: reruns and resumed builds produce the same ids."""
    return f"{prefix}_{text_hash(chr(31).join(parts))[:16]}"


def check_when(value: str | None, where: str) -> When | None:
    """A reply's date with its precision (forms in :data:`tmem.util.dates.WHEN_FORMS`), or None; ValueError names
    the accepted forms."""
    if value is None or not value.strip():
        return None
    try:
        return parse_when(value)
    except ValueError as exc:
        raise ValueError(f"{where}: date {exc} (or null when unknown)") from exc


def chunks(seq: Sequence[T], size: int) -> list[list[T]]:
    return [list(seq[i : i + size]) for i in range(0, len(seq), size)]


@dataclass
class StageRun:
    """Book-keeping of one stage run: the report, the progress bar and the batch-pending collection."""

    stage: str
    llm: LLM
    space: Scope
    concurrency: int
    progress: bool
    report: StageReport = field(init=False)
    pending: list[BatchPending] = field(default_factory=list)
    failed: list[FailedUnit] = field(default_factory=list)
    fallback: dict[str, str] = field(default_factory=dict)  # scene id -> why it was segmented without the model
    _bar: tqdm[Any] | None = None

    def __post_init__(self) -> None:
        self.report = StageReport(stage=self.stage)
        self._sem = asyncio.Semaphore(self.concurrency)

    def start(self, total: int) -> None:
        enabled = self.progress and sys.stderr.isatty()
        self._bar = tqdm(total=total, desc=self.stage, file=sys.stderr, disable=not enabled, leave=False)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    async def ask(self, messages: list[Message], output_model: type[M]) -> LLMResult[M]:
        """One request, counted in the report. BatchPending propagates (see :meth:`gather`)."""
        async with self._sem:
            result = await self.llm.complete(messages, output_model, stage=self.stage, space=self.space)
        if result.cached:
            self.report.cached_calls += 1
        else:
            self.report.llm_calls += 1
        return result

    def fail(self, unit: str, refs: Sequence[str], exc: LLMOutputError) -> None:
        """Record a unit whose replies stayed invalid after the retries (the stage goes on with the others)."""
        self.failed.append(FailedUnit(stage=self.stage, unit=unit, refs=list(refs), reason=str(exc)))

    async def attempt(self, unit: str, refs: Sequence[str], job: Callable[[], Awaitable[T]]) -> T | None:
        """Run one unit; a reply that stayed invalid records the unit as failed and gives None. BatchPending and
        transient errors propagate (the batch protocol collects the first; the second stops the build, resumable)."""
        try:
            return await job()
        except LLMOutputError as exc:
            self.fail(unit, refs, exc)
            return None

    def advance(self, n: int = 1) -> None:
        if self._bar is not None:
            self._bar.update(n)

    async def gather(self, jobs: Sequence[Callable[[], Awaitable[T]]]) -> list[T]:
        """Run independent jobs with bounded concurrency; results in job order.

        In batch mode every job whose request is uncached raises BatchPending; all jobs still run so that the stage
        writes ALL its currently independent requests, then one BatchPending is raised for the stage.
        """

        async def guarded(job: Callable[[], Awaitable[T]]) -> T | None:
            try:
                result = await job()
                self.advance(1)
                return result
            except BatchPending as exc:  # collected: the stage exports every pending request at once
                self.pending.append(exc)
                return None

        try:
            async with asyncio.TaskGroup() as group:
                tasks = [group.create_task(guarded(job)) for job in jobs]
        except BaseExceptionGroup as failed:  # a real failure cancels the stage's other requests; surface the first
            first = failed.exceptions[0]
            if len(failed.exceptions) > 1:
                first.add_note(f"{len(failed.exceptions) - 1} more request(s) of stage {self.stage} failed too")
            raise first from None
        results = [task.result() for task in tasks]
        if self.pending:
            raise self.pending[0]
        return [r for r in results if r is not None]
