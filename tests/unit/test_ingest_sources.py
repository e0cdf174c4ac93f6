"""Sources (folder with JSON/JSONL, BEIR, API payload), directory titles and the tree's shape."""

import json

import pytest

from benchmarks.presets import DSTC11_LEAF_TITLE_RULES, DSTC11_TITLE_RULES
from cairn.core.errors import RequestError
from cairn.core.models import ContextType, Level
from cairn.engine.ingest import (
    DirTitleRule,
    Document,
    IngestPayload,
    context_root,
)
from cairn.engine.ingest.parsers.base import Limits
from cairn.engine.ingest.sources import MAX_FILE_BYTES, read_beir, read_folder, split_items
from cairn.engine.ingest.tree import build_tree

pytestmark = pytest.mark.unit
ROOT = "cairn://resources/kb"


def _by_uri(tree, level):
    return {p.record.uri: p.record for p in tree.records if p.record.level == level}


def test_json_and_jsonl_files_become_documents_and_bad_lines_are_reported(tmp_path):
    (tmp_path / "faq.jsonl").write_text(
        json.dumps({"id": "parking", "title": "Parking?", "text": "Free parking.", "metadata": {"hotel": {"name": "Ritz"}}})
        + "\n{not json\n"
        + json.dumps({"title": "no text"})
        + "\n"
        + json.dumps({"text": "Breakfast from 7."})
        + "\n"
    )
    (tmp_path / "one.json").write_text(json.dumps({"text": "A single note.", "title": "Note"}))
    docs, rejected = split_items(read_folder(tmp_path))
    paths = {d.path: d for d in docs}
    assert set(paths) == {("faq", "parking"), ("faq", "4"), ("one.json",)}
    assert paths[("faq", "parking")].metadata == {"hotel.name": "Ritz"}  # nested metadata is flattened
    assert paths[("one.json",)].title == "Note"
    reasons = {r.source.rsplit("/", 1)[1]: r.reason for r in rejected}
    assert reasons["faq.jsonl:2"].startswith("invalid JSON: Expecting property name")
    assert "text: Field required" in reasons["faq.jsonl:3"]


def test_beir_documents_are_placed_by_metadata_path_or_id(tmp_path):
    lines = [
        {"_id": "x1", "title": "", "text": "Placed by path.", "metadata": {"path": ["a", "b", "1"], "kind": "k"}},
        {"_id": "c/d/2", "title": "T", "text": "Placed by id."},
        {"title": "orphan", "text": "no id"},
    ]
    (tmp_path / "corpus.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    docs, rejected = split_items(read_beir(tmp_path))
    assert [d.path for d in docs] == [("a", "b", "1"), ("c", "d", "2")]
    assert docs[0].metadata == {"kind": "k"}  # the path is the URI, not metadata
    assert "needs '_id' or 'metadata.path'" in rejected[0].reason


def test_api_payload_reports_every_problem_with_its_path():
    with pytest.raises(RequestError) as err:
        IngestPayload.parse(
            {"root_uri": "https://x", "documents": [{"path": "a.md", "text": " "}, {"path": [], "text": "ok"}]}
        )
    msg = err.value.message
    assert "3 problems" in msg
    assert "root_uri" in msg and "must start with 'cairn://'" in msg
    assert "documents.0.text" in msg and "documents.1.path" in msg
    ok = IngestPayload.parse({"root_uri": ROOT, "documents": [{"path": "a/b.md", "text": "Hi.", "metadata": {"x": 1}}]})
    assert ok.to_documents() == [Document(("a", "b.md"), "Hi.", "", {"x": 1})]


def test_api_payload_bounds_name_each_document_the_limit_and_the_value():
    deep = "/".join(["a"] * 30 + ["x.md"])  # 31 segments: fits below cairn://resources only
    with pytest.raises(RequestError) as err:
        IngestPayload.parse({"root_uri": f"{ROOT}/sub", "documents": [
            {"path": "fine.md", "text": "ok"}, {"path": "b/" + "n" * 256, "text": "ok"}, {"path": "c/" + "m" * 300, "text": "ok"}]})
    assert err.value.details == [
        "documents.1.path: path segment " + repr("n" * 40 + "...") + " is 256 characters long; at most 255 are allowed",
        "documents.2.path: path segment " + repr("m" * 40 + "...") + " is 300 characters long; at most 255 are allowed"]
    with pytest.raises(RequestError) as err:
        IngestPayload.parse({"root_uri": f"{ROOT}/sub", "documents": [{"path": "fine.md", "text": "ok"}, {"path": deep, "text": "ok"}]})
    [problem] = err.value.details
    assert problem.startswith("documents.1.path: path 'a/a/a/")
    assert problem.endswith(f"has 31 segments; at most 29 are allowed below {ROOT}/sub (3 segments), as a URI holds at most 32")
    assert IngestPayload.parse({"root_uri": "cairn://resources", "documents": [{"path": deep, "text": "ok"}]})


def test_api_payload_folders_are_bounded_by_the_document_count():
    wide = [{"path": f"f{i}/a/b/c/x.md", "text": "ok"} for i in range(300)]  # 4 folders each: 1,200
    with pytest.raises(RequestError, match=r"the paths make 1,200 folders below .*; at most 1,000 are allowed for 300"):
        IngestPayload.parse({"root_uri": ROOT, "documents": wide})
    shared = [{"path": f"a/b/c/x{i}.md", "text": "ok"} for i in range(300)]  # 3 folders for all
    assert len(IngestPayload.parse({"root_uri": ROOT, "documents": shared}).documents) == 300


def test_memories_and_skills_roots_carry_their_type_and_owner():
    root = context_root("memory", user="alice")
    assert root == "cairn://user/alice/memories"
    tree = build_tree("t", root, [Document(("prefs", "food.md"), "Alice is vegetarian.")])
    leaf = _by_uri(tree, Level.DETAIL)["cairn://user/alice/memories/prefs/food.md"]
    assert leaf.context_type is ContextType.MEMORY and leaf.owner == "alice"
    assert context_root("skill", "search") == "cairn://agent/skills/search"
    assert context_root("skill", user="bob") == "cairn://user/bob/skills"
    with pytest.raises(RequestError, match="memories belong to one user"):
        context_root("memory")


def test_tree_has_ancestors_depth_and_levels():
    docs = [Document(("a", "b", "x.md"), "# X\n\nAbout x."), Document(("a", "y.md"), "About y.")]
    tree = build_tree("t", ROOT, docs, now=100.0)
    leaf = _by_uri(tree, Level.DETAIL)[f"{ROOT}/a/b/x.md"]
    assert leaf.ancestors == ["cairn://resources", ROOT, f"{ROOT}/a", f"{ROOT}/a/b"]
    assert leaf.depth == 5 and leaf.parent_uri == f"{ROOT}/a/b" and leaf.title == "X"
    assert leaf.created_at == leaf.updated_at == 100.0
    assert set(_by_uri(tree, Level.ABSTRACT)) == set(_by_uri(tree, Level.OVERVIEW)) == {ROOT, f"{ROOT}/a", f"{ROOT}/a/b"}
    assert tree.bodies[f"{ROOT}/a/b/x.md"] == "# X\n\nAbout x."
    # directories are summarised bottom-up: a's overview lists b's abstract
    assert "b (folder): b — b: 1 document (X)." in _by_uri(tree, Level.OVERVIEW)[f"{ROOT}/a"].text


def test_bad_paths_are_rejected_and_the_rest_goes_on():
    docs = [
        Document(("ok.md",), "fine"),
        Document(("what?.md",), "bad name"),
        Document(("ok.md",), "duplicate"),
        Document(("a",), "a file that is also a folder"),
        Document(("a", "inner.md"), "inside a"),
    ]
    tree = build_tree("t", ROOT, docs)
    reasons = {r.source: r.reason for r in tree.rejected}
    assert "contains a control character, '?'" in reasons["what?.md"]
    assert "already has the path" in reasons["ok.md"]
    assert "also a folder" in reasons["a"]
    assert set(_by_uri(tree, Level.DETAIL)) == {f"{ROOT}/ok.md", f"{ROOT}/a/inner.md"}


def test_oversized_and_binary_files_are_rejected(tmp_path):
    (tmp_path / "big.md").write_text("x" * 5_001)
    (tmp_path / "bin.txt").write_bytes(b"\x00\x01")
    (tmp_path / "good.md").write_text("good")
    docs, rejected = split_items(read_folder(tmp_path, limits=Limits(max_text_bytes=5_000)))
    assert [d.path for d in docs] == [("good.md",)]
    reasons = {r.source.rsplit("/", 1)[1]: r.reason for r in rejected}
    assert "the limit for this type is 5,000" in reasons["big.md"] and "binary" in reasons["bin.txt"]


def test_the_default_text_file_limit_is_well_above_two_megabytes():
    assert MAX_FILE_BYTES >= 20_000_000


def _dstc_docs():
    def doc(path, text, title="", **meta):
        base = {"domain": "hotel", "entity_id": "17", "entity_name": "ACORN GUEST HOUSE", "doc_type": path[2]}
        return Document(tuple(path), text, title, {**base, **meta})

    return [
        doc(["hotel", "17", "faq", "0"], "Yes, free parking.", "Is there parking?"),
        doc(["hotel", "17", "review", "3", "0"], "Lovely stay.", **{"review_metadata.traveler_type": "Couples"}),
        doc(["hotel", "17", "review", "3", "1"], "Clean rooms.", **{"review_metadata.traveler_type": "Couples"}),
    ]


def test_directories_take_their_titles_from_shared_metadata():
    tree = build_tree("t", "cairn://resources/dstc11", _dstc_docs(), title_rules=DSTC11_TITLE_RULES)
    l0 = _by_uri(tree, Level.ABSTRACT)
    base = "cairn://resources/dstc11/hotel/17"
    assert l0[base].title == "ACORN GUEST HOUSE (hotel)"
    assert "ACORN GUEST HOUSE" in l0[base].abstract
    assert l0[base].metadata == {"domain": "hotel", "entity_id": "17", "entity_name": "ACORN GUEST HOUSE"}
    assert l0[f"{base}/review"].title == "Reviews of ACORN GUEST HOUSE"
    assert l0[f"{base}/faq"].title == "FAQ of ACORN GUEST HOUSE"
    assert l0[f"{base}/review/3"].title == "Review of ACORN GUEST HOUSE by Couples"
    assert l0["cairn://resources/dstc11/hotel"].title == "hotel"  # no rule: its name
    leaves = _by_uri(tree, Level.DETAIL)
    assert leaves[f"{base}/faq/0"].title == "Is there parking?"
    assert leaves[f"{base}/review/3/0"].title == "Lovely stay."  # an id-named leaf: its first sentence


def test_title_rules_parse_and_skip_keys_not_shared():
    rule = DirTitleRule.parse("*/*/review=Reviews of {entity_name}")
    assert rule.matches(("hotel", "1", "review")) and not rule.matches(("hotel", "1", "faq"))
    assert rule.render(("hotel", "1", "review"), {"other": "x"}) is None
    assert DirTitleRule.parse("2={name}: {domain}").render(("h", "7"), {"domain": "hotel"}) == "7: hotel"
    with pytest.raises(RequestError, match="has no '='"):
        DirTitleRule.parse("{entity_name}")


def test_leaf_title_rules_name_the_entity_and_keep_their_own_title():
    tree = build_tree("t", "cairn://resources/d", _dstc_docs(), leaf_title_rules=DSTC11_LEAF_TITLE_RULES)
    leaves = _by_uri(tree, Level.DETAIL)
    base = "cairn://resources/d/hotel/17"
    assert leaves[f"{base}/faq/0"].title == "ACORN GUEST HOUSE — Is there parking?"
    assert leaves[f"{base}/review/3/1"].title == "ACORN GUEST HOUSE — review: Clean rooms."
    listing = _by_uri(tree, Level.OVERVIEW)[f"{base}/faq"].text
    assert "- 0 (file): ACORN GUEST HOUSE — Is there parking?" in listing
