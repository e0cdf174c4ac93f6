"""The ``cairn`` command.

    cairn ingest PATH --uri cairn://resources/...   build the L0/L1/L2 tree of a folder
    cairn find "QUERY" [--limit N] [--json]         search it
    cairn demo                                       ingest cairn's own docs and ask about them

Every cairn error ends as one line on stderr and exit status 2; never a stack trace.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import textwrap
from pathlib import Path
from typing import Any

from .errors import CairnError, RequestError

DEMO_QUESTIONS = (
    "How do I install cairn and try it?",
    "Which filter operators can I use?",
    "What is the difference between L0, L1 and L2?",
)


def _progress(stage: str, done: int, total: int) -> None:
    if sys.stderr.isatty() or os.environ.get("CAIRN_PROGRESS") == "1":
        end = "\n" if done >= total else "\r"
        print(f"  {stage}: {done}/{total} records", end=end, file=sys.stderr, flush=True)


def _service(args: argparse.Namespace) -> Any:
    from .config import load_settings
    from .pipeline import Cairn

    return Cairn.from_settings(load_settings(home=args.home, tenant=args.tenant))


def cmd_ingest(args: argparse.Namespace) -> int:
    path = Path(args.path)
    if not path.exists():
        raise RequestError(f"path {args.path!r} does not exist; give a folder or a file of Markdown/text")
    from . import uri as uris

    uris.context_type_of(args.uri)  # a clear error before any work
    print(f"Ingesting {path} into {args.uri} ...", file=sys.stderr)
    report = _service(args).ingest(path, args.uri, _progress)
    print(
        f"{report.documents} documents -> {report.records} records "
        f"({report.embedded} embedded, {report.unchanged} unchanged) in {report.seconds:.1f}s"
    )
    for r in report.rejected:
        print(f"  skipped {r.source}: {r.reason}", file=sys.stderr)
    return 0


def print_table(result: Any, show_provenance: bool = False) -> None:
    matches = result.all()
    if not matches:
        print("  (no results above the score threshold)")
    for n, m in enumerate(matches, 1):
        print(f"{n:>3}. {m.score:.3f}  L{int(m.level)}  {m.uri}")
        abstract = textwrap.shorten(m.abstract or m.title, width=150, placeholder=" ...")
        print(textwrap.indent(textwrap.fill(abstract, width=100), " " * 17))
    if show_provenance:
        for qr in result.query_results:
            p = qr.provenance()
            stats = p["trace"]["stats"]
            print(
                f"  provenance: mode={stats['mode']} vector_calls={stats['vector_calls']} "
                f"rounds={stats['rounds']} stop={stats['stop_reason']} latency={stats['latency_ms']:.1f}ms"
            )
            for m in p["matches"]:
                print(f"    {m['tier']} {m['reason']:<8} {m['score']:.3f} {m['uri']}")


def cmd_find(args: argparse.Namespace) -> int:
    options: dict[str, Any] = {"limit": args.limit, "include_provenance": args.explain}
    if args.type:
        options["context_type"] = args.type
    if args.target:
        options["target_uris"] = tuple(args.target)
    if args.filter:
        try:
            options["filter"] = json.loads(args.filter)
        except json.JSONDecodeError as exc:
            raise RequestError(f"--filter is not valid JSON: {exc.msg} at character {exc.pos}") from None
    result = _service(args).find(args.query, **options)
    if args.json:
        print(json.dumps(result.to_dict(include_provenance=args.explain), indent=2, ensure_ascii=False))
    else:
        print_table(result, show_provenance=args.explain)
    return 0


def _default_docs() -> Path:
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / "docs" / "getting-started.md").exists():
            return parent / "docs"
    raise RequestError("cannot find cairn's docs/ folder; pass it with --docs PATH")


def cmd_demo(args: argparse.Namespace) -> int:
    docs = Path(args.docs) if args.docs else _default_docs()
    svc = _service(args)
    print(f"== Ingesting cairn's documentation ({docs}) into cairn://resources/cairn-docs")
    report = svc.ingest(docs, "cairn://resources/cairn-docs", _progress)
    print(
        f"   {report.documents} documents -> {report.records} records "
        f"({report.embedded} embedded, {report.unchanged} unchanged) in {report.seconds:.1f}s\n"
    )
    for q in args.question or DEMO_QUESTIONS:
        print(f"== find: {q}")
        print_table(svc.find(q, limit=args.limit, include_provenance=True), show_provenance=True)
        print()
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="cairn", description="Context retrieval for AI agents.")
    p.add_argument("--home", help="where the embedded store lives (env CAIRN_HOME, default .cairn)")
    p.add_argument("--tenant", help="tenant to act as (env CAIRN_TENANT, default 'default')")
    sub = p.add_subparsers(dest="command", required=True)

    ing = sub.add_parser("ingest", help="ingest a folder of Markdown/text files")
    ing.add_argument("path")
    ing.add_argument("--uri", required=True, help="root URI, e.g. cairn://resources/handbook")
    ing.set_defaults(func=cmd_ingest)

    find = sub.add_parser("find", help="find context for one query")
    find.add_argument("query")
    find.add_argument("--limit", type=int, default=5)
    find.add_argument("--type", choices=["memory", "resource", "skill"])
    find.add_argument("--target", action="append", help="search only under this URI (repeatable)")
    find.add_argument("--filter", help='Mongo-style filter as JSON, e.g. \'{"level": 2}\'')
    find.add_argument("--json", action="store_true", help="print the result as JSON")
    find.add_argument("--explain", action="store_true", help="show provenance: how each match was found")
    find.set_defaults(func=cmd_find)

    demo = sub.add_parser("demo", help="ingest cairn's docs and answer a few questions")
    demo.add_argument("--docs", help="folder to ingest (default: cairn's docs/)")
    demo.add_argument("--limit", type=int, default=3)
    demo.add_argument("--question", action="append")
    demo.set_defaults(func=cmd_demo)
    return p


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except CairnError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
