"""What each billable operation calls, counted in the packaged deployment (tests/deployment.py):
every function its own process with its layers, the real workflow on moto, Bedrock on the
embeddings emulator, the vector store on the Pinecone or OpenSearch emulator.

    python -m benchmarks.run cost

For each backend and each operation (ingest through S3, find and search at limits 5, 20 and 100,
a message with its prefetch, a commit with LLM extraction) it counts, from what the functions
actually sent: Lambda invocations (and their wall time here), Step Functions executions and the
states they entered, Bedrock InvokeModel / Converse calls and their tokens (from the usage lines
the functions wrote), DynamoDB, S3 and CloudWatch calls, the vector store's requests and the
records they read and wrote (and, apart, the calls that counted uses: the use counts' table), the EMF
metric values and log bytes. ``benchmarks/cost_prices.py``
turns the counts into dollars; docs/cost.md is written from this file's output.
"""

from __future__ import annotations

import json
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

SUITE = "cost"
USE_TABLE = "cairn-use-counts"  # tests/deployment.py's UseCountsTable
LIMITS = (5, 20, 100)
QUERY = "How long until a refund reaches my card?"


def _plan(*queries: tuple[str, str]) -> str:
    return json.dumps({"reasoning": "typed queries", "queries": [
        {"query": q, "context_type": ct, "intent": "find", "priority": 1} for q, ct in queries]})


class Meter:
    """Marks every counter of a deployment, then says what one operation added."""

    def __init__(self, dep: Any) -> None:
        self.dep = dep
        self.mark()

    def mark(self) -> None:
        dep = self.dep
        self._calls = {n: len(p.recorded()) for n, p in dep.functions.items()}
        self._logs = {lg: len(dep.logs(lg)) for lg in dep.stack.functions}
        self._log_bytes = {lg: _size(dep.tmp / f"{lg}.log") for lg in dep.stack.functions}
        self._store = len(dep.emulators["store"].requests if dep.backend == "pinecone" else dep.emulators["store"].log)
        self._invocations = len(dep.invocations)
        self._timed = len(getattr(dep, "timings", []))

    def counts(self) -> dict[str, Any]:
        dep = self.dep
        out: dict[str, Any] = {"lambda": Counter(), "lambda_ms": Counter(), "aws": Counter(), "use_counts": Counter(),
                               "usage": Counter(),
                               "emf_values": 0, "log_bytes": 0, "metrics": set()}
        for inv in dep.invocations[self._invocations:]:
            out["lambda"][_logical(dep, inv.function)] += 1
        for fn, ms in dep.timings[self._timed:]:
            out["lambda_ms"][_logical(dep, fn)] += round(ms)
        for name, pool in dep.functions.items():
            for call in pool.recorded()[self._calls[name]:]:
                if call["kind"] == "aws":
                    out["aws"][f"{call['service']}:{call['operation']}"] += 1
                    if (call.get("params") or {}).get("TableName") == USE_TABLE:  # use counting (hotness), apart
                        out["use_counts"][call["operation"]] += 1
        for logical in dep.stack.functions:
            lines = dep.logs(logical)[self._logs[logical]:]
            out["log_bytes"] += _size(dep.tmp / f"{logical}.log") - self._log_bytes[logical]
            for line in lines:
                entry = _json(line)
                if entry.get("message") == "usage":
                    for key, value in entry.items():
                        if isinstance(value, int | float) and not isinstance(value, bool):
                            out["usage"][key] += value
                    out["usage"]["lines"] += 1
                if "_aws" in entry:  # an EMF document: each metric value is one CloudWatch data point
                    for m in entry["_aws"].get("CloudWatchMetrics", []):
                        out["emf_values"] += len(m.get("Metrics", []))
                        for dims in m.get("Dimensions", [[]]):
                            key = ",".join(f"{d}={entry.get(d)}" for d in dims)
                            out["metrics"].update(f"{m.get('Namespace')}/{x['Name']}[{key}]" for x in m.get("Metrics", []))
        out["store"] = _store_counts(dep, self._store)
        out["metrics"] = sorted(out["metrics"])  # distinct custom metrics (billed per metric-month)
        return {k: dict(v) if isinstance(v, Counter) else v for k, v in out.items()}


def _size(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0


def _json(line: str) -> dict[str, Any]:
    try:
        value = json.loads(line)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _logical(dep: Any, name: str) -> str:
    return next((lg for lg, fn in dep.stack.functions.items() if fn.name == name), name)


def _store_counts(dep: Any, since: int) -> dict[str, int]:
    """Requests by kind, and the records each read or wrote (what Pinecone's units are made of)."""
    out: Counter[str] = Counter()
    if dep.backend == "pinecone":
        for r in dep.emulators["store"].requests[since:]:
            kind = r.path.strip("/").replace("vectors/", "")
            out[f"requests:{kind}"] += 1
            body = r.body if isinstance(r.body, dict) else {}
            if kind == "fetch":
                out["fetched_records"] += len(r.query.get("ids", []))
            elif kind == "upsert":
                vectors = body.get("vectors") or []
                out["upserted_records"] += len(vectors)
                out["upserted_kb"] += sum(_record_kb(v) for v in vectors)
            elif kind == "query":
                out["query_top_k"] += int(body.get("topK") or 0)
            elif kind == "delete":
                out["deleted_records"] += len(body.get("ids") or [])
    else:
        for r in dep.emulators["store"].log[since:]:
            out[f"requests:{r.route}"] += 1
            if r.route == "msearch":
                out["searches"] += max(0, len([ln for ln in r.body.splitlines() if ln.strip()]) // 2)
    return dict(out)


def _record_kb(vector: dict[str, Any]) -> int:
    """A record's size as Pinecone bills writes: 1 WU per started KB of id, float32 values and metadata."""
    size = len(str(vector.get("id", ""))) + 4 * len(vector.get("values") or []) + len(json.dumps(vector.get("metadata") or {}))
    return -(-size // 1024)


def _timed(dep: Any) -> None:
    """Record each invocation's wall time (what Lambda bills, on a much slower shared machine)."""
    dep.timings = []
    real = dep.invoke

    def invoke(name: str, event: Any, *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return real(name, event, *args, **kwargs)
        finally:
            dep.timings.append((name, (time.perf_counter() - started) * 1000))

    dep.invoke = invoke


def measure(dep: Any, corpus: dict[str, Any], notes: dict[str, Any]) -> dict[str, Any]:
    meter = Meter(dep)
    ops: dict[str, Any] = {}

    def step(name: str, action: Any) -> None:
        meter.mark()
        action()
        ops[name] = meter.counts()

    step("ingest_s3", lambda: dep.ingest("handbook.json", corpus))
    ops["ingest_s3"]["documents"] = len(corpus["documents"])
    dep.ingest("notes.json", notes)  # candidates enough for limit 100
    def search(limit: int) -> None:
        dep.emulators["bedrock"].converse_for[QUERY] = _plan((QUERY, "resource"))
        _ok(dep.api("POST", "/v1/search", {"query": QUERY, "limit": limit}))

    step("search_first", lambda: search(5))  # a container's first search: its one-time checks and caches
    for limit in LIMITS:
        step(f"find_{limit}", lambda limit=limit: _ok(dep.api("POST", "/v1/find", {"query": QUERY, "limit": limit})))
    for limit in LIMITS:
        step(f"search_{limit}", lambda limit=limit: search(limit))
    sid = _ok(dep.api("POST", "/v1/sessions", {"user": "ann"}))["id"]
    step("message", lambda: _ok(dep.api("POST", f"/v1/sessions/{sid}/messages", {"role": "user", "content": QUERY})))
    step("prefetch", lambda: _prefetch(dep, sid))
    bedrock = dep.emulators["bedrock"]
    bedrock.converse_for.clear()  # the extraction prompt quotes the message: answer it with a memory
    bedrock.converse_default = json.dumps({"memories": [
        {"category": "preferences", "key": "refund-channel", "title": "Refunds to the card",
         "text": "Ann wants refunds paid back to her card.", "seqs": [1]}]})
    step("commit", lambda: _ok(dep.api("POST", f"/v1/sessions/{sid}/commit", {})))
    return ops


def _ok(answer: tuple[int, Any]) -> Any:
    status, body = answer
    if status >= 300:
        raise RuntimeError(f"{status}: {str(body)[:600]}")
    return body


def _prefetch(dep: Any, sid: str) -> None:
    mine = dep.new_user_messages(sid)
    dep.emulators["bedrock"].converse_for[QUERY] = _plan((QUERY, "resource"))
    out, error = dep.invoke(dep.stack.functions["OnMessageFunction"].name, {"Records": mine})
    if error is not None:
        raise RuntimeError(str(out)[:600])


def run(data: str | None = None, queries: int | None = None) -> dict[str, Any]:
    from benchmarks.cost_prices import priced
    from tests.deployment import LLM_MODEL, Deployment, host_build
    from tests.integration.test_packaged import HANDBOOK, _notes

    paths = host_build()
    result: dict[str, Any] = {"backends": {}}
    for backend in ("opensearch", "pinecone"):
        with tempfile.TemporaryDirectory() as tmp, Deployment.start(
                Path(tmp), backend, parameters={"LlmProvider": "bedrock", "LlmModel": LLM_MODEL}, paths=paths) as dep:
            for logical in dep.stack.functions:
                dep.function(logical).warm(1)
            _timed(dep)
            ops = measure(dep, HANDBOOK, _notes(120))
            memory = {lg: fn.memory for lg, fn in dep.stack.functions.items()}
            result["backends"][backend] = {"operations": ops, "memory_mb": memory, "run": uuid.uuid4().hex[:6]}
    result["priced"] = priced(result)
    return result
