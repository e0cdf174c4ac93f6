"""The one retry policy: attempts, full jitter under a cap, Retry-After, the deadline, and the
shared definitions of retryable HTTP statuses and AWS codes."""

import pytest

from cairn.core.errors import CairnError
from cairn.core.retry import (
    RetryPolicy,
    is_retryable_aws_error,
    is_retryable_status,
    parse_retry_after,
    retry_after_of,
)

pytestmark = pytest.mark.unit


class Flaky:
    def __init__(self, failures, exc=None):
        self.failures, self.calls = failures, 0
        self.exc = exc or CairnError("busy", retryable=True)

    def __call__(self):
        self.calls += 1
        if self.calls <= self.failures:
            raise self.exc
        return "ok"


def run(policy, fn, **kw):
    waits = []
    kw.setdefault("retryable", lambda e: getattr(e, "retryable", False))
    return policy.call(fn, sleep=waits.append, **kw), waits


def test_retries_until_success_within_the_attempts():
    result, waits = run(RetryPolicy(attempts=4, base_s=1.0, cap_s=100.0, rng=lambda: 1.0), Flaky(3))
    assert result == "ok" and waits == [1.0, 2.0, 4.0]


def test_gives_up_after_the_attempts_and_raises_the_last_error():
    fn = Flaky(10)
    with pytest.raises(CairnError, match="busy"):
        run(RetryPolicy(attempts=3, rng=lambda: 0.5), fn)
    assert fn.calls == 3


def test_an_error_that_is_not_retryable_is_raised_at_once():
    fn = Flaky(1, CairnError("bad request", retryable=False))
    with pytest.raises(CairnError, match="bad request"):
        run(RetryPolicy(attempts=5), fn)
    assert fn.calls == 1


def test_full_jitter_stays_under_the_cap():
    draws = iter([0.0, 0.999, 0.5, 1.0])
    policy = RetryPolicy(attempts=10, base_s=1.0, cap_s=3.0, rng=lambda: next(draws))
    assert [policy.delay(n) for n in range(4)] == [0.0, 0.999 * 2, 0.5 * 3.0, 3.0]


def test_retry_after_is_honoured_and_capped():
    exc = CairnError("throttled", retryable=True, details={"retry_after": 2.5})
    _, waits = run(RetryPolicy(attempts=2, base_s=0.01, cap_s=10.0, rng=lambda: 0.0), Flaky(1, exc))
    assert waits == [2.5]
    _, waits = run(RetryPolicy(attempts=2, cap_s=1.0), Flaky(1, exc))
    assert waits == [1.0]


def test_no_retry_starts_that_would_end_past_the_deadline():
    now = [0.0]
    policy = RetryPolicy(attempts=10, base_s=1.0, cap_s=10.0, deadline_s=2.5, rng=lambda: 1.0)
    fn = Flaky(10)

    def sleep(s):
        now[0] += s

    with pytest.raises(CairnError):
        policy.call(fn, retryable=lambda e: True, sleep=sleep, clock=lambda: now[0])
    assert fn.calls == 2 and now[0] == 1.0  # waited 1 s; the next wait (2 s) would end at 3 s


@pytest.mark.parametrize(("status", "retryable"), [
    (408, True), (425, True), (429, True), (500, True), (502, True), (503, True), (504, True), (529, True),
    (400, False), (401, False), (403, False), (404, False), (409, False), (413, False), (501, False), (505, False),
    (None, False), ("N/A", False), (True, False),
])
def test_one_set_of_retryable_http_statuses(status, retryable):
    assert is_retryable_status(status) is retryable


def test_aws_codes():
    assert is_retryable_aws_error("ThrottlingException") and is_retryable_aws_error("X", 503)
    assert is_retryable_aws_error("X", 429)
    assert not is_retryable_aws_error("ValidationException", 400)


@pytest.mark.parametrize(("value", "seconds"), [
    ("3", 3.0), (" 1.5 ", 1.5), (7, 7.0), ("-1", None), ("soon", None), (None, None), (float("nan"), None),
    ("Wed, 21 Oct 2015 07:28:10 GMT", 10.0),
])
def test_parse_retry_after(value, seconds):
    import email.utils

    now = email.utils.parsedate_to_datetime("Wed, 21 Oct 2015 07:28:00 GMT").timestamp()
    assert parse_retry_after(value, now=now) == seconds


def test_retry_after_is_found_on_attributes_details_and_headers():
    class WithHeaders(Exception):
        headers = {"Retry-After": "4"}

    class WithAttr(Exception):
        retry_after = 2

    assert retry_after_of(WithHeaders()) == 4.0
    assert retry_after_of(WithAttr()) == 2.0
    assert retry_after_of(CairnError("x", details={"retry_after": "1"})) == 1.0
    assert retry_after_of(ValueError()) is None


def test_a_policy_needs_one_attempt():
    with pytest.raises(ValueError):
        RetryPolicy(attempts=0)
    assert RetryPolicy.of_retries(3).attempts == 4


def test_an_aws_client_error_is_described_once():
    from cairn.core.retry import AwsError

    class ClientError(Exception):
        response = {"Error": {"Code": "ThrottlingException", "Message": "slow down"},
                    "ResponseMetadata": {"HTTPStatusCode": 400}}

    assert AwsError.of(ClientError()) == AwsError("ThrottlingException", 400, "slow down", True)
    assert AwsError.of(ValueError()) == AwsError("", 0, "", False)
