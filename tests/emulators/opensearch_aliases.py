"""Index aliases for the OpenSearch emulator: ``POST /_aliases`` (add, remove, remove_index, applied
atomically), ``GET|HEAD /_alias/{name}``, and every index route resolving an alias to its index.

As in OpenSearch: an alias names one index here (no write index among several), it cannot share its
name with an index, and ``remove_index`` in the same call lets an alias take the name of the index
it removes (the documented way to swap a concrete index for an alias).
"""

from __future__ import annotations

import json
from typing import Any

from .opensearch_index import ApiError

Handled = tuple[int, Any]
ROUTES = [
    ("POST", r"^/_aliases$", "update_aliases"),
    ("GET|HEAD", r"^/_alias/(?P<alias>[^/]+)$", "get_alias"),
]
_RESOLVED_EXCEPT = {"create_index", "delete_index"}


def resolve(emu: Any, route: str, args: dict[str, str]) -> dict[str, str]:
    """``args`` with an alias in ``index`` replaced by the index it names."""
    name = args.get("index")
    if name is None or route in _RESOLVED_EXCEPT:
        return args
    return {**args, "index": emu.state.aliases.get(name, name)}


def concrete(emu: Any, name: str) -> str:
    return emu.state.aliases.get(name, name)


def update_aliases(emu: Any, args: dict[str, str], params: dict[str, str], body: bytes) -> Handled:
    actions = (json.loads(body or b"{}").get("actions")) or []
    if not isinstance(actions, list) or not actions:
        raise ApiError(400, "action_request_validation_exception", "Validation Failed: 1: no actions specified;")
    indices, aliases = dict(emu.state.indices), dict(emu.state.aliases)
    for action in actions:  # remove_index first: its name may become an alias in this call
        (kind, spec), = action.items()
        if kind == "remove_index":
            _must_exist(indices, spec.get("index"))
            del indices[spec["index"]]
    for action in actions:
        (kind, spec), = action.items()
        if kind == "add":
            _must_exist(indices, spec.get("index"))
            if spec.get("alias") in indices:
                raise ApiError(400, "invalid_alias_name_exception",
                               f"Invalid alias name [{spec['alias']}]: an index or data stream exists with the same name as the alias")
            aliases[spec["alias"]] = spec["index"]
        elif kind == "remove":
            if aliases.get(spec.get("alias")) != spec.get("index"):
                raise ApiError(404, "aliases_not_found_exception", f"aliases [{spec.get('alias')}] missing")
            del aliases[spec["alias"]]
        elif kind != "remove_index":
            raise ApiError(400, "parsing_exception", f"Unknown action [{kind}]")
    emu.state.indices, emu.state.aliases = indices, {a: i for a, i in aliases.items() if i in indices}
    return 200, {"acknowledged": True}


def get_alias(emu: Any, args: dict[str, str], params: dict[str, str], body: bytes) -> Handled:
    index = emu.state.aliases.get(args["alias"])
    if index is None:
        return 404, {"error": f"alias [{args['alias']}] missing", "status": 404}
    return 200, {index: {"aliases": {args["alias"]: {}}}}


def _must_exist(indices: dict[str, Any], name: Any) -> None:
    if name not in indices:
        raise ApiError(404, "index_not_found_exception", f"no such index [{name}]", extra={"index": str(name)})


HANDLERS = {"update_aliases": update_aliases, "get_alias": get_alias}
