"""A build never makes memory disappear (docs/reliability.md): while an incremental build rebuilds the session that
grew, readers on their own connections keep finding what they found before it started, on both backends, and
`tmem check` sees no gap.

The builder's embedder is the hash embedder slowed down once the build starts (a real model under load takes that
long), so the build runs for seconds while reader threads poll: the window in which the reopened session used to be
missing (its scenes deleted and committed before the rebuilt ones were written) is wide enough to be hit many times.
The memory is also checked once at a fixed point of the build (its first slow embedding, before it writes anything
of the session): `tmem check` itself now waits for the build lease, but what it would read there has no gap.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from pathlib import Path

from tmem import Memory, Settings
from tmem.construct.check import check_space
from tmem.embed.base import EmbeddingResult
from tmem.embed.hashing import HashEmbedder
from tmem.ingest.messages import MessageInput
from tmem.retrieve.types import SearchResult
from tmem.scope import Scope
from tmem.store import open_store

T0 = datetime(2026, 3, 2, 10, 0)
FACTS = [
    "I adopted a grey kitten named Miso from the shelter",
    "My sister Ana moved to Porto for a nursing job",
    "I sold my old bicycle and bought a green kayak",
]
QUERIES = ["what is the name of the kitten?", "where did Ana move?", "what did I buy instead of the bicycle?"]


class SlowEmbedder(HashEmbedder):
    """The hash embedder, taking ``delay`` seconds per call while ``slow`` is set; ``during`` runs once, at the first
    slow call (the build is under way and has not written the session yet)."""

    def __init__(self, delay: float) -> None:
        super().__init__()
        self.delay = delay
        self.slow = threading.Event()
        self.during: list[Callable[[], None]] = []

    def embed(self, texts: Sequence[str]) -> EmbeddingResult:
        if self.slow.is_set():
            while self.during:
                self.during.pop()()
            time.sleep(self.delay)
        return super().embed(texts)


def _messages(texts: Sequence[str], start: int) -> list[MessageInput]:
    return [
        MessageInput(speaker=("ann", "bo")[(start + n) % 2], text=text, time=T0 + timedelta(minutes=start + n))
        for n, text in enumerate(texts)
    ]


def _memory(url: str, home: Path, embedder: HashEmbedder) -> Memory:
    return Memory(open_store(url), Settings(home=home, llm="none", session_gap_minutes=30), embedder=embedder)


def _found(result: SearchResult) -> set[str]:
    """Turns the built memory returns: raw text of its scenes and the source turns of its items."""
    return {t.id for sh in result.scenes for t in sh.turns} | {tid for ih in result.items for tid in ih.source_turn_ids}


def test_readers_never_lose_a_fact_during_an_incremental_build(store_url: str, tmp_path: Path) -> None:
    embedder = SlowEmbedder(delay=0.4)
    writer = _memory(store_url, tmp_path, embedder)
    chatter = [f"we talked about the weather and the {w} again" for w in ("garden", "museum", "river", "market")]
    writer.add_messages("u", _messages([*FACTS, *chatter], 0))
    writer.build("u")
    with _memory(store_url, tmp_path, HashEmbedder()) as probe:
        before = {q: _found(probe.search(Scope.local("u"), q)) for q in QUERIES}
    assert all(before.values()), "each fact is found through the built memory before the build"

    # Messages appended to the open (built) session: the next build reopens and rebuilds that session.
    writer.add_messages("u", _messages([f"later we planned a trip to the {w}" for w in ("coast", "alps")], 20))
    polls: list[dict[str, set[str]]] = []
    violations: list[str] = []
    done = threading.Event()

    def check_mid_build() -> None:  # what `tmem check` reads while the build runs (its own connection)
        store = open_store(store_url)
        try:
            violations.extend(v.code for v in check_space(store, Scope.local("u")).violations)
        finally:
            store.close()

    def read() -> None:
        with _memory(store_url, tmp_path, HashEmbedder()) as reader:
            while not done.is_set():
                polls.append({q: _found(reader.search("u", q)) for q in QUERIES})

    embedder.during.append(check_mid_build)
    embedder.slow.set()
    with ThreadPoolExecutor(2) as pool:
        readers = [pool.submit(read) for _ in range(2)]
        try:
            report = writer.build("u")
        finally:
            done.set()
            writer.close()
        for reader in readers:
            reader.result()  # a reader's exception fails the test here
    assert report.stages[0].created > 0, "the session was built again"
    assert not embedder.during, "the check ran while the build was under way"
    assert len(polls) >= 4, "the readers overlapped the build"
    for poll in polls:
        for q in QUERIES:
            assert before[q] <= poll[q], f"{q!r}: a reader lost {sorted(before[q] - poll[q])} during the build"
    assert violations == [], "mid-build, the session's turns are still in their (old) scenes"
