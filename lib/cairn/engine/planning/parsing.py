"""Parsing an intent analysis answer into a :class:`QueryPlan` (pure functions, no I/O).

Rules kept from upstream: an unknown context type becomes ``resource``; a missing priority is
3; non-string reasoning is turned into a string. Deliberate departures: a bare JSON array is
accepted as the query list; JSON inside a Markdown fence (or after some prose) is found; more
than 5 queries keep the first 5 by priority; an answer with no usable query list is an error
(the analyzer then falls back to the raw query); ``"queries": []`` is a valid empty plan.
"""

from __future__ import annotations

import json
import re
from typing import Any

from cairn.core.errors import PlanParseError
from cairn.core.models import ContextType, QueryPlan, TypedQuery

MAX_QUERIES = 5
DEFAULT_PRIORITY = 3
_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)


def extract_json(text: str) -> Any:
    """The first JSON object or array in ``text``: whole, fenced, or embedded in prose."""
    if not isinstance(text, str) or not text.strip():
        raise PlanParseError("the answer is empty")
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    decoder = json.JSONDecoder()
    for candidate in candidates:
        candidate = candidate.strip()
        try:
            return json.loads(candidate)
        except ValueError:
            pass
        for n, ch in enumerate(candidate):
            if ch in "{[":
                try:
                    return decoder.raw_decode(candidate[n:])[0]
                except ValueError:
                    continue
    raise PlanParseError(f"no JSON object or array in the answer: {text[:120]!r}")


def _reasoning(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def _priority(value: Any) -> int:
    try:
        p = int(value)
    except (TypeError, ValueError):
        return DEFAULT_PRIORITY
    return min(5, max(1, p))


def _context_type(value: Any) -> ContextType:
    try:
        return ContextType(str(value).strip().lower())
    except ValueError:
        return ContextType.RESOURCE


def _typed_query(item: Any, restrict: ContextType | None, target_uris: tuple[str, ...]) -> TypedQuery | None:
    if isinstance(item, str):
        item = {"query": item}
    if not isinstance(item, dict):
        return None
    text = item.get("query")
    if not isinstance(text, str) or not text.strip():
        return None
    return TypedQuery(
        query=text.strip(),
        context_type=restrict or _context_type(item.get("context_type")),
        intent=_reasoning(item.get("intent")),
        priority=_priority(item.get("priority", DEFAULT_PRIORITY)),
        target_uris=target_uris,
    )


def parse_plan(
    text: str,
    *,
    planner: str,
    context_type: ContextType | None = None,
    target_uris: tuple[str, ...] = (),
) -> QueryPlan:
    """``{"reasoning", "queries": [...]}`` or a bare array → a plan of 0..5 typed queries.

    With ``context_type`` set, every query is restricted to that type.
    """
    data = extract_json(text)
    if isinstance(data, list):
        reasoning, items = "", data
    elif isinstance(data, dict):
        listed = data.get("queries")
        if not isinstance(listed, list):
            raise PlanParseError(f"the answer has no 'queries' list (keys: {sorted(data)})")
        reasoning, items = _reasoning(data.get("reasoning")), listed
    else:
        raise PlanParseError(f"the answer is a JSON {type(data).__name__}, not an object or array")
    queries = [q for q in (_typed_query(i, context_type, target_uris) for i in items) if q is not None]
    if items and not queries:
        raise PlanParseError(f"none of the {len(items)} queries has a non-empty 'query' string")
    if len(queries) > MAX_QUERIES:
        queries = sorted(queries, key=lambda q: q.priority)[:MAX_QUERIES]  # stable: ties keep their order
    return QueryPlan(reasoning=reasoning, queries=tuple(queries), planner=planner)
