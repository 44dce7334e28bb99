"""Domain rules every store backend applies the same way (kept out of the backends so that they cannot drift).

- :func:`build_state` derives a space's build state from its session count and ``build.*`` checkpoints.
- :func:`check_items` refuses items that break the item invariants before anything is written.
- :func:`missing_space` is the error for a scope whose space does not exist (naming only its tenant's spaces).

Space names and scopes are checked in :mod:`tmem.scope` (re-exported here for the store's modules).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tmem.errors import IntegrityError, SpaceNotFound, StoreError
from tmem.models import Item, ItemKind, Session, Turn
from tmem.scope import LOCAL_TENANT, Scope, check_space_name, space_name_problem, tenant_of
from tmem.util.state import STATE_MODE, STATE_SESSIONS

__all__ = [
    "LOCAL_TENANT",
    "build_state",
    "check_items",
    "check_session_turns",
    "check_space_name",
    "missing_space",
    "not_utf8",
    "space_name_problem",
    "tenant_of",
]


def build_state(n_sessions: int, state: Mapping[str, str], *, appended_turns: int = 0) -> str:
    """``empty`` (no session), ``not built`` (no build finished), ``stale`` (sessions, or ``appended_turns`` messages
    appended to a built session, arrived since) or ``built``."""
    if n_sessions == 0:
        return "empty"
    if state.get(STATE_MODE) is None:
        return "not built"
    try:
        built = int(state.get(STATE_SESSIONS, "0"))
    except ValueError:
        built = 0  # an unreadable checkpoint counts as nothing built: the next build redoes the work
    return "stale" if built < n_sessions or appended_turns > 0 else "built"


def check_items(scope: Scope, items: Sequence[Item]) -> None:
    """Raise IntegrityError for the first item that breaks an invariant (nothing is written then)."""
    for it in items:
        if it.kind is ItemKind.ATOMIC and len(it.scene_ids) != 1:
            raise IntegrityError(
                "Atomic item {id!r} in space {space!r} must have exactly one source scene (it names {n}); give it "
                "one scene or make it a connected item.",
                id=it.id,
                n=len(it.scene_ids),
                **scope.fields,
            )


def check_session_turns(session: Session, turns: Sequence[Turn]) -> None:
    """Every turn of a session names that session."""
    for t in turns:
        if t.session_id != session.id:
            raise IntegrityError(f"Turn {t.id} names session {t.session_id!r}, expected {session.id!r}.")


def not_utf8(exc: UnicodeEncodeError) -> StoreError:
    """The error for text no backend can store (not encodable as UTF-8)."""
    return StoreError(
        f"Text cannot be stored: {exc.reason} ({exc.object[exc.start : exc.end]!r} is not valid UTF-8, typically a "
        "lone surrogate from a broken \\u escape in the input JSON). Nothing of it was written; fix the input."
    )


def missing_space(scope: Scope, known: Sequence[str]) -> SpaceNotFound:
    """The error for a ``scope`` whose space does not exist, naming the ``known`` spaces: names of the same tenant's
    spaces (never another tenant's: a store is shared by every tenant)."""
    return SpaceNotFound(scope.tenant, scope.space, sorted(known))
