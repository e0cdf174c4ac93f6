"""The benchmarks' figures as pictures: PNGs drawn from the JSON the suites write.

    python -m benchmarks.plots                     # every result in benchmarks/results/ that has a plot
    python -m benchmarks.plots quality             # only that suite's

``make bench`` runs this after the suites. Figures land in ``benchmarks/plots/`` (committed, linked
from benchmarks/README.md). What is drawn:

* ``quality``: nDCG@10 against latency (p50, with a whisker to p95) for every mode of every
  collection, BM25 as the floor line (:func:`quality_figure`);
* any suite whose module defines ``plot(result, out_dir) -> list[Path]`` draws its own; a suite
  with curves (records → latency, say) calls :func:`curves` from there.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("MPLBACKEND", "Agg")

RESULTS = Path(__file__).parent / "results"
PLOTS = Path(__file__).parent / "plots"
_NOT_MODES = {"queries", "bm25", "bm25_stemmed", "scoping", "noise", "gibberish_results", "embed_p50_ms",
              "best_mode", "thinking_recall_ge_quick"}


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, out: Path) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100, bbox_inches="tight", metadata={"Software": None})  # no version stamp: stable bytes
    _pyplot().close(fig)
    return out


def _log_ms_axis(ax: Any) -> None:
    """A log x axis labelled in plain milliseconds (1, 2, 5, 10, 20, 50, ...), minor ticks unlabelled."""
    from matplotlib.ticker import LogLocator, NullFormatter, StrMethodFormatter

    ax.set_xscale("log")
    ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(StrMethodFormatter("{x:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())


def quality_modes(collection: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    """The modes measured on one collection: name → {nDCG@10, recall@10, p50_ms, p95_ms, ...}."""
    return {name: fig for name, fig in collection.items()
            if name not in _NOT_MODES and isinstance(fig, Mapping) and "nDCG@10" in fig and "p50_ms" in fig}


def quality_figure(result: Mapping[str, Any], out: Path) -> Path:
    """One panel per collection: each mode at (p50 latency, nDCG@10), a whisker to p95, BM25 dashed."""
    plt = _pyplot()
    collections = {k: v for k, v in result.items() if isinstance(v, Mapping) and quality_modes(v)}
    if not collections:
        raise ValueError("the quality result holds no collection with modes (nDCG@10 and p50_ms); run the quality suite first")
    fig, axes = plt.subplots(1, len(collections), figsize=(5.2 * len(collections), 4.2), squeeze=False)
    for ax, (name, col) in zip(axes[0], collections.items(), strict=True):
        modes = quality_modes(col)
        for i, (mode, f) in enumerate(sorted(modes.items())):
            color = f"C{i % 10}"
            ax.plot([f["p50_ms"], f["p95_ms"]], [f["nDCG@10"]] * 2, color=color, alpha=0.4, linewidth=2)
            ax.scatter([f["p50_ms"]], [f["nDCG@10"]], color=color, s=40, zorder=3, label=mode)
        if isinstance(col.get("bm25"), Mapping) and "nDCG@10" in col["bm25"]:
            ax.axhline(col["bm25"]["nDCG@10"], color="grey", linestyle="--", linewidth=1, label="BM25 (floor)")
        _log_ms_axis(ax)
        ax.set_title(f"{name} ({col.get('queries', '?')} queries)")
        ax.set_xlabel("latency per query, ms (dot p50, line to p95; log scale)")
        ax.set_ylabel("nDCG@10")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    fig.suptitle("retrieval quality against latency, per mode and collection")
    return _save(fig, out)


def curves(series: Mapping[str, Sequence[tuple[float, float]]], out: Path, *, title: str, xlabel: str, ylabel: str,
           logx: bool = False, logy: bool = False, note: str | None = None) -> Path:
    """Lines of (x, y) points, one per series (e.g. records → p50 ms per backend): the helper a
    suite's ``plot()`` calls for its curves. Points with a non-finite value are left out."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for i, (name, points) in enumerate(series.items()):
        pts = sorted((x, y) for x, y in points if math.isfinite(x) and math.isfinite(y))
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", color=f"C{i % 10}", label=name)
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    if note:
        fig.text(0.01, -0.02, note, fontsize=7, color="grey")
    return _save(fig, out)


def draw(suite: str, result: Mapping[str, Any], out_dir: Path = PLOTS) -> list[Path]:
    """The figures of one suite's result: built in for quality, else the suite module's ``plot()``."""
    if suite == "quality":
        return [quality_figure(result, out_dir / "quality.png")]
    from .run import _suites

    module_name = _suites().get(suite)
    plot = getattr(importlib.import_module(module_name), "plot", None) if module_name else None
    return list(plot(result, out_dir)) if callable(plot) else []


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.plots")
    p.add_argument("suites", nargs="*", help="suites whose results to draw (default: every result present)")
    p.add_argument("--results", default=str(RESULTS), help="folder of the suites' JSON results")
    p.add_argument("--out", default=str(PLOTS), help="folder to write the PNGs to")
    args = p.parse_args(argv)
    results = Path(args.results)
    names = args.suites or sorted(f.stem for f in results.glob("*.json"))
    for suite in names:
        path = results / f"{suite}.json"
        if not path.exists():
            raise SystemExit(f"no result {path}; run `python -m benchmarks.run {suite}` first")
        for png in draw(suite, json.loads(path.read_text()), Path(args.out)):
            print(f"{suite}: {png}")


if __name__ == "__main__":
    main()
