"""The tree builder: documents under a root URI become L2 leaves and L0/L1 directory records.

Directories are summarised bottom-up, so a directory's overview can list its subfolders'
abstracts. Records carry a content hash: the ingestor embeds only what changed.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from .. import uri as uris
from ..models import ContextRecord, Level
from . import summaries
from .chunking import chunk
from .sources import Document

INTRO_NAMES = ("readme", "index", "_index", "overview")


@dataclass(frozen=True)
class PendingRecord:
    """A record to write, and the text its vector is computed from."""

    record: ContextRecord
    embed_text: str


def content_hash(*parts: object) -> str:
    blob = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def _stem(name: str) -> str:
    return name.rsplit(".", 1)[0] if "." in name else name


def _leaf_records(tenant: str, file_uri: str, doc: Document, now: float) -> list[PendingRecord]:
    title = doc.title or summaries.first_heading(doc.text) or _stem(doc.path[-1])
    pieces = chunk(doc.text)
    out = []
    for n, body in enumerate(pieces):
        leaf_uri = file_uri if len(pieces) == 1 else uris.with_chunk(file_uri, n)
        section = summaries.first_heading(body) if len(pieces) > 1 else None
        leaf_title = f"{title} — {section}" if section and section != title else title
        abstract = summaries.first_sentences(body) or leaf_title
        rec = ContextRecord.build(
            tenant=tenant,
            uri=leaf_uri,
            level=Level.DETAIL,
            title=leaf_title,
            abstract=abstract,
            text=body,
            metadata=dict(doc.metadata),
            created_at=now,
            updated_at=now,
            content_hash=content_hash(leaf_title, body, doc.metadata),
        )
        out.append(PendingRecord(rec, f"{leaf_title}\n{body}"))
    return out


def build_tree(tenant: str, root_uri: str, documents: Sequence[Document], now: float | None = None) -> list[PendingRecord]:
    """All records for ``documents`` placed under ``root_uri``: leaves first, then directories."""
    uris.context_type_of(root_uri)  # validates, and rejects namespace URIs like cairn://user
    now = time.time() if now is None else now
    out: list[PendingRecord] = []
    children: dict[str, dict[str, summaries.ChildSummary]] = defaultdict(dict)
    intros: dict[str, str] = {}
    for doc in documents:
        file_uri = uris.join(root_uri, *doc.path)
        leaves = _leaf_records(tenant, file_uri, doc, now)
        out.extend(leaves)
        parent = uris.parent(file_uri) or root_uri
        first = leaves[0].record
        name = doc.path[-1]
        children[parent][name] = summaries.ChildSummary(name, first.title.split(" — ")[0], first.abstract, False)
        if _stem(name).lower() in INTRO_NAMES:
            intros[parent] = doc.text
        # make sure every directory between the root and the file exists
        d = parent
        while d != root_uri and uris.is_under(d, root_uri):
            up = uris.parent(d) or root_uri
            children[up].setdefault(d.rsplit("/", 1)[1], None)  # type: ignore[arg-type]
            d = up
    dirs = sorted(children, key=lambda u: -uris.depth(u))
    for d in dirs:  # deepest first: children are summarised before their parents
        out.extend(_directory_records(tenant, d, children, intros.get(d), now))
    return out


def _directory_records(
    tenant: str, dir_uri: str, children: dict[str, dict[str, summaries.ChildSummary]], intro: str | None, now: float
) -> list[PendingRecord]:
    name = dir_uri.rsplit("/", 1)[1]
    title = (summaries.first_heading(intro) if intro else None) or name
    kids = [c for c in children[dir_uri].values() if c is not None]
    abstract = summaries.directory_abstract(name, title, kids, intro)
    overview = summaries.directory_overview(title, abstract, kids)
    parent = uris.parent(dir_uri)
    if parent in children:
        children[parent][name] = summaries.ChildSummary(name, title, abstract, True)
    digest = content_hash(title, abstract, overview)
    common = dict(tenant=tenant, uri=dir_uri, title=title, created_at=now, updated_at=now, content_hash=digest)
    l0 = ContextRecord.build(level=Level.ABSTRACT, abstract=abstract, **common)
    l1 = ContextRecord.build(level=Level.OVERVIEW, abstract=abstract, text=overview, **common)
    return [PendingRecord(l0, f"{title}\n{abstract}"), PendingRecord(l1, overview)]
