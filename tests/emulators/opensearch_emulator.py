"""A small OpenSearch emulator: a real HTTP server on 127.0.0.1 that opensearch-py talks to.

It keeps indices in memory and evaluates the query DSL the way OpenSearch documents it,
written independently of cairn's filter code so that a property test can compare the two:

* ``term``/``terms``/``range`` compare against the *indexed* values of a field as its mapping
  says (keyword: strings, numbers: numbers, boolean), and a multi-valued field matches when
  any value does; an unmapped field matches nothing; ``terms: []`` matches nothing;
* ``range`` never matches a document that lacks the field; ``must_not`` does;
* ``exists`` ignores ``null``, ``[]`` and ``[null]``; on an object path, any sub-field counts;
* ``bool``: ``should`` needs one match when there is no ``must``/``filter`` (else none),
  ``minimum_should_match`` as an integer or percentage; filter clauses do not score;
* ``knn`` with ``filter`` inside the clause filters *during* the search (k results come from
  the filtered set); a ``bool.filter`` outside the clause post-filters the k neighbours;
  cosinesimil scores are ``(2 - d) / 2`` with ``d = 1 - cos`` on every engine;
* ``match``/``multi_match`` score with Lucene's BM25 (k1=1.2, b=0.75) over the standard analyzer;
* dynamic mapping with ``dynamic_templates`` (``match_mapping_type``, ``match``, ``path_match``),
  ``date_detection`` (on by default, as in OpenSearch), strings default to text + ``.keyword``;
* searches see the last *refreshed* state; ``refresh=true|wait_for`` or ``_refresh`` publish
  writes, while ``_mget``/``GET _doc`` are real-time.

The index model lives in :mod:`opensearch_index`, the query engine in :mod:`opensearch_query`;
this module is the HTTP side.
Fault injection: :meth:`OpenSearchEmulator.fail_next` and :meth:`OpenSearchEmulator.delay_next`.
"""

from __future__ import annotations

import gzip
import json
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from typing import Any, Self
from urllib.parse import parse_qs, unquote, urlsplit

from . import opensearch_aliases as aliases
from .http_base import EmulatorHandler, serve, shut
from .opensearch_index import ApiError, Index, valid_index_name
from .opensearch_query import search

_TYPES_BY_STATUS = {
    429: ("rejected_execution_exception", "rejected execution of coordinating operation"),
    500: ("exception", "internal server error (injected)"),
    502: ("exception", "bad gateway (injected)"),
    503: ("cluster_block_exception", "blocked by: [SERVICE_UNAVAILABLE/2/no master];"),
    504: ("exception", "gateway timeout (injected)"),
}


@dataclass
class RecordedRequest:
    method: str
    path: str
    route: str
    params: dict[str, str]
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None

    def ndjson(self) -> list[Any]:
        return [json.loads(line) for line in self.body.decode().splitlines() if line.strip()]


@dataclass
class _Fault:
    status: int
    times: int
    route: str | None
    error_type: str | None = None
    reason: str | None = None


@dataclass
class _State:
    indices: dict[str, Index] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)  # alias -> the index it names
    lock: threading.RLock = field(default_factory=threading.RLock)


class OpenSearchEmulator:
    """The emulator's state, fault injection and request log; :attr:`url` is its address."""

    version = "2.19.0"

    def __init__(self) -> None:
        self.state = _State()
        self.requests: Counter[str] = Counter()
        self.log: list[RecordedRequest] = []
        self._faults: list[_Fault] = []
        self._delays: list[tuple[float, int, str | None]] = []
        self._server: ThreadingHTTPServer | None = None
        self.url = ""

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> OpenSearchEmulator:
        emulator = self

        class Handler(_Handler):
            owner = emulator

        self._server = serve(Handler, "opensearch-emulator")
        host, port = self._server.server_address[:2]
        self.url = f"http://{host}:{port}"
        return self

    def stop(self) -> None:
        shut(self._server)
        self._server = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ test helpers
    def fail_next(
        self,
        status: int = 503,
        times: int = 1,
        *,
        route: str | None = None,
        error_type: str | None = None,
        reason: str | None = None,
    ) -> None:
        """Answer the next ``times`` requests (of ``route``, if given) with an OpenSearch error."""
        self._faults.append(_Fault(status, times, route, error_type, reason))

    def delay_next(self, seconds: float, times: int = 1, *, route: str | None = None) -> None:
        self._delays.append((seconds, times, route))

    def reset_log(self) -> None:
        self.requests.clear()
        self.log.clear()

    def bodies(self, route: str) -> list[RecordedRequest]:
        return [r for r in self.log if r.route == route]

    def index(self, name: str) -> Index:
        return self.state.indices[name]

    def _take_fault(self, route: str) -> _Fault | None:
        for fault in self._faults:
            if fault.times > 0 and fault.route in (None, route):
                fault.times -= 1
                return fault
        return None

    def _take_delay(self, route: str) -> float:
        for n, (seconds, times, r) in enumerate(self._delays):
            if times > 0 and r in (None, route):
                self._delays[n] = (seconds, times - 1, r)
                return seconds
        return 0.0


# ---------------------------------------------------------------------- routing

_ROUTES: list[tuple[str, re.Pattern[str], str]] = [
    (m, re.compile(p), name)
    for m, p, name in [
        ("GET|HEAD", r"^/$", "info"),
        *aliases.ROUTES,
        ("POST|PUT", r"^/(?:(?P<index>[^/_][^/]*)/)?_bulk$", "bulk"),
        ("POST|GET", r"^/(?:(?P<index>[^/_][^/]*)/)?_msearch$", "msearch"),
        ("POST|GET", r"^/(?:(?P<index>[^/_][^/]*)/)?_refresh$", "refresh"),
        ("POST|GET", r"^/(?:(?P<index>[^/_][^/]*)/)?_mget$", "mget"),
        ("POST|GET", r"^/(?P<index>[^/_][^/]*)/_search$", "search"),
        ("POST|GET", r"^/(?P<index>[^/_][^/]*)/_count$", "count"),
        ("POST", r"^/(?P<index>[^/_][^/]*)/_delete_by_query$", "delete_by_query"),
        ("GET", r"^/(?P<index>[^/_][^/]*)/_mapping$", "get_mapping"),
        ("PUT|POST", r"^/(?P<index>[^/_][^/]*)/_mapping$", "put_mapping"),
        ("GET", r"^/(?P<index>[^/_][^/]*)/_doc/(?P<id>[^/]+)$", "get_doc"),
        ("PUT|POST", r"^/(?P<index>[^/_][^/]*)/_doc/(?P<id>[^/]+)$", "index_doc"),
        ("DELETE", r"^/(?P<index>[^/_][^/]*)/_doc/(?P<id>[^/]+)$", "delete_doc"),
        ("PUT", r"^/(?P<index>[^/]+)$", "create_index"),
        ("HEAD", r"^/(?P<index>[^/_][^/]*)$", "head_index"),
        ("GET", r"^/(?P<index>[^/_][^/]*)$", "get_index"),
        ("DELETE", r"^/(?P<index>[^/_][^/]*)$", "delete_index"),
    ]
]


def _route(method: str, path: str) -> tuple[str, dict[str, str]]:
    for methods, pattern, name in _ROUTES:
        m = pattern.match(path)
        if m and method in methods.split("|"):
            return name, {k: unquote(v) for k, v in m.groupdict().items() if v is not None}
    raise ApiError(400, "illegal_argument_exception", f"no handler found for uri [{path}] and method [{method}]")


def _error_body(err: ApiError) -> dict[str, Any]:
    cause = {"type": err.root_type or err.type, "reason": err.root_reason or err.reason, **err.extra}
    return {"error": {"root_cause": [cause], "type": err.type, "reason": err.reason, **err.extra}, "status": err.status}


class _Handler(EmulatorHandler):
    owner: OpenSearchEmulator

    def _read_body(self) -> bytes:
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        if raw and (self.headers.get("Content-Encoding") or "").lower() == "gzip":
            raw = gzip.decompress(raw)
        return raw

    def _handle(self, method: str) -> None:
        split = urlsplit(self.path)
        params = {k: v[-1] for k, v in parse_qs(split.query, keep_blank_values=True).items()}
        body = self._read_body()
        try:
            route, args = _route(method, split.path)
        except ApiError as err:
            route, args = "unknown", {}
            self._record(method, split.path, route, params, body)
            return self._send(err.status, _error_body(err), method)
        self._record(method, split.path, route, params, body)
        delay = self.owner._take_delay(route)
        if delay:
            time.sleep(delay)
        fault = self.owner._take_fault(route)
        if fault is not None:
            etype, reason = _TYPES_BY_STATUS.get(fault.status, ("exception", "injected failure"))
            err = ApiError(fault.status, fault.error_type or etype, fault.reason or reason)
            return self._send(fault.status, _error_body(err), method)
        try:
            with self.owner.state.lock:
                status, payload = _dispatch(self.owner, route, args, params, body)
        except ApiError as err:
            status, payload = err.status, _error_body(err)
        self._send(status, payload, method)

    def _record(self, method: str, path: str, route: str, params: dict[str, str], body: bytes) -> None:
        self.owner.requests[route] += 1
        headers = {k.lower(): v for k, v in self.headers.items()}
        self.owner.log.append(RecordedRequest(method, path, route, params, headers, body))

    def _send(self, status: int, payload: Any, method: str) -> None:
        data = b"" if payload is None else json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=UTF-8")
            self.send_header("Content-Length", str(0 if method == "HEAD" else len(data)))
            self.end_headers()
            if method != "HEAD":
                self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout test)
            pass


# ---------------------------------------------------------------------- handlers

Handled = tuple[int, Any]


def _json(body: bytes) -> dict[str, Any]:
    if not body.strip():
        return {}
    try:
        out = json.loads(body)
    except ValueError as exc:
        raise ApiError(400, "parsing_exception", f"failed to parse request body: {exc}") from None
    if not isinstance(out, dict):
        raise ApiError(400, "parsing_exception", "request body must be a JSON object")
    return out


def _ndjson(body: bytes) -> list[dict[str, Any]]:
    lines = [line for line in body.decode().split("\n") if line.strip()]
    try:
        return [json.loads(line) for line in lines]
    except ValueError as exc:
        raise ApiError(400, "illegal_argument_exception", f"malformed action/metadata line: {exc}") from None


def _index_missing(name: str) -> ApiError:
    return ApiError(
        404,
        "index_not_found_exception",
        f"no such index [{name}]",
        extra={"index": name, "resource.type": "index_or_alias", "resource.id": name, "index_uuid": "_na_"},
    )


def _get_index(emu: OpenSearchEmulator, name: str) -> Index:
    idx = emu.state.indices.get(aliases.concrete(emu, name))
    if idx is None:
        raise _index_missing(name)
    return idx


def _refresh_param(idx: Index, params: dict[str, str]) -> None:
    if params.get("refresh") in ("", "true", "wait_for"):
        idx.refresh()


def _dispatch(emu: OpenSearchEmulator, route: str, args: dict[str, str], params: dict[str, str], body: bytes) -> Handled:
    handler = _HANDLERS[route]
    return handler(emu, aliases.resolve(emu, route, args), params, body)


def _info(emu: OpenSearchEmulator, args: dict[str, str], params: dict[str, str], body: bytes) -> Handled:
    return 200, {
        "name": "emulator-node",
        "cluster_name": "cairn-emulator",
        "cluster_uuid": "cairn-emulator-uuid",
        "version": {
            "distribution": "opensearch",
            "number": emu.version,
            "build_type": "tar",
            "lucene_version": "9.12.1",
            "minimum_wire_compatibility_version": "7.10.0",
            "minimum_index_compatibility_version": "7.0.0",
        },
        "tagline": "The OpenSearch Project: https://opensearch.org/",
    }


def _create_index(emu: OpenSearchEmulator, args: dict[str, str], params: dict[str, str], body: bytes) -> Handled:
    name = args["index"]
    valid_index_name(name)
    if name in emu.state.aliases:
        raise ApiError(400, "invalid_index_name_exception", f"Invalid index name [{name}], already exists as alias",
                       extra={"index": name})
    if name in emu.state.indices:
        uuid = emu.state.indices[name].uuid
        raise ApiError(
            400,
            "resource_already_exists_exception",
            f"index [{name}/{uuid}] already exists",
            extra={"index": name, "index_uuid": uuid},
        )
    spec = _json(body)
    emu.state.indices[name] = Index.create(name, spec.get("settings") or {}, spec.get("mappings") or {})
    return 200, {"acknowledged": True, "shards_acknowledged": True, "index": name}


def _head_index(emu: OpenSearchEmulator, args: dict[str, str], params: dict[str, str], body: bytes) -> Handled:
    return (200 if args["index"] in emu.state.indices else 404), None


def _get_index_route(emu: OpenSearchEmulator, args: dict[str, str], params: dict[str, str], body: bytes) -> Handled:
    idx = _get_index(emu, args["index"])
    return 200, {idx.name: {"aliases": {}, "mappings": idx.mappings, "settings": {"index": idx.settings_view()}}}


def _get_mapping(emu: OpenSearchEmulator, args: dict[str, str], params: dict[str, str], body: bytes) -> Handled:
    idx = _get_index(emu, args["index"])
    return 200, {idx.name: {"mappings": idx.mappings}}


def _put_mapping(emu: OpenSearchEmulator, args: dict[str, str], params: dict[str, str], body: bytes) -> Handled:
    """``_meta`` is replaced whole; new ``properties`` are added (an existing field's type cannot change)."""
    idx = _get_index(emu, args["index"])
    spec = json.loads(body or b"{}")
    unknown = sorted(set(spec) - {"_meta", "properties", "dynamic_templates", "date_detection"})
    if unknown:
        raise ApiError(400, "mapper_parsing_exception", f"Root mapping definition has unsupported parameters: {unknown}")
    if "_meta" in spec:
        idx.mappings["_meta"] = spec["_meta"]
    for name, mapping in (spec.get("properties") or {}).items():
        idx.mappings.setdefault("properties", {}).setdefault(name, mapping)
    return 200, {"acknowledged": True}


def _delete_index(emu: OpenSearchEmulator, args: dict[str, str], params: dict[str, str], body: bytes) -> Handled:
    _get_index(emu, args["index"])
    del emu.state.indices[args["index"]]
    return 200, {"acknowledged": True}


def _auto_index(emu: OpenSearchEmulator, name: str) -> Index:
    """Writes to a missing index create it with dynamic mappings (``action.auto_create_index``)."""
    if name not in emu.state.indices:
        valid_index_name(name)
        emu.state.indices[name] = Index.create(name, {}, {})
    return emu.state.indices[name]


def _bulk(emu: OpenSearchEmulator, args: dict[str, str], params: dict[str, str], body: bytes) -> Handled:
    lines = _ndjson(body)
    items: list[dict[str, Any]] = []
    touched: set[str] = set()
    n = 0
    while n < len(lines):
        action = lines[n]
        if len(action) != 1 or next(iter(action)) not in ("index", "create", "delete"):
            raise ApiError(400, "illegal_argument_exception", f"Malformed action/metadata line [{n + 1}]")
        op, meta = next(iter(action.items()))
        name = aliases.concrete(emu, meta.get("_index") or args.get("index") or "")
        if not name:
            raise ApiError(400, "action_request_validation_exception", "Validation Failed: 1: index is missing;")
        if op == "delete":  # a delete never auto-creates its index
            items.append({op: _bulk_delete(emu, name, meta.get("_id"))})
            if name in emu.state.indices:
                touched.add(name)
            n += 1
            continue
        idx = _auto_index(emu, name)
        touched.add(name)
        if n + 1 >= len(lines):
            raise ApiError(400, "illegal_argument_exception", "The bulk request must be terminated by a newline")
        items.append({op: idx.index_doc(meta.get("_id"), lines[n + 1], create=op == "create")})
        n += 2
    for name in touched:
        _refresh_param(emu.state.indices[name], params)
    errors = any("error" in next(iter(item.values())) for item in items)
    return 200, {"took": 1, "errors": errors, "items": items}


def _bulk_delete(emu: OpenSearchEmulator, name: str, doc_id: Any) -> dict[str, Any]:
    if name not in emu.state.indices:
        err = _index_missing(name)
        return {"_index": name, "_id": doc_id, "status": 404, "error": {"type": err.type, "reason": err.reason}}
    return emu.state.indices[name].delete_doc(doc_id)


def _index_doc(emu: OpenSearchEmulator, args: dict[str, str], params: dict[str, str], body: bytes) -> Handled:
    idx = _auto_index(emu, args["index"])
    result = idx.index_doc(args["id"], _json(body), create=False)
    if "error" in result:
        raise ApiError(result["status"], result["error"]["type"], result["error"]["reason"])
    _refresh_param(idx, params)
    return result["status"], result


def _delete_doc(emu: OpenSearchEmulator, args: dict[str, str], params: dict[str, str], body: bytes) -> Handled:
    idx = _get_index(emu, args["index"])
    result = idx.delete_doc(args["id"])
    _refresh_param(idx, params)
    return result["status"], result


def _get_doc(emu: OpenSearchEmulator, args: dict[str, str], params: dict[str, str], body: bytes) -> Handled:
    idx = _get_index(emu, args["index"])
    doc = idx.get_doc(args["id"], _source_param(params))
    return (200 if doc["found"] else 404), doc


def _source_param(params: dict[str, str]) -> Any:
    if params.get("_source") in ("false", "true"):
        return params["_source"] == "true"
    inc = [s for s in params.get("_source_includes", params.get("_source", "")).split(",") if s]
    exc = [s for s in params.get("_source_excludes", "").split(",") if s]
    return {"includes": inc, "excludes": exc} if inc or exc else True


def _mget(emu: OpenSearchEmulator, args: dict[str, str], params: dict[str, str], body: bytes) -> Handled:
    spec = _json(body)
    source = _source_param(params)
    if "index" in args:
        _get_index(emu, args["index"])  # a missing index in the URL is a 404 for the whole request
    if "ids" in spec:
        wanted = [(args.get("index"), i) for i in spec["ids"]]
    else:
        wanted = [(d.get("_index") or args.get("index"), d.get("_id")) for d in spec.get("docs", [])]
    docs = []
    for given, doc_id in wanted:
        name = aliases.concrete(emu, given) if given else given
        if name not in emu.state.indices:
            docs.append({"_index": name, "_id": doc_id, "error": _error_body(_index_missing(str(name)))["error"]})
            continue
        docs.append(emu.state.indices[name].get_doc(str(doc_id), source))
    return 200, {"docs": docs}


def _search(emu: OpenSearchEmulator, args: dict[str, str], params: dict[str, str], body: bytes) -> Handled:
    idx = _get_index(emu, args["index"])
    spec = _json(body)
    if "size" in params:
        spec["size"] = int(params["size"])
    return 200, search(idx, spec)


def _msearch(emu: OpenSearchEmulator, args: dict[str, str], params: dict[str, str], body: bytes) -> Handled:
    lines = _ndjson(body)
    if len(lines) % 2:
        raise ApiError(400, "illegal_argument_exception", "msearch body must hold header/body line pairs")
    responses = []
    for header, spec in zip(lines[0::2], lines[1::2]):
        name = header.get("index") or args.get("index")
        name = name[0] if isinstance(name, list) else name
        try:
            responses.append({**search(_get_index(emu, name or ""), spec), "status": 200})
        except ApiError as err:
            responses.append(_error_body(err))
    return 200, {"took": 1, "responses": responses}


def _count(emu: OpenSearchEmulator, args: dict[str, str], params: dict[str, str], body: bytes) -> Handled:
    idx = _get_index(emu, args["index"])
    spec = _json(body)
    extra = set(spec) - {"query"}
    if extra:
        raise ApiError(400, "parsing_exception", f"request does not support [{min(extra)}]")
    hits = search(idx, {"query": spec.get("query", {"match_all": {}}), "size": 0, "track_total_hits": True})
    return 200, {"count": hits["hits"]["total"]["value"], "_shards": hits["_shards"]}


def _delete_by_query(emu: OpenSearchEmulator, args: dict[str, str], params: dict[str, str], body: bytes) -> Handled:
    idx = _get_index(emu, args["index"])
    spec = _json(body)
    if "query" not in spec:
        raise ApiError(400, "action_request_validation_exception", "Validation Failed: 1: query is missing;")
    ids = idx.matching_ids(spec["query"])  # over the last refreshed state, like a scroll
    deleted = sum(1 for doc_id in ids if idx.delete_doc(doc_id)["result"] == "deleted")
    _refresh_param(idx, params)
    return 200, {
        "took": 1, "timed_out": False, "total": len(ids), "deleted": deleted, "batches": 1,
        "version_conflicts": 0, "noops": 0, "retries": {"bulk": 0, "search": 0},
        "throttled_millis": 0, "requests_per_second": -1.0, "throttled_until_millis": 0, "failures": [],
    }


def _refresh(emu: OpenSearchEmulator, args: dict[str, str], params: dict[str, str], body: bytes) -> Handled:
    names = [args["index"]] if "index" in args else list(emu.state.indices)
    for name in names:
        _get_index(emu, name).refresh()
    return 200, {"_shards": {"total": len(names), "successful": len(names), "failed": 0}}


_HANDLERS = {
    **aliases.HANDLERS,
    "info": _info,
    "create_index": _create_index,
    "head_index": _head_index,
    "get_index": _get_index_route,
    "get_mapping": _get_mapping,
    "put_mapping": _put_mapping,
    "delete_index": _delete_index,
    "bulk": _bulk,
    "index_doc": _index_doc,
    "delete_doc": _delete_doc,
    "get_doc": _get_doc,
    "mget": _mget,
    "search": _search,
    "msearch": _msearch,
    "count": _count,
    "delete_by_query": _delete_by_query,
    "refresh": _refresh,
}


# ---------------------------------------------------------------------- entry points


def start_opensearch_emulator() -> OpenSearchEmulator:
    """Start an emulator on a free port of 127.0.0.1; call ``.stop()`` when done."""
    return OpenSearchEmulator().start()


def make_opensearch_store(emulator: OpenSearchEmulator, dimension: int, index: str = "cairn-contexts", **kwargs: Any) -> Any:
    """An ``OpenSearchVectorStore`` wired to ``emulator`` through the real opensearch-py client."""
    from cairn.ports.vectorstores.opensearch import OpenSearchVectorStore

    kwargs.setdefault("backoff_s", 0.001)
    kwargs.setdefault("timeout_s", 5.0)
    return OpenSearchVectorStore(dimension=dimension, url=emulator.url, index=index, **kwargs)
