"""Two end users in one tenant, on every backend: a session of ann reads ann's memories, never bob's."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from cairn import Cairn
from cairn.core.errors import Forbidden
from cairn.ports.embeddings.base import Embedder, normalize
from cairn.ports.sessions import open_session_store
from cairn.ports.vectorstores import VectorStore
from tests.contract.support import DIM, settle

pytestmark = pytest.mark.contract
WORDS = ("tea", "coffee", "peanut", "shellfish", "dog", "cat", "drink", "allergy")


class WordEmbedder(Embedder):
    """Counts of a few words: enough for the store to rank, the same on every backend."""

    name = "words"
    dimension = DIM

    def _embed(self, texts: list[str]) -> np.ndarray:
        rows = [[t.lower().count(w) + (0.1 if i == 0 else 0.0) for i, w in enumerate(WORDS)] for t in texts]
        return normalize(np.array(rows, dtype=np.float32))


def test_a_session_of_ann_reads_anns_memories_and_never_bobs(store: VectorStore, new_tenant: Callable[[], str], tmp_path) -> None:
    tenant = new_tenant()
    cairn = Cairn(store, WordEmbedder(), tenant, sessions=open_session_store("sqlite", path=tmp_path / "s.db"))
    cairn.remember("Ann drinks tea; she has a peanut allergy.", "profile", user="ann", key="ann")
    cairn.remember("Bob drinks coffee; he has a shellfish allergy.", "profile", user="bob", key="bob")
    session = cairn.sessions.create(tenant, user="ann")
    cairn.sessions.append(tenant, session.id, "user", "What allergy do I have, and what do I drink?")

    def found() -> list[str]:
        result = cairn.search("allergy drink", session_id=session.id, context_type="memory", mode="quick", limit=10)
        return [m.uri for m in result.memories]

    settle(store, lambda: "cairn://user/ann/memories/profile/ann" in found())
    assert "cairn://user/ann/memories/profile/ann" in found()
    assert not [u for u in found() if "/user/bob/" in u]
    with pytest.raises(Forbidden):
        cairn.search("allergy", session_id=session.id, user="bob")
