"""The emulator's index model: mappings (explicit and dynamic), documents, refresh.

Documents are parsed at index time into their *indexed* values, per field path, exactly as the
mapping says (keyword strings, numbers, booleans, epoch-millisecond dates, analysed text tokens,
k-NN vectors); queries (:mod:`opensearch_query`) run over those values, never over ``_source``.
"""

from __future__ import annotations

import fnmatch
import math
import re
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

INTEGRAL = {"long", "integer", "short", "byte", "unsigned_long"}
NUMERIC = INTEGRAL | {"double", "float", "half_float", "scaled_float"}
_LEAF_TYPES = NUMERIC | {"keyword", "text", "boolean", "date", "knn_vector", "match_only_text"}
_ENGINE_SPACES = {
    "lucene": {"l2", "cosinesimil", "innerproduct"},
    "faiss": {"l2", "cosinesimil", "innerproduct"},
    "nmslib": {"l2", "cosinesimil", "innerproduct", "l1", "linf"},
}
_DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}(T\d{2}(:\d{2}(:\d{2}(\.\d{1,9})?)?)?(Z|[+-]\d{2}:?\d{2})?)?$")
_SLASH_DATE_RE = re.compile(r"^\d{4}/\d{2}/\d{2}( \d{2}:\d{2}:\d{2})?( Z| [+-]\d{4})?$")
_TOKEN_RE = re.compile(r"\w+", re.UNICODE)


class ApiError(Exception):
    """An error OpenSearch would answer with ``status`` and an ``error`` object."""

    def __init__(
        self,
        status: int,
        type: str,
        reason: str,
        *,
        root_type: str | None = None,
        root_reason: str | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(reason)
        self.status, self.type, self.reason = status, type, reason
        self.root_type, self.root_reason = root_type, root_reason
        self.extra = extra or {}


def shard_error(reason: str, root_type: str = "query_shard_exception") -> ApiError:
    """A failure while building the query on the shard: OpenSearch wraps it as 'all shards failed'."""
    return ApiError(400, "search_phase_execution_exception", "all shards failed", root_type=root_type, root_reason=reason)


class _DocError(Exception):
    def __init__(self, type: str, reason: str) -> None:
        super().__init__(reason)
        self.type, self.reason = type, reason


def valid_index_name(name: str) -> None:
    if not name or name != name.lower() or name[0] in "_-+" or re.search(r'[\\/*?"<>| ,#:]', name):
        raise ApiError(
            400,
            "invalid_index_name_exception",
            f"Invalid index name [{name}], must be lowercase, must not start with '_', '-' or '+' "
            "and must not contain spaces or \\, /, *, ?, \", <, >, |, ,, #, :",
            extra={"index": name, "index_uuid": "_na_"},
        )


# Lucene's English stop words (EnglishAnalyzer.ENGLISH_STOP_WORDS_SET)
_ENGLISH_STOP = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then there "
    "these they this to was will with".split()
)
# The language analyzers: OpenSearch's built-in ones (german, french, ...) and the smartcn and
# kuromoji plugins that Amazon OpenSearch Service installs on every domain, each by language code.
LANGUAGE_ANALYZERS = {"german": "de", "french": "fr", "spanish": "es", "italian": "it", "portuguese": "pt",
                      "dutch": "nl", "swedish": "sv", "danish": "da", "norwegian": "no", "finnish": "fi",
                      "russian": "ru", "smartcn": "zh", "kuromoji": "ja"}
ANALYZERS = ("standard", "english", *LANGUAGE_ANALYZERS)


def analyze(text: str, analyzer: str | None = None) -> list[str]:
    """A built-in analyzer, near enough. ``standard``: Unicode word tokens, lower-cased, no stop
    words; ``english``: the same without English stop words, reduced to Porter stems (the Snowball
    English stemmer stands in for Lucene's PorterStemFilter). A language analyzer (``german``,
    ``smartcn``, ``kuromoji``, ...): that language's stop words and Snowball stems, Chinese and
    Japanese cut into words by a dictionary segmenter (jieba and IPADIC stand in for smartcn's
    HMM dictionary and kuromoji's IPADIC)."""
    if analyzer in LANGUAGE_ANALYZERS:
        from cairn.core.text import words

        return words([text], LANGUAGE_ANALYZERS[analyzer])[0]
    tokens = [t.lower() for t in _TOKEN_RE.findall(text)]
    if analyzer == "english":
        import Stemmer

        tokens = Stemmer.Stemmer("english").stemWords([t for t in tokens if t not in _ENGLISH_STOP])
    return tokens


def parse_date(value: Any) -> float | None:
    """Epoch milliseconds of a date value (a number is already epoch millis); None if unparseable."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if not isinstance(value, str):
        return None
    text = value.strip()
    if _SLASH_DATE_RE.match(text):
        text = text.replace("/", "-").replace(" Z", "+00:00")
    elif not _DATE_RE.match(text):
        return None
    try:
        dt = datetime.fromisoformat(text)
    except ValueError:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp() * 1000.0


def keyword_of(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def number_of(ftype: str, value: Any) -> float | int:
    """A number as a field of type ``ftype`` indexes it (integral types truncate, like ``coerce``)."""
    if isinstance(value, bool):
        raise ValueError(f"Current token (VALUE_{str(value).upper()}) not numeric")  # noqa: TRY004 - parse error
    try:
        num = float(value) if isinstance(value, str) else value
    except ValueError:
        raise ValueError(f"For input string: \"{value}\"") from None
    if not isinstance(num, int | float) or math.isnan(num) or math.isinf(num):
        raise ValueError(f"For input string: \"{value}\"")
    return int(num) if ftype in INTEGRAL else float(num)


def boolean_of(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if value in ("true", "false"):
        return value == "true"
    raise ValueError(f"Failed to parse value [{value}] as only [true] or [false] are allowed.")


@dataclass(frozen=True)
class Doc:
    id: str
    source: dict[str, Any]
    fields: dict[str, list[Any]]  # indexed values per (source) path; text: token lists
    version: int
    seq_no: int


# ---------------------------------------------------------------------- mappings


def _flat_settings(settings: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in settings.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flat_settings(v, key + "."))
        else:
            out[key.removeprefix("index.")] = v
    return out


def _check_properties(props: dict[str, Any], knn_enabled: bool, prefix: str = "") -> None:
    for name, spec in props.items():
        path = f"{prefix}{name}"
        ftype = spec.get("type", "object" if "properties" in spec else None)
        if ftype in ("object", "nested"):
            _check_properties(spec.get("properties", {}), knn_enabled, path + ".")
            continue
        if ftype not in _LEAF_TYPES:
            raise ApiError(400, "mapper_parsing_exception", f"No handler for type [{ftype}] declared on field [{name}]")
        if ftype == "knn_vector":
            _check_knn(path, spec, knn_enabled)
        for key in ("analyzer", "search_analyzer"):
            if key in spec and spec[key] not in ANALYZERS:
                raise ApiError(400, "mapper_parsing_exception", f"analyzer [{spec[key]}] has not been configured in mappings")
        _check_properties(spec.get("fields", {}), knn_enabled, path + ".")


def _check_knn(path: str, spec: dict[str, Any], knn_enabled: bool) -> None:
    dim = spec.get("dimension")
    if not isinstance(dim, int) or not 1 <= dim <= 16000:
        raise ApiError(400, "mapper_parsing_exception", f"Dimension value must be between 1 and 16000 for [{path}]")
    method = spec.get("method")
    if method is None:
        return
    if not knn_enabled:
        raise ApiError(400, "mapper_parsing_exception", "Cannot set modelId or method parameters when index.knn setting is false")
    engine = method.get("engine", "faiss")
    space = method.get("space_type", spec.get("space_type", "l2"))
    if method.get("name") not in ("hnsw", "ivf"):
        raise ApiError(400, "mapper_parsing_exception", f"Invalid method name: {method.get('name')}")
    if engine not in _ENGINE_SPACES:
        raise ApiError(400, "mapper_parsing_exception", f"Invalid engine: {engine}")
    if space not in _ENGINE_SPACES[engine]:
        raise ApiError(400, "mapper_parsing_exception", f"Validation Failed: 1: \"{engine}\" engine does not support space type \"{space}\";")


def knn_space(spec: dict[str, Any]) -> tuple[str, str]:
    method = spec.get("method") or {}
    return method.get("engine", "faiss"), method.get("space_type", spec.get("space_type", "l2"))


_DEFAULT_DYNAMIC = {
    "string": {"type": "text", "fields": {"keyword": {"type": "keyword", "ignore_above": 256}}},
    "long": {"type": "long"},
    "double": {"type": "float"},
    "boolean": {"type": "boolean"},
    "date": {"type": "date"},
}


class Mappings:
    """An index's mappings: field lookup (including multi-fields) and dynamic additions."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.body = body
        body.setdefault("properties", {})

    def lookup(self, path: str) -> tuple[dict[str, Any] | None, str]:
        """The mapping of ``path`` (a multi-field like ``title.keyword`` too) and the key of its indexed values."""
        node: dict[str, Any] = {"properties": self.body["properties"]}
        parts = path.split(".")
        for n, part in enumerate(parts):
            if part in node.get("properties", {}):
                node = node["properties"][part]
            elif n == len(parts) - 1 and part in node.get("fields", {}):
                return node["fields"][part], path
            else:
                return None, path
        return node, path

    def dynamic_mapping(self, path: str, value: Any) -> dict[str, Any] | None:
        """The mapping a new field gets from its first value, or None when it is not indexed."""
        dynamic = str(self.body.get("dynamic", "true")).lower()
        if dynamic == "strict":
            parent = path.rpartition(".")[0] or "_doc"
            raise _DocError(
                "strict_dynamic_mapping_exception",
                f"mapping set to strict, dynamic introduction of [{path.rpartition('.')[2]}] within [{parent}] is not allowed",
            )
        if dynamic == "false":
            return None
        mtype = self._detect(value)
        for template in self.body.get("dynamic_templates", []):
            (_, spec), = template.items()
            if self._template_matches(spec, path, mtype):
                return dict(spec["mapping"])
        return dict(_DEFAULT_DYNAMIC[mtype])

    def _detect(self, value: Any) -> str:
        if isinstance(value, bool):
            return "boolean"
        if isinstance(value, int):
            return "long"
        if isinstance(value, float):
            return "double"
        if self.body.get("date_detection", True) and parse_date(value) is not None:
            return "date"
        return "string"

    @staticmethod
    def _template_matches(spec: dict[str, Any], path: str, mtype: str) -> bool:
        leaf = path.rpartition(".")[2]
        checks = [
            spec.get("match_mapping_type", "*") in ("*", mtype),
            fnmatch.fnmatchcase(leaf, spec.get("match", "*")),
            "unmatch" not in spec or not fnmatch.fnmatchcase(leaf, spec["unmatch"]),
            fnmatch.fnmatchcase(path, spec.get("path_match", "*")),
            "path_unmatch" not in spec or not fnmatch.fnmatchcase(path, spec["path_unmatch"]),
        ]
        return all(checks)

    def add(self, path: str, mapping: dict[str, Any]) -> None:
        node = self.body
        parts = path.split(".")
        for part in parts[:-1]:
            node = node.setdefault("properties", {}).setdefault(part, {"properties": {}})
        node.setdefault("properties", {})[parts[-1]] = mapping


# ---------------------------------------------------------------------- the index


@dataclass
class Index:
    name: str
    settings: dict[str, Any]
    mappings: dict[str, Any]
    uuid: str = field(default_factory=lambda: uuid.uuid4().hex[:22])
    live: dict[str, Doc] = field(default_factory=dict)
    searchable: dict[str, Doc] = field(default_factory=dict)
    generation: int = 0
    _seq: int = 0

    @classmethod
    def create(cls, name: str, settings: dict[str, Any], mappings: dict[str, Any]) -> Index:
        flat = {"number_of_shards": "1", "number_of_replicas": "1", **_flat_settings(settings)}
        knn = str(flat.get("knn", "false")).lower() == "true"
        _check_properties(mappings.get("properties", {}), knn)
        return cls(name, flat, dict(mappings))

    @property
    def knn_enabled(self) -> bool:
        return str(self.settings.get("knn", "false")).lower() == "true"

    def settings_view(self) -> dict[str, Any]:
        return {**{k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in self.settings.items()},
                "uuid": self.uuid, "provided_name": self.name}

    def refresh(self) -> None:
        self.searchable = dict(self.live)
        self.generation += 1

    # ------------------------------------------------------------------ writes
    def index_doc(self, doc_id: Any, source: Any, *, create: bool) -> dict[str, Any]:
        doc_id = str(doc_id) if doc_id is not None else uuid.uuid4().hex[:20]
        head = {"_index": self.name, "_id": doc_id}
        old = self.live.get(doc_id)
        if create and old is not None:
            reason = f"[{doc_id}]: version conflict, document already exists (current version [{old.version}])"
            return {**head, "status": 409, "error": {"type": "version_conflict_engine_exception", "reason": reason,
                                                     "index": self.name, "shard": "0", "index_uuid": self.uuid}}
        if not isinstance(source, dict):
            return {**head, "status": 400, "error": {"type": "mapper_parsing_exception", "reason": "failed to parse"}}
        try:
            fields, additions = _DocParser(self, doc_id).parse(source)
        except _DocError as err:
            return {**head, "status": 400, "error": {"type": err.type, "reason": err.reason}}
        for path, mapping in additions.items():
            Mappings(self.mappings).add(path, mapping)
        self._seq += 1
        version = old.version + 1 if old else 1
        self.live.pop(doc_id, None)  # an update is a delete and a new document: it goes to the end
        self.live[doc_id] = Doc(doc_id, source, fields, version, self._seq)
        return {**head, "_version": version, "result": "updated" if old else "created",
                "_shards": {"total": 2, "successful": 1, "failed": 0}, "_seq_no": self._seq,
                "_primary_term": 1, "status": 200 if old else 201}

    def delete_doc(self, doc_id: Any) -> dict[str, Any]:
        doc = self.live.pop(str(doc_id), None)
        self._seq += 1
        head = {"_index": self.name, "_id": str(doc_id), "_shards": {"total": 2, "successful": 1, "failed": 0},
                "_seq_no": self._seq, "_primary_term": 1}
        if doc is None:
            return {**head, "_version": 1, "result": "not_found", "status": 404}
        return {**head, "_version": doc.version + 1, "result": "deleted", "status": 200}

    # ------------------------------------------------------------------ reads
    def get_doc(self, doc_id: str, source: Any) -> dict[str, Any]:
        doc = self.live.get(doc_id)  # real-time, like GET and _mget
        if doc is None:
            return {"_index": self.name, "_id": doc_id, "found": False}
        out = {"_index": self.name, "_id": doc_id, "_version": doc.version, "_seq_no": doc.seq_no,
               "_primary_term": 1, "found": True}
        if source is not False:
            out["_source"] = filter_source(doc.source, source)
        return out

    def matching_ids(self, query: dict[str, Any]) -> list[str]:
        from .opensearch_query import evaluate

        return list(evaluate(self, query))


class _DocParser:
    """Turns a document's ``_source`` into indexed values, collecting dynamic mapping additions."""

    def __init__(self, index: Index, doc_id: str) -> None:
        self.mappings = Mappings(index.mappings)
        self.doc_id = doc_id
        self.fields: dict[str, list[Any]] = {}
        self.additions: dict[str, dict[str, Any]] = {}

    def parse(self, source: dict[str, Any]) -> tuple[dict[str, list[Any]], dict[str, dict[str, Any]]]:
        self._walk(source, "")
        return self.fields, self.additions

    def _mapping(self, path: str, value: Any) -> dict[str, Any] | None:
        if path in self.additions:
            return self.additions[path]
        mapping, _ = self.mappings.lookup(path)
        if mapping is None:
            mapping = self.mappings.dynamic_mapping(path, value)
            if mapping is not None:
                self.additions[path] = mapping
        return mapping

    def _walk(self, value: Any, path: str) -> None:
        if isinstance(value, dict):
            mapping, _ = self.mappings.lookup(path) if path else (None, path)
            if mapping is not None and mapping.get("type", "object") not in ("object", "nested"):
                self._fail(path, mapping, value)
            for key, sub in value.items():
                self._walk(sub, f"{path}.{key}" if path else key)
            return
        if value is None:
            return
        if isinstance(value, list):
            first = next((v for v in value if v is not None), None)
            mapping = self._mapping(path, first) if first is not None and not isinstance(first, dict) else None
            if mapping is not None and mapping.get("type") == "knn_vector":
                self._add(path, self._vector(path, mapping, value))
                return
            for item in value:
                self._walk(item, path)
            return
        mapping = self._mapping(path, value)
        if mapping is not None:
            self._index_scalar(path, mapping, value)

    def _index_scalar(self, path: str, mapping: dict[str, Any], value: Any) -> None:
        ftype = mapping.get("type", "object")
        try:
            if ftype in ("object", "nested"):
                raise _DocError("mapper_parsing_exception", f"object mapping for [{path}] tried to parse field "
                                f"[{path.rpartition('.')[2]}] as object, but found a concrete value")
            if ftype == "keyword":
                text = keyword_of(value)
                if len(text) <= mapping.get("ignore_above", 2**31):
                    self._add(path, text)
            elif ftype in ("text", "match_only_text"):
                self._add(path, analyze(keyword_of(value), mapping.get("analyzer")))
            elif ftype in NUMERIC:
                self._add(path, number_of(ftype, value))
            elif ftype == "boolean":
                self._add(path, boolean_of(value))
            elif ftype == "date":
                millis = parse_date(value)
                if millis is None:
                    raise ValueError(f"failed to parse date field [{value}]")
                self._add(path, millis)
            else:
                self._fail(path, mapping, value)
        except ValueError:
            self._fail(path, mapping, value)
        for name, sub in mapping.get("fields", {}).items():  # multi-fields index the same value again
            self._index_scalar(f"{path}.{name}", sub, value)

    def _vector(self, path: str, mapping: dict[str, Any], value: list[Any]) -> tuple[float, ...]:
        if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in value):
            self._fail(path, mapping, value)
        if len(value) != mapping["dimension"]:
            raise _DocError("mapper_parsing_exception",
                            f"Vector dimension mismatch. Expected: {mapping['dimension']}, Given: {len(value)}")
        if knn_space(mapping)[1] == "cosinesimil" and not any(value):
            raise _DocError("illegal_argument_exception", "zero vector is not supported when space type is [cosinesimil]")
        return tuple(float(v) for v in value)

    def _add(self, path: str, value: Any) -> None:
        self.fields.setdefault(path, []).append(value)

    def _fail(self, path: str, mapping: dict[str, Any], value: Any) -> None:
        raise _DocError(
            "mapper_parsing_exception",
            f"failed to parse field [{path}] of type [{mapping.get('type', 'object')}] in document with id "
            f"'{self.doc_id}'. Preview of field's value: '{value}'",
        )


# ---------------------------------------------------------------------- _source filtering


def _selected(path: str, patterns: list[str]) -> bool:
    return any(path == p or path.startswith(p + ".") or fnmatch.fnmatchcase(path, p) for p in patterns)


def _parent_of_selected(path: str, patterns: list[str]) -> bool:
    return any(p.startswith(path + ".") or ("*" in p and fnmatch.fnmatchcase(path, p.split(".")[0])) for p in patterns)


def filter_source(source: dict[str, Any], spec: Any) -> dict[str, Any]:
    """``_source`` filtering: true, a pattern or a list of them, or ``{includes, excludes}``."""
    if spec is True or spec is None:
        return source
    if isinstance(spec, str):
        spec = [spec]
    includes = spec if isinstance(spec, list) else list(spec.get("includes") or spec.get("include") or [])
    excludes = [] if isinstance(spec, list) else list(spec.get("excludes") or spec.get("exclude") or [])
    return _filter_obj(source, "", includes, excludes)


def _filter_obj(obj: dict[str, Any], prefix: str, includes: list[str], excludes: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in obj.items():
        path = f"{prefix}{key}"
        if _selected(path, excludes):
            continue
        if not includes or _selected(path, includes):
            out[key] = _filter_value(value, path, [], excludes)
        elif _parent_of_selected(path, includes) and isinstance(value, dict | list):
            kept = _filter_value(value, path, includes, excludes)
            if kept:
                out[key] = kept
    return out


def _filter_value(value: Any, path: str, includes: list[str], excludes: list[str]) -> Any:
    if isinstance(value, dict):
        return _filter_obj(value, path + ".", includes, excludes)
    if isinstance(value, list):
        return [_filter_value(v, path, includes, excludes) for v in value]
    return value
