"""Erasure without a VACUUM on every forget (issue 32, item 2): a SQLite file every byte of which was written with
``secure_delete`` on (tmem created it, or a scrub rebuilt it once) carries a mark (``PRAGMA user_version``, revision
0004), and its scrubs only checkpoint the WAL; a file without the mark is rebuilt by its first scrub and marked. In
both cases no byte of the erased canary is left in any file. The statements are observed with SQLite's trace hook."""

from __future__ import annotations

from pathlib import Path

from tests.test_edit_erasure import _occurrences, _populate
from tmem.embed.hashing import HashEmbedder
from tmem.memory import Memory
from tmem.scope import Scope
from tmem.store.sqlite import SQLiteStore
from tmem.store.upgrade import SECURE_DELETE_MARK


def _traced(store: SQLiteStore) -> list[str]:
    statements: list[str] = []
    with store._driver() as db:  # the store's own writer connection: what it runs, as it runs it
        db.set_trace_callback(statements.append)
    return statements


def _vacuums(statements: list[str]) -> int:
    return sum(s.strip().upper() == "VACUUM" for s in statements)


def test_a_file_tmem_created_is_erased_without_rebuilding_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    store = _populate(home, secure_delete_off=False)
    assert store.always_secure()
    statements = _traced(store)
    memory = Memory(store, embedder=HashEmbedder())
    assert sum(_occurrences(home).values()) > 0
    assert memory.delete_space("secret").erased is True
    assert _vacuums(statements) == 0 and any("wal_checkpoint(TRUNCATE)" in s for s in statements)
    assert _occurrences(home) == {"tmem.db": 0, "tmem.db-shm": 0, "tmem.db-wal": 0}
    assert store.has_space(Scope.local("keep"))
    store.close()
    assert sum(_occurrences(home).values()) == 0


def test_a_file_written_without_secure_delete_is_rebuilt_once_then_marked(tmp_path: Path) -> None:
    home = tmp_path / "home"
    store = _populate(home, secure_delete_off=True)  # no mark: bytes of deleted rows may stay in free pages
    assert not store.always_secure()
    statements = _traced(store)
    memory = Memory(store, embedder=HashEmbedder())
    assert memory.delete_space("secret").erased is True
    assert _vacuums(statements) == 1
    assert sum(_occurrences(home).values()) == 0
    assert store.always_secure()  # rebuilt with secure_delete on: from now on a checkpoint suffices
    statements.clear()
    assert memory.delete_space("keep").erased is True
    assert _vacuums(statements) == 0
    store.close()
    assert sum(_occurrences(home).values()) == 0


def test_an_upgraded_file_is_not_marked(tmp_path: Path) -> None:
    path = tmp_path / "tmem.db"
    store = SQLiteStore.open(path)
    assert store._rows("PRAGMA user_version")[0][0] == SECURE_DELETE_MARK
    # As a file of the previous revision (written before the mark existed) stands
    store._exec("PRAGMA user_version = 0")
    store._exec("UPDATE alembic_version SET version_num = '0003'")
    store.close()
    again = SQLiteStore.open(path)  # upgraded to 0004 by this tmem: nothing says how its bytes were written
    assert again._rows("SELECT version_num FROM alembic_version")[0][0] == "0004"
    assert not again.always_secure()
    again.close()
