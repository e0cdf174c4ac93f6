"""The quality gate: a fast, deterministic slice of the quality benchmarks, held to a committed baseline.

    python -m benchmarks.quality_gate            # measure, compare with benchmarks/quality_baseline.json
    python -m benchmarks.quality_gate --write    # measure and write the baseline (a commit of its own)

The slice is the agent path as a customer's agent uses it: every chat of the ``agent_day`` sets that
live in this repository (``helpdesk``, ``staff``, ``product``, and ``indirect`` and ``indirect_kb``:
remembered facts that bear on a question sharing no word with them), each played turn by turn through a `cairn serve` of its
own on a fresh home (one serving process), with the embedded default (MiniLM, the local store, no LLM). Every figure is
computed from ranks, so it is the same on every run and machine; timings are not in it (they stay in
the benchmarks). ``tests/e2e/test_quality_gate.py`` runs it in ``make test`` and fails when a figure
falls more than ``TOLERANCE`` under the baseline (or, for a figure where less is better, rises more
than that over it). Raising or lowering the baseline is a commit of its own that says why.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from .agent_day import run_set

BASELINE = Path(__file__).parent / "quality_baseline.json"
SETS = ("helpdesk", "staff", "product", "indirect", "indirect_kb")
TOLERANCE = 0.01
# per set, the arms and metrics guarded (higher is better)
ARM_FIGURES = (("search_session", "nDCG@10"), ("search_session", "recall@3"), ("find", "nDCG@10"),
               ("find_prev_turn", "nDCG@10"), ("search", "nDCG@10"))


def _share(counted: str) -> float:
    hits, total = counted.split("/")
    return round(int(hits) / max(int(total), 1), 3)


def figures_of(name: str, result: dict[str, Any]) -> dict[str, tuple[float, bool]]:
    """One set's guarded figures: {name: (value, higher is better)}."""
    out: dict[str, tuple[float, bool]] = {}
    for arm, metric in ARM_FIGURES:
        out[f"{name}.{arm}.{metric}"] = (float(result["arms"][arm][metric]), True)
    out[f"{name}.search_session.empty_answers"] = (_share(result["arms"]["search_session"]["empty_answers"]), False)
    if result["memory_turns"]:
        out[f"{name}.memory_recall@3"] = (float(result["memory_recall@3"]), True)
    out[f"{name}.unasked_memory_in_top3"] = (_share(result["unasked_memory_in_top3"]), False)
    out[f"{name}.unasked_more_than_one_memory"] = (_share(result["unasked_more_than_one_memory"]), False)
    out[f"{name}.turns_session_below_find"] = (
        round(len(result["session_worse_than_find"]) / max(result["judged_turns"], 1), 3), False)
    return out


def measure(sets: tuple[str, ...] = SETS, progress: Any = None) -> dict[str, tuple[float, bool]]:
    """Play every set and return its guarded figures."""
    out: dict[str, tuple[float, bool]] = {}
    for name in sets:
        if progress:
            progress(f"quality gate: playing {name}")
        # no context blocks (no figure reads them) and one serving process: the figures are the same with
        # one process per core, which costs a second process's start and model for each set
        out |= figures_of(name, run_set(name, None, with_context=False, workers=1))
    return out


def regressions(now: dict[str, tuple[float, bool]], baseline: dict[str, float],
                tolerance: float = TOLERANCE) -> list[str]:
    """Each figure that moved the wrong way by more than ``tolerance``, or that the baseline holds and
    this run lacks, as a sentence naming it."""
    found = []
    for key, was in sorted(baseline.items()):
        if key not in now:
            found.append(f"{key}: in the baseline ({was}) but not measured")
            continue
        value, higher_better = now[key]
        drop = (was - value) if higher_better else (value - was)
        if drop > tolerance + 1e-9:
            direction = "fell" if higher_better else "rose"
            found.append(f"{key} {direction} from {was} to {value} (tolerance {tolerance})")
    return found


def load_baseline(path: Path = BASELINE) -> dict[str, float]:
    return {k: float(v) for k, v in json.loads(path.read_text())["figures"].items()}


def write_baseline(now: dict[str, tuple[float, bool]], path: Path = BASELINE) -> None:
    doc = {"_about": "The quality gate's baseline (benchmarks/quality_gate.py): change it in a commit of its own "
                     "that says why.",
           "embedder": os.environ.get("CAIRN_EMBEDDING_MODEL", "default"),
           "figures": {k: v for k, (v, _) in sorted(now.items())}}
    path.write_text(json.dumps(doc, indent=2) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.quality_gate", description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="write the measured figures as the new baseline")
    args = parser.parse_args(argv)
    now = measure(progress=lambda line: print(line, file=sys.stderr, flush=True))
    if args.write:
        write_baseline(now)
        print(f"wrote {BASELINE} ({len(now)} figures)")
        return 0
    baseline = load_baseline()
    for key, (value, _) in sorted(now.items()):
        was = baseline.get(key)
        print(f"{key:58} {value:7.3f}   baseline {'-' if was is None else f'{was:.3f}'}")
    found = regressions(now, baseline)
    for line in found:
        print("REGRESSION", line)
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
