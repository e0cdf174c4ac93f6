"""``cairn reindex``: move a tenant to another embedder, blue/green.

The records are the source: every record of the tenant (documents, directories, memories, with
their metadata, timestamps and use counts) is read from the index that serves it, its vector is
computed again by the configured embedder from the text it was computed from
(:func:`cairn.engine.ingest.tree.embedding_text`; two levels that shared one vector share the new one),
and it is written to a NEW index, which records the new embedder's identity
(:mod:`cairn.ports.embeddings.identity`). Only when every record is there does the tenant switch over:

* **local**: the tenant's folder is swapped for the new one (two renames; the old folder is kept
  under ``<home>/reindex/`` until you remove it);
* **OpenSearch**: the configured index name becomes an alias of the new index in one atomic
  ``_aliases`` call (the first time, that call also removes the old concrete index, which cannot
  share its name with an alias); every tenant of the index moves, so every tenant must be named;
* **Pinecone**: no aliases exist: the records are written to an index you created (its host is
  ``target``); switching is setting ``CAIRN_PINECONE_INDEX_HOST`` to it (docs/reindex.md).

An interrupted reindex leaves the old index serving; running it again starts the new index over.
The content store (full bodies) and the sessions do not depend on the embedder and are not touched.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cairn.core.errors import ConfigError, RequestError
from cairn.core.models import ContextRecord, Level, record_id
from cairn.core.storage_names import tenant_folder as storage_name
from cairn.engine.context import token_counter
from cairn.engine.ingest.chunking import SPECIAL_TOKENS
from cairn.engine.ingest.tree import embedding_text
from cairn.ports.embeddings.identity import EmbedderIdentity, digest_of, stamp
from cairn.ports.vectorstores.base import validate_tenant

Progress = Callable[[str, int, int], None]
PAGE = 256  # records read, embedded and written at a time


def _quiet(stage: str, done: int, total: int) -> None:
    pass


@dataclass
class ReindexReport:
    tenants: list[str]
    source: str  # the embedder the index held
    target: str  # the embedder it holds now
    old_index: str = ""
    new_index: str = ""
    records: int = 0
    embedded: int = 0  # texts sent to the embedder (shared vectors are embedded once)
    seconds: float = 0.0
    switched: bool = False
    over_window: int = 0  # chunks longer than the new embedder's window (cut for the old one's)
    notes: list[str] = field(default_factory=list)

    def summary(self) -> str:
        head = (f"reindexed {', '.join(self.tenants)}: {self.records} records, {self.embedded} texts embedded in "
                f"{self.seconds:.1f} s; {self.source} -> {self.target}")
        where = f"\nnew index: {self.new_index}" + (f"\nold index (kept): {self.old_index}" if self.old_index else "")
        state = "\nswitched over: the new index serves" if self.switched else "\nnot switched over yet (see below)"
        return head + where + state + "".join(f"\n{n}" for n in self.notes)


@dataclass
class _Plan:
    source: Any  # the store serving now, opened with its own dimension
    target: Any  # the new index
    switch: Callable[[], tuple[str, list[str], bool]]  # -> (what is kept of the old index, notes, switched)
    old_name: str
    new_name: str
    abandon: Callable[[], None] = lambda: None


def reindex(services: Any, tenants: list[str], progress: Progress = _quiet, *, target: str | None = None,
            force: bool = False) -> ReindexReport:
    """Re-embed ``tenants`` with ``services``' embedder into a new index and switch to it."""
    for tenant in tenants:
        validate_tenant(tenant)
    started = time.perf_counter()
    embedder = services.embedder
    want = EmbedderIdentity.of(embedder)
    backend = services.settings.store.backend
    plan = (_local_plan if backend == "local" else _opensearch_plan if backend == "opensearch" else _pinecone_plan)(
        services, tenants, want, target)
    found = [plan.source.embedder_identity(t) for t in tenants]
    have = {EmbedderIdentity.from_dict(f).describe() for f in found if f}
    if not force and found and all(f is not None and EmbedderIdentity.from_dict(f) == want for f in found):
        plan.abandon()
        raise RequestError(f"{', '.join(tenants)} already embedded by {want.describe()}: nothing to reindex "
                           "(configure the NEW embedder first, or pass --force to embed everything again)")
    report = ReindexReport(list(tenants), " / ".join(sorted(have)) or "(not recorded)", want.describe(),
                           old_index=plan.old_name, new_index=plan.new_name)
    try:
        for tenant in tenants:
            _copy(plan.source, plan.target, embedder, tenant, want, report, progress)
            plan.target.keep_embedder_identity(tenant, want.as_dict())
            _verify(plan.source, plan.target, tenant)
    except BaseException:
        plan.abandon()
        raise
    report.old_index, report.notes, report.switched = plan.switch()
    if (note := window_note(report, embedder)) is not None:
        report.notes.append(note)
    report.seconds = time.perf_counter() - started
    return report


# ---------------------------------------------------------------------- copying


def _copy(source: Any, target: Any, embedder: Any, tenant: str, want: EmbedderIdentity, report: ReindexReport,
          progress: Progress) -> None:
    total, done = source.count(tenant), 0
    progress(f"reindex {tenant}", 0, total)
    longer = _longer_than_window(embedder)
    for page in _pages(source, tenant):
        texts = _texts(source, tenant, page)
        report.over_window += sum(1 for rec, text in zip(page, texts, strict=True) if rec.level is Level.DETAIL and longer(text))
        unique = list(dict.fromkeys(texts))
        vectors = dict(zip(unique, embedder.embed(unique), strict=True)) if unique else {}
        target.upsert([_moved(rec, vectors[text], want) for rec, text in zip(page, texts, strict=True)])
        report.embedded += len(unique)
        report.records += len(page)
        done += len(page)
        progress(f"reindex {tenant}", done, total)


def _longer_than_window(embedder: Any) -> Callable[[str], bool]:
    """Whether a text is longer than ``embedder``'s window (its own tokens, with its special ones):
    the chunker cut the tenant's documents for the old embedder's window, and a reindex re-embeds
    the chunks as they are (never false without a declared window)."""
    window = getattr(embedder, "max_tokens", None)
    if not window:
        return lambda text: False
    count = token_counter(embedder)
    return lambda text: count(text) + SPECIAL_TOKENS > window


def window_note(report: ReindexReport, embedder: Any) -> str | None:
    """What the user is told when chunks are longer than the new window (None when all fit)."""
    if not report.over_window:
        return None
    return (f"{report.over_window} chunks are longer than {report.target}'s window of {embedder.max_tokens} tokens, "
            "so their ends are not embedded: a reindex keeps the chunks as they were cut; ingest their sources "
            "again to cut them for the new window (docs/reindex.md)")


def _pages(source: Any, tenant: str) -> Iterator[list[ContextRecord]]:
    for page in source.scan(tenant, batch=PAGE):
        if page:
            yield page


def _texts(source: Any, tenant: str, page: list[ContextRecord]) -> list[str]:
    """What each record's vector is computed from; an overview that shared its abstract's vector
    (a memory folder's L1 is embedded as its L0) keeps sharing it."""
    overviews = [r for r in page if r.level is Level.OVERVIEW and r.vector]
    abstracts = {}
    if overviews:
        ids = [record_id(tenant, r.uri, Level.ABSTRACT) for r in overviews]
        abstracts = {r.uri: r for r in source.fetch(tenant, ids)}
    out = []
    for rec in page:
        l0 = abstracts.get(rec.uri) if rec.level is Level.OVERVIEW else None
        shared = l0 is not None and l0.vector and np.allclose(l0.vector, rec.vector or [], atol=1e-6)
        out.append(embedding_text(l0 if shared and l0 is not None else rec))
    return out


def _moved(rec: ContextRecord, vector: np.ndarray, want: EmbedderIdentity) -> ContextRecord:
    digest = digest_of(rec.content_hash)
    return rec.model_copy(update={"vector": vector.tolist(), "content_hash": stamp(digest, want.tag) if digest else ""})


def _verify(source: Any, target: Any, tenant: str) -> None:
    have, made = source.count(tenant), target.count(tenant)
    if made < have:
        raise ConfigError(f"reindex of {tenant!r} wrote {made} of {have} records (were records added meanwhile? "
                          "run it again); the old index still serves")


# ---------------------------------------------------------------------- local


def _local_plan(services: Any, tenants: list[str], want: EmbedderIdentity, target: str | None) -> _Plan:
    from cairn.ports.vectorstores.local import LocalVectorStore

    path = services.settings.store.path
    if path is None:
        raise ConfigError("reindex needs a store on disk (CAIRN_HOME or CAIRN_STORE_PATH)")
    path = Path(path)
    if len(tenants) != 1:
        raise RequestError("the local store keeps each tenant in its own index: reindex one tenant at a time")
    tenant = tenants[0]
    probe = LocalVectorStore(path, dimension=want.dimension)  # reads the side table only
    found = probe.embedder_identity(tenant)
    probe.close()
    dimension = int(found["dimension"]) if found else want.dimension
    source = LocalVectorStore(path, dimension=dimension)
    work = Path(target) if target else path.parent / "reindex"
    new_home = work / f"{storage_name(tenant)}.{want.tag}"
    shutil.rmtree(new_home, ignore_errors=True)  # what an interrupted run left
    new = LocalVectorStore(new_home, dimension=want.dimension, languages=services.languages)
    live, fresh = path / "tenants" / storage_name(tenant), new_home / "tenants" / storage_name(tenant)

    def switch() -> tuple[str, list[str], bool]:
        source.close()
        new.close()
        kept = work / f"{storage_name(tenant)}.previous-{time.strftime('%Y%m%dT%H%M%S')}"
        if live.exists():
            live.rename(kept)
        try:
            fresh.rename(live)
        except BaseException:
            if kept.exists():
                kept.rename(live)  # the old index serves again
            raise
        shutil.rmtree(new_home, ignore_errors=True)
        return str(kept), [f"remove the old index when you no longer need to go back: rm -r {kept}",
                           "restart `cairn serve` / `cairn mcp` processes with the new embedder configured"], True

    def abandon() -> None:
        new.close()
        shutil.rmtree(new_home, ignore_errors=True)

    return _Plan(source, new, switch, str(live), str(live), abandon)


# ---------------------------------------------------------------------- OpenSearch


def _opensearch_plan(services: Any, tenants: list[str], want: EmbedderIdentity, target: str | None) -> _Plan:
    from cairn.ports.vectorstores.opensearch import OpenSearchVectorStore

    cfg = services.settings.store
    if cfg.password:
        cfg = cfg.model_copy(update={"password": services.secret(cfg.password, "store.password")})
    probe = OpenSearchVectorStore.from_settings(cfg, want.dimension)
    dimension = probe.index_dimension() or want.dimension
    source = OpenSearchVectorStore.from_settings(cfg, dimension, language_policy=services.languages)
    client = source._client
    aliased = client.indices.exists_alias(name=cfg.index)
    current = next(iter(client.indices.get_alias(name=cfg.index))) if aliased else cfg.index
    new_name = target or f"{cfg.index}-{want.tag}"
    if new_name == current:
        raise RequestError(f"the index {cfg.index!r} already is {new_name!r}; pass --target with another index name")
    others = _other_tenants(client, current, tenants)
    if others:
        raise RequestError(f"the index {current!r} holds {others} records of other tenants: an OpenSearch index serves "
                           "every tenant with one embedder, so name every tenant (--tenant A --tenant B ...)")
    if client.indices.exists(index=new_name):
        client.indices.delete(index=new_name)  # what an interrupted run left
    new = OpenSearchVectorStore.from_settings(cfg.model_copy(update={"index": new_name}), want.dimension,
                                              language_policy=services.languages)

    def switch() -> tuple[str, list[str], bool]:
        if aliased:
            actions = [{"remove": {"index": current, "alias": cfg.index}}, {"add": {"index": new_name, "alias": cfg.index}}]
        else:  # an alias cannot share its name with an index: the old one goes in the same atomic call
            actions = [{"add": {"index": new_name, "alias": cfg.index}}, {"remove_index": {"index": current}}]
        client.indices.update_aliases(body={"actions": actions})
        if aliased:
            return current, [f"the old index {current!r} is kept: delete it when you no longer need to go back "
                             f"(DELETE /{current}), or point the alias back to it"], True
        return "", [f"{cfg.index!r} is now an alias of {new_name!r}; the old concrete index was removed by the switch"], True

    def abandon() -> None:
        client.indices.delete(index=new_name, ignore_unavailable=True)

    return _Plan(source, new, switch, current, new_name, abandon)


def _other_tenants(client: Any, index: str, tenants: list[str]) -> int:
    body = {"query": {"bool": {"must_not": [{"terms": {"tenant": tenants}}]}}}
    try:
        return int(client.count(index=index, body=body)["count"])
    except Exception as exc:
        if getattr(exc, "status_code", None) == 404:
            return 0
        raise


# ---------------------------------------------------------------------- Pinecone


def _pinecone_plan(services: Any, tenants: list[str], want: EmbedderIdentity, target: str | None) -> _Plan:
    from cairn.ports.vectorstores.pinecone import MARKER_NAMESPACE, PineconeVectorStore

    cfg = services.settings.store
    cfg = cfg.model_copy(update={"api_key": services.secret(cfg.api_key, "store.api_key")})
    if not target:
        raise RequestError(f"Pinecone has no aliases: create an index (dense, cosine, dimension {want.dimension}) and "
                           "pass its host: cairn reindex --target https://<index>-<project>.svc.<env>.pinecone.io")
    probe = PineconeVectorStore.from_settings(cfg, want.dimension)
    source = PineconeVectorStore.from_settings(cfg, probe.index_dimension() or want.dimension)
    new = PineconeVectorStore.from_settings(cfg.model_copy(update={"index_host": target}), want.dimension)
    dimension = new.index_dimension()
    if dimension is not None and dimension != want.dimension:
        raise ConfigError(f"the index at {target} holds {dimension}-dimensional vectors; {want.describe()} makes "
                          f"{want.dimension}: create it with dimension {want.dimension}")

    stats = source._index.describe_index_stats()
    others = sorted(set(stats.namespaces) - set(tenants) - {MARKER_NAMESPACE})
    if others:
        raise RequestError(f"the index also serves {', '.join(others[:10])}: one Pinecone index serves every tenant "
                           "with one embedder, so name every tenant (--tenant A --tenant B ...)")

    def switch() -> tuple[str, list[str], bool]:
        return cfg.index_host, [f"to switch over, set CAIRN_PINECONE_INDEX_HOST={target} (template parameter "
                                "PineconeIndexHost) and deploy; the old index keeps serving until then. Delete it "
                                "afterwards in the Pinecone console"], False

    return _Plan(source, new, switch, cfg.index_host, target)
