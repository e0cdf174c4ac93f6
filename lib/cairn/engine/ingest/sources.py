"""Where documents come from. A :class:`Document` is a leaf's content and its place in the tree.

Three sources, all producing the same :class:`Document` (or a :class:`Rejected` that says why
an item was skipped; the rest of the batch goes on):

* a folder (:func:`read_folder`): every file a parser reads (:mod:`cairn.engine.ingest.parsers`: Markdown,
  text, PDF, HTML, Word, slides, spreadsheets, CSV, YAML/XML, e-mail, source code) becomes one
  document that keeps its structure (sections with pages and heading paths); a ``.json`` file
  holding one object is one document, a ``.json`` list or a ``.jsonl`` file is a folder (named
  after the file without its suffix) of documents — see :class:`JsonDocument`. Links that leave
  the folder are not followed (:mod:`cairn.engine.ingest.walk`);
* a BEIR-layout corpus (:func:`read_beir`): ``corpus.jsonl`` lines ``{_id, title, text, metadata}``
  placed at ``metadata.path`` (a list of segments) or else at ``_id`` split on ``/``;
* an API payload (:class:`IngestPayload`): a validated list of ``{path, text, title, metadata}``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import PydanticCustomError

from cairn.core.errors import CairnError, IngestError, RequestError
from cairn.core.models import ContextType, MetadataValue
from cairn.core.uri import MAX_DEPTH, MAX_SEGMENT_LENGTH, MAX_URI_LENGTH
from cairn.engine.ingest.parsers import parse_in_process, parser_for, supported_suffixes
from cairn.engine.ingest.parsers.base import Limits, ParseFailed, Section
from cairn.engine.ingest.walk import FoundFile, walk

JSON_SUFFIXES = {".json", ".jsonl"}
MAX_FILE_BYTES = Limits().max_text_bytes  # text files; other formats: Limits().max_bytes
MAX_TEXT_CHARS = 2_000_000  # documents that do not come from a file (API payloads, JSON documents)
MAX_JSON_BYTES = 50_000_000
MAX_METADATA_KEYS = 64
_SHORTEST_ROOT = "cairn://resources"
MIN_FOLDERS_PER_PAYLOAD = 1000  # a payload's paths make at most max(this, its document count) folders


@dataclass(frozen=True)
class Document:
    path: tuple[str, ...]  # segments below the ingest root; the last one is the file name
    text: str
    title: str = ""
    metadata: dict[str, MetadataValue] = field(default_factory=dict)
    sections: tuple[Section, ...] = ()  # its structure (empty: cut the text as Markdown)
    notes: tuple[str, ...] = ()  # what the parser could not keep (pages without text, a cut), for the report


@dataclass(frozen=True)
class Rejected:
    """An item that was not ingested, and why; the rest of the batch goes on."""

    source: str
    reason: str


# ----------------------------------------------------------------------------- metadata


def flatten_metadata(meta: Mapping[str, Any], prefix: str = "") -> dict[str, MetadataValue]:
    """Flat metadata as records hold it: nested objects become dotted keys
    (``review_metadata.traveler_type``), lists become lists of strings, nulls are dropped."""
    out: dict[str, MetadataValue] = {}
    for key, value in meta.items():
        name = f"{prefix}{key}"
        if value is None:
            continue
        if isinstance(value, Mapping):
            out.update(flatten_metadata(value, name + "."))
        elif isinstance(value, (list, tuple)):
            out[name] = [v if isinstance(v, str) else json.dumps(v, ensure_ascii=False) for v in value]
        elif isinstance(value, (str, int, float, bool)):
            out[name] = value
        else:
            out[name] = str(value)
    return out


def _split_path(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        parts = value.split("/")
    elif isinstance(value, (list, tuple)):
        parts = [str(p) for p in value]
    else:
        raise ValueError(  # noqa: TRY004 - pydantic validators report ValueError, not TypeError
            f"path must be a string like 'a/b/c' or a list of segments, got {type(value).__name__}")
    clean = tuple(p.strip() for p in parts if p.strip())
    if not clean:
        raise ValueError("path is empty")
    return clean


def check_text(text: str, source: str) -> Rejected | None:
    if not text.strip():
        return Rejected(source, "is empty")
    if len(text) > MAX_TEXT_CHARS:
        return Rejected(source, f"text is {len(text):,} characters; the limit is {MAX_TEXT_CHARS:,}")
    if "\x00" in text:
        return Rejected(source, "looks like binary data (contains NUL characters)")
    return None


# ----------------------------------------------------------------------------- JSON documents


class JsonDocument(BaseModel):
    """One JSON object in a ``.json``/``.jsonl`` file, a BEIR corpus line or an API payload.

    ``text`` is required. ``title`` and ``metadata`` (an object; nested objects are flattened to
    dotted keys) are optional. Where the document goes: ``path`` (``"a/b/c"`` or a list of
    segments), else ``_id``/``id`` (a name below the file's folder), else its line number.
    """

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    text: str
    title: str = ""
    metadata: dict[str, Any] = Field(default_factory=dict)
    path: str | list[str] | None = None
    id: str | int | None = Field(default=None, alias="_id")


def _doc_from_obj(obj: Any, where: str, default_path: tuple[str, ...], beir: bool = False) -> Document | Rejected:
    if not isinstance(obj, dict):
        return Rejected(where, f"expected a JSON object with a 'text' field, got {type(obj).__name__}")
    if "_id" not in obj and "id" in obj:
        obj = {**obj, "_id": obj["id"]}
    try:
        jd = JsonDocument.model_validate(obj)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'document'}: {e['msg']}" for e in exc.errors())
        return Rejected(where, f"invalid document: {problems}")
    meta = dict(jd.metadata)
    try:
        if jd.path is not None:
            path = default_path[:-1] + _split_path(jd.path) if not beir else _split_path(jd.path)
        elif beir and isinstance(meta.get("path"), list):
            path = _split_path(meta["path"])
        elif jd.id is not None and str(jd.id).strip():
            path = default_path[:-1] + _split_path(str(jd.id)) if not beir else _split_path(str(jd.id))
        else:
            path = default_path
    except ValueError as exc:
        return Rejected(where, f"invalid path: {exc}")
    meta.pop("path", None)
    flat = flatten_metadata(meta)
    if len(flat) > MAX_METADATA_KEYS:
        return Rejected(where, f"metadata has {len(flat)} keys; the limit is {MAX_METADATA_KEYS}")
    bad = check_text(jd.text or jd.title, where)
    if bad:
        return bad
    return Document(path=path, text=jd.text or jd.title, title=jd.title.strip(), metadata=flat)


def _jsonl_objects(f: Path, shown: str | None = None) -> Iterator[tuple[str, int, Any] | Rejected]:
    """(``file:line``, line number, object) for each non-blank line; a bad line is a :class:`Rejected`."""
    shown = shown or str(f)
    with open(f, encoding="utf-8") as fh:
        try:
            lines = list(fh)
        except UnicodeDecodeError as exc:
            yield Rejected(shown, f"is not valid UTF-8 ({exc.reason} at byte {exc.start})")
            return
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            yield f"{shown}:{n}", n, json.loads(line)
        except json.JSONDecodeError as exc:
            yield Rejected(f"{shown}:{n}", f"invalid JSON: {exc.msg} at column {exc.colno}")


def _json_lines(f: Path, base: tuple[str, ...], shown: str | None = None) -> Iterator[Document | Rejected]:
    folder = base[:-1] + (Path(base[-1]).stem,)
    for item in _jsonl_objects(f, shown):
        if isinstance(item, Rejected):
            yield item
        else:
            where, n, obj = item
            yield _doc_from_obj(obj, where, folder + (str(n),))


def read_json_file(f: Path, path: tuple[str, ...], shown: str | None = None) -> Iterator[Document | Rejected]:
    """A ``.jsonl`` file (one object a line) or a ``.json`` file (one object, or a list of them)."""
    shown = shown or str(f)
    size = f.stat().st_size
    if size > MAX_JSON_BYTES:
        yield Rejected(shown, f"file is {size:,} bytes; the limit for JSON files is {MAX_JSON_BYTES:,}")
        return
    if path[-1].lower().endswith(".jsonl"):
        yield from _json_lines(f, path, shown)
        return
    try:
        data = json.loads(f.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        yield Rejected(shown, f"is not valid UTF-8 ({exc.reason} at byte {exc.start})")
        return
    except json.JSONDecodeError as exc:
        yield Rejected(shown, f"invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}")
        return
    except RecursionError:
        yield Rejected(shown, "invalid JSON: nested too deeply")
        return
    if isinstance(data, list):
        folder = path[:-1] + (Path(path[-1]).stem,)
        for n, obj in enumerate(data, 1):
            yield _doc_from_obj(obj, f"{shown}[{n - 1}]", folder + (str(n),))
    else:
        yield _doc_from_obj(data, shown, path)


# ----------------------------------------------------------------------------- folders


def read_folder(root: Path, *, limits: Limits | None = None, runner: Any = None) -> Iterator[Document | Rejected]:
    """Every file under ``root`` that a parser reads, in name order; everything else is a
    :class:`Rejected` with its reason (hidden files are skipped silently).

    ``runner`` (an :class:`~cairn.engine.ingest.parsers.isolation.IsolatedRunner`) parses the formats
    whose libraries read untrusted binary structures in a bounded worker process; without one
    they are parsed in this process (a page bound still holds, not a time or memory bound).
    """
    limits = limits or Limits()
    workers = getattr(runner, "workers", 1)
    if workers <= 1:
        for item in walk(root):
            yield from _read_found(item, limits, runner)
        return
    from concurrent.futures import ThreadPoolExecutor

    # files are parsed by ``workers`` worker processes at once; results keep the walk's order
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="cairn-parse") as pool:
        pending: list[Any] = []
        for item in walk(root):
            pending.append(pool.submit(_read_all, item, limits, runner))
            while len(pending) > 4 * workers:
                yield from pending.pop(0).result()
        for future in pending:
            yield from future.result()


def _read_all(item: Any, limits: Any, runner: Any) -> list[Any]:
    """Everything one walked item yields (run in the pool)."""
    return list(_read_found(item, limits, runner))


def _read_found(item: Any, limits: Limits, runner: Any) -> Iterator[Document | Rejected]:
    if not isinstance(item, FoundFile):
        yield Rejected(item.source, item.reason)
        return
    suffix = Path(item.rel[-1]).suffix.lower()
    if suffix in JSON_SUFFIXES:
        yield from read_json_file(item.path, item.rel, shown=item.shown)
    else:
        yield read_file(item.path, item.rel, limits=limits, runner=runner, shown=item.shown)


def read_file(
    f: Path, path: tuple[str, ...], *, limits: Limits | None = None, runner: Any = None, shown: str | None = None
) -> Document | Rejected:
    """One file, parsed by the parser for its name's extension."""
    shown = shown or str(f)
    spec = parser_for(path[-1])
    if spec is None:
        suffix = Path(path[-1]).suffix
        supported = " ".join(sorted(set(supported_suffixes()) | JSON_SUFFIXES))
        return Rejected(shown, f"unsupported file type {suffix or '(none)'!r}; supported: {supported}")
    limits = limits or Limits()
    try:
        if spec.isolate and runner is not None:
            spec.load()  # a missing library is reported here, without a round trip
            parsed = runner.parse(spec, f)
        else:
            parsed = parse_in_process(spec, f, limits)
    except ParseFailed as exc:
        return Rejected(shown, exc.message)
    meta: dict[str, MetadataValue] = {"source.format": parsed.format}
    meta.update({f"source.{k}": v for k, v in parsed.metadata.items()})
    return Document(
        path=path, text=parsed.text, title=parsed.title.strip(), metadata=meta,
        sections=tuple(parsed.sections), notes=tuple(parsed.warnings),
    )


# ----------------------------------------------------------------------------- BEIR


def read_beir(path: Path) -> Iterator[Document | Rejected]:
    """A BEIR corpus: ``path`` is the data-set folder (holding ``corpus.jsonl``) or the file itself.

    Each line ``{_id, title, text, metadata}`` becomes a document at ``metadata.path`` (a list of
    segments) if present, else at ``_id`` split on ``/``; the other metadata is kept (flattened).
    """
    corpus = path / "corpus.jsonl" if path.is_dir() else path
    if not corpus.is_file():
        raise IngestError(f"no BEIR corpus at {str(path)!r}: expected a folder holding corpus.jsonl, or the file itself")
    for item in _jsonl_objects(corpus):
        if isinstance(item, Rejected):
            yield item
            continue
        where, n, obj = item
        placed = "path" in obj or "_id" in obj or "id" in obj if isinstance(obj, dict) else True
        if not placed and not isinstance((obj.get("metadata") or {}).get("path"), list):
            yield Rejected(where, "a BEIR document needs '_id' or 'metadata.path' to be placed in the tree")
            continue
        yield _doc_from_obj(obj, where, (str(n),), beir=True)


# ----------------------------------------------------------------------------- API payload


def _shown(segments: tuple[str, ...]) -> str:
    path = "/".join(segments)
    return path if len(path) <= 80 else f"{path[:50]}...{path[-20:]}"


def path_problem(segments: tuple[str, ...], root_uri: str | None = None) -> str | None:
    """Why a document's path cannot be placed (too deep, too long, a segment too long), or None.
    Checked before any work: a path of 1,000 segments would otherwise build 1,000 folders."""
    from cairn.core import uri as uris
    depth = uris.depth(root_uri) if root_uri else 1
    if depth + len(segments) > MAX_DEPTH:
        where = f"below {root_uri} ({depth} segment{'s' if depth != 1 else ''})" if root_uri else "below a root"
        return (f"path {_shown(segments)!r} has {len(segments):,} segments; at most {MAX_DEPTH - depth} are allowed "
                f"{where}, as a URI holds at most {MAX_DEPTH}")
    long = next((s for s in segments if len(s) > MAX_SEGMENT_LENGTH), None)
    if long is not None:
        return (f"path segment {long[:40] + '...'!r} is {len(long):,} characters long; at most "
                f"{MAX_SEGMENT_LENGTH} are allowed")
    length = sum(map(len, segments)) + len(segments) - 1
    if root_uri is None and length > MAX_URI_LENGTH - len(_SHORTEST_ROOT) - 1:
        return (f"path {_shown(segments)!r} is {length:,} characters long; at most "
                f"{MAX_URI_LENGTH - len(_SHORTEST_ROOT) - 1:,} are allowed, as a URI holds at most {MAX_URI_LENGTH:,}")
    if root_uri is not None and len(root_uri) + 1 + length > MAX_URI_LENGTH:
        return (f"path {_shown(segments)!r} makes a URI of {len(root_uri) + 1 + length:,} characters below {root_uri}; "
                f"at most {MAX_URI_LENGTH:,} are allowed")
    return None


class PayloadDocument(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str | list[str] = Field(description="where the document goes below the root: 'a/b/c.md' or ['a','b','c.md']")
    text: str = Field(min_length=1, max_length=MAX_TEXT_CHARS)
    title: str = ""
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("path")
    @classmethod
    def _path(cls, v: str | list[str]) -> str | list[str]:
        problem = path_problem(_split_path(v))
        if problem:
            raise ValueError(problem)
        return v

    @field_validator("text")
    @classmethod
    def _text(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("text is blank")
        return v


class IngestPayload(BaseModel):
    """What the API accepts: documents to place under ``root_uri`` (validated all at once, bounds
    included: each path within a URI's depth and length below the root, and at most
    ``max(1,000, documents)`` folders made by the paths together)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    root_uri: str
    documents: list[PayloadDocument] = Field(min_length=1, max_length=10_000)

    @field_validator("root_uri")
    @classmethod
    def _root(cls, v: str) -> str:
        from cairn.core import uri as uris
        try:
            uris.context_type_of(v)
        except CairnError as exc:
            raise ValueError(exc.message) from None
        return v

    @model_validator(mode="after")
    def _bounds(self) -> IngestPayload:
        problems: list[str] = []
        folders: set[tuple[str, ...]] = set()
        for n, doc in enumerate(self.documents):
            segments = _split_path(doc.path)
            problem = path_problem(segments, self.root_uri)
            if problem:
                problems.append(f"documents.{n}.path: {problem}")
            folders.update(segments[:i] for i in range(1, len(segments)))
        allowed = max(MIN_FOLDERS_PER_PAYLOAD, len(self.documents))
        if len(folders) > allowed:
            problems.append(f"documents: the paths make {len(folders):,} folders below {self.root_uri}; at most "
                            f"{allowed:,} are allowed for {len(self.documents):,} documents (send fewer documents "
                            "a request, or use shallower paths)")
        if problems:
            raise PydanticCustomError("bounds", "{problems}", {"problems": problems})
        return self

    @classmethod
    def parse(cls, data: Any) -> IngestPayload:
        """Validate ``data``; a :class:`RequestError` lists every problem with its path."""
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            problems: list[str] = []
            for e in exc.errors():
                if e["type"] == "bounds":
                    problems += e["ctx"]["problems"]
                else:
                    where = ".".join(str(p) for p in e["loc"]) or "payload"
                    problems.append(f"{where}: {e['msg'].removeprefix('Value error, ')}")
            raise RequestError(
                f"invalid ingest payload ({len(problems)} problem{'s' if len(problems) != 1 else ''}):\n"
                + "\n".join(f"  - {p}" for p in problems),
                details=problems,
            ) from None

    def to_documents(self) -> list[Document]:
        return [
            Document(path=_split_path(d.path), text=d.text, title=d.title.strip(), metadata=flatten_metadata(d.metadata))
            for d in self.documents
        ]


def split_items(items: Iterable[Document | Rejected]) -> tuple[list[Document], list[Rejected]]:
    docs: list[Document] = []
    rejected: list[Rejected] = []
    for item in items:
        (docs if isinstance(item, Document) else rejected).append(item)  # type: ignore[arg-type]
    return docs, rejected


def context_root(context_type: ContextType | str, name: str = "", user: str | None = None) -> str:
    """The root URI for one kind of context: resources, a user's memories, or skills.

    ``context_root("memory", user="alice")`` → ``cairn://user/alice/memories``;
    ``context_root("skill", "search")`` → ``cairn://agent/skills/search``;
    ``context_root("skill", "mine", user="bob")`` → ``cairn://user/bob/skills/mine``.
    """
    from cairn.core import uri as uris
    kind = ContextType(context_type)
    if kind is ContextType.MEMORY and not user:
        raise RequestError("memories belong to one user: give the user id")
    base = {
        ContextType.RESOURCE: "cairn://resources",
        ContextType.MEMORY: f"cairn://user/{user}/memories",
        ContextType.SKILL: f"cairn://user/{user}/skills" if user else "cairn://agent/skills",
    }[kind]
    return uris.join(base, *name.split("/")) if name else uris.validate(base)
