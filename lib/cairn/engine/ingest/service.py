"""The ingestor: builds the tree, embeds only what changed, writes, and removes what disappeared.

Order of writes (so a crash at any point leaves nothing that points to missing content, and
running the same call again finishes the job):

1. bodies go to the content store (only those of new or changed nodes);
2. records are embedded and upserted in batches: leaves, then directories deepest first;
3. records of nodes that disappeared (and extra chunks of files that shrank) are deleted from
   the vector store;
4. only then are their bodies deleted from the content store.

A crash after 1 leaves bodies no record points to yet; after 3, bodies whose records are gone.
Both are harmless and the next ingest (or delete) of the same root removes or reuses them.
Every step is idempotent: records have stable ids, bodies stable keys, and unchanged records are
neither embedded nor written again.

The content store is also the inventory of what exists under a root. Without one, bodies are not
kept (``read`` at L2 falls back to the records' bounded text) and nodes that disappeared cannot be
found: the report then says so in ``warnings``.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from cairn.core import uri as uris
from cairn.core.errors import CairnError, IngestError
from cairn.core.models import ContextRecord, Level, record_id
from cairn.engine.context import token_counter
from cairn.engine.ingest.chunking import ChunkingConfig
from cairn.engine.ingest.fetchguard import FetchPolicy
from cairn.engine.ingest.parsers.base import Limits
from cairn.engine.ingest.sources import Document, Rejected, read_beir, read_folder
from cairn.engine.ingest.summaries import ChildSummary
from cairn.engine.ingest.summarizer import DirectorySummarizer, ExtractiveSummarizer
from cairn.engine.ingest.titles import DirTitleRule
from cairn.engine.ingest.tree import (
    INTRO_NAMES,
    PendingRecord,
    Tree,
    build_tree,
    dir_ids,
    natural_key,
    summarize_directory,
)
from cairn.ports.content import ContentStore
from cairn.ports.embeddings import Embedder
from cairn.ports.embeddings.base import uncovered_languages
from cairn.ports.embeddings.identity import EmbedderIdentity
from cairn.ports.vectorstores import VectorStore

log = logging.getLogger("cairn.engine.ingest")

Progress = Callable[[str, int, int], None]  # (stage, done, total)
UPSERT_BATCH = 256  # records embedded per embedder call
WRITE_BATCH = 2048  # records per vector-store upsert (capped by the backend's max_upsert_batch)
FETCH_BATCH = 1000
RETRIES = 4


@dataclass
class IngestReport:
    root_uri: str
    documents: int = 0
    records: int = 0
    embedded: int = 0
    unchanged: int = 0
    written: int = 0  # records upserted (embedded, or changed with their vector reused)
    removed: int = 0  # records deleted: nodes that disappeared, extra chunks
    summarized: int = 0  # directories whose summaries were (re)written
    rejected: list[Rejected] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def docs_per_second(self) -> float:
        return self.documents / self.seconds if self.seconds else 0.0

    @property
    def records_per_second(self) -> float:
        return self.records / self.seconds if self.seconds else 0.0


def language_warnings(embedder: Embedder, texts: list[str], keyword_store: str | None = None) -> list[str]:
    """A warning when documents are written in a language the embedder was not trained on: their
    dense scores are noise. Keyword search still reads them, in their language; ``keyword_store``
    names a store that has none (Pinecone), where nothing but those dense scores answers them."""
    uncovered = uncovered_languages(embedder, texts)
    if not uncovered:
        return []
    from cairn.core.text import LANGUAGES

    said = ", ".join(f"{n} in {LANGUAGES[c].name if c in LANGUAGES else 'another script'}"
                     for c, n in sorted(uncovered.items(), key=lambda kv: -kv[1]))
    covered = ", ".join(sorted(embedder.languages or ()))
    effect = ("their meaning is not searched, only their words" if keyword_store is None else
              f"the {keyword_store} store has no keyword search, so queries in that language are answered by "
              "the embedder's vectors alone, which do not read it")
    return [f"{sum(uncovered.values())} of {len(texts)} document(s) are in a language the embedder {embedder.name!r} "
            f"does not cover ({said}; it covers: {covered}): {effect}. "
            "Choose a multilingual embedder: CAIRN_EMBEDDING_MODEL=multilingual-e5-small (local), "
            "or Bedrock Titan v2 / cohere.embed-multilingual-v3 (docs/languages.md)"]


T = TypeVar("T")


def _quiet(stage: str, done: int, total: int) -> None:
    return None


def retry(fn: Callable[[], T], *, what: str, attempts: int = RETRIES, backoff_s: float = 0.5,
          sleep: Callable[[float], None] = time.sleep) -> T:
    """Call ``fn``; on a retryable :class:`CairnError` wait (0.5 s, 1 s, 2 s, ...) and try again."""
    for attempt in range(1, attempts + 1):
        try:
            return fn()
        except CairnError as exc:
            if not exc.retryable or attempt == attempts:
                raise
            delay = backoff_s * 2 ** (attempt - 1)
            log.warning("retrying", extra={"what": what, "attempt": attempt, "delay_s": delay, "error": exc.message})
            sleep(delay)
    raise AssertionError("unreachable")  # pragma: no cover


class Ingestor:
    def __init__(
        self,
        store: VectorStore,
        embedder: Embedder,
        tenant: str,
        batch_size: int = UPSERT_BATCH,
        *,
        content: ContentStore | None = None,
        summarizer: DirectorySummarizer | None = None,
        title_rules: Sequence[DirTitleRule] = (),
        leaf_title_rules: Sequence[DirTitleRule] = (),
        sleep: Callable[[float], None] = time.sleep,
        chunking: ChunkingConfig | None = None,
        limits: Limits | None = None,
        isolate_parsers: bool = True,
        parse_workers: int = 1,
    ) -> None:
        """``chunking`` sets chunk size and overlap (:class:`ChunkingConfig`); ``limits`` bound each
        file a folder ingest reads (:class:`~cairn.engine.ingest.parsers.base.Limits`); with
        ``isolate_parsers`` the binary formats (PDF, Office, HTML, XML, YAML) are parsed in a worker
        process bounded by ``limits.timeout_s`` and ``limits.memory_mb``; ``parse_workers`` such
        processes parse files in parallel."""
        self.store = store
        self.embedder = embedder
        self.tenant = tenant
        self.batch_size = batch_size
        self.content = content
        self.summarizer = summarizer or ExtractiveSummarizer()
        self.title_rules = tuple(title_rules)
        self.leaf_title_rules = tuple(leaf_title_rules)
        self.sleep = sleep
        # every chunk fits the embedder's window, counted by its own tokenizer (chunking.py)
        window = getattr(embedder, "max_tokens", None)
        self.chunking = (chunking or ChunkingConfig()).for_embedder(window, token_counter(embedder) if window else None)
        self.limits = limits or Limits()
        self.isolate_parsers = isolate_parsers
        self.parse_workers = max(1, parse_workers)
        self.embedder_tag = EmbedderIdentity.of(embedder).tag  # content hashes carry it

    # ----------------------------------------------------------------- sources

    def ingest_path(self, path: Path, root_uri: str, progress: Progress = _quiet, *, format: str = "folder") -> IngestReport:
        """Ingest a folder or file (``format="folder"``) or a BEIR corpus (``format="beir"``)."""
        if not path.exists():
            raise IngestError(f"path {str(path)!r} does not exist")
        if format not in ("folder", "beir"):
            raise IngestError(f"unknown format {format!r}; supported: folder, beir")
        if format == "beir":
            return self._ingest_items(lambda runner: read_beir(path), root_uri, progress, parse=False)
        return self._ingest_items(lambda runner: read_folder(path, limits=self.limits, runner=runner), root_uri, progress)

    def ingest_urls(
        self, urls: Sequence[str], root_uri: str, progress: Progress = _quiet, *, sitemap: str | None = None,
        policy: FetchPolicy | None = None, max_pages: int | None = None,
    ) -> IngestReport:
        """Fetch ``urls`` (and the pages ``sitemap`` lists), robots.txt respected, and make the tree
        under ``root_uri`` hold exactly those pages (see :mod:`cairn.engine.ingest.web`). ``policy`` says
        which internal hosts may be reached and the budget of requests and bytes (default: public
        addresses only, the default budget; the CLI passes ``Services.fetch_policy``)."""
        from cairn.engine.ingest.web import MAX_PAGES, Fetcher, read_urls, sitemap_urls

        limit = max_pages or MAX_PAGES
        fetcher = Fetcher(policy)

        def items(runner: Any) -> Iterable[Document | Rejected]:
            todo = list(urls)
            if sitemap:
                listed, problems = sitemap_urls(fetcher, sitemap, limit=limit)
                yield from problems
                todo += listed
            yield from read_urls(todo, fetcher=fetcher, limits=self.limits, runner=runner, max_pages=limit)

        with fetcher:
            report = self._ingest_items(items, root_uri, progress)
        if fetcher.budget.hit:
            report.warnings.append(f"{fetcher.budget.hit}: what it left unfetched is listed as rejected")
        return report

    def ingest_s3(self, bucket: str, prefix: str, root_uri: str, progress: Progress = _quiet, *,
                  client: object = None) -> IngestReport:
        """Make the tree under ``root_uri`` hold exactly the objects under ``s3://bucket/prefix``,
        each parsed like a file in a folder (see :mod:`cairn.engine.ingest.s3`); ``client`` is a boto3 S3
        client (default: one from the default session)."""
        from cairn.engine.ingest.s3 import read_prefix

        if client is None:
            from cairn.core.errors import require

            client = require("boto3", extra="aws", feature="ingesting from S3").client("s3")
        return self._ingest_items(
            lambda runner: read_prefix(client, bucket, prefix, limits=self.limits, runner=runner), root_uri, progress)

    def _ingest_items(
        self, source: Callable[[Any], Iterable[Document | Rejected]], root_uri: str, progress: Progress, parse: bool = True
    ) -> IngestReport:
        """Read every item of ``source`` (given a parser runner, closed afterwards), then sync the root;
        the report lists what was rejected and what the parsers could not keep."""
        from cairn.engine.ingest.parsers.isolation import IsolatedRunner, RunnerPool

        runner: Any = None
        if parse and self.isolate_parsers:
            runner = RunnerPool(self.limits, self.parse_workers) if self.parse_workers > 1 else IsolatedRunner(self.limits)
        docs: list[Document] = []
        rejected: list[Rejected] = []
        try:
            for item in source(runner):
                (docs if isinstance(item, Document) else rejected).append(item)  # type: ignore[arg-type]
                progress("read", len(docs) + len(rejected), 0)
        finally:
            if runner is not None:
                runner.close()
        report = self.ingest(docs, root_uri, progress)
        report.rejected = rejected + report.rejected
        report.warnings = [f"{'/'.join(d.path)}: {note}" for d in docs for note in d.notes] + report.warnings
        return report

    # ----------------------------------------------------------------- ingest (sync a root)

    def ingest(self, documents: Sequence[Document], root_uri: str, progress: Progress = _quiet) -> IngestReport:
        """Make the tree under ``root_uri`` hold exactly ``documents`` (see the module doc for the order)."""
        started = time.perf_counter()
        tree, report = self._build(documents, root_uri)
        if not tree.chunks:  # nothing accepted: never let a bad batch empty an existing tree
            report.records = 0
            report.warnings.append(
                f"nothing to ingest: no document was accepted; what is stored under {root_uri} was left as it is "
                "(to remove it, delete it)"
            )
            report.seconds = time.perf_counter() - started
            return report
        report.summarized = tree.summarized
        report.unchanged = sum(not p.changed for p in tree.records)
        stored = set(self.content.list(self.tenant, root_uri)) if self.content else set()
        if self.content:  # 1. bodies first
            fresh = {u: b for u, b in tree.bodies.items() if u in tree.changed_nodes or u not in stored}
            self._put_bodies(fresh)
        self._write([p for p in tree.records if p.changed], report, progress)  # 2.
        no_keywords = None if self.store.capabilities().keyword else self.store.backend
        report.warnings += language_warnings(self.embedder, [p.embed_text for p in tree.records
                                                              if p.changed and p.record.level is Level.DETAIL], no_keywords)
        gone = sorted(stored - tree.nodes)
        stale = self._stale_ids(tree, gone)
        if stale:  # 3. records of what disappeared
            report.removed = int(retry(lambda: self.store.delete(self.tenant, stale), what="delete", sleep=self.sleep))
        if self.content and gone:  # 4. then their bodies
            retry(lambda: self.content.delete(self.tenant, gone), what="content delete", sleep=self.sleep)  # type: ignore[union-attr]
        if not self.content:
            report.warnings.append("no content store: full bodies are not kept and removed files are not detected")
        parent = uris.parent(root_uri)
        if parent and tree.changed_nodes & {root_uri}:
            self._refresh_upward(parent, report)
        report.seconds = time.perf_counter() - started
        return report

    # ----------------------------------------------------------------- upsert (siblings stay)

    def upsert(self, documents: Sequence[Document], root_uri: str, progress: Progress = _quiet) -> IngestReport:
        """Add or update ``documents`` under ``root_uri``; every other document stays.

        The documents' records and bodies are written as :meth:`ingest` writes them (unchanged ones
        are not re-embedded; a file that now has fewer chunks loses the extra ones). A folder that
        is new is written from the documents; a folder that already held other documents is
        re-summarised from all its stored children, and so are the folders above it."""
        started = time.perf_counter()
        tree, report = self._build(documents, root_uri)
        if not tree.chunks:
            report.records = 0
            report.warnings.append("nothing to ingest: no document was accepted; nothing was changed")
            report.seconds = time.perf_counter() - started
            return report
        dirs = sorted({u for u in tree.bodies if u not in tree.chunks}, key=uris.depth, reverse=True)
        existing = {r.uri for r in self._fetch([dir_ids(self.tenant, d)[0] for d in dirs])}
        keep = [p for p in tree.records if p.changed and not (p.record.level is not Level.DETAIL and p.record.uri in existing)]
        report.unchanged = sum(not p.changed for p in tree.records)
        if self.content:  # 1. bodies first: the documents', and the new folders'
            self._put_bodies({u: b for u, b in tree.bodies.items() if u in tree.chunks or u not in existing})
        self._write(keep, report, progress)  # 2.
        stale = self._stale_ids(tree, [])
        if stale:  # 3. chunks beyond a file's new count
            report.removed = int(retry(lambda: self.store.delete(self.tenant, stale), what="delete", sleep=self.sleep))
        for d in dirs:  # 4. folders that held other documents: from all their children, then upward
            if d in existing:
                self._refresh_upward(d, report)
        parent = uris.parent(root_uri)
        if parent and root_uri not in existing:
            self._refresh_upward(parent, report)
        report.seconds = time.perf_counter() - started
        return report

    # ----------------------------------------------------------------- delete a subtree

    def delete(self, uri: str, progress: Progress = _quiet) -> IngestReport:
        """Remove ``uri`` (a directory and everything below it, a file and its chunks) from the vector
        store and the content store, then update the summaries of the directories above it."""
        started = time.perf_counter()
        uris.context_type_of(uri)
        if uris.parse(uri).chunk is not None:
            raise IngestError(f"cannot delete the chunk {uri!r} alone; delete its file {uri.split('#')[0]!r}")
        report = IngestReport(uri)
        nodes = self.content.list(self.tenant, uri) if self.content else []
        ids: list[str] = []
        for node in nodes or [uri]:
            ids += dir_ids(self.tenant, node)
        ids += self._stored_leaves({node: (0, True) for node in nodes or [uri]})
        removed = int(retry(lambda: self.store.delete(self.tenant, ids), what="delete", sleep=self.sleep))
        removed += int(retry(lambda: self.store.delete_by_filter(self.tenant, {"ancestors": uri}), what="delete", sleep=self.sleep))
        report.removed = removed
        if self.content:
            retry(lambda: self.content.delete_tree(self.tenant, uri), what="content delete", sleep=self.sleep)  # type: ignore[union-attr]
        else:
            report.warnings.append("no content store: the directories above were not updated")
        parent = uris.parent(uri)
        if parent and self.content:
            self._refresh_upward(parent, report)
        report.seconds = time.perf_counter() - started
        return report

    # ----------------------------------------------------------------- helpers

    def _build(self, documents: Sequence[Document], root_uri: str) -> tuple[Tree, IngestReport]:
        """The tree for ``documents`` under ``root_uri`` (stored records reused), and its report so far."""
        uris.context_type_of(root_uri)
        tree = build_tree(
            self.tenant, root_uri, documents, fetch=self._fetch, summarizer=self.summarizer,
            title_rules=self.title_rules, leaf_title_rules=self.leaf_title_rules, chunking=self.chunking,
            embedder_tag=self.embedder_tag,
        )
        report = IngestReport(root_uri, documents=len(documents), records=len(tree.records), rejected=list(tree.rejected))
        return tree, report

    def _fetch(self, ids: list[str]) -> list[ContextRecord]:
        out: list[ContextRecord] = []
        for start in range(0, len(ids), FETCH_BATCH):
            batch = ids[start : start + FETCH_BATCH]
            out += retry(functools.partial(self.store.fetch, self.tenant, batch), what="fetch", sleep=self.sleep)
        return out

    def _put_bodies(self, bodies: dict[str, str]) -> None:
        items = list(bodies.items())
        for start in range(0, len(items), 500):
            batch = dict(items[start : start + 500])
            retry(functools.partial(self.content.put_many, self.tenant, batch), what="content put", sleep=self.sleep)  # type: ignore[union-attr]

    def _write(self, changed: list[PendingRecord], report: IngestReport, progress: Progress) -> None:
        """Embed (in batches of similar length, with retries) and upsert: leaves, then directories."""
        leaves = sorted((p for p in changed if p.record.level is Level.DETAIL), key=lambda p: len(p.embed_text))
        dirs = [p for p in changed if p.record.level is not Level.DETAIL]  # already deepest first
        limit = max(1, min(WRITE_BATCH, self.store.capabilities().max_upsert_batch))
        todo = sum(p.vector is None for p in changed)
        done = 0
        progress("embed", 0, todo)
        for group in (leaves, dirs):
            ready: list[ContextRecord] = [p.record.model_copy(update={"vector": p.vector}) for p in group if p.vector]
            need = [p for p in group if p.vector is None]
            for start in range(0, len(need), self.batch_size):
                batch = need[start : start + self.batch_size]
                texts = [p.embed_text for p in batch]
                vectors = retry(functools.partial(self.embedder.embed, texts), what="embed", sleep=self.sleep)
                ready += [p.record.model_copy(update={"vector": v.tolist()}) for p, v in zip(batch, vectors)]
                done += len(batch)
                report.embedded += len(batch)
                if len(ready) >= limit:
                    self._upsert(ready, report)
                    ready = []
                progress("embed", done, todo)
            self._upsert(ready, report)

    def _upsert(self, records: list[ContextRecord], report: IngestReport) -> None:
        if records:
            retry(lambda: self.store.upsert(records), what="upsert", sleep=self.sleep)
            report.written += len(records)

    def _stale_ids(self, tree: Tree, gone: list[str]) -> list[str]:
        """Ids of records that must go: those of vanished nodes, and chunks beyond a file's new count."""
        ids = [i for node in gone for i in dir_ids(self.tenant, node)]
        probes = {node: (0, True) for node in gone}
        for file_uri, n in tree.chunks.items():
            if file_uri in tree.changed_nodes:
                probes[file_uri] = (0, False) if n == 1 else (n, True)
        return ids + self._stored_leaves(probes)

    def _stored_leaves(self, probes: dict[str, tuple[int, bool]]) -> list[str]:
        """Stored leaf ids of each ``file_uri#first``, ``#first+1``, ... (and of ``file_uri`` itself
        when asked), probed for all files at once, one chunk number per round."""
        found = [r.id for r in self._fetch([record_id(self.tenant, u, Level.DETAIL) for u, (_, plain) in probes.items() if plain])]
        active = {u: first for u, (first, _) in probes.items()}
        while active:
            ids = {record_id(self.tenant, f"{u}#{n}", Level.DETAIL): u for u, n in active.items()}
            hits = {r.id for r in self._fetch(list(ids))}
            found += list(hits)
            active = {ids[i]: active[ids[i]] + 1 for i in hits}
        return found

    def _refresh_upward(self, dir_uri: str | None, report: IngestReport) -> None:
        """Re-summarise ``dir_uri`` and its ancestors from their stored children (after a delete, or an
        ingest below an existing tree); a directory left empty is removed too."""
        while dir_uri and self.content is not None:
            l0_id, l1_id = dir_ids(self.tenant, dir_uri)
            old = {r.id: r for r in self._fetch([l0_id, l1_id])}
            if l0_id not in old:
                return  # above every ingested tree
            children = self._stored_children(dir_uri)
            if not children:
                report.removed += self.store.delete(self.tenant, [l0_id, l1_id])
                self.content.delete(self.tenant, [dir_uri])
                dir_uri = uris.parent(dir_uri)
                continue
            l0 = old[l0_id]
            kids = [c for c, _ in children]
            intro = next((body for c, body in children if body is not None), None)
            result = summarize_directory(
                self.tenant, dir_uri, l0.title, kids, intro, l0.metadata, self.summarizer, l0, old.get(l1_id), time.time(),
                tag=self.embedder_tag,
            )
            report.summarized += result.summarized
            changed = [p for p in result.records if p.changed]
            if not changed:
                return  # nothing above can change either
            self._put_bodies({dir_uri: result.body})
            self._write(changed, report, _quiet)
            dir_uri = uris.parent(dir_uri)

    def _stored_children(self, dir_uri: str) -> list[tuple[ChildSummary, str | None]]:
        """The summaries of a directory's children, read back from the stores (with a README's body)."""
        assert self.content is not None
        depth = uris.depth(dir_uri) + 1
        nodes = [u for u in self.content.list(self.tenant, dir_uri) if uris.depth(u) == depth]
        candidates = {
            u: [(True, record_id(self.tenant, u, Level.ABSTRACT)), (False, record_id(self.tenant, u, Level.DETAIL)),
                (False, record_id(self.tenant, f"{u}#0", Level.DETAIL))]
            for u in nodes
        }
        found = {r.id: r for r in self._fetch([i for c in candidates.values() for _, i in c])}
        out: list[tuple[ChildSummary, str | None]] = []
        for u in nodes:
            hit = next(((is_dir, found[i]) for is_dir, i in candidates[u] if i in found), None)
            if hit is None:
                continue  # a body without records: left by an interrupted write, not part of the tree
            is_dir, rec = hit
            name = u.rsplit("/", 1)[1]
            title = rec.title.split(" — ")[0] if rec.uri.endswith("#0") else rec.title
            intro = None
            if not is_dir and name.rsplit(".", 1)[0].lower() in INTRO_NAMES:
                intro = self.content.get(self.tenant, u)
            out.append((ChildSummary(name, title, rec.abstract, is_dir), intro))
        return sorted(out, key=lambda c: natural_key(c[0].name))
