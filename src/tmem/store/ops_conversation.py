"""Spaces, sessions and turns: the conversation as it arrived, once for both backends (each method is documented
in :class:`tmem.store.base.Store`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from sqlalchemy import Table, bindparam, delete, exists, func, select, update

from tmem.errors import IntegrityError, NotFoundError, StoreError
from tmem.models import Session, Space, SpaceSummary, Turn
from tmem.scope import Scope
from tmem.store import mappers
from tmem.store.rules import build_state, check_session_turns, missing_space
from tmem.store.schema import LINK_TABLES, scene_turns, sessions, spaces, turns
from tmem.store.sql import SQLOps
from tmem.util.state import STATE_MODE, STATE_TURN_SEQ

# Built once: SQLAlchemy memoizes a statement object's cache key, so an import's thousands of get_space calls look
# its compiled form up without walking the statement again (bench/results/store_perf.md).
_GET_SPACE = select(spaces.c.name, spaces.c.speakers).where(
    spaces.c.tenant == bindparam("tenant"), spaces.c.name == bindparam("name")
)
# The same read holding the space's row lock until the transaction ends (SQLite's compiler writes no FOR UPDATE:
# its writer already holds the file's write lock).
_LOCK_SPACE = _GET_SPACE.with_for_update()


class ConversationOps(SQLOps):
    if TYPE_CHECKING:

        def state_keys(self, scope: Scope, prefix: str = "") -> dict[str, str]: ...

        def _writing(self) -> bool: ...

    # ------------------------------------------------------------------ spaces
    def _add_space(self, scope: Scope) -> None:
        self._insert_new(spaces, [{"tenant": scope.tenant, "name": scope.key}])

    def ensure_space(self, scope: Scope) -> Space:
        with self.transaction():
            self._add_space(scope)
        return self.get_space(scope)

    def lock_space(self, scope: Scope) -> Space:
        if not self._writing():
            raise StoreError(
                "Store.lock_space() outside a write transaction: the lock would end with the statement. Call it "
                "inside `with store.transaction():`; this is a bug in the caller."
            )
        self._add_space(scope)
        return self.get_space(scope, lock=True)

    def get_space(self, scope: Scope, *, lock: bool = False) -> Space:
        query = _LOCK_SPACE if lock else _GET_SPACE
        rows = self._fetch(query, values={"tenant": scope.tenant, "name": scope.key})
        if not rows:
            known = self._fetch(select(spaces.c.name).where(spaces.c.tenant == scope.tenant))
            raise missing_space(scope, [Scope.local(r["name"]).space for r in known])
        return Space(name=scope.space, speakers=json.loads(rows[0]["speakers"]))

    def has_space(self, scope: Scope) -> bool:
        return bool(self._fetch(select(spaces.c.name).where(self._in(spaces, scope))))

    def set_speakers(self, scope: Scope, speakers: Sequence[str]) -> None:
        self.get_space(scope)
        with self.transaction():
            self._run(update(spaces).where(self._in(spaces, scope)).values(speakers=json.dumps(list(speakers))))

    def list_spaces(self, tenant: str | None = None) -> list[SpaceSummary]:
        n_sessions = select(func.count()).where(sessions.c.tenant == spaces.c.tenant, sessions.c.space == spaces.c.name)
        in_space = (turns.c.tenant == spaces.c.tenant, turns.c.space == spaces.c.name)
        query = select(
            spaces.c.tenant,
            spaces.c.name,
            n_sessions.scalar_subquery().label("sessions"),
            select(func.count()).where(*in_space).scalar_subquery().label("turns"),
            select(func.min(self._bytewise(turns.c.time))).where(*in_space).scalar_subquery().label("first"),
            select(func.max(self._bytewise(turns.c.time))).where(*in_space).scalar_subquery().label("last"),
        )
        if tenant is not None:
            query = query.where(spaces.c.tenant == tenant)
        out: list[SpaceSummary] = []
        for r in sorted(self._fetch(query), key=lambda r: str(r["name"])):
            scope = Scope.local(r["name"])
            state = self.state_keys(scope, "build.")
            appended = self.count_turns_after(scope, int(state[STATE_TURN_SEQ])) if STATE_TURN_SEQ in state else 0
            out.append(
                SpaceSummary(
                    name=scope.space if tenant is not None else scope.key,
                    sessions=r["sessions"],
                    turns=r["turns"],
                    first_date=mappers.dt(r["first"]) if r["first"] else None,
                    last_date=mappers.dt(r["last"]) if r["last"] else None,
                    build_state=build_state(r["sessions"], state, appended_turns=appended),
                    build_mode=state.get(STATE_MODE),
                )
            )
        return out

    def _bytewise(self, column: object) -> object:
        """``column`` compared byte by byte (ISO times sort as text): PostgreSQL's "C" collation, SQLite's default."""
        return column.collate("C") if self.is_postgres else column  # type: ignore[attr-defined]

    def delete_space(self, scope: Scope) -> None:
        self.get_space(scope)
        with self.transaction():
            # Every table cascades from spaces; the link tables go first so that the cascade has less to check.
            for table in LINK_TABLES:
                self._run(delete(table).where(self._in(table, scope)))
            self._run(delete(spaces).where(self._in(spaces, scope)))

    # ------------------------------------------------------------------ sessions and turns
    def add_session(self, scope: Scope, session: Session, turns: Sequence[Turn]) -> None:
        self.add_sessions(scope, [(session, turns)])

    def add_sessions(self, scope: Scope, new: Sequence[tuple[Session, Sequence[Turn]]]) -> None:
        for session, rows in new:
            check_session_turns(session, rows)
        self.get_space(scope)
        key = (scope.tenant, scope.key)
        with self.transaction():
            self._insert_rows(sessions, mappers.SESSION_COLUMNS, [mappers.session_values(key, s) for s, _ in new])
            self._insert_turns(scope, [t for _, rows in new for t in rows])

    def _insert_turns(self, scope: Scope, rows: Sequence[Turn]) -> None:
        key = (scope.tenant, scope.key)
        self._insert_rows(turns, mappers.TURN_COLUMNS, [mappers.turn_values(key, t) for t in rows])

    def sessions(self, scope: Scope) -> list[Session]:
        rows = self._fetch(select(sessions).where(self._in(sessions, scope)).order_by(sessions.c.seq))
        return [mappers.session(r) for r in rows]

    def turns(self, scope: Scope, ids: Sequence[str] | None = None) -> list[Turn]:
        if ids is None:
            return self._turns(scope)
        found = self.find_turns(scope, ids)
        missing = set(ids) - {t.id for t in found}
        if missing:
            raise NotFoundError("Unknown turn ids in space {space!r}: {ids}", ids=sorted(missing)[:10], **scope.fields)
        return found

    def _turns(self, scope: Scope, *where: object, last: bool = False) -> list[Turn]:
        """Turns of ``space`` matching ``where``, in seq order (only the last one with ``last``)."""
        query = select(turns).where(self._in(turns, scope), *where)  # type: ignore[arg-type]
        query = query.order_by(turns.c.seq.desc()).limit(1) if last else query.order_by(turns.c.seq)
        return [mappers.turn(r) for r in self._fetch(query)]

    def last_turn(self, scope: Scope) -> Turn | None:
        found = self._turns(scope, last=True)
        return found[0] if found else None

    def last_session(self, scope: Scope) -> Session | None:
        query = select(sessions).where(self._in(sessions, scope)).order_by(sessions.c.seq.desc()).limit(1)
        rows = self._fetch(query)
        return mappers.session(rows[0]) if rows else None

    def find_turns(self, scope: Scope, ids: Sequence[str]) -> list[Turn]:
        with self.snapshot():
            found = [t for chunk in self._chunks(ids) for t in self._turns(scope, turns.c.id.in_(chunk))]
        return sorted(found, key=lambda t: t.seq)

    def find_sessions(self, scope: Scope, ids: Sequence[str]) -> list[Session]:
        found = [
            mappers.session(r)
            for chunk in self._chunks(ids)
            for r in self._fetch(select(sessions).where(self._in(sessions, scope), sessions.c.id.in_(chunk)))
        ]
        return sorted(found, key=lambda s: s.seq)

    def add_turns(self, scope: Scope, session_id: str, turns: Sequence[Turn]) -> None:
        if not self.find_sessions(scope, [session_id]):
            raise IntegrityError(
                "Space {space!r} has no session {session!r} to append turns to.", session=session_id, **scope.fields
            )
        for t in turns:
            if t.session_id != session_id:
                raise IntegrityError(f"Turn {t.id} names session {t.session_id!r}, expected {session_id!r}.")
        with self.transaction():
            self._insert_turns(scope, turns)

    def turns_after(self, scope: Scope, seq: int) -> list[Turn]:
        return self._turns(scope, turns.c.seq > seq)

    def count_turns_after(self, scope: Scope, seq: int) -> int:
        return int(self._scalar(select(func.count()).where(self._in(turns, scope), turns.c.seq > seq)))

    def count_turns_outside_scenes(self, scope: Scope) -> int:
        held = exists().where(
            scene_turns.c.tenant == turns.c.tenant,
            scene_turns.c.space == turns.c.space,
            scene_turns.c.turn_id == turns.c.id,
        )
        return int(self._scalar(select(func.count()).select_from(turns).where(self._in(turns, scope), ~held)))

    def delete_turns(self, scope: Scope, ids: Sequence[str]) -> None:
        with self.transaction():
            for chunk in self._chunks(ids):
                self._delete_in(scene_turns, scope, scene_turns.c.turn_id, chunk)
                self._delete_in(turns, scope, turns.c.id, chunk)

    def _delete_in(self, table: Table, scope: Scope, column: object, ids: Sequence[str]) -> int:
        """Delete the rows of ``space`` in ``table`` whose ``column`` is among ``ids`` (one chunk)."""
        return self._run(delete(table).where(self._in(table, scope), column.in_(ids)))  # type: ignore[attr-defined]
