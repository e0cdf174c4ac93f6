"""Which part of the tree a typed query may search."""

from __future__ import annotations

from typing import Any

from .. import uri as uris
from ..models import ContextType


def roots_for(context_type: ContextType | None, target_uris: tuple[str, ...], user: str | None) -> list[str]:
    """The target URIs if given, else the default roots of the type (or of every type)."""
    if target_uris:
        return list(target_uris)
    types = [context_type] if context_type else list(ContextType)
    return [r for t in types for r in uris.default_roots(t, user)]


def scope_filter(roots: list[str], user_filter: dict[str, Any] | None) -> dict[str, Any]:
    """Anywhere under one of ``roots`` (the root itself excluded), and the caller's filter."""
    scope: dict[str, Any] = {"ancestors": {"$in": roots}}
    return {"$and": [scope, user_filter]} if user_filter else scope
