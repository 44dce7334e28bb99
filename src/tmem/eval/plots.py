"""PNG figures for retrieval-only reports (matplotlib, Agg backend: no display needed).

* ``budgets.png``: LoCoMo evidence coverage or LoCoMo-Plus cue hit against the context budget, one line per system
  (tmem, the flat baselines, the query-agnostic control);
* ``variants.png``: the ablation and sweep variants as bars beside the full system, at its natural size.

The names are those :func:`tmem.eval.report.plot_names` links from ``report.md``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tmem.eval.report import SYSTEM_LABELS, CoverageReport, plot_names
from tmem.util.extras import require_extra

_STYLE: dict[str, dict[str, Any]] = {
    "tmem": {"color": "#c0392b", "linewidth": 2.6, "marker": "o"},
    "dense": {"color": "#2471a3", "linewidth": 1.6, "marker": "s"},
    "hybrid": {"color": "#7d3c98", "linewidth": 1.6, "marker": "^"},
    "bm25": {"color": "#7f8c8d", "linewidth": 1.2, "marker": "v", "linestyle": "--"},
    "random-scenes": {"color": "#b7950b", "linewidth": 1.2, "marker": "x", "linestyle": ":"},
}


def _metric(report: CoverageReport) -> str:
    return "LoCoMo evidence coverage (%)" if report.benchmark == "locomo" else "LoCoMo-Plus cue hit (%)"


def write_coverage_plots(folder: Path, report: CoverageReport) -> list[Path]:
    """Write the figures the report has data for; returns their paths."""
    require_extra("eval", "Plotting an evaluation report")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written: list[Path] = []
    names = dict(plot_names(report))
    folder.mkdir(parents=True, exist_ok=True)
    if "budgets.png" in names:
        fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=110)
        for system in dict.fromkeys(r.system for r in report.budget_rows):
            rows = sorted((r for r in report.budget_rows if r.system == system), key=lambda r: r.budget)
            label = "tmem (Memory.context)" if system == "tmem" else SYSTEM_LABELS.get(system, system)
            ax.plot([r.budget for r in rows], [r.value for r in rows], label=label, **_STYLE.get(system, {}))
        ax.set_xscale("log", base=2)
        budgets = sorted({r.budget for r in report.budget_rows})
        ax.set_xticks(budgets, [str(b) for b in budgets])
        ax.set_xlabel(f"context budget ({report.counter} tokens)")
        ax.set_ylabel(_metric(report))
        ax.set_ylim(0, 100)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="lower right")
        ax.set_title(f"{report.benchmark}: recall at equal context tokens (n = {report.budget_rows[0].n})", fontsize=10)
        fig.tight_layout()
        path = folder / "budgets.png"
        fig.savefig(path)
        plt.close(fig)
        written.append(path)
    if "variants.png" in names:
        bars = [r for r in report.rows if r.system == "tmem"]
        fig, ax = plt.subplots(figsize=(6.4, 0.45 * len(bars) + 1.2), dpi=110)
        labels = [r.variant for r in bars]
        values = [r.overall for r in bars]
        colors = ["#c0392b" if r.variant == "full" else "#95a5a6" for r in bars]
        ax.barh(labels, values, color=colors)
        for n, bar in enumerate(bars):
            ax.text(bar.overall + 0.5, n, f"{bar.overall:.1f} ({bar.tokens:.0f} tok)", va="center", fontsize=7)
        ax.invert_yaxis()
        ax.set_xlim(0, 110)
        ax.set_xlabel(_metric(report) + ", tmem at its natural size")
        ax.set_title(f"{report.benchmark}: ablations and sweeps", fontsize=10)
        fig.tight_layout()
        path = folder / "variants.png"
        fig.savefig(path)
        plt.close(fig)
        written.append(path)
    return written
