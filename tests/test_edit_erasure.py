"""Erasure that does not depend on how the platform's SQLite was compiled: after ``tmem delete`` (``Memory.delete_space``
-> ``Store.delete_space`` + ``Store.scrub``) no byte of a canary is left in any file of the memory directory (WAL
included), even when every write happened with ``secure_delete`` off (SQLite's default on most platforms; simulated
with the pragma)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.stage_replies import scripted_reply
from tmem.cli.main import cli
from tmem.construct.pipeline import build_space
from tmem.embed.hashing import HashEmbedder
from tmem.errors import NotFoundError, StoreError
from tmem.ingest import import_file
from tmem.llm.scripted import scripted_llm
from tmem.memory import Memory
from tmem.scope import Scope
from tmem.store.sqlite import SQLiteStore

CANARY = "QUUXCANARY7731"


def _space(name: str, canary: str) -> dict[str, object]:
    lines = [
        f"My new passport number is {canary}, please remember it.",
        "Sure, I will keep it safe for you.",
        f"I also booked the clinic {canary} for Tuesday.",
        "Good luck with the appointment!",
        f"Yesterday I adopted a cat called {canary}.",
        "What a lovely name for a cat.",
    ]
    return {
        "space": name,
        "speakers": ["Ana", "Ben"],
        "sessions": [
            {
                "id": f"{name}-s{k}",
                "started_at": f"2024-0{k + 1}-01T10:00:00",
                "turns": [
                    {"speaker": "Ana" if i % 2 == 0 else "Ben", "text": text}
                    | ({"caption": f"a photo of {canary}"} if i == 0 else {})
                    for i, text in enumerate(lines)
                ],
            }
            for k in range(2)
        ],
    }


def _occurrences(home: Path, canary: str = CANARY) -> dict[str, int]:
    return {p.name: p.read_bytes().count(canary.encode()) for p in sorted(home.iterdir()) if p.is_file()}


def _populate(home: Path, *, secure_delete_off: bool) -> SQLiteStore:
    store = SQLiteStore.open(home / "tmem.db")
    if secure_delete_off:  # as on a platform whose SQLite defaults to it: every write below happens with it off
        with store._driver() as db:  # the simulation needs the writer's raw connection
            db.execute("PRAGMA secure_delete = OFF")
            db.execute("PRAGMA user_version = 0")  # nor has such a file the mark of one tmem always wrote
            assert db.execute("PRAGMA secure_delete").fetchone()[0] == 0
    for name, canary in (("secret", CANARY), ("keep", "nothing-to-see")):
        src = home.parent / f"{name}.json"
        src.write_text(json.dumps(_space(name, canary)), encoding="utf-8")
        import_file(store, src)
    return store


async def test_delete_erases_every_byte_even_when_secure_delete_was_off(tmp_path: Path) -> None:
    home = tmp_path / "home"
    store = _populate(home, secure_delete_off=True)
    llm = scripted_llm(store, fn=scripted_reply)  # the LLM log (responses) holds the canary too
    await build_space(store, Scope.local("secret"), llm=llm, embedder=HashEmbedder())
    assert any(CANARY in (c.response or "") for c in store.llm_calls(Scope.local("secret")))
    assert sum(_occurrences(home).values()) > 0
    keep_turns = store.turns(Scope.local("keep"))

    memory = Memory(store, embedder=HashEmbedder())
    assert memory.delete_space("secret").erased is True
    assert _occurrences(home) == {"tmem.db": 0, "tmem.db-shm": 0, "tmem.db-wal": 0}
    assert store.turns(Scope.local("keep")) == keep_turns and not store.has_space(Scope.local("secret"))
    store.close()
    assert sum(_occurrences(home).values()) == 0


def test_checkpoint_is_needed_and_suffices_when_secure_delete_is_on(tmp_path: Path) -> None:
    home = tmp_path / "home"
    store = _populate(home, secure_delete_off=False)
    with store._driver() as db:
        assert db.execute("PRAGMA secure_delete").fetchone()[0] == 1
    store.delete_space(Scope.local("secret"))
    # Deleted, but the WAL (and the main file, until a checkpoint) still hold older page images.
    assert sum(_occurrences(home).values()) > 0
    assert store.scrub(vacuum=False) is True
    assert sum(_occurrences(home).values()) == 0
    store.close()


def test_cli_delete_asks_unless_yes(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _populate(home, secure_delete_off=True).close()
    runner = CliRunner()
    env = {"TMEM_HOME": str(home)}
    refused = runner.invoke(cli, ["delete", "secret"], input="n\n", env=env)
    assert refused.exit_code == 1 and "Delete space 'secret' (2 sessions, 12 turns)" in refused.output
    assert "secret" in runner.invoke(cli, ["spaces"], env=env).output
    done = runner.invoke(cli, ["delete", "secret", "--yes"], env=env)
    assert done.exit_code == 0 and "Deleted space 'secret'." in done.output
    assert "secret" not in runner.invoke(cli, ["spaces"], env=env).output
    assert sum(_occurrences(home).values()) == 0
    missing = runner.invoke(cli, ["delete", "secret", "--yes"], env=env)
    assert missing.exit_code == 1 and isinstance(missing.exception, NotFoundError)


def test_scrub_refuses_to_run_inside_a_transaction(tmp_path: Path) -> None:
    store = SQLiteStore.open(tmp_path / "tmem.db")
    with pytest.raises(StoreError, match="inside a transaction"), store.transaction():
        store.scrub()
    assert store.scrub() is True
    store.close()


@pytest.mark.postgres
def test_postgres_scrub_runs_after_a_delete(pg_url: str) -> None:
    from tmem.store import open_store

    store = open_store(pg_url)
    try:
        store.ensure_space(Scope.local("secret"))
        store.delete_space(Scope.local("secret"))
        assert store.scrub() is True
        with pytest.raises(StoreError, match="inside a transaction"), store.transaction():
            store.scrub()
    finally:
        store.close()
