"""Load figure of the HTTP service: N concurrent clients searching one space while a build job runs on another.

What it does, all through the real service (`tmem serve` started as a subprocess on 127.0.0.1):
  1. `tmem keys create bench` (the key is the last line of its output);
  2. posts two LoCoMo dev conversations as messages, session by session, into spaces `search` and `build`;
  3. builds `search` (a job; waited for), then starts the build job of `build` and at once N clients that each
     search `search` in a loop (LoCoMo dev questions of that conversation, `POST /v1/spaces/search/search`) until
     the build job ends or --seconds pass, whichever is first (at least --min-seconds);
  4. reports p50 / p90 / p99 / max latency, throughput, every non-200 answer and transport error, and whether the
     build job was still running for the whole measurement.

With ``--mode context`` (issue 23: fast context over HTTP) there is no build job: after building ``search`` it
measures ``GET /v1/spaces/search/context?max_tokens=500`` with one client alone (sequential) and with N clients
for --seconds, then stops the server and measures ``Memory.context(..., max_tokens=500)`` in this process on the
same memory directory and the same questions, sequentially (one process's throughput).

Run (from the repository root):
    python bench/load_service.py --clients 16 --out bench/results/load.md
    python bench/load_service.py --mode context --clients 16 --seconds 30 --out bench/results/load.md
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "locomo10.dev.json"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _tmem(home: Path, *args: str) -> list[str]:
    return [sys.executable, "-c", "from tmem.cli.main import main; main()", "--dir", str(home), *args]


def _messages_of(index: int) -> list[list[dict[str, Any]]]:
    from tmem.ingest import read_file

    space = read_file(DATA)[index]
    return [
        [
            {"speaker": t.speaker, "text": t.text, "time": (t.time or s.started_at).isoformat(), "id": t.id}
            for t in s.turns
        ]
        for s in space.sessions
    ]


def _wait_job(client: httpx.Client, job: str, timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        body: dict[str, Any] = client.get(f"/v1/jobs/{job}").json()
        if body["state"] in ("succeeded", "failed"):
            return body
        if time.monotonic() > deadline:
            raise SystemExit(f"job {job} did not end within {timeout} s: {body}")
        time.sleep(0.5)


CONTEXT_TOKENS = 500


async def _request(http: httpx.AsyncClient, mode: str, q: str) -> httpx.Response:
    if mode == "context":
        return await http.get("/v1/spaces/search/context", params={"q": q, "max_tokens": CONTEXT_TOKENS})
    return await http.post("/v1/spaces/search/search", json={"q": q})


async def _client(
    base: str,
    key: str,
    queries: list[str],
    offset: int,
    stop: asyncio.Event,
    out: list[tuple[float, int | str]],
    mode: str = "search",
) -> None:
    async with httpx.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=120) as http:
        n = offset
        while not stop.is_set():
            q = queries[n % len(queries)]
            n += 1
            t0 = time.perf_counter()
            try:
                r = await _request(http, mode, q)
                status: int | str = r.status_code
            except httpx.HTTPError as exc:
                status = type(exc).__name__
            out.append((time.perf_counter() - t0, status))


async def _measure(
    base: str, key: str, queries: list[str], clients: int, build_job: str, seconds: float, min_seconds: float
) -> tuple[list[tuple[float, int | str]], float, list[str]]:
    stop = asyncio.Event()
    results: list[tuple[float, int | str]] = []
    states: list[str] = []
    tasks = [asyncio.create_task(_client(base, key, queries, i * 7, stop, results)) for i in range(clients)]
    t0 = time.perf_counter()
    async with httpx.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {key}"}) as http:
        while True:
            await asyncio.sleep(0.5)
            elapsed = time.perf_counter() - t0
            state = (await http.get(f"/v1/jobs/{build_job}")).json()["state"]
            states.append(state)
            if elapsed >= seconds or (state in ("succeeded", "failed") and elapsed >= min_seconds):
                break
    stop.set()
    await asyncio.gather(*tasks)
    return results, time.perf_counter() - t0, states


async def _measure_plain(
    base: str, key: str, queries: list[str], clients: int, seconds: float
) -> tuple[list[tuple[float, int | str]], float]:
    """N clients sending context requests back to back for ``seconds`` (no build)."""
    stop = asyncio.Event()
    results: list[tuple[float, int | str]] = []
    tasks = [asyncio.create_task(_client(base, key, queries, i * 7, stop, results, "context")) for i in range(clients)]
    t0 = time.perf_counter()
    await asyncio.sleep(seconds)
    stop.set()
    await asyncio.gather(*tasks)
    return results, time.perf_counter() - t0


def _in_process(home: Path, env: dict[str, str], questions: list[str], seconds: float) -> tuple[list[float], float]:
    """Memory.context in this process, sequentially over ``questions`` (cycled) for ``seconds``: latencies (ms) and
    requests per second."""
    os.environ.update(env)
    from tmem.memory import Memory

    with Memory.open(home) as memory:
        memory.context("bench/search", "warm up", max_tokens=CONTEXT_TOKENS)
        lat: list[float] = []
        t0 = time.perf_counter()
        n = 0
        while time.perf_counter() - t0 < seconds:
            t1 = time.perf_counter()
            memory.context("bench/search", questions[n % len(questions)], max_tokens=CONTEXT_TOKENS)
            lat.append((time.perf_counter() - t1) * 1000)
            n += 1
        return lat, n / (time.perf_counter() - t0)


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def _context_mode(
    client: httpx.Client, base: str, key: str, questions: list[str], args: argparse.Namespace
) -> dict[str, Any]:
    params = {"max_tokens": CONTEXT_TOKENS}
    client.get("/v1/spaces/search/context", params={**params, "q": "warm up"}).raise_for_status()
    alone = []
    for q in questions[: args.baseline]:
        t1 = time.perf_counter()
        client.get("/v1/spaces/search/context", params={**params, "q": q}).raise_for_status()
        alone.append((time.perf_counter() - t1) * 1000)
    results, elapsed = asyncio.run(_measure_plain(base, key, questions, args.clients, args.seconds))
    return {"alone": alone, "results": results, "elapsed": elapsed}


def _report_context(
    args: argparse.Namespace,
    turns: dict[str, int],
    build_s: float,
    ctx: dict[str, Any],
    in_proc: list[float],
    in_proc_rate: float,
) -> None:
    alone: list[float] = ctx["alone"]
    results: list[tuple[float, int | str]] = ctx["results"]
    ok = [lat * 1000 for lat, status in results if status == 200]
    errors = len(results) - len(ok)
    http_rate = len(results) / ctx["elapsed"]
    base_alone = in_proc[: args.baseline]
    lines = [
        f"context mode: dev conversation {args.search_conv} ({turns['search']} turns, built in {build_s:.1f} s), "
        f"max_tokens={CONTEXT_TOKENS}, embedder {args.embed}",
        f"machine: {platform.platform()}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end",
        "",
        f"| when | in-process p50 ms (first {len(base_alone)}) | HTTP one client p50 ms | ratio | in-process req/s (1 process, "
        f"sequential) | HTTP {args.clients} clients req/s | share | HTTP {args.clients} clients p50 ms | errors |",
        "|---|---|---|---|---|---|---|---|---|",
        f"| {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC | {_pct(base_alone, 50):.1f} | "
        f"{_pct(alone, 50):.1f} | {_pct(alone, 50) / _pct(base_alone, 50):.2f}x | {in_proc_rate:.1f} | "
        f"{http_rate:.1f} | {http_rate / in_proc_rate:.0%} | {_pct(ok, 50):.0f} | {errors} |",
    ]
    text = "\n".join(lines)
    print(text)
    if args.out:
        with args.out.open("a") as fh:
            fh.write("\n" + text + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", choices=["search-under-build", "context"], default="search-under-build")
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=60.0, help="Longest measurement.")
    ap.add_argument("--min-seconds", type=float, default=10.0, help="Shortest measurement.")
    ap.add_argument("--embed", default="sentence-transformers", choices=["sentence-transformers", "hash"])
    ap.add_argument("--search-conv", type=int, default=0, help="Dev conversation searched.")
    ap.add_argument("--build-conv", type=int, default=1, help="Dev conversation built during the measurement.")
    ap.add_argument("--baseline", type=int, default=20, help="Sequential searches measured before the load.")
    ap.add_argument("--dir", type=Path, default=None, help="Memory directory (default: a fresh temporary one).")
    ap.add_argument("--out", type=Path, default=None, help="Append the result to this markdown file.")
    ap.add_argument("--in-process-seconds", type=float, default=20.0, help="Memory.context measurement (context mode).")
    args = ap.parse_args()

    home = args.dir or Path(tempfile.mkdtemp(prefix="tmem-load-")) / "mem"
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""),
        "TMEM_LLM": "none",
        "TMEM_EMBED_BACKEND": args.embed,
        # builds only when asked (the measured build job), not by the build policy while the messages arrive
        "TMEM_BUILD_AFTER_TURNS": "1000000000",
        "TMEM_BUILD_IDLE_SECONDS": "1e9",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }
    created = subprocess.run(_tmem(home, "keys", "create", "bench"), env=env, capture_output=True, text=True)
    if created.returncode != 0:
        raise SystemExit(created.stderr)
    key = created.stdout.strip().splitlines()[-1]
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        _tmem(home, "serve", "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"),
        env=env,
    )
    try:
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=120) as client:
            for _ in range(600):
                try:
                    if client.get("/v1/spaces").status_code == 200:
                        break
                except httpx.TransportError:
                    time.sleep(0.1)
            turns = {}
            spaces = [("search", args.search_conv)] + ([("build", args.build_conv)] if args.mode != "context" else [])
            for space, conv in spaces:
                sessions = _messages_of(conv)
                for messages in sessions:
                    r = client.post(f"/v1/spaces/{space}/messages", json={"messages": messages})
                    r.raise_for_status()
                turns[space] = sum(len(m) for m in sessions)
            t0 = time.perf_counter()
            first = _wait_job(client, client.post("/v1/spaces/search/build").json()["job"], 1800)
            search_build_s = time.perf_counter() - t0
            if first["state"] != "succeeded":
                raise SystemExit(f"build of 'search' failed: {first}")
            client.post("/v1/spaces/search/search", json={"q": "warm up"}).raise_for_status()
            questions = [qa["question"] for qa in json.loads(DATA.read_text())[args.search_conv]["qa"]]
            if args.mode == "context":
                ctx = _context_mode(client, base, key, questions, args)
                server.terminate()
                server.wait(30)
                lat, rate = _in_process(home, env, questions, args.in_process_seconds)
                _report_context(args, turns, search_build_s, ctx, lat, rate)
                return
            alone = []  # one client, no build: the unloaded latency of the same requests
            for q in questions[: args.baseline]:
                t1 = time.perf_counter()
                client.post("/v1/spaces/search/search", json={"q": q}).raise_for_status()
                alone.append((time.perf_counter() - t1) * 1000)
            build_job = client.post("/v1/spaces/build/build").json()["job"]
            results, elapsed, states = asyncio.run(
                _measure(base, key, questions, args.clients, build_job, args.seconds, args.min_seconds)
            )
            job = _wait_job(client, build_job, 1800)
    finally:
        server.terminate()
        server.wait(30)

    ok = [lat for lat, status in results if status == 200]
    errors: dict[str, int] = {}
    for _, status in results:
        if status != 200:
            errors[str(status)] = errors.get(str(status), 0) + 1
    running_share = states.count("running") / len(states) if states else 0.0
    ms = [x * 1000 for x in ok]
    line = (
        f"| {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC | {args.clients} | {args.embed} | {len(results)} | "
        f"{elapsed:.1f} | {len(results) / elapsed:.1f} | {_pct(ms, 50):.0f} | {_pct(ms, 90):.0f} | "
        f"{_pct(ms, 99):.0f} | {max(ms):.0f} | {sum(errors.values())} | {running_share:.0%} | "
        f"{job['state']} ({turns['build']} turns) |"
    )
    report = [
        f"search space: dev conversation {args.search_conv} ({turns['search']} turns, built in {search_build_s:.1f} s "
        f"before the measurement); build space: dev conversation {args.build_conv} ({turns['build']} turns)",
        f"one client alone, no build ({len(alone)} sequential searches): p50 {_pct(alone, 50):.0f} ms, "
        f"p99 {_pct(alone, 99):.0f} ms",
        f"errors by status: {errors or 'none'}; mean {statistics.mean(ms):.0f} ms; build job {job['state']}, "
        f"{job['started_at']} -> {job['finished_at']}",
        f"machine: {platform.platform()}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end",
        "",
        "| when | clients | embedder | requests | seconds | req/s | p50 ms | p90 ms | p99 ms | max ms | errors | "
        "build running | build job |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        line,
    ]
    text = "\n".join(report)
    print(text)
    if args.out:
        with args.out.open("a") as fh:
            fh.write("\n" + text + "\n")


if __name__ == "__main__":
    main()
