"""Parsers (every format, in this process), structure-aware chunking with citations, hostile files,
and the missing-extra message."""

import random
import zipfile

import pytest

from benchmarks.docs_corpus import sentences, write_one_of_each, write_pdf
from cairn.core.errors import RequestError
from cairn.core.models import Level
from cairn.engine.ingest.chunking import ChunkingConfig, chunk_sections, markdown_sections
from cairn.engine.ingest.parsers import PARSERS, parser_for
from cairn.engine.ingest.parsers.base import Limits
from cairn.engine.ingest.sources import read_file, read_folder, split_items
from cairn.engine.ingest.tree import build_tree

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def every_format(tmp_path_factory):
    root = tmp_path_factory.mktemp("every")
    write_one_of_each(root)
    docs, rejected = split_items(read_folder(root))
    assert rejected == []
    return {d.path[-1]: d for d in docs}


def _leaves(doc, config=None):
    tree = build_tree("t", "cairn://resources/kb", [doc], chunking=config)
    return [p.record for p in tree.records if p.record.level is Level.DETAIL]


def test_every_format_is_read_with_its_structure(every_format):
    docs = every_format
    assert {d.metadata.get("source.format") for d in docs.values()} >= {
        "pdf", "docx", "pptx", "xlsx", "html", "email", "csv", "tsv", "yaml", "xml", "python", "javascript", "markdown", "text"
    }
    assert [s.page for s in docs["report.pdf"].sections] == [1, 2, 3]
    assert docs["report.pdf"].title == "Quarterly report"
    assert [s.label for s in docs["roadmap.pptx"].sections] == ["slide 1: Roadmap", "slide 2: Budget"]
    assert ("Team handbook", "Hiring") in [s.heading_path for s in docs["handbook.docx"].sections]
    assert "| Badge | Security |" in docs["handbook.docx"].text
    assert "Sheet: Q2" in docs["budget.xlsx"].text and "| ops | 150 |" in docs["budget.xlsx"].text
    assert docs["incident.eml"].title == "Incident review" and "From: ops@example.com" in docs["incident.eml"].text
    labels = {s.label for s in docs["deploy.py"].sections}
    assert {"def deploy", "class Rollback"} <= labels
    assert [s.heading_path for s in docs["service.yaml"].sections] == [("service",), ("alerts",)]
    assert "catalog/item/name: Laptop" in docs["catalog.xml"].text


def test_html_keeps_the_main_content_and_drops_navigation_footer_and_links(every_format):
    html = every_format["policy.html"]
    assert html.title == "Refund policy"
    assert "## Window" in html.text and "## Exceptions" in html.text
    assert "Home" not in html.text and "Cookies" not in html.text and "href" not in html.text


def test_a_pdf_chunk_cites_its_page_in_its_title_and_metadata(every_format):
    leaves = _leaves(every_format["report.pdf"])
    assert [r.metadata["citation.page"] for r in leaves] == [1, 2, 3]
    assert leaves[1].title == "Quarterly report — p. 2"
    assert leaves[1].metadata["citation.kind"] == "page"
    doc = every_format["report.pdf"]
    start, end = leaves[1].metadata["citation.start"], leaves[1].metadata["citation.end"]
    assert doc.text[start:end] == leaves[1].text  # offsets point into the body read at L2


def test_a_long_table_repeats_its_header_in_every_chunk(tmp_path):
    rows = "id,name,city\n" + "".join(f"{i},customer {i},city {i % 7}\n" for i in range(400))
    (tmp_path / "customers.csv").write_text(rows)
    doc = read_file(tmp_path / "customers.csv", ("customers.csv",))
    leaves = _leaves(doc, ChunkingConfig(chunk_chars=600, overlap_chars=0))
    assert len(leaves) > 5
    for rec in leaves:
        assert rec.text.startswith("| id | name | city |\n| --- | --- | --- |")
    assert "rows" in leaves[3].metadata["citation.label"]


def test_markdown_chunks_follow_headings_and_carry_the_heading_path():
    text = "# Guide\n\nIntro.\n\n## Install\n\n" + "Step one is long. " * 120 + "\n\n## Use\n\nRun it.\n\n### Flags\n\nSee --help.\n"
    chunks = chunk_sections(text, markdown_sections(text), ChunkingConfig(chunk_chars=800, overlap_chars=100))
    paths = [c.heading_path for c in chunks]
    assert ("Guide", "Install") in paths and ("Guide", "Use") in paths
    for c in chunks:
        assert len(c.text) <= 800
        assert c.text.endswith(text[c.start : c.end][-20:])
    install = [c for c in chunks if c.heading_path == ("Guide", "Install")]
    assert len(install) >= 3
    # a continuation piece starts with the end of the previous one (the overlap)
    assert install[1].start < install[0].end


def test_a_code_fence_is_not_cut_at_its_blank_lines_when_it_fits():
    code = "```python\n" + "\n\n".join(f"x{i} = {i}" for i in range(30)) + "\n```"
    text = "# Doc\n\n" + "Some words here. " * 30 + "\n\n" + code + "\n\nAfter the code. " * 3
    chunks = chunk_sections(text, markdown_sections(text), ChunkingConfig(chunk_chars=700, overlap_chars=0))
    holding = [c for c in chunks if "x0 = 0" in c.text]
    assert len(holding) == 1 and "x29 = 29" in holding[0].text


def test_chunk_size_and_overlap_are_settings_and_are_validated():
    text = "\n\n".join(sentences(random.Random(1), 5) for _ in range(40))
    small = chunk_sections(text, markdown_sections(text), ChunkingConfig(chunk_chars=400, overlap_chars=50))
    large = chunk_sections(text, markdown_sections(text), ChunkingConfig(chunk_chars=3000, overlap_chars=50))
    assert len(small) > 2 * len(large)
    with pytest.raises(RequestError, match="chunk_chars must be between"):
        ChunkingConfig(chunk_chars=10)
    with pytest.raises(RequestError, match="overlap_chars must be between"):
        ChunkingConfig(chunk_chars=1000, overlap_chars=900)


def test_a_heading_inside_a_code_fence_is_not_a_section():
    text = "# Real\n\n```\n# not a heading\n```\n\ntext\n"
    assert [s.heading_path for s in markdown_sections(text)] == [("Real",)]


def test_corrupt_files_are_rejected_with_a_reason_and_the_rest_goes_on(tmp_path):
    (tmp_path / "broken.pdf").write_bytes(b"%PDF-1.4\n" + bytes(random.Random(2).getrandbits(8) for _ in range(3000)))
    (tmp_path / "broken.docx").write_bytes(b"PK\x03\x04 not really a zip")
    (tmp_path / "broken.xml").write_text("<a><b></a>")
    (tmp_path / "broken.yaml").write_text("a: [1, 2\nb: }")
    (tmp_path / "entities.xml").write_text('<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaa">]><x>&a;</x>')
    (tmp_path / "ok.md").write_text("# Fine\n\nStill ingested.\n")
    docs, rejected = split_items(read_folder(tmp_path))
    assert [d.path for d in docs] == [("ok.md",)]
    reasons = {r.source.rsplit("/", 1)[1]: r.reason for r in rejected}
    assert set(reasons) == {"broken.pdf", "broken.docx", "broken.xml", "broken.yaml", "entities.xml"}
    assert "bad zip" in reasons["broken.docx"]
    assert "not well-formed XML" in reasons["broken.xml"]
    assert "not valid YAML" in reasons["broken.yaml"]
    assert "entity declarations" in reasons["entities.xml"]


def test_a_zip_bomb_is_refused_before_any_library_opens_it(tmp_path):
    bomb = tmp_path / "bomb.docx"
    with zipfile.ZipFile(bomb, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("[Content_Types].xml", "<Types/>")
        zf.writestr("word/document.xml", b"\0" * 30_000_000)
    assert bomb.stat().st_size < 100_000
    result = read_file(bomb, ("bomb.docx",), limits=Limits(max_unzipped_bytes=20_000_000))
    assert "zip bomb" in result.reason and "would expand to 30,000," in result.reason
    result = read_file(bomb, ("bomb.docx",))  # under the total: the expansion ratio refuses it
    assert "zip bomb" in result.reason and "expands" in result.reason


def test_a_pdf_past_the_page_bound_is_cut_with_a_note(tmp_path):
    write_pdf(tmp_path / "long.pdf", [f"Page number {n} text." for n in range(1, 7)])
    doc = read_file(tmp_path / "long.pdf", ("long.pdf",), limits=Limits(max_pages=4))
    assert [s.page for s in doc.sections] == [1, 2, 3, 4]
    assert doc.notes == ("only the first 4 of 6 pages were read",)


def test_without_the_docs_extra_its_formats_are_skipped_with_the_install_command(tmp_path, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    missing = {"pypdf", "docx", "pptx", "openpyxl", "trafilatura", "yaml", "defusedxml"}
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in missing else real(name, *a))
    write_one_of_each(tmp_path)
    docs, rejected = split_items(read_folder(tmp_path))
    needs_extra = {r.source.rsplit("/", 1)[1]: r.reason for r in rejected}
    assert set(needs_extra) == {"report.pdf", "handbook.docx", "roadmap.pptx", "budget.xlsx", "policy.html", "service.yaml", "catalog.xml"}
    assert all("pip install 'cairn-context[docs]'" in r for r in needs_extra.values())
    assert {d.path[-1] for d in docs} == {
        "orders.csv", "orders.tsv", "incident.eml", "deploy.py", "client.js", "notes.md", "readme.txt", "faq.json"
    }


def test_the_registry_maps_extensions_and_mime_types():
    assert parser_for("A.PDF").format == "pdf"
    assert parser_for("page", mime="text/html; charset=utf-8").format == "html"
    assert parser_for("image.png") is None
    assert all(spec.isolate for ext, spec in PARSERS.items() if ext in (".pdf", ".docx", ".pptx", ".xlsx"))


def test_code_is_cut_into_functions_and_classes_and_a_big_class_into_methods(tmp_path, every_format):
    methods = "\n".join(f"    def step_{i}(self):\n" + "".join(f"        x = {j}\n" for j in range(8)) for i in range(10))
    (tmp_path / "jobs.py").write_text(f"import os\n\n\nclass Pipeline:\n    '''Runs steps.'''\n\n{methods}\n\ndef main():\n    return 0\n")
    doc = read_file(tmp_path / "jobs.py", ("jobs.py",))
    labels = [s.label for s in doc.sections]
    assert "class Pipeline" in labels and "def Pipeline.step_3" in labels and "def main" in labels
    step = next(s for s in doc.sections if s.label == "def Pipeline.step_3")
    assert step.heading_path == ("Pipeline", "step_3") and doc.text[step.start:].startswith("    def step_3(self):")
    js = {s.label for s in every_format["client.js"].sections}
    from cairn.engine.ingest.parsers.code import tree_sitter_available

    if tree_sitter_available():
        assert {"function declaration fetchOrders", "class declaration Cart"} <= js
    else:
        assert {"function fetchOrders(id) {", "class Cart {"} <= js


def test_without_tree_sitter_other_languages_are_cut_at_top_level_lines(tmp_path, monkeypatch):
    from cairn.engine.ingest.parsers import code

    monkeypatch.setattr(code, "tree_sitter_available", lambda: False)
    (tmp_path / "main.go").write_text("package main\n\nimport \"fmt\"\n\nfunc hello() {\n\n\tfmt.Println(1)\n}\n\nfunc main() {\n\thello()\n}\n")
    doc = read_file(tmp_path / "main.go", ("main.go",))
    assert [s.label for s in doc.sections] == ["package main", 'import "fmt"', "func hello() {", "func main() {"]
