"""The ``VectorStore`` base class.

Public methods are template methods: they validate input, parse and translate the
Mongo-style filter, map vendor errors to cairn errors and record metrics. A backend fills
the small ``_hooks``. Every call names its tenant; no code path can search without one.
"""

from __future__ import annotations

import functools
import re
import time
from abc import ABC, abstractmethod
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from enum import Enum
from typing import Any, ClassVar, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from cairn.core.errors import CairnError, RecordValidationError, RequestError, VectorStoreError
from cairn.core.models import ContextRecord, ScoreExplanation

T = TypeVar("T")

IDENTITY_FACT = "embedder.identity"  # the learned fact that holds a local tenant's embedder identity
MAX_QUERY_LIMIT = 1000
MAX_BATCH_QUERIES = 64
_TENANT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
_ID_RE = re.compile(r"^[\x21-\x7e]{1,512}$")


class SearchMode(str, Enum):
    DENSE = "dense"
    KEYWORD = "keyword"
    HYBRID = "hybrid"


class VectorQuery(BaseModel):
    """One search: a query vector and/or text, a filter and a limit, for one tenant."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tenant: str
    vector: list[float] | None = None
    text: str | None = None
    mode: SearchMode = SearchMode.DENSE
    filter: dict[str, Any] | None = None
    limit: int = Field(default=10, ge=1, le=MAX_QUERY_LIMIT)
    include_vectors: bool = False
    # hybrid only: how much the dense score counts in the fusion (None: the stores' DENSE_WEIGHT);
    # lower where the embedder was not trained on the query's language (:func:`cairn.engine.stages.retrieve`)
    dense_weight: float | None = Field(default=None, ge=0.0, le=1.0)
    # keyword and hybrid only: whose documents BM25's statistics (document count, document
    # frequencies, average length) come from: the tenant's, or only those the filter keeps (one
    # user's own data is scored by its own words: :func:`cairn.engine.retrieval.scope.keyword_statistics`).
    # A backend whose capabilities lack ``keyword_statistics_of_filter`` uses its index's
    keyword_statistics: Literal["tenant", "filter"] = "tenant"
    # hybrid only: the BM25 score that counts as a full keyword match (None: this query's own best).
    # A search inside part of what an earlier search covered passes that search's best
    # (``VectorHit.keyword``), so its fused scores stay on the earlier search's scale.
    keyword_scale: float | None = Field(default=None, gt=0.0)


class VectorHit(BaseModel):
    model_config = ConfigDict(frozen=True)

    record: ContextRecord
    score: float  # cosine similarity for dense; backend relevance for keyword; fused 0..1 for hybrid
    keyword: float | None = None  # hybrid only: the record's BM25 score (None: the keyword search missed it)
    # hybrid only, where the backend fuses: the score's arithmetic (dense and keyword arms, their weights)
    explanation: ScoreExplanation | None = None


class Capabilities(BaseModel):
    model_config = ConfigDict(frozen=True)

    keyword: bool = False
    hybrid: bool = False
    batched_queries: bool = False  # query_many is one round trip (or one matrix product)
    max_upsert_batch: int = 1000
    filter_operators: frozenset[str] = frozenset()
    # BM25 statistics of the rows a filter keeps (``VectorQuery.keyword_statistics="filter"``)
    keyword_statistics_of_filter: bool = False


def validate_tenant(tenant: object) -> str:
    if not isinstance(tenant, str) or not _TENANT_RE.match(tenant):
        raise RequestError(
            f"invalid tenant {tenant!r}: 1-63 characters, letters, digits, '_', '.', '-', "
            "starting with a letter or digit"
        )
    return tenant


class StoreMetrics:
    """Counts calls, records and latency per operation; backends share one instance per store."""

    def __init__(self) -> None:
        self.calls: dict[str, int] = defaultdict(int)
        self.records: dict[str, int] = defaultdict(int)
        self.latency_ms: dict[str, float] = defaultdict(float)
        self.errors: dict[str, int] = defaultdict(int)

    def record(self, op: str, started: float, n_records: int = 0, error: bool = False) -> None:
        self.calls[op] += 1
        self.records[op] += n_records
        self.latency_ms[op] += (time.perf_counter() - started) * 1000
        if error:
            self.errors[op] += 1

    def snapshot(self) -> dict[str, dict[str, float]]:
        return {
            op: {
                "calls": self.calls[op],
                "records": self.records[op],
                "latency_ms": round(self.latency_ms[op], 3),
                "errors": self.errors[op],
            }
            for op in sorted(self.calls)
        }


class VectorStore(ABC):
    """Abstract vector store. Subclasses set ``backend`` and fill the ``_hooks``."""

    backend: ClassVar[str] = "abstract"

    def __init__(self, *, dimension: int) -> None:
        if dimension <= 0:
            raise RequestError(f"dimension must be a positive integer, got {dimension}")
        self.dimension = dimension
        self.metrics = StoreMetrics()
        self._identity_due: dict[str, dict[str, Any]] = {}  # tenant -> identity to record with its first write

    # ----------------------------------------------------------------- public API

    def capabilities(self) -> Capabilities:
        return self._capabilities()

    def upsert(self, records: Sequence[ContextRecord]) -> int:
        """Insert or replace records (by id). Returns how many were written."""
        by_tenant: dict[str, list[ContextRecord]] = defaultdict(list)
        problems: list[str] = []
        for i, rec in enumerate(records):
            try:
                self._validate_record(rec)
            except CairnError as exc:
                problems.append(f"records[{i}] ({getattr(rec, 'uri', '?')}): {exc.message}")
                continue
            by_tenant[rec.tenant].append(rec)
        if problems:
            raise RecordValidationError(
                f"{len(problems)} invalid record(s); nothing was written:\n" + "\n".join(problems)
            )
        written = 0
        for tenant, recs in by_tenant.items():
            written += self._call("upsert", len(recs), functools.partial(self._upsert, tenant, recs))
            due = self._identity_due.get(tenant)
            if due is not None:
                self.keep_embedder_identity(tenant, due)
        return written

    def query(self, request: VectorQuery) -> list[VectorHit]:
        native = self._prepare_query(request)
        return self._call("query", 0, lambda: self._query(request, native))

    def query_many(self, requests: Sequence[VectorQuery]) -> list[list[VectorHit]]:
        """Run several queries; batched into one round trip where the backend can."""
        if len(requests) > MAX_BATCH_QUERIES:
            raise RequestError(f"query_many takes at most {MAX_BATCH_QUERIES} queries, got {len(requests)}")
        if not requests:
            return []
        natives = [self._prepare_query(r) for r in requests]
        return self._call("query_many", 0, lambda: self._query_many(list(requests), natives))

    def fetch(self, tenant: str, ids: Iterable[str]) -> list[ContextRecord]:
        validate_tenant(tenant)
        ids = self._validate_ids(ids)
        return self._call("fetch", len(ids), lambda: self._fetch(tenant, ids)) if ids else []

    def delete(self, tenant: str, ids: Iterable[str]) -> int:
        validate_tenant(tenant)
        ids = self._validate_ids(ids)
        return self._call("delete", len(ids), lambda: self._delete(tenant, ids)) if ids else 0

    def delete_by_filter(self, tenant: str, filter: Mapping[str, Any]) -> int:
        """Delete every record of ``tenant`` that matches ``filter`` (which must not be empty)."""
        validate_tenant(tenant)
        if not filter:
            raise RequestError("delete_by_filter needs a non-empty filter; to clear a tenant use a filter on 'uri'")
        native = self._translate_filter(self._parse_filter(filter))
        return self._call("delete_by_filter", 0, lambda: self._delete_by_filter(tenant, native))

    def count(self, tenant: str, filter: Mapping[str, Any] | None = None) -> int:
        validate_tenant(tenant)
        native = self._translate_filter(self._parse_filter(filter))
        return self._call("count", 0, lambda: self._count(tenant, native))

    def scan(self, tenant: str, batch: int = 500) -> Iterator[list[ContextRecord]]:
        """Every record of ``tenant``, in batches of at most ``batch`` (with their vectors where the
        backend returns them): what ``cairn reindex`` reads. Records written during a scan may or
        may not be seen."""
        validate_tenant(tenant)
        for records in self._scan(tenant, max(1, min(batch, 1000))):
            self.metrics.record("scan", time.perf_counter(), len(records))
            yield records

    def _scan(self, tenant: str, batch: int) -> Iterator[list[ContextRecord]]:
        raise VectorStoreError(f"the {self.backend} backend cannot list a tenant's records")

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections; the default does nothing."""

    def size_bytes(self, tenant: str) -> int | None:
        """The bytes ``tenant``'s index takes where the backend can tell cheaply; None otherwise (the default)."""
        validate_tenant(tenant)
        return None

    # ----------------------------------------------------------------- the embedder's identity

    def keeps_identity(self) -> bool:
        """Whether this store records which embedder filled it (:mod:`cairn.ports.embeddings.identity`).
        The default keeps it as a learned fact of the tenant where the store learns facts."""
        return callable(getattr(self, "learn", None))

    def embedder_identity(self, tenant: str) -> dict[str, Any] | None:
        """The identity of the embedder that filled ``tenant``'s index, or None (not recorded)."""
        validate_tenant(tenant)
        return self._call("read_identity", 0, lambda: self._read_identity(tenant))

    def keep_embedder_identity(self, tenant: str, identity: Mapping[str, Any]) -> None:
        """Record ``identity`` as the embedder of ``tenant``'s index (replacing what was recorded)."""
        validate_tenant(tenant)
        self._call("write_identity", 0, lambda: self._write_identity(tenant, dict(identity)))
        self._identity_due.pop(tenant, None)

    def expect_embedder_identity(self, tenant: str, identity: Mapping[str, Any]) -> None:
        """Record ``identity`` with ``tenant``'s first write (a tenant with nothing stored yet)."""
        self._identity_due[tenant] = dict(identity)

    def index_generation(self, tenant: str) -> object:
        """A cheap marker of which index serves ``tenant`` now: it changes when a reindex replaces
        the index (the local tenant folder swapped, the OpenSearch alias moved), so a process that
        checked the embedder's identity knows to check it again. None: the index is never replaced
        under a running process (a Pinecone index is its host; a reindex writes another one)."""
        validate_tenant(tenant)
        try:  # not counted in the store's metrics: it is bookkeeping, asked on every request
            return self._index_generation(tenant)
        except CairnError:
            raise
        except Exception as exc:
            mapped = self._map_error(exc)
            if mapped is None:
                raise
            raise mapped from exc

    def _index_generation(self, tenant: str) -> object:
        return None

    def _read_identity(self, tenant: str) -> dict[str, Any] | None:
        learned = getattr(self, "learned", None)
        return learned(tenant, IDENTITY_FACT) if callable(learned) else None

    def _write_identity(self, tenant: str, identity: dict[str, Any]) -> None:
        learn = getattr(self, "learn", None)
        if callable(learn):
            learn(tenant, IDENTITY_FACT, identity)

    # ----------------------------------------------------------------- validation

    def _validate_record(self, rec: ContextRecord) -> None:
        if not isinstance(rec, ContextRecord):
            raise RecordValidationError(f"expected a ContextRecord, got {type(rec).__name__}")
        validate_tenant(rec.tenant)
        if not _ID_RE.match(rec.id):
            raise RecordValidationError(f"id {rec.id!r} must be 1-512 printable ASCII characters")
        if rec.vector is None:
            raise RecordValidationError("record has no vector; embed it before upserting")
        if len(rec.vector) != self.dimension:
            raise RecordValidationError(
                f"vector has {len(rec.vector)} dimensions; this store holds {self.dimension}"
            )

    def _validate_ids(self, ids: Iterable[str]) -> list[str]:
        out = list(dict.fromkeys(ids))
        bad = [i for i in out if not isinstance(i, str) or not _ID_RE.match(i)]
        if bad:
            raise RequestError(f"invalid record id(s) {bad[:5]!r}: ids are 1-512 printable ASCII characters")
        return out

    def _prepare_query(self, request: VectorQuery) -> Any:
        validate_tenant(request.tenant)
        caps = self.capabilities()
        if request.mode is SearchMode.DENSE:
            if request.vector is None:
                raise RequestError("a dense query needs a vector")
            if len(request.vector) != self.dimension:
                raise RequestError(
                    f"query vector has {len(request.vector)} dimensions; this store holds {self.dimension}"
                )
        elif request.mode is SearchMode.KEYWORD:
            if not caps.keyword:
                raise RequestError(f"the {self.backend} backend does not support keyword search")
            if not (request.text or "").strip():
                raise RequestError("a keyword query needs non-empty text")
        else:
            if not caps.hybrid:
                raise RequestError(f"the {self.backend} backend does not support hybrid search")
            if request.vector is None or not (request.text or "").strip():
                raise RequestError("a hybrid query needs both a vector and non-empty text")
        return self._translate_filter(self._parse_filter(request.filter))

    @staticmethod
    def _parse_filter(filter: Mapping[str, Any] | None) -> Any:
        from cairn.core.filters.parse import SCOPE_ALLOWANCE, parse

        return parse(filter, allowance=SCOPE_ALLOWANCE)

    # ----------------------------------------------------------------- errors and metrics

    def _call(self, op: str, n_records: int, fn: Callable[[], T]) -> T:
        started = time.perf_counter()
        try:
            result = fn()
        except CairnError:
            self.metrics.record(op, started, n_records, error=True)
            raise
        except Exception as exc:  # vendor exceptions are mapped once, here
            self.metrics.record(op, started, n_records, error=True)
            mapped = self._map_error(exc)
            if mapped is None:
                raise
            raise mapped from exc
        self.metrics.record(op, started, n_records)
        return result

    def _map_error(self, exc: Exception) -> CairnError | None:
        """Map a vendor exception to a cairn error; None re-raises it unchanged."""
        return VectorStoreError(f"{self.backend} backend failed: {type(exc).__name__}: {exc}")

    # ----------------------------------------------------------------- hooks

    @abstractmethod
    def _capabilities(self) -> Capabilities: ...

    @abstractmethod
    def _translate_filter(self, tree: Any) -> Any:
        """Translate a parsed filter (or None) into the backend's native form."""

    @abstractmethod
    def _upsert(self, tenant: str, records: list[ContextRecord]) -> int: ...

    @abstractmethod
    def _query(self, request: VectorQuery, native_filter: Any) -> list[VectorHit]: ...

    def _query_many(self, requests: list[VectorQuery], native_filters: list[Any]) -> list[list[VectorHit]]:
        return [self._query(r, f) for r, f in zip(requests, native_filters, strict=True)]

    @abstractmethod
    def _fetch(self, tenant: str, ids: list[str]) -> list[ContextRecord]: ...

    @abstractmethod
    def _delete(self, tenant: str, ids: list[str]) -> int: ...

    @abstractmethod
    def _delete_by_filter(self, tenant: str, native_filter: Any) -> int: ...

    @abstractmethod
    def _count(self, tenant: str, native_filter: Any) -> int: ...
