"""The Pinecone backend: one namespace per tenant, through the pinecone SDK's REST ``Index``.

Records are stored as vectors whose metadata holds the record's fields under their own names
(``None`` values and empty lists omitted: Pinecone rejects null, and cairn treats an empty list as
missing) and each user metadata key ``k`` as ``md_<k>``. ``text`` then ``abstract`` are cut so the
metadata stays within Pinecone's 40 KB per vector; every cut is counted in ``truncations``.

Upserts go in batches of at most 1,000 vectors and 2 MB. ``query_many`` runs its queries
concurrently (Pinecone has no batch query). Retries are cairn's, not the SDK's: the one
:class:`~cairn.core.retry.RetryPolicy` (full jitter, ``Retry-After`` honoured) on the retryable HTTP
statuses of :mod:`cairn.core.retry`, timeouts and connection errors; the SDK's own REST retry loop is
switched off so the two do not multiply.

``count`` without a filter reads ``describe_index_stats`` (which lags writes by a few seconds on
real Pinecone). ``count`` and ``delete_by_filter`` with a filter list the matching ids with one
query at Pinecone's ``top_k`` ceiling (10,000); when a filter matches that many or more they page
through ``fetch_by_metadata`` instead (serverless indexes only), which also returns the vectors
and is therefore slower.

The SDK is imported lazily, here only.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

from cairn.core.errors import (
    CairnError,
    RecordValidationError,
    VectorStoreError,
    VectorStoreRequestError,
    VectorStoreUnavailable,
)
from cairn.core.models import ContextRecord
from cairn.core.retry import RetryPolicy, is_retryable_status
from cairn.ports.vectorstores.base import Capabilities, VectorHit, VectorQuery, VectorStore

if TYPE_CHECKING:
    from cairn.core.config import PineconeSettings

log = logging.getLogger(__name__)
T = TypeVar("T")

MAX_UPSERT_VECTORS = 1000
MAX_REQUEST_BYTES = 2_000_000  # Pinecone's cap is 2 MB; keep a margin for the JSON envelope
MAX_METADATA_BYTES = 40_000  # Pinecone's cap is 40 KB per vector
MARKER_NAMESPACE = "__cairn__"  # cairn's own records (the embedder's identity); never a tenant
MARKER_ID = "embedder-identity"
MAX_TOP_K = 10_000
MAX_DELETE_IDS = 1000
FETCH_BATCH = 200  # ids per GET /vectors/fetch, keeps the URL short
METADATA_PREFIX = "md_"
_RECORD_FIELDS = (
    "id", "tenant", "uri", "parent_uri", "ancestors", "depth", "level", "context_type", "owner", "title",
    "abstract", "text", "tags", "created_at", "updated_at", "active_count", "content_hash",
)
_INT_FIELDS = ("depth", "level", "active_count")


def _json_size(obj: Any) -> int:
    return len(json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode())


def _present(value: Any) -> bool:
    return value is not None and value != []


def record_to_metadata(rec: ContextRecord) -> dict[str, Any]:
    """A record's Pinecone metadata, before any truncation."""
    data = rec.model_dump(mode="json", include=set(_RECORD_FIELDS))
    out = {k: data[k] for k in _RECORD_FIELDS if _present(data.get(k))}
    out.update({f"{METADATA_PREFIX}{k}": v for k, v in rec.metadata.items() if _present(v)})
    return out


def fit_metadata(md: dict[str, Any], limit: int = MAX_METADATA_BYTES) -> tuple[dict[str, Any], int]:
    """Cut ``text`` then ``abstract`` until ``md`` fits in ``limit`` bytes; return it and the cut count."""
    cuts = 0
    for key in ("text", "abstract"):
        excess = _json_size(md) - limit
        if excess <= 0:
            break
        value = md.get(key) or ""
        if not value:
            continue
        md[key] = _cut_utf8(value, _json_size(value) - 2 - excess)  # its JSON bytes, less the excess
        if not md[key]:
            del md[key]
        cuts += 1
    if _json_size(md) > limit:
        raise RecordValidationError(
            f"record {md.get('uri')!r}: metadata is {_json_size(md)} bytes even without text and abstract; "
            f"Pinecone allows {limit} bytes; shorten its title, tags, ancestors or metadata"
        )
    return md, cuts


def _cut_utf8(text: str, max_bytes: int) -> str:
    """The longest prefix of ``text`` whose UTF-8 (and JSON escaping) fits ``max_bytes``."""
    cut = text.encode()[: max(0, max_bytes)].decode(errors="ignore")
    while cut and _json_size(cut) - 2 > max_bytes:  # quotes, backslashes and controls are escaped
        cut = cut[: -max(1, len(cut) // 20)]
    return cut


def metadata_to_record(vid: str, md: dict[str, Any], values: list[float] | None) -> ContextRecord:
    """Rebuild a record from its stored metadata (numbers come back as floats)."""
    if "uri" not in md or "tenant" not in md:
        raise VectorStoreError(f"vector {vid!r} has no cairn metadata; was it written by cairn?")
    fields: dict[str, Any] = {k: md[k] for k in _RECORD_FIELDS if k in md}
    for k in _INT_FIELDS:
        if k in fields:
            fields[k] = int(fields[k])
    fields["id"] = vid
    fields.setdefault("parent_uri", None)
    fields.setdefault("ancestors", [])
    fields["metadata"] = {
        k[len(METADATA_PREFIX):]: _restore_number(v) for k, v in md.items() if k.startswith(METADATA_PREFIX)
    }
    fields["vector"] = list(values) if values else None
    return ContextRecord(**fields)


def _restore_number(v: Any) -> Any:
    if isinstance(v, float) and v.is_integer() and abs(v) < 2**53:
        return int(v)
    return v


def _batches(vectors: list[dict[str, Any]], max_count: int, max_bytes: int) -> Iterator[list[dict[str, Any]]]:
    """Split ``vectors`` into requests of at most ``max_count`` items and ``max_bytes`` of JSON."""
    batch: list[dict[str, Any]] = []
    size = 0
    for v in vectors:
        v_size = _json_size(v) + 1
        if batch and (len(batch) >= max_count or size + v_size > max_bytes):
            yield batch
            batch, size = [], 0
        batch.append(v)
        size += v_size
    if batch:
        yield batch


def _chunks(items: list[str], n: int) -> Iterator[list[str]]:
    for i in range(0, len(items), n):
        yield items[i:i + n]


def build_index(host: str, api_key: str, timeout_s: float) -> Any:
    """The SDK's REST ``Index`` for ``host``, with the SDK's own retry loop switched off.

    The SDK (v10) retries data-plane REST calls itself (3 retries, not configurable on ``Index``,
    and throttled by a process-wide budget per host). cairn retries instead, so the HTTP client
    is rebuilt with ``RetryConfig(max_retries=0)``. If the SDK's layout ever changes, its retries
    stay on and a warning says so.
    """
    from pinecone import Index, RetryConfig

    index = Index(host=host, api_key=api_key, timeout=timeout_s)
    try:
        from pinecone._internal.constants import DATA_PLANE_API_VERSION
        from pinecone._internal.http_client import HTTPClient

        config = replace(index._config, retry_config=RetryConfig(max_retries=0))
        old = index._http
        index._http = HTTPClient(config, DATA_PLANE_API_VERSION)
        old.close()
    except (ImportError, AttributeError, TypeError) as exc:  # pragma: no cover - other SDK versions
        log.warning("pinecone_sdk_retries_left_on", extra={"reason": repr(exc)})
    return index


class PineconeVectorStore(VectorStore):
    """Pinecone serverless (or pod) index, cosine metric, one namespace per tenant."""

    backend = "pinecone"

    def __init__(
        self,
        *,
        dimension: int,
        index_host: str,
        api_key: str,
        timeout_s: float = 10.0,
        max_retries: int = 3,
        pool_threads: int = 4,
        backoff_s: float = 0.25,
        max_backoff_s: float = 8.0,
        sleep: Callable[[float], None] = time.sleep,
        retry: RetryPolicy | None = None,
    ) -> None:
        super().__init__(dimension=dimension)
        self.index_host = index_host
        self.retry = retry or RetryPolicy.of_retries(max_retries, backoff_s, max_backoff_s)
        self.max_retries = self.retry.max_retries
        self.pool_threads = pool_threads
        self.truncations = 0
        self.retries = 0
        self._sleep = sleep
        self._index = build_index(index_host, api_key, timeout_s)
        self._pool: ThreadPoolExecutor | None = None
        self._probe = [1.0 / math.sqrt(dimension)] * dimension  # any non-zero vector: only the filter matters

    @classmethod
    def from_settings(cls, settings: PineconeSettings, dimension: int) -> PineconeVectorStore:
        return cls(
            dimension=dimension,
            index_host=settings.index_host,
            api_key=settings.api_key,
            timeout_s=settings.timeout_s,
            max_retries=settings.max_retries,
            pool_threads=settings.pool_threads,
            backoff_s=settings.backoff_s,
        )

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None
        self._index.close()

    # ----------------------------------------------------------------- retries and errors

    def _retrying(self, fn: Callable[[], T]) -> T:
        return self.retry.call(fn, retryable=self._is_retryable, sleep=self._sleep, on_retry=self._retried,
                               what="pinecone")

    def _retried(self, attempt: int, delay: float, exc: BaseException) -> None:
        self.retries += 1

    @staticmethod
    def _is_retryable(exc: BaseException) -> bool:
        from pinecone.errors.exceptions import ApiError, PineconeConnectionError, PineconeTimeoutError

        if isinstance(exc, PineconeTimeoutError | PineconeConnectionError):
            return True
        return isinstance(exc, ApiError) and is_retryable_status(exc.status_code)

    def _map_error(self, exc: Exception) -> CairnError | None:
        from pinecone.errors.exceptions import ApiError, PineconeError, PineconeValueError

        name = type(exc).__name__
        if self._is_retryable(exc):
            return VectorStoreUnavailable(
                f"pinecone at {self.index_host} is unavailable after {self.max_retries} retries: {name}: {exc}"
            )
        if isinstance(exc, ApiError):
            return VectorStoreRequestError(
                f"pinecone rejected the request ({exc.status_code}): {exc.message}",
                details={"status": exc.status_code, "vendor_message": exc.message},
            )
        if isinstance(exc, PineconeValueError):
            return VectorStoreRequestError(f"pinecone SDK refused the request: {exc}")
        if isinstance(exc, PineconeError):
            return VectorStoreError(f"pinecone backend failed: {name}: {exc}")
        return None

    # ----------------------------------------------------------------- hooks

    def _capabilities(self) -> Capabilities:
        from cairn.core.filters.pinecone import SUPPORTED_OPERATORS

        return Capabilities(
            keyword=False,
            hybrid=False,
            batched_queries=False,
            max_upsert_batch=MAX_UPSERT_VECTORS,
            filter_operators=frozenset(SUPPORTED_OPERATORS),
        )

    def _translate_filter(self, tree: Any) -> dict[str, Any] | None:
        if tree is None:
            return None
        from cairn.core.filters.pinecone import translate

        return translate(tree)

    def _to_vector(self, rec: ContextRecord) -> dict[str, Any]:
        md, cuts = fit_metadata(record_to_metadata(rec))
        if cuts:
            self.truncations += cuts
            log.info("pinecone_metadata_truncated", extra={"uri": rec.uri, "cuts": cuts})
        return {"id": rec.id, "values": list(rec.vector or []), "metadata": md}

    def _upsert(self, tenant: str, records: list[ContextRecord]) -> int:
        vectors = [self._to_vector(r) for r in records]
        written = 0
        for batch in _batches(vectors, MAX_UPSERT_VECTORS, MAX_REQUEST_BYTES):
            response = self._retrying(functools.partial(self._index.upsert, vectors=batch, namespace=tenant))
            written += response.upserted_count
        return written

    def _query(self, request: VectorQuery, native_filter: Any) -> list[VectorHit]:
        response = self._retrying(
            lambda: self._index.query(
                top_k=request.limit,
                vector=request.vector,
                namespace=request.tenant,
                filter=native_filter,
                include_metadata=True,
                include_values=request.include_vectors,
            )
        )
        return [
            VectorHit(record=metadata_to_record(m.id, m.metadata or {}, m.values or None), score=m.score)
            for m in response.matches
        ]

    def _query_many(self, requests: list[VectorQuery], native_filters: list[Any]) -> list[list[VectorHit]]:
        if len(requests) == 1:
            return [self._query(requests[0], native_filters[0])]
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=self.pool_threads, thread_name_prefix="cairn-pinecone")
        futures = [self._pool.submit(self._query, r, f) for r, f in zip(requests, native_filters, strict=True)]
        return [f.result() for f in futures]

    def _fetch_vectors(self, tenant: str, ids: list[str]) -> dict[str, Any]:
        found: dict[str, Any] = {}
        for chunk in _chunks(ids, FETCH_BATCH):
            response = self._retrying(functools.partial(self._index.fetch, ids=chunk, namespace=tenant))
            found.update(response.vectors)
        return found

    def _fetch(self, tenant: str, ids: list[str]) -> list[ContextRecord]:
        found = self._fetch_vectors(tenant, ids)
        return [metadata_to_record(i, found[i].metadata or {}, found[i].values) for i in ids if i in found]

    def _scan(self, tenant: str, batch: int) -> Iterator[list[ContextRecord]]:
        token: str | None = None
        while True:  # fetch_by_metadata pages through every record (levels are 0, 1, 2)
            page = self._retrying(functools.partial(self._index.fetch_by_metadata, filter={"level": {"$in": [0, 1, 2]}},
                                                    namespace=tenant, limit=batch, pagination_token=token))
            yield [metadata_to_record(i, v.metadata or {}, v.values) for i, v in page.vectors.items()]
            token = page.pagination.next if page.pagination is not None else None
            if not token:
                return

    def _delete_ids(self, tenant: str, ids: list[str]) -> None:
        for chunk in _chunks(ids, MAX_DELETE_IDS):
            self._retrying(functools.partial(self._index.delete, ids=chunk, namespace=tenant))

    def _delete(self, tenant: str, ids: list[str]) -> int:
        existing = [i for i in ids if i in self._fetch_vectors(tenant, ids)]
        self._delete_ids(tenant, existing)
        return len(existing)

    def _delete_by_filter(self, tenant: str, native_filter: Any) -> int:
        ids = self._matching_ids(tenant, native_filter)
        self._delete_ids(tenant, ids)
        return len(ids)

    # the embedder's identity: one marker record in a namespace no tenant can have (tenant names
    # start with a letter or digit); Pinecone indexes carry no free-form metadata of their own

    def keeps_identity(self) -> bool:
        return True

    def _read_identity(self, tenant: str) -> dict[str, Any] | None:
        response = self._retrying(functools.partial(self._index.fetch, ids=[MARKER_ID], namespace=MARKER_NAMESPACE))
        found = response.vectors.get(MARKER_ID)
        if found is None:
            return None
        md = dict(found.metadata or {})
        langs = md.get("languages")
        return {**md, "languages": None if langs in (None, "*") else list(langs)}

    def _write_identity(self, tenant: str, identity: dict[str, Any]) -> None:
        md = {**identity, "languages": identity.get("languages") if identity.get("languages") is not None else "*"}
        marker = {"id": MARKER_ID, "values": [1.0] + [0.0] * (self.dimension - 1), "metadata": md}
        self._retrying(functools.partial(self._index.upsert, vectors=[marker], namespace=MARKER_NAMESPACE))

    def index_dimension(self) -> int | None:
        """The dimension the Pinecone index was created with (checked against the embedder at start)."""
        stats = self._call("describe_index_stats", 0, lambda: self._retrying(lambda: self._index.describe_index_stats()))
        return int(stats.dimension) if getattr(stats, "dimension", None) else None

    def _count(self, tenant: str, native_filter: Any) -> int:
        if native_filter is None:
            stats = self._retrying(lambda: self._index.describe_index_stats())
            summary = stats.namespaces.get(tenant)
            return summary.vector_count if summary is not None else 0
        return len(self._matching_ids(tenant, native_filter))

    def _matching_ids(self, tenant: str, native_filter: dict[str, Any]) -> list[str]:
        """Every id in ``tenant`` that matches: one query, or pages of fetch_by_metadata past 10,000."""
        response = self._retrying(
            lambda: self._index.query(top_k=MAX_TOP_K, vector=self._probe, namespace=tenant, filter=native_filter)
        )
        ids = [m.id for m in response.matches]
        if len(ids) < MAX_TOP_K:
            return ids
        return self._page_ids_by_metadata(tenant, native_filter)

    def _page_ids_by_metadata(self, tenant: str, native_filter: dict[str, Any]) -> list[str]:
        ids: list[str] = []
        token: str | None = None
        while True:
            page = self._retrying(
                functools.partial(self._index.fetch_by_metadata,
                                  filter=native_filter, namespace=tenant, limit=1000, pagination_token=token)
            )
            ids.extend(page.vectors)
            token = page.pagination.next if page.pagination is not None else None
            if not token:
                return ids
