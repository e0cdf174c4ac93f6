"""Run benchmarks and print their figures as JSON; results also land in benchmarks/results/.

    python -m benchmarks.run                  # every suite
    python -m benchmarks.run scifact --data ../shared/data
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import pkgutil
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def _suites() -> dict[str, str]:
    """Every module of this package that declares ``SUITE = "<name>"`` and a ``run(data, queries)``."""
    found = {}
    for mod in pkgutil.iter_modules([str(Path(__file__).parent)]):
        module = importlib.import_module(f"benchmarks.{mod.name}")
        if isinstance(getattr(module, "SUITE", None), str):
            found[module.SUITE] = f"benchmarks.{mod.name}"
    return found


def main() -> None:
    # ingest timings measure the model: the machine's embedding cache, warm from an earlier run, would
    # make a second run's ingest look many times faster (docs/ingestion.md); set the variable to use one
    os.environ.setdefault("CAIRN_EMBEDDING_CACHE", "off")
    suites = _suites()
    p = argparse.ArgumentParser(prog="python -m benchmarks.run")
    p.add_argument("suites", nargs="*", default=sorted(suites), help=f"any of {', '.join(sorted(suites))}")
    p.add_argument("--data", default="../shared/data", help="folder holding the BEIR data sets")
    p.add_argument("--queries", type=int, default=None, help="use only the first N queries (smoke runs)")
    args = p.parse_args()
    out_dir = Path(__file__).parent / "results"
    out_dir.mkdir(exist_ok=True)
    for suite in args.suites:
        if suite not in suites:
            raise SystemExit(f"unknown suite {suite!r}; available: {', '.join(sorted(suites))}")
        print(f"== {suite}", flush=True)
        module = importlib.import_module(suites[suite])
        started = time.time()
        result = module.run(Path(args.data), args.queries)
        result["wall_seconds"] = round(time.time() - started, 1)
        print(json.dumps(result, indent=2))
        (out_dir / f"{suite}.json").write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
