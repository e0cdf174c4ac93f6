"""Where documents come from. A :class:`Document` is a leaf's content and its place in the tree.

Three sources, all producing the same :class:`Document` (or a :class:`Rejected` that says why
an item was skipped; the rest of the batch goes on):

* a folder (:func:`read_folder`): Markdown and text files become one document each; a ``.json``
  file holding one object is one document, a ``.json`` list or a ``.jsonl`` file is a folder
  (named after the file without its suffix) of documents — see :class:`JsonDocument`;
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

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..errors import CairnError, IngestError, RequestError
from ..models import ContextType, MetadataValue

TEXT_SUFFIXES = {".md", ".markdown", ".txt", ".rst", ".text"}
JSON_SUFFIXES = {".json", ".jsonl"}
MAX_FILE_BYTES = 2_000_000
MAX_TEXT_CHARS = MAX_FILE_BYTES  # the same bound for documents that do not come from a file
MAX_METADATA_KEYS = 64


@dataclass(frozen=True)
class Document:
    path: tuple[str, ...]  # segments below the ingest root; the last one is the file name
    text: str
    title: str = ""
    metadata: dict[str, MetadataValue] = field(default_factory=dict)


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


def _jsonl_objects(f: Path) -> Iterator[tuple[str, int, Any] | Rejected]:
    """(``file:line``, line number, object) for each non-blank line; a bad line is a :class:`Rejected`."""
    with open(f, encoding="utf-8") as fh:
        try:
            lines = list(fh)
        except UnicodeDecodeError as exc:
            yield Rejected(str(f), f"is not valid UTF-8 ({exc.reason} at byte {exc.start})")
            return
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            yield f"{f}:{n}", n, json.loads(line)
        except json.JSONDecodeError as exc:
            yield Rejected(f"{f}:{n}", f"invalid JSON: {exc.msg} at column {exc.colno}")


def _json_lines(f: Path, base: tuple[str, ...]) -> Iterator[Document | Rejected]:
    folder = base[:-1] + (f.stem,)
    for item in _jsonl_objects(f):
        if isinstance(item, Rejected):
            yield item
        else:
            where, n, obj = item
            yield _doc_from_obj(obj, where, folder + (str(n),))


def read_json_file(f: Path, path: tuple[str, ...]) -> Iterator[Document | Rejected]:
    """A ``.jsonl`` file (one object a line) or a ``.json`` file (one object, or a list of them)."""
    size = f.stat().st_size
    if size > MAX_FILE_BYTES * 25:
        yield Rejected(str(f), f"file is {size:,} bytes; the limit for JSON files is {MAX_FILE_BYTES * 25:,}")
        return
    if f.suffix.lower() == ".jsonl":
        yield from _json_lines(f, path)
        return
    try:
        data = json.loads(f.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        yield Rejected(str(f), f"is not valid UTF-8 ({exc.reason} at byte {exc.start})")
        return
    except json.JSONDecodeError as exc:
        yield Rejected(str(f), f"invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}")
        return
    if isinstance(data, list):
        folder = path[:-1] + (f.stem,)
        for n, obj in enumerate(data, 1):
            yield _doc_from_obj(obj, f"{f}[{n - 1}]", folder + (str(n),))
    else:
        yield _doc_from_obj(data, str(f), path)


# ----------------------------------------------------------------------------- folders


def read_folder(root: Path) -> Iterator[Document | Rejected]:
    """Every Markdown/text/JSON file under ``root`` (sorted, hidden files skipped)."""
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
    for f in files:
        rel = f.relative_to(root.parent if root.is_file() else root)
        if any(part.startswith(".") for part in rel.parts):
            continue
        suffix = f.suffix.lower()
        if suffix in JSON_SUFFIXES:
            yield from read_json_file(f, tuple(rel.parts))
        elif suffix in TEXT_SUFFIXES:
            yield read_file(f, tuple(rel.parts))
        else:
            supported = ", ".join(sorted(TEXT_SUFFIXES | JSON_SUFFIXES))
            yield Rejected(str(f), f"unsupported file type {f.suffix or '(none)'!r}; supported: {supported}")


def read_file(f: Path, path: tuple[str, ...]) -> Document | Rejected:
    size = f.stat().st_size
    if size > MAX_FILE_BYTES:
        return Rejected(str(f), f"file is {size:,} bytes; the limit is {MAX_FILE_BYTES:,}")
    raw = f.read_bytes()
    if b"\x00" in raw[:8192]:
        return Rejected(str(f), "looks like a binary file (contains NUL bytes)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Rejected(str(f), f"is not valid UTF-8 ({exc.reason} at byte {exc.start})")
    if not text.strip():
        return Rejected(str(f), "is empty")
    return Document(path=path, text=text)


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


class PayloadDocument(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str | list[str] = Field(description="where the document goes below the root: 'a/b/c.md' or ['a','b','c.md']")
    text: str = Field(min_length=1, max_length=MAX_TEXT_CHARS)
    title: str = ""
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("path")
    @classmethod
    def _path(cls, v: str | list[str]) -> str | list[str]:
        _split_path(v)
        return v

    @field_validator("text")
    @classmethod
    def _text(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("text is blank")
        return v


class IngestPayload(BaseModel):
    """What the API accepts: documents to place under ``root_uri`` (validated all at once)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    root_uri: str
    documents: list[PayloadDocument] = Field(min_length=1, max_length=10_000)

    @field_validator("root_uri")
    @classmethod
    def _root(cls, v: str) -> str:
        from .. import uri as uris

        try:
            uris.context_type_of(v)
        except CairnError as exc:
            raise ValueError(exc.message) from None
        return v

    @classmethod
    def parse(cls, data: Any) -> IngestPayload:
        """Validate ``data``; a :class:`RequestError` lists every problem with its path."""
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            problems = [f"{'.'.join(str(p) for p in e['loc']) or 'payload'}: {e['msg']}" for e in exc.errors()]
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
    from .. import uri as uris

    kind = ContextType(context_type)
    if kind is ContextType.MEMORY and not user:
        raise RequestError("memories belong to one user: give the user id")
    base = {
        ContextType.RESOURCE: "cairn://resources",
        ContextType.MEMORY: f"cairn://user/{user}/memories",
        ContextType.SKILL: f"cairn://user/{user}/skills" if user else "cairn://agent/skills",
    }[kind]
    return uris.join(base, *name.split("/")) if name else uris.validate(base)
