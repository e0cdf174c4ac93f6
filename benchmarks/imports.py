"""Cold-start budget: the import time of each Lambda handler, and which heavy modules it pulls in.

Each measurement is a fresh interpreter (as a new Lambda container is) that imports
``functions/<name>/app.py`` and reports the seconds the import took and which of the heavy
modules ended up in ``sys.modules``. The median over ``RUNS`` fresh processes is reported.
Target: retrieve, rerank and api import in <= 700 ms, without litellm.

    python -m benchmarks.run imports
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

SUITE = "imports"
REPO = Path(__file__).resolve().parents[1]
HANDLERS = ("api", "retrieve", "rerank", "plan", "on_message", "ingest")
BUDGETED = ("api", "retrieve", "rerank")
BUDGET_MS = 700.0
RUNS = 7
# modules no handler may import at import time (each is loaded lazily, on first use, when configured)
FORBIDDEN = ("litellm", "onnxruntime", "opensearchpy", "pinecone", "tokenizers", "bm25s", "aws_lambda_powertools")
# what a handler needs at import by design: the api function is the /v1 route table on Powertools' event handler
ALLOWED = {"api": ("aws_lambda_powertools",)}
# reported, not forbidden
WATCHED = FORBIDDEN + ("boto3", "botocore", "numpy", "httpx", "pydantic", "cairn.engine.pipeline", "cairn.engine.stages")

_PROBE = """
import importlib.util, json, sys, time
path, watched = sys.argv[1], sys.argv[2].split(",")
started = time.perf_counter()
spec = importlib.util.spec_from_file_location("app", path)
module = importlib.util.module_from_spec(spec)
sys.modules["app"] = module
spec.loader.exec_module(module)
seconds = time.perf_counter() - started
assert callable(module.handler)
print(json.dumps({"seconds": seconds, "loaded": [m for m in watched if m in sys.modules], "modules": len(sys.modules)}))
"""


def probe(handler: str, python: str = sys.executable) -> dict:
    """Import one handler in a fresh interpreter; its import seconds and the watched modules it loaded."""
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("PYTHONPATH", None)
    out = subprocess.run(
        [python, "-c", _PROBE, str(REPO / "functions" / handler / "app.py"), ",".join(WATCHED)],
        capture_output=True, text=True, env=env, cwd=REPO, timeout=120, check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"importing the {handler} handler failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


# the same import, in a process that sees only the built function: its folder, its layers, the runtime
_PACKAGED_PROBE = """
import json, os, sys, time
paths = json.loads(sys.argv[1])
sys.path[:] = paths + [p for p in sys.path if p and "site-packages" not in p]
started = time.perf_counter()
import app
seconds = time.perf_counter() - started
first = None
if len(sys.argv) > 2:  # then the first invocation: what a cold start costs before its answer
    started = time.perf_counter()
    answer = app.handler(json.loads(sys.argv[2]), None)
    first = time.perf_counter() - started
    assert answer["statusCode"] == 200, answer
print(json.dumps({"seconds": seconds, "first_request_seconds": first}))
"""
# the api function's first request on a cold start: GET /v1/health (settings, the route table's
# first resolve; no backend is touched)
HEALTH = {"version": "2.0", "rawPath": "/v1/health", "rawQueryString": "", "headers": {}, "body": None,
          "isBase64Encoded": False, "requestContext": {"requestId": "cold", "stage": "$default",
                                                      "http": {"method": "GET", "path": "/v1/health"}}}
PACKAGED = ("api", "retrieve")  # DESIGN.md section 8: as packaged, no slower than from the repository
LAYERS_OF = {"api": ("core", "opensearch"), "retrieve": ("core", "opensearch")}  # the default stack's


def packaged_paths() -> dict:
    """The functions and layers built for this machine from the locks, with bytecode
    (infra/package/host.py; cached under build/package-host)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("cairn_package_host", REPO / "infra" / "package" / "host.py")
    host = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(host)
    return host.build_all(layers=("core", "opensearch"))


def probe_packaged(handler: str, paths: dict, *, first_request: bool = False) -> Any:
    """The built function's import seconds (with ``first_request``: and its first invocation's,
    ``GET /v1/health`` for the api function), in a process that sees only it."""
    env = {"PATH": os.environ.get("PATH", ""), "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HOME": os.environ.get("HOME", "/tmp"),
           "CAIRN_HOME": os.path.join(os.environ.get("TMPDIR", "/tmp"), "cairn-bench-cold")}
    sys_path = [str(paths[f"function:{handler}"]), *(str(paths[layer]) for layer in LAYERS_OF[handler]), str(paths["runtime"])]
    extra = [json.dumps(HEALTH)] if first_request else []
    out = subprocess.run([sys.executable, "-S", "-I", "-c", _PACKAGED_PROBE, json.dumps(sys_path), *extra], capture_output=True,
                         text=True, env=env, cwd=sys_path[0], timeout=120, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"importing the packaged {handler} function failed:\n{out.stderr[-2000:]}")
    found = json.loads(out.stdout.strip().splitlines()[-1])
    return found if first_request else found["seconds"]


def cold_api(paths: dict, runs: int = RUNS) -> dict:
    """The built api function's cold start on this machine: import, then its first request, in
    fresh processes (median ms)."""
    found = [probe_packaged("api", paths, first_request=True) for _ in range(runs)]
    init = [f["seconds"] * 1000 for f in found]
    first = [f["first_request_seconds"] * 1000 for f in found]
    return {"import_median_ms": round(statistics.median(init), 1), "first_request_median_ms": round(statistics.median(first), 1),
            "cold_total_median_ms": round(statistics.median([a + b for a, b in zip(init, first, strict=True)]), 1)}


def side_by_side(runs: int = RUNS) -> dict:
    """Import time of the built function (its layers only) next to the same code from the repository,
    interleaved run by run so that the machine's load falls on both alike."""
    paths = packaged_paths()
    out = {}
    for name in PACKAGED:
        probe_packaged(name, paths)  # the OS file cache, once
        built, repo = [], []
        for _ in range(runs):
            built.append(probe_packaged(name, paths) * 1000)
            repo.append(probe(name)["seconds"] * 1000)
        out[name] = {"packaged_median_ms": round(statistics.median(built), 1), "repo_median_ms": round(statistics.median(repo), 1),
                     "packaged_no_slower": statistics.median(built) <= statistics.median(repo)}
    out["api_cold_start"] = cold_api(paths, runs)
    return out


def run(data: Path, queries: int | None = None) -> dict:
    """``data`` and ``queries`` are unused: this suite needs no data set."""
    probe("api")  # warm the OS file cache and .pyc files once, as a deployed layer would have them
    handlers = {}
    for name in HANDLERS:
        runs = [probe(name) for _ in range(RUNS)]
        ms = [r["seconds"] * 1000 for r in runs]
        handlers[name] = {
            "median_ms": round(statistics.median(ms), 1),
            "min_ms": round(min(ms), 1),
            "max_ms": round(max(ms), 1),
            "heavy_loaded": sorted(set(runs[-1]["loaded"]) & set(FORBIDDEN)),
            "also_loaded": sorted(set(runs[-1]["loaded"]) - set(FORBIDDEN)),
            "modules": runs[-1]["modules"],
        }
    return {
        "suite": SUITE,
        "runs_per_handler": RUNS,
        "python": sys.version.split()[0],
        "budget_ms": BUDGET_MS,
        "within_budget": all(handlers[h]["median_ms"] <= BUDGET_MS and not handlers[h]["heavy_loaded"] for h in BUDGETED),
        "handlers": handlers,
        "packaged_vs_repo": side_by_side(),
        "load": os.getloadavg()[0],
    }
