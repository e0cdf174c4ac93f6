"""Per-tenant rate limits through `cairn serve --workers 2` as a user runs it: two tenants' keys,
one tenant over its limit answered 429 with Retry-After and a JSON error naming the limit, the
other served; the count is one for both worker processes (one file in the home)."""

from __future__ import annotations

import json

import httpx
import pytest

from cairn.client import CairnClient
from cairn.core.errors import RateLimited
from cairn.core.tls import verified_context
from tests.ports import cairn_serve

pytestmark = pytest.mark.e2e
TRIAL_KEY = "trial-key-0123456789abcdef"
ACME_KEY = "acme-key-0123456789abcdef"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    home = tmp_path_factory.mktemp("limits")
    keys = home / "keys.json"
    keys.write_text(json.dumps({TRIAL_KEY: "trial", ACME_KEY: "acme"}))
    env = {"CAIRN_RATE_LIMITS": "1000/second", "CAIRN_TENANT_RATE_LIMITS": json.dumps({"trial": "4/hour"})}
    with cairn_serve(home, keys, workers=2, env=env) as (_, url):
        yield url, home


def _get(url: str, key: str) -> httpx.Response:
    with httpx.Client(verify=verified_context()) as fresh:  # a new connection each time: either worker may answer it
        return fresh.get(f"{url}/v1/me", headers={"Authorization": f"Bearer {key}"})


def test_one_tenant_over_its_limit_is_refused_and_the_other_is_served(server):
    url, home = server
    answers = [_get(url, TRIAL_KEY) for _ in range(8)]
    assert [r.status_code for r in answers] == [200] * 4 + [429] * 4  # 4 an hour, for both workers together
    refused = answers[-1]
    body = refused.json()
    assert refused.headers["content-type"].startswith("application/json")
    assert body["error"] == "rate_limited" and body["retryable"] is True and body["request_id"]
    assert body["details"]["limit"] == "4/hour" and body["details"]["period"] == "hour"
    assert 0 < int(refused.headers["retry-after"]) == body["details"]["retry_after_s"] <= 3600
    assert "tenant 'trial' is over its rate limit of 4 requests per hour; retry in" in body["message"]
    assert all(_get(url, ACME_KEY).status_code == 200 for _ in range(8))  # the default, 1000/second
    assert (home / "ratelimits.db").exists()


def test_the_client_raises_throttled_with_the_servers_words(server):
    url, _ = server
    with CairnClient(url, TRIAL_KEY, retries=0) as client:
        with pytest.raises(RateLimited) as refused:
            client.find("anything")
    assert "over its rate limit of 4 requests per hour" in str(refused.value)
    assert refused.value.details["limit"] == "4/hour" and refused.value.retry_after_s > 0


def test_health_answers_without_counting(server):
    url, _ = server
    assert all(httpx.get(f"{url}/v1/health").status_code == 200 for _ in range(6))
