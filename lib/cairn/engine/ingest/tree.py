"""The tree builder: documents under a root URI become L2 leaves and L0/L1 directory records.

Directories are summarised bottom-up, so a directory's overview can list its subfolders'
abstracts. Every record carries a content hash of its *inputs* (a leaf: title, body, metadata; a
directory: title, intro, its children's titles and abstracts, metadata and the summarizer's
version). Given the records already stored, the builder

* keeps an unchanged record as it is (same timestamps, same vector, not written again);
* never sends an unchanged directory to the summarizer (an LLM call saved);
* marks a changed record for writing, keeping ``created_at``, setting ``updated_at`` to now, and
  reusing the stored vector when the text it is computed from did not change (metadata-only edits
  and directories whose inputs changed but whose summary did not are not embedded again).
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from cairn.core import uri as uris
from cairn.core.errors import CairnError
from cairn.core.models import ContextRecord, Level, MetadataValue, record_id
from cairn.core.text import prose
from cairn.engine.ingest import summaries
from cairn.engine.ingest.chunking import ChunkingConfig, chunk_sections, markdown_sections
from cairn.engine.ingest.sources import Document, Rejected
from cairn.engine.ingest.summaries import ChildSummary
from cairn.engine.ingest.summarizer import DirectorySummarizer, ExtractiveSummarizer
from cairn.engine.ingest.titles import DirTitleRule, shared_metadata, title_for
from cairn.ports.embeddings.identity import digest_of, stamp, tag_of

INTRO_NAMES = ("readme", "index", "_index", "overview")
LEAF_HASH_VERSION = "leaf-v3"  # v3: chunks cut by structure, with citations in their metadata
_ID_LIKE = re.compile(r"^(\d+|[0-9a-f]{16,}|[0-9a-f-]{32,36})$", re.IGNORECASE)

_HEADED_FORMATS = ("", "markdown", "text", "html", "docx")  # formats whose '# ...' lines are headings
Fetch = Callable[[list[str]], Iterable[ContextRecord]]


@dataclass(frozen=True)
class PendingRecord:
    """A record of the tree; ``changed`` records must be written, ``vector`` is reused when known."""

    record: ContextRecord
    embed_text: str
    changed: bool = True
    vector: list[float] | None = None


@dataclass
class Tree:
    root_uri: str
    records: list[PendingRecord] = field(default_factory=list)  # leaves, then directories deepest first
    bodies: dict[str, str] = field(default_factory=dict)  # node URI -> full body (files and directories)
    chunks: dict[str, int] = field(default_factory=dict)  # file URI -> number of leaf records
    changed_nodes: set[str] = field(default_factory=set)  # nodes with at least one changed record
    rejected: list[Rejected] = field(default_factory=list)
    documents: int = 0
    summarized: int = 0  # directories sent to the summarizer

    @property
    def nodes(self) -> set[str]:
        return set(self.bodies)


def content_hash(*parts: object) -> str:
    blob = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def embedding_text(rec: ContextRecord) -> str:
    """The text a record's vector is computed from (derivable from the record itself)."""
    if rec.level is Level.ABSTRACT:
        return f"{rec.title}\n{rec.abstract}" if rec.title else rec.abstract
    if rec.level is Level.OVERVIEW:
        return rec.text
    if rec.title and not rec.text.startswith(rec.title.removesuffix(" ...")):  # a title cut from the text
        return f"{rec.title}\n{rec.text}"
    return rec.text


def resolve(new: ContextRecord, old: ContextRecord | None, now: float, tag: str = "") -> PendingRecord:
    """Compare a freshly built record with the stored one (see the module doc). ``tag`` is the
    embedder identity's (:mod:`cairn.ports.embeddings.identity`): the new record's hash carries it, and a
    stored vector is kept only when it was made by the same embedder (or before tags were kept)."""
    digest = digest_of(new.content_hash)
    same_embedder = old is not None and tag_of(old.content_hash) in ("", tag)
    if old is not None and same_embedder and digest_of(old.content_hash) == digest:
        return PendingRecord(old.without_vector(), embedding_text(old), changed=False, vector=old.vector)
    text = embedding_text(new)
    created = old.created_at if old is not None and old.created_at else now
    rec = new.model_copy(update={"created_at": created, "updated_at": now, "content_hash": stamp(digest, tag)})
    reuse = old.vector if old is not None and same_embedder and old.vector and embedding_text(old) == text else None
    return PendingRecord(rec, text, changed=True, vector=reuse)


def _stem(name: str) -> str:
    return name.rsplit(".", 1)[0] if "." in name else name


def leaf_title(doc: Document) -> str:
    """The document's title, else its first heading, else its file name — unless the name is an id
    (``17``, a hash): then the start of its first sentence, since an id says nothing."""
    if doc.title:
        return doc.title
    fmt = doc.metadata.get("source.format", "")
    heading = prose.first_heading(doc.text[:20_000]) if fmt in _HEADED_FORMATS else None
    if heading:
        return heading
    stem = _stem(doc.path[-1])
    if not _ID_LIKE.match(stem):
        return stem
    sentence = summaries.first_sentences(doc.text, max_chars=120, max_sentences=1)
    return (sentence[:100].rsplit(" ", 1)[0] + " ...") if len(sentence) > 100 else (sentence or stem)


def _leaf_records(
    tenant: str, file_uri: str, doc: Document, now: float, rules: Sequence[DirTitleRule] = (),
    chunking: ChunkingConfig | None = None,
) -> list[ContextRecord]:
    """One record per chunk; each chunk's citation (page, heading path, offsets) goes into its
    metadata next to the document's own, so every match says where in the file it is."""
    title = leaf_title(doc)
    if rules:
        title = title_for(rules, doc.path, {**doc.metadata, "title": title}) or title
    sections = doc.sections or markdown_sections(doc.text.strip())
    text = doc.text if doc.sections else doc.text.strip()
    pieces = chunk_sections(text, sections, chunking.reserving(title) if chunking else None) or []
    out = []
    for n, piece in enumerate(pieces):
        leaf_uri = file_uri if len(pieces) == 1 else uris.with_chunk(file_uri, n)
        section = piece.label if len(pieces) > 1 or piece.page is not None else None
        title_n = f"{title} — {section}" if section and section != title else title
        meta = {**doc.metadata, **piece.citation()}
        out.append(
            ContextRecord.build(
                tenant=tenant,
                uri=leaf_uri,
                level=Level.DETAIL,
                title=title_n,
                abstract=summaries.first_sentences(piece.text) or title_n,
                text=piece.text,
                metadata=meta,
                created_at=now,
                updated_at=now,
                content_hash=content_hash(LEAF_HASH_VERSION, title_n, piece.text, meta),
            )
        )
    return out


def natural_key(name: str) -> list[tuple[int, int | str]]:
    """Sort key that puts ``2`` before ``10``: children are listed in this order everywhere."""
    return [(0, int(p)) if p.isdigit() else (1, p.lower()) for p in re.split(r"(\d+)", name) if p]


def leaf_ids(tenant: str, file_uri: str, n_chunks: int) -> list[str]:
    if n_chunks <= 1:
        return [record_id(tenant, file_uri, Level.DETAIL)]
    return [record_id(tenant, uris.with_chunk(file_uri, n), Level.DETAIL) for n in range(n_chunks)]


def dir_ids(tenant: str, dir_uri: str) -> list[str]:
    return [record_id(tenant, dir_uri, Level.ABSTRACT), record_id(tenant, dir_uri, Level.OVERVIEW)]


@dataclass
class _Dir:
    rel: tuple[str, ...]
    children: dict[str, ChildSummary | None] = field(default_factory=dict)  # None: a folder not yet summarised
    metadata: dict[str, MetadataValue] | None = None
    intro: str | None = None


def build_tree(
    tenant: str,
    root_uri: str,
    documents: Sequence[Document],
    now: float | None = None,
    *,
    fetch: Fetch | None = None,
    summarizer: DirectorySummarizer | None = None,
    title_rules: Sequence[DirTitleRule] = (),
    leaf_title_rules: Sequence[DirTitleRule] = (),
    chunking: ChunkingConfig | None = None,
    embedder_tag: str = "",
) -> Tree:
    """The records for ``documents`` placed under ``root_uri``: leaves first, then directories.

    A document whose path is not a valid URI, repeats another's path, or names a folder that other
    documents are inside is rejected with the reason; the rest of the batch goes on. ``fetch``
    returns the stored records for a list of ids (to keep what did not change). ``title_rules``
    title directories from their documents' shared metadata; ``leaf_title_rules`` title leaves
    from their own metadata, where ``{title}`` is the title the leaf would have had.
    """
    uris.context_type_of(root_uri)  # validates, and rejects namespace URIs like cairn://user
    now = time.time() if now is None else now
    summarizer = summarizer or ExtractiveSummarizer()
    tree = Tree(root_uri, documents=len(documents))
    placed = _place(root_uri, documents, tree)
    leaves = {}
    for file_uri, doc in list(placed.items()):
        recs = _leaf_records(tenant, file_uri, doc, now, leaf_title_rules, chunking)
        if recs:
            leaves[file_uri] = recs
        else:
            del placed[file_uri]
            tree.rejected.append(Rejected("/".join(doc.path), "holds no text"))
    dirs = _directories(placed)
    ids = [r.id for recs in leaves.values() for r in recs]
    ids += [i for rel in dirs for i in dir_ids(tenant, uris.join(root_uri, *rel))]
    old = {r.id: r for r in (fetch(ids) if fetch and ids else [])}

    for file_uri, recs in leaves.items():
        doc = placed[file_uri]
        pending = [resolve(r, old.get(r.id), now, embedder_tag) for r in recs]
        tree.records.extend(pending)
        tree.bodies[file_uri] = doc.text
        tree.chunks[file_uri] = len(recs)
        if any(p.changed for p in pending):
            tree.changed_nodes.add(file_uri)
        parent = dirs[doc.path[:-1]]
        first = pending[0].record
        title = first.title.split(" — ")[0] if len(recs) > 1 else first.title
        parent.children[doc.path[-1]] = ChildSummary(doc.path[-1], title, first.abstract, False)
        if _stem(doc.path[-1]).lower() in INTRO_NAMES:
            parent.intro = doc.text

    for rel in sorted(dirs, key=lambda r: -len(r)):  # deepest first: children before their parents
        d = dirs[rel]
        dir_uri = uris.join(root_uri, *rel)
        title = title_for(title_rules, rel, d.metadata or {}) or (
            prose.first_heading(d.intro) if d.intro else None
        ) or (rel[-1] if rel else dir_uri.rsplit("/", 1)[1])
        kids = sorted((c for c in d.children.values() if c is not None), key=lambda c: natural_key(c.name))
        l0_id, l1_id = dir_ids(tenant, dir_uri)
        summary = summarize_directory(
            tenant, dir_uri, title, kids, d.intro, d.metadata or {}, summarizer, old.get(l0_id), old.get(l1_id), now,
            tag=embedder_tag,
        )
        tree.records.extend(summary.records)
        tree.bodies[dir_uri] = summary.body
        tree.summarized += summary.summarized
        if any(p.changed for p in summary.records):
            tree.changed_nodes.add(dir_uri)
        if rel:
            dirs[rel[:-1]].children[rel[-1]] = summary.as_child(rel[-1])
    return tree


def _place(root_uri: str, documents: Sequence[Document], tree: Tree) -> dict[str, Document]:
    """File URI -> document, rejecting invalid, duplicate and file-vs-folder conflicting paths."""
    placed: dict[str, Document] = {}
    folders: set[tuple[str, ...]] = set()
    for doc in documents:
        source = "/".join(doc.path)
        try:
            file_uri = uris.join(root_uri, *doc.path)
            uris.with_chunk(file_uri, 0)  # the chunk URIs must be valid too
        except CairnError as exc:
            tree.rejected.append(Rejected(source, exc.message))
            continue
        if file_uri in placed:
            tree.rejected.append(Rejected(source, f"another document already has the path {source!r}; paths must be unique"))
            continue
        placed[file_uri] = doc
        folders.update(doc.path[:i] for i in range(1, len(doc.path)))
    for file_uri, doc in list(placed.items()):
        if doc.path in folders:
            del placed[file_uri]
            tree.rejected.append(
                Rejected("/".join(doc.path), "this path is a document and also a folder holding other documents")
            )
    return placed


def _directories(placed: Mapping[str, Document]) -> dict[tuple[str, ...], _Dir]:
    dirs: dict[tuple[str, ...], _Dir] = {(): _Dir(())}
    for doc in placed.values():
        for i in range(len(doc.path)):
            rel = doc.path[:i]
            d = dirs.setdefault(rel, _Dir(rel))
            d.metadata = shared_metadata(d.metadata, doc.metadata)
            if i:
                dirs[rel[:-1]].children.setdefault(rel[-1], None)
    return dirs


@dataclass
class DirectoryResult:
    records: list[PendingRecord]
    body: str
    title: str
    abstract: str
    summarized: int

    def as_child(self, name: str) -> ChildSummary:
        return ChildSummary(name, self.title, self.abstract, True)


def summarize_directory(
    tenant: str,
    dir_uri: str,
    title: str,
    children: Sequence[ChildSummary],
    intro: str | None,
    metadata: Mapping[str, MetadataValue],
    summarizer: DirectorySummarizer,
    old_l0: ContextRecord | None,
    old_l1: ContextRecord | None,
    now: float,
    tag: str = "",
) -> DirectoryResult:
    """A directory's L0 and L1 records and its body; the summarizer runs only if its inputs changed."""
    kids = [(c.name, c.title, c.abstract, c.is_dir) for c in children]
    digest = content_hash(summarizer.version, title, intro or "", kids, dict(metadata))
    summarized = 0
    # the summarizer's inputs, whichever embedder embeds its output (a switch calls no LLM again)
    if old_l0 is not None and old_l1 is not None and digest_of(old_l0.content_hash) == digest_of(old_l1.content_hash) == digest:
        abstract, overview = old_l0.abstract, old_l1.text
    else:
        s = summarizer.summarize_directory(title, children, intro=intro, path=dir_uri)
        abstract, overview, summarized = s.abstract, s.overview, 1
    common: dict = {
        "tenant": tenant, "uri": dir_uri, "title": title, "metadata": dict(metadata), "created_at": now, "updated_at": now, "content_hash": digest
    }
    l0 = ContextRecord.build(level=Level.ABSTRACT, abstract=abstract, **common)
    l1 = ContextRecord.build(level=Level.OVERVIEW, abstract=abstract, text=overview, **common)
    records = [resolve(l0, old_l0, now, tag), resolve(l1, old_l1, now, tag)]
    return DirectoryResult(records, directory_body(title, abstract, children), title, abstract, summarized)


def directory_body(title: str, abstract: str, children: Sequence[ChildSummary]) -> str:
    """A directory's full listing (its L2 read): every child with its title and abstract, unbounded."""
    lines = [f"# {title}", "", abstract, ""]
    for c in children:
        kind = "folder" if c.is_dir else "file"
        lines.append(f"- {c.name} ({kind}): {c.title}" + (f" — {c.abstract}" if c.abstract and c.abstract != c.title else ""))
    return "\n".join(lines) + "\n"
