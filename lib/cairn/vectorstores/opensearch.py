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
* Requests that fail with a retryable status (:mod:`cairn.retry`), a timeout or a connection
  error are retried by the one :class:`~cairn.retry.RetryPolicy` (full jitter), wrapped around
  opensearch-py's transport (whose own retries are off); then ``VectorStoreUnavailable``.
  opensearch-py does not keep response headers on its errors, so ``Retry-After`` cannot be read.

opensearch-py is imported lazily, by this module only.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from ..errors import (
    CairnError,
    ConfigError,
    VectorStoreError,
    VectorStoreRequestError,
    VectorStoreUnavailable,
)
from ..models import ContextRecord
from ..retry import RetryPolicy, is_retryable_status
from ..text import AUTO, LANGUAGES, LanguagePolicy, language_of
from .base import (
    Capabilities,
    SearchMode,
    VectorHit,
    VectorQuery,
    VectorStore,
)
from .fusion import fuse, hybrid_depth
from .keywords import OVERVIEW_LEVEL

if TYPE_CHECKING:
    from ..config import OpenSearchSettings

KEYWORD_FIELDS = ("title.text^2", "abstract", "text")
_MAX_ID_BYTES = 512
_KEYWORD = {"type": "keyword"}
# Full text is analysed with the built-in ``english`` analyzer (stop words, Porter stems), as the
# local store's keyword search (:mod:`cairn.vectorstores.keywords`). Each of ``title``,
# ``abstract`` and ``text`` also has a subfield per other language, analysed by that language's
# analyzer (``text.zh``: smartcn, ``text.ja``: kuromoji, ``text.de``: german, ...: the table
# :data:`cairn.text.LANGUAGES`); a query is matched on the subfields of its own language (the
# tenant's fixed language, else the query's detected one), so a Chinese question meets Chinese
# words cut by a Chinese segmenter and an English one the English stems as before. An index
# created before a subfield existed keeps working without it until it is re-created.
_ENGLISH_TEXT = {"type": "text", "analyzer": "english"}
SUBFIELD_LANGUAGES = tuple(code for code in LANGUAGES if code != "en")


def _subfields(languages: tuple[str, ...]) -> dict[str, Any]:
    return {code: {"type": "text", "analyzer": LANGUAGES[code].opensearch} for code in languages}


META_IDENTITY = "cairn_embedder"  # the key of the embedder's identity in the mapping's _meta


def index_body(dimension: int, engine: str, languages: tuple[str, ...] = SUBFIELD_LANGUAGES) -> dict[str, Any]:
    """Settings and mappings of the cairn index (``knn`` on, one ``knn_vector`` field ``vector``;
    a subfield per language of ``languages`` on every text field)."""
    keyword_fields = ("tenant", "id", "uri", "parent_uri", "ancestors", "context_type", "owner", "tags", "content_hash")
    properties: dict[str, Any] = {name: dict(_KEYWORD) for name in keyword_fields}
    per_language = _subfields(languages)
    # filters read the title exactly; its words are ``title.text`` (English) and ``title.<language>``
    properties["title"] = {"type": "keyword", "fields": {"text": dict(_ENGLISH_TEXT), **per_language}}
    for name in ("abstract", "text"):
        properties[name] = {**_ENGLISH_TEXT, "fields": {"keyword": {"type": "keyword", "ignore_above": 256}, **per_language}}
    properties.update({name: {"type": "long"} for name in ("depth", "level", "active_count")})
    properties.update({name: {"type": "double"} for name in ("created_at", "updated_at")})
    properties["metadata"] = {"type": "object", "dynamic": True}
    properties["vector"] = {
        "type": "knn_vector",
        "dimension": dimension,
        "method": {"name": "hnsw", "space_type": "cosinesimil", "engine": engine},
    }
    return {
        "settings": {"index": {"knn": True}},
        "mappings": {
            "date_detection": False,  # a metadata string like "2024-01-01" stays a keyword
            "dynamic_templates": [
                {"metadata_strings": {"path_match": "metadata.*", "match_mapping_type": "string", "mapping": _KEYWORD}}
            ],
            "properties": properties,
        },
    }


def keyword_fields(language: str | None, languages: tuple[str, ...] = SUBFIELD_LANGUAGES) -> list[str]:
    """The fields a keyword query in ``language`` is matched on: that language's subfields when
    the index has them, else the English-analysed fields (English, and any other language)."""
    if language and language in languages:
        return [f"title.{language}^2", f"abstract.{language}", f"text.{language}"]
    return list(KEYWORD_FIELDS)


def doc_id(tenant: str, record_id: str) -> str:
    """The OpenSearch ``_id`` of a record: tenant-prefixed, so two tenants never collide."""
    out = f"{tenant}:{record_id}"
    if len(out.encode()) > _MAX_ID_BYTES:
        out = f"{tenant}:sha256:{hashlib.sha256(record_id.encode()).hexdigest()}"
    return out


def is_retryable_opensearch_error(exc: BaseException) -> bool:
    """Timeouts, connection errors, and HTTP answers whose status is retryable."""
    from opensearchpy import exceptions as osx

    if isinstance(exc, osx.ConnectionTimeout | osx.ConnectionError):
        return True
    return isinstance(exc, osx.TransportError) and is_retryable_status(exc.status_code)


def _policy_transport(policy: RetryPolicy, sleep: Callable[[float], None]) -> type:
    """opensearch-py's Transport with every request run under ``policy`` (its own loop makes one try)."""
    from opensearchpy import Transport

    class PolicyTransport(Transport):
        def perform_request(self, *args: Any, **kwargs: Any) -> Any:
            parent = super().perform_request
            return policy.call(lambda: parent(*args, **kwargs), retryable=is_retryable_opensearch_error,
                               sleep=sleep, what="opensearch")

    return PolicyTransport


class _Throttled(Exception):
    """Some items of a ``_bulk`` were answered 429."""


class OpenSearchVectorStore(VectorStore):
    backend = "opensearch"

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
        from ..filters import opensearch as os_filters

        return Capabilities(
            keyword=True, hybrid=True, batched_queries=True, max_upsert_batch=self.bulk_max_docs,
            filter_operators=os_filters.SUPPORTED_OPERATORS,
        )

    def _translate_filter(self, tree: Any) -> dict[str, Any] | None:
        from ..filters import opensearch as os_filters

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


def _http_auth(auth: str, username: str | None, password: str | None, region: str | None,
               service: str, credentials: Any) -> Any:
    if auth == "none":
        return None
    if auth == "basic":
        if not username or not password:
            raise ConfigError("opensearch basic auth needs CAIRN_OPENSEARCH_USERNAME and CAIRN_OPENSEARCH_PASSWORD")
        return (username, password)
    if auth != "sigv4":
        raise ConfigError(f"opensearch auth {auth!r} is not supported; use 'none', 'basic' or 'sigv4'")
    if not region:
        raise ConfigError("opensearch sigv4 auth needs a region (CAIRN_OPENSEARCH_REGION)")
    if service not in ("es", "aoss"):
        raise ConfigError(f"opensearch sigv4 service {service!r}: use 'es' (OpenSearch Service) or 'aoss' (Serverless)")
    if credentials is None:
        import boto3

        credentials = boto3.Session().get_credentials()
    if credentials is None:
        raise ConfigError("opensearch sigv4 auth found no AWS credentials (environment, profile or role)")
    from opensearchpy import Urllib3AWSV4SignerAuth

    return Urllib3AWSV4SignerAuth(credentials, region, service)


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


def _index_missing(exc: Exception) -> bool:
    return getattr(exc, "status_code", None) == 404 and getattr(exc, "error", None) == "index_not_found_exception"


def _ok(response: dict[str, Any]) -> dict[str, Any]:
    """One ``_msearch`` item: its hits, nothing for a missing index, else the mapped error."""
    if "error" not in response:
        return response
    error = response["error"] if isinstance(response["error"], dict) else {"type": str(response["error"])}
    if response.get("status") == 404 and error.get("type") == "index_not_found_exception":
        return {"hits": {"hits": []}}
    raise _status_error(int(response.get("status", 500)), response, retries=0)


def _reason(info: Any) -> tuple[str, str]:
    """The vendor's error type and reason, preferring the root cause over 'all shards failed'."""
    if not isinstance(info, dict) or not isinstance(info.get("error"), dict):
        return "error", str(info)
    error = info["error"]
    root = (error.get("root_cause") or [{}])[0]
    reason = root.get("reason") or error.get("reason") or ""
    if error.get("reason") and error.get("reason") != reason and error.get("reason") != "all shards failed":
        reason = f"{error['reason']}: {reason}"
    return str(root.get("type") or error.get("type") or "error"), str(reason)


def _status_error(status: int, info: Any, retries: int) -> VectorStoreError:
    kind, reason = _reason(info)
    details = {"status": status, "type": kind, "reason": reason}
    if status == 429 or status >= 500:
        return VectorStoreUnavailable(
            f"opensearch answered {status} ({kind}) after {retries} retries: {reason}", details=details
        )
    return VectorStoreRequestError(f"opensearch rejected the request ({status} {kind}): {reason}", details=details)


def _raise_item_errors(items: list[dict[str, Any]]) -> None:
    failed = [next(iter(item.values())) for item in items]
    failed = [f for f in failed if "error" in f and f.get("status") != 404]
    if not failed:
        return
    lines = [f"{f.get('_id')}: {f['error'].get('type')}: {f['error'].get('reason')}" for f in failed[:5]]
    statuses = {int(f.get("status", 500)) for f in failed}
    message = f"opensearch refused {len(failed)} of {len(items)} bulk item(s):\n" + "\n".join(lines)
    details = [{"id": f.get("_id"), "status": f.get("status"), **f["error"]} for f in failed[:20]]
    if all(s == 429 or s >= 500 for s in statuses):
        raise VectorStoreUnavailable(message, details=details)
    raise VectorStoreRequestError(message, details=details)
