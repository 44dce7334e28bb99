"""Context layouts (issue 29): the parts of a context in rank order, or the best-ranked first then the date order;
the count stays exact, what enters does not depend on the layout beyond its separators, and the evidence position
the benches report (tmem.eval.position) reads the text as laid out."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from tmem import Memory
from tmem.answer.blocks import Draft, TurnBlock
from tmem.answer.budget import pack_context
from tmem.cli.main import cli
from tmem.embed.hashing import HashEmbedder
from tmem.eval.position import context_position, flat_positions, summary
from tmem.models import Item, ItemKind, Turn
from tmem.retrieve.config import RetrievalConfig
from tmem.retrieve.layout import ContextLayout, placement
from tmem.retrieve.recipe import asked, resolve
from tmem.retrieve.types import ItemHit, Route, SearchResult, TurnHit
from tmem.settings import Settings
from tmem.util.tokens import TOKENIZERS, token_counter

from .test_answer_blocks import FACTS, SESSIONS


def _parts(draft: Draft) -> list[str]:
    """The parts of the rendered text, each named by its first line, fact lines one by one."""
    names: list[str] = []
    for chunk in draft.evidence().split("\n\n"):
        lines = chunk.splitlines()
        names += lines if lines[0].startswith("- ") else [lines[0] + "|" + lines[1]]
    return names


@settings(deadline=None)  # the first call loads the tokenizer
@given(
    st.sampled_from(["rank", "lead1", "lead2"]),
    st.lists(st.tuples(st.booleans(), st.integers(0, 8), st.booleans()), min_size=1, max_size=25),
    st.sampled_from(TOKENIZERS),
)
def test_a_ranked_layout_keeps_its_count_exact_and_puts_parts_in_the_order_they_entered(
    name: str, ops: list[tuple[bool, int, bool]], tokenizer: str
) -> None:
    counter = token_counter(tokenizer)
    layout = ContextLayout(**placement(name))
    draft = Draft(counter, titled=False, order=layout.order, lead=layout.lead)
    entered: list[str] = []  # parts in the order they opened
    for is_fact, n, add in ops:
        if is_fact:
            line, when = FACTS[n % len(FACTS)]
            if line in draft.facts:
                continue
            draft.add_fact(line, when)
            if add:
                entered.append(line)
            else:
                draft.pop_fact()
        else:
            turn = SESSIONS[n]
            key = f"session:{turn.session_id}"
            present = key in draft.blocks and turn in draft.blocks[key].turns
            if add and not present:
                draft.add_turn(turn, None)
                if key not in entered:
                    entered.append(key)
            elif not add and present:
                draft.remove_turn(turn, None)
                if key not in draft.blocks:
                    entered.remove(key)
        text = draft.evidence()
        assert draft.tokens == (counter.count(text) if text else 0)
        assert "Facts:" not in text
        if not text:
            continue
        names = _parts(draft)
        first_lines = [p.split("|")[0] for p in names]
        wanted = [e if e.startswith("- ") else _header(draft.blocks[e]) for e in entered]
        lead = len(wanted) if layout.order == "rank" else layout.lead
        assert first_lines[:lead] == wanted[:lead]
        assert sorted(first_lines) == sorted(wanted)


def _header(block: TurnBlock) -> str:
    return block.render().splitlines()[0]


def _item_hit(n: int, text: str, day: int, rank: int) -> ItemHit:
    item = Item(
        id=f"i{n}",
        text=text,
        kind=ItemKind.ATOMIC,
        scene_ids=["S1"],
        speaker="Dana",
        date=f"2023-05-{day:02d}",
        turn_ids=[f"t{n}"],
        seq=n,
    )
    return ItemHit(
        item=item,
        source_scenes=[],
        source_turn_ids=[f"t{n}"],
        score=1.0 / rank,
        routes=[Route(name="item.dense", rank=rank, score=1.0 / rank)],
    )


def _turn_hit(n: int, text: str, day: int, rank: int) -> TurnHit:
    turn = Turn(id=f"u{n}", session_id=f"s{day}", seq=n, speaker="Dana", text=text, time=datetime(2023, 5, day, 9))
    return TurnHit(turn=turn, score=1.0 / rank, routes=[Route(name="turn.dense", rank=rank, score=1.0 / rank)])


def _mixed() -> SearchResult:
    """An old turn ranked first, a newer fact second, an older fact third, the newest turn fourth."""
    return SearchResult(
        space="s",
        query="What did Dana say about the lake?",
        preset="p",
        scenes=[],
        items=[
            _item_hit(1, "Dana swam across the lake in June.", 20, 2),
            _item_hit(2, "Dana bought a kayak.", 3, 3),
        ],
        turns=[
            _turn_hit(3, "The lake was frozen when I walked there.", 1, 1),
            _turn_hit(4, "I am back from the coast.", 28, 4),
        ],
    )


def test_the_rank_layout_reads_best_ranked_first_with_dates_on_every_part() -> None:
    ctx = pack_context(_mixed(), 1000, include_persona=False, order="rank")
    lines = ctx.text.splitlines()
    assert lines[:2] == ["Scene (1 May 2023): Conversation", "Dana: The lake was frozen when I walked there."]
    assert ctx.text.index("swam") < ctx.text.index("kayak") < ctx.text.index("coast")
    assert "(2023-05-20)" in ctx.text and "(2023-05-03)" in ctx.text and "Scene (28 May 2023)" in ctx.text
    assert "Facts:" not in ctx.text and ctx.tokens == token_counter("cl100k").count(ctx.text)


def test_a_lead_puts_the_best_ranked_parts_first_then_the_rest_newest_first() -> None:
    text = pack_context(_mixed(), 1000, include_persona=False, lead=1).text
    assert text.startswith("Scene (1 May 2023): Conversation\nDana: The lake was frozen")
    assert text.index("coast") < text.index("swam") < text.index("kayak")  # 28 May, 20 May, 3 May


@pytest.mark.parametrize("name", ["date", "rank", "lead2"])
def test_a_layout_changes_where_parts_land_not_what_enters(name: str) -> None:
    date_ctx = pack_context(_mixed(), 1000, include_persona=False)
    ctx = pack_context(_mixed(), 1000, include_persona=False, **placement(name))
    assert sorted(ctx.turn_ids) == sorted(date_ctx.turn_ids)
    lines = [line for line in ctx.text.splitlines() if line not in ("", "Facts:")]
    assert sorted(lines) == sorted(line for line in date_ctx.text.splitlines() if line not in ("", "Facts:"))


def test_layout_names_are_checked() -> None:
    assert ContextLayout(**placement("lead3")).name == "lead3" and ContextLayout(**placement("rank")).name == "rank"
    for bad in ("lead0", "leadx", "time", ""):
        with pytest.raises(ValueError, match="unknown context layout"):
            placement(bad)
    with pytest.raises(ValueError, match="greater than or equal to 0"):
        ContextLayout(lead=-1)
    with pytest.raises(ValueError, match="'date' or 'rank'"):
        ContextLayout.model_validate({"order": "time"})


def test_the_evidence_position_reads_the_text_as_laid_out() -> None:
    counter = token_counter("cl100k")
    result = _mixed()
    found = {}
    for name in ("rank", "date"):
        ctx = pack_context(result, 1000, include_persona=False, **placement(name))
        found[name] = context_position(ctx, result, ["u3"], counter)
        fact = context_position(ctx, result, ["t2"], counter)  # through the fact line whose source it is
        assert fact is not None and 0.0 < fact < 1.0
    assert context_position(ctx, result, ["nowhere"], counter) is None
    rank = pack_context(result, 1000, include_persona=False, order="rank")
    header = counter.count("Scene (1 May 2023): Conversation\n")
    assert found["rank"] == header / rank.tokens  # its line follows its block's date header
    assert found["date"] is not None and found["date"] > 0.5  # the oldest turn ends the date layout


def test_a_flat_context_has_a_rank_order_and_a_time_order_position() -> None:
    tokens = {"a": 10, "b": 30, "c": 60}
    seq = {"a": 2, "b": 0, "c": 1}.__getitem__
    assert flat_positions(["a", "b", "c"], ["c"], tokens, seq) == (0.4, 0.3)
    assert flat_positions(["a", "b"], ["c"], tokens, seq) == (None, None)
    assert summary([0.1, None, 0.5, 0.2]) == (0.2, 2 / 3, 3)
    assert summary([None]) == (None, None, 0)


def test_the_command_line_takes_a_layout(tmp_path: Path) -> None:
    """`tmem search --max-tokens N --layout NAME` (and `ask`, `eval replies`): a placement name or layout fields."""
    home = tmp_path / "home"
    mem = Memory.open(home, Settings(llm="none", embed_backend="hash"), embedder=HashEmbedder())
    days = ["2023-05-01", "2023-05-09", "2023-05-20"]
    texts = ["We went to the lake with the kids.", "The lake was frozen this time.", "I sold my kayak at the lake."]
    mem.add_messages(
        "s", [{"speaker": "Ann", "text": t, "time": f"{d}T10:00:00"} for d, t in zip(days, texts, strict=True)]
    )
    mem.build("s")
    mem.close()
    env = {"TMEM_EMBED_BACKEND": "hash"}
    base = ["--dir", str(home), "search", "s", "lake kayak", "--max-tokens", "200", "--json"]
    runner = CliRunner()
    texts_by = {}
    for value in ("rank", "date", '{"order": "rank", "context_k0": 5}'):
        out = runner.invoke(cli, [*base, "--layout", value], env=env)
        assert out.exit_code == 0, out.output
        texts_by[value] = json.loads(out.output)["text"]
    assert sorted(texts_by["rank"].split("\n\n")) == sorted(texts_by["date"].split("\n\n"))  # the same parts
    bad = runner.invoke(cli, [*base, "--layout", "sideways"], env=env)
    assert "unknown context layout 'sideways'" in str(bad.exception)
    unbudgeted = runner.invoke(cli, ["--dir", str(home), "search", "s", "lake", "--layout", "rank"], env=env)
    assert unbudgeted.exit_code == 2 and "add --max-tokens" in unbudgeted.output


def test_the_order_is_the_date_order_unless_set_and_kept_when_set() -> None:
    """No recipe changes the order (rank order raised stale-first on the update probes, docs/context.md); an order
    the caller set is kept on every kind of space."""
    auto = RetrievalConfig.preset("auto")
    for descriptive_only, never_built in ((False, False), (True, False), (False, True)):
        got = resolve(asked(auto), descriptive_only=descriptive_only, never_built=never_built).layout
        assert (got.order, got.lead) == ("date", 0)
        for name in ("date", "rank", "lead2"):
            laid = asked(auto, ContextLayout(**placement(name)))
            kept = resolve(laid, descriptive_only=descriptive_only, never_built=never_built).layout
            assert kept.name == name
