"""Use counts kept beside the vectors, not in them (cairn.ports.usecounts): the DynamoDB table the
deployed stack declares (moto's server, the real boto3 client) and the SQLite file a cloud store
uses without a table behave alike; a find on Pinecone (the real SDK against the emulator) writes
no record back, its counts land in the table, and hotness reads them back."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cairn import Cairn
from cairn.app.services import Services
from cairn.core.config import PineconeSettings, Settings
from cairn.core.models import Level, record_id
from cairn.engine.ingest import Document
from cairn.engine.memory import UseRecorder
from cairn.ports.usecounts import DynamoDBUseCounts, SQLiteUseCounts, create_table
from tests.emulators.pinecone_emulator import start_pinecone_emulator
from tests.ports import moto_server

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
TABLE = "cairn-use-counts"
ROOT = "cairn://resources/handbook"
DOCS = [
    Document(("billing", "refunds.md"), "Customers can request a refund within 30 days of purchase. "
             "Refunds are paid back to the original card within five business days."),
    Document(("billing", "invoices.md"), "Invoices are emailed on the first day of each month. "
             "Past invoices and refunds can be downloaded as PDF from the billing page."),
    Document(("travel", "expenses.md"), "Employees book flights through the travel portal."),
]


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    with moto_server() as url:
        create_table(_client(url), TABLE)
        yield url


def _client(url: str) -> Any:
    import boto3

    return boto3.client("dynamodb", region_name="us-east-1", endpoint_url=url)


@pytest.fixture(params=["dynamodb", "sqlite"])
def counts(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "sqlite":
        return SQLiteUseCounts(tmp_path / "uses.sqlite")
    url = request.getfixturevalue("endpoint")
    client = _client(url)
    for item in client.scan(TableName=TABLE)["Items"]:  # each test starts from an empty table
        client.delete_item(TableName=TABLE, Key={"pk": item["pk"], "sk": item["sk"]})
    return DynamoDBUseCounts(TABLE, client)


def test_counts_add_up_per_tenant_and_read_back(counts: Any) -> None:
    uris = {"a": "cairn://user/ann/memories/profile/x", "b": "cairn://resources/handbook/faq.md"}
    assert counts.add_uses("acme", {"a": 2, "b": 1}, 1_000.0, uris) == 2
    assert counts.add_uses("acme", {"a": 3}, 2_000.0, {}) == 1
    assert counts.add_uses("globex", {"a": 7}, 1_500.0, uris) == 1
    assert counts.uses("acme", ["a", "b", "never"]) == {"a": (5, 2_000.0), "b": (1, 1_000.0)}
    assert counts.uses("globex", ["a", "b"]) == {"a": (7, 1_500.0)}  # tenants apart
    assert counts.uses("acme", []) == {}


def test_a_users_counts_are_erased_with_the_user_and_no_one_elses(counts: Any) -> None:
    uris = {"ann1": "cairn://user/ann/memories/profile/x", "ann2": "cairn://user/ann/skills/s.md",
            "anna": "cairn://user/anna/memories/profile/y", "doc": "cairn://resources/handbook/faq.md"}
    counts.add_uses("acme", dict.fromkeys(uris, 1), 1_000.0, uris)
    counts.add_uses("globex", {"ann1": 1}, 1_000.0, uris)
    assert counts.forget_under("acme", "cairn://user/ann") == 2
    assert set(counts.uses("acme", list(uris))) == {"anna", "doc"}
    assert set(counts.uses("globex", ["ann1"])) == {"ann1"}


def test_a_count_expires_by_ttl_long_after_its_last_use(endpoint: str) -> None:
    client = _client(endpoint)
    DynamoDBUseCounts(TABLE, client).add_uses("acme", {"x": 1}, 1_000.0, {})
    item = client.get_item(TableName=TABLE, Key={"pk": {"S": "acme"}, "sk": {"S": "x"}})["Item"]
    assert int(item["expires_at"]["N"]) == 1_000 + 180 * 86400
    ttl = client.describe_time_to_live(TableName=TABLE)["TimeToLiveDescription"]
    assert ttl["AttributeName"] == "expires_at"


def test_the_table_is_the_one_the_template_declares(endpoint: str) -> None:
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("!", lambda loader, suffix, node: None)
    template = yaml.load((REPO / "template.yaml").read_text(), Loader=Loader)  # noqa: S506 - SafeLoader subclass
    props = template["Resources"]["UseCountsTable"]["Properties"]
    assert _client(endpoint).describe_table(TableName=TABLE)["Table"]["KeySchema"] == props["KeySchema"]
    assert props["TimeToLiveSpecification"] == {"AttributeName": "expires_at", "Enabled": True}


def test_a_find_on_pinecone_writes_no_record_and_hotness_reads_the_counts_back(endpoint, embedder, tmp_path) -> None:
    emulator = start_pinecone_emulator(embedder.dimension, api_key="test-key")
    try:
        settings = Settings(home=tmp_path, store=PineconeSettings(api_key="test-key", index_host=emulator.host),
                            use_counts_table=TABLE, hotness_weight=0.5)
        services = Services(settings, embedder=embedder, use_counts=DynamoDBUseCounts(TABLE, _client(endpoint)))
        cairn = Cairn(services, "acme")
        cairn.ingestor().ingest(DOCS, ROOT)
        before = cairn.find("refund to my card", limit=5)
        scores = {m.uri: m.score for m in before.resources}
        writes = emulator.count("/vectors/upsert") + emulator.count("/vectors/update")
        recorder = services.recorder
        assert isinstance(recorder, UseRecorder)
        for _ in range(20):
            recorder.record_result("acme", before)
        assert recorder.flush() == len(before.resources)
        assert emulator.count("/vectors/upsert") + emulator.count("/vectors/update") == writes  # nothing rewritten
        refunds = f"{ROOT}/billing/refunds.md"
        rid = record_id("acme", refunds, Level.DETAIL)
        item = _client(endpoint).get_item(TableName=TABLE, Key={"pk": {"S": "acme"}, "sk": {"S": rid}})["Item"]
        assert int(item["n"]["N"]) == 21 and item["uri"]["S"] == refunds  # 20 here, 1 by the find itself
        after = cairn.find("refund to my card", limit=5)
        again = {m.uri: m.score for m in after.resources}
        assert again[refunds] > scores[refunds]  # the counts were read back: used records are hotter
        recorder.close()  # the second find's uses, while the table is there
    finally:
        emulator.stop()
