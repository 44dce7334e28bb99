"""SQLite implementation of :class:`tmem.store.base.Store`: one file in the memory directory, WAL journal, busy
timeout, foreign keys on. Every statement names its space."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from tmem.errors import IntegrityError, NotFoundError, StoreError
from tmem.models import (
    BuildMode,
    Item,
    ItemKind,
    LLMCall,
    PendingRequest,
    Persona,
    PersonaTrait,
    Scene,
    Session,
    Space,
    SpaceSummary,
    Topic,
    TopicSceneLink,
    Trigger,
    TriggerFamily,
    TriggerView,
    Turn,
)
from tmem.store.base import Vector, iter_batches
from tmem.store.migrations import migrate
from tmem.store.rules import build_state, check_items, check_session_turns, check_space_name, not_utf8
from tmem.store.sqlite_agent import AgentOps
from tmem.util.state import STATE_MODE, STATE_TURN_SEQ

_CHUNK = 500  # ids per IN (...) clause, well under SQLite's parameter limit


def _ts(value: datetime) -> str:
    return value.isoformat()


def _dt(value: str) -> datetime:
    return datetime.fromisoformat(value)


def _verb(sql: str) -> str:
    """The head of a statement for error messages (``INSERT INTO items``)."""
    return " ".join(sql.split("(")[0].split()[:4])


def _placeholders(n: int) -> str:
    return ",".join("?" * n)


def store_error(exc: sqlite3.Error, path: str, doing: str) -> StoreError:
    """The :class:`StoreError` (or :class:`IntegrityError`) that says what to do about a SQLite failure."""
    if isinstance(exc, sqlite3.IntegrityError):
        return IntegrityError(
            f"{exc} (while {doing} in {path}). Nothing of it was written; fix the records named and retry."
        )
    text = str(exc)
    if "locked" in text or "busy" in text:
        return StoreError(
            f"The memory store {path} is locked by another process (while {doing}): {text}. Nothing of it was written. "
            "Wait for the other tmem command (a build or import on the same --dir) to finish and rerun; for many "
            "concurrent writers use PostgreSQL (TMEM_DATABASE_URL=postgresql://...)."
        )
    if "readonly" in text or "read-only" in text:
        return StoreError(
            f"The memory store {path} is read-only (while {doing}): {text}. Give this user write access to the file "
            "and its directory, or point --dir/TMEM_HOME elsewhere."
        )
    if "disk" in text and ("full" in text or "I/O" in text):
        return StoreError(f"Writing the memory store {path} failed (while {doing}): {text}. Free disk space and rerun.")
    return StoreError(
        f"The memory store {path} failed while {doing}: {text}. Rerun the command; if it persists, run "
        "`tmem check` and restore the file from a backup."
    )


class SQLiteStore(AgentOps):
    """The default store. Open with :meth:`open`; ``":memory:"`` gives a private in-memory database (tests)."""

    def __init__(self, db: sqlite3.Connection, path: str) -> None:
        self._db = db
        self._path = path
        self._lock = threading.RLock()
        self._depth = 0

    # ------------------------------------------------------------------ lifecycle
    @classmethod
    def open(cls, path: str | Path, *, timeout_s: float = 30.0) -> SQLiteStore:
        """Open (creating and migrating) the file; a writer waits up to ``timeout_s`` for another one's lock."""
        target = str(path)
        if target != ":memory:":
            file = Path(target)
            try:
                file.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(
                    f"Cannot create the memory directory {file.parent}: {exc}. Choose another with --dir or TMEM_HOME."
                ) from exc
        try:
            db = sqlite3.connect(target, isolation_level=None, check_same_thread=False, timeout=timeout_s)
            db.execute("PRAGMA foreign_keys = ON")
            db.execute(f"PRAGMA busy_timeout = {int(timeout_s * 1000)}")
            db.execute("PRAGMA secure_delete = ON")  # deleted content is overwritten, whatever the platform default
            if target != ":memory:":
                db.execute("PRAGMA journal_mode = WAL")
                db.execute("PRAGMA synchronous = NORMAL")
            migrate(db)
        except sqlite3.OperationalError as exc:
            raise store_error(exc, target, "opening and migrating it") from exc
        except sqlite3.DatabaseError as exc:
            raise StoreError(
                f"Cannot open the memory store {target}: {exc}. Check the file is a tmem database and not in use "
                "by an incompatible version, or point --dir/TMEM_HOME elsewhere."
            ) from exc
        return cls(db, target)

    @property
    def path(self) -> str:
        return self._path

    def close(self) -> None:
        with self._lock:
            self._db.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        with self._lock:
            outer = self._depth == 0
            if outer:
                try:
                    self._db.execute("BEGIN IMMEDIATE")
                except sqlite3.Error as exc:
                    raise store_error(exc, self._path, "starting a write") from exc
            self._depth += 1
            try:
                yield
            except BaseException:
                self._depth -= 1
                if outer and self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise
            self._depth -= 1
            if outer:
                self._commit()

    def _commit(self) -> None:
        try:
            self._db.execute("COMMIT")
        except sqlite3.Error as exc:
            # A failed COMMIT leaves the transaction open: roll it back, or every later write would fail too.
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            raise store_error(exc, self._path, "committing") from exc

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        with self._lock:
            try:
                cur = self._db.execute(sql, params)
                return list(cur.fetchall())
            except sqlite3.Error as exc:
                raise store_error(exc, self._path, f"reading ({_verb(sql)})") from exc
            except UnicodeEncodeError as exc:
                raise not_utf8(exc) from exc

    def _exec(self, sql: str, params: Sequence[Any] = ()) -> None:
        try:
            self._db.execute(sql, params)
        except sqlite3.Error as exc:
            raise store_error(exc, self._path, f"running {_verb(sql)}") from exc
        except UnicodeEncodeError as exc:
            raise not_utf8(exc) from exc

    def _many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        try:
            self._db.executemany(sql, rows)
        except sqlite3.Error as exc:
            raise store_error(exc, self._path, f"running {_verb(sql)}") from exc
        except UnicodeEncodeError as exc:
            raise not_utf8(exc) from exc

    def _select_ids(self, table: str, space: str, ids: Sequence[str] | None, order: str) -> list[sqlite3.Row]:
        if ids is None:
            return self._rows(f"SELECT * FROM {table} WHERE space = ? ORDER BY {order}", (space,))
        rows: list[sqlite3.Row] = []
        for chunk in iter_batches(list(dict.fromkeys(ids)), _CHUNK):
            rows += self._rows(
                f"SELECT * FROM {table} WHERE space = ? AND id IN ({_placeholders(len(chunk))})",
                (space, *chunk),
            )
        return rows

    def _links(
        self, table: str, key: str, other: str, space: str, ids: Sequence[str] | None, found: list[str]
    ) -> list[sqlite3.Row]:
        """(key, other) link rows in position order: of the whole space, or of the ``found`` records only."""
        if ids is None:
            return self._rows(f"SELECT {key}, {other} FROM {table} WHERE space = ? ORDER BY {key}, position", (space,))
        out: list[sqlite3.Row] = []
        for chunk in iter_batches(found, _CHUNK):
            out += self._rows(
                f"SELECT {key}, {other} FROM {table} WHERE space = ? AND {key} IN ({_placeholders(len(chunk))}) "
                f"ORDER BY {key}, position",
                (space, *chunk),
            )
        return out

    # ------------------------------------------------------------------ spaces
    def ensure_space(self, name: str) -> Space:
        check_space_name(name)
        with self.transaction():
            self._exec("INSERT INTO spaces(name) VALUES (?) ON CONFLICT(name) DO NOTHING", (name,))
        return self.get_space(name)

    def get_space(self, name: str) -> Space:
        rows = self._rows("SELECT name, speakers FROM spaces WHERE name = ?", (name,))
        if not rows:
            known = [r[0] for r in self._rows("SELECT name FROM spaces ORDER BY name")]
            hint = f" Known spaces: {', '.join(known)}." if known else " No space exists yet: run `tmem import FILE`."
            raise NotFoundError(f"No space named {name!r}.{hint}")
        return Space(name=rows[0][0], speakers=json.loads(rows[0][1]))

    def has_space(self, name: str) -> bool:
        return bool(self._rows("SELECT 1 FROM spaces WHERE name = ?", (name,)))

    def set_speakers(self, space: str, speakers: Sequence[str]) -> None:
        self.get_space(space)
        with self.transaction():
            self._exec("UPDATE spaces SET speakers = ? WHERE name = ?", (json.dumps(list(speakers)), space))

    def list_spaces(self) -> list[SpaceSummary]:
        out: list[SpaceSummary] = []
        for (name,) in self._rows("SELECT name FROM spaces ORDER BY name"):
            n_sessions = self._rows("SELECT COUNT(*) FROM sessions WHERE space = ?", (name,))[0][0]
            n_turns, first, last = self._rows(
                "SELECT COUNT(*), MIN(time), MAX(time) FROM turns WHERE space = ?", (name,)
            )[0]
            state = self.state_keys(name, "build.")
            appended = self.count_turns_after(name, int(state[STATE_TURN_SEQ])) if STATE_TURN_SEQ in state else 0
            out.append(
                SpaceSummary(
                    name=name,
                    sessions=n_sessions,
                    turns=n_turns,
                    first_date=_dt(first) if first else None,
                    last_date=_dt(last) if last else None,
                    build_state=build_state(n_sessions, state, appended_turns=appended),
                    build_mode=state.get(STATE_MODE),
                )
            )
        return out

    def delete_space(self, name: str) -> None:
        self.get_space(name)
        with self.transaction():
            # Children first: composite foreign keys cascade from their parents, but be explicit and cheap.
            for table in ("scene_turns", "topic_scenes", "item_scenes", "trigger_views"):
                self._exec(f"DELETE FROM {table} WHERE space = ?", (name,))
            self._exec("DELETE FROM spaces WHERE name = ?", (name,))

    def scrub(self, *, vacuum: bool = True) -> bool:
        """Leave no bytes of deleted content in the database files (see docs/reliability.md, "Erasure").

        Deletions overwrite content (``secure_delete`` is on for every connection tmem opens); this then checkpoints
        the WAL into the main file and truncates it, so no older page image survives in the WAL. ``vacuum`` (the
        default) also rebuilds the file, which is needed for content written while ``secure_delete`` was off (by an
        older tmem or another tool): such content may survive in free pages and unused parts of pages. Returns False
        when another connection's open read kept the WAL from being emptied (then run it again once it is closed).
        Must not be called inside a transaction.
        """
        with self._lock:
            if self._depth:
                raise StoreError("scrub() cannot run inside a transaction: call it after the deletion has committed.")
            self._db.execute("PRAGMA secure_delete = ON")
            if self._path == ":memory:":
                return True
            busy = self._checkpoint()
            if vacuum:
                self._db.execute("VACUUM")
                busy = self._checkpoint()
            return not busy

    def _checkpoint(self) -> bool:
        """TRUNCATE checkpoint; True when it could not complete (a reader of another connection is in the way)."""
        busy, _log, _done = self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        return bool(busy)

    # ------------------------------------------------------------------ sessions and turns
    def add_session(self, space: str, session: Session, turns: Sequence[Turn]) -> None:
        check_session_turns(session, turns)
        self.get_space(space)
        with self.transaction():
            self._exec(
                "INSERT INTO sessions(space, id, seq, started_at, content_hash) VALUES (?, ?, ?, ?, ?)",
                (space, session.id, session.seq, _ts(session.started_at), session.content_hash),
            )
            self._many(
                "INSERT INTO turns(space, id, session_id, seq, speaker, text, time, caption) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [(space, t.id, t.session_id, t.seq, t.speaker, t.text, _ts(t.time), t.caption) for t in turns],
            )

    def sessions(self, space: str) -> list[Session]:
        return [
            Session(id=r[1], seq=r[2], started_at=_dt(r[3]), content_hash=r[4])
            for r in self._rows(
                "SELECT space, id, seq, started_at, content_hash FROM sessions WHERE space = ? ORDER BY seq",
                (space,),
            )
        ]

    def turns(self, space: str, ids: Sequence[str] | None = None) -> list[Turn]:
        rows = self._select_ids("turns", space, ids, "seq")
        found = [
            Turn(id=r[1], session_id=r[2], seq=r[3], speaker=r[4], text=r[5], time=_dt(r[6]), caption=r[7])
            for r in rows
        ]
        if ids is not None:
            missing = set(ids) - {t.id for t in found}
            if missing:
                raise NotFoundError(f"Unknown turn ids in space {space!r}: {sorted(missing)[:10]}")
        return sorted(found, key=lambda t: t.seq)

    # ------------------------------------------------------------------ scenes
    def put_scenes(self, space: str, scenes: Sequence[Scene]) -> None:
        with self.transaction():
            for s in scenes:
                self._exec(
                    'INSERT INTO scenes(space, id, seq, title, summary, narrative, start, "end", mode) '
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(space, id) DO UPDATE SET seq = excluded.seq, "
                    "title = excluded.title, summary = excluded.summary, narrative = excluded.narrative, "
                    'start = excluded.start, "end" = excluded."end", mode = excluded.mode',
                    (
                        space,
                        s.id,
                        s.seq,
                        s.title,
                        s.summary,
                        s.narrative,
                        _ts(s.start),
                        _ts(s.end),
                        s.mode.value,
                    ),
                )
                self._exec("DELETE FROM scene_turns WHERE space = ? AND scene_id = ?", (space, s.id))
            for s in scenes:
                for pos, tid in enumerate(s.turn_ids):
                    try:
                        self._db.execute(
                            "INSERT INTO scene_turns(space, scene_id, turn_id, position) VALUES (?, ?, ?, ?)",
                            (space, s.id, tid, pos),
                        )
                    except sqlite3.OperationalError as exc:
                        raise store_error(exc, self._path, "writing scene turns") from exc
                    except sqlite3.IntegrityError as exc:
                        owner = self._rows(
                            "SELECT scene_id FROM scene_turns WHERE space = ? AND turn_id = ?", (space, tid)
                        )
                        where = f"already in scene {owner[0][0]!r}" if owner else "not a turn of this space"
                        raise IntegrityError(
                            f"Scene {s.id!r} in space {space!r} claims turn {tid!r}, which is {where}: "
                            "every turn belongs to exactly one scene."
                        ) from exc

    def scenes(self, space: str, ids: Sequence[str] | None = None) -> list[Scene]:
        rows = self._select_ids("scenes", space, ids, "seq")
        if not rows:
            return []
        turn_map: dict[str, list[str]] = {}
        for scene_id, turn_id in self._links("scene_turns", "scene_id", "turn_id", space, ids, [r[1] for r in rows]):
            turn_map.setdefault(scene_id, []).append(turn_id)
        out = [
            Scene(
                id=r[1],
                seq=r[2],
                title=r[3],
                summary=r[4],
                narrative=r[5],
                start=_dt(r[6]),
                end=_dt(r[7]),
                mode=BuildMode(r[8]),
                turn_ids=turn_map.get(r[1], []),
            )
            for r in rows
        ]
        return sorted(out, key=lambda s: (s.seq, s.id))

    def delete_scenes(self, space: str, ids: Sequence[str]) -> None:
        with self.transaction():
            for chunk in iter_batches(list(ids), _CHUNK):
                marks = _placeholders(len(chunk))
                self.delete_triggers(space, chunk)
                for table in ("scene_turns", "topic_scenes", "item_scenes"):
                    self._exec(f"DELETE FROM {table} WHERE space = ? AND scene_id IN ({marks})", (space, *chunk))
                self._exec(f"DELETE FROM scenes WHERE space = ? AND id IN ({marks})", (space, *chunk))

    # ------------------------------------------------------------------ topics
    def put_topics(self, space: str, topics: Sequence[Topic]) -> None:
        with self.transaction():
            self._many(
                "INSERT INTO topics(space, id, seq, label, description) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT(space, id) DO UPDATE SET seq = excluded.seq, label = excluded.label, "
                "description = excluded.description",
                [(space, t.id, t.seq, t.label, t.description) for t in topics],
            )

    def topics(self, space: str, ids: Sequence[str] | None = None) -> list[Topic]:
        rows = self._select_ids("topics", space, ids, "seq")
        return sorted(
            (Topic(id=r[1], seq=r[2], label=r[3], description=r[4]) for r in rows),
            key=lambda t: (t.seq, t.id),
        )

    def link_topics(self, space: str, links: Sequence[TopicSceneLink]) -> None:
        with self.transaction():
            self._many(
                "INSERT INTO topic_scenes(space, topic_id, scene_id) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                [(space, link.topic_id, link.scene_id) for link in links],
            )

    def topic_links(self, space: str) -> list[TopicSceneLink]:
        return [
            TopicSceneLink(topic_id=r[0], scene_id=r[1])
            for r in self._rows(
                "SELECT topic_id, scene_id FROM topic_scenes WHERE space = ? ORDER BY topic_id, scene_id",
                (space,),
            )
        ]

    def delete_topics(self, space: str, ids: Sequence[str]) -> None:
        with self.transaction():
            for chunk in iter_batches(list(ids), _CHUNK):
                marks = _placeholders(len(chunk))
                self._exec(f"DELETE FROM topic_scenes WHERE space = ? AND topic_id IN ({marks})", (space, *chunk))
                self._exec(f"DELETE FROM topics WHERE space = ? AND id IN ({marks})", (space, *chunk))

    # ------------------------------------------------------------------ items
    def put_items(self, space: str, items: Sequence[Item]) -> None:
        check_items(space, items)
        with self.transaction():
            forgotten = self.tombstoned(space, "item", [it.id for it in items])
            for it in items:
                if it.id in forgotten:
                    continue  # a forgotten item never comes back (tombstone)
                self._exec(
                    "INSERT INTO items(space, id, seq, text, kind, topic_id, speaker, date, supersedes, "
                    "superseded_by, turn_ids, mode, date_end, date_precision, conflicts_with) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                    "ON CONFLICT(space, id) DO UPDATE SET seq = excluded.seq, text = excluded.text, "
                    "kind = excluded.kind, topic_id = excluded.topic_id, speaker = excluded.speaker, "
                    "date = excluded.date, supersedes = excluded.supersedes, superseded_by = excluded.superseded_by, "
                    "turn_ids = excluded.turn_ids, mode = excluded.mode, date_end = excluded.date_end, "
                    "date_precision = excluded.date_precision, conflicts_with = excluded.conflicts_with",
                    (
                        space,
                        it.id,
                        it.seq,
                        it.text,
                        it.kind.value,
                        it.topic_id,
                        it.speaker,
                        it.date,
                        it.supersedes,
                        it.superseded_by,
                        json.dumps(it.turn_ids),
                        it.mode.value,
                        it.date_end,
                        it.date_precision,
                        json.dumps(it.conflicts_with),
                    ),
                )
                self._exec("DELETE FROM item_scenes WHERE space = ? AND item_id = ?", (space, it.id))
                self._many(
                    "INSERT INTO item_scenes(space, item_id, scene_id, position) VALUES (?, ?, ?, ?)",
                    [(space, it.id, sid, pos) for pos, sid in enumerate(dict.fromkeys(it.scene_ids))],
                )

    def items(self, space: str, ids: Sequence[str] | None = None) -> list[Item]:
        rows = self._select_ids("items", space, ids, "seq")
        if not rows:
            return []
        links: dict[str, list[str]] = {}
        for item_id, scene_id in self._links("item_scenes", "item_id", "scene_id", space, ids, [r[1] for r in rows]):
            links.setdefault(item_id, []).append(scene_id)
        # columns added by later migrations, read by name (their position depends on the migration order)
        extra = {
            r[0]: (r[1], r[2], r[3])
            for r in self._rows(
                "SELECT id, date_end, date_precision, conflicts_with FROM items WHERE space = ?", (space,)
            )
        }
        out = [
            Item(
                id=r[1],
                seq=r[2],
                text=r[3],
                kind=ItemKind(r[4]),
                topic_id=r[5],
                speaker=r[6],
                date=r[7],
                supersedes=r[8],
                superseded_by=r[9],
                turn_ids=json.loads(r[10]),
                mode=BuildMode(r[11]),
                scene_ids=links.get(r[1], []),
                date_end=extra[r[1]][0],
                date_precision=extra[r[1]][1],
                conflicts_with=json.loads(extra[r[1]][2]),
            )
            for r in rows
        ]
        return sorted(out, key=lambda i: (i.seq, i.id))

    def delete_items(self, space: str, ids: Sequence[str]) -> None:
        with self.transaction():
            for chunk in iter_batches(list(ids), _CHUNK):
                marks = _placeholders(len(chunk))
                self.delete_triggers(space, chunk)
                self._exec(f"DELETE FROM item_scenes WHERE space = ? AND item_id IN ({marks})", (space, *chunk))
                self._exec(f"DELETE FROM items WHERE space = ? AND id IN ({marks})", (space, *chunk))

    # ------------------------------------------------------------------ triggers
    def put_triggers(self, space: str, triggers: Sequence[Trigger]) -> None:
        with self.transaction():
            for tr in triggers:
                self._exec(
                    "INSERT INTO triggers(space, id, family, host_kind, host_id, grp, fields) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(space, id) DO UPDATE SET family = excluded.family, "
                    "host_kind = excluded.host_kind, host_id = excluded.host_id, grp = excluded.grp, "
                    "fields = excluded.fields",
                    (
                        space,
                        tr.id,
                        tr.family.value,
                        tr.host_kind,
                        tr.host_id,
                        tr.group,
                        json.dumps(tr.fields),
                    ),
                )
                self._exec("DELETE FROM trigger_views WHERE space = ? AND trigger_id = ?", (space, tr.id))
                self._many(
                    "INSERT INTO trigger_views(space, trigger_id, position, name, text) VALUES (?, ?, ?, ?, ?)",
                    [(space, tr.id, pos, v.name, v.text) for pos, v in enumerate(tr.views)],
                )

    def triggers(
        self,
        space: str,
        *,
        family: TriggerFamily | None = None,
        host_ids: Sequence[str] | None = None,
    ) -> list[Trigger]:
        sql = "SELECT id, family, host_kind, host_id, grp, fields FROM triggers WHERE space = ?"
        params: list[Any] = [space]
        if family is not None:
            sql += " AND family = ?"
            params.append(family.value)
        rows: list[sqlite3.Row] = []
        if host_ids is None:
            rows = self._rows(sql, params)
        else:
            for chunk in iter_batches(list(dict.fromkeys(host_ids)), _CHUNK):
                rows += self._rows(sql + f" AND host_id IN ({_placeholders(len(chunk))})", [*params, *chunk])
        views: dict[str, list[TriggerView]] = {}
        for trigger_id, name, text in self._view_rows(space, family, [r[0] for r in rows], whole=host_ids is None):
            views.setdefault(trigger_id, []).append(TriggerView(name=name, text=text))
        out = [
            Trigger(
                id=r[0],
                family=TriggerFamily(r[1]),
                host_kind=r[2],
                host_id=r[3],
                group=r[4],
                fields=json.loads(r[5]),
                views=views.get(r[0], []),
            )
            for r in rows
        ]
        return sorted(out, key=lambda t: (t.host_id, t.family.value, t.group, t.id))

    def _view_rows(
        self, space: str, family: TriggerFamily | None, trigger_ids: list[str], *, whole: bool
    ) -> list[sqlite3.Row]:
        """Views of the selected triggers only, in (trigger, position) order: of one family, or of the given ids."""
        if whole:
            sql = (
                "SELECT v.trigger_id, v.name, v.text FROM trigger_views v JOIN triggers t "
                "ON t.space = v.space AND t.id = v.trigger_id WHERE v.space = ?"
            )
            params: list[Any] = [space]
            if family is not None:
                sql += " AND t.family = ?"
                params.append(family.value)
            return self._rows(sql + " ORDER BY v.trigger_id, v.position", params)
        out: list[sqlite3.Row] = []
        for chunk in iter_batches(trigger_ids, _CHUNK):
            out += self._rows(
                f"SELECT trigger_id, name, text FROM trigger_views WHERE space = ? AND trigger_id IN "
                f"({_placeholders(len(chunk))}) ORDER BY trigger_id, position",
                (space, *chunk),
            )
        return out

    def delete_triggers(self, space: str, host_ids: Sequence[str]) -> None:
        with self.transaction():
            for chunk in iter_batches(list(host_ids), _CHUNK):
                marks = _placeholders(len(chunk))
                self._exec(
                    f"DELETE FROM trigger_views WHERE space = ? AND trigger_id IN "
                    f"(SELECT id FROM triggers WHERE space = ? AND host_id IN ({marks}))",
                    (space, space, *chunk),
                )
                self._exec(f"DELETE FROM triggers WHERE space = ? AND host_id IN ({marks})", (space, *chunk))

    # ------------------------------------------------------------------ persona
    def put_persona(self, space: str, persona: Persona) -> None:
        traits = json.dumps([t.model_dump() for t in persona.traits])
        with self.transaction():
            self._exec(
                "INSERT INTO personas(space, speaker, traits, summary) VALUES (?, ?, ?, ?) "
                "ON CONFLICT(space, speaker) DO UPDATE SET traits = excluded.traits, summary = excluded.summary",
                (space, persona.speaker, traits, persona.summary),
            )

    def personas(self, space: str) -> list[Persona]:
        return [
            Persona(speaker=r[0], traits=[PersonaTrait(**t) for t in json.loads(r[1])], summary=r[2])
            for r in self._rows(
                "SELECT speaker, traits, summary FROM personas WHERE space = ? ORDER BY speaker", (space,)
            )
        ]

    def delete_personas(self, space: str) -> None:
        with self.transaction():
            self._exec("DELETE FROM personas WHERE space = ?", (space,))

    # ------------------------------------------------------------------ build checkpoints
    def get_state(self, space: str, key: str) -> str | None:
        rows = self._rows("SELECT value FROM build_state WHERE space = ? AND key = ?", (space, key))
        return str(rows[0][0]) if rows else None

    def set_state(self, space: str, key: str, value: str | None) -> None:
        with self.transaction():
            if value is None:
                self._exec("DELETE FROM build_state WHERE space = ? AND key = ?", (space, key))
            else:
                self._exec(
                    "INSERT INTO build_state(space, key, value) VALUES (?, ?, ?) "
                    "ON CONFLICT(space, key) DO UPDATE SET value = excluded.value",
                    (space, key, value),
                )

    def state_keys(self, space: str, prefix: str = "") -> dict[str, str]:
        escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        return {
            r[0]: r[1]
            for r in self._rows(
                "SELECT key, value FROM build_state WHERE space = ? AND key LIKE ? ESCAPE '\\' ORDER BY key",
                (space, escaped + "%"),
            )
        }

    # ------------------------------------------------------------------ embeddings cache
    def get_embeddings(self, space: str, model_id: str, text_hashes: Sequence[str]) -> dict[str, Vector]:
        out: dict[str, Vector] = {}
        for chunk in iter_batches(list(dict.fromkeys(text_hashes)), _CHUNK):
            for text_hash, dim, blob in self._rows(
                "SELECT text_hash, dim, vector FROM embeddings WHERE space = ? AND model_id = ? "
                f"AND text_hash IN ({_placeholders(len(chunk))})",
                (space, model_id, *chunk),
            ):
                vec = np.frombuffer(blob, dtype=np.float32)
                if vec.shape[0] != dim:
                    raise StoreError(f"Corrupt embedding for {text_hash} ({model_id}); delete it and rebuild.")
                out[text_hash] = vec.copy()
        return out

    def put_embeddings(self, space: str, model_id: str, vectors: dict[str, Vector]) -> None:
        with self.transaction():
            self._many(
                "INSERT INTO embeddings(space, model_id, text_hash, dim, vector) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT(space, model_id, text_hash) DO UPDATE SET dim = excluded.dim, vector = excluded.vector",
                [
                    (space, model_id, h, int(v.shape[0]), np.ascontiguousarray(v, dtype=np.float32).tobytes())
                    for h, v in vectors.items()
                ],
            )

    # ------------------------------------------------------------------ LLM log, cache and batch protocol
    def log_llm_call(self, call: LLMCall) -> None:
        with self.transaction():
            # The log belongs to a space; calls made before any import (e.g. an evaluation judge) create it.
            self._exec("INSERT INTO spaces(name) VALUES (?) ON CONFLICT(name) DO NOTHING", (call.space,))
            self._exec(
                "INSERT INTO llm_calls(space, stage, model, request_hash, tokens_in, tokens_out, latency_ms, "
                "attempts, outcome, created_at, response, error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    call.space,
                    call.stage,
                    call.model,
                    call.request_hash,
                    call.tokens_in,
                    call.tokens_out,
                    call.latency_ms,
                    call.attempts,
                    call.outcome,
                    _ts(call.created_at),
                    call.response,
                    call.error,
                ),
            )

    def cached_response(self, space: str, request_hash: str) -> str | None:
        rows = self._rows(
            "SELECT response FROM llm_calls WHERE space = ? AND request_hash = ? AND outcome IN ('ok', 'batch') "
            "AND response IS NOT NULL ORDER BY id DESC LIMIT 1",
            (space, request_hash),
        )
        return str(rows[0][0]) if rows else None

    def llm_calls(self, space: str | None = None) -> list[LLMCall]:
        sql = (
            "SELECT space, stage, model, request_hash, tokens_in, tokens_out, latency_ms, attempts, outcome, "
            "created_at, response, error FROM llm_calls"
        )
        rows = self._rows(sql + " WHERE space = ? ORDER BY id", (space,)) if space else self._rows(sql + " ORDER BY id")
        return [
            LLMCall(
                space=r[0],
                stage=r[1],
                model=r[2],
                request_hash=r[3],
                tokens_in=r[4],
                tokens_out=r[5],
                latency_ms=r[6],
                attempts=r[7],
                outcome=r[8],
                created_at=_dt(r[9]),
                response=r[10],
                error=r[11],
            )
            for r in rows
        ]

    def put_pending(self, requests: Sequence[PendingRequest]) -> None:
        with self.transaction():
            for space in {r.space for r in requests}:
                self._exec("INSERT INTO spaces(name) VALUES (?) ON CONFLICT(name) DO NOTHING", (space,))
            self._many(
                "INSERT INTO pending_requests(space, request_hash, stage, body) VALUES (?, ?, ?, ?) "
                "ON CONFLICT(space, request_hash) DO UPDATE SET stage = excluded.stage, body = excluded.body",
                [(r.space, r.request_hash, r.stage, r.body) for r in requests],
            )

    def pending(self, space: str | None = None) -> list[PendingRequest]:
        sql = "SELECT space, request_hash, stage, body FROM pending_requests"
        rows = (
            self._rows(sql + " WHERE space = ? ORDER BY rowid", (space,))
            if space
            else self._rows(sql + " ORDER BY rowid")
        )
        return [PendingRequest(space=r[0], request_hash=r[1], stage=r[2], body=r[3]) for r in rows]

    def delete_pending(self, request_hashes: Sequence[str], *, space: str | None = None) -> None:
        where, scope = ("space = ? AND ", (space,)) if space is not None else ("", ())
        with self.transaction():
            for chunk in iter_batches(list(request_hashes), _CHUNK):
                self._exec(
                    f"DELETE FROM pending_requests WHERE {where}request_hash IN ({_placeholders(len(chunk))})",
                    (*scope, *chunk),
                )
