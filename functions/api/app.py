"""Lambda: cairn's HTTP API behind an API Gateway HTTP API (payload format 2.0).

The routes are the ``/v1`` table of :mod:`cairn.api.routes` — the same table ``cairn serve``
serves — so this module only builds it once per container. The tenant (and an end user the
caller may be bound to) comes from the authorizer in ``requestContext.authorizer``: a Lambda
authorizer's context, a JWT claim (``CAIRN_TENANT_CLAIM``, ``CAIRN_USER_CLAIM``) or the IAM
caller mapped by ``CAIRN_IAM_TENANTS``; see :mod:`cairn.api.auth`. ``search`` runs through the
Express workflow when ``CAIRN_STATE_MACHINE_ARN`` is set. Each request's id (API Gateway's
``requestId``, the access log's) is the ``correlation_id`` of its log lines and of every workflow
task's; its metrics (per operation, and find's retrieval statistics) leave as EMF before it returns.
With SnapStart or provisioned concurrency (template parameters ``ApiSnapStart``,
``ApiProvisionedConcurrency``) the init builds every client before the snapshot (:func:`prepare`).
"""

from __future__ import annotations

import json
from typing import Any

from cairn.api import AuthorizerConfig, build_app
from cairn.api.routes import resolve
from cairn.app.services import Services
from cairn.app.workflow import prepare_at_init

services = Services()  # built on the first request that needs them, then reused while warm
app = build_app(services, AuthorizerConfig.from_env())
# what an init that is snapshotted (SnapStart) or kept warm (provisioned concurrency) builds before
# any request: the settings and every AWS and backend client a request would otherwise build first
PREPARED = ("settings", "sfn", "sessions", "content", "store", "embedder", "limiter")


def prepare() -> list[str]:
    """Under SnapStart or provisioned concurrency, build the clients now (init, before the
    snapshot), each on its own (:func:`cairn.app.workflow.prepare_at_init`), and the rate limit
    counters' DynamoDB client with them. Returns those built."""
    built = prepare_at_init(services, PREPARED)
    counter = services.limiter.counter if "limiter" in built else None
    if counter is not None and getattr(counter, "table", None):
        _ = counter.client  # type: ignore[attr-defined]
    return built


prepare()


def handler(event: Any, context: Any = None) -> dict[str, Any]:
    if not isinstance(event, dict) or not isinstance(event.get("requestContext"), dict):
        body = {"error": "bad_request", "type": "RequestError", "retryable": False,
                "message": "not an API Gateway HTTP API (payload 2.0) event"}
        return {"statusCode": 400, "headers": {"content-type": "application/json"}, "body": json.dumps(body)}
    try:
        return resolve(app, event, context)
    finally:
        flush_uses()
        emit_metrics()


def emit_metrics() -> None:
    """The request's metrics (its operation; find's retrieval statistics) as EMF, before Lambda
    freezes the container."""
    try:
        services.emit_metrics()
    except Exception as exc:  # noqa: BLE001 - metrics never fail a request; it is logged
        from cairn.core.logging import get_logger

        get_logger("cairn.functions.api").warning("metrics not written", error=type(exc).__name__, message=str(exc)[:300])


def flush_uses() -> None:
    """Write the use counts (hotness) this request recorded before returning: between invocations
    Lambda freezes the container, and the recorder's background thread with it."""
    recorder = services.__dict__.get("recorder")  # only if a request built it
    if recorder is not None:
        try:
            recorder.flush()
        except Exception as exc:  # noqa: BLE001 - counting use never fails a request; it is logged
            from cairn.core.logging import get_logger

            get_logger("cairn.functions.api").warning("use counts not written", error=type(exc).__name__, message=str(exc)[:300])
