"""``cairn mcp``: cairn's tools for agents over the Model Context Protocol (the official ``mcp`` SDK).

Tools: ``find``, ``search``, ``context``, ``read``, ``tree``, ``remember``, ``forget``, ``memories``,
``add_message``, ``commit`` — each calls one operation of the application layer (:mod:`cairn.app`),
as the ``/v1`` routes do, so a tool answers what its route answers and is authorized by the same
rule. Each answer is compact text for the model with the structured result beside it
(``structuredContent``); each tool carries annotations (read-only, destructive, idempotent) so a
host can auto-approve the read-only ones. Two transports:

* **stdio** (``cairn mcp``): an agent host starts the command and talks over its stdin/stdout.
  The server acts as one tenant (``--tenant`` / ``CAIRN_TENANT``) and, with ``--user``, for one
  end user only.
* **streamable HTTP** (``cairn mcp --transport http``, endpoint ``/mcp``). Without API keys it
  acts as that tenant (and ``--user``) for anyone who reaches it, so it listens on loopback only;
  with keys (``--api-keys FILE`` or ``CAIRN_API_KEYS_FILE`` / ``CAIRN_API_KEYS``, the same file as
  ``cairn serve``) every request needs ``Authorization: Bearer <key>`` and the key names the
  tenant and, optionally, the end user — checked at the door (401) and again for each tool call.

Every tool call counts against its tenant's rate limits and quotas (:mod:`cairn.ports.ratelimit`), as
every request of the HTTP API does; past one the tool answers an error that names the limit and
when to retry.

A caller bound to a user (``--user``, or a key naming one) acts for that user only: every tool
refuses another user's memories, sessions and folders (403 in the message). Every cairn error comes
back as a tool error (``isError``) in one short sentence; nothing crashes the server.

``mcp`` is an optional extra (``pip install 'cairn-context[mcp]'``), imported only here and only when a
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

from cairn.core.errors import CairnError, RequestError, Unauthorized, require

if TYPE_CHECKING:  # imported when used: `cairn --help` must not pay for the API's route table
    from cairn.api.auth import ApiKeys
    from cairn.app import Principal
    from cairn.app.services import Services

NAME = "cairn"
HTTP_PATH = "/mcp"
READ_PAGE_CHARS = 20_000  # one read answers at most this much text; next_offset reads on
INSTRUCTIONS = (
    "cairn holds the context an agent should read: resources (documents), memories of end users and "
    "skills, each at a cairn:// URI. Use `context` (or `search`) with the conversation's session to get what "
    "to put in your prompt, `find` for one plain query, `read` to open a URI (level 0 abstract, 1 overview, 2 full text), "
    "`tree` to browse a folder. Keep the conversation with `add_message` (it starts a session when given "
    "none) and `commit` it to turn it into memories; `remember` stores one fact about a user."
)


class McpCaller:
    """Who a tool call acts as: the server's fixed principal, or the one its API key names."""

    def __init__(self, tenant: str, user: str | None = None, keys: "ApiKeys | None" = None,
                 role: str | None = None) -> None:
        from cairn.app import Principal

        self.default = Principal.of(tenant, user, role)
        self.keys = keys

    def of(self, ctx: Any) -> "Principal":
        if self.keys is None:
            return self.default
        try:
            headers = ctx.headers  # the HTTP request under this call (None over stdio)
        except Exception:  # called outside a request (MCPServer.call_tool in process)
            headers = None
        if headers is None:  # keys configured but no HTTP request under this call: refuse, never guess
            raise Unauthorized("this server needs an API key: send 'Authorization: Bearer <key>'")
        return self.keys.caller(headers.get("authorization"))


# Which operation of the application layer each tool calls (the authorization matrix reads this).
TOOL_OPERATIONS = {
    "find": "find", "search": "search", "context": "context", "read": "read", "tree": "tree",
    "remember": "remember", "forget": "forget", "memories": "memories", "add_message": "append_message",
    "commit": "commit",
}


def build_server(services: "Services", *, tenant: str | None = None, user: str | None = None,
                 keys: "ApiKeys | None" = None, role: str | None = None, log_level: str = "WARNING") -> Any:
    """The MCP server (an ``mcp.server.mcpserver.MCPServer``) over ``services``.

    ``tenant`` / ``user`` / ``role``: who every call acts as (default: the settings' tenant as its
    admin; a user makes it that user's). ``keys``: API keys; then each HTTP request's key names
    the principal instead. Every tool calls one method of the application layer."""
    require("mcp", extra="mcp", feature="cairn mcp")
    from mcp.server.mcpserver import Context, MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp_types import CallToolResult, TextContent, ToolAnnotations
    from pydantic import Field

    from cairn.api.models import MemoryPut
    from cairn.core.distribution import __version__
    from cairn.core.requests import FindRequest, parse_request

    Query = Annotated[str, Field(description="what to look for, in natural language")]
    Limit = Annotated[int | None, Field(ge=1, le=100, description="results per context type (default: the server's)")]
    ContextTypeArg = Annotated[Literal["memory", "resource", "skill"] | None,
                               Field(description="only this context type (default: all)")]
    TargetUris = Annotated[list[str] | None, Field(description="search only under these cairn:// folders")]
    FilterArg = Annotated[dict[str, Any] | None,
                          Field(description='Mongo-style metadata filter, e.g. {"metadata.team": "finance"}')]
    UserArg = Annotated[str | None, Field(description="the end user whose memories to search too (a user key: always its own)")]
    Mode = Annotated[Literal["quick", "thinking", "auto"] | None,
                     Field(description="quick: one vector search; thinking: descend the folder tree; auto (search's "
                                       "default): thinking, or quick when the conversation is searched with the turn")]
    Session = Annotated[str | None, Field(description="the conversation to plan with (from add_message)")]

    ops = services.application
    callers = McpCaller(tenant or services.settings.tenant, user, keys, role)
    server = MCPServer(NAME, instructions=INSTRUCTIONS, version=__version__, log_level=log_level.upper())  # type: ignore[arg-type]  # an upper-cased level name
    reading = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)

    def writing(destructive: bool, idempotent: bool) -> Any:
        return ToolAnnotations(read_only_hint=False, destructive_hint=destructive, idempotent_hint=idempotent,
                               open_world_hint=False)

    def call(ctx: Context, body: Callable[[Any], Any], text: Callable[[Any], str]) -> Any:
        """Run one tool body as the caller: a compact text answer with the structured one beside it;
        a cairn error becomes a tool error that says what was wrong in one sentence."""
        try:
            who = callers.of(ctx)
            ops.admit(who)  # the tenant's rate limits and quotas, as at the HTTP door
            out = body(who)
        except CairnError as exc:
            raise ToolError(_short(exc)) from None
        data = out if isinstance(out, dict) else out.model_dump(mode="json")
        return CallToolResult(content=[TextContent(type="text", text=text(out))], structured_content=data)

    def request(query: str, limit: int | None, context_type: str | None, target_uris: list[str] | None,
                filter: dict[str, Any] | None, user: str | None, mode: str | None, default_mode: str) -> Any:
        given = {"limit": limit, "context_type": context_type, "target_uris": target_uris, "filter": filter,
                 "mode": mode or default_mode, "user": user}
        fields = {k: v for k, v in given.items() if v is not None}
        fields.setdefault("limit", services.settings.default_limit)
        return parse_request(FindRequest, {"query": query, **fields}), limit is not None

    @server.tool(title="Find context", annotations=reading,
                 description="Look up what cairn holds for ONE standalone question: no conversation, no planning. "
                             "Answers the best memories, resources and skills, each with its cairn:// URI, score "
                             "and text; use `read` on a URI for the whole document. Prefer `search` or `context` "
                             "inside a conversation.")
    def find(query: Query, ctx: Context, limit: Limit = None, context_type: ContextTypeArg = None,
             target_uris: TargetUris = None, filter: FilterArg = None, user: UserArg = None,
             mode: Mode = None) -> CallToolResult:
        def body(who: Any) -> dict[str, Any]:
            req, given = request(query, limit, context_type, target_uris, filter, user, mode, "quick")
            return ops.find(who, req, limit_given=given).to_dict()

        return call(ctx, body, _results_text)

    @server.tool(title="Search with the conversation", annotations=reading,
                 description="Find what to put in context for the latest turn of a conversation: pass its session_id "
                             "(from add_message) so cairn plans from what was said before, and the session's user's "
                             "memories come back beside resources and skills. The answer also becomes the "
                             "session's prefetched context.")
    def search(query: Query, ctx: Context, session_id: Session = None,
               limit: Limit = None, context_type: ContextTypeArg = None, target_uris: TargetUris = None,
               filter: FilterArg = None, user: UserArg = None, mode: Mode = None) -> CallToolResult:
        def body(who: Any) -> dict[str, Any]:
            req, given = request(query, limit, context_type, target_uris, filter, user, mode, "auto")
            answer = ops.search(who, req, session_id, limit_given=given)
            return answer.to_dict() if hasattr(answer, "to_dict") else answer.model_dump(mode="json", exclude_none=True)

        return call(ctx, body, _results_text)

    @server.tool(title="Context block for a prompt", annotations=reading,
                 description="The context to paste into your prompt for the latest turn, in one block of at most "
                             "budget_tokens tokens: memories, skills and resources, deduplicated, each passage "
                             "numbered [n] with its citation. Pass session_id inside a conversation.")
    def context(query: Query, ctx: Context, session_id: Session = None,
                budget_tokens: Annotated[int | None, Field(ge=50, le=200_000, description="the block's size at most, in tokens")] = None,
                limit: Limit = None, context_type: ContextTypeArg = None, target_uris: TargetUris = None,
                user: UserArg = None) -> CallToolResult:
        def body(who: Any) -> Any:
            req, given = request(query, limit, context_type, target_uris, None, user, None, "auto")
            return ops.context(who, req, session_id, budget_tokens=budget_tokens, limit_given=given)

        return call(ctx, body, lambda block: block.text or "(nothing relevant found)")

    @server.tool(title="Read a URI", annotations=reading,
                 description="Open a cairn:// URI from a result or the tree: level 0 its abstract, 1 a folder's "
                             "overview, 2 the full text. Long texts come in pages: pass next_offset as offset.")
    def read(uri: Annotated[str, Field(description="a cairn:// URI from a result or the tree")], ctx: Context,
             level: Annotated[int, Field(ge=0, le=2, description="0 abstract, 1 overview, 2 full text")] = 0,
             offset: Annotated[int, Field(ge=0, description="where to start in the text")] = 0,
             max_chars: Annotated[int, Field(ge=1, le=200_000, description="characters at most")] = READ_PAGE_CHARS,
             ) -> CallToolResult:
        return call(ctx, lambda who: ops.read(who, uri, level, offset, max_chars), _page_text)

    @server.tool(title="Browse a folder", annotations=reading,
                 description="List a folder's children (folders first, then files) with titles and abstracts, "
                             "depth levels down. Roots: cairn://resources, cairn://agent/skills, "
                             "cairn://user/<user>/memories.")
    def tree(uri: Annotated[str, Field(description="a cairn:// folder URI")], ctx: Context,
             depth: Annotated[int, Field(ge=1, le=3, description="levels below the folder")] = 1,
             limit: Annotated[int, Field(ge=1, le=1000, description="children per folder at most")] = 100,
             ) -> CallToolResult:
        return call(ctx, lambda who: ops.tree(who, uri, depth, limit), _tree_text)

    @server.tool(title="Remember a fact about a user", annotations=writing(destructive=False, idempotent=True),
                 description="Store one fact about the end user (a preference, a profile detail, an event) so later "
                             "searches find it. The same key updates the memory; other memories stay.")
    def remember(text: Annotated[str, Field(description="the fact, as one sentence about the user")],
                 ctx: Context,
                 category: Annotated[str | None, Field(description="one word: preferences, profile, entities, events or "
                                                       "cases (default: profile)")] = None,
                 user: Annotated[str | None, Field(description="whom the fact is about (a user key: always its own user)")] = None,
                 key: Annotated[str | None, Field(description="the memory's name; remembering with the same key updates it")] = None,
                 title: Annotated[str | None, Field(description="a short title (default: the text's first line)")] = None,
                 metadata: Annotated[dict[str, Any] | None, Field(description="flat fields: string, number, bool, list of strings")] = None,
                 source: Annotated[str | None, Field(description="where it comes from (a URL, a message id)")] = None,
                 ) -> CallToolResult:
        def body(who: Any) -> Any:
            fields = {"text": text, "category": category, "user": user, "key": key, "title": title,
                      "metadata": metadata, "source": source}
            return ops.remember(who, parse_request(MemoryPut, {k: v for k, v in fields.items() if v is not None}))

        return call(ctx, body, lambda done: f"{'Remembered' if done.created else 'Updated'}: {done.uri}")

    @server.tool(title="Forget a memory", annotations=writing(destructive=True, idempotent=True),
                 description="Delete one memory of the user (its cairn://user/<user>/memories/... URI, from `memories` "
                             "or a result), or a whole category. It cannot be undone.")
    def forget(uri: Annotated[str, Field(description="the memory's URI")], ctx: Context) -> CallToolResult:
        return call(ctx, lambda who: ops.forget(who, uri), lambda done: f"Forgot {done.uri} ({done.removed} records).")

    @server.tool(title="List a user's memories", annotations=reading,
                 description="What cairn remembers about the end user, newest first, by category.")
    def memories(ctx: Context,
                 user: Annotated[str | None, Field(description="whose memories (a user key: always its own)")] = None,
                 category: Annotated[str | None, Field(description="only this category")] = None) -> CallToolResult:
        def body(who: Any) -> Any:
            owner = user or who.user
            if owner is None:
                raise RequestError("memories: name the user whose memories to list")
            return ops.memories(who, owner, category)

        return call(ctx, body, _memories_text)

    @server.tool(title="Add a message to the conversation", annotations=writing(destructive=False, idempotent=False),
                 description="Record one turn of the conversation. Without session_id a new session is started (for "
                             "user) and its id returned: pass it to search, context, add_message and commit. Pass an "
                             "idempotency_key to make retries safe.")
    def add_message(content: Annotated[str, Field(description="the message text")], ctx: Context,
                    role: Annotated[Literal["user", "assistant"], Field(description="who spoke")] = "user",
                    session_id: Annotated[str | None, Field(description="the conversation (default: a new one)")] = None,
                    user: Annotated[str | None, Field(description="the end user of a new session")] = None,
                    name: Annotated[str | None, Field(description="the speaker's name")] = None,
                    idempotency_key: Annotated[str | None, Field(max_length=200, description="a retried call with the same key adds the message once")] = None,
                    ) -> CallToolResult:
        def body(who: Any) -> dict[str, Any]:
            sid, created = session_id, False
            if sid is None:
                sid, created = ops.create_session(who, user).id, True
            elif user is not None:
                raise RequestError("user names the owner of a new session; leave it out with session_id")
            message = ops.append_message(who, sid, role, content, name=name, idempotency_key=idempotency_key)
            return {"session_id": sid, "session_created": created, "message": message.model_dump(mode="json")}

        return call(ctx, body, lambda out: f"Added message {out['message']['seq']} to session {out['session_id']}"
                    + (" (new session)." if out["session_created"] else "."))

    @server.tool(title="Commit the conversation to memory", annotations=writing(destructive=False, idempotent=True),
                 description="Turn the conversation's messages since the last commit into memories of its user, so "
                             "later searches find what the user said. Committing again adds nothing new.")
    def commit(session_id: Annotated[str, Field(description="the conversation to commit")], ctx: Context) -> CallToolResult:
        return call(ctx, lambda who: ops.commit(who, session_id),
                    lambda done: f"Committed session {done.session_id}: {done.written} memories written from "
                                 f"{done.messages} messages.")

    return server


def _short(exc: CairnError) -> str:
    """A cairn error as one or two short sentences for the model (no validator jargon, no URLs)."""
    message = exc.message
    message = message.replace("Value error, ", "")
    for marker in (" For further information visit", "\n    For further information"):
        message = message.split(marker)[0]
    return message[:600]


def _results_text(data: dict[str, Any]) -> str:
    """A find/search answer as compact lines an LLM reads well: one per match, best first."""
    lines: list[str] = []
    for bucket in ("memories", "skills", "resources"):
        for m in data.get(bucket) or []:
            title = f" {m['title']}" if m.get("title") else ""
            text = " ".join(str(m.get("text") or m.get("abstract") or "").split())
            lines.append(f"[{len(lines) + 1}] ({m['context_type']}, {m['score']:.2f}) {m['uri']}{title}\n    {text[:700]}")
    return "\n".join(lines) if lines else "No results above the score threshold."


def _page_text(page: Any) -> str:
    more = f"\n(more: offset={page.next_offset})" if page.next_offset is not None else ""
    return f"{page.title}\n{page.uri} (level {page.level})\n\n{page.text}{more}"


def _tree_text(tree: Any) -> str:
    def walk(nodes: list[Any], indent: str) -> list[str]:
        out: list[str] = []
        for n in nodes:
            mark = "/" if n.kind == "directory" else ""
            out.append(f"{indent}{n.uri}{mark} {n.title}: {' '.join(n.abstract.split())[:160]}")
            if n.children:
                out += walk(n.children, indent + "  ")
        return out

    return "\n".join([f"{tree.uri} ({tree.total} children)", *walk(tree.children, "  ")])


def _memories_text(listing: Any) -> str:
    if not listing.memories:
        return f"No memories of {listing.user}."
    return "\n".join(f"- [{m.category}] {' '.join(m.text.split())[:300]} ({m.uri})" for m in listing.memories)


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
             user: str | None = None, role: str | None = None, path: str = HTTP_PATH, log_level: str = "WARNING") -> Any:
    """The streamable HTTP ASGI application (endpoint ``path``), behind the key check."""
    from cairn.api.server import check_bind

    check_bind(host, keys)
    server = build_server(services, tenant=tenant, user=user, keys=keys, role=role, log_level=log_level)
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
    from cairn.api.server import in_thread

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
    p.add_argument("--role", choices=["admin", "writer", "reader", "user"],
                   help="the role every call acts with (default: user with --user, else admin)")
    p.add_argument("--host", default="127.0.0.1", help="HTTP: address to listen on (others than loopback need API keys)")
    p.add_argument("--port", type=int, default=8765, help=f"HTTP: port (default 8765; endpoint {HTTP_PATH})")
    p.add_argument("--api-keys", metavar="FILE",
                   help='HTTP: JSON {"<key>": "<tenant>"} or {"<key>": {"tenant", "user"}} (env CAIRN_API_KEYS_FILE or CAIRN_API_KEYS)')
    p.add_argument("--log-level", default="warning", choices=["critical", "error", "warning", "info", "debug"])


def cmd_mcp(args: argparse.Namespace) -> int:
    """Run ``cairn mcp`` until the host closes stdin (stdio) or Ctrl-C (HTTP)."""
    from cairn.api.auth import ApiKeys
    from cairn.app.services import Services
    from cairn.core.config import load_settings

    require("mcp", extra="mcp", feature="cairn mcp")
    _quiet_root_logging(args.log_level.upper())
    services = Services(load_settings(home=getattr(args, "home", None), tenant=getattr(args, "tenant", None)))
    if args.transport == "stdio":
        if args.api_keys:
            raise RequestError("--api-keys is for --transport http; over stdio the host that starts cairn is the caller")
        server = build_server(services, user=args.user, role=args.role, log_level=args.log_level)
        services.store  # noqa: B018 - load the model and open the store before the host's first call
        server.run("stdio")
        return 0
    keys = ApiKeys.load(file=args.api_keys)
    if keys is not None and args.user:
        raise RequestError("--user binds a server without API keys; with keys, each key names its user")
    app = http_app(services, host=args.host, keys=keys, user=args.user, role=args.role, log_level=args.log_level)
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
