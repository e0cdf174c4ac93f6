"""Which part of the tree a typed query may search."""

from __future__ import annotations

from typing import Any, Literal

from cairn.core import uri as uris
from cairn.core.models import ContextType


def roots_for(context_type: ContextType | None, target_uris: tuple[str, ...], user: str | None) -> list[str]:
    """The target URIs if given, else the default roots of the type (or of every type)."""
    if target_uris:
        return list(target_uris)
    types = [context_type] if context_type else list(ContextType)
    return [r for t in types for r in uris.default_roots(t, user)]


def keyword_statistics(roots: list[str]) -> Literal["tenant", "filter"]:
    """Whose words score a keyword search under ``roots``: one user's own data (every root under
    ``cairn://user/{user}/``) is scored with the statistics of what the search may match, so other
    users' words do not shape it (a name that runs through all of one user's conversations says
    nothing about which of them answers); anything else with the tenant's. Measured on long
    conversations kept as memories, and on a handbook where it changes nothing: benchmarks/README.md,
    issue 19."""
    owners = {uris.owner_of(r) for r in roots}
    return "filter" if roots and len(owners) == 1 and None not in owners else "tenant"


def scope_filter(roots: list[str], user_filter: dict[str, Any] | None) -> dict[str, Any]:
    """Anywhere under one of ``roots`` (the root itself excluded), and the caller's filter."""
    scope: dict[str, Any] = {"ancestors": {"$in": roots}}
    return {"$and": [scope, user_filter]} if user_filter else scope
