"""``cairn mcp``: cairn's tools for agents over the Model Context Protocol (the official ``mcp`` SDK).

Tools: ``find``, ``search``, ``read``, ``tree``, ``remember``, ``add_message``, ``commit`` — the
library calls the ``/v1`` API makes, with the same answers (``find`` answers what ``POST /v1/find``
answers). Two transports:

* **stdio** (``cairn mcp``): an agent host starts the command and talks over its stdin/stdout.
  The server acts as one tenant (``--tenant`` / ``CAIRN_TENANT``) and, with ``--user``, for one
  end user only.
* **streamable HTTP** (``cairn mcp --transport http``, endpoint ``/mcp``). Without API keys it
  acts as that tenant (and ``--user``) for anyone who reaches it, so it listens on loopback only;
  with keys (``--api-keys FILE`` or ``CAIRN_API_KEYS_FILE`` / ``CAIRN_API_KEYS``, the same file as
  ``cairn serve``) every request needs ``Authorization: Bearer <key>`` and the key names the
  tenant and, optionally, the end user — checked at the door (401) and again for each tool call.

A caller bound to a user (``--user``, or a key naming one) acts for that user only: ``remember``,
``search``, ``add_message`` and ``commit`` refuse another user's name or session. Every cairn
error comes back as a tool error (``isError``) that carries its message; nothing crashes the server.

``mcp`` is an optional extra (``pip install 'cairn[mcp]'``), imported only here and only when a
server is built. (No ``from __future__ import annotations`` here: the SDK reads each tool's
annotations at registration to build its input schema, so they must be objects, not strings.)
"""

import argparse
import json
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, Any, Literal

from .errors import CairnError, ConfigError, RequestError, Unauthorized, require

if TYPE_CHECKING:  # imported when used: `cairn --help` must not pay for the API's route table
    from .api.auth import ApiKeys, Caller
    from .services import Services

NAME = "cairn"
HTTP_PATH = "/mcp"
READ_PAGE_CHARS = 20_000  # one read answers at most this much text; next_offset reads on
INSTRUCTIONS = (
    "cairn holds the context an agent should read: resources (documents), memories of end users and "
    "skills, each at a cairn:// URI. Use `search` with the conversation's session to get what to put in "
    "context, `find` for one plain query, `read` to open a URI (level 0 abstract, 1 overview, 2 full text), "
    "`tree` to browse a folder. Keep the conversation with `add_message` (it starts a session when given "
    "none) and `commit` it to turn it into memories; `remember` stores one fact about a user."
)


class McpCaller:
    """Who a tool call acts as: the server's fixed caller, or the one its API key names."""

    def __init__(self, tenant: str, user: str | None = None, keys: "ApiKeys | None" = None) -> None:
        from .api.auth import Caller

        self.default = Caller(tenant, user)
        self.keys = keys

    def of(self, ctx: Any) -> "Caller":
        if self.keys is None:
            return self.default
        try:
            headers = ctx.headers  # the HTTP request under this call (None over stdio)
        except Exception:  # called outside a request (MCPServer.call_tool in process)
            headers = None
        if headers is None:  # keys configured but no HTTP request under this call: refuse, never guess
            raise Unauthorized("this server needs an API key: send 'Authorization: Bearer <key>'")
        return self.keys.caller(headers.get("authorization"))


def build_server(services: "Services", *, tenant: str | None = None, user: str | None = None,
                 keys: "ApiKeys | None" = None, log_level: str = "WARNING") -> Any:
    """The MCP server (an ``mcp.server.mcpserver.MCPServer``) over ``services``.

    ``tenant`` / ``user``: who every call acts as (default: the settings' tenant, any user).
    ``keys``: API keys; then each HTTP request's key names the tenant and user instead."""
    require("mcp", extra="mcp", feature="cairn mcp")
    from mcp.server.mcpserver import Context, MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from pydantic import Field

    from . import __version__
    from .api.auth import Caller
    from .api.browse import read_page
    from .api.browse import tree as browse_tree

    Query = Annotated[str, Field(description="what to look for, in natural language")]
    Limit = Annotated[int | None, Field(ge=1, le=100, description="results per context type (default: the server's)")]
    ContextTypeArg = Annotated[Literal["memory", "resource", "skill"] | None,
                               Field(description="only this context type (default: all)")]
    TargetUris = Annotated[list[str] | None, Field(description="search only under these cairn:// folders")]
    FilterArg = Annotated[dict[str, Any] | None,
                          Field(description='Mongo-style metadata filter, e.g. {"metadata.team": "finance"}')]
    UserArg = Annotated[str | None, Field(description="the end user whose memories to include")]

    callers = McpCaller(tenant or services.settings.tenant, user, keys)
    server = MCPServer(NAME, instructions=INSTRUCTIONS, version=__version__, log_level=log_level.upper())

    def call(ctx: Context, body: Callable[[Caller], Any]) -> Any:
        """Run one tool body as the caller; a cairn error becomes a tool error with its message."""
        try:
            return body(callers.of(ctx))
        except CairnError as exc:
            raise ToolError(f"{exc.message} [{exc.code}, status {exc.http_status}]") from None

    def owned_session(who: Caller, session_id: str) -> None:
        """The session exists in the caller's tenant and belongs to a user the caller may act for."""
        view = services.sessions.get(who.tenant, session_id, recent=0)
        who.user_for(view.session.user)

    def options(limit: int | None, context_type: str | None, target_uris: list[str] | None,
                filter: dict[str, Any] | None, mode: str | None) -> dict[str, Any]:
        given = {"limit": limit, "context_type": context_type, "target_uris": target_uris, "filter": filter, "mode": mode}
        return {k: v for k, v in given.items() if v is not None}

    @server.tool(description="Find context for one query: no session, no planning (quick vector search "
                             "unless mode='thinking'). Answers memories, resources and skills with their "
                             "cairn:// URIs, scores and abstracts; read a URI for more.")
    def find(query: Query, ctx: Context, limit: Limit = None, context_type: ContextTypeArg = None,
             target_uris: TargetUris = None, filter: FilterArg = None, user: UserArg = None,
             mode: Annotated[Literal["quick", "thinking"] | None, Field()] = None) -> dict[str, Any]:
        def body(who: Caller) -> dict[str, Any]:
            opts = options(limit, context_type, target_uris, filter, mode)
            return services.cairn(who.tenant).find(query, user=who.user_for(user), **opts).to_dict()

        return call(ctx, body)

    @server.tool(description="Search with the conversation: plans from the session's summary and recent "
                             "messages (pass session_id), retrieves hierarchically and reranks; includes the "
                             "session user's memories. The answer becomes the session's prefetched context.")
    def search(query: Query, ctx: Context,
               session_id: Annotated[str | None, Field(description="the conversation to plan with")] = None,
               limit: Limit = None, context_type: ContextTypeArg = None, target_uris: TargetUris = None,
               filter: FilterArg = None, user: UserArg = None,
               mode: Annotated[Literal["quick", "thinking"] | None, Field()] = None) -> dict[str, Any]:
        def body(who: Caller) -> dict[str, Any]:
            if session_id is not None:
                owned_session(who, session_id)
            opts = options(limit, context_type, target_uris, filter, mode)
            cairn = services.cairn(who.tenant)
            return cairn.search(query, session_id=session_id, user=who.user_for(user), **opts).to_dict()

        return call(ctx, body)

    @server.tool(description="Read a cairn:// URI progressively: level 0 the abstract, 1 the overview of a "
                             "folder, 2 the full text. Long texts come in pages: pass next_offset as offset.")
    def read(uri: Annotated[str, Field(description="a cairn:// URI from a result or the tree")], ctx: Context,
             level: Annotated[int, Field(ge=0, le=2, description="0 abstract, 1 overview, 2 full text")] = 0,
             offset: Annotated[int, Field(ge=0, description="where to start in the text")] = 0,
             max_chars: Annotated[int, Field(ge=1, le=200_000, description="characters at most")] = READ_PAGE_CHARS,
             ) -> dict[str, Any]:
        def body(who: Caller) -> dict[str, Any]:
            return read_page(services.cairn(who.tenant), uri, level, offset, max_chars).model_dump(mode="json")

        return call(ctx, body)

    @server.tool(description="Browse a folder: its children (folders first, then files) with titles and "
                             "abstracts, depth levels down. Roots: cairn://resources, cairn://agent/skills, "
                             "cairn://user/<user>/memories.")
    def tree(uri: Annotated[str, Field(description="a cairn:// folder URI")], ctx: Context,
             depth: Annotated[int, Field(ge=1, le=3)] = 1,
             limit: Annotated[int, Field(ge=1, le=1000, description="children per folder at most")] = 100,
             ) -> dict[str, Any]:
        def body(who: Caller) -> dict[str, Any]:
            return browse_tree(services.cairn(who.tenant), uri, depth, limit).model_dump(mode="json")

        return call(ctx, body)

    @server.tool(description="Remember one fact about an end user (add, or update the memory with the same "
                             "key) under cairn://user/<user>/memories/<category>/...; other memories stay.")
    def remember(text: Annotated[str, Field(description="what to remember, as a sentence")],
                 category: Annotated[str, Field(description="e.g. preferences, profile, entities, events")],
                 ctx: Context, user: UserArg = None,
                 key: Annotated[str | None, Field(description="the memory's name; the same key updates it")] = None,
                 title: Annotated[str | None, Field()] = None,
                 metadata: Annotated[dict[str, Any] | None, Field(description="flat fields: string, number, bool, list of strings")] = None,
                 source: Annotated[str | None, Field(description="where it comes from (a URL, a message id)")] = None,
                 ) -> dict[str, Any]:
        def body(who: Caller) -> dict[str, Any]:
            owner = who.user_for(user)
            if owner is None:
                raise RequestError("remember needs the end user the memory is about: pass user")
            done = services.cairn(who.tenant).remember(owner, text, category, key=key, title=title,
                                                      metadata=metadata, source=source)
            return done.model_dump(mode="json")

        return call(ctx, body)

    @server.tool(description="Add a message to a conversation. Without session_id a new session is started "
                             "(for user) and its id returned: pass it to search, add_message and commit.")
    def add_message(content: Annotated[str, Field(description="the message text")], ctx: Context,
                    role: Annotated[Literal["user", "assistant"], Field(description="who spoke")] = "user",
                    session_id: Annotated[str | None, Field(description="the conversation (default: a new one)")] = None,
                    user: Annotated[str | None, Field(description="the end user of a new session")] = None,
                    name: Annotated[str | None, Field(description="the speaker's name")] = None,
                    idempotency_key: Annotated[str | None, Field(max_length=200, description="a retried call with the same key adds the message once")] = None,
                    ) -> dict[str, Any]:
        def body(who: Caller) -> dict[str, Any]:
            sessions, created = services.sessions, False
            sid = session_id
            if sid is None:
                sid, created = sessions.create(who.tenant, user=who.user_for(user)).id, True
            else:
                if user is not None:
                    raise RequestError("user names the owner of a new session; leave it out with session_id")
                owned_session(who, sid)
            message = sessions.append(who.tenant, sid, role, content, name=name, idempotency_key=idempotency_key)
            services.cairn(who.tenant).after_append(sid)  # commits and compresses when the session is full
            return {"session_id": sid, "session_created": created, "message": message.model_dump(mode="json")}

        return call(ctx, body)

    @server.tool(description="Commit a conversation: its messages since the last commit become memories of "
                             "its user (found by later searches). Committing again adds nothing new.")
    def commit(session_id: Annotated[str, Field(description="the conversation to commit")], ctx: Context) -> dict[str, Any]:
        def body(who: Caller) -> dict[str, Any]:
            owned_session(who, session_id)
            return services.cairn(who.tenant).commit(session_id).model_dump(mode="json")

        return call(ctx, body)

    return server


# ---------------------------------------------------------------------- streamable HTTP


class KeyGate:
    """ASGI: with API keys, an HTTP request without a known ``Authorization: Bearer`` key is a 401
    before it reaches the MCP session manager (each tool call checks the key again)."""

    def __init__(self, app: Any, keys: "ApiKeys | None") -> None:
        self.app, self.keys = app, keys

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and self.keys is not None:
            auth = next((v.decode("latin-1") for k, v in scope.get("headers", []) if k.lower() == b"authorization"), None)
            try:
                self.keys.caller(auth)
            except Unauthorized as exc:
                body = json.dumps(exc.to_dict()).encode()
                await send({"type": "http.response.start", "status": 401, "headers": [
                    (b"content-type", b"application/json"), (b"www-authenticate", b'Bearer realm="cairn"')]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def http_app(services: "Services", *, host: str = "127.0.0.1", keys: "ApiKeys | None" = None, tenant: str | None = None,
             user: str | None = None, path: str = HTTP_PATH, log_level: str = "WARNING") -> Any:
    """The streamable HTTP ASGI application (endpoint ``path``), behind the key check."""
    from .api.server import check_bind

    check_bind(host, keys)
    server = build_server(services, tenant=tenant, user=user, keys=keys, log_level=log_level)
    return KeyGate(server.streamable_http_app(streamable_http_path=path, host=host), keys)


def _uvicorn_server(app: Any, host: str, port: int, log_level: str) -> Any:
    uvicorn = require("uvicorn", extra="local", feature="cairn mcp over HTTP")
    config = uvicorn.Config(app, host=host, port=port, log_level=log_level.lower(), lifespan="on",
                            access_log=log_level.lower() in ("info", "debug"))
    return uvicorn.Server(config)


@contextmanager
def running_http(services: "Services", *, keys: "ApiKeys | None" = None, tenant: str | None = None, user: str | None = None,
                 host: str = "127.0.0.1", port: int = 0) -> Iterator[str]:
    """The streamable HTTP server in a background thread of this process (port 0: a free one);
    yields the endpoint URL (``http://host:port/mcp``). For tests and host applications."""
    from .api.server import in_thread

    app = http_app(services, host=host, keys=keys, tenant=tenant, user=user)
    with in_thread(app, host, port, name="cairn mcp") as url:
        yield f"{url}{HTTP_PATH}"


# ---------------------------------------------------------------------- the command


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Add ``cairn mcp`` to the ``cairn`` command's subparsers."""
    p = sub.add_parser("mcp", help="serve cairn's tools to agents over MCP (stdio, or streamable HTTP)")
    _add_options(p)
    p.set_defaults(func=cmd_mcp)
    return p


def _add_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--transport", choices=["stdio", "http"], default="stdio",
                   help="stdio (default: an agent host starts this command) or streamable HTTP")
    p.add_argument("--user", help="act for this end user only (memories, sessions); others are refused")
    p.add_argument("--host", default="127.0.0.1", help="HTTP: address to listen on (others than loopback need API keys)")
    p.add_argument("--port", type=int, default=8765, help=f"HTTP: port (default 8765; endpoint {HTTP_PATH})")
    p.add_argument("--api-keys", metavar="FILE",
                   help='HTTP: JSON {"<key>": "<tenant>"} or {"<key>": {"tenant", "user"}} (env CAIRN_API_KEYS_FILE or CAIRN_API_KEYS)')
    p.add_argument("--log-level", default="warning", choices=["critical", "error", "warning", "info", "debug"])


def cmd_mcp(args: argparse.Namespace) -> int:
    """Run ``cairn mcp`` until the host closes stdin (stdio) or Ctrl-C (HTTP)."""
    from .api.auth import ApiKeys
    from .config import load_settings
    from .services import Services

    require("mcp", extra="mcp", feature="cairn mcp")
    _quiet_root_logging(args.log_level.upper())
    services = Services(load_settings(home=getattr(args, "home", None), tenant=getattr(args, "tenant", None)))
    if args.transport == "stdio":
        if args.api_keys:
            raise RequestError("--api-keys is for --transport http; over stdio the host that starts cairn is the caller")
        server = build_server(services, user=args.user, log_level=args.log_level)
        services.store  # noqa: B018 - load the model and open the store before the host's first call
        server.run("stdio")
        return 0
    keys = ApiKeys.load(file=args.api_keys)
    if keys is not None and args.user:
        raise RequestError("--user binds a server without API keys; with keys, each key names its user")
    app = http_app(services, host=args.host, keys=keys, user=args.user, log_level=args.log_level)
    who = "API keys" if keys else f"no API keys: every call acts as tenant {services.settings.tenant!r}"
    print(f"cairn mcp: loading the store and the embedder ({who}) ...", file=sys.stderr, flush=True)
    services.store  # noqa: B018
    server = _uvicorn_server(app, args.host, args.port, args.log_level)
    threading.Thread(target=_announce, args=(server, f"http://{args.host}:{args.port}{HTTP_PATH}"), daemon=True).start()
    server.run()
    return 0


def _quiet_root_logging(level: str) -> None:
    """This process's root handler: stderr, at ``level`` (the SDK would otherwise add one that
    prints every library's debug lines). Logs never reach stdout, which carries the protocol."""
    import logging

    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(level)
    logging.basicConfig(level=level, handlers=[handler])


def _announce(server: Any, url: str) -> None:
    while not server.started and not server.should_exit:
        time.sleep(0.02)
    if server.started:
        print(f"cairn mcp: streamable HTTP on {url}; Ctrl-C stops", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    """``python -m cairn.mcp [options]``: ``cairn mcp`` without the rest of the CLI."""
    parser = argparse.ArgumentParser(prog="python -m cairn.mcp", description="cairn's tools over MCP.")
    parser.add_argument("--home", help="where the embedded store lives (env CAIRN_HOME)")
    parser.add_argument("--tenant", help="tenant to act as (env CAIRN_TENANT)")
    _add_options(parser)
    args = parser.parse_args(argv)
    try:
        return cmd_mcp(args)
    except CairnError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
