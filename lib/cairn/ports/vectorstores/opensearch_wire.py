"""What crosses the wire to OpenSearch: the retrying transport, the request signing, and how an
answer's errors become cairn's (a retryable status, a missing index, a bulk item that failed).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cairn.core.errors import (
    ConfigError,
    VectorStoreError,
    VectorStoreRequestError,
    VectorStoreUnavailable,
)
from cairn.core.retry import RetryPolicy, is_retryable_status


def is_retryable_opensearch_error(exc: BaseException) -> bool:
    """Timeouts, connection errors, and HTTP answers whose status is retryable."""
    from opensearchpy import exceptions as osx

    if isinstance(exc, osx.ConnectionTimeout | osx.ConnectionError):
        return True
    return isinstance(exc, osx.TransportError) and is_retryable_status(exc.status_code)


def _policy_transport(policy: RetryPolicy, sleep: Callable[[float], None]) -> type:
    """opensearch-py's Transport with every request run under ``policy`` (its own loop makes one try)."""
    from opensearchpy import Transport

    class PolicyTransport(Transport):
        def perform_request(self, *args: Any, **kwargs: Any) -> Any:
            parent = super().perform_request
            return policy.call(lambda: parent(*args, **kwargs), retryable=is_retryable_opensearch_error,
                               sleep=sleep, what="opensearch")

    return PolicyTransport


class _Throttled(Exception):
    """Some items of a ``_bulk`` were answered 429."""


def _http_auth(auth: str, username: str | None, password: str | None, region: str | None,
               service: str, credentials: Any) -> Any:
    if auth == "none":
        return None
    if auth == "basic":
        if not username or not password:
            raise ConfigError("opensearch basic auth needs CAIRN_OPENSEARCH_USERNAME and CAIRN_OPENSEARCH_PASSWORD")
        return (username, password)
    if auth != "sigv4":
        raise ConfigError(f"opensearch auth {auth!r} is not supported; use 'none', 'basic' or 'sigv4'")
    if not region:
        raise ConfigError("opensearch sigv4 auth needs a region (CAIRN_OPENSEARCH_REGION)")
    if service not in ("es", "aoss"):
        raise ConfigError(f"opensearch sigv4 service {service!r}: use 'es' (OpenSearch Service) or 'aoss' (Serverless)")
    if credentials is None:
        import boto3

        credentials = boto3.Session().get_credentials()
    if credentials is None:
        raise ConfigError("opensearch sigv4 auth found no AWS credentials (environment, profile or role)")
    from opensearchpy import Urllib3AWSV4SignerAuth

    return Urllib3AWSV4SignerAuth(credentials, region, service)


def _index_missing(exc: Exception) -> bool:
    return getattr(exc, "status_code", None) == 404 and getattr(exc, "error", None) == "index_not_found_exception"


def _ok(response: dict[str, Any]) -> dict[str, Any]:
    """One ``_msearch`` item: its hits, nothing for a missing index, else the mapped error."""
    if "error" not in response:
        return response
    error = response["error"] if isinstance(response["error"], dict) else {"type": str(response["error"])}
    if response.get("status") == 404 and error.get("type") == "index_not_found_exception":
        return {"hits": {"hits": []}}
    raise _status_error(int(response.get("status", 500)), response, retries=0)


def _reason(info: Any) -> tuple[str, str]:
    """The vendor's error type and reason, preferring the root cause over 'all shards failed'."""
    if not isinstance(info, dict) or not isinstance(info.get("error"), dict):
        return "error", str(info)
    error = info["error"]
    root = (error.get("root_cause") or [{}])[0]
    reason = root.get("reason") or error.get("reason") or ""
    if error.get("reason") and error.get("reason") != reason and error.get("reason") != "all shards failed":
        reason = f"{error['reason']}: {reason}"
    return str(root.get("type") or error.get("type") or "error"), str(reason)


def _status_error(status: int, info: Any, retries: int) -> VectorStoreError:
    kind, reason = _reason(info)
    details = {"status": status, "type": kind, "reason": reason}
    if status == 429 or status >= 500:
        return VectorStoreUnavailable(
            f"opensearch answered {status} ({kind}) after {retries} retries: {reason}", details=details
        )
    return VectorStoreRequestError(f"opensearch rejected the request ({status} {kind}): {reason}", details=details)


def _raise_item_errors(items: list[dict[str, Any]]) -> None:
    failed = [next(iter(item.values())) for item in items]
    failed = [f for f in failed if "error" in f and f.get("status") != 404]
    if not failed:
        return
    lines = [f"{f.get('_id')}: {f['error'].get('type')}: {f['error'].get('reason')}" for f in failed[:5]]
    statuses = {int(f.get("status", 500)) for f in failed}
    message = f"opensearch refused {len(failed)} of {len(items)} bulk item(s):\n" + "\n".join(lines)
    details = [{"id": f.get("_id"), "status": f.get("status"), **f["error"]} for f in failed[:20]]
    if all(s == 429 or s >= 500 for s in statuses):
        raise VectorStoreUnavailable(message, details=details)
    raise VectorStoreRequestError(message, details=details)
