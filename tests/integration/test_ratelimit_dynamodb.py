"""The deployed limiter's counters in DynamoDB (moto's server, over the wire): every instance of
the api function counts into the same items, so N instances admit a tenant's limit once, not N
times; the table is the one template.yaml declares."""

from __future__ import annotations

from pathlib import Path

import pytest

from cairn.core.errors import RateLimited
from cairn.ports.ratelimit import DynamoDBCounter, Limit, LimitPolicy, RateLimiter, create_table
from tests.ports import moto_server

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
TABLE = "cairn-ratelimits"


@pytest.fixture(scope="module")
def endpoint():
    with moto_server() as url:
        yield url


@pytest.fixture(scope="module")
def table(endpoint):
    """The counters' table, made once per module (tests here may run on different workers)."""
    create_table(_client(endpoint), TABLE)
    return TABLE


def _client(url: str):
    import boto3

    return boto3.client("dynamodb", region_name="us-east-1", endpoint_url=url)


def test_instances_share_one_count_per_tenant_and_window(endpoint, table):
    policy = LimitPolicy((Limit(1000, "second"),), {"trial": (Limit(10, "hour"),)})
    instances = [RateLimiter(policy, DynamoDBCounter(TABLE, _client(endpoint))) for _ in range(4)]
    admitted, refused = [], []
    # round robin over the instances, one call at a time: moto's server does not serialise
    # concurrent conditional writes to one item (DynamoDB does), so threads would test moto
    for _ in range(5):
        for limiter in instances:
            try:
                limiter.admit("trial")
                admitted.append(1)
            except RateLimited as exc:
                refused.append(exc)
    assert len(admitted) == 10 and len(refused) == 10  # 4 instances x 5 calls, one limit of 10
    assert {e.details["limit"] for e in refused} == {"10/hour"}
    item = _client(endpoint).scan(TableName=TABLE)["Items"]
    trial = [i for i in item if i["pk"]["S"].startswith("trial/hour/")]
    assert len(trial) == 1 and trial[0]["n"] == {"N": "10"}
    window = int(trial[0]["pk"]["S"].rsplit("/", 1)[1])
    assert int(trial[0]["expires_at"]["N"]) == (window + 1) * 3600 + 60  # gone by TTL after its window
    instances[0].admit("acme")  # the default's window is its own item


def test_the_table_is_the_one_the_template_declares(endpoint, table):
    """The counters' key and TTL attribute are those of template.yaml's RateLimitTable."""
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("!", lambda loader, suffix, node: None)
    template = yaml.load((REPO / "template.yaml").read_text(), Loader=Loader)  # noqa: S506 - SafeLoader subclass
    props = template["Resources"]["RateLimitTable"]["Properties"]
    assert props["KeySchema"] == [{"AttributeName": "pk", "KeyType": "HASH"}]
    assert props["TimeToLiveSpecification"] == {"AttributeName": "expires_at", "Enabled": True}
    described = _client(endpoint).describe_table(TableName=TABLE)["Table"]
    assert described["KeySchema"] == props["KeySchema"]
    ttl = _client(endpoint).describe_time_to_live(TableName=TABLE)["TimeToLiveDescription"]
    assert ttl["AttributeName"] == "expires_at"
