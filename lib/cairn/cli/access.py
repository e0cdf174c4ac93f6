"""``cairn keys``, ``cairn user``, ``cairn memories``, ``cairn forget`` and ``cairn context``.

    cairn keys create --tenant acme --role reader           a new API key (printed once; stored as a hash)
    cairn keys create --tenant acme --user ann              an end user's key (role user)
    cairn keys list                                         the keys of the file: tenant, role, user
    cairn memories --user ann [--category preferences]      what cairn remembers about a user
    cairn forget cairn://user/ann/memories/preferences/tea  delete one memory (or a category)
    cairn user export ann > ann.json                        everything cairn holds about a user
    cairn user erase ann                                    erase it all (sessions, memories, skills)
    cairn context "QUESTION" [--session ID] [--budget 300]  a prompt-ready block within a token budget

Each command calls the application layer as the tenant's admin, like the rest of the CLI.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import secrets
from pathlib import Path
from typing import Any

from cairn.app.principal import ROLES
from cairn.core.errors import ConfigError, RequestError
from cairn.inprocess import Cairn

KEY_PREFIX = "cairn_"


def keys_file(args: argparse.Namespace) -> Path:
    """The keys file: --file, else CAIRN_API_KEYS_FILE, else <home>/api-keys.json."""
    chosen = getattr(args, "file", None) or os.environ.get("CAIRN_API_KEYS_FILE")
    if chosen:
        return Path(chosen)
    home = Path(args.home or os.environ.get("CAIRN_HOME") or ".cairn")
    return home / "api-keys.json"


def _load(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ConfigError(f"the keys file {str(path)!r} is not valid JSON ({exc}); fix or move it") from None
    if not isinstance(data, dict):
        raise ConfigError(f"the keys file {str(path)!r} must hold a JSON object")
    return data


def cmd_keys(args: argparse.Namespace) -> int:
    from cairn.api.auth import ApiKeys

    path = keys_file(args)
    entries = _load(path)
    if args.keys_command == "create":
        role = args.role or ("user" if args.user else "admin")
        if (role == "user") != bool(args.user):
            raise RequestError("--user goes with --role user (an end user's key), and --role user needs --user")
        key = KEY_PREFIX + secrets.token_urlsafe(32)
        entry = {"tenant": args.tenant, "role": role, **({"user": args.user} if args.user else {})}
        if args.name:
            entry["name"] = args.name
        digest = "sha256:" + hashlib.sha256(key.encode()).hexdigest()
        ApiKeys({digest: entry})  # validates the entry (names, role) before anything is written
        entries[digest] = entry
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(entries, indent=2) + "\n", encoding="utf-8")
        os.chmod(tmp, 0o600)
        tmp.replace(path)
        print(key)
        print(f"# {role} key of tenant {args.tenant!r}" + (f" for user {args.user!r}" if args.user else "")
              + f"; stored as its SHA-256 in {path} (this is the only time the key is shown).\n"
              f"# serve with: cairn serve --api-keys {path}", flush=True)
        return 0
    if entries:
        ApiKeys(entries)  # a broken file is named, not listed
    else:
        print(f"no keys in {path}; create one with: cairn keys create --tenant <tenant> --role <{'|'.join(ROLES)}>")
        return 0
    for digest, entry in entries.items():
        if isinstance(entry, str):
            entry = {"tenant": entry}
        role = entry.get("role") or ("user" if entry.get("user") else "admin")
        shown = digest[:19] + "…" if digest.startswith("sha256:") else digest[:4] + "… (stored in clear: re-create it)"
        print(f"{shown}  tenant={entry['tenant']}  role={role}" + (f"  user={entry['user']}" if entry.get("user") else "")
              + (f"  name={entry['name']}" if entry.get("name") else ""))
    return 0


def cmd_memories(args: argparse.Namespace) -> int:
    from cairn.cli.common import _ops

    ops, me = _ops(args)
    listing = ops.memories(me, args.user, args.category)
    if args.json:
        print(json.dumps(listing.model_dump(mode="json"), indent=2, ensure_ascii=False))
        return 0
    if not listing.memories:
        print(f"no memories of {args.user}")
    for m in listing.memories:
        print(f"[{m.category}] {' '.join(m.text.split())[:200]}\n    {m.uri}")
    return 0


def cmd_forget(args: argparse.Namespace) -> int:
    from cairn.cli.common import _ops

    ops, me = _ops(args)
    done = ops.forget(me, args.uri)
    print(f"forgot {done.uri}: {done.removed} records deleted")
    return 0


def cmd_user(args: argparse.Namespace) -> int:
    from cairn.cli.common import _ops

    ops, me = _ops(args)
    if args.user_command == "export":
        print(json.dumps(ops.export_user(me, args.user).model_dump(mode="json"), indent=2, ensure_ascii=False))
        return 0
    if not args.yes:
        raise RequestError(f"erasing deletes every session, memory and skill of {args.user!r}; add --yes to confirm")
    done = ops.erase_user(me, args.user)
    print(f"erased {args.user}: {done.records} records, {done.sessions} sessions, {done.messages} messages")
    return 0


def cmd_context(args: argparse.Namespace) -> int:
    from cairn.cli.common import _services

    services = _services(args)
    options: dict[str, Any] = {}
    if args.limit is not None:
        options["limit"] = args.limit
    if args.user:
        options["user"] = args.user
    block = Cairn(services).context(args.query, args.session, budget_tokens=args.budget, **options)
    if args.json:
        print(json.dumps(block.model_dump(mode="json"), indent=2, ensure_ascii=False))
    else:
        print(block.text or "(nothing relevant found)")
        print(f"\n# {block.tokens} of {block.budget_tokens} tokens")
    return 0


def add_parsers(sub: Any) -> None:
    keys = sub.add_parser("keys", help="API keys of cairn serve / cairn mcp: create one (per role), list them")
    ks = keys.add_subparsers(dest="keys_command", required=True)
    create = ks.add_parser("create", help="create a key (printed once; the file keeps its SHA-256)")
    create.add_argument("--tenant", required=True)
    create.add_argument("--role", choices=ROLES, help="admin (default), writer, reader, or user (with --user)")
    create.add_argument("--user", help="the end user of a user key")
    create.add_argument("--name", help="a label to recognise the key by")
    create.add_argument("--file", help="the keys file (default CAIRN_API_KEYS_FILE, else <home>/api-keys.json)")
    listing = ks.add_parser("list", help="list the keys of the file (hashes only)")
    listing.add_argument("--file", help="the keys file (default CAIRN_API_KEYS_FILE, else <home>/api-keys.json)")
    keys.set_defaults(func=cmd_keys)

    mem = sub.add_parser("memories", help="list what cairn remembers about a user")
    mem.add_argument("--user", required=True)
    mem.add_argument("--category")
    mem.add_argument("--json", action="store_true")
    mem.set_defaults(func=cmd_memories)

    forget = sub.add_parser("forget", help="delete one memory of a user (or a category)")
    forget.add_argument("uri", help="cairn://user/<user>/memories/<category>[/<key>]")
    forget.set_defaults(func=cmd_forget)

    user = sub.add_parser("user", help="one user's data: export it, or erase it")
    us = user.add_subparsers(dest="user_command", required=True)
    export = us.add_parser("export", help="print everything cairn holds about the user as JSON")
    export.add_argument("user")
    erase = us.add_parser("erase", help="erase everything cairn holds about the user")
    erase.add_argument("user")
    erase.add_argument("--yes", action="store_true", help="confirm")
    user.set_defaults(func=cmd_user)

    ctx = sub.add_parser("context", help="a prompt-ready block of context for a question, within a token budget")
    ctx.add_argument("query")
    ctx.add_argument("--session", help="the conversation to plan with")
    ctx.add_argument("--user", help="whose memories to include")
    ctx.add_argument("--budget", type=int, help="tokens at most (default CAIRN_CONTEXT_BUDGET_TOKENS, 1500)")
    ctx.add_argument("--limit", type=int)
    ctx.add_argument("--json", action="store_true")
    ctx.set_defaults(func=cmd_context)
