"""The ``cairn`` command.

    cairn ingest PATH --uri cairn://resources/...   build the L0/L1/L2 tree of a folder (or s3://bucket/prefix)
    cairn read URI [--level 0|1|2]                   read progressively: abstract, overview, body
    cairn rm URI                                     delete a subtree from both stores
    cairn find "QUERY" [--limit N] [--json]         search it
    cairn demo                                       ingest cairn's own docs and ask about them

Every cairn error ends as one line on stderr and exit status 2; never a stack trace.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cairn.cli.common import _ops, _rate_progress, _service, _services
from cairn.cli.demo import (
    cmd_demo,
)
from cairn.cli.output import (
    print_table,
)
from cairn.core.errors import CairnError, RequestError

if TYPE_CHECKING:  # the CLI imports what a command needs when it runs (`cairn --help` stays fast)
    pass


def _ingestor(args: argparse.Namespace, title_rules: tuple = (), leaf_rules: tuple = (), services: Any = None) -> Any:
    options: dict[str, Any] = {"title_rules": title_rules, "leaf_title_rules": leaf_rules}
    if getattr(args, "chunk_size", None) or getattr(args, "chunk_overlap", None) is not None:
        from cairn.engine.ingest import ChunkingConfig

        default = ChunkingConfig()
        options["chunking"] = ChunkingConfig(
            args.chunk_size or default.chunk_chars,
            default.overlap_chars if args.chunk_overlap is None else args.chunk_overlap,
        )
    if getattr(args, "parse_workers", None):
        options["parse_workers"] = args.parse_workers
    from cairn.inprocess import Cairn

    return Cairn(services or _services(args)).ingestor(**options)


def _say_cached(embedder: Any) -> None:
    """On stderr, how many of the ingest's vectors the machine's embedding cache gave (none: nothing)."""
    hits = getattr(embedder, "hits", 0)
    if hits:
        where = embedder.file.path.parent
        print(f"  {hits} vectors came from the embedding cache ({where}; CAIRN_EMBEDDING_CACHE=off to keep none), "
              f"{getattr(embedder, 'texts_embedded', 0)} texts were embedded by the model", file=sys.stderr)


def _title_rules(specs: list[str] | None, leaves: bool = False) -> tuple:
    from cairn.engine.ingest import DirTitleRule

    return tuple(DirTitleRule.parse(spec) for spec in specs or [])


def cmd_ingest(args: argparse.Namespace) -> int:
    from cairn.core import uri as uris
    uris.context_type_of(args.uri)  # a clear error before any work
    rules, leaf_rules = _title_rules(args.dir_title), _title_rules(args.leaf_title, leaves=True)
    services = _services(args)
    if args.url or args.sitemap:
        if args.path:
            raise RequestError("give a folder or --url/--sitemap, not both")
        print(f"Fetching {len(args.url or [])} URL(s){' and a sitemap' if args.sitemap else ''} into {args.uri} ...", file=sys.stderr)
        report = _ingestor(args, rules, leaf_rules, services).ingest_urls(
            args.url or [], args.uri, _rate_progress(), sitemap=args.sitemap, policy=services.fetch_policy)
    elif args.path and args.path.startswith("s3://"):
        from cairn.engine.ingest import parse_s3_url

        bucket, prefix = parse_s3_url(args.path)
        if args.format != "folder":
            raise RequestError(f"--format {args.format} reads a local corpus; an S3 prefix is read as a folder")
        print(f"Ingesting {args.path} into {args.uri} ...", file=sys.stderr)
        report = _ingestor(args, rules, leaf_rules, services).ingest_s3(
            bucket, prefix, args.uri, _rate_progress(), client=services.s3)
    else:
        if not args.path:
            raise RequestError("give a folder (or a file) to ingest, or --url/--sitemap")
        path = Path(args.path)
        if not path.exists():
            raise RequestError(f"path {args.path!r} does not exist; give a folder or a file (see `cairn ingest --help` for formats)")
        print(f"Ingesting {path} into {args.uri} ...", file=sys.stderr)
        report = _ingestor(args, rules, leaf_rules, services).ingest_path(path, args.uri, _rate_progress(), format=args.format)
    print(
        f"{report.documents} documents -> {report.records} records "
        f"({report.embedded} embedded, {report.unchanged} unchanged, {report.removed} removed) "
        f"in {report.seconds:.1f}s ({report.records_per_second:.1f} records/s)"
    )
    _say_cached(services.embedder)
    for r in report.rejected:
        print(f"  skipped {r.source}: {r.reason}", file=sys.stderr)
    for w in report.warnings:
        print(f"  warning: {w}", file=sys.stderr)
    if report.documents == 0 and report.rejected:
        print(f"error: nothing was ingested: all {len(report.rejected)} item(s) were skipped (reasons above)", file=sys.stderr)
        return 2
    return 0


def cmd_read(args: argparse.Namespace) -> int:
    ops, me = _ops(args)
    result = ops.read(me, args.uri, args.level, 0, 10**12)
    if args.json:
        print(json.dumps(result.model_dump(mode="json"), indent=2, ensure_ascii=False))
    else:
        print(f"# {result.title}  [L{int(result.level)} of {result.kind} {result.uri}]\n")
        print(result.text)
    return 0


def cmd_rm(args: argparse.Namespace) -> int:
    ops, me = _ops(args)
    done = ops.delete_documents(me, args.uri)
    print(f"removed {args.uri}: {done.removed} records deleted")
    return 0


def _find_options(args: argparse.Namespace) -> dict[str, Any]:
    options: dict[str, Any] = {"include_provenance": args.explain, "collapse_chunks": args.collapse_chunks}
    if args.limit is not None:
        options["limit"] = args.limit
    if args.mode:
        options["mode"] = args.mode
    if args.type:
        options["context_type"] = args.type
    if getattr(args, "user", None):
        options["user"] = args.user
    if args.target:
        options["target_uris"] = tuple(args.target)
    if args.filter:
        try:
            options["filter"] = json.loads(args.filter)
        except json.JSONDecodeError as exc:
            raise RequestError(f"--filter is not valid JSON: {exc.msg} at character {exc.pos}") from None
    if args.hybrid is not None:
        options["hybrid"] = args.hybrid
    if getattr(args, "rerank", None) is not None:
        options["rerank"] = args.rerank
    return options


def _print_result(result: Any, args: argparse.Namespace) -> None:
    if args.json:
        print(json.dumps(result.to_dict(include_provenance=args.explain), indent=2, ensure_ascii=False))
    else:
        print_table(result, show_provenance=args.explain)


def cmd_find(args: argparse.Namespace) -> int:
    svc = _service(args)
    result = svc.find(args.query, **_find_options(args))
    _print_result(result, args)
    _say_if_empty(svc, result)
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    svc = _service(args)
    result = svc.search(args.query, session_id=args.session, **_find_options(args))
    _print_result(result, args)
    _say_if_empty(svc, result)
    return 0


def _say_if_empty(svc: Any, result: Any) -> None:
    """No result because nothing was ever ingested for this tenant here: say so, and what to do (stderr)."""
    if result.all() or svc.store.count(svc.tenant) > 0:
        return
    home = svc.services.settings.home
    sys.stdout.flush()
    print(f"note: the home {str(home)!r} holds nothing for tenant {svc.tenant!r} yet; ingest something first, e.g.\n"
          "  cairn ingest ./examples/handbook --uri cairn://resources/handbook\n"
          "(`make demo` keeps its own home: add --home .cairn/demo to search it)", file=sys.stderr)


def cmd_session(args: argparse.Namespace) -> int:
    ops, me = _ops(args)  # no model or store is loaded unless a commit needs them
    if args.session_command == "new":
        session = ops.create_session(me, args.user)
        print(session.id)
    elif args.session_command == "add":
        msg = ops.append_message(me, args.session_id, args.role, args.content, name=args.name, created_at=args.at)
        print(f"added message {msg.seq} to {args.session_id}")
    elif args.session_command == "list":
        for session in ops.sessions(me, args.user).sessions:
            print(f"{session.id}  messages={session.last_seq}  created={time.strftime('%Y-%m-%d %H:%M', time.gmtime(session.created_at))}")
    elif args.session_command == "commit":
        done = ops.commit(me, args.session_id)
        print(f"committed {args.session_id} through message {done.committed_through}: {done.messages} new messages -> "
              f"{len(done.episodes)} archived turns, {len(done.extracted)} memories ({done.extractor})"
              + (f"; {done.missed} messages were summarised before any commit" if done.missed else ""))
    elif args.session_command == "delete":
        deleted = ops.delete_session(me, args.session_id)
        print(f"deleted {args.session_id}" if deleted else f"no session {args.session_id}")
    else:
        view = ops.get_session(me, args.session_id, args.recent)
        if view.summary:
            print(f"summary: {view.summary}")
        for m in view.recent:
            print(f"{m.seq:>4} {m.role:<9} {m.content}")
    return 0


def cmd_remember(args: argparse.Namespace) -> int:
    metadata: dict[str, str] = {}
    for item in args.meta or []:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise RequestError(f"--meta {item!r}: write KEY=VALUE")
        metadata[key.strip()] = value
    done = _service(args).remember(args.text, args.category, user=args.user, key=args.key, title=args.title,
                                   metadata=metadata or None, source=args.source)
    print(f"{'created' if done.created else ('updated' if done.changed else 'unchanged')} {done.uri}")
    if done.note:
        print(f"note: {done.note}", file=sys.stderr)
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from cairn.api.auth import ApiKeys
    from cairn.api.server import check_bind, default_workers, serve

    if args.workers < 0:
        raise RequestError(f"--workers {args.workers}: give the number of processes, or 0 for one per core")
    keys = ApiKeys.load(file=args.api_keys)
    check_bind(args.host, keys)
    services = _services(args)
    who = "API keys" if keys else f"no API keys: every request acts as tenant {services.settings.tenant!r}"
    print(f"cairn serve: loading the store and the embedder ({who}) ...", file=sys.stderr, flush=True)
    serve(services, host=args.host, port=args.port, keys=keys, log_level=args.log_level,
          ready=lambda url: print(f"cairn serve: listening on {url} (OpenAPI: {url}/v1/openapi.json); Ctrl-C stops",
                                  file=sys.stderr, flush=True),
          workers=args.workers or default_workers(),
          spec={"settings": {"home": args.home, "tenant": args.tenant}, "api_keys": args.api_keys})
    return 0


def cmd_reindex(args: argparse.Namespace) -> int:
    from cairn.engine.reindex import reindex

    services = _services(args)
    tenants = [t.strip() for t in (args.tenants or services.settings.tenant).split(",") if t.strip()]
    print(f"Reindexing {', '.join(tenants)} with {services.embedder.name} into a new index ...", file=sys.stderr)
    shown: dict[str, int] = {}

    def progress(stage: str, done: int, total: int) -> None:  # a line per tenth (and the last)
        tenth = done * 10 // total if total else 10
        if sys.stderr.isatty() or shown.get(stage, -1) < tenth:
            shown[stage] = tenth
            end = "\r" if sys.stderr.isatty() and done < total else "\n"
            print(f"  {stage}: {done}/{total} records", end=end, file=sys.stderr, flush=True)

    report = reindex(services, tenants, progress, target=args.target, force=args.force)
    print(report.summary())
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="cairn", description="Context retrieval for AI agents.")
    p.add_argument("--home", help="where the embedded store lives (env CAIRN_HOME, default .cairn)")
    p.add_argument("--tenant", help="tenant to act as (env CAIRN_TENANT, default 'default')")
    sub = p.add_subparsers(dest="command", required=True)

    ing = sub.add_parser(
        "ingest", help="ingest a folder (text, Markdown, JSON, code, CSV, e-mail; PDF, HTML, Office, YAML/XML with "
        "cairn-context[docs]), an S3 prefix, a BEIR corpus or web pages; re-ingesting syncs")
    ing.add_argument("path", nargs="?", help="a folder, a file, or s3://BUCKET/PREFIX (read as a folder; AWS credentials "
                     "from the environment or profile)")
    ing.add_argument("--url", action="append", help="a web page to fetch (repeatable; robots.txt is respected)")
    ing.add_argument("--sitemap", help="a sitemap whose pages to fetch")
    ing.add_argument("--chunk-size", type=int, help="characters per chunk at most (default 1500)")
    ing.add_argument("--chunk-overlap", type=int, help="characters carried into the next piece of a long section (default 200)")
    ing.add_argument("--parse-workers", type=int, help="processes parsing files in parallel (default 1)")
    ing.add_argument("--uri", required=True, help="root URI, e.g. cairn://resources/handbook")
    ing.add_argument(
        "--format", choices=["folder", "beir"], default="folder",
        help="folder: Markdown/text/JSON files; beir: corpus.jsonl placed by metadata.path or _id (default folder)",
    )
    ing.add_argument(
        "--dir-title", action="append", metavar="RULE",
        help="directory titles from metadata: DEPTH=TEMPLATE or GLOB=TEMPLATE, e.g. "
        "'2={entity_name} ({domain})' or '*/*/review=Reviews of {entity_name}' (repeatable)",
    )
    ing.add_argument(
        "--leaf-title", action="append", metavar="RULE",
        help="leaf titles from their metadata, GLOB=TEMPLATE over the leaf's path, where {title} is its "
        "own title, e.g. '*/*/faq/*={entity_name} — {title}' (repeatable)",
    )
    ing.set_defaults(func=cmd_ingest)

    rd = sub.add_parser("read", help="read a URI progressively: L0 abstract, L1 overview, L2 full body")
    rd.add_argument("uri")
    rd.add_argument("--level", type=int, choices=[0, 1, 2], default=0)
    rd.add_argument("--json", action="store_true", help="print the result as JSON")
    rd.set_defaults(func=cmd_read)

    rm = sub.add_parser("rm", help="delete a directory or file (and everything below it)")
    rm.add_argument("uri")
    rm.set_defaults(func=cmd_rm)

    for name, help_ in (
        ("find", "find context for one query (no session, no planning; quick mode by default)"),
        ("search", "plan with a session, then search (thinking mode and rerank by default)"),
    ):
        f = sub.add_parser(name, help=help_)
        f.add_argument("query")
        if name == "search":
            f.add_argument("--session", help="session id (from `cairn session new`)")
        f.add_argument("--limit", type=int, help="results per typed query (default CAIRN_DEFAULT_LIMIT, 5)")
        f.add_argument("--mode", choices=["quick", "thinking", "auto"],
                       help="quick: one search; thinking: hierarchical; auto (search's default): thinking, or quick "
                            "when the conversation is searched with the turn")
        f.add_argument("--type", choices=["memory", "resource", "skill"])
        f.add_argument("--user", help="search this end user's memories and skills too")
        f.add_argument("--target", action="append", help="search only under this URI (repeatable)")
        f.add_argument("--filter", help='Mongo-style filter as JSON, e.g. \'{"level": 2}\'')
        f.add_argument("--rerank", action=argparse.BooleanOptionalAction, default=None, help="rerank the candidates")
        f.add_argument("--hybrid", action=argparse.BooleanOptionalAction, default=None,
                       help="fuse dense and keyword scores (default: find yes, search no; CAIRN_FIND_HYBRID, CAIRN_SEARCH_HYBRID)")
        f.add_argument("--all-chunks", dest="collapse_chunks", action="store_false", default=True,
                       help="list every matching chunk of a document, not only its best one")
        f.add_argument("--json", action="store_true", help="print the result as JSON")
        f.add_argument("--explain", action="store_true", help="show provenance: how each match was found")
        f.set_defaults(func=cmd_find if name == "find" else cmd_search)

    ses = sub.add_parser("session", help="conversation sessions: new, add, show")
    ses_sub = ses.add_subparsers(dest="session_command", required=True)
    new = ses_sub.add_parser("new", help="create a session and print its id")
    new.add_argument("--user", help="the end user the session belongs to")
    add = ses_sub.add_parser("add", help="append a message")
    add.add_argument("session_id")
    add.add_argument("content")
    add.add_argument("--role", default="user", choices=["user", "assistant"])
    add.add_argument("--name", help="who said it")
    add.add_argument("--at", type=float, help="when it was said (epoch seconds; default now)")
    commit = ses_sub.add_parser("commit", help="turn the session's new messages into memories of its user")
    commit.add_argument("session_id")
    show = ses_sub.add_parser("show", help="print the summary and recent messages")
    show.add_argument("session_id")
    show.add_argument("--recent", type=int, default=20)
    delete = ses_sub.add_parser("delete", help="delete a session and its messages")
    delete.add_argument("session_id")
    listing = ses_sub.add_parser("list", help="list a user's sessions, newest first")
    listing.add_argument("--user", required=True)
    ses.set_defaults(func=cmd_session)

    rem = sub.add_parser("remember", help="add or update one memory of an end user (its siblings stay)")
    rem.add_argument("text")
    rem.add_argument("--user", required=True, help="the end user the memory is about")
    rem.add_argument("--category", help="e.g. preferences, profile, events (default: profile)")
    rem.add_argument("--key", help="the memory's name in its category (default: from the text)")
    rem.add_argument("--title")
    rem.add_argument("--meta", action="append", metavar="KEY=VALUE", help="metadata (repeatable)")
    rem.add_argument("--source", help="where it comes from (a URL, a message id)")
    rem.set_defaults(func=cmd_remember)

    srv = sub.add_parser("serve", help="serve the /v1 HTTP API on this machine (the same routes as the deployed API)")
    srv.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1; others need API keys)")
    srv.add_argument("--port", type=int, default=8080)
    srv.add_argument("--api-keys", metavar="FILE",
                     help='keys file made by `cairn keys create`: {"<key>": {"tenant", "role", "user"}} '
                          '(env CAIRN_API_KEYS_FILE or CAIRN_API_KEYS)')
    srv.add_argument("--log-level", default="warning", choices=["critical", "error", "warning", "info", "debug"])
    srv.add_argument("--workers", type=int, default=0, metavar="N",
                     help="processes serving the one home (default 0: one per core)")
    srv.set_defaults(func=cmd_serve)

    from cairn.cli.access import add_parsers as add_access_parsers
    from cairn.mcp import add_parser as add_mcp_parser

    add_mcp_parser(sub)
    add_access_parsers(sub)

    rx = sub.add_parser("reindex", help="re-embed a tenant with the configured embedder into a new index and switch "
                        "to it (blue/green; docs/reindex.md)")
    rx.add_argument("--tenants", help="comma-separated tenants (default: --tenant); OpenSearch and Pinecone indexes "
                    "serve every tenant with one embedder, so name them all")
    rx.add_argument("--target", help="where the new index goes: a folder (local, default <home>/reindex), an index "
                    "name (OpenSearch, default <index>-<embedder tag>) or the host of an index you created (Pinecone)")
    rx.add_argument("--force", action="store_true", help="re-embed even when the index already holds this embedder")
    rx.set_defaults(func=cmd_reindex)

    demo = sub.add_parser("demo", help="ingest cairn's docs and answer a few questions")
    demo.add_argument("--docs", help="folder to ingest (default: cairn's docs/)")
    demo.add_argument("--limit", type=int, default=3)
    demo.add_argument("--question", action="append")
    demo.set_defaults(func=cmd_demo)
    return p


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    args = build_parser().parse_args(argv)
    if not (os.environ.get("CAIRN_LOG_LEVEL") or os.environ.get("POWERTOOLS_LOG_LEVEL")):
        from cairn.core.logging import configure_logging

        # a command prints its answer; warnings and errors only on stderr. `cairn serve` logs its requests.
        configure_logging(level="INFO" if args.command == "serve" else "WARNING")
    try:
        return args.func(args)
    except CairnError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `cairn ... | head`: the reader left; nothing more to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as exc:  # a bug: say so in one line; the trace only on request
        if os.environ.get("CAIRN_DEBUG") == "1":
            raise
        print(f"error: internal error ({type(exc).__name__}: {exc}); rerun with CAIRN_DEBUG=1 for the traceback", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
