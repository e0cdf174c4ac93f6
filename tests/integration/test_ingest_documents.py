"""A folder holding every format, ingested through the isolated parser process and searched with
Cairn.find: the right page of the right PDF is found and cited; every skipped file is listed."""

import os
import time

import pytest

from benchmarks.docs_corpus import write_one_of_each, write_pdf
from cairn import Cairn
from cairn.core.models import record_id
from cairn.engine.ingest import Ingestor, LocalContentStore
from cairn.engine.ingest.parsers import ParserSpec
from cairn.engine.ingest.parsers.base import Limits
from cairn.engine.ingest.parsers.isolation import IsolatedRunner
from cairn.ports.vectorstores.local import LocalVectorStore

pytestmark = pytest.mark.integration
ROOT = "cairn://resources/company"

PAGES = [
    "Annual security report. This document summarises the security programme of the company for the year.",
    "Badge access. Visitors receive a temporary badge at the front desk and must return it when they leave. "
    "Lost employee badges are replaced by the facilities team within one business day for a fee of ten euros.",
    "Backups. Production databases are backed up every night and restores are tested once per quarter.",
]


@pytest.fixture
def company(tmp_path):
    folder = tmp_path / "company"
    write_one_of_each(folder / "misc")
    (folder / "security").mkdir()
    write_pdf(folder / "security" / "annual-security.pdf", PAGES, "Annual security report")
    write_pdf(folder / "security" / "travel-policy.pdf", [
        "Travel policy. Flights are booked through the travel portal.",
        "Hotels above two hundred euros per night need approval from a manager.",
    ], "Travel policy")
    (folder / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    (folder / "scan.pdf").write_bytes(b"%PDF-1.4\nnot really a pdf\n%%EOF\n")
    os.symlink("/etc/passwd", folder / "passwd.txt")
    return folder


def test_every_format_is_ingested_and_the_right_pdf_page_is_found_and_cited(company, tmp_path, embedder):
    store = LocalVectorStore(tmp_path / "store", dimension=embedder.dimension)
    content = LocalContentStore(tmp_path / "content")
    report = Ingestor(store, embedder, "acme", content=content).ingest_path(company, ROOT)

    skipped = {r.source.rsplit("/", 1)[1]: r.reason for r in report.rejected}
    assert set(skipped) == {"logo.png", "scan.pdf", "passwd.txt"}
    assert "unsupported file type '.png'" in skipped["logo.png"]
    assert "PDF" in skipped["scan.pdf"] or "pdf" in skipped["scan.pdf"]
    assert "outside the ingested folder" in skipped["passwd.txt"]
    assert report.documents == 17  # 15 files of every format + 2 PDFs

    cairn = Cairn(store, embedder, "acme", content=content)
    result = cairn.find("how fast is a lost employee badge replaced and what does it cost?", limit=3)
    top = result.resources[0]
    assert top.uri == f"{ROOT}/security/annual-security.pdf#1"
    assert top.title == "Annual security report — p. 2"
    assert top.citation is not None and top.citation["page"] == 2  # returned with the match (and by the API)
    (rec,) = store.fetch("acme", [record_id("acme", top.uri, 2)])
    assert rec.metadata["citation.page"] == 2 and rec.metadata["source.format"] == "pdf"
    body = content.get("acme", f"{ROOT}/security/annual-security.pdf")
    assert body[rec.metadata["citation.start"] : rec.metadata["citation.end"]].startswith("Badge access.")


def test_a_parser_that_loops_is_stopped_and_the_worker_replaced(tmp_path):
    target = tmp_path / "any.pdf"
    target.write_bytes(b"%PDF")
    looping = ParserSpec("pdf", "tests.hostile_parsers", "loop_forever", isolate=True)
    with IsolatedRunner(Limits(timeout_s=2)) as runner:
        started = time.monotonic()
        with pytest.raises(Exception, match="took longer than 2 s and was stopped"):
            runner.parse(looping, target)
        assert time.monotonic() - started < 30
        write_pdf(tmp_path / "ok.pdf", ["Still works after the restart."])
        parsed = runner.parse(ParserSpec("pdf", "pdf", "parse_pdf", ("pypdf",), isolate=True), tmp_path / "ok.pdf")
        assert "Still works" in parsed.text and runner.restarts == 1


def test_a_parser_that_allocates_without_end_is_stopped_by_the_memory_bound(tmp_path):
    target = tmp_path / "any.pdf"
    target.write_bytes(b"%PDF")
    hog = ParserSpec("pdf", "tests.hostile_parsers", "allocate_without_end", isolate=True)
    with IsolatedRunner(Limits(timeout_s=60, memory_mb=600)) as runner:
        with pytest.raises(Exception, match="more than 600 MB|more memory|died"):
            runner.parse(hog, target)


def test_a_pdf_whose_page_tree_points_to_itself_is_reported_not_fatal(tmp_path):
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [2 0 R 3 0 R] /Count 2 >>",  # the page tree contains itself
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for n, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += f"{n} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{o:010d} 00000 n \n".encode() for o in offsets)
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    (tmp_path / "loop.pdf").write_bytes(bytes(out))
    with IsolatedRunner(Limits(timeout_s=20)) as runner:
        with pytest.raises(Exception) as err:
            runner.parse(ParserSpec("pdf", "pdf", "parse_pdf", ("pypdf",), isolate=True), tmp_path / "loop.pdf")
    assert err.value.message  # reported with a reason (a loop, no text, or stopped), never a hang


def test_two_parser_workers_give_the_same_documents_in_the_same_order(tmp_path):
    from cairn.engine.ingest.parsers.isolation import RunnerPool
    from cairn.engine.ingest.sources import read_folder, split_items

    write_one_of_each(tmp_path / "a")
    write_one_of_each(tmp_path / "b")
    serial, _ = split_items(read_folder(tmp_path))
    with RunnerPool(workers=2) as pool:
        parallel, rejected = split_items(read_folder(tmp_path, runner=pool))
    assert rejected == []
    assert [(d.path, d.text) for d in parallel] == [(d.path, d.text) for d in serial]


def test_a_pdf_that_hangs_its_parser_is_skipped_and_the_ingest_goes_on(tmp_path, embedder, monkeypatch):
    from cairn.engine.ingest import parsers

    monkeypatch.setitem(parsers.PARSERS, ".pdf", ParserSpec("pdf", "tests.hostile_parsers", "loop_forever", ("pypdf",), isolate=True))
    folder = tmp_path / "docs"
    folder.mkdir()
    write_pdf(folder / "hangs.pdf", ["This page makes the parser loop."])
    (folder / "fine.md").write_text("# Fine\n\nThis one is ingested.\n")
    store = LocalVectorStore(tmp_path / "store", dimension=embedder.dimension)
    report = Ingestor(store, embedder, "acme", limits=Limits(timeout_s=3)).ingest_path(folder, ROOT)
    assert [(r.source.rsplit("/", 1)[1], r.reason) for r in report.rejected] == [
        ("hangs.pdf", "parsing took longer than 3 s and was stopped")
    ]
    assert report.documents == 1 and store.count("acme", {"uri": f"{ROOT}/fine.md"}) == 1
