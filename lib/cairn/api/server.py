"""``cairn serve``: the ``/v1`` route table on a local HTTP server (uvicorn).

Each HTTP request becomes the API Gateway (payload 2.0) event the API Lambda receives, and the
very same resolver (:func:`cairn.api.routes.build_app`) answers it. This door is its own
authorizer: an API key (``Authorization: Bearer <key>``, see :class:`~cairn.api.auth.ApiKeys`)
names the tenant — and optionally the end user — and is written where API Gateway's Lambda
authorizer writes its context. Without keys the server serves one tenant (the settings') and
refuses to listen on anything but loopback.

A process answers several requests side by side, each on a thread of its own with a resolver
of its own (the resolver keeps the request's route and body on itself, and the event it answers
per thread: :class:`~cairn.api.routes.ThreadResolver`): up to ``REQUEST_THREADS``
at once, and operations that may run for minutes (an ingest, a delete of documents, a commit, an
erase: :func:`long_running`) in a lane of ``LONG_THREADS`` threads beside them, so a bulk ingest
never holds up a search that reached the same process (before, one did for the whole ingest: 39 s
for a 200-document ``PUT``, benchmarks/README.md). ``cairn serve --workers N`` (default: one per
core) runs N processes on one listening socket
(uvicorn's supervisor; it restarts a worker that dies; on Linux each worker is forked from it with
cairn already imported, :mod:`cairn.api.workers`), all on the same home: the embedded
store's writes are serialised by its file lock and every process sees every commit. Each worker
sizes the embedder to its share of the cores (``CAIRN_PROCESSES``). A process loads the model,
opens the served tenants (the settings' tenant, or every tenant of the API keys), builds their
keyword tokenizer, filter columns and noise floor before it accepts a connection, so the first
request is answered at full speed and ``/v1/health`` answers only once a worker is warm.
"""

from __future__ import annotations

import asyncio
import base64
import contextvars
import ipaddress
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any
from urllib.parse import parse_qsl

from cairn import console
from cairn.api.auth import ApiKeys, AuthorizerConfig, Caller
from cairn.api.routes import PUBLIC_ROUTES, build_app, resolve
from cairn.app.services import Services
from cairn.core.errors import CairnError, ConfigError, PayloadTooLarge, Unauthorized, require

MAX_BODY_BYTES = 6 * 1024 * 1024  # API Gateway's and Lambda's request payload limit
WORKER_SPEC = "CAIRN_SERVE_WORKER"  # how the supervisor tells its workers what to serve (JSON)
REQUEST_THREADS = 4  # requests one process answers side by side
LONG_THREADS = 2  # beside them, long operations (:func:`long_running`) at once; more wait their turn
log = logging.getLogger("cairn.serve")


class LocalDoor:
    """An ASGI application: HTTP request → API Gateway event → the route table → HTTP response."""

    def __init__(self, services: Services, keys: ApiKeys | None = None, *, max_body: int = MAX_BODY_BYTES) -> None:
        self.services = services
        self.keys = keys
        self.max_body = max_body
        self._resolvers = threading.local()  # one resolver per thread: it keeps its request on itself
        self._requests = ThreadPoolExecutor(REQUEST_THREADS, thread_name_prefix="cairn-serve")
        self._long = ThreadPoolExecutor(LONG_THREADS, thread_name_prefix="cairn-serve-long")

    async def __call__(self, scope: dict[str, Any], receive: Callable[..., Any], send: Callable[..., Any]) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        if console.is_console(scope.get("path") or ""):  # the console's static files: no key, no resolver
            asked = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers") or []}
            await _send(send, console.response(scope["path"], scope.get("method", "GET"), asked))
            return
        rid = str(uuid.uuid4())
        try:
            body = await self._body(receive)
            event = self.event(scope, body, rid)
            lane = self._long if long_running(event) else self._requests
            call = contextvars.copy_context().run  # the request's thread sees the loop's context, as to_thread does
            response = await asyncio.get_running_loop().run_in_executor(lane, call, self.resolve, event)
        except CairnError as exc:
            response = _error(exc, rid)
        await _send(send, response)

    async def _body(self, receive: Callable[..., Any]) -> bytes:
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                raise PayloadTooLarge(f"the request body is over {self.max_body:,} bytes; send less per request")
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    def event(self, scope: dict[str, Any], body: bytes, request_id: str) -> dict[str, Any]:
        """The API Gateway HTTP API (payload 2.0) event of one request, with the caller in the
        authorizer context (401 when a key is needed and missing or unknown)."""
        headers: dict[str, str] = {}
        for name, value in scope.get("headers", []):
            key = name.decode("latin-1").lower()
            headers[key] = f"{headers[key]},{value.decode('latin-1')}" if key in headers else value.decode("latin-1")
        path = scope.get("path") or "/"
        raw_query = (scope.get("query_string") or b"").decode("latin-1")
        query: dict[str, str] = {}
        for k, v in parse_qsl(raw_query, keep_blank_values=True):
            query[k] = f"{query[k]},{v}" if k in query else v
        try:
            text, b64 = body.decode("utf-8"), False
        except UnicodeDecodeError:
            text, b64 = base64.b64encode(body).decode("ascii"), True
        context: dict[str, Any] = {
            "http": {"method": scope.get("method", "GET"), "path": path, "protocol": f"HTTP/{scope.get('http_version', '1.1')}",
                     "sourceIp": (scope.get("client") or ("", 0))[0], "userAgent": headers.get("user-agent", "")},
            "requestId": request_id, "stage": "$default", "timeEpoch": int(time.time() * 1000),
        }
        if path not in PUBLIC_ROUTES:
            caller = self.keys.caller(headers.get("authorization")) if self.keys else Caller(self.services.settings.tenant)
            context["authorizer"] = {"lambda": {"tenant": caller.tenant, "user": caller.user, "role": caller.role.value}}
        return {
            "version": "2.0", "routeKey": "$default", "rawPath": path, "rawQueryString": raw_query,
            "headers": headers, "queryStringParameters": query or None, "requestContext": context,
            "body": text if body else None, "isBase64Encoded": b64,
        }

    def resolve(self, event: dict[str, Any]) -> dict[str, Any]:
        app = getattr(self._resolvers, "app", None)
        if app is None:  # ~4 ms, once per thread
            app = self._resolvers.app = build_app(self.services, AuthorizerConfig())
        return resolve(app, event, None)


def long_running(event: dict[str, Any]) -> bool:
    """Whether a request may run for minutes (an ingest, deleting documents, a commit that may call
    an LLM, erasing a user): such requests share a lane of their own (module doc)."""
    http = event["requestContext"]["http"]
    method, path = http["method"], http["path"].rstrip("/")
    if method == "PUT" and path == "/v1/documents":
        return True
    if method == "DELETE" and (path == "/v1/documents" or path.startswith("/v1/users/")):
        return True
    return method == "POST" and path.startswith("/v1/sessions/") and path.endswith("/commit")


def _error(exc: CairnError, request_id: str) -> dict[str, Any]:
    status = exc.http_status
    headers = {"content-type": "application/json"}
    if status in (429, 503):
        headers["retry-after"] = "1"
    if isinstance(exc, Unauthorized):
        headers["www-authenticate"] = 'Bearer realm="cairn"'
    return {"statusCode": status, "headers": headers, "body": json.dumps({**exc.to_dict(), "request_id": request_id})}


async def _send(send: Callable[..., Any], response: dict[str, Any]) -> None:
    body = response.get("body") or ""
    data = base64.b64decode(body) if response.get("isBase64Encoded") else body.encode("utf-8")
    headers = [(k.lower().encode("latin-1"), str(v).encode("latin-1")) for k, v in (response.get("headers") or {}).items()]
    headers += [(b"set-cookie", str(c).encode("latin-1")) for c in response.get("cookies") or []]
    await send({"type": "http.response.start", "status": int(response.get("statusCode", 200)), "headers": headers})
    await send({"type": "http.response.body", "body": data})


def check_bind(host: str, keys: ApiKeys | None) -> None:
    """Without API keys, only loopback: anyone who reaches the port would be the tenant."""
    if keys is not None:
        return
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise ConfigError(
            f"refusing to listen on {host!r} without API keys: anyone who reaches it would act as the tenant; "
            "set CAIRN_API_KEYS_FILE (or --api-keys FILE), or listen on 127.0.0.1"
        )


def default_workers() -> int:
    """One worker process per core this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def served_tenants(services: Services, keys: ApiKeys | None) -> list[str]:
    """The tenants a server answers for: every tenant of the API keys, else the settings' one."""
    if keys is None:
        return [services.settings.tenant]
    return sorted({caller.tenant for _, caller in getattr(keys, "_callers", [])}) or [services.settings.tenant]


def warm(services: Services, tenants: list[str]) -> None:
    """Load what the first request of each tenant would: the model (every session), the tenant's
    partition, the keyword tokenizer, the scope filter's columns and the noise floor."""
    from cairn.engine.retrieval.evidence import noise_floor
    from cairn.ports.vectorstores import SearchMode, VectorQuery

    embedder, store = services.embedder, services.store
    getattr(embedder, "warm", lambda: None)()
    vector = embedder.embed_one("warm up").tolist()
    for tenant in tenants:
        try:
            store.query(VectorQuery(tenant=tenant, vector=vector, text="warm up", mode=SearchMode.HYBRID, limit=1,
                                    filter={"context_type": {"$in": ["resource", "memory", "skill"]}, "level": {"$gte": 0}}))
            store.count(tenant, {"ancestors": "cairn://resources", "owner": {"$exists": True}})
            noise_floor(store, embedder, tenant)
        except CairnError as exc:  # a broken tenant fails its own requests, not the server
            log.warning("could not warm a tenant", extra={"tenant": tenant, "error": exc.message})


def serve(services: Services, *, host: str = "127.0.0.1", port: int = 8080, keys: ApiKeys | None = None,
          log_level: str = "warning", ready: Callable[[str], None] | None = None, workers: int = 1,
          spec: dict[str, Any] | None = None) -> None:
    """Run ``cairn serve`` until interrupted, warm before the port answers (:func:`warm`).

    ``workers`` > 1 runs that many processes (``spec``: what each builds its services from,
    ``{"settings": load_settings overrides, "api_keys": file}``); 1 serves from this process."""
    uvicorn = require("uvicorn", extra="local", feature="cairn serve")
    check_bind(host, keys)
    access = log_level in ("info", "debug")
    if workers > 1:
        os.environ[WORKER_SPEC] = json.dumps(spec or {})
        os.environ["CAIRN_PROCESSES"] = str(workers)  # each worker's share of the cores
        from cairn.api.workers import supervisor

        config = uvicorn.Config("cairn.api.server:worker_app", factory=True, host=host, port=port, workers=workers,
                                log_level=log_level, lifespan="on", access_log=access)
        announce = None if ready is None else (lambda: threading.Thread(  # once the workers are started
            target=_announce_when_healthy, args=(ready, host, port), daemon=True).start())
        try:
            supervisor(config, [listening_socket(host, port)], announce).run()
        except KeyboardInterrupt:
            pass
        return
    warm(services, served_tenants(services, keys))
    config = uvicorn.Config(LocalDoor(services, keys), host=host, port=port, log_level=log_level,
                            lifespan="on", access_log=access)
    server = uvicorn.Server(config)
    if ready is not None:
        where = f"http://{host}:{port}"
        threading.Thread(target=_announce, args=(server, ready, where), daemon=True).start()
    server.run()


def listening_socket(host: str, port: int) -> socket.socket:
    """The socket the workers of ``cairn serve --workers N`` share, bound to ``host:port``.

    Made with the TCP protocol number, unlike uvicorn's own (``socket.socket(family)`` leaves it 0):
    asyncio turns Nagle's algorithm off (``TCP_NODELAY``) only on connections whose socket says
    ``IPPROTO_TCP``, and without it every response's body, written after its headers, waited for
    the client's delayed ACK: 64 ms a request instead of 21 ms at one client (benchmarks/README.md)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cairn serve cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    return sock


def worker_app() -> LocalDoor:
    """One worker process's application (uvicorn calls it in each worker): its own services from
    the supervisor's spec, warmed before the worker accepts a connection."""
    from cairn.core.config import load_settings

    spec = json.loads(os.environ.get(WORKER_SPEC) or "{}")
    services = Services(load_settings(**(spec.get("settings") or {})))
    keys = ApiKeys.load(file=spec.get("api_keys"))
    warm(services, served_tenants(services, keys))
    return LocalDoor(services, keys)


def _announce(server: Any, ready: Callable[[str], None], where: str) -> None:
    while not server.started and not server.should_exit:
        time.sleep(0.02)
    if server.started:
        ready(where)


def _announce_when_healthy(ready: Callable[[str], None], host: str, port: int) -> None:
    """Tell the user once a worker answers ``/v1/health`` (the workers warm before they accept)."""
    import http.client

    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection(host, port, timeout=60)
            conn.request("GET", "/v1/health")
            if conn.getresponse().status < 500:
                ready(f"http://{host}:{port}")
                return
        except OSError:
            time.sleep(0.2)


@contextmanager
def running(services: Services, keys: ApiKeys | None = None, *, host: str = "127.0.0.1", port: int = 0) -> Iterator[str]:
    """``cairn serve`` in a background thread of this process (port 0: a free one); yields its URL.

    What the demo, the tests and the benchmark use to call the server as a client would."""
    check_bind(host, keys)
    with in_thread(LocalDoor(services, keys), host, port, name="cairn serve") as url:
        yield url


@contextmanager
def in_thread(app: Any, host: str, port: int, *, name: str) -> Iterator[str]:
    """An ASGI ``app`` on uvicorn in a background thread (port 0: a free one); yields ``http://host:port``."""
    uvicorn = require("uvicorn", extra="local", feature=name)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on", access_log=False)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name=name, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise ConfigError(f"{name} did not start on {host}:{port}")
        time.sleep(0.01)
    bound = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://{host}:{bound}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
