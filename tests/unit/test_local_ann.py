"""The local store's ANN index: built in the background for a big partition, kept beside its
segments, never returning a replaced or deleted record, finding what was written since, and as
good as exact search (recall) on clustered vectors."""

import time

import numpy as np
import pytest

from cairn.core.config import load_settings
from cairn.core.errors import VectorStoreError
from cairn.core.models import ContextRecord
from cairn.ports.vectorstores import VectorQuery, local_ann
from cairn.ports.vectorstores.local import LocalVectorStore

pytestmark = pytest.mark.unit
faiss = pytest.importorskip("faiss")
DIM, N = 16, 4000


def vectors(n, seed=1):
    """Unit vectors around 40 topics (the same topics for every seed: queries like the content)."""
    centers = np.random.default_rng(0).standard_normal((40, DIM))
    rng = np.random.default_rng(seed)
    v = centers[rng.integers(0, 40, n)] + 0.5 * rng.standard_normal((n, DIM))
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def records(vecs, start=0, tag="v1"):
    return [ContextRecord.build(tenant="acme", uri=f"cairn://resources/d{i % 9}/r{i}", level=2, title=tag,
                                vector=vecs[i - start].tolist()) for i in range(start, start + len(vecs))]


def ready(store, timeout=120):
    store.count("acme")
    part = store._parts["acme"]
    store.query(VectorQuery(tenant="acme", vector=[1.0] * DIM, limit=1))  # the first query starts the build
    deadline = time.monotonic() + timeout
    while part.ann is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert part.ann is not None, "no index was built"
    return part.ann


def top(store, q, k=10, filt=None):
    return [h.record.uri for h in store.query(VectorQuery(tenant="acme", vector=q.tolist(), limit=k, filter=filt))]


def test_a_big_partition_answers_from_its_index_as_exact_search_would(tmp_path):
    base = vectors(N)
    store = LocalVectorStore(tmp_path, dimension=DIM, ann_min_rows=1000)
    for s in range(0, N, 1000):
        store.upsert(records(base[s : s + 1000], s))
    exact = LocalVectorStore(tmp_path, dimension=DIM, ann="exact")
    index = ready(store)
    assert index.rows >= 0.9 * N and list(tmp_path.glob("tenants/acme/ann-*.faiss"))
    queries = vectors(50, seed=2)
    hits = sum(len(set(top(store, q)) & set(top(exact, q))) for q in queries)
    assert hits / (10 * len(queries)) >= 0.95

    # replaced and deleted records never come back; records written since are found
    gone = [records(base[i : i + 1], i)[0] for i in range(0, 200)]
    store.delete("acme", [r.id for r in gone[:100]])
    store.upsert([r.model_copy(update={"title": "v2"}) for r in gone[100:]])
    fresh = vectors(5, seed=3)
    store.upsert(records(fresh, N))
    for i, q in enumerate(fresh):
        assert top(store, q, 1) == [f"cairn://resources/d{(N + i) % 9}/r{N + i}"]
    found = [h.record for q in base[:200] for h in store.query(VectorQuery(tenant="acme", vector=q.tolist(), limit=3))]
    assert {r.title for r in found if r.uri in {g.uri for g in gone}} <= {"v2"}
    assert not {r.uri for r in found} & {g.uri for g in gone[:100]}


def test_the_process_that_wrote_the_rows_indexes_all_of_them_and_builds_once(tmp_path):
    # it knows which segments hold its rows after its own commits: before, it counted only the
    # segments it had opened, indexed those, and started a new build on every query that followed
    base = vectors(N)
    LocalVectorStore(tmp_path, dimension=DIM).upsert(records(base[:2000]))  # an earlier process's
    store = LocalVectorStore(tmp_path, dimension=DIM, ann_min_rows=1000)
    assert store.count("acme") == 2000  # opened from the folder
    for s in range(2000, N, 500):
        store.upsert(records(base[s : s + 500], s))
    index = ready(store)
    assert index.rows == N
    for q in vectors(20, seed=5):
        top(store, q)
    assert store._parts["acme"].ann is index and not store._ann_builder.busy("acme")


def test_a_fresh_process_reads_the_saved_index_instead_of_building_one(tmp_path, monkeypatch):
    base = vectors(N)
    store = LocalVectorStore(tmp_path, dimension=DIM, ann_min_rows=1000)
    store.upsert(records(base))
    ready(store)
    expected = [top(store, q) for q in vectors(10, seed=4)]

    def refuse(*args, **kwargs):
        raise AssertionError("built again")

    monkeypatch.setattr(local_ann.AnnIndex, "build", classmethod(refuse))
    again = LocalVectorStore(tmp_path, dimension=DIM, ann_min_rows=1000)
    assert again.count("acme") == N
    assert [top(again, q) for q in vectors(10, seed=4)] == expected
    assert again._parts["acme"].ann is not None


def test_exact_is_a_setting_and_small_partitions_never_build(tmp_path, monkeypatch):
    monkeypatch.setenv("CAIRN_STORE_ANN", "exact")
    monkeypatch.setenv("CAIRN_STORE_ANN_MIN_ROWS", "50")
    cfg = load_settings(home=tmp_path).store
    assert (cfg.ann, cfg.ann_min_rows) == ("exact", 50)
    for store in (LocalVectorStore(tmp_path / "a", dimension=DIM, ann="exact", ann_min_rows=10),
                  LocalVectorStore(tmp_path / "b", dimension=DIM)):
        store.upsert(records(vectors(500)))
        store.query(VectorQuery(tenant="acme", vector=[1.0] * DIM, limit=3))
        time.sleep(0.2)
        assert store._parts["acme"].ann is None
    with pytest.raises(VectorStoreError, match="'auto' or 'exact'"):
        LocalVectorStore(tmp_path / "c", dimension=DIM, ann="fast")
