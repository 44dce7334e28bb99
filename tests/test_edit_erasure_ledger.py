"""Erasure that says what is true (issue 20, finding 4) and leaves nothing on any node's disk (issue 23, part 1).

* A deletion or forget during another connection's open read reports "erasure pending", never success; the erasure
  ledger shows it pending; it is finished later without another request (the upkeep a running server does), after
  which no file holds the canary.
* Two nodes (two ``MemoryCore``s over one store, each with its own folder of saved indices, as two servers on one
  PostgreSQL): a forget or a delete on node A leaves no file under node B's folder holding the canary once B has run
  its erasure check, on both backends.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import httpx
import pytest

from tests.support.canary import files_holding
from tests.support.live_server import LiveServer
from tests.test_service import NO_AUTO_BUILD, make_keys
from tmem.core import MemoryCore
from tmem.edit.erasure import POSTGRES_SCOPE, SQLITE_SCOPE, LocalSweep, finish_erasures
from tmem.edit.forget import canary_free
from tmem.embed.hashing import HashEmbedder
from tmem.index.lexical import LexicalStore
from tmem.ingest import import_file
from tmem.memory import Memory
from tmem.scope import Scope
from tmem.service import create_app
from tmem.settings import Settings
from tmem.store import open_store
from tmem.store.base import Store

CANARY = "ZORBLECANARY4417"


def _conversation(name: str, canary: str) -> dict[str, object]:
    lines = [
        f"My locker code is {canary}, please remember it.",
        "Sure, noted.",
        "I also started pottery classes on Monday.",
        "That sounds relaxing!",
    ]
    return {
        "space": name,
        "speakers": ["Ana", "Ben"],
        "sessions": [
            {
                "id": f"{name}-s1",
                "started_at": "2024-03-01T10:00:00",
                "turns": [{"speaker": "Ana" if i % 2 == 0 else "Ben", "text": t} for i, t in enumerate(lines)],
            }
        ],
    }


def _import(store: Store, folder: Path, name: str, canary: str = CANARY) -> None:
    src = folder / f"{name}.json"
    src.write_text(json.dumps(_conversation(name, canary)), encoding="utf-8")
    import_file(store, src)


class Reader:
    """Another connection with an open read on a memory directory's database (as another process would hold)."""

    def __init__(self) -> None:
        self.conn: sqlite3.Connection | None = None

    def open(self, db: Path) -> None:
        self.conn = sqlite3.connect(db, isolation_level=None)
        self.conn.execute("BEGIN")
        self.conn.execute("SELECT COUNT(*) FROM spaces").fetchone()

    def end(self) -> None:
        if self.conn is not None:
            self.conn.execute("COMMIT")


@pytest.fixture
def reader() -> Iterator[Reader]:
    held = Reader()
    yield held
    if held.conn is not None:
        held.conn.close()


def test_delete_and_forget_during_an_open_read_are_pending_until_upkeep_finishes_them(
    tmp_path: Path, reader: Reader
) -> None:
    home = tmp_path / "home"
    memory = Memory.open(home, embedder=HashEmbedder())
    _import(memory.store, tmp_path, "secret")
    _import(memory.store, tmp_path, "other", canary="OTHERCANARY0815")
    memory.build("secret")
    memory.build("other")
    reader.open(home / "tmem.db")

    done = memory.delete_space("secret")
    assert done.erased is False and done.scope == SQLITE_SCOPE
    assert not memory.store.has_space(Scope.local("secret"))  # deleted: only the bytes are pending
    assert [(e.seq, e.space, e.kind, e.erased) for e in memory.erasures()] == [
        (done.erasure, "secret", "delete", False)
    ]
    assert files_holding(home, CANARY)  # the open read keeps the old pages in the write-ahead log

    turn = memory.store.turns(Scope.local("other"))[0]
    report = memory.forget("other", turn_ids=[turn.id])
    assert report.erased is False and report.erasure > done.erasure
    assert [e.erasure for e in [done]] and len(memory.erasures(pending=True)) == 2

    assert memory.upkeep() is False  # still held open: nothing is claimed
    reader.end()
    assert memory.upkeep() is True
    assert memory.erasures(pending=True) == [] and all(e.erased for e in memory.erasures())
    assert files_holding(home, CANARY) == [] and files_holding(home, "OTHERCANARY0815") == []
    memory.close()


def test_service_delete_during_an_open_read_says_pending_and_finishes_without_another_request(
    tmp_path: Path, reader: Reader
) -> None:
    settings = Settings(home=tmp_path / "home", llm="none", embed_backend="hash", upkeep_seconds=0.2, **NO_AUTO_BUILD)  # type: ignore[arg-type]
    keys = make_keys(settings, "acme", "beta")
    with (
        LiveServer(create_app(settings)) as server,
        httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {keys['acme']}"}) as acme,
        httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {keys['beta']}"}) as beta,
    ):
        _delete_during_a_read(settings, acme, beta, reader)


def _delete_during_a_read(settings: Settings, acme: httpx.Client, beta: httpx.Client, reader: Reader) -> None:
    text = f"My locker code is {CANARY}."
    added = acme.post("/v1/spaces/notes/messages", json={"messages": [{"speaker": "ana", "text": text}]})
    assert added.status_code == 200, added.text
    reader.open(settings.home / "tmem.db")
    deleted = acme.delete("/v1/spaces/notes")
    assert deleted.status_code == 200, deleted.text
    body = deleted.json()
    assert body["erased"] is False and body["status"] == "deleted, erasure pending"
    assert body["scope"] == SQLITE_SCOPE
    entry = acme.get(f"/v1/erasures/{body['erasure']}").json()
    assert entry == {
        "erasure": body["erasure"],
        "space": "notes",
        "kind": "delete",
        "erased": False,
        "status": "erasure pending",
        "stage": "deleted",
        "scope": SQLITE_SCOPE,
    }
    assert beta.get(f"/v1/erasures/{body['erasure']}").status_code == 404  # another tenant's erasure
    assert beta.get("/v1/erasures").json() == []
    assert files_holding(settings.home, CANARY)
    reader.end()
    deadline = time.monotonic() + 30
    while not _ledger_says_erased(settings, body["erasure"]) and time.monotonic() < deadline:
        time.sleep(0.1)  # no request to the server: its upkeep finishes the erasure
    assert files_holding(settings.home, CANARY) == []
    assert acme.get(f"/v1/erasures/{body['erasure']}").json()["status"] == "erased"
    assert acme.get("/v1/erasures", params={"pending": True}).json() == []


def _ledger_says_erased(settings: Settings, seq: int) -> bool:
    with closing(sqlite3.connect(settings.home / "tmem.db")) as conn:  # read directly: no request to the server
        return bool(conn.execute("SELECT erased FROM erasures WHERE seq = ?", (seq,)).fetchone()[0])


def _node(store: Store, tmp_path: Path, name: str) -> MemoryCore:
    """One server's core: its own home and folder of saved indices, the shared store."""
    settings = Settings(home=tmp_path / name, lexical_dir=tmp_path / name / "lexical", embed_backend="hash")
    return MemoryCore(store, settings, embedder=HashEmbedder())


@pytest.mark.parametrize("what", ["forget", "delete"])
def test_an_erasure_on_one_node_leaves_no_copy_on_another_nodes_disk(store_url: str, tmp_path: Path, what: str) -> None:
    store_a, store_b = open_store(store_url), open_store(store_url)
    a, b = _node(store_a, tmp_path, "a"), _node(store_b, tmp_path, "b")
    _import(store_a, tmp_path, "secret")
    a.build("secret")
    b.search("secret", "locker code")
    assert files_holding(
        tmp_path / "b", CANARY
    )  # node B saved the space's BM25 indices (their vocabulary holds the canary)

    if what == "forget":
        canary_turns = [t.id for t in store_a.turns(Scope.local("secret")) if CANARY in t.text]
        report = a.forget("secret", turn_ids=canary_turns)
        assert report.erased is True
        assert report.scope == (SQLITE_SCOPE if store_url.startswith("sqlite") else POSTGRES_SCOPE)
    else:
        assert a.delete_space("secret").erased is True
    assert files_holding(tmp_path / "a", CANARY) == []  # the node that erased dropped its own copies at once
    assert b.upkeep() is True  # node B's erasure check (a running server does it every few seconds)
    assert files_holding(tmp_path / "b", CANARY) == []
    if what == "forget":
        assert canary_free(b.search("secret", "locker code").model_dump_json().encode(), CANARY)
        assert files_holding(tmp_path / "b", CANARY) == []  # B's new saves hold only what remains
    for core in (a, b):
        core.store.close()


def test_a_node_without_an_erasure_mark_clears_its_saves_once(store_url: str, tmp_path: Path) -> None:
    store = open_store(store_url)
    lexical = tmp_path / "lexical"
    (lexical / "somewhere").mkdir(parents=True)
    (lexical / "somewhere" / "vocab.index.json").write_text(CANARY, encoding="utf-8")  # a save of unknown age
    sweep = LocalSweep(store, LexicalStore(lexical), lambda _space: None)
    assert sweep.run() == ["*"] and files_holding(lexical, CANARY) == []
    (lexical / "later").mkdir()
    (lexical / "later" / "x.json").write_text("kept", encoding="utf-8")
    assert sweep.run() == [] and (lexical / "later" / "x.json").is_file()  # the mark is written: no second clear
    assert LocalSweep(store, LexicalStore(lexical), lambda _space: None).run() == []  # read back by a new process
    store.close()


def test_finish_erasures_marks_only_what_a_completed_scrub_covers(tmp_path: Path, reader: Reader) -> None:
    home = tmp_path / "home"
    home.mkdir()
    store = open_store(f"sqlite:///{home / 'tmem.db'}")
    _import(store, tmp_path, "x")
    with store.transaction():
        store.delete_space(Scope.local("x"))
        first = store.add_erasure(Scope.local("x"), "delete")
    reader.open(home / "tmem.db")
    assert finish_erasures(store) is False and [e.seq for e in store.erasures(pending=True)] == [first]
    reader.end()
    assert finish_erasures(store) is True and store.erasures(pending=True) == []
    store.close()


@pytest.mark.postgres
def test_postgres_erasure_waits_only_for_snapshots_older_than_the_deletion(pg_url: str, tmp_path: Path) -> None:
    import psycopg

    store = open_store(pg_url)
    _import(store, tmp_path, "gone")
    core = _node(store, tmp_path, "n")
    with psycopg.connect(pg_url) as old, psycopg.connect(pg_url) as new:
        old.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        old.execute("SELECT COUNT(*) FROM turns").fetchone()  # a snapshot that still sees the space's rows
        done = core.delete_space("gone")
        assert done.erased is False and done.scope == POSTGRES_SCOPE
        new.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        # A snapshot taken after the deletion does not hold it up (one that still holds a lock on a table, an open
        # transaction that read it, does: the rewrite waits for it, at most LOCK_TIMEOUT a round).
        new.execute("SELECT 1").fetchone()
        assert core.upkeep() is False
        old.rollback()
        assert core.upkeep() is True and store.erasures(pending=True) == []
        new.rollback()
    store.close()


def test_cli_delete_during_an_open_read_says_pending_and_the_next_command_finishes_it(
    tmp_path: Path, reader: Reader
) -> None:
    from click.testing import CliRunner

    from tmem.cli.main import cli

    home = tmp_path / "home"
    store = open_store(f"sqlite:///{home / 'tmem.db'}")
    _import(store, tmp_path, "secret")
    store.close()
    env = {"TMEM_HOME": str(home), "TMEM_EMBED_BACKEND": "hash"}
    runner = CliRunner()
    reader.open(home / "tmem.db")
    held = runner.invoke(cli, ["delete", "secret", "--yes"], env=env)
    assert held.exit_code == 0, held.output
    assert "Deleted space 'secret', erasure pending (erasure 1)." in held.output
    assert files_holding(home, CANARY)
    reader.end()
    listed = runner.invoke(cli, ["erasures"], env=env)  # any command finishes it at its start
    assert listed.exit_code == 0, listed.output
    assert json.loads(listed.output) == [
        {"seq": 1, "space": "secret", "kind": "delete", "erased": True, "stage": "erased", "scope": SQLITE_SCOPE}
    ]
    assert files_holding(home, CANARY) == []
