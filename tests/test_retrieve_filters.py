"""Issue 19, part 2: message metadata, and filters on search, context and list through the library (the HTTP and MCP
equivalents are tested in tests/test_mcp_agents.py and below through the service)."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.test_store_items_contract import store  # noqa: F401 - the store fixture: SQLite, and PostgreSQL when run
from tmem import InputError, Memory, Settings
from tmem.models import Turn
from tmem.retrieve.filters import MemoryFilter, inherited_metadata
from tmem.scope import Scope
from tmem.store.base import Store

QUERY = "garden tomatoes watering schedule"
START = datetime(2024, 3, 1, 9, 0)


def project_messages(n: int = 60) -> list[dict[str, Any]]:
    """Alternating projects: beta's messages match QUERY far better than alpha's (an unfiltered context is beta's)."""
    out: list[dict[str, Any]] = []
    for i in range(n):
        alpha = i % 2 == 0
        text = (
            f"alpha note {i}: the garden watering is on day {i}, with compost and mulch for the beds"
            if alpha
            else f"beta note {i}: garden tomatoes watering schedule, tomatoes in the garden need watering {i}"
        )
        out.append(
            {
                "speaker": "Ann" if i % 4 < 2 else "Bob",
                "text": text,
                "time": (START + timedelta(days=i)).isoformat(),
                "id": f"t{i}",
                "metadata": {"project": "alpha" if alpha else "beta", "n": i, "pinned": i % 3 == 0},
            }
        )
    return out


@pytest.fixture
def memory(tmp_path: Path) -> Memory:
    mem = Memory.open(tmp_path / "mem", Settings(llm="none", embed_backend="hash"))
    messages = project_messages()
    mem.add_messages("work", messages[:48])
    mem.build("work")
    mem.add_messages("work", messages[48:])  # 12 unbuilt turns: the unbuilt route is filtered too
    return mem


def _alpha_ids() -> set[str]:
    return {m["id"] for m in project_messages() if m["metadata"]["project"] == "alpha"}


def test_metadata_is_stored_and_exported(memory: Memory) -> None:
    turns = {t.id: t for t in memory.export("work").turns}
    assert turns["t3"].metadata == {"project": "beta", "n": 3, "pinned": True}
    assert isinstance(turns["t4"].metadata["pinned"], bool) and isinstance(turns["t4"].metadata["n"], int)
    memory.close()


def test_filtered_context_is_full_and_holds_only_matching_turns(memory: Memory) -> None:
    with memory:
        plain = memory.context("work", QUERY, max_tokens=400)
        assert "beta note" in plain.text  # the query prefers beta: a filter applied after packing would leave little
        for where in ({"metadata": {"project": "alpha"}}, {"metadata": {"project": ["alpha", "gamma"]}}):
            ctx = memory.context("work", QUERY, max_tokens=400, where=where)
            assert ctx.tokens <= 400 and ctx.tokens >= 0.85 * 400, ctx.tokens  # filtered before packing: still full
            assert "beta" not in ctx.text and "alpha note" in ctx.text
            assert ctx.turn_ids and set(ctx.turn_ids) <= _alpha_ids()
            assert any(t in ctx.turn_ids for t in ("t48", "t50", "t52", "t54", "t56", "t58"))  # unbuilt ones too


def test_filters_on_speaker_dates_and_types(memory: Memory) -> None:
    with memory:
        by_bob = memory.context(
            "work", QUERY, max_tokens=300, where={"speaker": "Bob", "metadata": {"project": "beta"}}
        )
        assert by_bob.turn_ids and all(int(t[1:]) % 4 == 3 for t in by_bob.turn_ids)  # Bob and beta: 3, 7, 11, ...
        week = memory.context("work", QUERY, max_tokens=2000, where={"since": "2024-03-05", "until": "2024-03-08"})
        assert sorted(week.turn_ids) == ["t4", "t5", "t6", "t7"]  # whole days, inclusive (t7: 2024-03-08 09:00)
        hour = memory.context(
            "work", QUERY, max_tokens=2000, where={"since": "2024-03-05", "until": "2024-03-08T08:00"}
        )
        assert sorted(hour.turn_ids) == ["t4", "t5", "t6"]
        pinned = memory.search("work", QUERY, where={"metadata": {"pinned": True}})
        hits = [*(t.turn.id for t in pinned.turns), *(t.id for h in pinned.scenes for t in h.turns)]
        assert hits and all(int(t[1:]) % 3 == 0 for t in hits)
        assert all(int(t[1:]) % 3 == 0 for h in pinned.items for t in h.source_turn_ids)
        assert not pinned.personas
        as_number = memory.search("work", QUERY, where={"metadata": {"pinned": 1}})  # true is not 1
        assert not as_number.turns and not as_number.scenes and not as_number.items
        number = memory.context("work", QUERY, max_tokens=2000, where={"metadata": {"n": [7.0, 8]}})
        assert sorted(number.turn_ids) == ["t7", "t8"]  # 7.0 equals 7


def test_list_items_by_metadata_with_inherited_metadata(memory: Memory) -> None:
    with memory:
        every = memory.list_items("work", limit=500)
        page = memory.list_items("work", metadata={"project": "alpha"}, limit=500)
        assert 0 < page.total < every.total
        for item in page.items:
            assert set(item.turn_ids) <= _alpha_ids()
            assert page.metadata[item.id]["project"] == "alpha"
        assert {every.metadata[i.id]["project"] for i in every.items} == {"alpha", "beta"}


def test_item_metadata_rule_for_conflicting_sources() -> None:
    def turn(n: int, **meta: Any) -> Turn:
        return Turn(id=f"t{n}", session_id="s", seq=n, speaker="A", text="x", time=START, metadata=meta)

    sources = [turn(1, project="a", lang="fr"), turn(2, project="b")]
    assert MemoryFilter(metadata={"project": "a"}).keeps_sources(sources)  # any source turn matching suffices
    assert MemoryFilter(metadata={"project": "b", "lang": "fr"}).keeps_sources(sources)  # per condition
    assert not MemoryFilter(metadata={"project": "c"}).keeps_sources(sources)
    assert not MemoryFilter(metadata={"project": "b", "lang": "fr"}).keeps_turn(sources[1])  # a turn: all must hold
    assert inherited_metadata(list(reversed(sources))) == {"project": "b", "lang": "fr"}  # the latest turn wins


def test_bad_metadata_and_bad_filters_say_what_to_fix(memory: Memory) -> None:
    with memory:
        before = len(memory.export("work").turns)
        ok = {"speaker": "Ann", "text": "fine", "time": "2024-06-01T10:00:00"}
        cases = {
            "at most 32": {f"k{i}": i for i in range(33)},
            "at most 64": {"k" * 65: 1},
            "at most 256": {"k": "v" * 257},
            "leave the key out": {"k": None},
            "flatten": {"k": [1, 2]},
            "must be finite": {"k": float("inf")},
            "2**53": {"k": 2**60},
        }
        for fix, metadata in cases.items():
            with pytest.raises(InputError, match=r"messages\[1\]\.metadata") as err:
                memory.add_messages("work", [ok, {**ok, "metadata": metadata}])
            assert fix in str(err.value)
        assert len(memory.export("work").turns) == before  # nothing of a refused call is stored
        for where, fix in (
            ({"metadata": {"k": {"a": 1}}}, "metadata.k"),
            ({"since": "2024-05-01", "until": "2024-04-01"}, "swap them"),
            ({"colour": "red"}, "colour"),
            ({"metadata": {"k": []}}, "between 1 and"),
        ):
            with pytest.raises(InputError, match="Invalid filter") as bad:
                memory.context("work", QUERY, where=where)
            assert fix in str(bad.value)


def test_metadata_and_filters_over_http(tmp_path: Path) -> None:
    import json

    from tests.support.live_server import LiveServer
    from tests.test_service import NO_AUTO_BUILD, Clients, make_keys, wait_job
    from tmem.client import Client
    from tmem.service import create_app

    settings = Settings(home=tmp_path / "mem", llm="none", embed_backend="hash", **NO_AUTO_BUILD)  # type: ignore[arg-type]
    keys = make_keys(settings, "acme")
    with LiveServer(create_app(settings)) as server:
        clients = Clients(server.url)
        http = clients(keys["acme"])
        try:
            bad = http.post(
                "/v1/spaces/work/messages",
                json={"messages": [{**project_messages(1)[0], "metadata": {"k": "v" * 300}}]},
            )
            assert bad.status_code == 422 and "at most 256" in bad.json()["detail"]
            nested = http.post(
                "/v1/spaces/work/messages", json={"messages": [{**project_messages(1)[0], "metadata": {"k": [1]}}]}
            )
            assert nested.status_code == 422
            assert http.get("/v1/spaces").json()["spaces"] == []  # nothing stored by refused calls
            assert http.post("/v1/spaces/work/messages", json={"messages": project_messages()[:48]}).status_code == 200
            assert wait_job(http, http.post("/v1/spaces/work/build").json()["job"])["state"] == "succeeded"
            assert http.post("/v1/spaces/work/messages", json={"messages": project_messages()[48:]}).status_code == 200
            alpha = {"metadata": {"project": "alpha"}}
            found = http.post("/v1/spaces/work/search", json={"q": QUERY, "where": alpha}).json()
            ids = [t["turn"]["id"] for t in found["turns"]] + [t["id"] for s in found["scenes"] for t in s["turns"]]
            assert ids and set(ids) <= _alpha_ids()
            params = {"q": QUERY, "max_tokens": 400, "where": json.dumps(alpha)}
            ctx = http.get("/v1/spaces/work/context", params=params).json()
            assert (
                0.85 * 400 <= ctx["tokens"] <= 400
                and set(ctx["turn_ids"]) <= _alpha_ids()
                and "beta" not in ctx["text"]
            )
            page = http.get(
                "/v1/spaces/work/items", params={"metadata": json.dumps({"project": "beta"}), "limit": 500}
            ).json()
            assert page["items"] and all(page["metadata"][i["id"]]["project"] == "beta" for i in page["items"])
            with Client(server.url, keys["acme"]) as client:  # the Python client sends the same filters
                assert client.context("work", QUERY, max_tokens=400, where=alpha).turn_ids == ctx["turn_ids"]
                typed = client.search("work", QUERY, where=MemoryFilter.model_validate(alpha))
                assert [t.turn.id for t in typed.turns] == [t["turn"]["id"] for t in found["turns"]]
                listed = client.list_items("work", metadata={"project": "beta"}, limit=500)
                assert [i.id for i in listed.items] == [i["id"] for i in page["items"]]
            for where in ("[1]", "{not json", json.dumps({"speaker": []})):
                refused = http.get("/v1/spaces/work/context", params={"q": QUERY, "where": where})
                assert refused.status_code == 422, refused.text
                assert "where" in refused.json()["detail"] or "speaker" in refused.json()["detail"]
        finally:
            clients.close()


def test_every_turn_read_returns_metadata(store: Store) -> None:  # noqa: F811 - the imported fixture
    """The store writes and reads turns.metadata in every turn insert and select (SQLite, and PostgreSQL when run)."""
    from tmem.models import Session

    meta: dict[str, Any] = {"project": "alpha", "n": 3, "x": 1.5, "ok": False, "é": "ü"}
    turn = Turn(id="t0", session_id="s1", seq=0, speaker="A", text="hello", time=START, metadata=meta)
    store.ensure_space(Scope.local("a"))
    store.add_session(Scope.local("a"), Session(id="s1", seq=0, started_at=START, content_hash="h"), [turn])
    later = turn.model_copy(update={"id": "t1", "seq": 1, "metadata": {}})
    store.add_turns(Scope.local("a"), "s1", [later])
    reads = [
        store.turns(Scope.local("a"))[0],
        store.turns(Scope.local("a"), ["t0"])[0],
        store.find_turns(Scope.local("a"), ["t0"])[0],
        store.turns_after(Scope.local("a"), -1)[0],
    ]
    assert all(t.metadata == meta and isinstance(t.metadata["ok"], bool) for t in reads)
    last = store.last_turn(Scope.local("a"))
    assert last is not None and last.id == "t1" and last.metadata == {}


def test_turns_stored_before_migration_005_read_empty_metadata(tmp_path: Path) -> None:
    import sqlite3

    from tests.support.history import legacy_sqlite
    from tmem.store import legacy, open_store

    assert legacy.STEPS[-1] == "005_turn_metadata"
    legacy_sqlite(tmp_path / "tmem.db", len(legacy.STEPS) - 1)
    db = sqlite3.connect(tmp_path / "tmem.db", isolation_level=None)
    db.execute("INSERT INTO spaces(name) VALUES ('old')")
    db.execute("INSERT INTO sessions VALUES ('old', 's1', 0, '2024-01-01T09:00:00', 'h')")
    db.execute("INSERT INTO turns VALUES ('old', 't0', 's1', 0, 'A', 'before', '2024-01-01T09:00:00', NULL)")
    db.close()
    reopened = open_store(tmp_path / "tmem.db")
    try:
        (old,) = reopened.turns(Scope.local("old"))
        assert old.text == "before" and old.metadata == {}
        assert reopened._rows("SELECT name FROM migrations ORDER BY version")[-1][0] == "005_turn_metadata"  # type: ignore[attr-defined]
    finally:
        reopened.close()
