"""Small pure parts of the harness: first-fit packing, variant parsing, query memo, report cells."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from tmem.embed.hashing import HashEmbedder
from tmem.errors import ConfigError, InputError
from tmem.eval.baselines import pack
from tmem.eval.harness import MemoEmbedder, parse_variants
from tmem.eval.records import CoverageRecord, ResultsFile, SystemCoverage
from tmem.eval.report import MeanStd, coverage_report
from tmem.eval.retrieval_only import system_coverage
from tmem.retrieve.config import RetrievalConfig


def test_pack_is_first_fit_within_budget() -> None:
    units = [(["a"], 50), (["b", "c"], 40), (["d"], 30), (["e"], 10)]
    packed = pack(units, 100)
    assert packed.turn_ids == ["a", "b", "c", "e"] and packed.tokens == 100  # d would overflow and is skipped
    assert pack(units, 5).turn_ids == [] and pack(units, 5).tokens == 0
    assert pack([], 100).tokens == 0


def test_variants_from_ablate_and_sweep() -> None:
    base = RetrievalConfig.preset("paper")
    variants = parse_variants(base, "SL, ST+HT,ET+BT", ["kT=5,10", "R=3"])
    assert [v.name for v in variants] == ["full", "w/o SL", "w/o ST+HT", "w/o ET+BT", "kT=5", "kT=10", "R=3"]
    by = {v.name: v.config for v in variants}
    assert by["w/o ST+HT"].disabled == frozenset({"ST", "HT"})
    assert by["w/o ET+BT"].disabled == frozenset({"ET+BT"})
    assert by["kT=5"].k_topics == 5 and by["R=3"].item_trigger_top == 3 and by["full"] == base
    with pytest.raises(ConfigError, match="Unknown ablation switch"):
        parse_variants(base, "XX", [])
    with pytest.raises(ConfigError, match="NAME one of"):
        parse_variants(base, None, ["k=5"])
    with pytest.raises(ConfigError, match="not an integer"):
        parse_variants(base, None, ["kS=five"])


def test_memo_embedder_embeds_each_query_once() -> None:
    class Counting(HashEmbedder):
        calls = 0

        def embed(self, texts):  # type: ignore[no-untyped-def]
            Counting.calls += 1
            return super().embed(texts)

    memo = MemoEmbedder(Counting())
    memo.prime(["q1", "q2"])
    first = memo.embed(["q1"]).vectors
    again = memo.embed(["q1"]).vectors
    assert Counting.calls == 1 and (first == again).all()
    assert memo.embed(["a"] * 20).vectors.shape == (20, 256)  # bulk (index) texts pass through
    assert memo.model_id == "hash-256"


def test_mean_std_cell() -> None:
    assert MeanStd(mean=80.0, std=1.234, n=3).cell() == "80.00 ± 1.23"
    assert MeanStd(mean=80.0, std=0.0, n=3).cell() == "80.00"
    assert MeanStd(mean=math.nan, std=math.nan, n=0).cell() == "–"


def _coverage(key: str) -> CoverageRecord:
    return CoverageRecord(
        key=key,
        variant="full",
        space="conv-1",
        benchmark="locomo",
        category=4,
        question="q?",
        gold_turn_ids=["D1:1"],
        systems={"tmem": SystemCoverage(tokens=10, coverage=1.0, hit=True)},
        retrieved=[],
    )


def test_results_file_redoes_only_a_cut_last_line_and_refuses_damage_elsewhere(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    good = [_coverage(f"conv-1#{i}").model_dump_json() for i in range(3)]
    # an interrupted append leaves the last line cut short: that question is redone, the rest kept
    path.write_text(good[0] + "\n" + good[1] + "\n" + good[2][:40], encoding="utf-8")
    results = ResultsFile(path, CoverageRecord)
    assert results.damaged == [3] and len(results) == 2 and "full|conv-1#2" not in results
    assert path.read_text(encoding="utf-8") == good[0] + "\n" + good[1] + "\n"
    # a bad line before the end is no interruption (another tmem version, an edit): refuse rather than drop results
    path.write_text(good[0] + "\n" + '{"key": "conv-1#1"}' + "\n" + good[2] + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"line 2 .*another --out"):
        ResultsFile(path, CoverageRecord)
    assert path.read_text(encoding="utf-8").count("\n") == 3  # left as it was
    path.write_text(good[0] + "\n" + '{"key": "conv-1#1"}' + "\n", encoding="utf-8")  # complete, not a record
    with pytest.raises(InputError, match=r"line 2 "):
        ResultsFile(path, CoverageRecord)


def test_coverage_and_cue_hit_by_hand() -> None:
    context = {"D1:1", "D1:2", "P0:2"}
    # LoCoMo: coverage is the share of gold turns inside; a hit needs every one of them
    two_of_three = system_coverage(context, ["D1:1", "D1:2", "D2:5"], 120, any_hit=False)
    assert (two_of_three.coverage, two_of_three.hit, two_of_three.tokens) == (pytest.approx(2 / 3), False, 120)
    assert system_coverage(context, ["D1:2"], 5, any_hit=False).hit
    # LoCoMo-Plus: binary, any cue turn inside is a hit
    assert system_coverage(context, ["P0:1", "P0:2"], 9, any_hit=True) == SystemCoverage(
        tokens=9, coverage=None, hit=True
    )
    assert not system_coverage(context, ["P1:1"], 9, any_hit=True).hit
    # no usable gold: nothing to cover, never a hit
    assert system_coverage(context, [], 9, any_hit=False) == SystemCoverage(tokens=9, coverage=None, hit=False)


def test_coverage_report_by_hand() -> None:
    def rec(key: str, category: int, tmem: SystemCoverage, bm25: SystemCoverage, gold: list[str]) -> CoverageRecord:
        return _coverage(key).model_copy(
            update={"category": category, "gold_turn_ids": gold, "systems": {"tmem": tmem, "bm25": bm25}}
        )

    records = [
        rec("c#0", 4, SystemCoverage(tokens=100, coverage=1.0, hit=True), SystemCoverage(tokens=90, coverage=0.0, hit=False), ["D1:1"]),
        rec("c#1", 4, SystemCoverage(tokens=300, coverage=0.5, hit=False), SystemCoverage(tokens=280, coverage=0.5, hit=False), ["D1:1", "D1:2"]),
        rec("c#2", 2, SystemCoverage(tokens=200, coverage=0.0, hit=False), SystemCoverage(tokens=200, coverage=1.0, hit=True), ["D2:1"]),
        rec("c#3", 1, SystemCoverage(tokens=50, coverage=None, hit=False), SystemCoverage(tokens=50, coverage=None, hit=False), []),
    ]  # fmt: skip
    report = coverage_report(records, benchmark="locomo", preset="paper")
    assert (report.questions, report.scored) == (4, 3)  # c#3 has no usable evidence and is not scored
    tmem, bm25 = report.rows
    assert (tmem.system, bm25.system) == ("tmem", "bm25") and tmem.n == bm25.n == 3
    assert tmem.overall == pytest.approx(50.0) and bm25.overall == pytest.approx(50.0)  # (1 + .5 + 0) / 3
    assert tmem.by_category["Single-hop"] == pytest.approx(75.0) and tmem.by_category["Temporal"] == 0.0
    assert bm25.by_category["Single-hop"] == pytest.approx(25.0) and bm25.by_category["Temporal"] == 100.0
    assert math.isnan(tmem.by_category["Multi-hop"])  # no scored question in that category
    assert tmem.all_hit == pytest.approx(100 / 3) and tmem.tokens == pytest.approx(200.0)
