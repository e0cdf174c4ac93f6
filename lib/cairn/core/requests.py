"""Requests callers send: validated once, with messages that say what is allowed."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from cairn.core import uri as uris
from cairn.core.errors import FilterError, InvalidURIError, RequestError
from cairn.core.models import ContextType

MAX_QUERY_CHARS = 8000
MAX_LIMIT = 100
# quick: one search; thinking: hierarchical; auto (search()'s default): thinking, except a plan that
# carries the conversation in a second typed query, searched quick (:func:`cairn.engine.stages.for_plan`)
Mode = Literal["quick", "thinking", "auto"]
MODE_HELP = "quick: one scoped search; thinking: descend the folder tree; auto: thinking, or quick for a follow-up turn"


def is_text(value: str) -> bool:
    """Whether ``value`` is valid Unicode text (no unpaired surrogate, which no encoder accepts)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def no_tenant(data: Any) -> Any:
    """Refuse a body that names a tenant: the tenant comes from the caller's credentials."""
    if isinstance(data, dict) and "tenant" in data:
        raise ValueError("'tenant' is not accepted in the body: the tenant comes from your credentials; remove it")
    return data


class FindRequest(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _no_tenant(cls, data: Any) -> Any:
        return no_tenant(data)

    query: str = Field(description="what to look for, in natural language")
    context_type: ContextType | None = Field(default=None, description="only this context type (default: all three)")
    target_uris: tuple[str, ...] = Field(default=(), description="search only under these cairn:// folders")
    user: str | None = Field(default=None, description="the end user whose memories are searched too")
    limit: int = Field(default=5, ge=1, le=MAX_LIMIT, description="results per context type at most")
    mode: Mode = Field(default="quick", description=MODE_HELP)
    hybrid: bool | None = None  # fuse dense and keyword scores where the backend can; None: the settings' default
    collapse_chunks: bool = True  # one result per document (its best chunk); False: every chunk
    filter: dict[str, Any] | None = Field(default=None, description='a Mongo-style filter on the records, e.g. '
                                                                   '{"metadata.team": "finance"} (docs/filters.md)')
    score_threshold: float | None = Field(default=None, ge=-1.0, le=1.0, allow_inf_nan=False)
    include_provenance: bool = False

    @field_validator("query")
    @classmethod
    def _query(cls, v: str) -> str:
        v = v.strip()
        if not v:
            raise ValueError("the query is empty; pass the text to search for")
        if len(v) > MAX_QUERY_CHARS:
            raise ValueError(f"the query has {len(v)} characters; the limit is {MAX_QUERY_CHARS}")
        if not is_text(v):
            raise ValueError("the query holds an unpaired surrogate (a broken \\ud800-\\udfff escape); send valid Unicode text")
        return v

    @field_validator("filter")
    @classmethod
    def _filter(cls, v: dict[str, Any] | None) -> dict[str, Any] | None:
        """Checked as written, against the documented limits, before any work."""
        from cairn.core.filters import parse

        try:
            parse(v)
        except FilterError as exc:
            raise ValueError(exc.message) from None
        return v

    @field_validator("target_uris")
    @classmethod
    def _uris(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for u in v:
            try:
                uris.validate(u)
            except InvalidURIError as exc:
                raise ValueError(exc.message) from None
        return v


def parse_request(model: type[BaseModel], data: dict[str, Any]) -> Any:
    """Validate ``data`` into ``model``; every problem is reported at once as a RequestError."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = []
        for e in exc.errors():
            where = ".".join(str(p) for p in e["loc"]) or "request"
            msg = e["msg"].removeprefix("Value error, ")
            if e["type"] == "extra_forbidden":
                msg = f"unknown field; allowed: {', '.join(model.model_fields)}"
            problems.append(f"{where}: {msg}")
        raise RequestError("invalid request: " + "; ".join(problems), details=problems) from None
