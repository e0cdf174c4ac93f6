"""The local store's files: tenant folder names, lazy per-tenant loading, isolation of a broken
partition, the old two-file format, compaction, and two store objects on one folder."""

import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cairn.core.errors import VectorStoreError
from cairn.core.models import ContextRecord
from cairn.ports.vectorstores import VectorQuery
from cairn.ports.vectorstores import local_manifest
from cairn.ports.vectorstores import local_persistence as persist
from cairn.ports.vectorstores.base import _TENANT_RE
from cairn.ports.vectorstores.local import LocalVectorStore

pytestmark = pytest.mark.unit
DIM = 4


def rec(tenant, name, vec=(1.0, 0.0, 0.0, 0.0), **kw):
    return ContextRecord.build(tenant=tenant, uri=f"cairn://resources/{name}", level=2, vector=list(vec), **kw)


def uris(store, tenant):
    return sorted(h.record.uri for h in store.query(VectorQuery(tenant=tenant, vector=[1.0, 1, 1, 1], limit=1000)))


@pytest.mark.parametrize(("tenant", "folder"), [
    ("acme", "acme"),  # lower-case names keep the folder they always had
    ("globex-2.eu", "globex-2.eu"),
    ("GLOBEX", "_g_l_o_b_e_x"),
    ("Globex", "_globex"),
    ("a_b", "a__b"),
    ("con", "_-con"),
    ("nul.txt", "_-nul.txt"),
    ("Nul.txt", "_nul.txt"),  # the escape already keeps it off the reserved names
    ("end.", "end_0"),
])
def test_tenant_folder_names(tenant, folder):
    assert persist.storage_name(tenant) == folder


@given(st.from_regex(_TENANT_RE, fullmatch=True), st.from_regex(_TENANT_RE, fullmatch=True))
def test_folder_names_differ_on_a_case_insensitive_file_system(a, b):
    from cairn.core.storage_names import tenant_folder

    assert tenant_folder(a) == persist.storage_name(a)
    fa, fb = persist.storage_name(a), persist.storage_name(b)
    assert (fa.casefold() == fb.casefold()) == (a == b)
    assert fa == fa.lower() and "/" not in fa and not fa.endswith(".") and len(fa.encode()) <= 255


def test_tenants_differing_only_by_case_keep_separate_records(tmp_path):
    s = LocalVectorStore(tmp_path, dimension=DIM)
    s.upsert([rec("GLOBEX", "upper"), rec("globex", "lower")])
    fresh = LocalVectorStore(tmp_path, dimension=DIM)
    assert uris(fresh, "GLOBEX") == ["cairn://resources/upper"]
    assert uris(fresh, "globex") == ["cairn://resources/lower"]


def test_a_broken_partition_fails_only_its_tenant_and_says_how_to_repair(tmp_path):
    s = LocalVectorStore(tmp_path, dimension=DIM)
    s.upsert([rec("acme", "a"), rec("beta", "b")])
    (tmp_path / "tenants" / "beta" / "MANIFEST").write_text("{not json")
    fresh = LocalVectorStore(tmp_path, dimension=DIM)
    assert uris(fresh, "acme") == ["cairn://resources/a"]
    fresh.upsert([rec("acme", "a2")])
    with pytest.raises(VectorStoreError) as err:
        fresh.count("beta")
    assert "tenant 'beta'" in err.value.message and "move that folder aside" in err.value.message
    assert "Other tenants are not affected" in err.value.message


def test_a_missing_segment_is_reported_for_its_partition(tmp_path):
    s = LocalVectorStore(tmp_path, dimension=DIM)
    s.upsert([rec("acme", "a")])
    for seg in (tmp_path / "tenants" / "acme").glob("seg-*.bin"):
        seg.unlink()
    with pytest.raises(VectorStoreError, match="tenant 'acme'.*missing"):
        LocalVectorStore(tmp_path, dimension=DIM).count("acme")


def test_a_segment_whose_record_lines_do_not_add_up_is_reported_for_its_partition(tmp_path):
    s = LocalVectorStore(tmp_path, dimension=DIM)
    s.upsert([rec("acme", "a"), rec("acme", "b")])
    folder = tmp_path / "tenants" / "acme"
    seg = next(folder.glob("seg-*.bin"))
    raw = seg.read_bytes()
    seg.write_bytes(raw.replace(b'}\n{', b'} {', 1))  # one record line fewer, the same size
    for path in folder.glob("*.off"):
        path.unlink()  # so the lines are counted again
    with pytest.raises(VectorStoreError, match="tenant 'acme'.*record lines"):
        LocalVectorStore(tmp_path, dimension=DIM).count("acme")


def test_a_store_in_the_old_two_file_format_is_read_and_converted_on_the_first_write(tmp_path):
    tdir = tmp_path / "tenants" / "acme"
    tdir.mkdir(parents=True)
    old = [rec("acme", "old1", (1, 0, 0, 0)), rec("acme", "old2", (0, 1, 0, 0))]
    (tdir / "records.jsonl").write_text("".join(json.dumps(r.model_dump(mode="json", exclude={"vector"})) + "\n" for r in old))
    np.save(tdir / "vectors.npy", np.asarray([r.vector for r in old], dtype=np.float32))
    s = LocalVectorStore(tmp_path, dimension=DIM)
    assert uris(s, "acme") == ["cairn://resources/old1", "cairn://resources/old2"]
    s.upsert([rec("acme", "new")])
    assert not (tdir / "records.jsonl").exists() and (tdir / "MANIFEST").exists()
    assert uris(LocalVectorStore(tmp_path, dimension=DIM), "acme") == [
        "cairn://resources/new", "cairn://resources/old1", "cairn://resources/old2"]


def test_an_old_folder_named_by_an_upper_case_tenant_moves_to_its_new_name(tmp_path):
    tdir = tmp_path / "tenants" / "Acme"
    tdir.mkdir(parents=True)
    r = rec("Acme", "old")
    (tdir / "records.jsonl").write_text(json.dumps(r.model_dump(mode="json", exclude={"vector"})) + "\n")
    np.save(tdir / "vectors.npy", np.asarray([r.vector], dtype=np.float32))
    assert uris(LocalVectorStore(tmp_path, dimension=DIM), "Acme") == ["cairn://resources/old"]
    assert (tmp_path / "tenants" / "_acme").is_dir()


def test_two_store_objects_on_one_folder_see_each_others_writes(tmp_path):
    a, b = LocalVectorStore(tmp_path, dimension=DIM), LocalVectorStore(tmp_path, dimension=DIM)
    a.upsert([rec("acme", "x")])
    assert uris(b, "acme") == ["cairn://resources/x"]
    b.upsert([rec("acme", "y")])
    b.delete("acme", [rec("acme", "x").id])
    assert uris(a, "acme") == ["cairn://resources/y"]
    a.upsert([rec("acme", "z")])  # a writes on top of b's commits, it does not replace them
    assert uris(b, "acme") == uris(a, "acme") == ["cairn://resources/y", "cairn://resources/z"]


def test_many_small_writes_keep_few_segments_and_every_record(tmp_path):
    s = LocalVectorStore(tmp_path, dimension=DIM)
    for i in range(60):
        s.upsert([rec("acme", f"r{i}", (1, i, 0, 0), title=f"v{i}")])
        if i % 3 == 0:
            s.delete("acme", [rec("acme", f"r{i - 1}").id])
        if i % 5 == 0:
            s.upsert([rec("acme", f"r{i // 2}", (0, 1, 0, 0), title="again")])
    manifest = json.loads((tmp_path / "tenants" / "acme" / "MANIFEST").read_text())
    assert len(manifest["segments"]) <= persist.MAX_SEGMENTS
    assert len(list((tmp_path / "tenants" / "acme").glob("seg-*.bin"))) == len(manifest["segments"])
    fresh = LocalVectorStore(tmp_path, dimension=DIM)
    assert uris(fresh, "acme") == uris(s, "acme")
    assert {r.title for r in fresh.fetch("acme", [rec("acme", f"r{i}").id for i in range(0, 30, 5)])} == {"again"}


@pytest.mark.parametrize(("weights", "start"), [
    ([5] * 8, None),                    # at the limit: nothing to do
    ([1000, 100, 10, 1, 1, 1, 1, 1, 1], 3),  # the small newest ones merge, the big old ones stay
    ([1] * 9, 0),                       # equal sizes: everything merges, tombstones go
])
def test_compaction_merges_the_newest_segments(weights, start):
    refs = [persist.SegmentRef(f"seg-{i:010d}.bin", w - 1, 0) for i, w in enumerate(weights)]
    assert persist.merge_start(refs, 8) == start


@given(st.text(min_size=1, max_size=120), st.text(min_size=1, max_size=120))
def test_bounded_names_fit_and_stay_distinct(a, b):
    from cairn.core.storage_names import bounded_name

    long_a, long_b = a * 40, b * 40
    na, nb = bounded_name(long_a), bounded_name(long_b)
    assert len(na.encode()) <= 255 and len(nb.encode()) <= 255
    assert (na == nb) == (long_a == long_b)
    assert bounded_name("short.md") == "short.md"


def test_a_long_cjk_name_is_bounded_on_a_character_boundary():
    from cairn.core.storage_names import bounded_name

    name = "漢" * 90 + ".md"  # 273 bytes
    out = bounded_name(name)
    assert len(out.encode()) <= 255 and out.startswith("漢")


def _history(tmp_path):
    """A partition whose records were replaced and deleted across several commits and processes."""
    s = LocalVectorStore(tmp_path, dimension=DIM)
    s.upsert([rec("acme", f"d{i // 10}/r{i}", vec=(1.0, i, 0, 0), tags=["old"]) for i in range(40)])
    s.upsert([rec("acme", f"d{i // 10}/r{i}", vec=(1.0, -i, 0, 0), tags=["new"]) for i in range(0, 40, 3)])
    other = LocalVectorStore(tmp_path, dimension=DIM)  # another process's writes, caught up by ``s``
    other.delete("acme", [rec("acme", f"d{i // 10}/r{i}").id for i in range(0, 40, 4)])
    s.upsert([rec("acme", "d9/late", vec=(0.0, 0, 1, 0), tags=["new"])])
    return s


def _answers(store):
    def q(filt):
        hits = store.query(VectorQuery(tenant="acme", vector=[1.0, 1, 1, 1], limit=1000, filter=filt))
        return sorted((h.record.uri, h.record.tags[0]) for h in hits)

    return (q(None), q({"tags": "new"}), q({"parent_uri": "cairn://resources/d1"}), store.count("acme"),
            store.count("acme", {"tags": "old"}))


def test_a_fresh_process_opens_from_the_saved_live_mask_and_columns_without_reading_records(tmp_path, monkeypatch):
    from cairn.ports.vectorstores import local_columns, local_segments

    expected = _answers(_history(tmp_path))
    assert expected[3] == 31 and len(expected[1]) == 11  # 40 - 10 deleted + 1; 14 new versions - 4 deleted + 1 late
    assert list((tmp_path / "tenants" / "acme").glob("live-*.bits"))

    def refuse(*args, **kwargs):
        raise AssertionError("opening replayed the ids or parsed every record")

    monkeypatch.setattr(local_manifest, "live_mask", refuse)  # replay() works out the live rows there
    monkeypatch.setattr(local_columns.ColumnChunk, "of_docs", classmethod(refuse))
    monkeypatch.setattr(local_segments.Lines, "scan", refuse)  # where each record line starts is saved too
    assert _answers(LocalVectorStore(tmp_path, dimension=DIM)) == expected


def test_without_its_live_mask_columns_or_line_offsets_a_partition_is_worked_out_from_its_segments(tmp_path):
    expected = _answers(_history(tmp_path))
    folder = tmp_path / "tenants" / "acme"
    offsets = sorted(folder.glob("*.off"))
    assert len(offsets) == len(list(folder.glob("seg-*.bin")))
    offsets[0].write_bytes(offsets[-1].read_bytes())  # another segment's offsets: not taken for this one
    for path in [*folder.glob("live-*.bits"), *folder.glob("*.col"), *offsets[1:]]:
        path.write_bytes(b"damaged")
    assert _answers(LocalVectorStore(tmp_path, dimension=DIM)) == expected
    for path in [*folder.glob("live-*.bits"), *folder.glob("*.col"), *folder.glob("*.off")]:
        path.unlink()
    fresh = LocalVectorStore(tmp_path, dimension=DIM)
    assert _answers(fresh) == expected
    fresh.upsert([rec("acme", "d1/after", tags=["new"])])  # the next commit saves a mask again
    assert list(folder.glob("live-*.bits"))
    assert len(_answers(LocalVectorStore(tmp_path, dimension=DIM))[2]) == len(expected[2]) + 1
