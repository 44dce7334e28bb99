"""No build wall (issue 21): every read works on a space with turns, a message is recallable at the next read with or
without a build in between, and once a build covers it, it enters a context once (through its scene or item)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tmem import Memory, MessageInput, Settings
from tmem.answer.budget import pack_context, route_filter
from tmem.answer.context import assemble_context
from tmem.embed import HashEmbedder
from tmem.llm.scripted import scripted_llm
from tmem.models import Turn
from tmem.retrieve.config import RetrievalConfig
from tmem.retrieve.layout import ContextLayout
from tmem.retrieve.lists import RAW_RANK_DEPTH
from tmem.retrieve.recipe import Asked, resolve
from tmem.retrieve.types import Route, SearchResult, TurnHit
from tmem.scope import Scope
from tmem.store import open_store

ASSOCIATIVE = ContextLayout.of_recipe("associative")

T0 = datetime(2024, 3, 1, 9, 0)
FACTS = [
    "I moved to Lyon for a new job at the observatory",
    "We adopted a grey cat called Pixel from the shelter",
    "My sister Ines is learning the cello this winter",
    "The bakery on Rue Ferrandiere sells the best brioche",
    "I sold my old motorbike to a neighbour for 900 euros",
    "Our book club is reading Middlemarch in April",
]
CHATTER = "hello again, how are you doing today with the weather"


def _mem(tmp_path: Path | None = None) -> Memory:
    config = Settings(home=tmp_path or Path("/nonexistent"), llm="none", session_gap_minutes=30)
    store = open_store(":memory:" if tmp_path is None else tmp_path / "tmem.db")
    return Memory(store, config, embedder=HashEmbedder())


def _say(mem: Memory, text: str, minute: int, speaker: str = "alice") -> str:
    report = mem.add_messages("u", [MessageInput(speaker=speaker, text=text, time=T0 + timedelta(minutes=minute))])
    return report.added[0]


def _chatter(mem: Memory, n: int, start: int = 0) -> None:
    for k in range(n):
        _say(mem, f"{CHATTER} number {start + k}", start + k, speaker="bot")


def test_every_read_works_before_the_first_build() -> None:
    with _mem() as mem:
        _chatter(mem, 4)
        tid = _say(mem, FACTS[0], 5)
        found = mem.search("u", "moved to Lyon")
        assert found.scenes == [] and found.items == [] and found.stale and found.stale_turns == 5
        assert found.unbuilt_turns == 5 and found.turns[0].turn.id == tid and found.turns[0].scene_id is None
        assert {r.name for r in found.turns[0].routes} == {"turn.unbuilt.bm25", "turn.unbuilt.dense"}
        ctx = mem.context("u", "moved to Lyon", max_tokens=60)
        assert FACTS[0] in ctx.text and tid in ctx.turn_ids and ctx.unbuilt_turns == 5 and ctx.tokens <= 60
        assert mem.staleness("u").stale_turns == 5


def test_a_message_appended_to_the_open_session_is_in_the_next_context() -> None:
    """The open live session keeps its content hash while it grows: the index must still see the new turn."""
    with _mem() as mem:
        _chatter(mem, 6)
        mem.build("u")
        assert FACTS[1] not in mem.context("u", "cat Pixel shelter", max_tokens=200).text  # index cached now
        tid = _say(mem, FACTS[1], 7)  # same session (within the gap): no new session hash
        assert len(mem.store.sessions(Scope.local("u"))) == 1
        ctx = mem.context("u", "cat Pixel shelter", max_tokens=200)
        assert FACTS[1] in ctx.text and ctx.unbuilt_turns == 1
        (hit,) = [h for h in ctx.hits if tid in h.turn_ids]
        assert hit.kind == "turn" and {"turn.unbuilt.bm25", "turn.unbuilt.dense"} <= {r.name for r in hit.routes}
        found = mem.search("u", "cat Pixel shelter")  # a plain search reaches it too (no turn route there)
        assert [t.turn.id for t in found.turns] == [tid] and found.stale_turns == 1


def test_after_the_build_a_message_comes_through_its_scene_or_item_once() -> None:
    with _mem() as mem:
        _chatter(mem, 5)
        tid = _say(mem, FACTS[4], 6)
        before = mem.context("u", "sold the motorbike", max_tokens=300)
        assert before.text.count("sold my old motorbike") == 1
        mem.build("u")
        after = mem.context("u", "sold the motorbike", max_tokens=300)
        assert after.text.count("sold my old motorbike") == 1 and after.unbuilt_turns == 0
        assert not mem.search("u", "sold the motorbike").turns  # no unbuilt turn left: the route is silent
        routes = {r.name for h in after.hits if tid in h.turn_ids for r in h.routes}
        assert routes and not any(r.startswith("turn.unbuilt") for r in routes)
        assert any(h.kind in ("item", "scene") for h in after.hits if tid in h.turn_ids) or "turn.dense" in routes


def test_the_unbuilt_dense_route_orders_an_anchorless_context() -> None:
    """An anchorless query keeps only the dense and trigger routes; the unbuilt-turn route's dense list is one of them
    in both automatic recipes, so fresh messages do not vanish from associative contexts."""
    for name in ("extractive", "associative"):
        assert "turn.unbuilt.dense" in ContextLayout.of_recipe(name).anchorless_routes
        assert "turn.unbuilt.bm25" not in ContextLayout.of_recipe(name).anchorless_routes
    turn = Turn(id="t1", session_id="s", seq=0, speaker="alice", text=FACTS[2], time=T0)
    result = SearchResult(
        space="u",
        query="q",
        preset="p",
        scenes=[],
        items=[],
        turns=[TurnHit(turn=turn, score=1.0, routes=[Route(name="turn.unbuilt.dense", rank=1, score=0.3)])],
        lexical_anchor=0.0,
    )
    from tmem.answer.budget import route_filter

    counts = route_filter(result, ASSOCIATIVE)
    assert counts is not None and counts("turn.unbuilt.dense") and not counts("turn.unbuilt.bm25")
    assert FACTS[2] in pack_context(result, 100, counts=counts).text


def test_the_route_is_deepened_for_a_budget_and_can_be_turned_off() -> None:
    cfg = resolve(Asked(RetrievalConfig.preset("associative"), depth=100), descriptive_only=False).config
    assert cfg.unbuilt_top == 100
    assert resolve(Asked(RetrievalConfig(unbuilt_top=0), depth=100), descriptive_only=False).config.unbuilt_top == 0
    with _mem() as mem:
        _say(mem, FACTS[3], 0)
        assert mem.search("u", "brioche", RetrievalConfig(unbuilt_top=0)).turns == []
        assert mem.search("u", "brioche").turns


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=st.lists(st.sampled_from(["add", "add", "build", "read"]), min_size=1, max_size=9))
def test_interleaved_adds_builds_and_reads_recall_every_fact_once(plan: list[str]) -> None:
    """Whatever the order of adds, builds and reads: every fact added so far is in the context of a query naming it,
    exactly once, and `unbuilt_turns` counts the turns added since the last build."""
    with _mem() as mem:
        _chatter(mem, 3)
        added: list[str] = []
        since_build = 3
        for op in plan:
            if op == "add" and len(added) < len(FACTS):
                added.append(FACTS[len(added)])
                _say(mem, added[-1], 10 + len(added))
                since_build += 1
            elif op == "build":
                mem.build("u")
                since_build = 0
            for fact in added:
                ctx = mem.context("u", fact, max_tokens=400)
                assert ctx.text.count(fact) == 1, (plan, fact, ctx.text)
                assert ctx.unbuilt_turns == since_build and ctx.tokens <= 400


def test_reads_on_another_connection_see_new_messages_on_both_backends(store_url: str, tmp_path: Path) -> None:
    """Another process's add (here a second Memory on the same store) is in this one's next context: before any
    build, after a build, and once only after the next build."""

    def memory() -> Memory:
        config = Settings(home=tmp_path, llm="none", session_gap_minutes=30)
        return Memory(open_store(store_url), config, embedder=HashEmbedder())

    with memory() as writer, memory() as reader:
        _chatter(writer, 3)
        assert reader.search("u", "weather").turns  # never built: raw turns
        _say(writer, FACTS[0], 5)
        assert FACTS[0] in reader.context("u", "Lyon observatory", max_tokens=200).text
        writer.build("u")
        assert reader.context("u", "Lyon observatory", max_tokens=200).text.count(FACTS[0]) == 1
        _say(writer, FACTS[1], 6)
        ctx = reader.context("u", "grey cat Pixel", max_tokens=200)
        assert FACTS[1] in ctx.text and ctx.unbuilt_turns == 1
        writer.build("u")
        ctx = reader.context("u", "grey cat Pixel", max_tokens=200)
        assert ctx.text.count(FACTS[1]) == 1 and ctx.unbuilt_turns == 0


def test_ask_answers_from_raw_turns_before_any_build() -> None:
    """`ask` reads like `context`: on a space never built its answerer sees the raw turn."""
    store = open_store(":memory:")
    llm = scripted_llm(store, replies=[{"answer": "Lyon"}])
    config = Settings(home=Path("/nonexistent"), llm="none", session_gap_minutes=30)
    with Memory(store, config, embedder=HashEmbedder(), llm=llm) as mem:  # answers with it (llm="none")
        _chatter(mem, 3)
        tid = _say(mem, FACTS[0], 5)
        answer = mem.ask("u", "Where did alice move?")
        assert answer.answer == "Lyon" and tid in answer.context.turn_ids
        (request,) = llm.backend.requests  # type: ignore[attr-defined]
        assert FACTS[0] in json.dumps([m.content for m in request.messages])


def test_the_whole_result_context_holds_unbuilt_turns_too() -> None:
    """Without a budget (`ask(max_tokens=None)`, `assemble_context`), raw turn hits are written out as well."""
    with _mem() as mem:
        _chatter(mem, 3)
        tid = _say(mem, FACTS[3], 5)
        context = assemble_context(mem.search("u", "bakery brioche"))
        assert FACTS[3] in context.evidence and tid in context.turn_ids
        assert context.evidence.count(FACTS[3]) == 1


def test_a_space_never_built_ranks_every_turn_as_flat_hybrid_does() -> None:
    """Never built: the unbuilt lists rank every turn (a turn BM25 cannot rank ties after its last match), the turn
    route adds no second copy of them, the context fuses the whole-list ranks with the search's k0, and a direct
    question keeps its BM25 ranks even when it is anchorless. After a build the space is no longer never built."""
    with _mem() as mem:
        _chatter(mem, 30)
        tid = _say(mem, FACTS[1], 40)
        result = mem.search("u", "the grey cat Pixel")
        assert result.never_built and result.turns[0].turn.id == tid
        names = {r.name for h in result.turns for r in h.routes}
        assert names == {"turn.unbuilt.bm25", "turn.unbuilt.dense"}
        assert all({r.name for r in h.routes} == names for h in result.turns)  # every hit has both ranks
        unmatched = [r for h in result.turns for r in h.routes if r.name == "turn.unbuilt.bm25" and r.score == 0.0]
        assert unmatched and len({r.rank for r in unmatched}) == 1  # tied at one rank after the last match
        lexical = [h for h in result.turns if any(r.name == "turn.unbuilt.bm25" and r.score > 0 for r in h.routes)]
        assert all(r.rank <= len(lexical) for h in lexical for r in h.routes if r.name == "turn.unbuilt.bm25")
        anchorless = result.model_copy(update={"lexical_anchor": 0.0, "query": "Which pet did alice adopt?"})
        assert route_filter(anchorless, ASSOCIATIVE) is None  # a question: every route counts
        statement = anchorless.model_copy(update={"query": "I keep thinking about getting a pet."})
        assert route_filter(statement, ASSOCIATIVE) is not None
        built_ctx = anchorless.model_copy(update={"never_built": False})
        assert route_filter(built_ctx, ASSOCIATIVE) is not None  # the rule is the never-built space's
        shallow = mem.search("u", "the grey cat Pixel", RetrievalConfig(name="auto", unbuilt_top=1))
        assert {r.rank for h in shallow.turns for r in h.routes} <= set(range(1, RAW_RANK_DEPTH + 2))  # ranked 20 deep
        mem.build("u")
        _say(mem, FACTS[2], 50)
        assert not mem.search("u", "sister cello").never_built
