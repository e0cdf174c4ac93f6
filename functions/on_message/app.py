"""Lambda: new user messages from the sessions table's stream → search → prefetched context.

The event source mapping filters the stream to inserted user messages (see ``template.yaml``);
this handler checks again and skips anything else. For each session's newest message of the batch
(older ones of the same session are superseded: debounced) it runs ``search()`` with the message
as the query and the session as context (through the Express workflow when
``CAIRN_STATE_MACHINE_ARN`` is set), the sessions side by side, and stores the result as the
session's prefetched context, so the agent's next ``GET /sessions/{id}`` finds it ready.

Idempotent, keyed on the message: a record for a message whose prefetch is stored already (or a
later message's) runs no search; the write is conditional on being newer (a DynamoDB condition
on the prefetch item's ``seq``), so a late or redelivered prefetch never replaces a newer one.

The tenant is the one the message item was written under (the api function wrote it with the
tenant of the caller's credentials; it is also the item's partition key). A retryable failure
reports the record in ``batchItemFailures`` (the mapping has ``ReportBatchItemFailures``) so
Lambda retries it; a failure that retrying cannot fix (the session was deleted meanwhile) is
logged and skipped.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from cairn.app import workflow
from cairn.app.services import Services
from cairn.core.errors import CairnError, RequestError
from cairn.core.logging import get_logger, set_thread_correlation_id
from cairn.core.requests import MAX_QUERY_CHARS, FindRequest

log = get_logger("cairn.functions.on_message")
services = Services()  # built on the first invocation, then reused while the container is warm


class StreamMessage(BaseModel):
    """A message item as the stream's NEW_IMAGE carries it (see cairn.ports.sessions.dynamodb)."""

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


MAX_PARALLEL = 10  # sessions prefetched side by side in one batch (each waits on its workflow)


def _prefetch(msg: StreamMessage, ident: str, event_id: str) -> bool:
    """One session's prefetch for its newest message in the batch; True when the record should be
    retried. Runs in a worker thread: its log lines (and its workflow's) carry the record's eventID."""
    set_thread_correlation_id(event_id)
    try:
        if services.session_store("the prefetch").prefetched_seq(msg.tenant, msg.session_id) >= msg.seq:
            log.info("prefetch skipped: already done for this message or a later one", session=msg.session_id, seq=msg.seq)
            return False  # a redelivered record (the same message) costs no search
        request = FindRequest(query=msg.content[:MAX_QUERY_CHARS], mode="auto", limit=services.settings.default_limit)
        workflow.search(services, msg.tenant, request, msg.session_id, prefetch_seq=msg.seq, correlation=event_id)
    except CairnError as exc:
        log.warning("prefetch failed", tenant=msg.tenant, session=msg.session_id, seq=msg.seq,
                    error=exc.code, retryable=exc.retryable, message=exc.message)
        return exc.retryable
    return False


def _newest_per_session(event: dict[str, Any]) -> dict[tuple[str, str], tuple[StreamMessage, str, str]]:
    """The batch's user messages, only the newest of each session (debounced: an agent that sends
    three messages in a row gets one prefetch, for the last)."""
    newest: dict[tuple[str, str], tuple[StreamMessage, str, str]] = {}
    for record in event.get("Records") or []:
        ddb = record.get("dynamodb") or {}
        ident = str(ddb.get("SequenceNumber") or record.get("eventID") or "")  # what batchItemFailures names
        if record.get("eventName") != "INSERT":
            continue
        try:
            msg = StreamMessage.from_image(ddb.get("NewImage") or {})
        except Exception as exc:  # a malformed record is skipped, never retried forever
            log.warning("skipped stream record", record=ident, reason=str(exc)[:500])
            continue
        if msg.type != "message" or msg.role != "user" or not msg.content.strip():
            continue
        key = (msg.tenant, msg.session_id)
        if key in newest and newest[key][0].seq >= msg.seq:
            continue
        if key in newest:
            log.info("prefetch superseded by a later message of the session", session=msg.session_id, seq=newest[key][0].seq)
        newest[key] = (msg, ident, str(record.get("eventID") or ident))
    return newest


def handler(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    """Prefetch for each session's newest message of the batch, the sessions side by side."""
    response = BatchResponse()
    newest = _newest_per_session(event)
    if not newest:
        return response.model_dump()
    with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL, len(newest))) as pool:
        retry = list(pool.map(lambda item: (_prefetch(*item), item[1]), newest.values()))
    response.batchItemFailures = [ItemFailure(itemIdentifier=ident) for failed, ident in retry if failed]
    return response.model_dump()
