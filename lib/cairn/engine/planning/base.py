"""What every planner takes and gives: a query (+ a session view) in, a :class:`QueryPlan` out."""

from __future__ import annotations

from typing import Protocol

from cairn.core.models import ContextType, QueryPlan, TypedQuery
from cairn.ports.sessions.base import SessionView


class Planner(Protocol):
    """``plan()`` never raises for a bad model answer: it falls back and says so in the plan."""

    name: str

    def plan(
        self,
        query: str,
        session: SessionView | None = None,
        *,
        context_type: ContextType | None = None,
        target_uris: tuple[str, ...] = (),
    ) -> QueryPlan: ...


def raw_query(query: str, context_type: ContextType | None, target_uris: tuple[str, ...], intent: str = "raw query") -> TypedQuery:
    """The query as it is, across ``context_type`` (None: every type the caller may see)."""
    return TypedQuery(query=query, context_type=context_type, intent=intent, target_uris=target_uris)
