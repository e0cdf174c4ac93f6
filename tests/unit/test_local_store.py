"""The local store's own behaviour: persistence on disk and partitions per tenant.
(The behaviour every backend shares is in tests/contract.)"""

import numpy as np
import pytest

from cairn.core.errors import RecordValidationError, RequestError, VectorStoreError
from cairn.core.models import ContextRecord
from cairn.ports.vectorstores import VectorQuery
from cairn.ports.vectorstores.local import LocalVectorStore

pytestmark = pytest.mark.unit
DIM = 8


def rec(tenant, uri, vec, level=2, **kw):
    return ContextRecord.build(tenant=tenant, uri=uri, level=level, vector=list(map(float, vec)), **kw)


def onehot(i):
    v = np.zeros(DIM)
    v[i] = 1.0
    return v


def test_a_new_process_finds_the_data_again(tmp_path):
    s1 = LocalVectorStore(tmp_path, dimension=DIM)
    s1.upsert([rec("acme", "cairn://resources/a", onehot(0)), rec("acme", "cairn://resources/b", onehot(1))])
    s2 = LocalVectorStore(tmp_path, dimension=DIM)  # as another process would
    hits = s2.query(VectorQuery(tenant="acme", vector=list(onehot(1)), limit=1))
    assert [h.record.uri for h in hits] == ["cairn://resources/b"]
    assert hits[0].score == pytest.approx(1.0)
    s2.delete("acme", [hits[0].record.id])
    assert LocalVectorStore(tmp_path, dimension=DIM).count("acme") == 1


def test_tenants_are_separate_partitions(tmp_path):
    s = LocalVectorStore(tmp_path, dimension=DIM)
    s.upsert([rec("acme", "cairn://resources/a", onehot(0)), rec("beta", "cairn://resources/a", onehot(0))])
    assert (tmp_path / "tenants" / "acme").is_dir() and (tmp_path / "tenants" / "beta").is_dir()
    hits = s.query(VectorQuery(tenant="acme", vector=list(onehot(0)), limit=10))
    assert [h.record.tenant for h in hits] == ["acme"]
    assert s.count("nobody") == 0


def test_a_store_built_with_another_dimension_is_refused(tmp_path):
    LocalVectorStore(tmp_path, dimension=DIM).upsert([rec("acme", "cairn://resources/a", onehot(0))])
    with pytest.raises(VectorStoreError, match="another embedder"):
        LocalVectorStore(tmp_path, dimension=DIM * 2)


def test_invalid_records_are_rejected_and_nothing_is_written(tmp_path):
    s = LocalVectorStore(tmp_path, dimension=DIM)
    good = rec("acme", "cairn://resources/a", onehot(0))
    bad = rec("acme", "cairn://resources/b", [1.0, 2.0])
    with pytest.raises(RecordValidationError) as err:
        s.upsert([good, bad])
    assert "records[1] (cairn://resources/b): vector has 2 dimensions; this store holds 8" in err.value.message
    assert s.count("acme") == 0


def test_a_tenant_must_be_named(tmp_path):
    s = LocalVectorStore(tmp_path, dimension=DIM)
    with pytest.raises(RequestError, match="invalid tenant"):
        s.query(VectorQuery(tenant="", vector=list(onehot(0))))
    with pytest.raises(RequestError, match="invalid tenant"):
        s.count("../etc")


def test_upserting_the_same_id_replaces_it(tmp_path):
    s = LocalVectorStore(tmp_path, dimension=DIM)
    s.upsert([rec("acme", "cairn://resources/a", onehot(0), title="old")])
    s.upsert([rec("acme", "cairn://resources/a", onehot(3), title="new")])
    assert s.count("acme") == 1
    hit = s.query(VectorQuery(tenant="acme", vector=list(onehot(3)), limit=1))[0]
    assert hit.record.title == "new" and hit.score == pytest.approx(1.0)


# ------------------------------------------------------------------ keyword, hybrid, pre-filter


def _docs_store(tmp_path):
    s = LocalVectorStore(tmp_path, dimension=DIM)
    s.upsert([
        rec("acme", "cairn://resources/kb/refunds.md", onehot(0), title="Refunds", text="refund within 30 days; the refund policy"),
        rec("acme", "cairn://resources/kb/travel.md", onehot(1), title="Travel", text="book flights and hotels"),
        rec("acme", "cairn://resources/kb/cards.md", onehot(2), title="Cards", text="a refund goes back to the card"),
    ])
    return s


def test_keyword_search_is_bm25_and_sees_writes(tmp_path):
    s = _docs_store(tmp_path)
    q = VectorQuery(tenant="acme", text="refund", mode="keyword", limit=5)
    assert [h.record.title for h in s.query(q)] == ["Refunds", "Cards"]  # two mentions beat one
    s.upsert([rec("acme", "cairn://resources/kb/more.md", onehot(3), title="Refund refund", text="refund")])
    assert s.query(q)[0].record.title == "Refund refund"  # the index was rebuilt after the write
    s.delete("acme", [s.query(q)[0].record.id])
    assert len(s.query(q)) == 2


def test_hybrid_fuses_both_rankings(tmp_path):
    s = _docs_store(tmp_path)
    hits = s.query(VectorQuery(tenant="acme", vector=list(onehot(2)), text="refund", mode="hybrid", limit=3))
    assert hits[0].record.title == "Cards"  # first in dense, second in keyword
    # fused on one 0..1 scale: its full dense score weighed in, and part of the keyword share
    assert 0.7 < hits[0].score < 1.0


def test_records_without_words_give_keyword_nothing_and_hybrid_its_dense_part(tmp_path):
    s = LocalVectorStore(tmp_path, dimension=DIM)
    s.upsert([rec("acme", "cairn://resources/a", onehot(0)), rec("acme", "cairn://resources/b", onehot(1))])
    assert s.query(VectorQuery(tenant="acme", text="refund", mode="keyword", limit=5)) == []
    hits = s.query(VectorQuery(tenant="acme", vector=list(onehot(0)), text="refund", mode="hybrid", limit=1))
    assert [h.record.uri for h in hits] == ["cairn://resources/a"] and hits[0].score == pytest.approx(0.7)


def test_bm25s_is_imported_only_by_a_keyword_query(tmp_path):
    import subprocess
    import sys

    code = (
        "import sys; from cairn.ports.vectorstores.local import LocalVectorStore; from cairn.ports.vectorstores import VectorQuery\n"
        f"s = LocalVectorStore(None, dimension={DIM})\n"
        "s.query(VectorQuery(tenant='a', vector=[1.0] * %d, filter={'level': 2}))\n"
        "print('bm25s' in sys.modules)" % DIM
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_prefilter_gives_exactly_what_the_predicate_gives(tmp_path):
    from cairn.core.filters import local as local_filters
    from cairn.core.filters import parse
    from cairn.ports.vectorstores.local import _Columns, _PreFilter

    records = [
        rec("acme", f"cairn://resources/d{i % 3}/f{i}.md", onehot(i % DIM), level=i % 3, tags=["t"] * (i % 2),
            metadata={"n": i % 4} if i % 5 else {})
        for i in range(30)
    ] + [rec("acme", "cairn://user/bob/memories/m", onehot(0))]
    docs = [r.model_dump(mode="json", exclude={"vector"}) for r in records]
    cases = [
        {"ancestors": {"$in": ["cairn://resources/d1"]}},
        {"ancestors": {"$in": ["cairn://resources/d1", "cairn://resources/d2"]}, "level": {"$in": [0, 2]}},
        {"parent_uri": "cairn://resources/d0", "metadata.n": {"$gte": 2}},
        {"$or": [{"owner": "bob"}, {"tags": {"$all": ["t"]}}], "level": {"$ne": 1}},
        {"$not": {"uri": {"$nin": ["cairn://resources/d0/f0.md"]}}},
        {"owner": {"$exists": False}, "tags": None, "metadata.n": {"$exists": True}},
        {"$nor": [{"level": {"$gt": 0}}, {"context_type": "memory"}], "depth": {"$lte": 3}},
        {"level": {"$in": [2, 7]}, "id": {"$ne": "x"}, "content_hash": ""},
    ]
    for flt in cases:
        tree = parse(flt)
        predicate = local_filters.compile(tree)
        mask = _PreFilter(_Columns(docs)).mask(tree)
        assert [bool(m) for m in mask] == [predicate(d) for d in docs], flt
