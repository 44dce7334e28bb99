"""Filters on recall (issue 19): only memory from matching turns enters a search result or a context.

A :class:`MemoryFilter` (``where=`` in the library, ``where`` over HTTP and MCP) holds conditions that must all hold:

* ``metadata``: ``{"key": value}`` is equality, ``{"key": [v1, v2]}`` is ``in`` (any of the values); a turn without
  the key does not match. Values compare by JSON type: ``true`` never equals ``1``, ``1`` equals ``1.0``;
* ``speaker``: a name, or a list of names (any of them);
* ``since`` / ``until``: when the turn was said, inclusive; a bare date covers its whole day.

**Turns** match when every condition holds for them. **Items** inherit their source turns' metadata, computed at read
time (nothing is copied into items): an item matches a condition when *any* of its source turns does (the union of
their values; an item whose source turns disagree on a key holds every value they give). Its shown metadata
(:func:`inherited_metadata`) is the union with the latest source turn's value winning a conflict. **Scenes** keep only
their matching turns (a scene with none is dropped). Persona notes are drawn from the whole conversation, so a
filtered result has none.

Filters apply *before* packing: :func:`tmem.answer.filtered.filtered_context` searches deeper until the filtered hits fill the budget (or
the space has no more), so a filtered context is as full as an unfiltered one when enough matching memory exists.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, date, datetime, time
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from tmem.errors import InputError
from tmem.models import MetaValue, Turn
from tmem.retrieve.types import SearchResult
from tmem.scope import Scope
from tmem.store.base import Store

MAX_VALUES = 100  # values of one `in` condition


def _same(a: MetaValue, b: MetaValue) -> bool:
    """JSON equality: a boolean equals only a boolean; numbers compare as numbers; strings as strings."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and a == b
    return a == b


class MemoryFilter(BaseModel):
    """What a search, context or list keeps; every field optional, all of them must hold (module docstring)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    metadata: dict[str, MetaValue | list[MetaValue]] = Field(
        default_factory=dict, description='{"key": value} (equality) or {"key": [v1, v2]} (any of them).'
    )
    speaker: str | list[str] | None = Field(default=None, description="Who said it: a name or a list of names.")
    since: datetime | date | None = Field(default=None, description="Said on or after this time (a date: its start).")
    until: datetime | date | None = Field(default=None, description="Said on or before this time (a date: its end).")

    @field_validator("since", "until", mode="before")
    @classmethod
    def _day(cls, value: object) -> object:
        """A bare ISO date stays a date (a whole day), never midnight of that day."""
        if isinstance(value, str) and len(value.strip()) == 10:
            try:
                return date.fromisoformat(value.strip())
            except ValueError:
                return value  # the field's own validation names the problem
        return value

    @model_validator(mode="after")
    def _sound(self) -> MemoryFilter:
        for key, wanted in self.metadata.items():
            if isinstance(wanted, list) and not 1 <= len(wanted) <= MAX_VALUES:
                raise ValueError(f"metadata.{key}: give between 1 and {MAX_VALUES} values to match")
        if isinstance(self.speaker, list) and not self.speaker:
            raise ValueError("speaker: give at least one name (or leave the field out)")
        low, high = self._bounds()
        if low is not None and high is not None and low > high:
            raise ValueError(f"since ({self.since}) is after until ({self.until}); swap them")
        return self

    @property
    def empty(self) -> bool:
        return not self.metadata and self.speaker is None and self.since is None and self.until is None

    def _bounds(self) -> tuple[datetime | None, datetime | None]:
        low = self.since
        if isinstance(low, date) and not isinstance(low, datetime):
            low = datetime.combine(low, time.min)
        high = self.until
        if isinstance(high, date) and not isinstance(high, datetime):
            high = datetime.combine(high, time.max)  # the day's last instant (9999-12-31 included)
        return _naive(low), _naive(high)

    def _meta_ok(self, values: Mapping[str, Sequence[MetaValue]]) -> bool:
        for key, wanted in self.metadata.items():
            options = wanted if isinstance(wanted, list) else [wanted]
            if not any(_same(v, w) for v in values.get(key, ()) for w in options):
                return False
        return True

    def _speaker_ok(self, speakers: Iterable[str]) -> bool:
        if self.speaker is None:
            return True
        names = {self.speaker} if isinstance(self.speaker, str) else set(self.speaker)
        return any(s in names for s in speakers)

    def _time_ok(self, times: Iterable[datetime]) -> bool:
        low, high = self._bounds()
        if low is None and high is None:
            return True
        return any((low is None or t >= low) and (high is None or t <= high) for t in times)

    def keeps_turn(self, turn: Turn) -> bool:
        values = {k: [v] for k, v in turn.metadata.items()}
        return self._meta_ok(values) and self._speaker_ok([turn.speaker]) and self._time_ok([turn.time])

    def keeps_sources(self, turns: Sequence[Turn]) -> bool:
        """An item (or any record made from ``turns``): each condition holds for at least one source turn."""
        if not turns:
            return self.empty
        values: dict[str, list[MetaValue]] = {}
        for t in turns:
            for k, v in t.metadata.items():
                values.setdefault(k, []).append(v)
        return (
            self._meta_ok(values)
            and self._speaker_ok(t.speaker for t in turns)
            and self._time_ok(t.time for t in turns)
        )


def _naive(value: datetime | None) -> datetime | None:
    """``value`` in UTC without a zone; a bound that leaves the calendar in UTC (9999-12-31T23:00-05:00) is the
    calendar's end (or start): no turn lies beyond it."""
    if value is None or value.tzinfo is None:
        return value
    try:
        return value.astimezone(UTC).replace(tzinfo=None)
    except OverflowError:
        return datetime.max if value.year == datetime.max.year else datetime.min


def memory_filter(where: MemoryFilter | Mapping[str, Any] | None) -> MemoryFilter | None:
    """``where`` as a MemoryFilter (None or an empty filter: None); a malformed one is an InputError saying what to
    fix."""
    if where is None:
        return None
    if not isinstance(where, MemoryFilter):
        try:
            where = MemoryFilter.model_validate(where)
        except ValidationError as exc:
            first = exc.errors()[0]
            at = ".".join(str(p) for p in first["loc"]) or "where"
            raise InputError(
                f"Invalid filter {at}: {first['msg']}. A filter is {{metadata?: {{key: value or [values]}}, "
                "speaker?: name or [names], since?: date, until?: date}."
            ) from None
    return None if where.empty else where


def inherited_metadata(turns: Sequence[Turn]) -> dict[str, MetaValue]:
    """An item's metadata from its source turns: the union, the latest turn's value winning a conflict."""
    out: dict[str, MetaValue] = {}
    for t in sorted(turns, key=lambda t: t.seq):
        out.update(t.metadata)
    return out


def lookup_turns(store: Store, space: Scope, ids: Iterable[str]) -> dict[str, Turn]:
    """The stored turns of ``ids`` by id (id-scoped reads); a turn no longer stored is absent."""
    wanted = list(dict.fromkeys(ids))
    return {t.id: t for t in store.find_turns(space, wanted)} if wanted else {}


def filter_result(result: SearchResult, store: Store, space: Scope, where: MemoryFilter) -> SearchResult:
    """``result`` with only what ``where`` keeps (module docstring); the turns' metadata is read from the store."""
    turns = lookup_turns(store, space, result.turn_ids())
    scenes = []
    for sh in result.scenes:
        kept = [t for t in sh.turns if t.id in turns and where.keeps_turn(turns[t.id])]
        if kept:
            scenes.append(sh.model_copy(update={"turns": [turns[t.id] for t in kept]}))
    items = [ih for ih in result.items if where.keeps_sources([turns[t] for t in ih.source_turn_ids if t in turns])]
    raw = [
        th.model_copy(update={"turn": turns[th.turn.id]})
        for th in result.turns
        if th.turn.id in turns and where.keeps_turn(turns[th.turn.id])
    ]
    return result.model_copy(update={"scenes": scenes, "items": items, "turns": raw, "personas": []})
