"""Typed data that crosses module and workflow-state boundaries."""

from __future__ import annotations

import hashlib
import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from cairn.core import uri as uris
from cairn.core.kinds import ContextType, Level

MetadataValue = str | int | float | bool | list[str]

MAX_ABSTRACT_CHARS = 2000
MAX_TEXT_CHARS = 8000
MAX_MATCH_TEXT_CHARS = 1200  # the text a match carries: enough to answer from, bounded


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TypedQuery(_Frozen):
    query: str
    context_type: ContextType | None = None  # None: every type the caller may see
    intent: str = ""
    priority: int = Field(default=3, ge=1, le=5)
    target_uris: tuple[str, ...] = ()  # a wall: only under these (what the caller asked for)
    # evidence, not a wall: what the conversation is about. Content under these folders ranks
    # higher by up to ``boost`` (0..1: how sure the planner is); the rest of the tenant still competes.
    boost_uris: tuple[str, ...] = ()
    boost: float = Field(default=0.0, ge=0.0, le=1.0)
    # a match inside ``boost_uris`` ranks first when it scores at least this share of the way from the
    # query's background (its 10th match) to its best match anywhere (None: retrieval's default,
    # :data:`cairn.engine.retrieval.boost.GOOD_RATIO` of the best; planners set it for topic folders)
    boost_good: float | None = Field(default=None, ge=0.0, le=1.0)
    # how much this typed query's scores count when its matches are merged with the plan's others
    weight: float = Field(default=1.0, gt=0.0, le=1.0)


class QueryPlan(_Frozen):
    reasoning: str = ""
    queries: tuple[TypedQuery, ...] = ()
    planner: str = "raw"
    fallback: bool = False
    fallback_reason: str | None = None


def record_id(tenant: str, uri: str, level: int) -> str:
    """Stable id of a context record: a hash of tenant, URI and level."""
    return hashlib.sha256(f"{tenant}\x00{uri}\x00{int(level)}".encode()).hexdigest()[:32]


class ContextRecord(BaseModel):
    """One vector: a directory's L0 or L1, or a leaf's L2."""

    model_config = ConfigDict(extra="forbid")

    id: str
    tenant: str
    uri: str
    parent_uri: str | None
    ancestors: list[str]
    depth: int
    level: Level
    context_type: ContextType
    owner: str | None = None
    title: str = ""
    abstract: str = ""
    text: str = ""
    tags: list[str] = Field(default_factory=list)
    metadata: dict[str, MetadataValue] = Field(default_factory=dict)
    created_at: float = 0.0
    updated_at: float = 0.0
    active_count: int = 0
    content_hash: str = ""
    vector: list[float] | None = None

    @model_validator(mode="before")
    @classmethod
    def _derive_tree_fields(cls, data: Any) -> Any:
        """A record given by reference (tenant, URI, level: how workflow states carry candidates)
        gets its id, parent, ancestors, depth, type and owner derived from the URI."""
        if isinstance(data, dict) and "uri" in data and "ancestors" not in data:
            uri = data["uri"]
            data = {
                "parent_uri": uris.parent(uri), "ancestors": uris.ancestors(uri), "depth": uris.depth(uri),
                "context_type": uris.context_type_of(uri), "owner": uris.owner_of(uri), **data,
            }
            if "id" not in data and "tenant" in data and "level" in data:
                data["id"] = record_id(data["tenant"], uri, int(data["level"]))
        return data

    @field_validator("abstract")
    @classmethod
    def _bound_abstract(cls, v: str) -> str:
        return v[:MAX_ABSTRACT_CHARS]

    @field_validator("text")
    @classmethod
    def _bound_text(cls, v: str) -> str:
        return v[:MAX_TEXT_CHARS]

    @classmethod
    def build(cls, *, tenant: str, uri: str, level: int, **fields: Any) -> ContextRecord:
        """Build a record, deriving id, parent, ancestors, depth, type and owner from the URI."""
        return cls(
            id=record_id(tenant, uri, level),
            tenant=tenant,
            uri=uri,
            parent_uri=uris.parent(uri),
            ancestors=uris.ancestors(uri),
            depth=uris.depth(uri),
            level=Level(level),
            context_type=uris.context_type_of(uri),
            owner=uris.owner_of(uri),
            **fields,
        )

    def without_vector(self) -> ContextRecord:
        return self.model_copy(update={"vector": None})

    @property
    def rerank_text(self) -> str:
        """What a reranker reads: a leaf's text, or a directory's title and abstract."""
        if self.level is Level.DETAIL and self.text:
            return f"{self.title}\n{self.text}" if self.title else self.text
        return f"{self.title}\n{self.abstract}" if self.title else self.abstract


ScoreRule = Literal["weighted_sum", "noisy_or", "max", "min"]
SCORE_RULES: dict[str, str] = {
    "weighted_sum": "Σ weight·score",
    "noisy_or": "1 − Π(1 − weight·score), each weight·score held to 0..1",
    "max": "the largest weight·score",
    "min": "the smallest weight·score",
}


class ScoreTerm(_Frozen):
    """One arm of a combined score: what it is, its score, and the weight it counts with."""

    label: str = Field(description="what the arm is: a typed query, the reranker, hotness, ...")
    score: float
    weight: float = 1.0
    explanation: ScoreExplanation | None = Field(default=None, description="how this arm's own score was combined")


class ScoreExplanation(_Frozen):
    """How a score was combined from its arms: ``rule`` over ``terms`` gives ``score`` (rounded to
    6 decimals), so anyone can recompute it from the numbers beside it (:func:`combine_scores`)."""

    rule: ScoreRule
    terms: tuple[ScoreTerm, ...]
    score: float
    note: str = ""

    @classmethod
    def of(cls, rule: ScoreRule, terms: list[ScoreTerm] | tuple[ScoreTerm, ...], note: str = "") -> ScoreExplanation:
        """The explanation of ``rule`` over ``terms``, its score computed from them."""
        return cls(rule=rule, terms=tuple(terms), score=round(combine_scores(rule, terms), 6), note=note)

    def formula(self) -> str:
        """``1 − (1 − 0.639·1)·(1 − 0.659·0.52) = 0.829``: the arithmetic in one line."""
        parts = [f"{t.score:.3f}·{t.weight:.3g}" for t in self.terms]
        if self.rule == "weighted_sum":
            body = " + ".join(parts)
        elif self.rule == "noisy_or":
            body = "1 − " + "·".join(f"(1 − {p})" for p in parts)
        else:
            body = f"{self.rule}({', '.join(parts)})"
        return f"{body} = {self.score:.3f}"


def combine_scores(rule: ScoreRule, terms: list[ScoreTerm] | tuple[ScoreTerm, ...]) -> float:
    """What ``rule`` makes of ``terms`` (:data:`SCORE_RULES`)."""
    weighted = [t.weight * t.score for t in terms]
    if rule == "weighted_sum":
        return sum(weighted)
    if rule == "noisy_or":
        miss = 1.0
        for value in weighted:
            miss *= 1.0 - min(max(value, 0.0), 1.0)
        return 1.0 - miss
    if not weighted:
        return 0.0
    return max(weighted) if rule == "max" else min(weighted)


ScoreTerm.model_rebuild()


class Candidate(_Frozen):
    """A record found by retrieval, with the score it was found at and why."""

    record: ContextRecord
    score: float
    reason: str = "vector"  # vector | keyword | hybrid | child-of:<dir> | rerank
    round: int = 0
    explanation: ScoreExplanation | None = None  # how ``score`` was combined, where a stage combined it

    @property
    def uri(self) -> str:
        return self.record.uri


class MatchedContext(_Frozen):
    context_type: ContextType
    uri: str  # display URI
    level: Level
    score: float
    abstract: str
    tags: tuple[str, ...] = ()
    title: str = ""
    citation: dict[str, MetadataValue] | None = None  # where in its document: page, heading_path, start, end, ...
    # the matched text itself (a leaf's chunk, a directory's abstract), at most MAX_MATCH_TEXT_CHARS:
    # what an agent pastes without another read
    text: str = Field(default="", max_length=MAX_MATCH_TEXT_CHARS)
    # the arithmetic of ``score``: its arms (typed queries, reranker, hotness), their weights and the rule
    explanation: ScoreExplanation | None = None

    @field_validator("score")
    @classmethod
    def _finite(cls, v: float) -> float:
        return v if math.isfinite(v) else 0.0


class TraceEvent(_Frozen):
    kind: Literal["global_search", "feedback", "expand", "keep", "exclude", "stop", "rerank", "fallback"]
    round: int = 0
    uri: str | None = None
    score: float | None = None
    detail: str = ""


class TraceStats(BaseModel):
    mode: Literal["quick", "thinking"] = "quick"
    rounds: int = 0
    vector_calls: int = 0
    fetch_calls: int = 0  # key lookups of directory records (no vector search)
    directories_searched: int = 0
    candidates_kept: int = 0
    candidates_excluded: int = 0
    stop_reason: str = ""
    rerank_used: bool = False
    rerank_fallback: str | None = None
    latency_ms: float = 0.0


class ThinkingTrace(BaseModel):
    events: list[TraceEvent] = Field(default_factory=list)
    stats: TraceStats = Field(default_factory=TraceStats)

    def add(self, kind: str, **kw: Any) -> None:
        self.events.append(TraceEvent(kind=kind, **kw))  # type: ignore[arg-type]

    @property
    def searched_directories(self) -> list[str]:
        return [e.uri for e in self.events if e.kind == "expand" and e.uri]


class QueryResult(BaseModel):
    """What one typed query found: its matches and how it found them."""

    query: TypedQuery
    matches: list[MatchedContext] = Field(default_factory=list)
    tiers: dict[str, str] = Field(default_factory=dict)  # display uri -> match reason
    trace: ThinkingTrace = Field(default_factory=ThinkingTrace)

    def provenance(self) -> dict[str, Any]:
        return {
            "query": self.query.model_dump(mode="json"),
            "searched_directories": self.trace.searched_directories,
            "matches": [
                {
                    "uri": m.uri,
                    "tier": f"L{int(m.level)}",
                    "score": m.score,
                    "reason": self.tiers.get(m.uri, "vector"),
                    **({"explanation": m.explanation.model_dump(mode="json")} if m.explanation else {}),
                }
                for m in self.matches
            ],
            "trace": {
                "stats": self.trace.stats.model_dump(mode="json"),
                "events": [e.model_dump(mode="json", exclude_none=True) for e in self.trace.events],
            },
        }


class FindResponse(BaseModel):
    """A :class:`FindResult` as the API answers it (and :mod:`cairn.client` returns it)."""

    memories: list[MatchedContext] = Field(default_factory=list)
    resources: list[MatchedContext] = Field(default_factory=list)
    skills: list[MatchedContext] = Field(default_factory=list)
    total: int = 0
    query_plan: QueryPlan | None = None
    provenance: list[dict[str, Any]] | None = None

    def all(self) -> list[MatchedContext]:
        """Every match, best first."""
        return sorted(self.memories + self.resources + self.skills, key=lambda m: -m.score)


class FindResult(BaseModel):
    memories: list[MatchedContext] = Field(default_factory=list)
    resources: list[MatchedContext] = Field(default_factory=list)
    skills: list[MatchedContext] = Field(default_factory=list)
    query_plan: QueryPlan | None = None
    query_results: list[QueryResult] = Field(default_factory=list)

    @property
    def total(self) -> int:
        return len(self.memories) + len(self.resources) + len(self.skills)

    def all(self) -> list[MatchedContext]:
        """Every match, best first."""
        return sorted(self.memories + self.resources + self.skills, key=lambda m: -m.score)

    def to_dict(self, include_provenance: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            bucket: [m.model_dump(mode="json") for m in getattr(self, bucket)]
            for bucket in ("memories", "resources", "skills")
        }
        out["total"] = self.total
        if self.query_plan is not None:
            out["query_plan"] = self.query_plan.model_dump(mode="json")
        if include_provenance:
            out["provenance"] = [qr.provenance() for qr in self.query_results]
        return out
