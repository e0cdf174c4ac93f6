"""Per-tenant rate limits and quotas (cairn.ports.ratelimit): what a limit setting means, how windows
count and refuse, and that the on-machine counter is one count for every process that opens it."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from cairn.app.services import Services
from cairn.core.config import load_settings
from cairn.core.errors import ConfigError, RateLimited
from cairn.ports.ratelimit import Limit, LimitPolicy, MemoryCounter, RateLimiter, SQLiteCounter, parse_limits

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(("text", "limits"), [
    ("none", ()),
    ("", ()),
    ("20/second", (Limit(20, "second"),)),
    ("100000/day, 20/s", (Limit(20, "second"), Limit(100000, "day"))),  # shortest period first
    ("5/minutes,300/hour", (Limit(5, "minute"), Limit(300, "hour"))),
    ("1_000/day", (Limit(1000, "day"),)),
])
def test_a_limit_setting_reads_as_counts_per_period(text, limits):
    assert parse_limits(text, setting="rate_limits") == limits


@pytest.mark.parametrize(("text", "says"), [
    ("20 per second", "'20 per second' is not a limit"),
    ("0/second", "COUNT >= 1"),
    ("20/week", "PERIOD of second, minute, hour, day"),
    ("5/second, 10/s", "two limits per second"),
    ("-1/day", "is not a limit"),
])
def test_a_bad_limit_is_refused_naming_the_setting_the_item_and_the_form(text, says):
    with pytest.raises(ConfigError) as err:
        parse_limits(text, setting="rate_limits (CAIRN_RATE_LIMITS)")
    assert "rate_limits (CAIRN_RATE_LIMITS)" in err.value.message and says in err.value.message


def test_settings_take_a_default_and_per_tenant_limits_from_the_environment():
    settings = load_settings(env={"CAIRN_RATE_LIMITS": "10/second, 500/day",
                                  "CAIRN_TENANT_RATE_LIMITS": '{"bigco": "none", "trial": "1/second"}'})
    policy = LimitPolicy.from_settings(settings.rate_limits, settings.tenant_rate_limits)
    assert policy.for_tenant("acme") == (Limit(10, "second"), Limit(500, "day"))
    assert policy.for_tenant("bigco") == ()
    assert policy.for_tenant("trial") == (Limit(1, "second"),)
    with pytest.raises(ConfigError, match="the limits of tenant 'trial'"):
        load_settings(env={"CAIRN_TENANT_RATE_LIMITS": '{"trial": "1/fortnight"}'})
    with pytest.raises(ConfigError, match="CAIRN_TENANT_RATE_LIMITS is not valid JSON"):
        load_settings(env={"CAIRN_TENANT_RATE_LIMITS": "trial=1/second"})


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_a_window_admits_its_count_then_refuses_until_it_ends():
    clock = Clock(1_000_000.25)  # a quarter into a second, 40 s into a minute
    limiter = RateLimiter(LimitPolicy((Limit(3, "minute"),)), MemoryCounter(), clock=clock)
    for _ in range(3):
        limiter.admit("acme")
    with pytest.raises(RateLimited) as refused:
        limiter.admit("acme")
    exc = refused.value
    assert exc.http_status == 429 and exc.retryable
    assert exc.retry_after_s == 20  # the minute window ends at 1_000_020
    assert exc.details["limit"] == "3/minute" and exc.details["resets_at"] == "1970-01-12T13:47:00Z"
    assert "tenant 'acme' is over its rate limit of 3 requests per minute; retry in 20 s" in exc.message
    limiter.admit("globex")  # another tenant's window
    clock.now = 1_000_020.0
    limiter.admit("acme")  # the next window


def test_a_request_refused_by_the_rate_does_not_burn_the_quota():
    clock = Clock(86_400 * 100 + 0.5)
    limiter = RateLimiter(LimitPolicy((Limit(2, "second"), Limit(3, "day"))), MemoryCounter(), clock=clock)
    limiter.admit("acme")
    limiter.admit("acme")
    for _ in range(5):
        with pytest.raises(RateLimited, match="rate limit of 2 requests per second"):
            limiter.admit("acme")
    clock.now += 1
    limiter.admit("acme")  # the third of the day: the five refused ones were not counted
    with pytest.raises(RateLimited) as refused:
        limiter.admit("acme")
    assert refused.value.details["kind"] == "quota" and "quota of 3 requests per day" in refused.value.message
    assert refused.value.retry_after_s == 86_400 - 1  # until the UTC day ends


def test_a_tenant_with_its_own_limits_and_one_with_none():
    policy = LimitPolicy((Limit(1, "hour"),), {"bigco": (), "trial": (Limit(2, "hour"),)})
    limiter = RateLimiter(policy, MemoryCounter(), clock=Clock(7200.0))
    for _ in range(50):
        limiter.admit("bigco")
    limiter.admit("trial")
    limiter.admit("trial")
    limiter.admit("acme")
    for tenant in ("trial", "acme"):
        with pytest.raises(RateLimited):
            limiter.admit(tenant)


class Broken:
    def take(self, key: str, limit: int, expires_at: int) -> bool:
        raise OSError("the counters' table is unreachable")


def test_an_unreachable_counter_admits_and_says_so(caplog):
    limiter = RateLimiter(LimitPolicy((Limit(1, "hour"),)), Broken())
    with caplog.at_level("WARNING"):
        limiter.admit("acme")
        limiter.admit("acme")
    warned = [r for r in caplog.records if "rate limit not checked" in r.getMessage()]
    assert len(warned) == 2 and all(r.__dict__.get("error") == "OSError" for r in warned), caplog.records


def _take_many(path: str, n: int, out: "multiprocessing.Queue[int]") -> None:
    counter = SQLiteCounter(Path(path))
    out.put(sum(counter.take("acme/minute/1", 7, 10**10) for _ in range(n)))


def test_the_sqlite_counter_is_one_count_for_every_process_on_the_file(tmp_path):
    """What `cairn serve --workers N` relies on: N processes, one limit."""
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_take_many, args=(str(tmp_path / "ratelimits.db"), 5, out)) for _ in range(3)]
    for p in procs:
        p.start()
    admitted = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert sum(admitted) == 7 and max(admitted) <= 5


def test_services_count_on_this_machine_only_when_a_tenant_has_a_limit(tmp_path):
    unlimited = Services(load_settings(env={"CAIRN_HOME": str(tmp_path / "a")}))
    for _ in range(3):
        unlimited.application.admit(_principal("acme"))
    assert not (tmp_path / "a" / "ratelimits.db").exists()  # no limit: nothing counted, nothing opened
    limited = Services(load_settings(env={"CAIRN_HOME": str(tmp_path / "b"), "CAIRN_TENANT_RATE_LIMITS": '{"acme": "1/hour"}'}))
    assert isinstance(limited.limiter.counter, SQLiteCounter)
    assert limited.limiter.counter.path == tmp_path / "b" / "ratelimits.db"
    limited.application.admit(_principal("acme"))
    with pytest.raises(RateLimited):
        limited.application.admit(_principal("acme"))


def _principal(tenant: str):
    from cairn.app import Principal

    return Principal.of(tenant, None, None)
