"""The embedded model on every core: a pool of single-thread sessions gives the vectors one
session gives, a large call is split over the pool, a repeated query is not embedded again, and
the pool is sized to the process's share of the cores; a query does not wait for an ingest's batches."""

import threading

import numpy as np
import pytest

from cairn.ports.embeddings import local
from cairn.ports.embeddings.local import LocalEmbedder

pytestmark = pytest.mark.unit
TEXTS = [f"document {i}: a refund goes back to the card within {i} days" for i in range(40)] + ["", "short"]


def test_the_pool_gives_the_vectors_of_one_session_for_a_large_call():
    pooled = LocalEmbedder(sessions=2).embed(TEXTS)
    single = LocalEmbedder(threads=1).embed(TEXTS)
    assert pooled.shape == (len(TEXTS), local.DIMENSION)
    assert np.allclose(pooled, single, atol=1e-5)
    assert np.allclose(np.linalg.norm(pooled, axis=1), 1.0, atol=1e-5)


def test_a_repeated_query_comes_from_the_cache():
    emb = LocalEmbedder(sessions=1)
    first = emb.embed(["where is my refund?"], input_type="query")
    again = emb.embed(["where is my refund?", "travel"], input_type="query")
    assert emb.cache_hits == 1
    assert np.array_equal(first[0], again[0])
    assert np.allclose(again[1], LocalEmbedder(threads=1).embed(["travel"])[0], atol=1e-5)
    again[0][:] = 0.0  # a caller changing its copy does not change the cache
    assert np.array_equal(emb.embed(["where is my refund?"])[0], first[0])


@pytest.mark.parametrize(("processes", "expected"), [("1", 8), ("2", 4), ("3", 2), ("16", 1), ("zero", 8)])
def test_each_process_gets_its_share_of_the_cores(monkeypatch, processes, expected):
    monkeypatch.setattr(local.os, "sched_getaffinity", lambda pid: set(range(8)), raising=False)
    monkeypatch.setenv("CAIRN_PROCESSES", processes)
    assert local.usable_cores() == expected
    assert LocalEmbedder()._sessions == expected


def test_a_query_is_embedded_while_an_ingest_holds_every_session():
    """A search answered while the process ingests: the ingest's batches keep every bulk session
    busy, and the query's vector still comes (before, it waited for one of them)."""
    emb = LocalEmbedder(sessions=2)
    bulk = local._pool(2, 1, "bulk")
    got: dict[str, np.ndarray] = {}
    with bulk.lend(), bulk.lend():  # what an ingest's two batch threads hold between batches
        asker = threading.Thread(target=lambda: got.setdefault("query", emb.embed_query("can I park my car here?")))
        asker.start()
        asker.join(timeout=60)
        assert "query" in got, "the query waited for the ingest's sessions"
    assert np.allclose(got["query"], LocalEmbedder(threads=1).embed(["can I park my car here?"])[0], atol=1e-5)
    assert emb.embed(TEXTS).shape == (len(TEXTS), local.DIMENSION)  # and the ingest's sessions serve it after
