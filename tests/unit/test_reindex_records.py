"""Embedder identity in content hashes, and `cairn reindex`'s copy, verify and blue/green switch (local store)."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from cairn import Cairn
from cairn.app.services import Services
from cairn.core.config import load_settings
from cairn.core.errors import EmbedderMismatch, EmbeddingError
from cairn.core.models import Level
from cairn.engine.ingest import Document, Ingestor
from cairn.engine.reindex import reindex
from cairn.ports.embeddings.base import Embedder, normalize
from cairn.ports.embeddings.identity import EmbedderIdentity, digest_of, tag_of
from cairn.ports.vectorstores.base import VectorQuery
from cairn.ports.vectorstores.local import LocalVectorStore

pytestmark = pytest.mark.unit
ROOT = "cairn://resources/kb"
DOCS = [Document(("billing", "refunds.md"), "# Refunds\n\nRefunds are paid within five days."),
        Document(("billing", "invoices.md"), "# Invoices\n\nInvoices are emailed monthly."),
        Document(("travel.md",), "# Travel\n\nBook trains two weeks ahead.")]


class Hashing(Embedder):
    """Deterministic vectors from a salted hash; two salts are two same-dimension models."""

    dimension = 16

    def __init__(self, name: str, fail_after: int | None = None) -> None:
        self.name, self.fail_after, self.texts = name, fail_after, []

    def _embed(self, texts):
        if self.fail_after is not None and len(self.texts) + len(texts) > self.fail_after:
            raise EmbeddingError(f"{self.name} is unreachable")
        self.texts += texts
        rows = [np.frombuffer(hashlib.sha256((self.name + t).encode()).digest()[:16], dtype=np.uint8).astype(np.float32) + 1
                for t in texts]
        return normalize(np.stack(rows))


def test_content_hashes_carry_the_embedder_so_unchanged_leaves_are_embedded_again_after_a_switch(tmp_path) -> None:
    store = LocalVectorStore(tmp_path / "store", dimension=16)
    first, second = Hashing("custom-a"), Hashing("custom-b")
    Ingestor(store, first, "acme", sleep=lambda s: None).ingest(DOCS, ROOT)
    again = Ingestor(store, first, "acme", sleep=lambda s: None).ingest(DOCS, ROOT)
    assert again.embedded == 0  # same embedder, same content: nothing to do
    switched = Ingestor(store, second, "acme", sleep=lambda s: None).ingest(DOCS, ROOT)
    assert switched.embedded == switched.records  # every vector is the new model's now
    tags = {tag_of(r.content_hash) for page in store.scan("acme") for r in page}
    assert tags == {EmbedderIdentity.of(second).tag}


def test_a_record_from_before_tags_is_kept_as_it_is(tmp_path) -> None:
    store = LocalVectorStore(tmp_path / "store", dimension=16)
    emb = Hashing("custom-a")
    Ingestor(store, emb, "acme", sleep=lambda s: None).ingest(DOCS, ROOT)
    untagged = [r.model_copy(update={"content_hash": digest_of(r.content_hash)}) for page in store.scan("acme") for r in page]
    store.upsert(untagged)  # as an older cairn wrote them
    report = Ingestor(store, emb, "acme", sleep=lambda s: None).ingest(DOCS, ROOT)
    assert report.embedded == 0 and report.written == 0


def _home(tmp_path, model: str, fail_after: int | None = None) -> Services:
    settings = load_settings(env={"CAIRN_HOME": str(tmp_path / "home"), "CAIRN_RECORD_USE": "false"})
    return Services(settings, embedder=Hashing(model, fail_after))


def _ranked(services: Services, text: str) -> list[str]:
    vector = services.embedder.embed_query(text).tolist()
    return [h.record.uri for h in services.store.query(VectorQuery(tenant="default", vector=vector, limit=5))]


def test_reindex_copies_every_record_with_its_metadata_and_memories_share_their_folder_vector(tmp_path) -> None:
    old = _home(tmp_path, "custom-a")
    Cairn(old).ingestor().ingest(DOCS, ROOT)
    Cairn(old).remember("Ann wants refunds to her card", "preferences", user="ann")
    before = {r.id: r for page in old.store.scan("default") for r in page}
    old.store.close()

    new = _home(tmp_path, "custom-b")
    report = reindex(new, ["default"])
    assert report.switched and report.records == len(before)
    assert report.embedded < report.records  # memory folders' L1 shares its L0's vector: embedded once
    moved = {r.id: r for page in new.store.scan("default") for r in page}
    assert set(moved) == set(before)
    for rid, rec in moved.items():
        was = before[rid]
        assert (rec.uri, rec.title, rec.text, rec.metadata, rec.created_at) == (was.uri, was.title, was.text, was.metadata, was.created_at)
        assert tag_of(rec.content_hash) == EmbedderIdentity.of(new.embedder).tag
    folders = [r for r in moved.values() if r.uri.startswith("cairn://user/ann") and r.level is Level.OVERVIEW]
    assert folders and all(np.allclose(r.vector, moved[_l0(moved, r.uri)].vector) for r in folders)
    assert Cairn(new).find("refunds to her card", user="ann").memories  # the new process serves the new index


def _l0(records: dict, uri: str) -> str:
    return next(rid for rid, r in records.items() if r.uri == uri and r.level is Level.ABSTRACT)


def test_an_interrupted_reindex_leaves_the_old_index_serving(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr("cairn.engine.reindex.PAGE", 4)
    old = _home(tmp_path, "custom-a")
    Cairn(old).ingestor().ingest(DOCS, ROOT)
    answer = _ranked(old, "refunds five days")
    old.store.close()

    failing = _home(tmp_path, "custom-b", fail_after=5)  # fails after the first page was written
    with pytest.raises(EmbeddingError):
        reindex(failing, ["default"])
    assert len(failing.embedder.texts) == 4  # one page was written to the new index before the failure
    work = tmp_path / "home" / "reindex"
    assert not work.exists() or not any(work.iterdir())  # the half-built index is gone
    again = _home(tmp_path, "custom-a")
    assert _ranked(again, "refunds five days") == answer  # the old embedder still serves the old index
    with pytest.raises(EmbedderMismatch):
        Cairn(_home(tmp_path, "custom-b")).find("refunds")
