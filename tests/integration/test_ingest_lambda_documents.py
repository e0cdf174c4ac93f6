"""The ingest Lambda with raw documents: a PDF or Markdown file uploaded under ``ingest/<tenant>/``
(the sample S3 notification and EventBridge events, moto's S3 server, a real boto3 client) is
parsed like a file in a folder and added next to what is there; JSON payloads work as before."""

import copy
import importlib.util
import json
import sys
from pathlib import Path

import pytest

from benchmarks.docs_corpus import write_pdf
from cairn import Cairn
from cairn.app.services import Services
from cairn.core.config import load_settings
from cairn.engine.ingest import LocalContentStore
from cairn.ports.vectorstores.local import LocalVectorStore
from tests import moto_s3
from tests.moto_s3 import s3_client

s3_endpoint = moto_s3.s3_endpoint  # the fixture: one moto server for the module

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
EVENTS = REPO / "events"
PAGES = [
    "Annual security report. This document summarises the security programme of the company for the year.",
    "Badge access. Visitors receive a temporary badge at the front desk and must return it when they leave. "
    "Lost employee badges are replaced by the facilities team within one business day for a fee of ten euros.",
]




def load_ingest_handler():
    spec = importlib.util.spec_from_file_location("cairn_function_ingest_documents", REPO / "functions" / "ingest" / "app.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


@pytest.fixture
def lam(s3_endpoint, tmp_path, embedder):
    """The handler over a fresh store, content store and the S3 buckets the sample events name."""
    s3 = s3_client(s3_endpoint)
    buckets = {s3_event()["Records"][0]["s3"]["bucket"]["name"], eventbridge_event()["detail"]["bucket"]["name"]}
    for name in buckets - {b["Name"] for b in s3.list_buckets()["Buckets"]}:
        s3.create_bucket(Bucket=name)
    store = LocalVectorStore(tmp_path / "store", dimension=embedder.dimension)
    content = LocalContentStore(tmp_path / "content")
    mod = load_ingest_handler()
    mod.services = Services(load_settings(env={"CAIRN_HOME": str(tmp_path)}), store=store, embedder=embedder,
                            content=content, s3=s3)
    cairn = Cairn(store, embedder, "acme", content=content)
    return mod, s3, store, cairn


def s3_event(key=None):
    ev = json.loads((EVENTS / "ingest.json").read_text())
    if key:
        ev["Records"][0]["s3"]["object"]["key"] = key
    return ev


def eventbridge_event(key=None):
    ev = json.loads((EVENTS / "ingest_eventbridge.json").read_text())
    if key:
        ev["detail"]["object"]["key"] = key
    return ev


def upload(s3, ev, body):
    if "detail" in ev:
        bucket, key = ev["detail"]["bucket"]["name"], ev["detail"]["object"]["key"]
    else:
        bucket, key = ev["Records"][0]["s3"]["bucket"]["name"], ev["Records"][0]["s3"]["object"]["key"]
    s3.put_object(Bucket=bucket, Key=key, Body=body)
    return copy.deepcopy(ev)


def test_an_uploaded_pdf_is_parsed_placed_by_its_key_and_its_page_found(lam, tmp_path):
    mod, s3, store, cairn = lam
    write_pdf(tmp_path / "report.pdf", PAGES, "Annual security report")
    ev = upload(s3, s3_event("ingest/acme/handbook/security/annual-security.pdf"), (tmp_path / "report.pdf").read_bytes())

    (report,) = mod.handler(ev)["objects"]
    assert report["error"] is None, report
    assert report["tenant"] == "acme" and report["documents"] == 1 and report["written"] > 0
    assert report["root_uri"] == "cairn://resources/handbook/security"

    top = cairn.find("how fast is a lost employee badge replaced and what does it cost?", limit=3).resources[0]
    assert top.uri == "cairn://resources/handbook/security/annual-security.pdf#1"
    assert top.citation is not None and top.citation["page"] == 2

    # a second document in the same folder is added beside the first (upsert, not sync)
    md = upload(s3, eventbridge_event("ingest/acme/handbook/security/visitors.md"),
                b"# Visitors\n\nVisitors sign in at reception and wear a red lanyard at all times.\n")
    (second,) = mod.handler(md)["objects"]
    assert second["error"] is None and second["documents"] == 1
    assert store.count("acme", {"uri": "cairn://resources/handbook/security/annual-security.pdf#1"}) == 1
    assert cairn.find("what colour lanyard do visitors wear?", limit=3).resources[0].uri == \
        "cairn://resources/handbook/security/visitors.md"

    # the same upload again changes nothing
    (again,) = mod.handler(ev)["objects"]
    assert again["error"] is None and again["written"] == 0, again


@pytest.mark.parametrize(("key", "body", "says"), [
    ("ingest/acme/handbook/logo.png", b"\x89PNG\r\n\x1a\n", "unsupported file type '.png'"),
    ("ingest/acme/handbook/scan.pdf", b"%PDF-1.4\nnot really a pdf\n%%EOF\n", "pdf"),
])
def test_a_document_that_cannot_be_read_is_reported_not_retried_and_changes_nothing(lam, key, body, says):
    mod, s3, store, _ = lam
    (report,) = mod.handler(upload(s3, s3_event(key), body))["objects"]  # returns: no retry
    assert report["documents"] == 0
    assert report["error"]["error"] == "ingest_error" and f"s3://cairn-content-123456789012/{key} was not ingested" in \
        report["error"]["message"]
    assert says in report["error"]["message"].lower() and len(report["rejected"]) == 1
    assert store.count("acme") == 0


def test_a_json_payload_still_syncs_its_root_and_a_folder_marker_is_ignored(lam):
    mod, s3, store, cairn = lam
    (report,) = mod.handler(upload(s3, s3_event(), (EVENTS / "ingest_payload.json").read_bytes()))["objects"]
    assert report["error"] is None and report["documents"] == 3 and report["root_uri"] == "cairn://resources/handbook"
    assert cairn.find("how long until a refund reaches my card?", limit=3).resources[0].uri == \
        "cairn://resources/handbook/billing/refunds.md"

    (marker,) = mod.handler(upload(s3, eventbridge_event("ingest/acme/handbook/new-folder/"), b""))["objects"]
    assert marker["error"] is None and marker["documents"] == 0 and "folder marker" in marker["warnings"][0]
