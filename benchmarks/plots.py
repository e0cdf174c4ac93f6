"""The benchmarks' figures as pictures: PNGs drawn from the JSON the suites write.

    python -m benchmarks.plots                     # every result in benchmarks/results/ that has a plot
    python -m benchmarks.plots quality             # only that suite's

``make bench`` runs this after the suites. Figures land in ``benchmarks/plots/`` (committed, linked
from benchmarks/README.md), each with ``<name>.json`` beside it: the values it drew and the run's
note. ``python -m benchmarks.plots --check`` reads benchmarks/README.md and refuses (exit 1) a
picture whose drawn values are not the figures of the text above it (the table of its run), or
that has no record of what it drew. What is drawn:

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
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("MPLBACKEND", "Agg")

RESULTS = Path(__file__).parent / "results"
PLOTS = Path(__file__).parent / "plots"
README = Path(__file__).parent / "README.md"
_NOT_MODES = {"queries", "bm25", "bm25_stemmed", "scoping", "noise", "gibberish_results", "embed_p50_ms",
              "best_mode", "thinking_recall_ge_quick"}


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, out: Path, series: Mapping[str, Sequence[tuple[float, float]]], note: str | None = None, *,
          x_measured: bool = False, lines: Mapping[str, float] | None = None) -> Path:
    """The PNG, and beside it what it drew (``series``: name → (x, y) points; ``lines``: name → y of
    a horizontal line) and the run's note. ``x_measured``: the x values are measurements too (a
    latency, not a setting such as clients or records), so ``--check`` compares them as well."""
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100, bbox_inches="tight", metadata={"Software": None})  # no version stamp: stable bytes
    _pyplot().close(fig)
    drawn: dict[str, Any] = {"png": out.name, "note": note,
                             "series": {k: [list(p) for p in v] for k, v in series.items()}}
    if x_measured:
        drawn["x_measured"] = True
    if lines:
        drawn["lines"] = dict(lines)
    out.with_suffix(".json").write_text(json.dumps(drawn, indent=1) + "\n")
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
    drawn = {f"{name} {mode}": [(f["p50_ms"], f["nDCG@10"]), (f["p95_ms"], f["nDCG@10"])]
             for name, col in collections.items() for mode, f in quality_modes(col).items()}
    floors = {f"{name} BM25 (floor)": col["bm25"]["nDCG@10"] for name, col in collections.items()
              if isinstance(col.get("bm25"), Mapping) and "nDCG@10" in col["bm25"]}
    # the latencies are what differs between runs (nDCG@10 hardly does): --check compares them too
    return _save(fig, out, drawn, x_measured=True, lines=floors)


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
    return _save(fig, out, series, note)


def draw(suite: str, result: Mapping[str, Any], out_dir: Path = PLOTS) -> list[Path]:
    """The figures of one suite's result: built in for quality, else the suite module's ``plot()``."""
    if suite == "quality":
        return [quality_figure(result, out_dir / "quality.png")]
    from .run import _suites

    module_name = _suites().get(suite)
    plot = getattr(importlib.import_module(module_name), "plot", None) if module_name else None
    return list(plot(result, out_dir)) if callable(plot) else []


_IMAGE = re.compile(r"!\[[^\]]*\]\(plots/([^)\s]+\.png)\)")
_NUMBER = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?")


def _shown(text: str) -> list[tuple[float, int]]:
    """Every number written in ``text`` (``1,033`` is 1033) with its decimals: what a table shows."""
    out = []
    for m in _NUMBER.finditer(text):
        raw = m.group().replace(",", "")
        out.append((float(raw), len(raw.split(".")[1]) if "." in raw else 0))
    return out


def _written(y: float, shown: list[tuple[float, int]]) -> bool:
    """Whether ``y`` is among ``shown`` as a table writes it: rounded to the decimals it was written with."""
    return any(abs(v - y) <= 0.5 * 10 ** -d + 1e-9 for v, d in shown)


def check(readme: Path, plots_dir: Path) -> list[str]:
    """What is wrong with the pictures ``readme`` shows: each must have a record of what it drew
    (``<name>.json``, written when it was drawn), and every value it drew must be written in the
    text between the previous picture (or heading) and it: the table or lines of its run. The y
    of every point is compared, the x too when the record says it is measured (quality's
    latencies), and the y of every horizontal line it records (quality's BM25 floor)."""
    lines = readme.read_text().splitlines()
    problems: list[str] = []
    start = 0
    for i, line in enumerate(lines):
        if line.startswith("#"):
            start = i
        names = _IMAGE.findall(line)
        if not names:
            continue
        shown = _shown("\n".join(lines[start:i]))
        for name in names:
            record = plots_dir / Path(name).with_suffix(".json").name
            if not record.exists():
                problems.append(f"{readme.name}:{i + 1}: plots/{name} has no {record.name}: it was drawn before plots "
                                "recorded their values; draw it again from the run of the table above it")
                continue
            kept = json.loads(record.read_text())
            drawn = kept["series"]
            axes = (0, 1) if kept.get("x_measured") else (1,)  # x too when it is a measurement (latency)
            values = [(k, p[a]) for k, pts in drawn.items() for p in pts for a in axes if math.isfinite(p[a])]
            values += [(k, y) for k, y in kept.get("lines", {}).items() if math.isfinite(y)]
            missing = [f"{k} {y:g}" for k, y in values if not _written(y, shown)]
            if missing:
                problems.append(f"{readme.name}:{i + 1}: plots/{name} drew {len(missing)} of {len(values)} values that "
                                f"the text above it (lines {start + 1}-{i}) does not show ({'; '.join(missing[:3])}): it is "
                                "a picture of another run; draw it from this table's run, or move it under its own")
        start = i
    return problems


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.plots")
    p.add_argument("suites", nargs="*", help="suites whose results to draw (default: every result present)")
    p.add_argument("--results", default=str(RESULTS), help="folder of the suites' JSON results")
    p.add_argument("--out", default=str(PLOTS), help="folder to write the PNGs to")
    p.add_argument("--check", nargs="?", const=str(README), metavar="README",
                   help="check the pictures a README shows against the text above each (default: benchmarks/README.md)")
    args = p.parse_args(argv)
    if args.check:
        problems = check(Path(args.check), Path(args.out))
        for problem in problems:
            print(problem)
        if problems:
            raise SystemExit(f"{len(problems)} picture(s) do not show the run written above them")
        print("every picture shows the run written above it")
        return
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
