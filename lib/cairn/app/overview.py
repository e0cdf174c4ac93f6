"""``GET /v1/overview``: what a tenant holds and how much it is asked, on one page.

The figures come from the tenant's own index (one scan of its records, bounded by
:data:`MAX_SCANNED`), its session store (the sessions of the users the index knows) and the
retrieval statistics of this process (queries per minute over the last day).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from cairn.core.errors import VectorStoreError
from cairn.core.kinds import ContextType, Level
from cairn.core.models import ContextRecord
from cairn.ports.observability.stats import QueryBucket

if TYPE_CHECKING:
    from cairn.engine.pipeline import Pipeline
    from cairn.ports.observability.stats import RetrievalStats
    from cairn.ports.sessions.base import SessionStore

MAX_SCANNED = 200_000  # records read for the counts; past it they say "at least"


class TenantOverview(BaseModel):
    """A tenant at a glance: its index, its users' data, and the queries it answered."""

    tenant: str
    records: int = Field(description="records (vectors) in the index: folders' L0 and L1, files' L2 chunks")
    records_by_level: dict[str, int] = Field(description="records per level: L0, L1, L2")
    documents: int = Field(description="shared documents (files under cairn://resources and cairn://agent)")
    folders: int = Field(description="folders (their L0 records)")
    memories: int = Field(description="memories of every user")
    users: int = Field(description="end users with memories or skills")
    sessions: int = Field(description="sessions of those users")
    store_bytes: int | None = Field(default=None, description="bytes the index takes, where its backend tells")
    exact: bool = Field(description="false when the index held more records than were read for the counts")
    queries: int = Field(description="typed queries answered by this server process since it started")
    queries_over_time: list[QueryBucket] = Field(
        default_factory=list, description="typed queries per minute over the last day (this server process)")


def overview(pipeline: Pipeline, sessions: SessionStore | None, stats: RetrievalStats) -> TenantOverview:
    """The overview of ``pipeline``'s tenant."""
    tenant = pipeline.tenant
    levels = {f"L{int(level)}": 0 for level in Level}
    documents: set[str] = set()
    owners: set[str] = set()
    memories = folders = seen = 0
    for r in _records(pipeline):
        seen += 1
        levels[f"L{int(r.level)}"] += 1
        if r.owner:
            owners.add(r.owner)
        if r.level is Level.ABSTRACT:
            folders += 1
        elif r.context_type is ContextType.MEMORY:
            memories += 1
        elif r.owner is None:
            documents.add(r.uri.split("#", 1)[0])
    total = pipeline.store.count(tenant)
    held = sum(len(sessions.list_sessions(tenant, user)) for user in sorted(owners)) if sessions else 0
    snapshot = stats.snapshot()
    return TenantOverview(
        tenant=tenant, records=total, records_by_level=levels, documents=len(documents), folders=folders,
        memories=memories, users=len(owners), sessions=held, store_bytes=pipeline.store.size_bytes(tenant),
        exact=seen >= total, queries=snapshot.total.queries, queries_over_time=stats.history(),
    )


def _records(pipeline: Pipeline) -> Iterator[ContextRecord]:
    """The tenant's records, :data:`MAX_SCANNED` at most; none where the backend cannot list them
    (the counts then say so: ``exact`` is false)."""
    seen = 0
    try:
        for batch in pipeline.store.scan(pipeline.tenant):
            yield from batch
            seen += len(batch)
            if seen >= MAX_SCANNED:
                return
    except VectorStoreError:
        return
