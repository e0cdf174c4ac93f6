"""scale_serve: ``cairn serve`` q/s and latency at 1, 4, 16 and 64 clients, with 1 and 2 workers,
while a writer remembers one fact per second; and the same with use recording off.

The home holds ``CAIRN_SCALE_SERVE_RECORDS`` records (default 10k; real text, precomputed vectors,
as :mod:`benchmarks.scale`); each client is a thread with its own HTTP connection asking
``POST /v1/find`` with real questions (so every request embeds its query with the real model)
for ``CAIRN_SCALE_SERVE_SECONDS`` (default 8) per point. The server is a real ``cairn serve``
subprocess (``--workers N``), started fresh for each configuration.

Plot: benchmarks/plots/scale-serve.png (:func:`plot`).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from cairn.ports.vectorstores.local import LocalVectorStore

from .scale import BATCH, Mixture, passages, percentiles, questions, records

SUITE = "scale_serve"
CLIENTS = (1, 4, 16, 64)
CONFIGS = (("1 worker", 1, True), ("1 worker, use recording off", 1, False), ("2 workers", 2, True),
           ("2 workers, use recording off", 2, False))  # each next to its pair: the load drifts


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(home: Path, workers: int, record_use: bool) -> tuple[subprocess.Popen, str]:
    port = _port()
    env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True", CAIRN_RECORD_USE="true" if record_use else "false")
    proc = subprocess.Popen([sys.executable, "-m", "cairn.cli.main", "--home", str(home), "serve", "--workers", str(workers),
                             "--port", str(port)], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        line = proc.stderr.readline()  # type: ignore[union-attr]
        if "listening on" in line:
            threading.Thread(target=proc.stderr.read, daemon=True).start()  # type: ignore[union-attr]
            return proc, f"http://127.0.0.1:{port}"
        if proc.poll() is not None:
            break
    proc.kill()
    raise RuntimeError("cairn serve did not start")


def _load(url: str, clients: int, seconds: float, qs: list[str]) -> dict:
    import httpx

    lat: list[float] = []
    errors = [0]
    kinds: set[str] = set()
    lock = threading.Lock()

    stop = [0.0]
    start = threading.Barrier(clients + 1, action=lambda: stop.__setitem__(0, time.monotonic() + seconds))

    def client(k: int) -> None:
        with httpx.Client(base_url=url, timeout=120) as http:
            i = k
            start.wait()  # every client connected-ready before the clock starts
            while time.monotonic() < stop[0]:
                t0 = time.perf_counter()
                try:
                    ok = http.post("/v1/find", json={"query": qs[i % len(qs)], "limit": 10}).status_code == 200
                except httpx.HTTPError as exc:
                    ok = False
                    kinds.add(type(exc).__name__)
                ms = (time.perf_counter() - t0) * 1000
                with lock:
                    (lat.append(ms) if ok else errors.__setitem__(0, errors[0] + 1))
                i += clients

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    start.wait()  # the clock starts when every client is ready
    started = time.monotonic()
    for t in threads:
        t.join()
    wall = time.monotonic() - started
    return {"clients": clients, "queries_per_s": round(len(lat) / wall, 1), **percentiles(lat), "errors": errors[0],
            **({"error_kinds": sorted(kinds)} if kinds else {})}


def _writer(url: str, stop: threading.Event) -> None:
    """One remembered fact per second (a write to the tenant while the clients read)."""
    import httpx

    with httpx.Client(base_url=url, timeout=120) as http:
        n = 0
        while not stop.wait(1.0):
            http.post("/v1/memories", json={"user": "ann", "category": "events", "text": f"Ann logged event number {n}."})
            n += 1


def run(data: Path, limit_queries: int | None = None) -> dict:
    n = int(os.environ.get("CAIRN_SCALE_SERVE_RECORDS", "10000"))
    seconds = float(os.environ.get("CAIRN_SCALE_SERVE_SECONDS", "8"))
    texts, qs = passages(data), questions(data, 300)
    result: dict = {"records": n, "seconds_per_point": seconds, "load_before": round(os.getloadavg()[0], 1), "configs": {}}
    with tempfile.TemporaryDirectory(prefix="cairn-scale-serve-") as tmp:
        home = Path(tmp)
        store = LocalVectorStore(home / "store", dimension=384)
        mix = Mixture()
        for s in range(0, n, BATCH):
            store.upsert(records(texts, mix, s, min(BATCH, n - s)))
        store.close()
        for name, workers, record_use in CONFIGS:
            proc, url = _start(home, workers, record_use)
            stop = threading.Event()
            writer = threading.Thread(target=_writer, args=(url, stop), daemon=True)
            writer.start()
            try:
                result["configs"][name] = [_load(url, c, seconds, qs) for c in CLIENTS]
            finally:
                stop.set()
                writer.join(timeout=30)
                proc.terminate()
                proc.wait(timeout=60)
            print(name, result["configs"][name], flush=True)
    result["load_after"] = round(os.getloadavg()[0], 1)
    cfg = result["configs"]
    best = lambda name: max(p["queries_per_s"] for p in cfg[name])  # noqa: E731
    result["ratios"] = {
        "use_recording_on_vs_off_1_worker": round(best("1 worker") / best("1 worker, use recording off"), 2),
        "use_recording_on_vs_off_2_workers": round(best("2 workers") / best("2 workers, use recording off"), 2),
        "2_workers_vs_1": round(best("2 workers") / best("1 worker"), 2),
        "worst_p99_over_p50_default": round(max(p["p99_ms"] / p["p50_ms"] for p in cfg["2 workers"] if p["p50_ms"]), 1),
    }
    return result


def plot(result: dict, out_dir: Path) -> list[Path]:
    from .plots import curves

    note = f"{result['records']} records; load average {result.get('load_before')} -> {result.get('load_after')} (2 cores, shared)"
    cfg = result["configs"]
    qps = {name: [(p["clients"], p["queries_per_s"]) for p in pts] for name, pts in cfg.items()}
    p99 = {name: [(p["clients"], p["p99_ms"]) for p in pts] for name, pts in cfg.items()}
    return [
        curves(qps, out_dir / "scale-serve-qps.png", title="cairn serve with a writer: throughput", xlabel="clients",
               ylabel="queries/s", logx=True, note=note),
        curves(p99, out_dir / "scale-serve-p99.png", title="cairn serve with a writer: p99 latency", xlabel="clients",
               ylabel="ms", logx=True, logy=True, note=note),
    ]
