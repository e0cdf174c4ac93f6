"""docs/cost.md's arithmetic: counted calls -> dollars per 1M operations (benchmarks/cost_prices.py)."""

from __future__ import annotations

import pytest

from benchmarks.cost_prices import markdown, price_op, priced

pytestmark = pytest.mark.unit
MEMORY = {"ApiFunction": 1769, "PlanFunction": 1024, "RetrieveFunction": 1769, "RerankFunction": 1769}


def _counts(**overrides):
    base = {"lambda": {"ApiFunction": 1}, "aws": {}, "usage": {}, "store": {}, "log_bytes": 0, "emf_values": 0, "metrics": []}
    return {**base, **overrides}


def test_a_find_on_pinecone_pays_its_query_fetch_and_the_use_count_upsert() -> None:
    counts = _counts(aws={"bedrock:InvokeModel": 1}, usage={"embedding_tokens": 8},
                     store={"requests:query": 1, "requests:fetch": 1, "fetched_records": 5, "upserted_kb": 25})
    items = price_op("pinecone", "find_5", counts, MEMORY)
    assert items["vector_store"] == pytest.approx((0.25 + 1) * 16 + 25 * 4)  # RU x $16/M + WU x $4/M
    assert items["bedrock_embeddings"] == pytest.approx(8 / 1000 * 0.00002 * 1e6)
    assert items["api_gateway"] == 1.0 and items["lambda_requests"] == 0.2
    assert price_op("opensearch", "find_5", counts, MEMORY)["vector_store"] == 0.0  # capacity, not requests


def test_the_tables_show_every_operation_measured_with_its_total() -> None:
    search = _counts(aws={"states:StartSyncExecution": 1, "bedrock:Converse": 1},
                     usage={"llm_input_tokens": 20, "llm_output_tokens": 19, "lines": 2})
    search["lambda"] = {"ApiFunction": 1, "PlanFunction": 1, "RetrieveFunction": 1, "RerankFunction": 1}
    result = {"backends": {"opensearch": {"operations": {"search_5": search}, "memory_mb": MEMORY}}}
    result["priced"] = priced(result)
    row = result["priced"]["opensearch"]["search_5"]
    assert row["bedrock_llm"] == pytest.approx((20 / 1000 * 0.00025 + 19 / 1000 * 0.00125) * 1e6, abs=0.01)
    assert row["total"] == pytest.approx(sum(v for k, v in row.items() if k != "total"), abs=0.05)
    text = markdown(result)
    assert "| search_5 | 4 | 1 |" in text and f"**{row['total']:,.2f}**" in text
