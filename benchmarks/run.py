"""Run benchmarks and print their figures as JSON; results also land in benchmarks/results/.

    python -m benchmarks.run                  # every suite
    python -m benchmarks.run scifact --data ../shared/data
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

SUITES = ("scifact",)


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.run")
    p.add_argument("suites", nargs="*", default=list(SUITES), help=f"any of {', '.join(SUITES)}")
    p.add_argument("--data", default="../shared/data", help="folder holding the BEIR data sets")
    p.add_argument("--queries", type=int, default=None, help="use only the first N queries (smoke runs)")
    args = p.parse_args()
    out_dir = Path(__file__).parent / "results"
    out_dir.mkdir(exist_ok=True)
    for suite in args.suites:
        if suite not in SUITES:
            raise SystemExit(f"unknown suite {suite!r}; available: {', '.join(SUITES)}")
        print(f"== {suite}", flush=True)
        module = __import__(f"benchmarks.{suite}", fromlist=["run"])
        started = time.time()
        result = module.run(Path(args.data), args.queries)
        result["wall_seconds"] = round(time.time() - started, 1)
        print(json.dumps(result, indent=2))
        (out_dir / f"{suite}.json").write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
