"""Log lines of requests served side by side (`cairn serve` answers several at once per process)
each carry their own request's id."""

from __future__ import annotations

import contextvars
import io
import json
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from cairn.core.logging import configure_logging, correlation_id, get_logger, set_correlation_id

pytestmark = pytest.mark.unit


def test_two_requests_at_once_each_log_their_own_correlation_id():
    buf = io.StringIO()
    configure_logging(stream=buf, force=True, level="INFO")
    both_set = threading.Barrier(2, timeout=30)
    log = get_logger("cairn.test")

    def request(rid: str) -> str | None:  # as the server runs one: a thread, in a copy of the loop's context
        set_correlation_id(rid)
        both_set.wait()  # the other request has set its id too
        log.info("answered", rid=rid)
        return correlation_id()

    try:
        with ThreadPoolExecutor(2) as pool:
            seen = list(pool.map(lambda rid: contextvars.copy_context().run(request, rid), ["req-a", "req-b"]))
    finally:
        set_correlation_id(None)
        configure_logging(force=True)
    assert seen == ["req-a", "req-b"]
    lines = [json.loads(line) for line in buf.getvalue().splitlines() if '"answered"' in line]
    assert sorted((line["rid"], line["correlation_id"]) for line in lines) == [("req-a", "req-a"), ("req-b", "req-b")]
