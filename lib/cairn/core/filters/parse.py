"""Parse and validate a Mongo-style filter into a :mod:`cairn.core.filters.tree`.

The parser walks the whole filter and collects every problem before it raises one
:class:`~cairn.core.errors.FilterError`; each problem has a path such as
``filter.$or[1].metadata.year.$gt`` and a message naming the bad value and what is allowed.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from datetime import UTC, date, datetime, time
from typing import Any

from cairn.core.errors import FilterError, FilterProblem
from cairn.core.filters import tree as t

MAX_DEPTH = 8
MAX_CLAUSES = 100
# Values in one $in / $nin / $all list. Pinecone accepts up to 10,000; we stay well under it.
MAX_LIST_VALUES = 1000

_NOT_FILTERABLE = {
    "tenant": "the tenant comes from the caller's credentials: a filter can neither read nor override it",
    "vector": "it is the embedding itself",
    "text": "it is the record's body; use a keyword or hybrid query to search text",
    "abstract": "it is free text; use a keyword or hybrid query to search text",
}
_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}")
_FIELD_OPS_TEXT = " ".join(t.FIELD_OPS + ("$not",))
_TOP_OPS_TEXT = "$and $or $nor $not"

_Invalid = t.MatchAll  # placeholder returned where a problem was recorded


# what retrieval itself adds around a caller's filter (``{"$and": [<scope>, <filter>]}``): one
# level and two clauses. The caller's filter is checked against the documented limits as written
# (FindRequest), so the scope never spends the caller's budget.
SCOPE_ALLOWANCE = 2


def parse(filter: Mapping[str, Any] | None, *, allowance: int = 0) -> t.FilterNode | None:
    """Parse a Mongo-style filter; None or ``{}`` (or a filter that is always true) gives None.

    ``allowance`` raises the depth and clause limits (by that many) for a filter that wraps one
    already checked. Raises :class:`~cairn.core.errors.FilterError` listing every problem found.
    """
    if filter is None:
        return None
    if not isinstance(filter, Mapping):
        raise FilterError(f"a filter must be an object; got {_describe(filter)}")
    if not filter:
        return None
    parser = _Parser(max_depth=MAX_DEPTH + allowance)
    node = parser.document(filter, "filter", 1)
    if parser.clauses > MAX_CLAUSES + allowance:
        parser.problem(
            "filter",
            f"the filter has {parser.clauses} clauses; the limit is {MAX_CLAUSES}",
        )
    if parser.problems:
        raise FilterError(parser.problems)
    return None if isinstance(node, t.MatchAll) else node


def _describe(value: Any) -> str:
    """``string "x"``, ``number 5``, ``bool true``, ``null``, ``list [...]``, ``object {...}``."""
    kind = _kind(value)
    if kind == "null":
        return "null"
    try:
        text = json.dumps(value, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    if len(text) > 80:
        text = text[:77] + "..."
    return f"{kind} {text}"


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if t.is_number(value):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (datetime, date)):
        return "datetime"
    if isinstance(value, (list, tuple)):
        return "list"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


def _epoch(value: datetime | date) -> float:
    if not isinstance(value, datetime):
        value = datetime.combine(value, time(), tzinfo=UTC)
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.timestamp()


def _iso_epoch(value: str) -> float | None:
    if not _ISO_DATE.match(value):
        return None
    try:
        return _epoch(datetime.fromisoformat(value))
    except ValueError:
        return None


class _Parser:
    def __init__(self, max_depth: int = MAX_DEPTH) -> None:
        self.problems: list[FilterProblem] = []
        self.clauses = 0
        self.max_depth = max_depth

    def problem(self, path: str, message: str) -> t.FilterNode:
        self.problems.append(FilterProblem(path, message))
        return _Invalid()

    # --- documents and logical operators ------------------------------------------------

    def document(self, doc: Any, path: str, depth: int) -> t.FilterNode:
        if depth > self.max_depth:
            return self.problem(
                path,
                f"the filter is nested deeper than the limit of {MAX_DEPTH} levels",
            )
        if not isinstance(doc, Mapping):
            return self.problem(path, f"expected a filter object; got {_describe(doc)}")
        if not doc:
            return self.problem(
                path,
                "an empty object is not a filter here; give at least one condition",
            )
        children = [self.entry(key, value, path, depth) for key, value in doc.items()]
        return t.make_and(children)

    def entry(self, key: Any, value: Any, path: str, depth: int) -> t.FilterNode:
        if not isinstance(key, str):
            return self.problem(
                path, f"field names must be strings; got {_describe(key)}"
            )
        if not key.startswith("$"):
            return self.field(key, value, f"{path}.{key}", depth)
        if key in ("$and", "$or", "$nor"):
            return self.logical(key, value, f"{path}.{key}", depth)
        if key == "$not":
            return t.make_not(self.document(value, f"{path}.$not", depth + 1))
        if key in t.FIELD_OPS:
            return self.problem(
                f"{path}.{key}",
                f'operator "{key}" needs a field: write {{"<field>": {{"{key}": ...}}}}',
            )
        return self.problem(
            f"{path}.{key}",
            f'operator "{key}" is not supported at the top level; supported: {_TOP_OPS_TEXT}, or a field name',
        )

    def logical(self, op: str, operand: Any, path: str, depth: int) -> t.FilterNode:
        if not isinstance(operand, (list, tuple)):
            return self.problem(
                path, f'"{op}" needs a list of filters; got {_describe(operand)}'
            )
        if not operand:
            return self.problem(
                path, f'"{op}" needs a non-empty list of filters; got []'
            )
        children = [
            self.document(doc, f"{path}[{i}]", depth + 1)
            for i, doc in enumerate(operand)
        ]
        if op == "$and":
            return t.make_and(children)
        combined = t.make_or(children)
        return t.make_not(combined) if op == "$nor" else combined

    # --- fields --------------------------------------------------------------------------

    def field(self, name: str, value: Any, path: str, depth: int) -> t.FilterNode:
        if not self.check_field(name, value, path):
            return _Invalid()
        if isinstance(value, Mapping) and not value:
            return self.problem(
                path,
                'an empty object is not a condition; give a value or operators, e.g. {"$eq": ...}',
            )
        if isinstance(value, Mapping) and any(
            isinstance(k, str) and k.startswith("$") for k in value
        ):
            return self.operators(name, value, path, depth)
        if isinstance(value, Mapping):
            first = next(iter(value), "<key>")
            return self.problem(
                path,
                f'expected a value or an operator object such as {{"$eq": ...}}; got {_describe(value)}: '
                f'nested objects are not supported, use a dotted path such as "{name}.{first}"',
            )
        return self.operator(name, "$eq", value, path)

    def check_field(self, name: str, value: Any, path: str) -> bool:
        if name in _NOT_FILTERABLE:
            self.problem(path, f'"{name}" cannot be filtered: {_NOT_FILTERABLE[name]}')
            return False
        kind, key = t.split_field(name)
        if kind == "metadata":
            if not key or key.startswith("$"):
                self.problem(
                    path,
                    f'"{name}" is not a valid metadata key; write "metadata.<key>"',
                )
                return False
            return True
        if name in t.RECORD_FIELDS:
            return True
        if name == "metadata":
            example = (
                next(iter(value), "<key>") if isinstance(value, Mapping) else "<key>"
            )
            self.problem(path, f'"metadata" needs a key: write "metadata.{example}"')
            return False
        fields = " ".join(sorted(t.RECORD_FIELDS))
        self.problem(
            path,
            f'unknown field "{name}"; record fields: {fields}; '
            f'user metadata fields go under "metadata.", e.g. "metadata.{name}"',
        )
        return False

    def operators(
        self, field: str, ops: Mapping[Any, Any], path: str, depth: int
    ) -> t.FilterNode:
        children: list[t.FilterNode] = []
        for op, operand in ops.items():
            op_path = f"{path}.{op}"
            if op == "$not":
                children.append(self.field_not(field, operand, op_path, depth))
            elif op in ("$and", "$or", "$nor"):
                children.append(
                    self.problem(
                        op_path,
                        f'logical operator "{op}" cannot be used inside a field; put it at the top level, '
                        f'e.g. {{"{op}": [{{"{field}": ...}}, {{...}}]}}',
                    )
                )
            elif isinstance(op, str) and op in t.FIELD_OPS:
                children.append(self.operator(field, op, operand, op_path))
            elif isinstance(op, str) and op.startswith("$"):
                children.append(
                    self.problem(
                        op_path,
                        f'operator "{op}" is not supported; supported: {_FIELD_OPS_TEXT}',
                    )
                )
            else:
                children.append(
                    self.problem(
                        f"{path}.{op}",
                        f'cannot mix operators and plain keys in one object; got key "{op}" next to operators',
                    )
                )
        return t.make_and(children)

    def field_not(
        self, field: str, operand: Any, path: str, depth: int
    ) -> t.FilterNode:
        if depth + 1 > self.max_depth:
            return self.problem(
                path,
                f"the filter is nested deeper than the limit of {MAX_DEPTH} levels",
            )
        if not isinstance(operand, Mapping) or not operand:
            return self.problem(
                path,
                f'"$not" needs an object of operators, e.g. {{"$not": {{"$gt": 5}}}}; got {_describe(operand)}',
            )
        if not all(isinstance(k, str) and k.startswith("$") for k in operand):
            return self.problem(
                path, f'"$not" needs an object of operators; got {_describe(operand)}'
            )
        return t.make_not(self.operators(field, operand, path, depth + 1))

    # --- single operators ------------------------------------------------------------------

    def operator(self, field: str, op: str, operand: Any, path: str) -> t.FilterNode:
        self.clauses += 1
        if op == "$exists":
            if not isinstance(operand, bool):
                return self.problem(
                    path, f'"$exists" needs true or false; got {_describe(operand)}'
                )
            return t.Exists(field, operand)
        if op in t.MEMBERSHIP_OPS:
            return self.membership(field, op, operand, path)
        if op in t.RANGE_OPS:
            return self.range(field, op, operand, path)
        return self.equality(field, op, operand, path)

    def equality(self, field: str, op: str, operand: Any, path: str) -> t.FilterNode:
        if isinstance(operand, (list, tuple)):
            return self.problem(
                path,
                f'"{op}" needs a single value (string, number, bool, null or datetime); got {_describe(operand)}; '
                'use "$in" to match any of several values or "$all" to require all of them',
            )
        if operand is None:
            return t.Exists(field, op == "$ne")
        value = self.value(field, operand, path, op)
        if value is None:
            return _Invalid()
        return t.Compare(field, op, value)

    def range(self, field: str, op: str, operand: Any, path: str) -> t.FilterNode:
        if field in t.KEYWORD_FIELDS or field in t.KEYWORD_LIST_FIELDS:
            return self.problem(
                path, f'"{op}" needs a numeric field; "{field}" holds strings'
            )
        number: float | int | None = None
        if isinstance(operand, (datetime, date)):
            number = _epoch(operand)
        elif isinstance(operand, str):
            number = _iso_epoch(operand)
        elif t.is_number(operand):
            number = operand
        if number is None:
            hint = " (bools are not numbers)" if isinstance(operand, bool) else ""
            return self.problem(
                path,
                f'"{op}" needs a number or a datetime (ISO 8601); got {_describe(operand)}{hint}',
            )
        if not math.isfinite(number):
            return self.problem(path, f'"{op}" needs a finite number; got {operand!r}')
        return t.Compare(field, op, number)

    def membership(self, field: str, op: str, operand: Any, path: str) -> t.FilterNode:
        if not isinstance(operand, (list, tuple)):
            return self.problem(
                path, f'"{op}" needs a list of values; got {_describe(operand)}'
            )
        if len(operand) > MAX_LIST_VALUES:
            return self.problem(
                path,
                f'"{op}" has {len(operand)} values; the limit is {MAX_LIST_VALUES}',
            )
        values: list[t.Scalar] = []
        has_null = False
        for i, item in enumerate(operand):
            if item is None and op != "$all":
                has_null = True
                continue
            value = self.value(field, item, f"{path}[{i}]", op)
            if value is not None and not any(_same(value, v) for v in values):
                values.append(value)
        return _membership_node(field, op, tuple(values), has_null)

    def value(self, field: str, value: Any, path: str, op: str) -> t.Scalar | None:
        """Check one comparison value; returns None (and records a problem) when it is invalid."""
        if isinstance(value, (datetime, date)):
            value = _epoch(value)
        elif isinstance(value, str) and field in t.NUMERIC_FIELDS:
            epoch = _iso_epoch(value)
            value = value if epoch is None else epoch
        if not isinstance(value, (str, bool, int, float)):
            allowed = (
                "strings, numbers, bools"
                + ("" if op == "$all" else ", null")
                + " or datetimes"
            )
            self.problem(
                path, f'"{op}" values must be {allowed}; got {_describe(value)}'
            )
            return None
        if isinstance(value, float) and not math.isfinite(value):
            self.problem(path, f'"{op}" needs a finite number; got {value!r}')
            return None
        return value if self.value_fits_field(field, value, path) else None

    def value_fits_field(self, field: str, value: t.Scalar, path: str) -> bool:
        if field in t.NUMERIC_FIELDS and not t.is_number(value):
            self.problem(path, f'"{field}" holds numbers; got {_describe(value)}')
            return False
        if (
            field in t.KEYWORD_FIELDS or field in t.KEYWORD_LIST_FIELDS
        ) and not isinstance(value, str):
            self.problem(path, f'"{field}" holds strings; got {_describe(value)}')
            return False
        return True


def _same(a: t.Scalar, b: t.Scalar) -> bool:
    return isinstance(a, bool) == isinstance(b, bool) and a == b


def _membership_node(
    field: str, op: str, values: tuple[t.Scalar, ...], has_null: bool
) -> t.FilterNode:
    if op == "$all":
        return t.Membership(field, op, values) if values else t.MatchNone()
    core: t.FilterNode
    if op == "$in":
        core = t.Membership(field, op, values) if values else t.MatchNone()
        return t.make_or([t.Exists(field, False), core]) if has_null else core
    core = t.Membership(field, op, values) if values else t.MatchAll()
    return t.make_and([t.Exists(field, True), core]) if has_null else core
