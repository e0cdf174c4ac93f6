"""Ingest reads only what it was given: links out of the folder, dangling links and loops are
reported, never read; a long (CJK) file name does not abort the ingest."""

import os

import pytest

from cairn.engine.ingest import Ingestor, LocalContentStore, read
from cairn.engine.ingest.sources import read_folder, split_items
from cairn.ports.content import MAX_SEGMENT_CHARS, node_path
from cairn.ports.vectorstores.local import LocalVectorStore

pytestmark = pytest.mark.unit
ROOT = "cairn://resources/docs"


@pytest.fixture
def docs(tmp_path):
    folder = tmp_path / "docs"
    (folder / "guides").mkdir(parents=True)
    (folder / "guides" / "setup.md").write_text("# Setup\n\nInstall the agent.\n")
    (folder / "intro.md").write_text("# Intro\n\nWelcome.\n")
    return folder


def _reasons(rejected):
    return {r.source.rsplit("/", 1)[1]: r.reason for r in rejected}


def test_a_link_to_a_host_file_is_not_ingested_and_is_reported(docs, tmp_path):
    os.symlink("/etc/passwd", docs / "passwd.txt")
    outside = tmp_path / "secret"
    outside.mkdir()
    (outside / "key.md").write_text("# Key\n\nsecret\n")
    os.symlink(outside, docs / "more")
    found, rejected = split_items(read_folder(docs))
    assert sorted(d.path for d in found) == [("guides", "setup.md"), ("intro.md",)]
    reasons = _reasons(rejected)
    assert "outside the ingested folder" in reasons["passwd.txt"] and "/etc/passwd" in reasons["passwd.txt"]
    assert "outside the ingested folder" in reasons["more"]
    assert all("root:" not in d.text and "secret" not in d.text for d in found)


def test_dangling_links_and_loops_are_reported(docs):
    os.symlink(docs / "gone.md", docs / "dangling.md")
    os.symlink(docs, docs / "guides" / "up")  # a folder that contains the link
    os.symlink("self.md", docs / "self.md")  # resolves to itself
    found, rejected = split_items(read_folder(docs))
    reasons = _reasons(rejected)
    assert "dangling symbolic link" in reasons["dangling.md"]
    assert "loop" in reasons["up"] and "loop" in reasons["self.md"]
    assert sorted(d.path for d in found) == [("guides", "setup.md"), ("intro.md",)]


def test_a_link_that_stays_inside_the_folder_is_followed(docs):
    os.symlink(docs / "intro.md", docs / "guides" / "start.md")
    found, rejected = split_items(read_folder(docs))
    assert rejected == []
    assert ("guides", "start.md") in [d.path for d in found]


def test_the_ingestor_lists_the_refused_link_with_its_reason(docs, tmp_path, embedder):
    os.symlink("/etc/passwd", docs / "passwd.txt")
    store = LocalVectorStore(tmp_path / "store", dimension=embedder.dimension)
    report = Ingestor(store, embedder, "acme", isolate_parsers=False).ingest_path(docs, ROOT)
    assert "outside the ingested folder" in _reasons(report.rejected)["passwd.txt"]
    assert store.count("acme", {"uri": f"{ROOT}/passwd.txt"}) == 0


def test_a_file_named_with_29_cjk_characters_is_ingested_and_read_back(docs, tmp_path, embedder):
    name = "東京都の会議室予約に関する社内規定と手続きの説明書です" + "文書.md"
    assert len(name) >= 29 and len(name.encode()) > 85
    (docs / name).write_text("# 会議室\n\nMeeting rooms are booked through the portal.\n")
    store = LocalVectorStore(tmp_path / "store", dimension=embedder.dimension)
    content = LocalContentStore(tmp_path / "content")
    ing = Ingestor(store, embedder, "acme", content=content, isolate_parsers=False)
    report = ing.ingest_path(docs, ROOT)
    assert report.rejected == [] and report.documents == 3
    uri = f"{ROOT}/{name}"
    assert len(node_path("acme", uri).rsplit("/", 1)[1]) <= MAX_SEGMENT_CHARS + 40
    assert "booked through the portal" in read(store, content, "acme", uri, level=2).text
    assert uri in content.list("acme", ROOT)
    (docs / name).unlink()
    again = ing.ingest_path(docs, ROOT)  # the vanished file is found through its stored name
    assert again.removed >= 1 and uri not in content.list("acme", ROOT)


def test_tenants_differing_only_by_case_never_share_content_folders(tmp_path):
    from cairn.engine.ingest import LocalContentStore

    store = LocalContentStore(tmp_path / "content")
    uri = "cairn://resources/kb/a.md"
    store.put("GLOBEX", uri, "upper")
    store.put("globex", uri, "lower")
    assert (store.get("GLOBEX", uri), store.get("globex", uri)) == ("upper", "lower")
    folders = sorted(p.name for p in (tmp_path / "content" / "tenants").iterdir())
    assert len({f.lower() for f in folders}) == 2  # distinct even where case does not count
    assert store.list("GLOBEX", "cairn://resources/kb") == [uri]
    store.delete_tree("globex", "cairn://resources/kb")
    assert store.get("GLOBEX", uri) == "upper"
