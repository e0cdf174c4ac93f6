"""Writes memories one at a time or in a batch, without touching their siblings, and keeps the
summaries of the folders above them current.

A memory is one L2 record at ``cairn://user/{user}/memories/<category>/<key>`` (its id is the
usual hash of tenant, URI and level, so writing the same memory again overwrites it). Order of
writes, so that a failure at any point leaves no half-written memory and a retry finishes the job:

1. bodies go to the content store (when there is one), for the L2 read;
2. memory records are embedded and upserted (each record is whole: a memory is there or not);
3. the folders above them are re-summarised, deepest first, each from its children.

Folder summaries are extractive and incremental: a folder's L1 record keeps, in its metadata, the
names of its most recently written children (``listed``, newest first, at most ``max_listed``).
Re-summarising a folder reads those children's records back by id (one fetch), counts the folder's
children with one ``count`` call, and rewrites its L0 (what it holds, how many, the latest titles)
and L1 (one line per listed child). Nothing lists the whole folder, so a write costs the same with
ten memories or ten thousand. Two writers racing on one folder can drop a name from ``listed``
(the last write wins); the count and the memories themselves are never affected, and the next
write to that folder lists its own child again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from cairn.core import uri as uris
from cairn.core.models import ContextRecord, Level, record_id
from cairn.engine.ingest.summaries import ChildSummary, directory_overview, first_sentences
from cairn.engine.ingest.tree import PendingRecord, content_hash, dir_ids, directory_body, resolve
from cairn.engine.memory.models import MemoryItem, WriteReport, memory_root
from cairn.ports.content import ContentStore
from cairn.ports.embeddings import Embedder
from cairn.ports.embeddings.identity import EmbedderIdentity
from cairn.ports.vectorstores import VectorStore

HASH_VERSION = "memory-v1"
MAX_LISTED = 40  # children a folder's overview lists (newest first)
EMBED_BATCH = 256
WRITE_BATCH = 512
TITLE_CHARS = 100


def memory_title(text: str) -> str:
    """The first line of a memory, cut at a word when long (``' ...'`` marks the cut)."""
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return line if len(line) <= TITLE_CHARS else line[:TITLE_CHARS].rsplit(" ", 1)[0] + " ..."


def folder_title(dir_uri: str) -> str:
    seg = uris.parse(dir_uri).segments
    return f"Memories of {seg[1]}" if len(seg) == 3 else seg[-1]


def folder_abstract(title: str, count: int, children: Sequence[ChildSummary], is_root: bool) -> str:
    """One or two sentences: how many children, and the newest ones by title."""
    noun = "categor" + ("y" if count == 1 else "ies") if is_root else "memor" + ("y" if count == 1 else "ies")
    names = "; ".join(c.title.rstrip(".") for c in children[:5])
    more = ", ..." if count > 5 else ""
    return (f"{title}: {count} {noun}." + (f" {'Categories' if is_root else 'Latest'}: {names}{more}." if names else ""))[:400]


class MemoryWriter:
    def __init__(
        self,
        store: VectorStore,
        embedder: Embedder,
        tenant: str,
        *,
        content: ContentStore | None = None,
        max_listed: int = MAX_LISTED,
        write_batch: int = WRITE_BATCH,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.tenant = tenant
        self.content = content
        self.max_listed = max_listed
        self.write_batch = max(1, min(write_batch, store.capabilities().max_upsert_batch))
        self.clock = clock
        self.embedder_tag = EmbedderIdentity.of(embedder).tag  # content hashes carry it

    # ----------------------------------------------------------------- public

    def write(self, items: Sequence[MemoryItem]) -> WriteReport:
        """Write ``items`` (the last one wins when two share a URI); refresh the folders above."""
        now = self.clock()
        report = WriteReport()
        built = {item.uri: self.record_of(item, now) for item in items}
        report.uris = list(built)
        old = {r.id: r for r in self.store.fetch(self.tenant, [r.id for r in built.values()])} if built else {}
        pending = [resolve(r, old.get(r.id), now, self.embedder_tag) for r in built.values()]
        changed = [p for p in pending if p.changed]
        report.unchanged = len(pending) - len(changed)
        if changed:
            if self.content is not None:  # 1.
                self.content.put_many(self.tenant, {p.record.uri: p.record.text for p in changed})
            self._save(changed, report)  # 2.
        # 3. always, also when every memory was already stored: a write that failed after its
        # memories but before its folders is finished by writing the same memories again (an
        # unchanged folder costs two fetches and a count, no embedding, no upsert)
        touched: dict[str, dict[str, ChildSummary]] = {}
        for p in reversed(pending):  # the last written is listed first
            r = p.record
            parent, name = r.uri.rsplit("/", 1)
            touched.setdefault(parent, {})[name] = ChildSummary(name, r.title, r.abstract, False)
        self._refresh(touched, now, report)  # 3.
        return report

    def record_of(self, item: MemoryItem, now: float) -> ContextRecord:
        meta = dict(item.metadata)
        meta["category"] = item.category
        meta["kind"] = item.kind.value
        meta["memory_key"] = item.key
        if item.said_at is not None:
            meta["said_at"] = item.said_at
        title = item.title or memory_title(item.text)
        return ContextRecord.build(
            tenant=self.tenant,
            uri=item.uri,
            level=Level.DETAIL,
            title=title,
            abstract=first_sentences(item.text) or title,
            text=item.text,
            tags=[item.category],
            metadata=meta,
            created_at=now,
            updated_at=now,
            content_hash=content_hash(HASH_VERSION, title, item.text, meta),
        )

    # ----------------------------------------------------------------- folders

    def _refresh(self, touched: dict[str, dict[str, ChildSummary]], now: float, report: WriteReport) -> None:
        while touched:
            dir_uri = max(touched, key=uris.depth)  # deepest first: children before their parents
            summary = self._refresh_folder(dir_uri, touched.pop(dir_uri), now, report)
            report.folders.append(dir_uri)
            root = memory_root(uris.owner_of(dir_uri) or "")
            if dir_uri != root:
                parent, name = dir_uri.rsplit("/", 1)
                touched.setdefault(parent, {})[name] = ChildSummary(name, summary.title, summary.abstract, True)

    def _refresh_folder(
        self, dir_uri: str, fresh: dict[str, ChildSummary], now: float, report: WriteReport
    ) -> ChildSummary:
        l0_id, l1_id = dir_ids(self.tenant, dir_uri)
        old = {r.id: r for r in self.store.fetch(self.tenant, [l0_id, l1_id])}
        before = old[l1_id].metadata.get("listed", []) if l1_id in old else []
        listed = list(fresh) + [n for n in (before if isinstance(before, list) else []) if n not in fresh]
        listed = listed[: self.max_listed]
        kids = dict(fresh)
        kids.update(self._children(dir_uri, [n for n in listed if n not in fresh]))
        listed = [n for n in listed if n in kids]  # a child deleted since is dropped
        children = [kids[n] for n in listed]
        count = max(len(listed), self.store.count(self.tenant, {"parent_uri": dir_uri, "level": {"$in": [0, 2]}}))
        title = folder_title(dir_uri)
        is_root = dir_uri == memory_root(uris.owner_of(dir_uri) or "")
        abstract = folder_abstract(title, count, children, is_root)
        overview = directory_overview(title, abstract, children)
        meta = {"listed": listed, "children": count}
        digest = content_hash(HASH_VERSION, title, abstract, overview)
        common: dict[str, Any] = dict(tenant=self.tenant, uri=dir_uri, title=title, abstract=abstract, metadata=meta,
                      created_at=now, updated_at=now, content_hash=digest)
        l0 = ContextRecord.build(level=Level.ABSTRACT, **common)
        l1 = ContextRecord.build(level=Level.OVERVIEW, text=overview, **common)
        pending = [resolve(l0, old.get(l0_id), now, self.embedder_tag), resolve(l1, old.get(l1_id), now, self.embedder_tag)]
        # one embedding serves both levels: the L1 of a memory folder is a listing of its newest
        # children, which its abstract already names; embedding the long listing on every write
        # would double the cost of a write for no better match
        l0_text = pending[0].embed_text
        pending[1] = PendingRecord(pending[1].record, l0_text, pending[1].changed, pending[0].vector)
        changed = [p for p in pending if p.changed]
        if changed:
            if self.content is not None:
                self.content.put(self.tenant, dir_uri, directory_body(title, abstract, children))
            self._save(changed, report)
        return ChildSummary(dir_uri.rsplit("/", 1)[1], title, abstract, True)

    def _children(self, dir_uri: str, names: Iterable[str]) -> dict[str, ChildSummary]:
        """The summaries of the named children, read back by id (a folder's L0, or a memory)."""
        ids: dict[str, tuple[str, bool]] = {}
        for name in names:
            child = f"{dir_uri}/{name}"
            ids[record_id(self.tenant, child, Level.ABSTRACT)] = (name, True)
            ids[record_id(self.tenant, child, Level.DETAIL)] = (name, False)
        out: dict[str, ChildSummary] = {}
        for rec in self.store.fetch(self.tenant, list(ids)) if ids else []:
            name, is_dir = ids[rec.id]
            out[name] = ChildSummary(name, rec.title, rec.abstract, is_dir)
        return out

    # ----------------------------------------------------------------- embed and upsert

    def _save(self, pending: Sequence[PendingRecord], report: WriteReport) -> None:
        ready = [p.record.model_copy(update={"vector": p.vector}) for p in pending if p.vector is not None]
        need = [p for p in pending if p.vector is None]
        for start in range(0, len(need), EMBED_BATCH):
            batch = need[start : start + EMBED_BATCH]
            texts = list(dict.fromkeys(p.embed_text for p in batch))  # a text is embedded once
            vectors = dict(zip(texts, self.embedder.embed(texts)))
            ready += [p.record.model_copy(update={"vector": vectors[p.embed_text].tolist()}) for p in batch]
            report.embedded += len(texts)
        for start in range(0, len(ready), self.write_batch):
            report.written += self.store.upsert(ready[start : start + self.write_batch])
