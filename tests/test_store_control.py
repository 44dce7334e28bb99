"""The service's control store contract (API keys, build jobs), run on every backend (``store_url``: a SQLite file
and a PostgreSQL database): several controls on one database act as several API workers sharing it."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tmem.construct.policy import lease_holder
from tmem.errors import InputError, NotFoundError
from tmem.memory import Memory
from tmem.service.worker import STALE_SECONDS, BuildWorkers, orphaned
from tmem.settings import Settings
from tmem.store import open_store
from tmem.store.base import Store
from tmem.store.control import MAX_ATTEMPTS, ControlStore, open_control

OpenControl = Callable[[], ControlStore]


@pytest.fixture
def opener(store_url: str) -> Iterator[OpenControl]:
    """Opens controls on one database (each its own connection or pool, like separate server processes)."""
    stores: list[Store] = []
    controls: list[ControlStore] = []

    def open_one() -> ControlStore:
        store = open_store(store_url)
        stores.append(store)
        control = open_control(store)
        controls.append(control)
        return control

    yield open_one
    for control in controls:
        control.close()
    for store in stores:
        store.close()


def _dead_owner() -> str:
    """A holder name of a process of this host that has exited."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return f"{socket.gethostname()}:{proc.pid}:deadbeef0000"


def test_keys_create_authenticate_list_revoke(opener: OpenControl) -> None:
    control = opener()
    acme, key = control.create_key("acme")
    beta, beta_key = control.create_key("beta")
    acme2, _ = control.create_key("acme")
    assert control.authenticate(key) == "acme" and control.authenticate(beta_key) == "beta"
    assert key.startswith("tmem_" + acme.id + "_")
    for bad in ("", "nope", key[:-1] + ("A" if key[-1] != "A" else "B"), f"tmem_{acme.id}_", "tmem_zz_secret"):
        assert control.authenticate(bad) is None
    assert [k.id for k in control.keys("acme")] == [acme.id, acme2.id]
    assert [(k.tenant, k.id) for k in control.keys(None)] == [("acme", acme.id), ("acme", acme2.id), ("beta", beta.id)]
    revoked = control.revoke_key(acme.id)
    assert revoked.revoked_at is not None and control.authenticate(key) is None
    assert control.revoke_key(acme.id).revoked_at == revoked.revoked_at  # revoking twice keeps the first time
    with pytest.raises(NotFoundError, match="tmem keys list"):
        control.revoke_key("000000000000")
    with pytest.raises(InputError, match="tenant"):
        control.create_key("a/b")
    assert opener().authenticate(beta_key) == "beta"  # another worker on the same database sees the key


def test_jobs_round_trip_progress_finish(opener: OpenControl) -> None:
    control = opener()
    job = control.create_job("acme", "s", {"rebuild": True})
    assert (job.state, job.params, job.attempts, job.owner) == ("queued", {"rebuild": True}, 0, None)
    assert control.get_job(job.id) == job
    with pytest.raises(NotFoundError):
        control.get_job("job_missing")
    claimed = control.claim_job("w1", 100.0)
    assert claimed is not None and (claimed.state, claimed.attempts, claimed.owner) == ("running", 1, "w1")
    assert claimed.heartbeat_at == 100.0 and control.has_running("acme", "s")
    control.set_progress(job.id, {"stage": "building", "fraction": 0.5})
    assert control.get_job(job.id).progress["fraction"] == 0.5
    done = control.finish_job(job.id, "succeeded", result={"items": 3})
    assert (done.state, done.result, done.progress["stage"]) == ("succeeded", {"items": 3}, "done")
    assert done.finished_at is not None and not control.has_running("acme", "s")
    failed = control.finish_job(control.create_job("acme", "s", {}).id, "failed", error="why")
    assert (failed.state, failed.error) == ("failed", "why")
    other = control.create_job("beta", "s", {})
    assert [j.id for j in control.jobs("acme")] == [job.id, failed.id]
    assert [j.id for j in control.jobs("acme", "s")] == [job.id, failed.id]
    assert control.jobs("acme", "t") == [] and [j.id for j in control.jobs("beta")] == [other.id]
    assert "owner" not in done.model_dump() and "tenant" not in done.model_dump()  # never shown by the API


def test_never_two_builds_of_one_space_at_once(opener: OpenControl) -> None:
    control = opener()
    first = control.create_job("acme", "x", {"rebuild": False})
    again = control.create_job("acme", "x", {"rebuild": True})  # one queued job per space: asked again, it is reused
    assert again.id == first.id and again.params == {"rebuild": True}
    assert control.create_job("acme", "x", {"rebuild": False}).params == {"rebuild": True}  # a rebuild wins
    other = control.create_job("acme", "y", {})
    claimed = control.claim_job("w", 1.0)
    assert claimed is not None and claimed.id == first.id
    second = control.create_job("acme", "x", {})  # x runs: a new build of it queues behind the running one
    assert second.id != first.id and control.oldest_queued() == other.created_at
    nxt = control.claim_job("w", 1.0)
    assert nxt is not None and nxt.id == other.id  # x is busy: its second build waits
    assert control.claim_job("w", 1.0) is None
    control.finish_job(first.id, "succeeded")
    last = control.claim_job("w", 1.0)
    assert last is not None and last.id == second.id


def test_requeue_gives_the_attempt_back_and_fail_queued(opener: OpenControl) -> None:
    control = opener()
    job = control.create_job("acme", "x", {})
    assert control.claim_job("w", 1.0) is not None
    control.requeue(job.id, "waiting")
    back = control.get_job(job.id)
    assert (back.state, back.attempts, back.owner, back.progress["note"]) == ("queued", 0, None, "waiting")
    assert control.fail_queued("acme", "x", "deleted") == 1
    assert (control.get_job(job.id).state, control.get_job(job.id).error) == ("failed", "deleted")
    assert control.fail_queued("acme", "x", "deleted") == 0


def test_workers_sharing_a_database_claim_each_job_once(opener: OpenControl) -> None:
    """Four workers (own connections) claim concurrently: every job runs once, never two of one space at once."""
    creator = opener()
    jobs = [creator.create_job("acme", f"s{i % 3}", {}) for i in range(12)]
    assert len({j.id for j in jobs}) == 3  # one queued job per space
    lock = threading.Lock()
    running: dict[str, str] = {}  # space -> job id
    ran: list[str] = []
    errors: list[str] = []
    created = threading.Event()

    def work(control: ControlStore, name: str) -> None:
        idle = 0
        while idle < 20:
            job = control.claim_job(name, time.time())
            if job is None:
                idle += created.is_set()  # stop after 20 empty claims once no more builds are asked for
                time.sleep(0.01)
                continue
            with lock:
                if job.space in running:
                    errors.append(f"{job.id} claimed while {running[job.space]} runs")
                running[job.space] = job.id
                ran.append(job.id)
            time.sleep(0.005)
            with lock:
                del running[job.space]
            control.finish_job(job.id, "succeeded")

    def create() -> None:  # more builds asked while the workers run: each queues behind its space's running one
        for i in range(30):
            jobs.append(creator.create_job("acme", f"s{i % 3}", {}))
            time.sleep(0.003)
        created.set()

    workers = [opener() for _ in range(4)]
    threads = [threading.Thread(target=work, args=(c, f"w{n}")) for n, c in enumerate(workers)]
    threads.append(threading.Thread(target=create))
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    assert sorted(ran) == sorted({j.id for j in jobs})
    assert {j.state for j in workers[0].jobs("acme")} == {"succeeded"}  # every worker sees every job


def test_recover_requeues_only_jobs_of_stopped_servers(opener: OpenControl) -> None:
    control = opener()
    now = time.time()
    live = control.create_job("acme", "live", {})
    assert control.claim_job(lease_holder(), now) is not None  # a live server of this host
    remote = control.create_job("acme", "remote", {})
    assert control.claim_job("elsewhere:1:abc", now) is not None  # another host, heartbeat fresh
    dead = control.create_job("acme", "dead", {})
    assert control.claim_job(_dead_owner(), now) is not None  # a process of this host that exited
    stale = control.create_job("acme", "stale", {})
    assert control.claim_job("elsewhere:2:abc", now - STALE_SECONDS - 1) is not None  # no heartbeat for too long
    assert opener().recover(orphaned) == (2, 0)  # another worker starting now: the dead and the stale one
    states = {j.id: (j.state, j.owner) for j in control.jobs("acme")}
    assert states[live.id][0] == states[remote.id][0] == "running"
    assert states[stale.id] == states[dead.id] == ("queued", None)
    assert control.get_job(dead.id).progress["note"].startswith("re-queued")
    assert control.heartbeat("elsewhere:1:abc", now + 5) == 1
    assert control.get_job(remote.id).heartbeat_at == now + 5


def test_a_job_interrupted_too_often_is_failed(opener: OpenControl) -> None:
    control = opener()
    job = control.create_job("acme", "s", {})
    seen = []
    for _ in range(MAX_ATTEMPTS):
        assert control.claim_job(_dead_owner(), time.time()) is not None
        seen.append(control.recover(orphaned))
    assert seen == [(1, 0)] * (MAX_ATTEMPTS - 1) + [(0, 1)]
    failed = control.get_job(job.id)
    assert failed.state == "failed" and "stopped during this build" in str(failed.error)


def test_jobs_and_keys_survive_reopening(store_url: str) -> None:
    store = open_store(store_url)
    control = open_control(store)
    _, key = control.create_key("acme")
    job = control.create_job("acme", "s", {"rebuild": False})
    control.close()
    store.close()
    store = open_store(store_url)
    control = open_control(store)
    try:
        assert control.authenticate(key) == "acme" and control.get_job(job.id) == job
    finally:
        control.close()
        store.close()


def test_a_live_server_takes_over_a_stopped_servers_job(store_url: str, tmp_path: Path) -> None:
    """BuildWorkers beat for their own jobs and, every recover interval, re-queue and run a stopped server's job."""
    settings = Settings(home=tmp_path / "mem", database_url=store_url, llm="none", embed_backend="hash")
    memory = Memory.open(settings=settings)
    memory.add_messages("acme/s", [{"speaker": "Ann", "text": "I adopted a cat named Miso.", "time": "2024-05-02"}])
    memory.close()
    store = open_store(store_url)
    control = open_control(store)
    job = control.create_job("acme", "s", {})
    assert control.claim_job(_dead_owner(), time.time()) is not None  # its server died mid-build
    workers = BuildWorkers(
        control, lambda: Memory.open(settings=settings), poll_seconds=0.05, heartbeat_seconds=0.05, recover_seconds=0.1
    )
    workers.start()
    try:
        deadline = time.monotonic() + 60
        while control.get_job(job.id).state != "succeeded" and time.monotonic() < deadline:
            time.sleep(0.05)
        done = control.get_job(job.id)
        assert done.state == "succeeded" and done.attempts == 2 and done.owner == workers.owner
    finally:
        workers.stop()
        control.close()
        store.close()
