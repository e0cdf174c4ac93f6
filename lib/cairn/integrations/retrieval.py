"""What the frameworks' retrievers share: their options, one call to cairn, and each match as a passage.

A framework's retriever (:mod:`cairn.integrations.langchain`, :mod:`cairn.integrations.llamaindex`)
holds a cairn — the in-process :class:`~cairn.inprocess.Cairn` or a :class:`~cairn.client.CairnClient`,
which answer the same methods — and :class:`RetrievalOptions`. It calls :func:`retrieve` (or
:func:`aretrieve` with an :class:`~cairn.client.AsyncCairnClient`) and turns each :class:`Passage`
into its framework's type. Without a session the call is ``find`` (one query, no planning); with one
it is ``search`` (planned with the conversation, the session's user's memories included). No
framework is imported here.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, model_validator

from cairn.core.errors import RequestError
from cairn.core.kinds import ContextType
from cairn.core.models import FindResponse, FindResult, MatchedContext
from cairn.core.requests import FindRequest, parse_request
from cairn.ports.sessions.base import check_id

Answer = FindResult | FindResponse


class Retrieves(Protocol):
    """The methods a retriever calls: :class:`~cairn.inprocess.Cairn` and :class:`~cairn.client.CairnClient` have them."""

    def find(self, query: str, **options: Any) -> Answer: ...

    def search(self, query: str, session_id: str | None = None, **options: Any) -> Answer: ...


class RetrievesAsync(Protocol):
    """The same methods as coroutines (:class:`~cairn.client.AsyncCairnClient`)."""

    async def find(self, query: str, **options: Any) -> Answer: ...

    async def search(self, query: str, session_id: str | None = None, **options: Any) -> Answer: ...


class RetrievalOptions(BaseModel):
    """What a retriever asks cairn for, checked once by cairn's own request rules."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    limit: int | None = None  # None: the server's default (CAIRN_DEFAULT_LIMIT)
    context_type: ContextType | None = None  # memory, resource or skill; None: every type
    target_uris: tuple[str, ...] = ()  # only under these folders
    filter: dict[str, Any] | None = None  # a Mongo-style filter (docs/filters.md)
    session_id: str | None = None  # search with this conversation instead of find
    explain: bool = True  # ask for provenance: each passage says how it was found

    @model_validator(mode="after")
    def _as_cairn_checks_it(self) -> RetrievalOptions:
        parse_request(FindRequest, {"query": "options", **self.request()})
        if self.session_id is not None:
            check_id("session_id", self.session_id)
        return self

    @classmethod
    def of(cls, **fields: Any) -> RetrievalOptions:
        """The options, or a :class:`~cairn.core.errors.RequestError` naming every bad one and what is allowed."""
        return parse_request(cls, fields)

    def overridden(self, overrides: dict[str, Any]) -> RetrievalOptions:
        """These options with the ones given for one call (``retriever.invoke(q, limit=3)``)."""
        unknown = sorted(set(overrides) - set(RetrievalOptions.model_fields))
        if unknown:
            raise RequestError(f"unknown retrieval option(s) {', '.join(unknown)}; "
                               f"allowed: {', '.join(RetrievalOptions.model_fields)}")
        return self.of(**{**self.model_dump(), **overrides}) if overrides else self

    def request(self) -> dict[str, Any]:
        """The keyword arguments of ``find``/``search`` (the options left unset are the server's)."""
        given: dict[str, Any] = {"limit": self.limit, "filter": self.filter,
                                 "context_type": self.context_type.value if self.context_type else None,
                                 "target_uris": list(self.target_uris) or None,
                                 "include_provenance": self.explain or None}
        return {name: value for name, value in given.items() if value is not None}


@dataclass(frozen=True)
class Passage:
    """One match as a framework document: its text and what it is (``metadata``: uri, title, level,
    score, context_type, tags, citation, explanation)."""

    text: str
    uri: str
    score: float
    metadata: dict[str, Any] = field(default_factory=dict)


def check_cairn(cairn: Any, *, asynchronous: bool = False) -> None:
    """Refuse what cannot serve the retriever, before the first query."""
    finds = getattr(cairn, "find", None)
    if not callable(finds) or not callable(getattr(cairn, "search", None)):
        raise RequestError(f"{type(cairn).__name__} is not a cairn; pass cairn.Cairn or cairn.CairnClient"
                           + (" (cairn.client.AsyncCairnClient for the async path)" if asynchronous else ""))
    if inspect.iscoroutinefunction(finds) != asynchronous:
        raise RequestError("an AsyncCairnClient goes in async_cairn, a Cairn or CairnClient in cairn"
                           if not asynchronous else "async_cairn takes an AsyncCairnClient; a Cairn or CairnClient goes in cairn")


def retrieve(cairn: Retrieves, query: str, options: RetrievalOptions) -> list[Passage]:
    """``find`` (or ``search`` with the options' session) through ``cairn``, best first."""
    if options.session_id is not None:
        return passages(cairn.search(query, options.session_id, **options.request()), options.explain)
    return passages(cairn.find(query, **options.request()), options.explain)


async def aretrieve(cairn: RetrievesAsync, query: str, options: RetrievalOptions) -> list[Passage]:
    """:func:`retrieve` through an asynchronous client."""
    if options.session_id is not None:
        return passages(await cairn.search(query, options.session_id, **options.request()), options.explain)
    return passages(await cairn.find(query, **options.request()), options.explain)


def passages(answer: Answer, explain: bool = True) -> list[Passage]:
    """Every match of ``answer`` (memories, resources, skills), best first, with its explanation."""
    why = explanations(answer) if explain else {}
    return [Passage(match.text or match.abstract, match.uri, match.score, _metadata(match, why.get(match.uri)))
            for match in answer.all()]


def _metadata(match: MatchedContext, explanation: dict[str, Any] | None) -> dict[str, Any]:
    return {"uri": match.uri, "title": match.title, "level": int(match.level), "score": match.score,
            "context_type": ContextType(match.context_type).value, "tags": list(match.tags),
            "citation": dict(match.citation) if match.citation else None, "explanation": explanation}


def explanations(answer: Answer) -> dict[str, dict[str, Any]]:
    """How each URI of ``answer`` was found: the typed query that found it, its tier and reason, the
    folders searched, the retrieval mode, why the search stopped, and which planner ran."""
    if isinstance(answer, FindResponse):
        provenance = answer.provenance or []
    else:
        provenance = [result.provenance() for result in answer.query_results]
    planner = answer.query_plan.planner if answer.query_plan is not None else None
    found: dict[str, dict[str, Any]] = {}
    for typed in provenance:
        stats = typed.get("trace", {}).get("stats", {})
        for match in typed.get("matches", []):
            found.setdefault(match["uri"], {
                "query": typed.get("query", {}).get("query"), "tier": match.get("tier"),
                "reason": match.get("reason"), "searched_directories": list(typed.get("searched_directories", [])),
                "mode": stats.get("mode"), "stop_reason": stats.get("stop_reason"), "planner": planner,
            })
    return found
