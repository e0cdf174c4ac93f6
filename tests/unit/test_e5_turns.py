"""The multilingual engine is one per process and answers one call at a time: a query waiting
for its turn goes before an ingest's waiting batches, so a search answered while the process
ingests waits for one batch at most."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from cairn.ports.embeddings import local_e5
from cairn.ports.embeddings.local_e5 import LocalE5Embedder

pytestmark = pytest.mark.unit
PAGES = [f"Page {i}: the lift in block {i} is serviced on Mondays between eight and ten." for i in range(16)]


def _waiting_until_queued(target, done: list[str], name: str) -> threading.Thread:
    thread = threading.Thread(target=lambda: (target(), done.append(name)))
    thread.start()
    time.sleep(0.3)  # it is now waiting for the engine's turn
    return thread


def test_a_query_waiting_behind_a_batch_goes_before_the_next_batches():
    emb = LocalE5Embedder()
    done: list[str] = []
    with local_e5._turns.turn(short=False):  # a batch of an ingest is under way
        ingest = _waiting_until_queued(lambda: emb.embed(PAGES), done, "ingest")  # its next batches wait
        query = _waiting_until_queued(lambda: emb.embed_query("when is the lift serviced?"), done, "query")
    query.join(60)
    ingest.join(120)
    assert done == ["query", "ingest"]


def test_turns_give_the_vectors_of_calls_made_one_after_another():
    emb = LocalE5Embedder()
    alone = emb.embed(PAGES[:6])
    results: dict[int, np.ndarray] = {}
    threads = [threading.Thread(target=lambda i=i: results.__setitem__(i, emb.embed(PAGES[:6] if i % 2 else PAGES[i:i + 1])))
               for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert sorted(results) == list(range(6))
    for i, vecs in results.items():
        assert np.allclose(vecs, alone if i % 2 else emb.embed(PAGES[i:i + 1]), atol=1e-5)
