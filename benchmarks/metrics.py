"""IR metrics through ir-measures (pytrec_eval underneath): no hand-written nDCG."""

from __future__ import annotations

import statistics

import ir_measures
from ir_measures import R, nDCG


def evaluate(qrels: dict[str, dict[str, int]], run: dict[str, dict[str, float]], k: int = 10) -> dict[str, float]:
    """nDCG@k and recall@k over every query in ``qrels`` (a query with no results scores 0)."""
    full_run = {q: run.get(q) or {"__none__": 0.0} for q in qrels}
    agg = ir_measures.calc_aggregate([nDCG @ k, R @ k], qrels, full_run)
    return {f"nDCG@{k}": agg[nDCG @ k], f"recall@{k}": agg[R @ k]}


def percentiles(samples_ms: list[float]) -> dict[str, float]:
    s = sorted(samples_ms)
    if not s:
        return {"p50_ms": 0.0, "p95_ms": 0.0}
    q = statistics.quantiles(s, n=100, method="inclusive") if len(s) > 1 else [s[0]] * 99
    return {"p50_ms": round(q[49], 2), "p95_ms": round(q[94], 2)}
