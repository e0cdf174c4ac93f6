"""Lambda: new user messages from the sessions table's stream → search → prefetched context.

The event source mapping filters the stream to inserted user messages (see ``template.yaml``);
this handler checks again and skips anything else. For each message it runs ``search()`` with
the message as the query and the session as context (through the Express workflow when
``CAIRN_STATE_MACHINE_ARN`` is set), and stores the result as the session's prefetched context,
so the agent's next ``GET /sessions/{id}`` finds it ready.

The tenant is the one the message item was written under (the api function wrote it with the
tenant of the caller's credentials; it is also the item's partition key). A retryable failure
reports the record in ``batchItemFailures`` (the mapping has ``ReportBatchItemFailures``) so
Lambda retries it; a failure that retrying cannot fix (the session was deleted meanwhile) is
logged and skipped.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from cairn import workflow
from cairn.errors import CairnError, RequestError
from cairn.observability.logging import get_logger, set_correlation_id
from cairn.requests import MAX_QUERY_CHARS, FindRequest
from cairn.services import Services

log = get_logger("cairn.functions.on_message")
services = Services()  # built on the first invocation, then reused while the container is warm


class StreamMessage(BaseModel):
    """A message item as the stream's NEW_IMAGE carries it (see cairn.sessions.dynamodb)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    pk: str
    type: str
    tenant: str
    session_id: str
    seq: int
    role: str
    content: str

    @classmethod
    def from_image(cls, image: dict[str, Any]) -> StreamMessage:
        plain = {k: next(iter(v.values())) for k, v in image.items() if isinstance(v, dict) and len(v) == 1}
        msg = cls.model_validate(plain)
        if not msg.pk.startswith(f"TENANT#{msg.tenant}#SESSION#{msg.session_id}"):
            raise RequestError(f"message item {msg.pk!r} does not belong to tenant {msg.tenant!r}")
        return msg


class ItemFailure(BaseModel):
    itemIdentifier: str


class BatchResponse(BaseModel):
    batchItemFailures: list[ItemFailure] = Field(default_factory=list)


def _prefetch(msg: StreamMessage) -> None:
    request = FindRequest(query=msg.content[:MAX_QUERY_CHARS], mode="thinking", limit=services.settings.default_limit)
    workflow.search(services, msg.tenant, request, msg.session_id)


def handler(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    response = BatchResponse()
    for record in event.get("Records") or []:
        ddb = record.get("dynamodb") or {}
        ident = str(ddb.get("SequenceNumber") or record.get("eventID") or "")
        if record.get("eventName") != "INSERT":
            continue
        try:
            msg = StreamMessage.from_image(ddb.get("NewImage") or {})
        except Exception as exc:  # a malformed record is skipped, never retried forever
            log.warning("skipped stream record", record=ident, reason=str(exc)[:500])
            continue
        if msg.type != "message" or msg.role != "user" or not msg.content.strip():
            continue
        set_correlation_id(str(record.get("eventID") or ident))  # this message's lines and its workflow's
        try:
            _prefetch(msg)
        except CairnError as exc:
            log.warning("prefetch failed", tenant=msg.tenant, session=msg.session_id, seq=msg.seq,
                        error=exc.code, retryable=exc.retryable, message=exc.message)
            if exc.retryable:
                response.batchItemFailures.append(ItemFailure(itemIdentifier=ident))
    return response.model_dump()
