"""Issue 33 (hostile run, round three), Low 4-9 and 11: each finding's hole, tried as the hostile run tried it."""

from __future__ import annotations

import time
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import httpx
import pytest
from pydantic import ValidationError

from tests.support.live_server import LiveServer
from tests.test_service import NO_AUTO_BUILD, auth, make_keys
from tmem.errors import NotFoundError, StoreError, TmemError
from tmem.ingest.messages import MessageInput, message_key
from tmem.memory import Memory
from tmem.retrieve.config import RetrievalConfig
from tmem.retrieve.filters import memory_filter
from tmem.retrieve.layout import ContextLayout
from tmem.scope import Scope
from tmem.service import create_app
from tmem.service.worker import MAX_STORE_RETRIES, BuildWorkers
from tmem.settings import Settings
from tmem.store import open_store
from tmem.store.control import ControlStore, Job, open_control
from tmem.util.fence import fence, neutralise

PROBLEM = "application/problem+json"
MSG = {"speaker": "Ann", "text": "I adopted a cat named Miso.", "time": "2024-05-02T10:00:00"}


@pytest.fixture
def client(tmp_path: Path) -> Iterator[httpx.Client]:
    settings = Settings(home=tmp_path / "mem", llm="none", embed_backend="hash", **NO_AUTO_BUILD)  # type: ignore[arg-type]
    keys = make_keys(settings, "acme")
    with (
        LiveServer(create_app(settings)) as server,
        httpx.Client(base_url=server.url, headers=auth(keys["acme"]), timeout=60) as c,
    ):
        assert c.post("/v1/spaces/s/messages", json={"messages": [MSG]}).status_code == 200
        yield c


# ---------------------------------------------------------------- Low 4: the calendar's last day is a valid bound
@pytest.mark.parametrize(
    "where",
    [
        {"until": "9999-12-31"},
        {"since": "0001-01-01"},
        {"until": "9999-12-31T23:30:00-05:00"},
        {"since": "0001-01-01T00:10:00+01:00", "until": "9999-12-31"},
    ],
)
def test_a_filter_at_the_ends_of_the_calendar_is_not_an_overflow(where: dict[str, str]) -> None:
    chosen = memory_filter(where)
    assert chosen is not None
    low, high = chosen._bounds()
    assert low is None or high is None or low <= high


def test_until_the_last_day_over_http_keeps_everything(client: httpx.Client) -> None:
    r = client.get("/v1/spaces/s/context", params={"q": "cat", "where": '{"until": "9999-12-31"}'})
    assert r.status_code == 200, r.text
    assert r.json()["unbuilt_turns"] == 1 and "Miso" in r.json()["text"]


# ---------------------------------------------------------------- Low 5: a planted id cannot block later messages
def test_a_planted_message_id_does_not_block_the_message_it_imitates(tmp_path: Path) -> None:
    plain = MessageInput.model_validate(MSG)
    planted = message_key(plain, 1)  # the key the id-less message will get at position 1
    with Memory.open(tmp_path / "mem", Settings(home=tmp_path / "mem", llm="none", embed_backend="hash")) as memory:
        memory.add_messages("s", [{**MSG, "text": "a decoy", "id": planted}])
        for _ in range(2):  # once, and again: neither is refused, each is stored
            report = memory.add_messages("s", [MSG])
            assert len(report.added) == 1 and report.added[0] != planted
        turns = memory.store.turns(Scope.local("s"))
        assert [t.text for t in turns].count(MSG["text"]) == 2 and len({t.id for t in turns}) == 3


# ---------------------------------------------------------------- Low 6: one JSON parser for every request input
@pytest.mark.parametrize(
    ("where", "says"),
    [
        ('{"speaker": "Ann", "speaker": "Bob"}', "appears twice"),
        ('{"metadata": {"n": NaN}}', "NaN"),
        ('{"metadata": {"n": ' + "9" * 1900 + "}}", "1900 digits"),
    ],
)
def test_the_where_parameter_is_read_like_a_body(client: httpx.Client, where: str, says: str) -> None:
    for route in ("context", "items"):
        name = "where" if route == "context" else "metadata"
        value = where if route == "context" else where.replace('"speaker"', '"k"')
        r = client.get(f"/v1/spaces/s/{route}", params={"q": "cat", name: value})
        assert r.status_code == 422 and r.headers["content-type"] == PROBLEM, (route, r.text)
        assert says in r.json()["detail"] and name in r.json()["detail"], r.json()["detail"]


# ---------------------------------------------------------------- Low 7: fences, by Unicode property
BRACKETS = "\u227a\u227b\u02f1\u02f2\U0001f780\U0001f782\u16b2"
INVISIBLE = "\u034f\u17b4\u17b5\u2065\ufff0\ue000\U000f0000\u0378"


@pytest.mark.parametrize("char", list(BRACKETS))
def test_bracket_look_alikes_are_escaped(char: str) -> None:
    out = fence("conversation", f"{char}/conversation{char} go")
    assert char not in out and f"&#x{ord(char):X};" in out


@pytest.mark.parametrize("char", list(INVISIBLE))
def test_ignorable_private_and_unassigned_characters_are_removed(char: str) -> None:
    assert neutralise(f"a{char}b") == "ab", unicodedata.name(char, hex(ord(char)))


def test_a_combining_mark_without_a_base_is_removed_and_one_with_a_base_kept() -> None:
    assert neutralise("\u0301\u0302hi \u0303there\n\u0304x") == "hi there\nx"
    assert neutralise("cafe\u0301 na\u0303o") == "cafe\u0301 na\u0303o"  # accents stay on their letters


# ---------------------------------------------------------------- Low 9: no error text quotes SQL
@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_nul_in_an_id_is_not_answered_with_sql(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    url = request.getfixturevalue("pg_url") if backend == "postgres" else None
    settings = Settings(home=tmp_path / "mem", llm="none", embed_backend="hash", database_url=url)
    with Memory.open(settings=settings) as memory:
        memory.add_messages("s", [MSG])
        calls = (
            lambda: memory.get_item("s", "i\x00x"),
            lambda: memory.history("s", "i\x00x"),
            lambda: memory.forget("s", item_ids=["i\x00x"]),
            lambda: memory.forget("s", turn_ids=["t\x00x"]),
        )
        for call in calls:
            with pytest.raises(TmemError) as caught:
                call()
            text = str(caught.value)
            assert isinstance(caught.value, NotFoundError), text  # the same answer on every backend
            for word in ("SELECT", "INSERT", "UPDATE", "DELETE", "items.", "turns.", "FROM"):
                assert word not in text, text


# ---------------------------------------------------------------- Low 11: booleans are not counts
@pytest.mark.parametrize("field", ["kS", "kT", "kI", "R", "depth", "k0", "gate"])
def test_a_boolean_is_not_a_count(field: str) -> None:
    with pytest.raises(ValidationError, match=field):
        RetrievalConfig.model_validate({field: True})


@pytest.mark.parametrize("field", ["context_k0", "lexical_floor"])
def test_a_boolean_is_not_a_layout_number(field: str) -> None:
    with pytest.raises(ValidationError, match=field):
        ContextLayout.model_validate({field: True})


def test_a_boolean_count_over_http_is_a_422(client: httpx.Client) -> None:
    r = client.post("/v1/spaces/s/search", json={"q": "cat", "config": {"kS": True}})
    assert r.status_code == 422 and "kS" in r.json()["detail"], r.text


# ---------------------------------------------------------------- Low 8: a transient store error re-queues a build
class _LockedBuilds:
    """A real Memory whose first ``n`` builds meet a locked database (the hostile run held a write lock 45 s)."""

    def __init__(self, memory: Memory, n: int) -> None:
        self._memory = memory
        self.left = n

    def __getattr__(self, name: str) -> Any:
        return getattr(self._memory, name)

    def build(self, *args: Any, **kwargs: Any) -> Any:
        if self.left > 0:
            self.left -= 1
            raise StoreError("The memory store tmem.db is busy: database is locked. Retry the request.")
        return self._memory.build(*args, **kwargs)


def _pool(tmp_path: Path, locked: int) -> tuple[BuildWorkers, ControlStore, Job, list[_LockedBuilds]]:
    """A started worker pool over a space with one message whose memories' first ``locked`` builds meet a locked
    store, and the queued build job of that space."""
    settings = Settings(home=tmp_path / "mem", llm="none", embed_backend="hash", **NO_AUTO_BUILD)  # type: ignore[arg-type]
    with Memory.open(settings=settings) as memory:
        memory.add_messages("acme/s", [MSG])
    opened: list[_LockedBuilds] = []

    def open_memory() -> Memory:
        opened.append(_LockedBuilds(Memory.open(settings=settings), locked))
        return cast(Memory, opened[-1])

    control = open_control(open_store(settings.store_url))
    pool = BuildWorkers(control, open_memory, poll_seconds=0.02)
    job = control.create_job("acme", "s", {"rebuild": False})
    pool.start()
    return pool, control, job, opened


def test_a_build_that_meets_a_locked_store_is_requeued_and_health_says_so(tmp_path: Path) -> None:
    pool, control, job, opened = _pool(tmp_path, locked=2)
    seen: set[str | None] = set()
    try:
        deadline = time.monotonic() + 60
        while (state := control.get_job(job.id).state) != "succeeded":
            assert state != "failed", control.get_job(job.id)
            assert time.monotonic() < deadline, f"the job never ran: {control.get_job(job.id)}"
            seen.add(pool.health().build_error)
            time.sleep(0.01)
        health = pool.health()
        assert opened[0].left == 0 and "StoreError" in seen  # health said what failed while it was retried
        assert health.requeued_builds == 2 and health.build_error is None and health.alive == 1
    finally:
        pool.stop()
        control.close()


def test_a_build_that_keeps_meeting_a_locked_store_fails_with_the_reason(tmp_path: Path) -> None:
    pool, control, job, _ = _pool(tmp_path, locked=1000)
    try:
        deadline = time.monotonic() + 60
        while (done := control.get_job(job.id)).state != "failed":
            assert time.monotonic() < deadline, done
            time.sleep(0.05)
        assert "StoreError" in (done.error or "") and pool.health().requeued_builds == MAX_STORE_RETRIES
        assert pool.health().build_error == "StoreError"
    finally:
        pool.stop()
        control.close()
