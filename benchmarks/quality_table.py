"""One table of every quality figure the quality suites wrote (``make bench-quality``).

    python -m benchmarks.quality_table     # reads benchmarks/results/{quality,conversations,locomo,agent_day,multilingual}.json

Each suite's JSON has its own shape; the table takes every quality figure in it (nDCG@k, recall@k,
memory recall, the share of empty answers), wherever it sits, and names it by its path in the JSON
("agent_day / staff / arms / search_session / nDCG@10"), so a set or an arm added to a suite shows up
here without a change. Timings are left out: they are not quality, and they move with the machine.
Written to ``benchmarks/results/quality_table.md`` and printed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results"
SUITES = ("quality", "conversations", "locomo", "agent_day", "multilingual")
QUALITY = re.compile(r"(ndcg|recall|\bmap\b|mrr|precision|empty|accuracy)", re.IGNORECASE)
NOT_QUALITY = re.compile(r"(_ms|latency|seconds|p50|p95|p99|bytes|misses)", re.IGNORECASE)


def figures(node: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], float]]:
    """Every numeric leaf under ``node`` whose path names a quality figure."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from figures(value, (*path, str(key)))
    elif isinstance(node, (int, float)) and not isinstance(node, bool) and path:
        named = " ".join(path)
        if QUALITY.search(named) and not NOT_QUALITY.search(named):
            yield path, float(node)


def table(results: Path = RESULTS, suites: tuple[str, ...] = SUITES) -> str:
    rows = ["| suite | figure | value |", "|---|---|---:|"]
    missing = []
    for suite in suites:
        path = results / f"{suite}.json"
        if not path.exists():
            missing.append(suite)
            continue
        for key, value in figures(json.loads(path.read_text())):
            rows.append(f"| {suite} | {' / '.join(key)} | {value:.3f} |")
    if missing:
        rows.append(f"\nnot run: {', '.join(missing)} (python -m benchmarks.run {' '.join(missing)})")
    return "\n".join(rows) + "\n"


def main() -> int:
    text = table()
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "quality_table.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
