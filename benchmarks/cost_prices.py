"""Prices (us-east-1, on-demand list prices) and how the counted calls of benchmarks/cost.py become
dollars per 1M operations. Each price names its public page; read on 2026-12-01 by the author
from memory of those pages, not re-fetched (this machine has no web access): check before budgeting.
"""

from __future__ import annotations

import math
from typing import Any

PRICES_DATE = "2026-12-01"
PRICES: dict[str, tuple[float, str]] = {
    "lambda_request": (0.20 / 1e6, "aws.amazon.com/lambda/pricing (arm64)"),
    "lambda_gb_s": (0.0000133334, "aws.amazon.com/lambda/pricing (arm64)"),
    "http_api_request": (1.00 / 1e6, "aws.amazon.com/api-gateway/pricing (HTTP API, first 300M)"),
    "express_request": (1.00 / 1e6, "aws.amazon.com/step-functions/pricing (Express)"),
    "express_gb_s": (0.00001667, "aws.amazon.com/step-functions/pricing (Express, 64 MB steps, 100 ms minimum)"),
    "titan_1k_tokens": (0.00002, "aws.amazon.com/bedrock/pricing (Titan Text Embeddings v2)"),
    "haiku_in_1k": (0.00025, "aws.amazon.com/bedrock/pricing (Claude 3 Haiku input)"),
    "haiku_out_1k": (0.00125, "aws.amazon.com/bedrock/pricing (Claude 3 Haiku output)"),
    "ddb_rru": (0.125 / 1e6, "aws.amazon.com/dynamodb/pricing/on-demand"),
    "ddb_wru": (0.625 / 1e6, "aws.amazon.com/dynamodb/pricing/on-demand"),
    "s3_put": (0.005 / 1e3, "aws.amazon.com/s3/pricing (PUT, COPY, POST, LIST)"),
    "s3_get": (0.0004 / 1e3, "aws.amazon.com/s3/pricing (GET and others)"),
    "pinecone_ru": (16.0 / 1e6, "pinecone.io/pricing (Standard, read units)"),
    "pinecone_wu": (4.0 / 1e6, "pinecone.io/pricing (Standard, write units)"),
    "logs_gb": (0.50, "aws.amazon.com/cloudwatch/pricing (logs ingested, standard)"),
    "cw_put_metric_data": (0.01 / 1e3, "aws.amazon.com/cloudwatch/pricing (API requests)"),
}
# a warm function's billed duration on Lambda (ms): estimates until a deployed stack's CloudWatch
# Duration replaces them; the wall time measured on the test machine is reported next to them
WARM_MS = {"ApiFunction": {"find": 150, "search": 800, "ingest": 300, "message": 60, "commit": 400, "default": 100},
           "PlanFunction": 100, "RetrieveFunction": 200, "RerankFunction": 400, "OnMessageFunction": 900,
           "IngestFunction": 1500}
DDB_READS = {"GetItem": 1, "Query": 1, "BatchGetItem": 1, "Scan": 1}
DDB_WRITES = {"PutItem": 1, "UpdateItem": 1, "DeleteItem": 1, "BatchWriteItem": 1, "TransactWriteItems": 2}


def _warm_ms(logical: str, op: str) -> int:
    table = WARM_MS.get(logical, 100)
    if isinstance(table, dict):
        return table.get(op.split("_")[0], table["default"])
    return table


def _pinecone_units(store: dict[str, int]) -> tuple[float, float]:
    """Read and write units from the counted requests: a query is 1 RU per GB of namespace, at
    least 0.25 (these namespaces are far below 1 GB); a fetch 1 RU per 10 records; an upsert 1 WU
    per started KB of each record; a delete 1 WU per record; describe_index_stats and fetch by
    metadata are counted as 1 RU per request (not priced on the page: an upper bound)."""
    ru = 0.25 * store.get("requests:query", 0)
    ru += math.ceil(store.get("fetched_records", 0) / 10) if store.get("fetched_records") else 0
    ru += store.get("requests:describe_index_stats", 0) + store.get("requests:fetch_by_metadata", 0)
    wu = store.get("upserted_kb", 0) + store.get("deleted_records", 0)
    return ru, wu


def price_op(backend: str, op: str, counts: dict[str, Any], memory_mb: dict[str, int]) -> dict[str, float]:
    """Dollars per 1M of this operation, by item."""
    p = {k: v for k, (v, _) in PRICES.items()}
    usage, aws, lam = counts["usage"], counts["aws"], counts["lambda"]
    out: dict[str, float] = {}
    out["api_gateway"] = p["http_api_request"] if lam.get("ApiFunction") else 0.0
    out["lambda_requests"] = sum(lam.values()) * p["lambda_request"]
    gb_s = sum(n * _warm_ms(fn, op) / 1000 * memory_mb.get(fn, 1024) / 1024 for fn, n in lam.items())
    out["lambda_compute"] = gb_s * p["lambda_gb_s"]
    executions = aws.get("states:StartSyncExecution", 0)
    out["step_functions"] = executions * (p["express_request"] + 0.064 * 1.0 * p["express_gb_s"])  # 1 s at 64 MB
    out["bedrock_embeddings"] = usage.get("embedding_tokens", 0) / 1000 * p["titan_1k_tokens"]
    out["bedrock_llm"] = (usage.get("llm_input_tokens", 0) / 1000 * p["haiku_in_1k"]
                          + usage.get("llm_output_tokens", 0) / 1000 * p["haiku_out_1k"])
    reads = sum(n * DDB_READS.get(k.split(":")[1], 0) for k, n in aws.items() if k.startswith("dynamodb:"))
    writes = sum(n * DDB_WRITES.get(k.split(":")[1], 0) for k, n in aws.items() if k.startswith("dynamodb:"))
    out["dynamodb"] = reads * p["ddb_rru"] + writes * p["ddb_wru"]
    s3_put = sum(n for k, n in aws.items() if k.startswith("s3:") and k.split(":")[1] in ("PutObject", "CopyObject", "ListObjectsV2"))
    s3_get = sum(n for k, n in aws.items() if k.startswith("s3:") and k.split(":")[1] in ("GetObject", "HeadObject"))
    out["s3"] = s3_put * p["s3_put"] + s3_get * p["s3_get"]
    if backend == "pinecone":
        ru, wu = _pinecone_units(counts["store"])
        out["vector_store"] = ru * p["pinecone_ru"] + wu * p["pinecone_wu"]
    else:
        out["vector_store"] = 0.0  # OpenSearch bills capacity (OCU-hours or instances), not requests
    out["cloudwatch_logs"] = counts["log_bytes"] / 1e9 * p["logs_gb"]
    out["cloudwatch_put_metric_data"] = aws.get("monitoring:PutMetricData", 0) * p["cw_put_metric_data"]
    return {k: round(v * 1e6, 2) for k, v in out.items()}


def priced(result: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"prices_date": PRICES_DATE, "prices": {k: {"usd": v, "source": s} for k, (v, s) in PRICES.items()}}
    for backend, run in result["backends"].items():
        rows = {}
        for op, counts in run["operations"].items():
            items = price_op(backend, op, counts, run["memory_mb"])
            rows[op] = {**items, "total": round(sum(items.values()), 2)}
        out[backend] = rows
    out["find_against_reads"] = find_against_reads(result)
    return out


FIND_READ_FACTOR = 2.0  # a find may cost at most this many times its reading (issue 42)


def find_against_reads(result: dict[str, Any]) -> dict[str, Any]:
    """Per Pinecone find: its dollars per 1M against what it costs to read (the same find without
    its bookkeeping: the vector-store writes and the use counts' table calls). Counting what a
    find returned must not be what a find costs: the total stays within ``FIND_READ_FACTOR`` x."""
    run = result["backends"].get("pinecone")
    if run is None:
        return {}
    p = {k: v for k, (v, _) in PRICES.items()}
    out = {}
    for op, counts in run["operations"].items():
        if not op.startswith("find_"):
            continue
        _, wu = _pinecone_units(counts["store"])
        uses = counts.get("use_counts", {})
        use_ddb = (sum(n * DDB_WRITES.get(k, 0) for k, n in uses.items())
                   + sum(n * DDB_READS.get(k, 0) for k, n in uses.items()) * p["ddb_rru"] / p["ddb_wru"])
        bookkeeping = (wu * p["pinecone_wu"] + use_ddb * p["ddb_wru"]) * 1e6
        total = sum(price_op("pinecone", op, counts, run["memory_mb"]).values())
        reading = total - bookkeeping
        out[op] = {"total": round(total, 2), "reading": round(reading, 2), "bookkeeping": round(bookkeeping, 2),
                   "vector_store_write_units": wu, "use_count_calls": sum(uses.values()),
                   "within": total <= FIND_READ_FACTOR * reading}
    return out


# ---------------------------------------------------------------------- docs/cost.md's tables

OPS = ("ingest_s3", "find_5", "find_20", "find_100", "search_5", "search_20", "search_100", "message", "prefetch", "commit")
ITEMS = ("api_gateway", "lambda_requests", "lambda_compute", "step_functions", "bedrock_embeddings", "bedrock_llm",
         "dynamodb", "s3", "vector_store", "cloudwatch_logs", "cloudwatch_put_metric_data", "total")


def _counted(c: dict[str, Any], backend: str) -> list[str]:
    aws, usage, store = c["aws"], c["usage"], c["store"]
    ddb_r = sum(n for k, n in aws.items() if k.startswith("dynamodb:") and k.split(":")[1] in DDB_READS)
    ddb_w = sum(n for k, n in aws.items() if k.startswith("dynamodb:") and k.split(":")[1] in DDB_WRITES)
    s3 = sum(n for k, n in aws.items() if k.startswith("s3:"))
    if backend == "pinecone":
        ru, wu = _pinecone_units(store)
        vs = f"{sum(n for k, n in store.items() if k.startswith('requests:'))} req, {ru:g} RU, {wu:g} WU"
    else:
        vs = f"{sum(n for k, n in store.items() if k.startswith('requests:'))} req"
    return [str(sum(c["lambda"].values())), str(aws.get("states:StartSyncExecution", 0)),
            f"{aws.get('bedrock:InvokeModel', 0)} / {usage.get('embedding_tokens', 0)}",
            f"{aws.get('bedrock:Converse', 0)} / {usage.get('llm_input_tokens', 0)}+{usage.get('llm_output_tokens', 0)}",
            f"{ddb_r} / {ddb_w}", str(s3), vs, str(c["emf_values"]), str(c["log_bytes"]), str(usage.get("lines", 0))]


def markdown(result: dict[str, Any]) -> str:
    lines = []
    for backend, run in result["backends"].items():
        ops = [op for op in OPS if op in run["operations"]]
        lines += [f"### {backend}: counted per operation", "",
                  "| operation | Lambda invocations | Express executions | Bedrock InvokeModel / tokens | Converse / tokens in+out "
                  "| DynamoDB reads / writes | S3 calls | vector store | EMF values | log bytes | usage lines |",
                  "|---" * 11 + "|"]
        lines += [f"| {op} | " + " | ".join(_counted(run["operations"][op], backend)) + " |" for op in ops]
        lines += ["", f"### {backend}: dollars per 1M operations", "", "| item | " + " | ".join(ops) + " |",
                  "|---" * (len(ops) + 1) + "|"]
        priced_rows = result["priced"][backend]
        for item in ITEMS:
            cells = [f"{priced_rows[op][item]:,.2f}" for op in ops]
            name = f"**{item}**" if item == "total" else item
            lines.append(f"| {name} | " + " | ".join(f"**{c}**" if item == "total" else c for c in cells) + " |")
        lines.append("")
    checked = result["priced"].get("find_against_reads") or {}
    if checked:
        lines += [f"### pinecone: a find against its reading (at most {FIND_READ_FACTOR:g}x)", "",
                  "| operation | total per 1M | reading per 1M | bookkeeping per 1M | vector-store write units "
                  "| use-count calls | within |", "|---|---|---|---|---|---|---|"]
        lines += [f"| {op} | {c['total']:,.2f} | {c['reading']:,.2f} | {c['bookkeeping']:,.2f} | "
                  f"{c['vector_store_write_units']:g} | {c['use_count_calls']} | {'yes' if c['within'] else 'NO'} |"
                  for op, c in checked.items()]
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    import json
    from pathlib import Path

    print(markdown(json.loads((Path(__file__).parent / "results" / "cost.json").read_text())))
