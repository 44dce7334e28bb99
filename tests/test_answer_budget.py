"""The budgeted context: never over its budget (property), what it holds is what it says it holds, and the front ends
(Memory.context, `tmem search --max-tokens`, the answerer) all go through it."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tmem import Memory, Settings
from tmem.answer.budget import Context, pack_context
from tmem.cli.main import cli
from tmem.embed import HashEmbedder
from tmem.retrieve.layout import ContextLayout
from tmem.scope import Scope
from tmem.util.text import count_tokens
from tmem.util.tokens import TOKENIZERS, token_counter

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
LLM_BUILT = SHARED / "llm-built" / "d26-plus.db"

QUERIES = st.one_of(
    st.sampled_from(
        [
            "When did Caroline go to the LGBTQ support group?",
            "My feet and calves are killing me by every evening lately. Weird, right?",
            "",
            "???",
            "adoption agencies painting",
        ]
    ),
    st.text(max_size=80),
)
BUDGETS = st.one_of(st.integers(min_value=0, max_value=40), st.integers(min_value=0, max_value=5000))


@pytest.fixture(scope="module")
def llm_memory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    """A copy of a shipped LLM-built memory (items, four trigger families, persona), searched with the hash
    embedder so that the test needs no model."""
    if not LLM_BUILT.exists():
        pytest.skip(f"{LLM_BUILT} is not here")
    home = tmp_path_factory.mktemp("llm-built")
    shutil.copy(LLM_BUILT, home / "tmem.db")
    with Memory.open(home, Settings(llm="none"), embedder=HashEmbedder()) as mem:
        yield mem


def _check(ctx: Context, budget: int, tokenizer: str = "cl100k") -> None:
    """Within budget by the real count of the text (cl100k unless told), and what it says it holds adds up."""
    assert ctx.counter == tokenizer
    assert ctx.tokens == token_counter(tokenizer).count(ctx.text)
    assert ctx.tokens <= budget
    assert ctx.evidence_tokens + ctx.persona_tokens == ctx.tokens
    assert sum(h.tokens for h in ctx.hits) == ctx.evidence_tokens
    assert ctx.max_tokens == budget
    for hit in ctx.hits:
        assert hit.routes, f"{hit.kind} {hit.id} entered without a route"
        assert hit.turn_ids and set(hit.turn_ids) <= set(ctx.turn_ids)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=QUERIES, budget=BUDGETS)
def test_context_never_exceeds_its_budget(llm_memory: Memory, query: str, budget: int) -> None:
    ctx = llm_memory.context("d26-plus", query, max_tokens=budget)
    _check(ctx, budget)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=QUERIES, budget=BUDGETS, preset=st.sampled_from(["paper", "no-triggers", "minilm", "auto"]))
def test_budget_holds_for_every_preset(llm_memory: Memory, query: str, budget: int, preset: str) -> None:
    _check(llm_memory.context("d26-plus", query, max_tokens=budget, config=preset), budget)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=QUERIES, budget=BUDGETS, tokenizer=st.sampled_from(TOKENIZERS))
def test_budget_holds_for_either_tokenizer(llm_memory: Memory, query: str, budget: int, tokenizer: str) -> None:
    result = llm_memory.search("d26-plus", query)
    _check(pack_context(result, budget, counter=token_counter(tokenizer)), budget, tokenizer)


def test_the_tokenizer_setting_names_what_max_tokens_counts(llm_memory: Memory) -> None:
    """The default budget is in cl100k tokens; TMEM_TOKENIZER=words counts words and punctuation instead. The two
    differ on a real context (the word count is no longer what a budget means)."""
    assert Settings(llm="none").tokenizer == "cl100k"
    ctx = llm_memory.context("d26-plus", "What did Caroline say about adoption?", max_tokens=1000)
    assert ctx.counter == "cl100k" and ctx.tokens == token_counter("cl100k").count(ctx.text)
    assert count_tokens(ctx.text) != ctx.tokens
    with Memory.open(llm_memory.settings.home, Settings(llm="none", tokenizer="words"), embedder=HashEmbedder()) as m:
        words = m.context("d26-plus", "What did Caroline say about adoption?", max_tokens=1000)
    assert words.counter == "words" and words.tokens == count_tokens(words.text) <= 1000


def test_what_the_context_says_it_holds_is_in_its_text(llm_memory: Memory) -> None:
    ctx = llm_memory.context("d26-plus", "What did Caroline say about adoption?", max_tokens=1500)
    assert 1200 < ctx.tokens <= 1500, "a large memory should fill most of the budget"
    turns = {t.id: t for t in llm_memory.store.turns(Scope.local("d26-plus"))}
    items = {i.id: i for i in llm_memory.store.items(Scope.local("d26-plus"))}
    kinds = {h.kind for h in ctx.hits}
    assert {"item", "turn"} <= kinds
    for hit in ctx.hits:
        if hit.kind == "item":
            assert items[hit.id].text in ctx.text
        else:
            for tid in hit.turn_ids:
                assert f"{turns[tid].speaker}: {turns[tid].text}" in ctx.text
    assert "Persona notes" not in ctx.text, "the persona comes after the evidence, only when it still fits"
    roomy = llm_memory.context("d26-plus", "What did Caroline say about adoption?", max_tokens=None)
    assert "Persona notes" in roomy.text and roomy.persona_tokens > 0


def test_zero_budget_is_an_empty_context(llm_memory: Memory) -> None:
    ctx = llm_memory.context("d26-plus", "adoption", max_tokens=0)
    assert (ctx.text, ctx.tokens, ctx.hits, ctx.turn_ids) == ("", 0, [], [])
    assert ctx.left_out > 0


def test_negative_budget_is_refused(llm_memory: Memory) -> None:
    result = llm_memory.search("d26-plus", "adoption")
    with pytest.raises(ValueError, match="max_tokens"):
        pack_context(result, -1)


def test_unlimited_context_takes_every_hit(llm_memory: Memory) -> None:
    result = llm_memory.search("d26-plus", "adoption")
    ctx = pack_context(result, None)
    assert ctx.max_tokens is None and ctx.left_out == 0
    taken = {h.id for h in ctx.hits if h.kind == "item"}
    for hit in result.items:  # every item is in, unless its source turns already are, word for word
        assert hit.item.id in taken or set(hit.source_turn_ids) <= set(ctx.turn_ids)
    assert {h.id for h in ctx.hits if h.kind == "scene"} <= {h.scene.id for h in result.scenes}


def test_unbuilt_turns_are_reported(tmp_path: Path) -> None:
    sample = json.loads((SHARED / "locomo10.dev.json").read_text())[0]
    conv = sample["conversation"]
    keep = {k: conv[k] for k in ("speaker_a", "speaker_b", "session_1", "session_1_date_time")}
    first = tmp_path / "one.json"
    first.write_text(json.dumps([{"sample_id": "s", "conversation": keep, "qa": []}]))
    keep.update(session_2=conv["session_2"], session_2_date_time=conv["session_2_date_time"])
    both = tmp_path / "two.json"
    both.write_text(json.dumps([{"sample_id": "s", "conversation": keep, "qa": []}]))
    with Memory.open(tmp_path / "m", Settings(llm="none"), embedder=HashEmbedder()) as mem:
        mem.import_file(first)
        mem.build("s")
        assert mem.context("s", "support group", max_tokens=300).unbuilt_turns == 0
        mem.import_file(both)
        ctx = mem.context("s", "support group", max_tokens=300)
        assert ctx.unbuilt_turns == len(conv["session_2"])
        assert ctx.tokens <= 300


def _cli_home(tmp_path: Path) -> tuple[Path, CliRunner, dict[str, str]]:
    """A copy of the LLM-built memory for the CLI, a runner, and the CLI's offline settings."""
    home = tmp_path / "cli"
    home.mkdir()
    shutil.copy(LLM_BUILT, home / "tmem.db")
    return home, CliRunner(), {"TMEM_EMBED_BACKEND": "hash", "TMEM_LLM": "none"}


def test_cli_search_max_tokens(llm_memory: Memory, tmp_path: Path) -> None:
    home, runner, env = _cli_home(tmp_path)
    out = runner.invoke(
        cli, ["--dir", str(home), "search", "d26-plus", "adoption", "--max-tokens", "120", "--json"], env=env
    )
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data["tokens"] <= 120 and data["max_tokens"] == 120 and data["hits"]
    out = runner.invoke(
        cli, ["--dir", str(home), "search", "d26-plus", "adoption", "--max-tokens", "120", "--explain"], env=env
    )
    assert out.exit_code == 0, out.output
    assert "Why recalled:" in out.output and "via " in out.output


def test_cli_search_lays_the_context_out_as_asked(llm_memory: Memory, tmp_path: Path) -> None:
    home, runner, env = _cli_home(tmp_path)
    base = ["--dir", str(home), "search", "d26-plus", "adoption", "--max-tokens", "300", "--json"]
    layout = ["--layout", "scene_titles=true", "--layout", "anchorless_routes=turn.dense,scene.dense"]
    out = runner.invoke(cli, [*base, *layout], env=env)
    assert out.exit_code == 0, out.output
    laid = ContextLayout(scene_titles=True, anchorless_routes=frozenset({"turn.dense", "scene.dense"}))
    with Memory.open(home, Settings(home=home, llm="none", embed_backend="hash")) as mem:
        assert json.loads(out.output)["text"] == mem.context("d26-plus", "adoption", 300, layout=laid).text
    for bad, says in (("context_k0=-1", "context_k0"), ("novalue", "FIELD=VALUE"), ("kS=3", "kS")):
        out = runner.invoke(cli, [*base, "--layout", bad], env=env)
        assert out.exit_code != 0 and says in str(out.exception), bad
    out = runner.invoke(cli, ["--dir", str(home), "search", "d26-plus", "adoption", "--layout", "scene_titles=true"])
    assert out.exit_code == 2 and "--max-tokens" in out.output
