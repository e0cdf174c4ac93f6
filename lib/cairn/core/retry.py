"""One retry policy for every client cairn calls, and one definition of "retryable" per transport.

:class:`RetryPolicy` holds the numbers (attempts, base, cap, an optional overall deadline) and
runs a call: exponential backoff with *full jitter* (a uniform wait in ``[0, min(cap, base·2^n)]``,
so many clients throttled together do not retry in step), a server's ``Retry-After`` honoured
(capped, and never shorter than asked), and no wait that would pass the deadline. What counts
as retryable is not the policy's business: each transport passes a predicate, built from the
definitions below, so an HTTP status means the same thing to every client.

    policy = RetryPolicy(attempts=4, base_s=0.25, cap_s=8.0)
    policy.call(send, retryable=lambda e: is_retryable_status(status_of(e)), retry_after=retry_after_of)

Every retry is logged (``retry`` with what, attempt, delay) and counted by ``on_retry``.
"""

from __future__ import annotations

import email.utils
import math
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from cairn.core.logging import get_logger

T = TypeVar("T")
log = get_logger(__name__)

#: HTTP statuses worth another try, for every HTTP client (Pinecone, OpenSearch, OpenAI-compatible
#: LLMs, rerank APIs): request timeout, too early, throttled, and every 5xx except the two that
#: say the server will never do it (501 Not Implemented, 505 HTTP Version Not Supported).
RETRYABLE_4XX = frozenset({408, 425, 429})
PERMANENT_5XX = frozenset({501, 505})

#: AWS error codes worth another try (botocore clients: Bedrock, DynamoDB, S3), next to any 5xx.
RETRYABLE_AWS_CODES = frozenset({
    "ThrottlingException", "Throttling", "ThrottledException", "TooManyRequestsException",
    "RequestLimitExceeded", "ProvisionedThroughputExceededException", "RequestThrottled",
    "SlowDown", "ServiceUnavailable", "ServiceUnavailableException", "InternalServerError",
    "InternalServerException", "InternalFailure", "ModelNotReadyException", "ModelTimeoutException",
    "TransactionInProgressException", "RequestTimeout", "RequestTimeoutException",
    "BadGatewayException", "DependencyFailedException", "ServiceQuotaExceededException",
})


def is_retryable_status(status: object) -> bool:
    """One answer for every HTTP client: may trying again with the same request help?"""
    if not isinstance(status, int) or isinstance(status, bool):
        return False
    return status in RETRYABLE_4XX or (500 <= status < 600 and status not in PERMANENT_5XX)


def is_retryable_aws_error(code: object, status: object = None) -> bool:
    """The same question for a botocore ``ClientError`` (its ``Error.Code`` and HTTP status)."""
    return code in RETRYABLE_AWS_CODES or is_retryable_status(status)


@dataclass(frozen=True)
class AwsError:
    """What a botocore ``ClientError`` says: its code, HTTP status, message, and if it is retryable."""

    code: str
    status: int
    message: str
    retryable: bool

    @classmethod
    def of(cls, exc: BaseException) -> AwsError:
        response = getattr(exc, "response", None) or {}
        err = response.get("Error", {}) or {}
        code = str(err.get("Code", "") or "")
        status = response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0
        return cls(code, status, str(err.get("Message", "") or ""), is_retryable_aws_error(code, status))


def parse_retry_after(value: str | float | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` value: a number of seconds or an HTTP date."""
    if value is None:
        return None
    if isinstance(value, int | float):
        return float(value) if math.isfinite(value) and value >= 0 else None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        if when is None:
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
        return max(0.0, seconds)
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def retry_after_of(exc: BaseException) -> float | None:
    """A ``Retry-After`` an error carries: ``exc.retry_after``, or ``details["retry_after"]`` of a
    :class:`~cairn.core.errors.CairnError`, or a ``Retry-After`` header of ``exc.headers``."""
    hinted = getattr(exc, "retry_after", None)
    if hinted is None:
        details = getattr(exc, "details", None)
        if isinstance(details, Mapping):
            hinted = details.get("retry_after")
    if hinted is None:
        headers = getattr(exc, "headers", None)
        if isinstance(headers, Mapping):
            hinted = next((v for k, v in headers.items() if str(k).lower() == "retry-after"), None)
    try:
        return parse_retry_after(hinted)
    except (TypeError, ValueError):
        return None


def is_retryable_cairn_error(exc: BaseException) -> bool:
    """For calls that already map vendor errors to cairn errors: their ``retryable`` flag."""
    return bool(getattr(exc, "retryable", False))


@dataclass(frozen=True)
class RetryPolicy:
    """How many times to try and how long to wait between tries.

    ``attempts`` counts every try (1 = no retry). The wait before retry ``n`` (0-based) is
    uniform in ``[0, min(cap_s, base_s · 2^n)]`` (full jitter) or, when the server said how long
    to wait, that long (at most ``cap_s``). ``deadline_s``, when set, bounds the whole call:
    no retry is started whose wait would end past it, so a caller's timeout can be longer than
    everything it waits for.
    """

    attempts: int = 4
    base_s: float = 0.25
    cap_s: float = 8.0
    deadline_s: float | None = None
    rng: Callable[[], float] = field(default=random.random, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError(f"attempts must be at least 1, got {self.attempts}")
        if not (self.base_s >= 0 and self.cap_s >= 0):
            raise ValueError(f"base_s and cap_s must be >= 0, got {self.base_s} and {self.cap_s}")

    @classmethod
    def of_retries(cls, max_retries: int, base_s: float = 0.25, cap_s: float = 8.0, **kw: Any) -> RetryPolicy:
        """The policy for clients configured by a number of *retries* (attempts = retries + 1)."""
        return cls(attempts=max(0, max_retries) + 1, base_s=base_s, cap_s=cap_s, **kw)

    @property
    def max_retries(self) -> int:
        return self.attempts - 1

    def delay(self, retry: int, retry_after: float | None = None) -> float:
        """The wait before retry number ``retry`` (0-based)."""
        if retry_after is not None:
            return min(self.cap_s, max(0.0, retry_after))
        return self.rng() * min(self.cap_s, self.base_s * 2.0**retry)

    def call(
        self,
        fn: Callable[[], T],
        *,
        retryable: Callable[[BaseException], bool],
        retry_after: Callable[[BaseException], float | None] = retry_after_of,
        sleep: Callable[[float], None] = time.sleep,
        on_retry: Callable[[int, float, BaseException], None] | None = None,
        what: str = "call",
        clock: Callable[[], float] = time.monotonic,
    ) -> T:
        """Run ``fn``; on an exception ``retryable`` accepts, wait and try again, up to ``attempts``."""
        started = clock()
        retry = 0
        while True:
            try:
                return fn()
            except Exception as exc:
                if retry + 1 >= self.attempts or not retryable(exc):
                    raise
                wait = self.delay(retry, retry_after(exc))
                if self.deadline_s is not None and clock() - started + wait > self.deadline_s:
                    raise
                retry += 1
                log.info("retry", what=what, attempt=retry, delay_s=round(wait, 3), error=type(exc).__name__)
                if on_retry is not None:
                    on_retry(retry, wait, exc)
                if wait > 0:
                    sleep(wait)
