"""The embedded model on every core: a pool of single-thread sessions gives the vectors one
session gives, a large call is split over the pool, a repeated query is not embedded again, and
the pool is sized to the process's share of the cores."""

import numpy as np
import pytest
from cairn.embeddings import local
from cairn.embeddings.local import LocalEmbedder

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
