"""The S3 content store through a real boto3 client against moto's server, and the ingestor on top."""

import numpy as np
import pytest

from cairn.engine.ingest import ContentNotFound, Document, Ingestor, S3ContentStore, read
from cairn.ports.content import ContentStoreError
from cairn.ports.embeddings.base import Embedder, normalize
from cairn.ports.vectorstores.local import LocalVectorStore
from tests import moto_s3

pytestmark = pytest.mark.integration
ROOT = "cairn://resources/kb"


endpoint = moto_s3.s3_endpoint  # the moto server, one per module


@pytest.fixture
def s3(endpoint, request):
    client = moto_s3.s3_client(endpoint)
    bucket = "cairn-" + request.node.name.replace("_", "-")[:40].lower()
    client.create_bucket(Bucket=bucket)
    return client, bucket


class TinyEmbedder(Embedder):
    name = "tiny"
    dimension = 4

    def _embed(self, texts):
        return normalize(np.array([[len(t), t.count("e") + 1, t.count(" ") + 1, 1] for t in texts], dtype=np.float32))


def test_put_get_list_delete_round_trip(s3):
    client, bucket = s3
    store = S3ContentStore(bucket, "bodies", client)
    store.put_many("acme", {f"{ROOT}/a.md": "Ä body", f"{ROOT}/sub dir/.hidden": "x", ROOT: "listing"})
    store.put("other", f"{ROOT}/a.md", "other tenant")
    assert store.get("acme", f"{ROOT}/a.md") == "Ä body"
    assert store.get("acme", f"{ROOT}/a.md#2") == "Ä body"  # chunks share their file's body
    assert store.list("acme", ROOT) == [ROOT, f"{ROOT}/a.md", f"{ROOT}/sub dir/.hidden"]
    keys = [o["Key"] for o in client.list_objects_v2(Bucket=bucket)["Contents"]]
    assert "bodies/acme/resources/kb/sub%20dir/%2Ehidden/.body" in keys
    assert store.delete_tree("acme", f"{ROOT}/sub dir") == 1
    assert store.list("acme", ROOT) == [ROOT, f"{ROOT}/a.md"]
    with pytest.raises(ContentNotFound, match="no content for"):
        store.get("acme", f"{ROOT}/sub dir/.hidden")
    assert store.get("other", f"{ROOT}/a.md") == "other tenant"


def test_a_long_cjk_name_is_stored_under_a_bounded_key_and_listed_by_its_uri(s3):
    client, bucket = s3
    store = S3ContentStore(bucket, "bodies", client)
    long_dir = f"{ROOT}/{'会議室の予約' * 6}"
    uri = f"{long_dir}/{'説明書' * 10}.md"
    store.put_many("acme", {uri: "body", long_dir: "listing"})
    assert store.list("acme", ROOT) == [long_dir, uri]
    keys = [o["Key"] for o in client.list_objects_v2(Bucket=bucket)["Contents"]]
    assert all(len(part) <= 250 for k in keys for part in k.split("/"))
    assert store.delete_tree("acme", long_dir) == 2
    assert client.list_objects_v2(Bucket=bucket).get("KeyCount") == 0


def test_a_missing_bucket_is_a_clear_error(s3):
    client, _ = s3
    with pytest.raises(ContentStoreError, match="NoSuchBucket"):
        S3ContentStore("no-such-bucket", "", client).put("acme", ROOT, "x")


def test_ingest_sync_and_delete_leave_no_orphans_in_s3(s3, tmp_path):
    client, bucket = s3
    content = S3ContentStore(bucket, "c", client)
    emb = TinyEmbedder()
    store = LocalVectorStore(tmp_path / "s", dimension=emb.dimension)
    ing = Ingestor(store, emb, "acme", content=content)
    docs = [Document(("a", "one.md"), "# One\n\nFirst."), Document(("b", "two.md"), "# Two\n\nSecond.")]
    ing.ingest(docs, ROOT)
    assert read(store, content, "acme", f"{ROOT}/a/one.md", 2).text == "# One\n\nFirst."
    ing.ingest(docs[:1], ROOT)  # b/two.md disappeared
    assert content.list("acme", ROOT) == [ROOT, f"{ROOT}/a", f"{ROOT}/a/one.md"]
    ing.delete(f"{ROOT}/a")
    assert client.list_objects_v2(Bucket=bucket).get("KeyCount") == 0
    assert store.count("acme") == 0
