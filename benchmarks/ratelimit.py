"""ratelimit: what counting a request against its tenant's limits costs at the door.

The same `GET /v1/me` resolved by the route table (as the api function and `cairn serve` resolve
it) without a limit and with two limits (`100000/second, 10000000/day`) counted in SQLite
(`<home>/ratelimits.db`, what `cairn serve --workers N` shares), interleaved run by run; and one
`RateLimiter.admit` alone on each on-machine counter. Medians of microseconds. The DynamoDB
counter's cost is one conditional UpdateItem per limit (a network round trip), not measured here.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from cairn.api.routes import build_app, resolve
from cairn.app.services import Services
from cairn.core.config import Settings
from cairn.ports.ratelimit import Limit, LimitPolicy, MemoryCounter, RateLimiter, SQLiteCounter

SUITE = "ratelimit"
RUNS = 2000
LIMITS = "100000/second, 10000000/day"


def _event() -> dict[str, Any]:
    return {"version": "2.0", "rawPath": "/v1/me", "rawQueryString": "", "headers": {},
            "requestContext": {"requestId": "bench", "stage": "$default", "http": {"method": "GET", "path": "/v1/me"},
                               "authorizer": {"lambda": {"tenant": "acme"}}}, "body": None, "isBase64Encoded": False}


def _us(fn: Any) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1e6


def run(data: Path, limit_queries: int | None = None) -> dict:
    runs = limit_queries or RUNS
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        plain = build_app(Services(Settings(home=home / "plain")))
        limited = build_app(Services(Settings(home=home / "limited", rate_limits=LIMITS)))
        event = _event()
        door = {"no limit": [], "2 limits, SQLite": []}
        for _ in range(runs):  # interleaved: the machine's load falls on both arms alike
            door["no limit"].append(_us(lambda: resolve(plain, event)))
            door["2 limits, SQLite"].append(_us(lambda: resolve(limited, event)))
        policy = LimitPolicy((Limit(100000, "second"), Limit(10_000_000, "day")))
        sqlite = RateLimiter(policy, SQLiteCounter(home / "alone.db"))
        memory = RateLimiter(policy, MemoryCounter())
        admit = {"SQLite": [_us(lambda: sqlite.admit("acme")) for _ in range(runs)],
                 "memory": [_us(lambda: memory.admit("acme")) for _ in range(runs)]}
    out = {"runs": runs, "limits": LIMITS,
           "get_me_us_median": {k: round(statistics.median(v), 1) for k, v in door.items()},
           "admit_us_median": {k: round(statistics.median(v), 1) for k, v in admit.items()}}
    out["added_us_median"] = round(out["get_me_us_median"]["2 limits, SQLite"] - out["get_me_us_median"]["no limit"], 1)
    return out


if __name__ == "__main__":
    print(json.dumps(run(Path(".")), indent=2))
