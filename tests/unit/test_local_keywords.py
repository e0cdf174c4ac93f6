"""The embedded store's incremental keyword index and its side tables (use counts, learned facts):
a write indexes only what it adds, scores stay those of one BM25 index over the live records,
stores written before the index existed still open, and bookkeeping never writes a segment."""

import json
import random

import numpy as np
import pytest

from cairn.core.models import ContextRecord
from cairn.ports.vectorstores import SearchMode, VectorQuery, keywords
from cairn.ports.vectorstores.local import LocalVectorStore

pytestmark = pytest.mark.unit
DIM = 4
WORDS = "refund card travel hotel flight error code invoice payment delay storm river bank loan".split()


def rec(i, words, vec=(1.0, 0.0, 0.0, 0.0), **kw):
    return ContextRecord.build(tenant="acme", uri=f"cairn://resources/kb/d{i}.md", level=2, vector=list(vec),
                               title=words[0], text=" ".join(words[1:]), **kw)


def keyword_scores(store, text):
    hits = store.query(VectorQuery(tenant="acme", text=text, mode=SearchMode.KEYWORD, limit=1000))
    return {h.record.uri: h.score for h in hits}


def bm25s_scores(records, text):
    """What one bm25s index built from scratch over ``records`` says (the engine the store used to rebuild)."""
    texts = [" ".join(filter(None, (r.title, r.abstract, r.text))) for r in records]
    index = keywords.bm25s().BM25()
    index.index(keywords.tokenize(texts), show_progress=False)
    tokens = [t for t in keywords.tokenize([text])[0] if t in index.vocab_dict]
    scores = index.get_scores(tokens) if tokens else np.zeros(len(records))
    return {r.uri: float(s) for r, s in zip(records, scores, strict=True) if s > 0}


def test_scores_after_writes_replacements_and_deletes_are_those_of_a_fresh_bm25_index(tmp_path):
    rng = random.Random(3)
    store = LocalVectorStore(tmp_path, dimension=DIM)
    live: dict[str, ContextRecord] = {}
    for step in range(40):  # small writes, rewrites of the same ids, deletes: many chunks and segments
        batch = [rec(rng.randrange(60), rng.choices(WORDS, k=rng.randint(1, 9))) for _ in range(rng.randint(1, 6))]
        store.upsert(batch)
        live.update({r.uri: r for r in batch})
        if step % 4 == 3:
            doomed = rng.sample(sorted(live), k=min(3, len(live)))
            store.delete("acme", [live.pop(i).id for i in doomed])
    fresh = LocalVectorStore(tmp_path, dimension=DIM)  # a new process: the postings saved beside the segments
    for text in ("refund", "card payment delay", "storm storm river", "loan"):
        want = bm25s_scores(list(live.values()), text)
        for s in (store, fresh):
            got = keyword_scores(s, text)
            assert got.keys() == want.keys()
            assert [got[u] for u in want] == pytest.approx(list(want.values()), rel=1e-5)


def test_scores_asked_between_writes_follow_every_write(tmp_path):
    """A term's postings are kept between queries (a conversation asks for the same words turn
    after turn); a write, a rewrite or a delete must show in the very next query."""
    rng = random.Random(5)
    store = LocalVectorStore(tmp_path, dimension=DIM)
    live: dict[str, ContextRecord] = {}
    for step in range(30):
        batch = [rec(rng.randrange(20), rng.choices(WORDS, k=rng.randint(1, 6))) for _ in range(rng.randint(1, 3))]
        store.upsert(batch)
        live.update({r.uri: r for r in batch})
        if step % 3 == 2:
            doomed = rng.sample(sorted(live), k=min(2, len(live)))
            store.delete("acme", [live.pop(i).id for i in doomed])
        for text in ("refund card", "card"):  # the same words each time: the second reads what the first gathered
            want = bm25s_scores(list(live.values()), text)
            got = keyword_scores(store, text)
            assert got.keys() == want.keys(), f"step {step}: {text!r}"
            assert [got[u] for u in want] == pytest.approx(list(want.values()), rel=1e-5)


def test_statistics_of_the_filter_are_those_of_an_index_of_the_kept_records_alone(tmp_path):
    rng = random.Random(5)
    store = LocalVectorStore(tmp_path, dimension=DIM)
    records = [rec(i, rng.choices(WORDS, k=rng.randint(2, 9)), tags=["mine"] if i % 3 == 0 else []) for i in range(45)]
    store.upsert(records)
    store.delete("acme", [records[3].id])  # a deleted record counts in neither
    mine = [r for r in records if "mine" in r.tags and r is not records[3]]
    for text in ("refund card", "storm river bank", "loan"):
        want = bm25s_scores(mine, text)
        for statistics, equal in (("filter", True), ("tenant", False)):
            hits = store.query(VectorQuery(tenant="acme", text=text, mode=SearchMode.KEYWORD, limit=1000,
                                           filter={"tags": "mine"}, keyword_statistics=statistics))
            got = {h.record.uri: h.score for h in hits}
            assert got.keys() == want.keys()
            assert ([got[u] for u in want] == pytest.approx(list(want.values()), rel=1e-5)) is equal, statistics


def test_a_store_written_before_the_index_existed_opens_and_gets_its_index_back(tmp_path):
    store = LocalVectorStore(tmp_path, dimension=DIM)
    store.upsert([rec(1, ["refunds", "refund", "policy"]), rec(2, ["cards", "refund", "to", "card"])])
    store.upsert([rec(3, ["travel", "hotels"])])
    before = keyword_scores(store, "refund")
    folder = tmp_path / "tenants" / "acme"
    sidecars = sorted(folder.glob("seg-*.kw"))
    assert len(sidecars) == 2
    sidecars[0].unlink()  # as an earlier version left it: segments only
    sidecars[1].write_bytes(sidecars[1].read_bytes()[:20])  # and one damaged
    reopened = LocalVectorStore(tmp_path, dimension=DIM)
    assert keyword_scores(reopened, "refund") == pytest.approx(before)
    assert len(list(folder.glob("seg-*.kw"))) == 2  # rebuilt and saved again
    assert keyword_scores(LocalVectorStore(tmp_path, dimension=DIM), "refund") == pytest.approx(before)


def test_uses_are_kept_beside_the_index_and_merged_into_what_the_store_returns(tmp_path):
    store = LocalVectorStore(tmp_path, dimension=DIM)
    a, b = rec(1, ["refund", "policy"]), rec(2, ["travel", "hotels"])
    store.upsert([a, b])
    manifest = (tmp_path / "tenants" / "acme" / "MANIFEST").read_bytes()
    assert store.record_uses("acme", {a.id: 2, "gone": 5}, now=1_000.0) == 1  # an unknown id is dropped
    assert (tmp_path / "tenants" / "acme" / "MANIFEST").read_bytes() == manifest  # no segment, no index change
    other = LocalVectorStore(tmp_path, dimension=DIM)  # another process on the same home
    got = other.fetch("acme", [a.id])[0]
    assert got.active_count == 2 and got.metadata["last_used_at"] == 1_000.0
    hit = other.query(VectorQuery(tenant="acme", text="refund", mode=SearchMode.KEYWORD, limit=1))[0]
    assert hit.record.active_count == 2
    other.upsert([got])  # read back and written again (a memory update): not counted twice
    store.record_uses("acme", {a.id: 1}, now=2_000.0)
    again = store.fetch("acme", [a.id])[0]
    assert again.active_count == 3 and again.metadata["last_used_at"] == 2_000.0
    store.upsert([rec(1, ["refund", "policy", "edited"])])  # an edit keeps the uses
    assert store.fetch("acme", [a.id])[0].active_count == 3
    store.delete("acme", [a.id])
    store.upsert([rec(1, ["refund", "policy"])])  # deleted, then written anew: a new record, no uses
    assert store.fetch("acme", [a.id])[0].active_count == 0


def test_learned_facts_are_kept_with_the_tenant(tmp_path):
    store = LocalVectorStore(tmp_path, dimension=DIM)
    assert store.learned("acme", "floor") is None
    store.learn("acme", "floor", {"value": 0.25, "records": 10})
    assert LocalVectorStore(tmp_path, dimension=DIM).learned("acme", "floor") == {"value": 0.25, "records": 10}
    assert LocalVectorStore(tmp_path, dimension=DIM).learned("globex", "floor") is None
    memory = LocalVectorStore(None, dimension=DIM)
    memory.learn("acme", "k", [1, 2])
    assert memory.learned("acme", "k") == [1, 2]


def test_a_fresh_process_reuses_the_noise_floor_until_the_tenant_grows(tmp_path):
    from cairn.engine.retrieval import evidence

    class CountingEmbedder:
        name, dimension = "counting", DIM

        def __init__(self):
            self.texts = 0

        def embed(self, texts, input_type="document"):
            self.texts += len(texts)
            return np.tile(np.asarray([0.0, 1.0, 0.0, 0.0], dtype=np.float32), (len(texts), 1))

    store = LocalVectorStore(tmp_path, dimension=DIM)
    store.upsert([rec(i, ["refund"], vec=(1.0, 0.1 * i, 0.0, 0.0)) for i in range(20)])
    first = CountingEmbedder()
    floor = evidence.noise_floor(store, first, "acme")
    assert first.texts == evidence.FLOOR_PROBES
    fresh, again = LocalVectorStore(tmp_path, dimension=DIM), CountingEmbedder()
    assert evidence.noise_floor(fresh, again, "acme") == pytest.approx(floor) and again.texts == 0
    fresh.upsert([rec(100 + i, ["travel"], vec=(0.0, 1.0, 0.0, 0.0)) for i in range(10)])  # half as much again
    grown, third = LocalVectorStore(tmp_path, dimension=DIM), CountingEmbedder()
    assert evidence.noise_floor(grown, third, "acme") > floor and third.texts == evidence.FLOOR_PROBES
    assert json.loads(json.dumps(grown.learned("acme", evidence._floor_key(third))))["records"] == 30


def test_compaction_keeps_an_index_beside_every_segment_so_opening_rebuilds_nothing(tmp_path):
    store = LocalVectorStore(tmp_path, dimension=DIM)
    for i in range(30):  # past MAX_SEGMENTS: compactions merge segments and their postings
        store.upsert([rec(i, ["refund", f"w{i}"]), rec(100 + i % 7, ["card", f"v{i}"])])
    folder = tmp_path / "tenants" / "acme"
    named = [s["file"] for s in json.loads((folder / "MANIFEST").read_text())["segments"]]
    sidecars = {p.name: p.stat().st_mtime_ns for p in folder.glob("seg-*.kw")}
    assert sorted(sidecars) == sorted(n.replace(".bin", ".kw") for n in named)
    fresh = LocalVectorStore(tmp_path, dimension=DIM)
    assert keyword_scores(fresh, "refund") == pytest.approx(keyword_scores(store, "refund"))
    assert {p.name: p.stat().st_mtime_ns for p in folder.glob("seg-*.kw")} == sidecars  # nothing rebuilt


def test_a_filter_after_writes_matches_exactly_the_records_it_names(tmp_path):
    def tagged(i, tag):
        return ContextRecord.build(tenant="acme", uri=f"cairn://resources/kb/d{i}.md", level=2, vector=[1.0, 0, 0, 0],
                                   tags=[tag], text=f"doc {i}")

    store = LocalVectorStore(tmp_path, dimension=DIM)
    tags = {i: f"t{i % 3}" for i in range(60)}
    store.upsert([tagged(i, t) for i, t in tags.items()])
    flt = {"tags": "t1", "ancestors": {"$in": ["cairn://resources/kb"]}}

    def expected():
        return sorted(f"cairn://resources/kb/d{i}.md" for i, t in tags.items() if t == "t1")

    def found(s):
        return sorted(h.record.uri for h in s.query(VectorQuery(tenant="acme", vector=[1.0, 0, 0, 0], filter=flt, limit=100)))

    assert found(store) == expected()  # the filter columns are built now
    for step in range(5):  # rewrites (a tag changes), new records, deletes: after each, exactly the predicate
        moved = {i: ("t1" if tags[i] != "t1" else "t2") for i in range(step, 60, 7) if i in tags}
        tags.update(moved)
        store.upsert([tagged(i, t) for i, t in moved.items()])
        tags.update({100 + 10 * step + k: "t1" for k in range(3)})
        store.upsert([tagged(100 + 10 * step + k, "t1") for k in range(3)])
        doomed = list(tags)[step::11]
        store.delete("acme", [tagged(i, "").id for i in doomed])
        for i in doomed:
            tags.pop(i)
        assert found(store) == expected()
        assert store.count("acme", {"tags": "t1"}) == len(expected())
    assert found(LocalVectorStore(tmp_path, dimension=DIM)) == expected()


def test_opened_vectors_are_aligned_for_blas_and_old_unpadded_segments_still_open(tmp_path, monkeypatch):
    from cairn.ports.vectorstores import local_segments as persist

    def opened_matrix(path):
        s = LocalVectorStore(path, dimension=DIM)
        s.count("acme")
        (block,) = s._parts["acme"].vectors.blocks  # one segment, opened as it is on disk
        return s, block

    new = [rec(i, ["refund", f"w{i}"], vec=(1.0, i, 0.0, 0.0)) for i in range(7)]
    LocalVectorStore(tmp_path / "new", dimension=DIM).upsert(new)
    store, matrix = opened_matrix(tmp_path / "new")
    assert matrix.flags.aligned and matrix.ctypes.data % 64 == 0  # a memory map numpy can hand to BLAS
    monkeypatch.setattr(persist, "_ALIGN", 1)  # as segments were written before the padding
    LocalVectorStore(tmp_path / "old", dimension=DIM).upsert(new)
    monkeypatch.setattr(persist, "_ALIGN", 64)
    old, old_matrix = opened_matrix(tmp_path / "old")
    assert old_matrix.flags.aligned
    q = VectorQuery(tenant="acme", vector=[1.0, 3.0, 0.0, 0.0], limit=3)
    assert [h.record.uri for h in old.query(q)] == [h.record.uri for h in store.query(q)]


def test_saved_postings_are_aligned_arrays():
    from cairn.ports.vectorstores import local_keywords as lk

    post = lk.Postings.of_texts(["refund policy refund", "a card refund", "travel"])
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "seg-0000000001.kw"
        lk.save(path, post, 123)
        back = lk.load(path, 3, 123)
        assert back is not None and lk.load(path, 3, 124) is None  # tied to its segment's size
        assert all(a.flags.aligned for a in (back.indptr, back.lengths, back.rows, back.tfs))
        assert back.terms == post.terms and np.array_equal(back.rows, post.rows) and np.array_equal(back.tfs, post.tfs)
