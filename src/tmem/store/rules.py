"""Domain rules every store backend applies the same way (kept out of the backends so that they cannot drift).

- :func:`build_state` derives a space's build state from its session count and ``build.*`` checkpoints.
- :func:`check_items` refuses items that break the item invariants before anything is written.
- :func:`tenant_of` splits a store space key into its tenant (the service writes ``T/S``; a local space has none).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tmem.errors import IntegrityError, SpaceNotFound, StoreError
from tmem.models import Item, ItemKind, Session, Turn
from tmem.util.state import STATE_MODE, STATE_SESSIONS

LOCAL_TENANT = ""  # the tenant of a plain space name (the library's and the CLI's implicit local tenant)


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


def check_items(space: str, items: Sequence[Item]) -> None:
    """Raise IntegrityError for the first item that breaks an invariant (nothing is written then)."""
    for it in items:
        if it.kind is ItemKind.ATOMIC and len(it.scene_ids) != 1:
            raise IntegrityError(
                f"Atomic item {it.id!r} in space {space!r} must have exactly one source scene "
                f"(it names {len(it.scene_ids)}); give it one scene or make it a connected item."
            )


def check_session_turns(session: Session, turns: Sequence[Turn]) -> None:
    """Every turn of a session names that session."""
    for t in turns:
        if t.session_id != session.id:
            raise IntegrityError(f"Turn {t.id} names session {t.session_id!r}, expected {session.id!r}.")


def space_name_problem(name: str) -> str | None:
    """What is wrong with a space key, or None. Any non-empty string is a key (hostile names such as
    ``../../etc/passwd`` are just keys); the part before the first '/' is its tenant (:func:`tenant_of`)."""
    if not name or not name.strip():
        return "is empty; name the space."
    return None


def check_space_name(name: str) -> None:
    """Raise IntegrityError for a space key :func:`space_name_problem` refuses."""
    problem = space_name_problem(name)
    if problem is not None:
        raise IntegrityError(f"Bad space name {name!r}: {problem}")


def tenant_of(space: str) -> str:
    """The tenant part of a space key: ``T`` for ``T/S``, :data:`LOCAL_TENANT` for a plain name."""
    head, sep, _ = space.partition("/")
    return head if sep else LOCAL_TENANT


def not_utf8(exc: UnicodeEncodeError) -> StoreError:
    """The error for text no backend can store (not encodable as UTF-8)."""
    return StoreError(
        f"Text cannot be stored: {exc.reason} ({exc.object[exc.start : exc.end]!r} is not valid UTF-8, typically a "
        "lone surrogate from a broken \\u escape in the input JSON). Nothing of it was written; fix the input."
    )


def missing_space(name: str, existing: Sequence[str]) -> SpaceNotFound:
    """The error for a space key ``name`` that does not exist, naming only the spaces of the same tenant as
    ``name`` among the ``existing`` keys (never another tenant's: a store is shared by every tenant)."""
    tenant = tenant_of(name)
    prefix = f"{tenant}/" if tenant else ""
    local = name[len(prefix) :]
    known = sorted(k[len(prefix) :] for k in existing if tenant_of(k) == tenant and k.startswith(prefix))
    return SpaceNotFound(tenant, local, known)
