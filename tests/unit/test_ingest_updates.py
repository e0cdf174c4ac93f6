"""Incremental updates, sync, deletes, retries, LLM summaries and progressive reading."""

import hashlib
import json

import numpy as np
import pytest

from cairn.core.errors import ContextNotFound as NotFound
from cairn.core.errors import EmbeddingError
from cairn.engine.ingest import Document, Ingestor, LLMSummarizer, LocalContentStore, read
from cairn.engine.ingest.chunking import CHUNK_CHARS
from cairn.ports.embeddings.base import Embedder, normalize
from cairn.ports.vectorstores.local import LocalVectorStore

pytestmark = pytest.mark.unit
ROOT = "cairn://resources/kb"


class RecordingEmbedder(Embedder):
    """Deterministic vectors from a hash; remembers every text it was asked to embed."""

    name = "recording"
    dimension = 16

    def __init__(self, fail_times: int = 0) -> None:
        self.texts: list[str] = []
        self.fail_times = fail_times

    def _embed(self, texts):
        if self.fail_times:
            self.fail_times -= 1
            raise EmbeddingError("throttled", retryable=True)
        self.texts += texts
        rows = [np.frombuffer(hashlib.sha256(t.encode()).digest()[:16], dtype=np.uint8).astype(np.float32) + 1 for t in texts]
        return normalize(np.stack(rows))


class RecordingLLM:
    """Answers summary prompts with JSON naming the folder's title; remembers the prompts."""

    def __init__(self, answer=None):
        self.prompts: list[str] = []
        self.answer = answer

    def complete(self, prompt, *, system=None, timeout_s=None, json=False):
        self.prompts.append(prompt)
        if self.answer is not None:
            return self.answer
        title = prompt.split("Folder title: ", 1)[1].split("\n", 1)[0]
        return f'{{"abstract": "LLM abstract of {title}.", "overview": "LLM overview of {title}."}}'


@pytest.fixture
def env(tmp_path):
    emb = RecordingEmbedder()
    store = LocalVectorStore(tmp_path / "store", dimension=emb.dimension)
    content = LocalContentStore(tmp_path / "content")
    ing = Ingestor(store, emb, "acme", content=content, sleep=lambda s: None)
    return ing, store, content, emb


def _docs(over=None):
    docs = {
        ("billing", "refunds.md"): "# Refunds\n\nRefunds within 30 days.",
        ("billing", "invoices.md"): "# Invoices\n\nInvoices monthly.",
        ("travel", "hotels.md"): "# Hotels\n\nUp to 200 euros a night.",
    }
    docs.update(over or {})
    return [Document(p, t) for p, t in docs.items() if t is not None]


def _records(store):
    part = store._parts.get("acme")
    return {} if part is None else {(d["uri"], d["level"]): d for d in (part.docs[r] for r in part.live_rows())}


def test_reingest_is_idempotent_and_keeps_timestamps(env):
    ing, store, _content, emb = env
    first = ing.ingest(_docs(), ROOT)
    before = _records(store)
    n = len(emb.texts)
    again = ing.ingest(_docs(), ROOT)
    assert again.embedded == again.written == again.removed == 0 and len(emb.texts) == n
    assert _records(store) == before
    assert first.records == len(before) == 3 + 2 * 3  # 3 leaves, L0+L1 for kb, billing, travel


def test_a_changed_leaf_reembeds_only_it_and_the_summaries_that_changed(env):
    ing, store, content, emb = env
    ing.ingest(_docs(), ROOT)
    before = _records(store)
    emb.texts.clear()
    ing.ingest(_docs({("billing", "refunds.md"): "# Refunds\n\nRefunds within 60 days."}), ROOT)
    assert emb.texts == ["Refunds\n# Refunds\n\nRefunds within 60 days.", emb.texts[1]]
    assert emb.texts[1].startswith("# billing\n")  # billing's overview lists the new abstract
    after = _records(store)
    leaf = (f"{ROOT}/billing/refunds.md", 2)
    assert after[leaf]["created_at"] == before[leaf]["created_at"] < after[leaf]["updated_at"]
    assert after[(f"{ROOT}/travel", 0)] == before[(f"{ROOT}/travel", 0)]  # untouched siblings
    assert content.get("acme", f"{ROOT}/billing/refunds.md").endswith("60 days.")


def test_sync_removes_vanished_files_and_folders_from_both_stores(env):
    ing, store, content, _emb = env
    ing.ingest(_docs(), ROOT)
    report = ing.ingest(_docs({("travel", "hotels.md"): None}), ROOT)
    assert report.removed == 3  # the leaf and travel's L0 and L1
    uris = {u for u, _ in _records(store)}
    assert not any("travel" in u for u in uris)
    assert content.list("acme", ROOT) == sorted(uris)  # no orphan bodies, no body-less records
    assert "travel" not in read(store, content, "acme", ROOT, 1).text


def test_a_file_with_fewer_chunks_loses_the_extra_ones(env):
    ing, store, content, _emb = env
    long = "\n\n".join(f"## Part {n}\n\n" + "word " * 250 for n in range(6))
    ing.ingest(_docs({("guide.md",): long}), ROOT)
    chunks = [u for u, lvl in _records(store) if u.startswith(f"{ROOT}/guide.md#")]
    assert len(chunks) >= 4
    ing.ingest(_docs({("guide.md",): "## Part 0\n\nshort now"}), ROOT)
    assert [u for u, _ in _records(store) if "guide.md" in u] == [f"{ROOT}/guide.md"]
    ing.ingest(_docs({("guide.md",): long}), ROOT)  # and back: the un-chunked record goes
    assert sorted(u for u, _ in _records(store) if "guide.md" in u) == sorted(chunks)
    assert len(read(store, content, "acme", f"{ROOT}/guide.md#1", 1).text) <= CHUNK_CHARS + 10


def test_delete_leaves_no_orphans_and_updates_the_parent(env):
    ing, store, content, _emb = env
    ing.ingest(_docs(), ROOT)
    root_l1 = _records(store)[(ROOT, 1)]["text"]
    report = ing.delete(f"{ROOT}/billing/refunds.md")
    assert report.removed == 1
    billing = read(store, content, "acme", f"{ROOT}/billing", 1).text
    assert "refunds" not in billing and "invoices.md" in billing
    ing.delete(f"{ROOT}/travel")
    recs = _records(store)
    assert {u for u, _ in recs} == {ROOT, f"{ROOT}/billing", f"{ROOT}/billing/invoices.md"}
    assert content.list("acme", ROOT) == sorted({u for u, _ in recs})
    assert recs[(ROOT, 1)]["text"] != root_l1 and "travel" not in recs[(ROOT, 1)]["text"]
    ing.delete(f"{ROOT}/billing/invoices.md")  # billing is now empty: it goes, and so does kb
    assert _records(store) == {} and content.list("acme", ROOT) == []
    again = ing.delete(f"{ROOT}/billing")  # deleting twice is safe
    assert again.removed == 0


def test_delete_then_reingest_restores_the_same_summaries(env):
    ing, store, _content, _emb = env
    ing.ingest(_docs(), ROOT)
    full = _records(store)
    ing.delete(f"{ROOT}/travel/hotels.md")
    ing.ingest(_docs(), ROOT)
    assert {k: v["text"] for k, v in _records(store).items()} == {k: v["text"] for k, v in full.items()}


def test_retryable_embedding_errors_are_retried(tmp_path):
    emb = RecordingEmbedder(fail_times=2)
    store = LocalVectorStore(tmp_path / "s", dimension=emb.dimension)
    waits = []
    ing = Ingestor(store, emb, "acme", content=LocalContentStore(tmp_path / "c"), sleep=waits.append)
    report = ing.ingest(_docs(), ROOT)
    assert report.embedded == report.records and waits == [0.5, 1.0]
    emb.fail_times = 10
    with pytest.raises(EmbeddingError, match="throttled"):
        ing.ingest(_docs({("new.md",): "new"}), ROOT)
    emb.fail_times = 0
    assert ing.ingest(_docs({("new.md",): "new"}), ROOT).embedded > 0


def test_llm_summaries_use_the_versioned_prompt_and_run_only_when_inputs_change(env):
    ing, store, content, _emb = env
    llm = RecordingLLM()
    ing.summarizer = LLMSummarizer(llm)
    ing.ingest(_docs(), ROOT)
    assert len(llm.prompts) == 3  # kb, billing, travel
    assert "Folder title: billing" in llm.prompts[0] and "refunds.md (document): Refunds" in llm.prompts[0]
    assert read(store, content, "acme", f"{ROOT}/billing", 0).text == "LLM abstract of billing."
    ing.ingest(_docs(), ROOT)
    assert len(llm.prompts) == 3  # nothing changed: the model is not asked again
    ing.ingest(_docs({("travel", "hotels.md"): "# Hotels\n\nUp to 250 euros."}), ROOT)
    assert len(llm.prompts) == 4  # travel only: its abstract did not change, so kb's inputs did not


def test_llm_failures_fall_back_to_extractive_and_are_counted(env):
    ing, store, content, _emb = env
    summarizer = LLMSummarizer(RecordingLLM(answer="not json"))
    ing.summarizer = summarizer
    ing.ingest(_docs(), ROOT)
    assert summarizer.fallbacks == 3
    assert read(store, content, "acme", f"{ROOT}/billing", 0).text.startswith("billing: 2 documents")


def test_llm_prompt_input_is_bounded(env):
    ing, _store, _content, _emb = env
    llm = RecordingLLM()
    ing.summarizer = LLMSummarizer(llm)
    ing.ingest([Document(("big", f"{n}.md"), f"# Doc {n}\n\n" + "text " * 80) for n in range(200)], ROOT)
    prompt = next(p for p in llm.prompts if "Folder title: big" in p)
    assert len(prompt) < 8000 and "... and" in prompt and "(200 in all" in prompt


def test_read_is_progressive(env):
    ing, store, content, _emb = env
    long = "# Guide\n\n" + "\n\n".join(f"## Part {n}\n\n" + "word " * 250 for n in range(3))
    ing.ingest(_docs({("guide.md",): long}), ROOT)
    assert read(store, content, "acme", f"{ROOT}/billing", 0).text.startswith("billing: 2 documents")
    assert "- refunds.md (file): Refunds" in read(store, content, "acme", f"{ROOT}/billing/.overview.md").text
    assert read(store, content, "acme", f"{ROOT}/guide.md#1", 2).text == long  # the whole file
    assert read(store, content, "acme", f"{ROOT}/guide.md", 0).kind == "file"
    with pytest.raises(NotFound, match="nothing is stored"):
        read(store, content, "acme", f"{ROOT}/nope.md", 0)
    content.delete("acme", [f"{ROOT}/guide.md"])
    with pytest.raises(NotFound, match="no body in the content store"):
        read(store, content, "acme", f"{ROOT}/guide.md", 2)


def test_records_never_point_to_missing_content_after_a_failed_write(tmp_path):
    class FailingStore(LocalVectorStore):
        def _upsert(self, tenant, records):
            raise RuntimeError("disk full")

    emb = RecordingEmbedder()
    store = FailingStore(tmp_path / "s", dimension=emb.dimension)
    content = LocalContentStore(tmp_path / "c")
    with pytest.raises(Exception, match="disk full"):
        Ingestor(store, emb, "acme", content=content).ingest(_docs(), ROOT)
    assert store.count("acme") == 0 and len(content.list("acme", ROOT)) == 6  # bodies first, records after
    ok = LocalVectorStore(tmp_path / "s", dimension=emb.dimension)
    report = Ingestor(ok, emb, "acme", content=content).ingest(_docs(), ROOT)
    assert report.written == report.records and json.dumps(content.list("acme", ROOT))


def test_a_batch_with_nothing_accepted_leaves_the_stored_tree_alone(env):
    ing, store, content, _ = env
    ing.ingest(_docs(), ROOT)
    before = _records(store)
    report = ing.ingest([Document(("bad?.md",), "x")], ROOT)
    assert report.rejected and "nothing to ingest" in report.warnings[0]
    assert _records(store) == before and len(content.list("acme", ROOT)) == 6
