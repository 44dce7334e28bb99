"""`tmem import / build / search / ask` against a real PostgreSQL server (TMEM_DATABASE_URL), with the LLM played by
the local OpenAI-compatible stub; the same commands on a SQLite file recall exactly the same memory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.support.openai_stub import OpenAIStub
from tests.support.stage_replies import reply_for
from tmem.cli.main import cli
from tmem.scope import Scope
from tmem.store import open_store

BUNDLED = Path(__file__).resolve().parents[1] / "src" / "tmem" / "eval" / "data" / "locomo_conv30_s1-5.json"
QUERY = "Why did Jon lose his job?"


def _reply(body: dict[str, Any]) -> str:
    system, user = body["messages"][0]["content"], body["messages"][1]["content"]
    if system.startswith("You answer questions"):
        return json.dumps({"answer": "banking job lost"})
    return str(reply_for(system, user))


def _run_all(base: list[str]) -> dict[str, Any]:
    runner = CliRunner()
    out: dict[str, Any] = {}
    for name, args in {
        "import": ["import", str(BUNDLED)],
        "build": ["--llm-model", "stub-model", "build", "conv-30", "--no-progress", "--json"],
        "search": ["search", "conv-30", QUERY, "--json"],
        "ask": ["--llm-model", "stub-model", "ask", "conv-30", QUERY, "--json"],
        "spaces": ["spaces", "--json"],
    }.items():
        result = runner.invoke(cli, [*base, *args], catch_exceptions=False)
        assert result.exit_code == 0, (name, result.output)
        out[name] = json.loads(result.stdout) if name != "import" else result.stdout
    return out


@pytest.mark.postgres
def test_import_build_search_ask_on_postgres_match_sqlite(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TMEM_EMBED_BACKEND", "hash")
    monkeypatch.setenv("TMEM_LLM_BACKOFF_BASE", "0")
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    with OpenAIStub(reply=_reply) as stub:
        monkeypatch.setenv("OPENAI_BASE_URL", stub.base_url)
        monkeypatch.setenv("TMEM_DATABASE_URL", pg_url)
        on_pg = _run_all(["--dir", str(tmp_path / "unused")])
        monkeypatch.delenv("TMEM_DATABASE_URL")
        (tmp_path / "lite").mkdir()  # a SQLite URL in a missing folder is refused (tests/test_cli_startup.py)
        on_sqlite = _run_all(["--database-url", f"sqlite:///{tmp_path / 'lite' / 'tmem.db'}"])
    assert not (tmp_path / "unused").exists()  # with a database URL nothing is written to --dir
    (space,) = on_pg["spaces"]
    assert space["name"] == "conv-30" and space["build_state"] == "built" and space["sessions"] == 5
    assert on_pg["search"]["scenes"] or on_pg["search"]["items"]
    # The same memory, recalled alike. PostgreSQL answers the dense lookups through pgvector, SQLite through the
    # in-process index: both break exact ties alike (by node order), but pgvector computes its own floats, so cosines
    # equal to ~1e-8 may swap places (the hashing embedder makes such near-ties common).
    lists = [
        {k: [h["scene"]["id"] if k == "scenes" else h["item"]["id"] for h in r[k]] for k in ("scenes", "items")}
        for r in (on_pg["search"], on_sqlite["search"])
    ]
    assert lists[0]["scenes"] == lists[1]["scenes"] and sorted(lists[0]["items"]) == sorted(lists[1]["items"])
    ranked = ("scenes", "items", "gated")
    assert [{k: v for k, v in r.items() if k not in ranked} for r in (on_pg["search"], on_sqlite["search"])] == [
        {k: v for k, v in on_sqlite["search"].items() if k not in ranked}
    ] * 2
    assert on_pg["spaces"] == on_sqlite["spaces"]
    assert on_pg["ask"]["answer"] == "banking job lost"
    store = open_store(pg_url)  # the LLM log and the built memory live in PostgreSQL
    assert (
        store.llm_calls(Scope.local("conv-30"))
        and store.items(Scope.local("conv-30"))
        and store.triggers(Scope.local("conv-30"))
    )
    store.close()
