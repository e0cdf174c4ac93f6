"""The local store's own behaviour: persistence on disk and partitions per tenant.
(The behaviour every backend shares is in tests/contract.)"""

import numpy as np
import pytest

from cairn.errors import RecordValidationError, RequestError, VectorStoreError
from cairn.models import ContextRecord
from cairn.vectorstores import VectorQuery
from cairn.vectorstores.local import LocalVectorStore

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
