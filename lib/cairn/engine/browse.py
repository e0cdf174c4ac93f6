"""Reading and browsing a tenant's tree: what ``GET /v1/contents`` and ``GET /v1/tree`` answer."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field

from cairn.core import uri as uris
from cairn.core.errors import ContextNotFound
from cairn.core.models import ContextRecord, Level, record_id
from cairn.engine.assemble import citation_of
from cairn.ports.vectorstores import VectorQuery
from cairn.ports.vectorstores.base import MAX_QUERY_LIMIT

if TYPE_CHECKING:
    from cairn.engine.pipeline import Pipeline


class Contents(BaseModel):
    """``GET /v1/contents``: a URI read at one level; L2 bodies come in pages of ``max_chars``."""

    uri: str
    level: int
    kind: str
    title: str
    text: str
    source: str
    offset: int = 0
    next_offset: int | None = Field(default=None, description="pass as offset to read on; null at the end")
    total_chars: int


class TreeNode(BaseModel):
    uri: str
    kind: Literal["directory", "file", "chunk"]
    title: str
    abstract: str
    context_type: str
    children: list[TreeNode] | None = None
    children_total: int | None = None
    text: str | None = Field(default=None, description="a chunk's text (the L2 record search ranks)")
    citation: dict[str, Any] | None = Field(default=None, description="where a chunk is in its document: page, "
                                            "heading_path, start, end")


class Tree(BaseModel):
    uri: str
    children: list[TreeNode]
    total: int = Field(description="children of the folder (chunks of the file); more than listed when the list "
                                   "was cut at limit")
    offset: int = Field(default=0, description="where this page starts among them")
    next_offset: int | None = Field(default=None, description="pass as offset for the next page; null at the end")


def read_page(cairn: Pipeline, uri: str, level: int, offset: int, max_chars: int) -> Contents:
    """``uri`` at ``level``; a long text comes ``max_chars`` at a time from ``offset``."""
    found = cairn.read(uri, level)
    text = found.text
    page = text[offset : offset + max_chars]
    end = offset + len(page)
    return Contents(
        uri=found.uri, level=int(found.level), kind=found.kind, title=found.title, text=page, source=found.source,
        offset=offset, next_offset=end if end < len(text) else None, total_chars=len(text),
    )


def tree(cairn: Pipeline, uri: str, depth: int = 1, limit: int = 100, offset: int = 0) -> Tree:
    """The children of the folder ``uri`` (folders first, then files, by URI), ``depth`` levels
    down, ``limit`` from ``offset``; for a file, its chunks in order (each with its text and citation)."""
    uris.validate(uri)
    children, total = _children(cairn, uri, limit, offset)
    if total == 0 and not cairn.store.fetch(cairn.tenant, [record_id(cairn.tenant, uri, Level.ABSTRACT)]):
        chunks = _chunks(cairn, uri)
        if not chunks:
            raise ContextNotFound(f"no folder or file {uri!r} for this tenant; browse a root such as cairn://resources")
        page = [_chunk_node(r) for r in chunks[offset:offset + limit]]
        return Tree(uri=uri, children=page, total=len(chunks), offset=offset, next_offset=_next(offset, page, len(chunks)))
    nodes = [_node(cairn, r, depth - 1, limit) for r in children]
    return Tree(uri=uri, children=nodes, total=total, offset=offset, next_offset=_next(offset, nodes, total))


def _next(offset: int, page: list[TreeNode], total: int) -> int | None:
    end = offset + len(page)
    return end if page and end < total else None


def _node(cairn: Pipeline, record: ContextRecord, depth: int, limit: int) -> TreeNode:
    kind: Literal["directory", "file"] = "directory" if record.level == Level.ABSTRACT else "file"
    node = TreeNode(uri=record.uri.split("#", 1)[0], kind=kind, title=record.title, abstract=record.abstract,
                    context_type=record.context_type.value)
    if kind == "directory" and depth > 0:
        children, total = _children(cairn, record.uri, limit, 0)
        node.children = [_node(cairn, r, depth - 1, limit) for r in children]
        node.children_total = total
    return node


def _children(cairn: Pipeline, uri: str, limit: int, offset: int) -> tuple[list[ContextRecord], int]:
    """The folder's direct children from ``offset``: sub-folders by their L0 record, files by their
    L2 records (a chunked file is listed once, under its file URI, with its first chunk's abstract)."""
    where = {"parent_uri": uri, "level": {"$in": [int(Level.ABSTRACT), int(Level.DETAIL)]}}
    total_records = cairn.store.count(cairn.tenant, where)
    if total_records == 0:
        return [], 0
    probe = cairn.embedder.embed_one(uri.rsplit("/", 1)[-1] or uri).tolist()
    # every record of the folder (up to one query's limit), so that pages follow one order by URI
    hits = cairn.store.query(VectorQuery(tenant=cairn.tenant, vector=probe, filter=where,
                                         limit=min(total_records, MAX_QUERY_LIMIT)))
    by_uri: dict[str, ContextRecord] = {}
    for hit in hits:
        r = hit.record
        key = r.uri.split("#", 1)[0]
        if key not in by_uri or r.uri < by_uri[key].uri:
            by_uri[key] = r
    ordered = sorted(by_uri.values(), key=lambda r: (r.level != Level.ABSTRACT, r.uri))
    total = len(ordered) if total_records <= len(hits) else max(len(ordered), total_records)
    return ordered[offset:offset + limit], total


CHUNK_WINDOW = 256  # chunk records fetched by key at a time


def _chunks(cairn: Pipeline, uri: str) -> list[ContextRecord]:
    """A file's L2 records in order: ``uri`` itself (a file of one piece) or ``uri#0``, ``uri#1``, ...
    fetched by key (no search runs, nothing counts as a query)."""
    if "#" in uri:
        return []
    found = cairn.store.fetch(cairn.tenant, [record_id(cairn.tenant, uri, Level.DETAIL)])
    start = 0
    while True:
        ids = {record_id(cairn.tenant, f"{uri}#{n}", Level.DETAIL): n for n in range(start, start + CHUNK_WINDOW)}
        window = sorted(cairn.store.fetch(cairn.tenant, list(ids)), key=lambda r: ids[r.id])
        found += window
        if len(window) < CHUNK_WINDOW:
            return found
        start += CHUNK_WINDOW


def _chunk_node(record: ContextRecord) -> TreeNode:
    return TreeNode(uri=record.uri, kind="chunk", title=record.title, abstract=record.abstract,
                    context_type=record.context_type.value, text=record.text, citation=citation_of(record.metadata))
