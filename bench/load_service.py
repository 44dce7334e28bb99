"""Load figure of the HTTP service: N concurrent clients searching one space while a build job runs on another.

What it does, all through the real service (`tmem serve` started as a subprocess on 127.0.0.1):
  1. `tmem keys create bench` (the key is the last line of its output);
  2. posts two LoCoMo dev conversations as messages, session by session, into spaces `search` and `build`;
  3. builds `search` (a job; waited for), then starts the build job of `build` and at once N clients that each
     search `search` in a loop (LoCoMo dev questions of that conversation, `POST /v1/spaces/search/search`) until
     the build job ends or --seconds pass, whichever is first (at least --min-seconds);
  4. reports p50 / p90 / p99 / max latency, throughput, every non-200 answer and transport error, and whether the
     build job was still running for the whole measurement.

Run (from the repository root):
    python bench/load_service.py --clients 16 --out bench/results/load.md
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


async def _client(
    base: str, key: str, queries: list[str], offset: int, stop: asyncio.Event, out: list[tuple[float, int | str]]
) -> None:
    async with httpx.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=120) as http:
        n = offset
        while not stop.is_set():
            q = queries[n % len(queries)]
            n += 1
            t0 = time.perf_counter()
            try:
                r = await http.post("/v1/spaces/search/search", json={"q": q})
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


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=60.0, help="Longest measurement.")
    ap.add_argument("--min-seconds", type=float, default=10.0, help="Shortest measurement.")
    ap.add_argument("--embed", default="sentence-transformers", choices=["sentence-transformers", "hash"])
    ap.add_argument("--search-conv", type=int, default=0, help="Dev conversation searched.")
    ap.add_argument("--build-conv", type=int, default=1, help="Dev conversation built during the measurement.")
    ap.add_argument("--baseline", type=int, default=20, help="Sequential searches measured before the load.")
    ap.add_argument("--dir", type=Path, default=None, help="Memory directory (default: a fresh temporary one).")
    ap.add_argument("--out", type=Path, default=None, help="Append the result to this markdown file.")
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
            for space, conv in (("search", args.search_conv), ("build", args.build_conv)):
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
