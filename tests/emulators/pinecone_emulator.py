"""A Pinecone data-plane emulator: a real HTTP server speaking the REST API the pinecone SDK sends.

Routes (as sent by the pinecone SDK v10 REST ``Index``): ``POST /vectors/upsert``, ``POST /query``,
``GET /vectors/fetch?ids=..&namespace=..``, ``POST /vectors/fetch_by_metadata``,
``POST /vectors/delete``, ``POST|GET /describe_index_stats``. One dense index, cosine metric.

The filter semantics follow Pinecone's documentation, written independently of cairn's own
filter code (a property test compares the two):
- "Filter by metadata" / "Understanding metadata" (docs.pinecone.io/guides/search/filter-by-metadata,
  docs.pinecone.io/guides/data/understanding-metadata): operators $eq $ne (number, string, boolean),
  $gt $gte $lt $lte (number), $in $nin (string, number), $exists (boolean), $and $or; metadata values
  are strings, numbers (stored as 64-bit floats), booleans or lists of strings; null is not supported;
  40 KB of metadata per vector. A list-of-strings field matches $eq/$in when any element matches.
- $ne and $nin match only records that HAVE the field (Pinecone's behaviour since 2024, reported in
  deepset-ai/haystack-core-integrations#590: "$ne now returns only documents where the field is set").
- Limits: 1000 vectors per upsert (400) and 2 MB per request (413, per the SDK's ``upsert`` docs),
  top_k 1..10000 (``QUERY_TOP_K_MAX``), 1000 ids per delete, fetch_by_metadata limit 1..10000,
  a non-empty filter on describe_index_stats is rejected (SDK docs), unknown routes are 404.
Error bodies have Pinecone's shape: ``{"code": <grpc code>, "message": ..., "details": []}``.
"""

from __future__ import annotations

import base64
import json
import math
import threading
import time
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from .http_base import EmulatorHandler, serve, shut

if TYPE_CHECKING:
    from cairn.ports.vectorstores.pinecone import PineconeVectorStore

MAX_UPSERT_VECTORS = 1000
MAX_REQUEST_BYTES = 2 * 1024 * 1024
MAX_METADATA_BYTES = 40 * 1024
MAX_TOP_K = 10_000
MAX_DELETE_IDS = 1000
MAX_FETCH_BY_METADATA_LIMIT = 10_000
_GRPC_CODES = {400: 3, 401: 16, 404: 5, 413: 3, 429: 8, 500: 13, 503: 14}
_SCALAR_OPS = {"$eq", "$ne"}
_RANGE_OPS = {"$gt", "$gte", "$lt", "$lte"}
_LIST_OPS = {"$in", "$nin"}


class PineconeHTTPError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _bad(message: str) -> PineconeHTTPError:
    return PineconeHTTPError(400, message)


# --------------------------------------------------------------------------- filters


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _same(a: Any, b: Any) -> bool:
    """Equality without Python's True == 1: a bool equals only a bool, a number only a number."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if _is_number(a) and _is_number(b):
        return float(a) == float(b)
    return isinstance(a, str) and isinstance(b, str) and a == b


def validate_filter(flt: Any, path: str = "filter") -> None:
    """Raise a 400 for a filter real Pinecone would reject."""
    if not isinstance(flt, dict):
        raise _bad(f"{path}: a filter must be a JSON object, got {type(flt).__name__}")
    for key, cond in flt.items():
        if key in ("$and", "$or"):
            if not isinstance(cond, list) or not cond:
                raise _bad(f"{path}.{key}: expected a non-empty array of filters")
            for i, sub in enumerate(cond):
                validate_filter(sub, f"{path}.{key}[{i}]")
        elif key.startswith("$"):
            raise _bad(f"{path}: unknown logical operator {key!r}; supported: $and, $or")
        elif isinstance(cond, dict):
            if not cond:
                raise _bad(f"{path}.{key}: empty operator object")
            for op, operand in cond.items():
                _validate_operand(f"{path}.{key}.{op}", op, operand)
        else:
            _validate_operand(f"{path}.{key}", "$eq", cond)


def _validate_operand(path: str, op: str, v: Any) -> None:
    if op in _SCALAR_OPS:
        ok = isinstance(v, str | bool) or _is_number(v)
        allowed = "a string, number or boolean"
    elif op in _RANGE_OPS:
        ok, allowed = _is_number(v), "a number"
    elif op in _LIST_OPS:
        ok = isinstance(v, list) and bool(v) and all(isinstance(x, str) or _is_number(x) for x in v)
        allowed = "a non-empty array of strings or numbers"
    elif op == "$exists":
        ok, allowed = isinstance(v, bool), "a boolean"
    else:
        raise _bad(f"{path}: unsupported operator {op!r}")
    if not ok:
        raise _bad(f"{path}: operand {v!r} is invalid; expected {allowed}")


def matches(metadata: dict[str, Any], flt: dict[str, Any]) -> bool:
    """True when ``metadata`` satisfies the (validated) ``flt``; all keys of an object must hold."""
    for key, cond in flt.items():
        if key == "$and":
            ok = all(matches(metadata, sub) for sub in cond)
        elif key == "$or":
            ok = any(matches(metadata, sub) for sub in cond)
        elif isinstance(cond, dict):
            ok = all(_field_matches(metadata, key, op, v) for op, v in cond.items())
        else:
            ok = _field_matches(metadata, key, "$eq", cond)
        if not ok:
            return False
    return True


def _field_matches(metadata: dict[str, Any], key: str, op: str, operand: Any) -> bool:
    if op == "$exists":
        return (key in metadata) is operand
    if key not in metadata:
        return False  # every other operator, $ne and $nin included, needs the field
    value = metadata[key]
    values = value if isinstance(value, list) else [value]
    if op == "$eq":
        return any(_same(x, operand) for x in values)
    if op == "$ne":
        return not any(_same(x, operand) for x in values)
    if op == "$in":
        return any(_same(x, o) for x in values for o in operand)
    if op == "$nin":
        return not any(_same(x, o) for x in values for o in operand)
    numbers = [float(x) for x in values if _is_number(x)]
    compare = {
        "$gt": lambda x: x > operand,
        "$gte": lambda x: x >= operand,
        "$lt": lambda x: x < operand,
        "$lte": lambda x: x <= operand,
    }[op]
    return any(compare(x) for x in numbers)


# --------------------------------------------------------------------------- state


@dataclass
class StoredVector:
    values: list[float]
    metadata: dict[str, Any] | None


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    query: dict[str, list[str]]
    body: Any
    status: int


@dataclass
class _Fault:
    status: int
    message: str
    retry_after: float | None


def _validate_metadata(vid: str, md: Any) -> dict[str, Any] | None:
    if md is None:
        return None
    if not isinstance(md, dict):
        raise _bad(f"Vector {vid}: metadata must be a JSON object")
    out: dict[str, Any] = {}
    for k, v in md.items():
        if v is None:
            raise _bad(f"Vector {vid}: metadata value for key {k!r} is null; null metadata values are not supported")
        if isinstance(v, list):
            if not all(isinstance(x, str) for x in v):
                raise _bad(f"Vector {vid}: metadata list {k!r} must contain only strings")
            out[k] = list(v)
        elif isinstance(v, str | bool):
            out[k] = v
        elif _is_number(v):
            out[k] = float(v)  # numbers are stored as 64-bit floats
        else:
            raise _bad(f"Vector {vid}: metadata value for key {k!r} has unsupported type {type(v).__name__}")
    size = len(json.dumps(out, separators=(",", ":"), ensure_ascii=False).encode())
    if size > MAX_METADATA_BYTES:
        raise _bad(
            f"Metadata size is {size} bytes, which exceeds the limit of {MAX_METADATA_BYTES} bytes per vector"
        )
    return out


def _cosine(a: list[float], b: list[float]) -> float:
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(x * x for x in b))
    if na == 0 or nb == 0:
        return 0.0
    return sum(x * y for x, y in zip(a, b, strict=True)) / (na * nb)


class PineconeEmulator:
    """In-memory index state plus the HTTP server in a thread. Use :func:`start_pinecone_emulator`."""

    def __init__(self, dimension: int, api_key: str | None = None) -> None:
        self.dimension = dimension
        self.api_key = api_key
        self.namespaces: dict[str, dict[str, StoredVector]] = {}
        self.requests: list[RecordedRequest] = []
        self._faults: list[_Fault] = []
        self._delays: list[float] = []
        self._lock = threading.RLock()
        self._server: ThreadingHTTPServer | None = None

    # ------------------------------------------------------------ lifecycle and test hooks

    @property
    def host(self) -> str:
        assert self._server is not None, "emulator not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> PineconeEmulator:
        self._server = serve(_make_handler(self), "pinecone-emulator")
        return self

    def stop(self) -> None:
        shut(self._server)
        self._server = None

    def fail_next(self, status: int = 429, times: int = 1, message: str | None = None,
                  retry_after: float | None = None) -> None:
        """Answer the next ``times`` requests with ``status`` (and a Pinecone-shaped error body)."""
        with self._lock:
            msg = message or f"Injected failure with status {status}"
            self._faults.extend(_Fault(status, msg, retry_after) for _ in range(times))

    def delay_next(self, seconds: float, times: int = 1) -> None:
        """Sleep ``seconds`` before answering each of the next ``times`` requests."""
        with self._lock:
            self._delays.extend([seconds] * times)

    def count(self, path: str, method: str | None = None) -> int:
        with self._lock:
            return sum(1 for r in self.requests if r.path == path and (method is None or r.method == method))

    def reset(self) -> None:
        with self._lock:
            self.namespaces.clear()
            self.requests.clear()
            self._faults.clear()
            self._delays.clear()

    def take_fault(self) -> tuple[float, _Fault | None]:
        with self._lock:
            delay = self._delays.pop(0) if self._delays else 0.0
            return delay, (self._faults.pop(0) if self._faults else None)

    def record(self, method: str, path: str, query: dict[str, list[str]], body: Any, status: int) -> None:
        with self._lock:
            self.requests.append(RecordedRequest(method, path, query, body, status))

    # ------------------------------------------------------------ routes

    def route(self, method: str, path: str, query: dict[str, list[str]], body: Any) -> dict[str, Any]:
        routes = {
            ("POST", "/vectors/upsert"): self.upsert,
            ("POST", "/query"): self.query,
            ("GET", "/vectors/fetch"): lambda _b: self.fetch(query),
            ("POST", "/vectors/fetch_by_metadata"): self.fetch_by_metadata,
            ("POST", "/vectors/delete"): self.delete,
            ("POST", "/describe_index_stats"): self.describe_index_stats,
            ("GET", "/describe_index_stats"): self.describe_index_stats,
        }
        handler = routes.get((method, path))
        if handler is None:
            raise PineconeHTTPError(404, f"Not Found: {method} {path}")
        if method == "POST" and not isinstance(body, dict):
            raise _bad("request body must be a JSON object")
        with self._lock:
            return handler(body if isinstance(body, dict) else {})

    def _ns(self, body: dict[str, Any]) -> dict[str, StoredVector]:
        return self.namespaces.setdefault(body.get("namespace") or "", {})

    def _check_vector(self, values: Any, what: str) -> list[float]:
        if not isinstance(values, list) or not all(_is_number(x) for x in values):
            raise _bad(f"{what}: values must be an array of numbers")
        if len(values) != self.dimension:
            raise _bad(f"Vector dimension {len(values)} does not match the dimension of the index {self.dimension}")
        return [float(x) for x in values]

    def upsert(self, body: dict[str, Any]) -> dict[str, Any]:
        vectors = body.get("vectors")
        if not isinstance(vectors, list) or not vectors:
            raise _bad("upsert needs a non-empty 'vectors' array")
        if len(vectors) > MAX_UPSERT_VECTORS:
            raise _bad(f"Batch size {len(vectors)} exceeds the maximum of {MAX_UPSERT_VECTORS} vectors per upsert")
        parsed: dict[str, StoredVector] = {}
        for v in vectors:
            vid = v.get("id") if isinstance(v, dict) else None
            if not isinstance(vid, str) or not vid:
                raise _bad("every vector needs a non-empty string id")
            values = self._check_vector(v.get("values"), f"Vector {vid}")
            if not any(values):
                raise _bad(f"Vector {vid}: dense vectors must contain at least one non-zero value")
            parsed[vid] = StoredVector(values, _validate_metadata(vid, v.get("metadata")))
        self._ns(body).update(parsed)
        return {"upsertedCount": len(parsed)}

    def query(self, body: dict[str, Any]) -> dict[str, Any]:
        top_k = body.get("topK")
        if not isinstance(top_k, int) or isinstance(top_k, bool) or not 1 <= top_k <= MAX_TOP_K:
            raise _bad(f"topK must be an integer between 1 and {MAX_TOP_K}, got {top_k!r}")
        ns = self.namespaces.get(body.get("namespace") or "", {})
        if "id" in body:
            if body["id"] not in ns:
                return {"matches": [], "namespace": body.get("namespace") or "", "usage": {"readUnits": 1}}
            vector = ns[body["id"]].values
        else:
            vector = self._check_vector(body.get("vector"), "query vector")
        flt = body.get("filter")
        if flt is not None:
            validate_filter(flt)
        scored = [
            (_cosine(vector, sv.values), vid, sv)
            for vid, sv in ns.items()
            if flt is None or matches(sv.metadata or {}, flt)
        ]
        scored.sort(key=lambda t: (-t[0], t[1]))
        out = [self._match(vid, sv, score, body) for score, vid, sv in scored[:top_k]]
        return {"matches": out, "namespace": body.get("namespace") or "", "usage": {"readUnits": 1}}

    @staticmethod
    def _match(vid: str, sv: StoredVector, score: float, body: dict[str, Any]) -> dict[str, Any]:
        m: dict[str, Any] = {"id": vid, "score": score, "values": sv.values if body.get("includeValues") else []}
        if body.get("includeMetadata") and sv.metadata is not None:
            m["metadata"] = sv.metadata
        return m

    @staticmethod
    def _vector_json(vid: str, sv: StoredVector) -> dict[str, Any]:
        out: dict[str, Any] = {"id": vid, "values": sv.values}
        if sv.metadata is not None:
            out["metadata"] = sv.metadata
        return out

    def fetch(self, query: dict[str, list[str]]) -> dict[str, Any]:
        ids = query.get("ids", [])
        if not ids:
            raise _bad("fetch needs at least one id")
        namespace = (query.get("namespace") or [""])[0]
        ns = self.namespaces.get(namespace, {})
        vectors = {vid: self._vector_json(vid, ns[vid]) for vid in ids if vid in ns}
        return {"vectors": vectors, "namespace": namespace, "usage": {"readUnits": 1}}

    def fetch_by_metadata(self, body: dict[str, Any]) -> dict[str, Any]:
        flt = body.get("filter")
        if not flt:
            raise _bad("Empty filter provided for fetch by metadata request")
        validate_filter(flt)
        limit = body.get("limit", 100)
        if not isinstance(limit, int) or not 1 <= limit <= MAX_FETCH_BY_METADATA_LIMIT:
            raise _bad(f"limit must be between 1 and {MAX_FETCH_BY_METADATA_LIMIT}")
        token = body.get("paginationToken")
        start = int(base64.b64decode(token).decode()) if token else 0
        ns = self.namespaces.get(body.get("namespace") or "", {})
        hits = sorted(vid for vid, sv in ns.items() if matches(sv.metadata or {}, flt))
        page = hits[start:start + limit]
        out: dict[str, Any] = {
            "vectors": {vid: self._vector_json(vid, ns[vid]) for vid in page},
            "namespace": body.get("namespace") or "",
            "usage": {"readUnits": 1},
        }
        if start + limit < len(hits):
            out["pagination"] = {"next": base64.b64encode(str(start + limit).encode()).decode()}
        return out

    def delete(self, body: dict[str, Any]) -> dict[str, Any]:
        ns = self._ns(body)
        if "filter" in body:  # the server applies a filter alone, even next to ids (SDK docs)
            if not body["filter"]:
                raise _bad("Delete with empty metadata filter is not allowed")
            validate_filter(body["filter"])
            doomed = [vid for vid, sv in ns.items() if matches(sv.metadata or {}, body["filter"])]
        elif body.get("deleteAll"):
            doomed = list(ns)
        elif isinstance(body.get("ids"), list) and body["ids"]:
            if len(body["ids"]) > MAX_DELETE_IDS:
                raise _bad(f"delete takes at most {MAX_DELETE_IDS} ids per request")
            doomed = body["ids"]
        else:
            raise _bad("delete needs one of 'ids', 'deleteAll' or 'filter'")
        for vid in doomed:
            ns.pop(vid, None)
        return {}

    def describe_index_stats(self, body: dict[str, Any]) -> dict[str, Any]:
        if body.get("filter"):
            raise _bad("describe_index_stats does not support a metadata filter on this index")
        namespaces = {(name or "__default__"): {"vectorCount": len(ns)} for name, ns in self.namespaces.items() if ns}
        return {
            "namespaces": namespaces,
            "dimension": self.dimension,
            "indexFullness": 0.0,
            "totalVectorCount": sum(n["vectorCount"] for n in namespaces.values()),
            "metric": "cosine",
            "vectorType": "dense",
        }


# --------------------------------------------------------------------------- HTTP


def _make_handler(emulator: PineconeEmulator) -> type[EmulatorHandler]:
    class Handler(EmulatorHandler):
        def _handle(self, method: str) -> None:
            url = urlsplit(self.path)
            query = parse_qs(url.query)
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            status, payload, headers = self._answer(method, url.path, query, raw)
            emulator.record(method, url.path, query, self._parsed(raw), status)
            try:
                self._send(status, payload, headers)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout test)

        @staticmethod
        def _parsed(raw: bytes) -> Any:
            try:
                return json.loads(raw) if raw else None
            except ValueError:
                return None

        def _answer(self, method: str, path: str, query: dict[str, list[str]],
                    raw: bytes) -> tuple[int, dict[str, Any], dict[str, str]]:
            delay, fault = emulator.take_fault()
            if delay:
                time.sleep(delay)
            if fault is not None:
                extra = {"Retry-After": str(fault.retry_after)} if fault.retry_after is not None else {}
                return fault.status, _error(fault.status, fault.message), extra
            if emulator.api_key is not None and self.headers.get("Api-Key") != emulator.api_key:
                return 401, _error(401, "Invalid API Key"), {}
            if len(raw) > MAX_REQUEST_BYTES:
                msg = f"Request size {len(raw)} bytes exceeds the maximum supported size of {MAX_REQUEST_BYTES} bytes"
                return 413, _error(413, msg), {}
            try:
                return 200, emulator.route(method, path, query, self._body(raw)), {}
            except PineconeHTTPError as exc:
                return exc.status, _error(exc.status, exc.message), {}

        @staticmethod
        def _body(raw: bytes) -> Any:
            if not raw:
                return None
            try:
                return json.loads(raw)
            except ValueError as exc:
                raise _bad(f"request body is not valid JSON: {exc}") from None

        def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

    return Handler


def _error(status: int, message: str) -> dict[str, Any]:
    return {"code": _GRPC_CODES.get(status, 2), "message": message, "details": []}


def start_pinecone_emulator(dimension: int, api_key: str | None = None) -> PineconeEmulator:
    """Start an emulator on 127.0.0.1 and a free port; ``.host`` is its URL, ``.stop()`` ends it."""
    return PineconeEmulator(dimension, api_key=api_key).start()


def make_pinecone_store(emulator: PineconeEmulator, dimension: int) -> PineconeVectorStore:
    """A cairn Pinecone store wired to ``emulator`` through the real SDK, with fast retries."""
    from cairn.ports.vectorstores.pinecone import PineconeVectorStore

    return PineconeVectorStore(
        dimension=dimension,
        index_host=emulator.host,
        api_key=emulator.api_key or "emulator-key",
        timeout_s=2.0,
        max_retries=3,
        backoff_s=0.001,
    )
