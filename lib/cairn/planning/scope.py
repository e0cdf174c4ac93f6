"""Resolving what a conversation is about to the folder that holds it.

A conversation names what it is about ("the granary", "b and q warehouse"); a tree often
has a folder for it (a customer, a product, a place). Searching inside that folder is what
tells one place's "is there parking?" from another's. :class:`FolderResolver` looks for the
tree's own folder names (:mod:`.names`: titles and shared metadata, any casing, misspelt or
partial) in the query first, then in the messages, most recent first, and returns the first
name found with at least ``min_confidence``; below it, nothing is scoped and the resolution
says which name came closest.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..models import ContextType, QueryPlan
from ..vectorstores import VectorStore
from .names import DEFAULT_MIN_CONFIDENCE, FolderNames, NameMatch

Roots = Callable[[ContextType | None], list[str]]


@dataclass(frozen=True)
class Resolution:
    match: NameMatch | None  # the name the search is scoped to
    closest: NameMatch | None  # the best name found under the confidence, when nothing passed
    min_confidence: float

    @property
    def folders(self) -> tuple[str, ...]:
        return self.match.folders if self.match else ()

    def explain(self, where: Callable[[int], str] = lambda seq: "the query" if seq == 0 else f"message {seq}") -> str:
        if self.match:
            m = self.match
            return (
                f"scoped to {', '.join(m.folders)}: folder name {m.name!r} (said {m.said!r} in {where(m.seq)}, "
                f"confidence {m.confidence:.2f})"
            )
        if self.closest:
            c = self.closest
            return (
                f"not scoped: the closest folder name, {c.name!r} (said {c.said!r} in {where(c.seq)}), has confidence "
                f"{c.confidence:.2f}, under {self.min_confidence:.2f}"
            )
        return "not scoped: no folder name of the tree is mentioned"


class FolderResolver:
    """The folder a text or a conversation names, from the tenant's own folder names."""

    def __init__(
        self,
        store: VectorStore,
        tenant: str,
        embedder: Any = None,  # unused; kept so existing composition code keeps working
        *,
        min_confidence: float = DEFAULT_MIN_CONFIDENCE,
        names: FolderNames | None = None,
        stop_words: Iterable[str] = (),
    ) -> None:
        self.names = names or FolderNames(store, tenant, stop_words=stop_words)
        self.min_confidence = min_confidence
        self.lookups = 0

    def resolve(self, texts: Sequence[tuple[int, str]], roots: list[str]) -> Resolution:
        """``texts``: (message seq, text) in the order to try them (0: the query; then newest first)."""
        closest: NameMatch | None = None
        if roots:
            index = self.names.index(roots)
            self.lookups += 1
            for seq, text in texts:
                found = index.match(text, seq)
                if not found:
                    continue
                if found[0].confidence >= self.min_confidence:
                    return Resolution(found[0], None, self.min_confidence)
                if closest is None or found[0].confidence > closest.confidence:
                    closest = found[0]
        return Resolution(None, closest, self.min_confidence)

    def __call__(self, name: str, roots: list[str]) -> list[str]:
        """The folders ``name`` resolves to with enough confidence (empty when none does)."""
        return list(self.resolve([(0, name)], roots).folders)


def scope_plan(plan: QueryPlan, resolver: FolderResolver, roots: Roots) -> QueryPlan:
    """Scope each typed query that has no targets to the folder its own text names (the names an
    LLM planner wrote into its queries are checked against the tree; unknown names scope nothing)."""
    queries, notes = [], []
    for tq in plan.queries:
        if tq.target_uris:
            queries.append(tq)
            continue
        res = resolver.resolve([(0, tq.query)], roots(tq.context_type))
        notes.append(f"{tq.query!r}: {res.explain(lambda _: 'the planned query')}")
        queries.append(tq.model_copy(update={"target_uris": res.folders}) if res.match else tq)
    if not notes:
        return plan
    return plan.model_copy(update={"queries": tuple(queries), "reasoning": f"{plan.reasoning} [folders: {'; '.join(notes)}]"})
