"""The OpenSearch store: a k-NN index (HNSW on lucene or faiss) through opensearch-py.

* One index holds every tenant; each document's ``_id`` is ``{tenant}:{record id}`` and every
  query, count and delete carries a ``tenant`` term in filter context that a user filter
  cannot override (the user filter is ANDed next to it, never instead of it).
* Dense search puts the filter *inside* the ``knn`` clause (efficient filtering: the k
  neighbours come from the filtered set). Scores are turned back from OpenSearch's
  ``(1 + cos) / 2`` into the cosine similarity, so every backend reports the same number.
* Keyword search is BM25 ``multi_match`` over ``title.text^2``, ``abstract`` and ``text``, or
  their subfields of the query's language (``text.zh``: smartcn, ``text.ja``: kuromoji, ...),
  never on a directory's L1 overview (as on the local store: :func:`.keywords.record_text`);
  hybrid runs dense and keyword in one ``_msearch`` and fuses their scores (:mod:`.fusion`).
* ``query_many`` is one ``_msearch`` round trip; upserts are chunked ``_bulk`` requests.
* Requests that fail with a retryable status (:mod:`cairn.core.retry`), a timeout or a connection
  error are retried by the one :class:`~cairn.core.retry.RetryPolicy` (full jitter), wrapped around
  opensearch-py's transport (whose own retries are off); then ``VectorStoreUnavailable``.
  opensearch-py does not keep response headers on its errors, so ``Retry-After`` cannot be read.

opensearch-py is imported lazily, by this module only.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from cairn.core.errors import (
    CairnError,
    ConfigError,
    VectorStoreUnavailable,
)
from cairn.core.models import ContextRecord
from cairn.core.retry import RetryPolicy
from cairn.core.text import AUTO, LanguagePolicy, language_of
from cairn.ports.vectorstores.base import (
    Capabilities,
    SearchMode,
    VectorHit,
    VectorQuery,
    VectorStore,
)
from cairn.ports.vectorstores.fusion import fuse, hybrid_depth
from cairn.ports.vectorstores.keywords import OVERVIEW_LEVEL
from cairn.ports.vectorstores.opensearch_index import (
    META_IDENTITY,
    SUBFIELD_LANGUAGES,
    doc_id,  # noqa: F401 - re-exported
    index_body,  # noqa: F401 - re-exported
    keyword_fields,
)
from cairn.ports.vectorstores.opensearch_wire import (
    _http_auth,
    _index_missing,
    _ok,
    _policy_transport,
    _raise_item_errors,
    _status_error,
    _Throttled,
)

if TYPE_CHECKING:
    from cairn.core.config import OpenSearchSettings


GENERATION_TTL_S = 5.0  # a warm process notices a reindex's alias switch within this (one GET _mapping)


class OpenSearchVectorStore(VectorStore):
    backend = "opensearch"
    generation_ttl_s = GENERATION_TTL_S  # how long the concrete index behind the configured name is trusted

    def __init__(
        self,
        *,
        dimension: int,
        client: Any = None,
        url: str | None = None,
        index: str = "cairn-contexts",
        engine: str = "lucene",
        auth: str = "none",
        username: str | None = None,
        password: str | None = None,
        region: str | None = None,
        service: str = "es",
        credentials: Any = None,
        timeout_s: float = 10.0,
        max_retries: int = 3,
        backoff_s: float = 0.2,
        verify_certs: bool = True,
        bulk_max_docs: int = 500,
        bulk_max_bytes: int = 5 * 1024 * 1024,
        refresh: str | bool = "wait_for",
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], None] | None = None,
        languages: tuple[str, ...] = SUBFIELD_LANGUAGES,
        language_policy: LanguagePolicy = AUTO,
    ) -> None:
        super().__init__(dimension=dimension)
        unknown = [code for code in languages if code not in SUBFIELD_LANGUAGES]
        if unknown:
            raise ConfigError(f"opensearch languages {unknown} are not analysed by cairn (CAIRN_OPENSEARCH_LANGUAGES); "
                              f"allowed: {', '.join(SUBFIELD_LANGUAGES)} (English is always there)")
        self.languages, self.language_policy = tuple(languages), language_policy
        if engine not in ("lucene", "faiss"):
            raise ConfigError(f"opensearch engine {engine!r} is not supported; use 'lucene' or 'faiss'")
        if client is None and not url:
            raise ConfigError("OpenSearchVectorStore needs a url (CAIRN_OPENSEARCH_URL) or a client")
        self.index, self.engine = index, engine
        self.retry = retry or RetryPolicy.of_retries(max_retries, backoff_s, cap_s=5.0)
        self.max_retries = self.retry.max_retries
        self._sleep = sleep or time.sleep
        self.bulk_max_docs, self.bulk_max_bytes, self.refresh = bulk_max_docs, bulk_max_bytes, refresh
        self._owns_client = client is None
        self._client = client if client is not None else self._build_client(
            url or "", auth, username, password, region, service, credentials, timeout_s, verify_certs
        )
        self._index_ready = False
        self._generation: tuple[float, object] | None = None  # (when looked up, the index the name resolved to)
        self._index_lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: OpenSearchSettings, dimension: int, **kwargs: Any) -> OpenSearchVectorStore:
        return cls(
            dimension=dimension, url=settings.url, index=settings.index, engine=settings.engine,
            auth=settings.auth, username=settings.username, password=settings.password,
            region=settings.region, service=settings.service, timeout_s=settings.timeout_s,
            max_retries=settings.max_retries, backoff_s=settings.backoff_s,
            verify_certs=settings.verify_certs, languages=settings.languages, **kwargs,
        )

    def _build_client(
        self, url: str, auth: str, username: str | None, password: str | None, region: str | None,
        service: str, credentials: Any, timeout_s: float, verify_certs: bool,
    ) -> Any:
        from opensearchpy import OpenSearch

        return OpenSearch(
            hosts=[url],
            http_auth=_http_auth(auth, username, password, region, service, credentials),
            timeout=timeout_s,
            max_retries=0,  # the policy retries, around the transport
            verify_certs=verify_certs,
            transport_class=_policy_transport(self.retry, self._sleep),
        )

    def close(self) -> None:
        if self._owns_client:
            self._client.close()

    # ----------------------------------------------------------------- hooks

    def _capabilities(self) -> Capabilities:
        from cairn.core.filters import opensearch as os_filters

        return Capabilities(
            keyword=True, hybrid=True, batched_queries=True, max_upsert_batch=self.bulk_max_docs,
            filter_operators=os_filters.SUPPORTED_OPERATORS,
        )

    def _translate_filter(self, tree: Any) -> dict[str, Any] | None:
        from cairn.core.filters import opensearch as os_filters

        return os_filters.translate(tree)

    def _upsert(self, tenant: str, records: list[ContextRecord]) -> int:
        self._ensure_index()
        chunks = list(self._bulk_chunks(self._index_lines(tenant, records)))
        for n, chunk in enumerate(chunks):
            self._bulk(chunk, refresh=self.refresh if n == len(chunks) - 1 else False)
        return len(records)

    def _query(self, request: VectorQuery, native_filter: Any) -> list[VectorHit]:
        if request.mode is SearchMode.HYBRID:
            return self._query_many([request], [native_filter])[0]
        try:
            response = self._client.search(index=self.index, body=self._search_body(request, native_filter))
        except Exception as exc:
            if _index_missing(exc):
                return []
            raise
        return self._hits(request, response)

    def _query_many(self, requests: list[VectorQuery], native_filters: list[Any]) -> list[list[VectorHit]]:
        lines: list[dict[str, Any]] = []
        for request, native in zip(requests, native_filters, strict=True):
            for body in self._sub_searches(request, native):
                lines.extend([{"index": self.index}, body])
        responses = iter(self._client.msearch(body=lines)["responses"])
        results = []
        for request in requests:
            if request.mode is SearchMode.HYBRID:
                dense, keyword = _ok(next(responses)), _ok(next(responses))
                results.append(self._fuse(request, dense, keyword))
            else:
                results.append(self._hits(request, _ok(next(responses))))
        return results

    def _fetch(self, tenant: str, ids: list[str]) -> list[ContextRecord]:
        try:
            docs = self._client.mget(index=self.index, body={"ids": [doc_id(tenant, i) for i in ids]})["docs"]
        except Exception as exc:
            if _index_missing(exc):
                return []
            raise
        found = [d["_source"] for d in docs if d.get("found") and d["_source"].get("tenant") == tenant]
        return [ContextRecord.model_validate(src) for src in found]

    def _scan(self, tenant: str, batch: int) -> Iterator[list[ContextRecord]]:
        after: list[Any] | None = None
        while True:  # search_after on the record id: no result window, no scroll context to keep
            body: dict[str, Any] = {"query": _tenant_query(tenant, None), "size": batch, "sort": [{"id": "asc"}]}
            if after is not None:
                body["search_after"] = after
            try:
                hits = self._client.search(index=self.index, body=body)["hits"]["hits"]
            except Exception as exc:
                if _index_missing(exc):
                    return
                raise
            if not hits:
                return
            yield [ContextRecord.model_validate(h["_source"]) for h in hits]
            after = hits[-1]["sort"]

    def _delete(self, tenant: str, ids: list[str]) -> int:
        lines = [json.dumps({"delete": {"_id": doc_id(tenant, i)}}) for i in ids]
        items = self._bulk(lines, refresh=self.refresh)
        return sum(1 for item in items if item.get("delete", {}).get("result") == "deleted")

    def _delete_by_filter(self, tenant: str, native_filter: Any) -> int:
        body = {"query": _tenant_query(tenant, native_filter)}
        try:
            response = self._client.delete_by_query(index=self.index, body=body, refresh=True, conflicts="proceed")
        except Exception as exc:
            if _index_missing(exc):
                return 0
            raise
        return int(response["deleted"])

    def _count(self, tenant: str, native_filter: Any) -> int:
        try:
            response = self._client.count(index=self.index, body={"query": _tenant_query(tenant, native_filter)})
        except Exception as exc:
            if _index_missing(exc):
                return 0
            raise
        return int(response["count"])

    def _map_error(self, exc: Exception) -> CairnError | None:
        from opensearchpy import exceptions as osx

        if isinstance(exc, osx.ConnectionTimeout | osx.ConnectionError):
            return VectorStoreUnavailable(f"opensearch at {self._where()} could not be reached after "
                                          f"{self.max_retries} retries: {exc}")
        if isinstance(exc, osx.TransportError) and isinstance(exc.status_code, int):
            return _status_error(exc.status_code, exc.info, self.max_retries)
        return super()._map_error(exc)

    # ----------------------------------------------------------------- index and writes

    def index_dimension(self) -> int | None:
        """The dimension of the index's ``vector`` field; None while the index does not exist."""
        from opensearchpy.exceptions import NotFoundError

        def read() -> dict[str, Any] | None:
            try:
                return self._client.indices.get_mapping(index=self.index)
            except NotFoundError:
                return None

        mapping = self._call("get_mapping", 0, read)
        if mapping is None:
            return None
        for index in mapping.values():
            vector = ((index.get("mappings") or {}).get("properties") or {}).get("vector") or {}
            if "dimension" in vector:
                return int(vector["dimension"])
        return None

    # the embedder's identity: the index mapping's ``_meta`` (PUT _mapping replaces ``_meta`` whole)

    def keeps_identity(self) -> bool:
        return True

    def _index_generation(self, tenant: str) -> object:
        """The concrete index the configured name resolves to (a reindex moves the alias to a new
        one), looked up at most every :data:`GENERATION_TTL_S` seconds: one metadata GET, no search."""
        from opensearchpy.exceptions import NotFoundError

        now = time.monotonic()
        if self._generation is not None and now - self._generation[0] < self.generation_ttl_s:
            return self._generation[1]
        try:
            names = sorted(self._client.indices.get_mapping(index=self.index))
        except NotFoundError:
            names = []
        self._generation = (now, names[0] if names else None)
        return self._generation[1]

    def _read_identity(self, tenant: str) -> dict[str, Any] | None:
        from opensearchpy.exceptions import NotFoundError

        try:
            mapping = self._client.indices.get_mapping(index=self.index)
        except NotFoundError:
            return None
        for index in mapping.values():  # one entry: the index, or the index an alias names
            found = ((index.get("mappings") or {}).get("_meta") or {}).get(META_IDENTITY)
            return dict(found) if isinstance(found, dict) else None
        return None

    def _write_identity(self, tenant: str, identity: dict[str, Any]) -> None:
        self._ensure_index()
        self._client.indices.put_mapping(index=self.index, body={"_meta": {META_IDENTITY: identity}})

    def _ensure_index(self) -> None:
        if self._index_ready:
            return
        from opensearchpy.exceptions import RequestError

        with self._index_lock:
            if not self._index_ready and not self._client.indices.exists(index=self.index):
                try:
                    self._client.indices.create(index=self.index, body=index_body(self.dimension, self.engine, self.languages))
                except RequestError as exc:  # another writer created it first
                    if exc.error != "resource_already_exists_exception":
                        raise
            self._index_ready = True

    def _index_lines(self, tenant: str, records: list[ContextRecord]) -> Iterator[str]:
        for rec in records:
            yield json.dumps({"index": {"_id": doc_id(tenant, rec.id)}}) + "\n" + json.dumps(rec.model_dump(mode="json"))

    def _bulk_chunks(self, lines: Iterator[str]) -> Iterator[list[str]]:
        chunk: list[str] = []
        size = 0
        for line in lines:
            if chunk and (len(chunk) >= self.bulk_max_docs or size + len(line) + 1 > self.bulk_max_bytes):
                yield chunk
                chunk, size = [], 0
            chunk.append(line)
            size += len(line.encode()) + 1
        if chunk:
            yield chunk

    def _bulk(self, lines: list[str], refresh: str | bool) -> list[dict[str, Any]]:
        """Send one ``_bulk``; items throttled with 429 are sent again with backoff."""
        results: list[dict[str, Any]] = [{} for _ in lines]
        pending = list(range(len(lines)))

        def send() -> None:
            body = "\n".join(lines[n] for n in pending) + "\n"
            response = self._client.bulk(body=body, index=self.index, refresh=refresh)
            throttled = []
            for n, item in zip(pending, response["items"], strict=True):
                results[n] = item
                if next(iter(item.values())).get("status") == 429:
                    throttled.append(n)
            if throttled:
                pending[:] = throttled
                raise _Throttled()

        try:
            self.retry.call(send, retryable=lambda e: isinstance(e, _Throttled), sleep=self._sleep,
                            what="opensearch_bulk_items")
        except _Throttled:
            pass  # the items still throttled are reported below, with their status
        _raise_item_errors(results)
        return results

    # ----------------------------------------------------------------- queries

    def _sub_searches(self, request: VectorQuery, native: Any) -> list[dict[str, Any]]:
        if request.mode is SearchMode.HYBRID:
            depth = hybrid_depth(request.limit)
            return [self._dense_body(request, native, depth), self._keyword_body(request, native, depth)]
        return [self._search_body(request, native)]

    def _search_body(self, request: VectorQuery, native: Any) -> dict[str, Any]:
        if request.mode is SearchMode.KEYWORD:
            return self._keyword_body(request, native, request.limit)
        return self._dense_body(request, native, request.limit)

    def _dense_body(self, request: VectorQuery, native: Any, k: int) -> dict[str, Any]:
        knn = {"vector": request.vector, "k": k, "filter": _tenant_query(request.tenant, native)}
        return {"size": k, "_source": _source(request), "query": {"knn": {"vector": knn}}}

    def _keyword_body(self, request: VectorQuery, native: Any, size: int) -> dict[str, Any]:
        language = language_of(request.text or "", self.language_policy.for_tenant(request.tenant))
        fields = keyword_fields(language, self.languages)
        match = {"multi_match": {"query": request.text, "fields": fields, "type": "best_fields"}}
        query = {"bool": {"must": [match], "filter": _tenant_query(request.tenant, native)["bool"]["filter"],
                          # a directory's overview lists its children's abstracts: matched by meaning only,
                          # as on the local store (keywords.record_text)
                          "must_not": [{"term": {"level": OVERVIEW_LEVEL}}]}}
        return {"size": size, "_source": _source(request), "query": query}

    def _hits(self, request: VectorQuery, response: dict[str, Any]) -> list[VectorHit]:
        dense = request.mode is SearchMode.DENSE
        return [
            VectorHit(record=_record(hit, request), score=2.0 * hit["_score"] - 1.0 if dense else hit["_score"])
            for hit in response["hits"]["hits"]
            if hit["_source"].get("tenant") == request.tenant
        ]

    def _fuse(self, request: VectorQuery, dense: dict[str, Any], keyword: dict[str, Any]) -> list[VectorHit]:
        by_id: dict[str, dict[str, Any]] = {}
        scored = []
        for response, is_dense in ((dense, True), (keyword, False)):
            hits = [h for h in response["hits"]["hits"] if h["_source"].get("tenant") == request.tenant]
            by_id.update({h["_id"]: h for h in hits})
            # the knn score is (1 + cosine) / 2 (cosinesimil space); fusion takes the cosine
            scored.append([(h["_id"], 2.0 * h["_score"] - 1.0 if is_dense else h["_score"]) for h in hits])
        fused = fuse(scored[0], scored[1], request.limit, depth=hybrid_depth(request.limit),
                     dense_weight=request.dense_weight, keyword_scale=request.keyword_scale)
        bm25 = dict(scored[1])
        return [VectorHit(record=_record(by_id[i], request), score=score, keyword=bm25.get(i)) for i, score in fused]

    def _where(self) -> str:
        hosts = getattr(getattr(self._client, "transport", None), "hosts", None) or ["?"]
        host = hosts[0]
        return f"{host.get('host')}:{host.get('port')}" if isinstance(host, dict) else str(host)


# --------------------------------------------------------------------- helpers


def _tenant_query(tenant: str, native: dict[str, Any] | None) -> dict[str, Any]:
    """The tenant term AND the user filter, in filter context: the filter can only narrow the tenant."""
    clauses: list[dict[str, Any]] = [{"term": {"tenant": tenant}}]
    if native is not None:
        clauses.append(native)
    return {"bool": {"filter": clauses}}


def _source(request: VectorQuery) -> Any:
    return True if request.include_vectors else {"excludes": ["vector"]}


def _record(hit: dict[str, Any], request: VectorQuery) -> ContextRecord:
    source = dict(hit["_source"])
    if not request.include_vectors:
        source.pop("vector", None)
    return ContextRecord.model_validate(source)


