"""The emulator's query engine: the query DSL evaluated over indexed values, as OpenSearch documents it.

Every query returns ``{doc_id: score}`` for the documents it matches among the last refreshed
state. Scoring: ``match``/``multi_match`` use BM25 (Lucene's form, k1=1.2, b=0.75); ``knn`` uses
the space's documented score; ``term``, ``terms``, ``range``, ``exists``, ``ids`` and
``match_all`` score a constant ``boost`` (1.0) — a simplification: real ``term`` is BM25-scored.
Filter context (``bool.filter``, ``knn.filter``, ``constant_score``) never scores.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from .opensearch_index import (
    INTEGRAL,
    NUMERIC,
    ApiError,
    Doc,
    Index,
    Mappings,
    analyze,
    boolean_of,
    filter_source,
    keyword_of,
    knn_space,
    number_of,
    parse_date,
    shard_error,
)

Scores = dict[str, float]
K1, B = 1.2, 0.75
_SEARCH_KEYS = {"query", "size", "from", "_source", "track_total_hits", "min_score", "timeout", "explain", "sort",
                "search_after"}


class _Ctx:
    def __init__(self, index: Index) -> None:
        self.index = index
        self.docs: dict[str, Doc] = index.searchable
        self.mappings = Mappings(index.mappings)
        self._order = {doc_id: n for n, doc_id in enumerate(self.docs)}

    def field(self, path: str) -> tuple[dict[str, Any] | None, str]:
        return self.mappings.lookup(path)

    def order(self, doc_id: str) -> int:
        return self._order[doc_id]


def evaluate(index: Index, query: dict[str, Any]) -> Scores:
    return _eval(query, _Ctx(index))


def _one(query: Any, where: str = "query") -> tuple[str, Any]:
    if not isinstance(query, dict) or len(query) != 1:
        raise ApiError(400, "parsing_exception", f"[{where}] malformed query, expected a single query object")
    return next(iter(query.items()))


def _eval(query: dict[str, Any], ctx: _Ctx) -> Scores:
    name, body = _one(query)
    handler = _QUERIES.get(name)
    if handler is None:
        raise ApiError(400, "parsing_exception", f"unknown query [{name}]", extra={"line": 1, "col": 1})
    return handler(body, ctx)


def _field_and_params(body: Any, query: str, value_key: str) -> tuple[str, dict[str, Any]]:
    """``{"field": value}`` or ``{"field": {value_key: value, ...}}`` → (field, params)."""
    if not isinstance(body, dict):
        raise ApiError(400, "parsing_exception", f"[{query}] query malformed, no start_object after query name")
    params = {k: v for k, v in body.items() if k in ("boost", "_name")}
    names = [k for k in body if k not in params]
    if len(names) != 1:
        raise ApiError(400, "parsing_exception", f"[{query}] query doesn't support multiple fields, found {names}")
    value = body[names[0]]
    if isinstance(value, dict) and value_key in value:
        return names[0], {**params, **value}
    return names[0], {**params, value_key: value}


def _const(ids: Any, boost: float = 1.0) -> Scores:
    return {doc_id: float(boost) for doc_id in ids}


# ---------------------------------------------------------------------- term-level queries


def _query_value(mapping: dict[str, Any], path: str, value: Any) -> Any:
    """``value`` as the field indexes it; None means 'can never match' (e.g. 1.5 on a long)."""
    ftype = mapping.get("type", "object")
    try:
        if ftype == "keyword":
            return keyword_of(value)
        if ftype in ("text", "match_only_text"):
            return keyword_of(value)
        if ftype in NUMERIC:
            num = number_of("double", value)
            if ftype in INTEGRAL and num != int(num):
                return None
            return num
        if ftype == "boolean":
            return boolean_of(value)
        if ftype == "date":
            millis = parse_date(value)
            if millis is None:
                raise ValueError(f"failed to parse date field [{value}]")
            return millis
    except ValueError as exc:
        raise shard_error(f"failed to create query: {exc}") from None
    raise shard_error(f"Field [{path}] of type [{ftype}] does not support term-level queries", "illegal_argument_exception")


def _indexed(doc: Doc, mapping: dict[str, Any], path: str) -> list[Any]:
    values = doc.fields.get(path, [])
    if mapping.get("type") in ("text", "match_only_text"):
        return [tok for tokens in values for tok in tokens]
    return values


def _match_any(ctx: _Ctx, path: str, raw_values: list[Any], boost: float) -> Scores:
    mapping, source_path = ctx.field(path)
    if mapping is None:
        return {}  # an unmapped field matches nothing
    wanted = {_query_value(mapping, path, v) for v in raw_values} - {None}
    return _const((i for i, d in ctx.docs.items() if wanted & set(_indexed(d, mapping, source_path))), boost)


def _q_term(body: Any, ctx: _Ctx) -> Scores:
    path, params = _field_and_params(body, "term", "value")
    value = params["value"]
    if isinstance(value, dict | list) or value is None:
        raise ApiError(400, "parsing_exception", f"[term] query does not support array or object values for [{path}]")
    return _match_any(ctx, path, [value], params.get("boost", 1.0))


def _q_terms(body: Any, ctx: _Ctx) -> Scores:
    if not isinstance(body, dict):
        raise ApiError(400, "parsing_exception", "[terms] query malformed")
    boost = body.get("boost", 1.0)
    names = [k for k in body if k not in ("boost", "_name")]
    if len(names) != 1 or not isinstance(body[names[0]], list):
        raise ApiError(400, "parsing_exception", "[terms] query requires exactly one field with an array of values")
    return _match_any(ctx, names[0], body[names[0]], boost)  # an empty list matches nothing


_RANGE_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "gt": lambda v, b: v > b,
    "gte": lambda v, b: v >= b,
    "lt": lambda v, b: v < b,
    "lte": lambda v, b: v <= b,
}


def _q_range(body: Any, ctx: _Ctx) -> Scores:
    if not isinstance(body, dict) or len(body) != 1 or not isinstance(next(iter(body.values())), dict):
        raise ApiError(400, "parsing_exception", "[range] query malformed, expected {field: {gt|gte|lt|lte: value}}")
    path, params = next(iter(body.items()))
    unknown = set(params) - set(_RANGE_OPS) - {"boost", "format", "time_zone", "relation", "_name"}
    if unknown:
        raise ApiError(400, "parsing_exception", f"[range] query does not support [{min(unknown)}]")
    mapping, source_path = ctx.field(path)
    if mapping is None:
        return {}
    bounds = [(op, _query_value(mapping, path, params[op])) for op in _RANGE_OPS if params.get(op) is not None]
    if any(b is None for _, b in bounds):  # an integral bound like 1.5: compare as a real number
        bounds = [(op, float(params[op])) for op in _RANGE_OPS if params.get(op) is not None]

    def hit(doc: Doc) -> bool:
        return any(all(_RANGE_OPS[op](v, b) for op, b in bounds) for v in _indexed(doc, mapping, source_path))

    return _const((i for i, d in ctx.docs.items() if hit(d)), params.get("boost", 1.0))


def _q_exists(body: Any, ctx: _Ctx) -> Scores:
    path = body.get("field") if isinstance(body, dict) else None
    if not isinstance(path, str):
        raise ApiError(400, "parsing_exception", "[exists] must be provided with a [field]")
    mapping, source_path = ctx.field(path)
    if mapping is None:
        return {}

    def present(doc: Doc) -> bool:
        if mapping.get("type", "object") in ("object", "nested"):
            return any(k.startswith(path + ".") and v for k, v in doc.fields.items())
        return bool(doc.fields.get(source_path))  # null, [] and [null] were never indexed

    return _const((i for i, d in ctx.docs.items() if present(d)), body.get("boost", 1.0))


def _q_ids(body: Any, ctx: _Ctx) -> Scores:
    wanted = {str(v) for v in body.get("values", [])}
    return _const((i for i in ctx.docs if i in wanted), body.get("boost", 1.0))


def _q_match_all(body: Any, ctx: _Ctx) -> Scores:
    return _const(ctx.docs, (body or {}).get("boost", 1.0))


def _q_match_none(body: Any, ctx: _Ctx) -> Scores:
    return {}


def _q_constant_score(body: Any, ctx: _Ctx) -> Scores:
    return _const(_eval(body["filter"], ctx), body.get("boost", 1.0))


# ---------------------------------------------------------------------- bool


def _clauses(body: dict[str, Any], key: str) -> list[dict[str, Any]]:
    value = body.get(key, [])
    return [value] if isinstance(value, dict) else list(value)


def _min_should(spec: Any, n_should: int, default: int) -> int:
    if spec is None:
        return default
    text = str(spec).strip()
    if text.endswith("%"):
        pct = int(text[:-1])
        n = math.floor(n_should * abs(pct) / 100)
        return n if pct >= 0 else n_should - n
    n = int(text)
    return n if n >= 0 else max(n_should + n, 0)


def _q_bool(body: Any, ctx: _Ctx) -> Scores:
    unknown = set(body) - {"must", "filter", "should", "must_not", "minimum_should_match", "boost", "_name"}
    if unknown:
        raise ApiError(400, "parsing_exception", f"[bool] query does not support [{min(unknown)}]")
    must = [_eval(q, ctx) for q in _clauses(body, "must")]
    filters = [_eval(q, ctx) for q in _clauses(body, "filter")]
    should = [_eval(q, ctx) for q in _clauses(body, "should")]
    must_not = [_eval(q, ctx) for q in _clauses(body, "must_not")]
    required = must + filters
    msm = _min_should(body.get("minimum_should_match"), len(should), 0 if required else (1 if should else 0))
    candidates = set(ctx.docs)
    for clause in required:
        candidates &= clause.keys()
    for clause in must_not:
        candidates -= clause.keys()
    no_clauses = not (must or filters or should or must_not)  # an empty bool is match_all
    out: Scores = {}
    for doc_id in candidates:
        matched = [s[doc_id] for s in should if doc_id in s]
        if len(matched) < msm:
            continue
        score = 1.0 if no_clauses else sum(s[doc_id] for s in must) + sum(matched)
        out[doc_id] = score * body.get("boost", 1.0)
    return out


# ---------------------------------------------------------------------- full text (BM25)


def _field_stats(ctx: _Ctx, source_path: str) -> tuple[int, float, dict[str, int]]:
    lengths, df = [], {}
    for doc in ctx.docs.values():
        tokens = [t for ts in doc.fields.get(source_path, []) for t in ts]
        if source_path not in doc.fields:
            continue
        lengths.append(len(tokens))
        for term in set(tokens):
            df[term] = df.get(term, 0) + 1
    n = len(lengths)
    return n, (sum(lengths) / n if n else 0.0), df


def _bm25(ctx: _Ctx, path: str, text: str, operator: str, msm: Any, boost: float) -> Scores:
    mapping, source_path = ctx.field(path)
    if mapping is None:
        return {}
    if mapping.get("type") not in ("text", "match_only_text"):  # keyword, numbers: the whole value is one term
        return _match_any(ctx, path, [text], boost)
    terms = analyze(text, mapping.get("search_analyzer") or mapping.get("analyzer"))
    if not terms:
        return {}
    n_docs, avgdl, df = _field_stats(ctx, source_path)
    need = len(set(terms)) if operator == "and" else max(_min_should(msm, len(set(terms)), 1), 1)
    out: Scores = {}
    for doc_id, doc in ctx.docs.items():
        tokens = [t for ts in doc.fields.get(source_path, []) for t in ts]
        if not tokens:
            continue
        score, hits = 0.0, set()
        for term in terms:
            tf = tokens.count(term)
            if tf:
                hits.add(term)
                idf = math.log(1 + (n_docs - df[term] + 0.5) / (df[term] + 0.5))
                score += idf * tf / (tf + K1 * (1 - B + B * len(tokens) / avgdl))
        if len(hits) >= need:
            out[doc_id] = score * boost
    return out


def _q_match(body: Any, ctx: _Ctx) -> Scores:
    path, params = _field_and_params(body, "match", "query")
    return _bm25(ctx, path, keyword_of(params["query"]), str(params.get("operator", "or")).lower(),
                 params.get("minimum_should_match"), params.get("boost", 1.0))


def _q_multi_match(body: Any, ctx: _Ctx) -> Scores:
    kind = body.get("type", "best_fields")
    if kind not in ("best_fields", "most_fields"):
        raise ApiError(400, "parsing_exception", f"the emulator does not implement multi_match type [{kind}]")
    per_field = []
    for spec in body.get("fields", []):
        path, _, weight = spec.partition("^")
        per_field.append(_bm25(ctx, path, keyword_of(body["query"]), str(body.get("operator", "or")).lower(),
                               body.get("minimum_should_match"), float(weight or 1.0)))
    tie = float(body.get("tie_breaker", 0.0 if kind == "best_fields" else 1.0))
    out: Scores = {}
    for doc_id in set().union(*per_field) if per_field else set():
        scores = [s[doc_id] for s in per_field if doc_id in s]
        best = max(scores)
        out[doc_id] = (best + tie * (sum(scores) - best)) * body.get("boost", 1.0)
    return out


# ---------------------------------------------------------------------- k-NN


def _similarity(space: str, query: list[float], vec: tuple[float, ...]) -> float:
    if space == "cosinesimil":
        dot = sum(a * b for a, b in zip(query, vec, strict=True))
        norm = math.sqrt(sum(a * a for a in query)) * math.sqrt(sum(b * b for b in vec))
        return (2 - (1 - dot / norm)) / 2
    if space == "l2":
        return 1 / (1 + sum((a - b) ** 2 for a, b in zip(query, vec, strict=True)))
    dot = sum(a * b for a, b in zip(query, vec, strict=True))
    return dot + 1 if dot >= 0 else 1 / (1 - dot)


def _q_knn(body: Any, ctx: _Ctx) -> Scores:
    path, params = _one(body, "knn")
    mapping, source_path = ctx.field(path)
    if mapping is None or mapping.get("type") != "knn_vector":
        raise shard_error(f"Field '{path}' is not knn_vector type.")
    vector, k = params.get("vector"), params.get("k")
    if not isinstance(vector, list) or len(vector) != mapping["dimension"]:
        got = len(vector) if isinstance(vector, list) else 0
        raise shard_error(f"Query vector has invalid dimension: {got}. Dimension should be: {mapping['dimension']}",
                          "illegal_argument_exception")
    _, space = knn_space(mapping)
    if space == "cosinesimil" and not any(vector):
        raise shard_error("zero vector is not supported when space type is [cosinesimil]", "illegal_argument_exception")
    allowed = _eval(params["filter"], ctx).keys() if params.get("filter") else ctx.docs.keys()  # efficient filtering
    scored = [(_similarity(space, vector, ctx.docs[i].fields[source_path][0]), i)
              for i in allowed if ctx.docs[i].fields.get(source_path)]
    scored.sort(key=lambda s: (-s[0], ctx.order(s[1])))
    if k is not None:
        if not isinstance(k, int) or not 1 <= k <= 10000:
            raise shard_error(f"[knn] requires 1 <= k <= 10000, got [{k}]", "illegal_argument_exception")
        scored = scored[:k]
    elif params.get("min_score") is not None:
        scored = [s for s in scored if s[0] >= params["min_score"]]
    else:
        raise shard_error("[knn] requires exactly one of k, distance or score to be set", "illegal_argument_exception")
    return {i: s * params.get("boost", 1.0) for s, i in scored}


_QUERIES: dict[str, Callable[[Any, _Ctx], Scores]] = {
    "term": _q_term,
    "terms": _q_terms,
    "range": _q_range,
    "exists": _q_exists,
    "ids": _q_ids,
    "match_all": _q_match_all,
    "match_none": _q_match_none,
    "constant_score": _q_constant_score,
    "bool": _q_bool,
    "match": _q_match,
    "multi_match": _q_multi_match,
    "knn": _q_knn,
}


# ---------------------------------------------------------------------- _search


def _field_sort(sort: Any) -> str | None:
    """The field of a ``[{"<field>": "asc"}]`` sort (or ``{"<field>": {"order": "asc"}}``), else None."""
    if not (isinstance(sort, list) and len(sort) == 1 and isinstance(sort[0], dict) and len(sort[0]) == 1):
        return None
    (name, order), = sort[0].items()
    order = order.get("order", "asc") if isinstance(order, dict) else order
    return name if name != "_score" and order == "asc" and "." not in name else None


def search(index: Index, spec: dict[str, Any]) -> dict[str, Any]:
    """One ``_search`` over ``index``: query, size/from, min_score, _source filtering."""
    unknown = set(spec) - _SEARCH_KEYS
    if unknown:
        raise ApiError(400, "parsing_exception", f"Unknown key for a START_OBJECT in [{min(unknown)}].")
    by_field = _field_sort(spec.get("sort"))
    if by_field is None and spec.get("sort") not in (None, "_score", ["_score"], [{"_score": "desc"}]):
        raise ApiError(400, "parsing_exception", "the emulator sorts by _score or by one top-level keyword field, ascending")
    if spec.get("search_after") is not None and by_field is None:
        raise ApiError(400, "illegal_argument_exception", "search_after needs a sort")
    size, start = int(spec.get("size", 10)), int(spec.get("from", 0))
    if size < 0 or start < 0 or size + start > 10000:
        raise shard_error(f"Result window is too large, from + size must be less than or equal to: [10000] but was "
                          f"[{size + start}].", "illegal_argument_exception")
    ctx = _Ctx(index)
    scores = _eval(spec.get("query") or {"match_all": {}}, ctx)
    if spec.get("min_score") is not None:
        scores = {i: s for i, s in scores.items() if s >= spec["min_score"]}
    ranked = sorted(scores, key=lambda i: (-scores[i], ctx.order(i)))
    if by_field is not None:  # a keyword sort: ascending values, search_after the last one seen
        ranked = sorted(scores, key=lambda i: str(ctx.docs[i].source.get(by_field, "")))
        if spec.get("search_after") is not None:
            ranked = [i for i in ranked if str(ctx.docs[i].source.get(by_field, "")) > str(spec["search_after"][0])]
    page = ranked[start:start + size]
    source = spec.get("_source", True)
    hits = []
    for doc_id in page:
        hit: dict[str, Any] = {"_index": index.name, "_id": doc_id, "_score": scores[doc_id]}
        if source is not False:
            hit["_source"] = filter_source(ctx.docs[doc_id].source, source)
        if by_field is not None:
            hit["sort"] = [ctx.docs[doc_id].source.get(by_field)]
        hits.append(hit)
    total = len(scores)
    limit = spec.get("track_total_hits", 10000)
    relation = "eq" if limit is True or total <= int(limit) else "gte"
    return {
        "took": 1,
        "timed_out": False,
        "_shards": {"total": 1, "successful": 1, "skipped": 0, "failed": 0},
        "hits": {
            "total": {"value": total if relation == "eq" else int(limit), "relation": relation},
            "max_score": max((scores[i] for i in ranked), default=None),
            "hits": hits,
        },
    }
