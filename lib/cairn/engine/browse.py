"""Reading and browsing a tenant's tree: what ``GET /v1/contents`` and ``GET /v1/tree`` answer."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field

from cairn.core import uri as uris
from cairn.core.errors import ContextNotFound
from cairn.core.models import ContextRecord, Level, record_id
from cairn.ports.vectorstores import VectorQuery

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
    kind: Literal["directory", "file"]
    title: str
    abstract: str
    context_type: str
    children: list[TreeNode] | None = None
    children_total: int | None = None


class Tree(BaseModel):
    uri: str
    children: list[TreeNode]
    total: int = Field(description="children of the folder; more than listed when the list was cut at limit")


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


def tree(cairn: Pipeline, uri: str, depth: int = 1, limit: int = 100) -> Tree:
    """The children of the folder ``uri`` (folders first, then files, by URI), ``depth`` levels down."""
    uris.validate(uri)
    children, total = _children(cairn, uri, limit)
    if total == 0 and not cairn.store.fetch(cairn.tenant, [record_id(cairn.tenant, uri, Level.ABSTRACT)]):
        raise ContextNotFound(f"no folder {uri!r} for this tenant; browse a root such as cairn://resources")
    nodes = [_node(cairn, r, depth - 1, limit) for r in children]
    return Tree(uri=uri, children=nodes, total=total)


def _node(cairn: Pipeline, record: ContextRecord, depth: int, limit: int) -> TreeNode:
    kind: Literal["directory", "file"] = "directory" if record.level == Level.ABSTRACT else "file"
    node = TreeNode(uri=record.uri.split("#", 1)[0], kind=kind, title=record.title, abstract=record.abstract,
                    context_type=record.context_type.value)
    if kind == "directory" and depth > 0:
        children, total = _children(cairn, record.uri, limit)
        node.children = [_node(cairn, r, depth - 1, limit) for r in children]
        node.children_total = total
    return node


def _children(cairn: Pipeline, uri: str, limit: int) -> tuple[list[ContextRecord], int]:
    """The folder's direct children: sub-folders by their L0 record, files by their L2 records
    (a chunked file is listed once, under its file URI, with its first chunk's abstract)."""
    where = {"parent_uri": uri, "level": {"$in": [int(Level.ABSTRACT), int(Level.DETAIL)]}}
    total_records = cairn.store.count(cairn.tenant, where)
    if total_records == 0:
        return [], 0
    probe = cairn.embedder.embed_one(uri.rsplit("/", 1)[-1] or uri).tolist()
    hits = cairn.store.query(VectorQuery(tenant=cairn.tenant, vector=probe, filter=where,
                                         limit=min(max(limit * 4, limit), 1000)))
    by_uri: dict[str, ContextRecord] = {}
    for hit in hits:
        r = hit.record
        key = r.uri.split("#", 1)[0]
        if key not in by_uri or r.uri < by_uri[key].uri:
            by_uri[key] = r
    ordered = sorted(by_uri.values(), key=lambda r: (r.level != Level.ABSTRACT, r.uri))
    total = len(ordered) if total_records <= len(hits) else max(len(ordered), total_records)
    return ordered[:limit], total
