"""A search of one user's own data is scored by that user's words: another user's memories do not
move it, in any mode and through every path that searches memories; shared content keeps the
tenant's statistics."""

import pytest

from cairn import Cairn
from cairn.core.models import ContextRecord, Level
from cairn.engine.memory.search import search_memories
from cairn.engine.retrieval.scope import keyword_statistics
from cairn.ports.vectorstores.local import LocalVectorStore

pytestmark = pytest.mark.integration
ANN = ["Caroline went hiking in the Alps with her sister", "Caroline adopted a dog named Oscar last spring",
       "Caroline paints landscapes on weekends", "Caroline moved to Lisbon for her new job"]
# another user who writes every one of the query's words often: in the tenant's statistics "dog"
# and "hiking" become common words and "caroline" a rare one
BOB = ["my dog loves hiking", "hiking with the dog again", "the dog and I went hiking", "dog hiking dog hiking",
       "Oscar the dog", "caroline"]


def _memories(store, embedder, user, texts):
    store.upsert([ContextRecord.build(tenant="t", uri=f"cairn://user/{user}/memories/events/m{i}", level=Level.DETAIL,
                                      text=t, vector=embedder.embed_one(t).tolist()) for i, t in enumerate(texts)])


def _ranked(store, embedder, mode):
    cairn = Cairn(store, embedder, "t")
    found = cairn.search("did Caroline take her dog hiking?", user="ann", context_type="memory", mode=mode, limit=4)
    return [(m.uri, round(m.score, 6)) for m in found.memories]


@pytest.mark.parametrize("mode", ["quick", "thinking"])
def test_another_users_memories_do_not_move_a_users_memory_search(tmp_path, embedder, mode):
    alone = LocalVectorStore(tmp_path / "alone", dimension=embedder.dimension)
    _memories(alone, embedder, "ann", ANN)
    shared = LocalVectorStore(tmp_path / "shared", dimension=embedder.dimension)
    _memories(shared, embedder, "ann", ANN)
    _memories(shared, embedder, "bob", BOB)
    assert _ranked(shared, embedder, mode) == _ranked(alone, embedder, mode)
    query = "dog hiking Caroline"
    direct = [[(h.record.uri, round(h.score, 6)) for h in search_memories(s, embedder, "t", "ann", query)] for s in (alone, shared)]
    assert direct[0] == direct[1]


def test_whose_statistics_a_search_uses_follows_whose_data_it_searches():
    assert keyword_statistics(["cairn://user/ann/memories"]) == "filter"
    assert keyword_statistics(["cairn://user/ann/memories", "cairn://user/ann/skills"]) == "filter"
    assert keyword_statistics(["cairn://user/ann/memories", "cairn://user/bob/memories"]) == "tenant"
    assert keyword_statistics(["cairn://resources", "cairn://user/ann/skills"]) == "tenant"
    assert keyword_statistics([]) == "tenant"
