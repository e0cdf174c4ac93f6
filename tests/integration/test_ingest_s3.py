"""Documents from an S3 prefix (moto's server, a real boto3 client): parsed like a folder, the right
PDF page found and cited, every skipped object listed with its reason, re-ingesting syncs
incrementally, and a bucket that cannot be read is one clear error."""

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from benchmarks.docs_corpus import write_pdf
from cairn import Cairn
from cairn.core.errors import Forbidden, NotFound, Unauthorized, Unavailable
from cairn.engine.ingest import Ingestor, Limits, LocalContentStore
from cairn.ports.embeddings.base import Embedder
from cairn.ports.vectorstores.local import LocalVectorStore
from tests import moto_s3
from tests.moto_s3 import s3_client

s3_endpoint = moto_s3.s3_endpoint  # the fixture: one moto server for the module

pytestmark = pytest.mark.integration
ROOT = "cairn://resources/handbook"
PAGES = [
    "Annual security report. This document summarises the security programme of the company for the year.",
    "Badge access. Visitors receive a temporary badge at the front desk and must return it when they leave. "
    "Lost employee badges are replaced by the facilities team within one business day for a fee of ten euros.",
    "Backups. Production databases are backed up every night and restores are tested once per quarter.",
]
LEAVE = "# Parental leave\n\nParents receive sixteen weeks of paid leave, to be taken within the child's first year.\n"




@pytest.fixture
def bucket(s3_endpoint, request, tmp_path):
    """A bucket whose ``handbook/`` prefix holds a PDF, Markdown (one nested), an image, a broken
    PDF, a CSV past the size limit, a hidden file and a folder marker; a sibling prefix beside it."""
    s3 = s3_client(s3_endpoint)
    name = "cairn-" + request.node.name.replace("_", "-")[:40].lower()
    s3.create_bucket(Bucket=name)
    pdf = tmp_path / "report.pdf"
    write_pdf(pdf, PAGES, "Annual security report")
    objects = {
        "handbook/security/annual-security.pdf": pdf.read_bytes(),
        "handbook/README.md": b"# Company handbook\n\nPolicies for security, leave and travel.\n",
        "handbook/hr/leave/parental.md": LEAVE.encode(),
        "handbook/logo.png": b"\x89PNG\r\n\x1a\n\x00\x00",
        "handbook/scan.pdf": b"%PDF-1.4\nnot really a pdf\n%%EOF\n",
        "handbook/exports/all-staff.csv": b"name,team\n" + b"someone,somewhere\n" * 20_000,
        "handbook/.draft.md": b"# Draft\n\nnot for the index\n",
        "handbook/empty-folder/": b"",
        "handbook-old/obsolete.md": b"# Obsolete\n\nThe old handbook.\n",
    }
    for key, data in objects.items():
        s3.put_object(Bucket=name, Key=key, Body=data)
    return s3, name


class CountingEmbedder(Embedder):
    """The session's embedder, remembering every text it was asked to embed."""

    def __init__(self, inner):
        self.inner, self.name, self.dimension = inner, inner.name, inner.dimension
        self.texts: list[str] = []

    def _embed(self, texts):
        self.texts += texts
        return self.inner._embed(texts)


@pytest.fixture
def world(tmp_path, embedder):
    counting = CountingEmbedder(embedder)
    store = LocalVectorStore(tmp_path / "store", dimension=embedder.dimension)
    content = LocalContentStore(tmp_path / "content")
    ingestor = Ingestor(store, counting, "acme", content=content, limits=Limits(max_bytes=200_000))
    return ingestor, store, content, counting


def test_a_prefix_is_ingested_like_a_folder_and_the_pdf_page_is_found_and_cited(bucket, world, embedder):
    s3, name = bucket
    ingestor, store, content, _ = world
    report = ingestor.ingest_s3(name, "handbook", ROOT, client=s3)

    skipped = {r.source: r.reason for r in report.rejected}
    assert set(skipped) == {f"s3://{name}/handbook/{k}" for k in ("logo.png", "scan.pdf", "exports/all-staff.csv")}
    assert "unsupported file type '.png'" in skipped[f"s3://{name}/handbook/logo.png"]
    assert "pdf" in skipped[f"s3://{name}/handbook/scan.pdf"].lower()
    assert "the limit is 200,000; not downloaded" in skipped[f"s3://{name}/handbook/exports/all-staff.csv"]
    assert report.documents == 3  # the PDF, README.md and the nested parental.md; not the hidden one or handbook-old/

    cairn = Cairn(store, embedder, "acme", content=content)
    top = cairn.find("how fast is a lost employee badge replaced and what does it cost?", limit=3).resources[0]
    assert top.uri == f"{ROOT}/security/annual-security.pdf#1"
    assert top.citation is not None and top.citation["page"] == 2
    leave = cairn.find("how many weeks of parental leave do parents get?", limit=3).resources[0]
    assert leave.uri == f"{ROOT}/hr/leave/parental.md"
    assert store.count("acme", {"uri": f"{ROOT}/hr/leave/parental.md",
                                "metadata.source.uri": f"s3://{name}/handbook/hr/leave/parental.md"}) == 1


def test_re_ingesting_embeds_only_what_changed_and_removes_what_was_deleted(bucket, world):
    s3, name = bucket
    ingestor, store, content, counting = world
    ingestor.ingest_s3(name, "handbook/", ROOT, client=s3)

    counting.texts.clear()
    again = ingestor.ingest_s3(name, "handbook/", ROOT, client=s3)
    assert again.embedded == 0 and again.removed == 0 and again.unchanged == again.records > 0
    assert counting.texts == []

    s3.put_object(Bucket=name, Key="handbook/hr/leave/parental.md", Body=LEAVE.replace("sixteen", "twenty").encode())
    s3.delete_object(Bucket=name, Key="handbook/README.md")
    changed = ingestor.ingest_s3(name, "handbook/", ROOT, client=s3)
    leaves = [t for t in counting.texts if "Parents receive" in t or "Badge access" in t or "Company handbook" in t]
    assert leaves and all("twenty weeks" in t for t in leaves)  # the PDF and README were not embedded again
    assert changed.removed >= 1
    assert store.count("acme", {"uri": f"{ROOT}/README.md"}) == 0
    assert "twenty weeks" in content.get("acme", f"{ROOT}/hr/leave/parental.md")


def test_one_object_may_be_ingested_alone(bucket, world):
    s3, name = bucket
    ingestor, store, _, _ = world
    report = ingestor.ingest_s3(name, "handbook/hr/leave/parental.md", "cairn://resources/leave", client=s3)
    assert report.documents == 1 and report.rejected == []
    assert store.count("acme", {"uri": "cairn://resources/leave/parental.md"}) == 1


class DenyOne:
    """The real client, except that reading one key is denied (as a bucket policy would)."""

    def __init__(self, client, key):
        self.client, self.key = client, key

    def __getattr__(self, name):
        return getattr(self.client, name)

    def get_object(self, **kw):
        if kw["Key"] == self.key:
            raise ClientError({"Error": {"Code": "AccessDenied", "Message": "Access Denied"},
                               "ResponseMetadata": {"HTTPStatusCode": 403}}, "GetObject")
        return self.client.get_object(**kw)


def test_an_object_that_may_not_be_read_is_listed_and_the_rest_goes_on(bucket, world):
    s3, name = bucket
    ingestor, store, _, _ = world
    report = ingestor.ingest_s3(name, "handbook/hr", ROOT, client=DenyOne(s3, "handbook/hr/leave/parental.md"))
    assert [(r.source, r.reason) for r in report.rejected] == [
        (f"s3://{name}/handbook/hr/leave/parental.md", "access denied; the credentials in use need s3:GetObject on it")]


def test_an_archived_object_is_listed_with_how_to_restore_it(bucket, world):
    s3, name = bucket
    ingestor, store, _, _ = world
    s3.put_object(Bucket=name, Key="archive/2019/minutes.md", Body=b"# Minutes\n\nOld minutes.\n", StorageClass="GLACIER")
    s3.put_object(Bucket=name, Key="archive/2024/minutes.md", Body=b"# Minutes\n\nRecent minutes.\n")
    report = ingestor.ingest_s3(name, "archive", "cairn://resources/archive", client=s3)
    assert report.documents == 1
    assert [(r.source, r.reason) for r in report.rejected] == [
        (f"s3://{name}/archive/2019/minutes.md", "is archived (S3 Glacier); restore it to ingest it")]


def test_a_bucket_or_prefix_that_cannot_be_read_is_one_clear_error_and_nothing_changes(bucket, world):
    s3, name = bucket
    ingestor, store, _, _ = world
    ingestor.ingest_s3(name, "handbook/hr", ROOT, client=s3)
    before = store.count("acme")

    with pytest.raises(NotFound, match=r"cannot read s3://no-such-bucket-here/handbook: the bucket does not exist"):
        ingestor.ingest_s3("no-such-bucket-here", "handbook", ROOT, client=s3)
    with pytest.raises(NotFound, match=rf"nothing to ingest under s3://{name}/Handbook: no object there"):
        ingestor.ingest_s3(name, "Handbook", ROOT, client=s3)
    unreachable = boto3.client("s3", endpoint_url="http://127.0.0.1:9", region_name="us-east-1",
                               aws_access_key_id="t", aws_secret_access_key="t",
                               config=Config(retries={"max_attempts": 1}))
    with pytest.raises(Unavailable, match="nothing was changed; try again") as err:
        ingestor.ingest_s3(name, "handbook/hr", ROOT, client=unreachable)
    assert err.value.retryable
    assert store.count("acme") == before


def test_missing_credentials_and_denied_listings_name_the_fix():
    from botocore.exceptions import NoCredentialsError

    from cairn.engine.ingest.s3 import s3_error

    err = s3_error(NoCredentialsError(), "s3://docs/handbook")
    assert isinstance(err, Unauthorized) and "AWS_PROFILE" in err.message and "s3://docs/handbook" in err.message
    denied = ClientError({"Error": {"Code": "AccessDenied", "Message": "Access Denied"},
                          "ResponseMetadata": {"HTTPStatusCode": 403}}, "ListObjectsV2")
    err = s3_error(denied, "s3://docs/handbook")
    assert isinstance(err, Forbidden) and "s3:ListBucket" in err.message


def test_objects_fetched_at_once_still_come_in_listing_order(s3_endpoint, request):
    from cairn.engine.ingest.s3 import read_prefix
    from cairn.engine.ingest.sources import Document, Rejected

    s3 = s3_client(s3_endpoint)
    name = "cairn-" + request.node.name.replace("_", "-")[:40].lower()
    s3.create_bucket(Bucket=name)
    keys = [f"notes/n{i:02d}.{'md' if i % 4 else 'png'}" for i in range(20)]
    for key in keys:
        s3.put_object(Bucket=name, Key=key, Body=f"# Note {key}\n\nText of {key}.\n".encode())
    items = list(read_prefix(s3, name, "notes", downloads=3))
    assert [i.path[-1] if isinstance(i, Document) else i.source.rsplit("/", 1)[-1] for i in items] == \
        [k.rsplit("/", 1)[-1] for k in keys]
    assert [isinstance(i, Rejected) for i in items] == [k.endswith(".png") for k in keys]
    # each document holds its own object's text (no two downloads share a file)
    assert all(f"Text of notes/{i.path[-1]}." in i.text for i in items if isinstance(i, Document))
