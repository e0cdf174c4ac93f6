"""serve_start: how long `cairn serve --workers N` takes to say it listens, and the CPU it spends.

cairn's documentation is ingested once into a fresh home (the machine's embedding cache makes a
rerun cheap); then, three times for each N in 1 and 2, `cairn serve --workers N` starts on it, answers
two finds once it says it listens, and is stopped with SIGTERM. Reported per N: the median seconds to
"listening" and the median CPU-seconds of the whole process tree (the supervisor and its workers,
from start to stop).

    python -m benchmarks.run serve_start
"""

from __future__ import annotations

import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cairn.client import CairnClient

SUITE = "serve_start"
RUNS = 3
DOCS = Path(__file__).resolve().parents[1] / "docs"


def _children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def start_once(home: Path, workers: int) -> tuple[float, float]:
    """(seconds to "listening", CPU-seconds of the server's processes) for one start, two finds, a stop."""
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    cpu0, t0 = _children_cpu(), time.perf_counter()
    with socket.socket() as s:  # a free port
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "cairn.cli.main", "--home", str(home), "serve", "--port", str(port),
                             "--workers", str(workers)], stderr=subprocess.PIPE, text=True, env=env)
    try:
        while "listening on" not in (line := proc.stderr.readline()):  # type: ignore[union-attr]
            if not line and proc.poll() is not None:
                raise RuntimeError(f"cairn serve exited with {proc.returncode}")
        ready = time.perf_counter() - t0
        with CairnClient(f"http://127.0.0.1:{port}", retries=0) as client:
            for question in ("how do I install cairn?", "what is a session?"):
                client.find(question)
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    return ready, _children_cpu() - cpu0


def run(data: Path, limit_queries: int | None = None) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        subprocess.run([sys.executable, "-m", "cairn.cli.main", "--home", str(home), "ingest", str(DOCS),
                        "--uri", "cairn://resources/docs"], check=True, capture_output=True)
        out: dict = {"runs": RUNS}
        for workers in (1, 2):
            starts = [start_once(home, workers) for _ in range(RUNS)]
            out[f"workers_{workers}"] = {"ready_s": round(statistics.median(r for r, _ in starts), 2),
                                         "cpu_s": round(statistics.median(c for _, c in starts), 2)}
            print(f"  --workers {workers}: {out[f'workers_{workers}']}", flush=True)
    return out
