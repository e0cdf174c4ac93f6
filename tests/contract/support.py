"""The contract suite's fixed record set and helpers (reading results by name, waiting on real services).

Each metadata key holds one type of value in every record (OpenSearch maps a key by the first
value it sees and coerces others, as docs/filters.md says).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from cairn.core.models import ContextRecord
from cairn.ports.vectorstores.base import VectorHit, VectorQuery, VectorStore

DIM = 8
T2020 = datetime(2020, 6, 1, tzinfo=UTC).timestamp()
T2023 = datetime(2023, 6, 1, tzinfo=UTC).timestamp()


def vec(*pairs: tuple[int, float]) -> list[float]:
    v = [0.0] * DIM
    for i, x in pairs:
        v[i] = x
    return v


# name: (uri, level, fields)
SPECS: dict[str, tuple[str, int, dict[str, Any]]] = {
    "a": ("cairn://resources/docs/guide/refunds.md", 2, {
        "title": "Refunds", "abstract": "How to ask for a refund.", "text": "Refunds are paid within five days.",
        "tags": ["faq", "howto"], "created_at": T2020, "updated_at": T2023, "active_count": 3,
        "metadata": {"year": 2020, "lang": "en", "draft": False, "authors": ["ann", "bob"], "rating": 4.5},
        "vector": vec((0, 1.0), (1, 0.2))}),
    "b": ("cairn://resources/docs/guide/invoices.md", 2, {
        "title": "Invoices", "abstract": "Monthly invoices by email.", "text": "Invoices are emailed every month.",
        "tags": ["faq"], "created_at": T2023, "updated_at": T2023,
        "metadata": {"year": 2022, "lang": "fr", "draft": True, "authors": ["bob"]},
        "vector": vec((0, 0.8), (1, 0.6))}),
    "c": ("cairn://resources/docs/api/errors.md", 2, {
        "title": "Error codes", "abstract": "Every API error code.", "text": "A 429 means slow down and retry.",
        "created_at": T2023, "metadata": {"year": 2024, "lang": "en", "rating": 3.0},
        "vector": vec((1, 1.0))}),
    "d": ("cairn://resources/docs/guide", 0, {
        "title": "Guide", "abstract": "Guides about refunds and invoices.", "tags": ["howto"],
        "vector": vec((0, 0.7), (2, 0.7))}),
    "e": ("cairn://resources/docs/guide", 1, {
        "title": "Guide", "abstract": "Overview: refunds.md explains refunds; invoices.md explains invoices.",
        "vector": vec((2, 1.0))}),
    "f": ("cairn://user/alice/memories/prefs/language.md", 2, {
        "title": "Language", "abstract": "Alice prefers answers in French.", "tags": ["prefs"],
        "metadata": {"year": 2021, "draft": False, "lang": "fr"},
        "vector": vec((3, 1.0), (0, 0.1))}),
    "g": ("cairn://agent/skills/search/web.md", 2, {
        "title": "Web search", "abstract": "Search the web for fresh facts.", "text": "Use the search tool.",
        "tags": ["search", "howto"], "metadata": {"lang": "de", "rating": 5.0, "authors": ["cy"]},
        "vector": vec((4, 1.0), (1, -0.3))}),
}
NAMES = tuple(SPECS)


def build(tenant: str, name: str, **override: Any) -> ContextRecord:
    uri, level, fields = SPECS[name]
    return ContextRecord.build(tenant=tenant, uri=uri, level=level, **{**fields, **override})


def seed(store: VectorStore, tenant: str, names: tuple[str, ...] = NAMES) -> dict[str, ContextRecord]:
    """Write the fixed records for ``tenant``; returns them by name."""
    records = {name: build(tenant, name) for name in names}
    upsert(store, list(records.values()))
    return records


def names_of(hits: list[VectorHit] | list[ContextRecord], records: dict[str, ContextRecord]) -> set[str]:
    by_id = {r.id: n for n, r in records.items()}
    return {by_id.get(h.record.id if isinstance(h, VectorHit) else h.id, "?") for h in hits}


def query(tenant: str, vector: list[float] | None = None, **kw: Any) -> VectorQuery:
    return VectorQuery(tenant=tenant, vector=vector if vector is not None else vec((0, 1.0)), **kw)


def cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


def is_real(store: VectorStore) -> bool:
    """True for a real service (its writes may take a moment to show in queries)."""
    return bool(getattr(store, "_contract_real", False))


def upsert(store: VectorStore, records: list[ContextRecord]) -> None:
    """Upsert; on a real service (eventually consistent) wait until queries see the records."""
    store.upsert(records)
    if not is_real(store):
        return
    for tenant in {r.tenant for r in records}:
        ids = sorted({r.id for r in records if r.tenant == tenant})
        probe = VectorQuery(tenant=tenant, vector=[1.0] * DIM, limit=len(ids), filter={"id": {"$in": ids}})
        deadline = time.monotonic() + 60.0
        while len(store.query(probe)) < len(ids) and time.monotonic() < deadline:
            time.sleep(0.5)


def settle(store: VectorStore, check: Callable[[], bool]) -> None:
    """On a real service, wait (up to 60 s) until ``check()`` holds after a delete."""
    deadline = time.monotonic() + 60.0
    while is_real(store) and not check() and time.monotonic() < deadline:
        time.sleep(0.5)
