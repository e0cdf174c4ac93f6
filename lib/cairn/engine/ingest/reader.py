"""Progressive reading: L0 (abstract), then L1 (overview), then L2 (full body).

=========  ==========================================  ======================================
level      a directory                                 a leaf (file or chunk)
=========  ==========================================  ======================================
0          its abstract (1-3 sentences)                its abstract (first sentences)
1          its overview (bounded, ~4,000 characters)   its record's text (the chunk, bounded)
2          its full listing, from the content store    the whole file, from the content store
=========  ==========================================  ======================================

Display URIs (``.../.abstract.md``, ``.../.overview.md``) are accepted and read at their level.
"""

from __future__ import annotations

from dataclasses import dataclass

from cairn.core import uri as uris
from cairn.core.errors import ContextNotFound, RequestError
from cairn.core.models import ContextRecord, Level, record_id
from cairn.ports.content import ContentNotFound, ContentStore
from cairn.ports.vectorstores import VectorStore

_DISPLAY = {"/.abstract.md": Level.ABSTRACT, "/.overview.md": Level.OVERVIEW}


@dataclass(frozen=True)
class ReadResult:
    uri: str
    level: Level
    kind: str  # "directory" | "file" | "chunk"
    title: str
    text: str
    source: str  # "record" | "content" | "record (no content store)"
    updated_at: float = 0.0


def _records(store: VectorStore, tenant: str, uri: str) -> dict[Level, ContextRecord]:
    ids = {record_id(tenant, uri, lvl): lvl for lvl in Level}
    if uris.parse(uri).chunk is None:
        ids[record_id(tenant, f"{uri}#0", Level.DETAIL)] = Level.DETAIL
    found: dict[Level, ContextRecord] = {}
    for rec in store.fetch(tenant, list(ids)):
        found.setdefault(ids[rec.id], rec)
    return found


def read(
    store: VectorStore, content: ContentStore | None, tenant: str, uri: str, level: int = 0
) -> ReadResult:
    """Read ``uri`` at ``level`` (0, 1 or 2); raises :class:`ContextNotFound` when nothing is stored there."""
    for suffix, lvl in _DISPLAY.items():
        if uri.endswith(suffix):
            uri, level = uri[: -len(suffix)], lvl
    if level not in (0, 1, 2):
        raise RequestError(f"level must be 0 (abstract), 1 (overview) or 2 (full body), got {level!r}")
    uris.context_type_of(uri)
    recs = _records(store, tenant, uri)
    if not recs:
        raise ContextNotFound(f"nothing is stored at {uri!r} for tenant {tenant!r}; check the URI with `cairn find`")
    is_dir = Level.ABSTRACT in recs
    chunked = uris.parse(uri).chunk is not None
    kind = "directory" if is_dir else ("chunk" if chunked else "file")
    main = recs[Level.ABSTRACT] if is_dir else recs[Level.DETAIL]
    lvl = Level(level)
    if lvl is Level.ABSTRACT:
        return ReadResult(uri, lvl, kind, main.title, main.abstract, "record", main.updated_at)
    if lvl is Level.OVERVIEW:
        text = recs[Level.OVERVIEW].text if is_dir and Level.OVERVIEW in recs else main.text
        return ReadResult(uri, lvl, kind, main.title, text, "record", main.updated_at)
    node = uri.split("#", 1)[0]
    if content is None:
        return ReadResult(uri, lvl, kind, main.title, main.text, "record (no content store)", main.updated_at)
    try:
        body = content.get(tenant, node)
    except ContentNotFound:
        raise ContextNotFound(
            f"{uri!r} has records but no body in the content store; ingest its root again to restore it"
        ) from None
    return ReadResult(uri, lvl, kind, main.title, body, "content", main.updated_at)
