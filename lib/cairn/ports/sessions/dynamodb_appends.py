"""How a DynamoDB session store appends a message.

Appending is two writes: ``ADD last_seq 1`` on META (condition: the session exists and has not
expired) allocates a seq, then a put of ``MSG#<seq>`` with ``attribute_not_exists(pk)`` stores
the message (a message is never overwritten). If that seq is already taken - the counter handed
it out twice (moto's updates are not atomic under concurrent requests), it was moved back (a
restore, a manual edit), or a compression sealed it (below) - the append allocates a new seq and
tries again, up to ``APPEND_ATTEMPTS`` times (then a retryable :class:`SessionError`). Before
retrying it lifts a counter that is behind the newest stored seq (or the summary) up to it, so a
counter that went back costs one retry, not one per message. A taken seq that holds this very
message - same role, content and ``appended_at`` (the append's clock reading, to the full float;
``created_at`` is when the message was said, which a caller may set for a dated transcript)
- means the SDK retried a put whose first attempt had succeeded: it is this append's message,
returned, not stored twice. (No extra write token on the item, so the stream image keeps its
shape; two different appends would need the same seq, text and clock reading to be confused.)

Guarantees: every appended message is stored exactly once (never lost, never duplicated) and
reads return messages in ``seq`` order. Contiguity is *not* guaranteed: a seq that was
allocated but never filled stays a gap - the writer died or failed between the two writes, the
SDK retried an ``ADD`` whose first response was lost, or (moto) two concurrent ``ADD``s both
returned the later value and the earlier one was never handed out. Readers skip gaps;
``last_seq`` (``message_count``) counts seqs allocated, which can exceed the messages stored.
Between concurrent appends the order is whatever the counter decided; an append that starts
after another has returned gets a higher seq as long as the counter only moves forward (DynamoDB
serialises the updates of one item).
"""

from __future__ import annotations

import random
import time
from typing import Any

from cairn.core.errors import SessionConflict, SessionError
from cairn.ports.sessions.base import Message, Role, SessionStore
from cairn.ports.sessions.dynamodb_items import (
    _MSG_LAST,
    TTL_ATTRIBUTE,
    _error_code,
    _message_of,
    _n,
    _num,
    _s,
    _seq_of,
    _str,
    message_sk,
    session_pk,
)

APPEND_ATTEMPTS = 8  # seqs an append tries before giving up (a taken seq is rare on DynamoDB)


class DynamoDBAppends(SessionStore):
    """The append half of :class:`~cairn.ports.sessions.dynamodb.DynamoDBSessionStore`: a seq allocated
    on META, then the message put where no item is."""

    client: Any
    table: str


    def _append(
        self, tenant: str, session_id: str, role: Role, content: str, now: float,
        name: str | None = None, created_at: float | None = None,
    ) -> Message:
        pk = session_pk(tenant, session_id)
        said = now if created_at is None else created_at
        taken: list[int] = []
        for attempt in range(APPEND_ATTEMPTS):
            if attempt > 1:  # racing writers (or a counter that keeps going back): spread out
                time.sleep(random.uniform(0, 0.005 * attempt))
            meta = self._allocate(pk, session_id, now)
            seq = int(_num(meta, "last_seq"))
            summarized_through = int(_num(meta, "summarized_through"))
            # a seq at or below the summary is never used: the counter went back (a restore, an edit)
            if seq > summarized_through and self._put_message(
                pk, tenant, session_id, seq, role, content, now, meta[TTL_ATTRIBUTE], name, said
            ):
                return Message(seq=seq, role=role, content=content, created_at=said, name=name)
            taken.append(seq)
            self._lift_counter(pk, max(seq, summarized_through))
        raise SessionError(
            f"session {session_id!r}: append could not store the message: seqs {taken} were all taken "
            f"({APPEND_ATTEMPTS} attempts); the seq counter (last_seq on the META item) keeps handing out "
            "used seqs; retry",
            retryable=True,
        )

    def _append_once(
        self, tenant: str, session_id: str, role: Role, content: str, now: float,
        name: str | None, created_at: float | None, key: str,
    ) -> Message:
        """Claim ``IDEM#<key>`` (a conditional put), append, then record the seq on the claim. A
        retry finds the claim: with a seq it returns that message; still pending (the first try
        is in flight) it is a retryable conflict. A failed append releases the claim."""
        pk = session_pk(tenant, session_id)
        claim = {"pk": _s(pk), "sk": _s(f"IDEM#{key}")}
        meta = self.client.get_item(TableName=self.table, Key={"pk": _s(pk), "sk": _s("META")}, ConsistentRead=True).get("Item")
        if meta is None or _num(meta, TTL_ATTRIBUTE) <= now:
            raise self.not_found(session_id)
        try:
            self.client.put_item(
                TableName=self.table, Item={**claim, "type": _s("idempotency"), TTL_ATTRIBUTE: meta[TTL_ATTRIBUTE]},
                ConditionExpression="attribute_not_exists(pk)",
            )
        except Exception as exc:
            if _error_code(exc) != "ConditionalCheckFailedException":
                raise
            return self._claimed(pk, claim, session_id, key)
        try:
            msg = self._append(tenant, session_id, role, content, now, name, created_at)
        except BaseException:
            self.client.delete_item(TableName=self.table, Key=claim)
            raise
        self.client.update_item(
            TableName=self.table, Key=claim, UpdateExpression="SET seq = :seq", ExpressionAttributeValues={":seq": _n(msg.seq)}
        )
        return msg

    def _claimed(self, pk: str, claim: dict[str, Any], session_id: str, key: str) -> Message:
        item = self.client.get_item(TableName=self.table, Key=claim, ConsistentRead=True).get("Item") or {}
        if "seq" not in item:
            raise SessionConflict(
                f"session {session_id!r}: a message with idempotency key {key!r} is still being appended; retry", retryable=True
            )
        seq = int(_num(item, "seq"))
        stored = self.client.get_item(
            TableName=self.table, Key={"pk": _s(pk), "sk": _s(message_sk(seq))}, ConsistentRead=True
        ).get("Item") or {}
        return _message_of(stored)

    def _allocate(self, pk: str, session_id: str, now: float) -> dict[str, Any]:
        """``ADD last_seq 1`` on META; returns the new META (``last_seq`` is the seq allocated)."""
        try:
            out = self.client.update_item(
                TableName=self.table,
                Key={"pk": _s(pk), "sk": _s("META")},
                UpdateExpression="ADD last_seq :one SET updated_at = :now",
                ConditionExpression="attribute_exists(pk) AND #ttl > :now",
                ExpressionAttributeNames={"#ttl": TTL_ATTRIBUTE},
                ExpressionAttributeValues={":one": _n(1), ":now": _n(now)},
                ReturnValues="ALL_NEW",
            )
        except Exception as exc:
            if _error_code(exc) == "ConditionalCheckFailedException":
                raise self.not_found(session_id) from None
            raise
        return out["Attributes"]

    def _put_message(
        self, pk: str, tenant: str, session_id: str, seq: int, role: Role, content: str, now: float,
        expires: dict[str, str], name: str | None = None, said: float | None = None,
    ) -> bool:
        """Store ``MSG#<seq>``; False when the seq holds another message or a hole marker."""
        item = {
            "pk": _s(pk),
            "sk": _s(message_sk(seq)),
            "type": _s("message"),
            "tenant": _s(tenant),
            "session_id": _s(session_id),
            "seq": _n(seq),
            "role": _s(role),
            "content": _s(content),
            "created_at": _n(now if said is None else said),
            "appended_at": _n(now),
            TTL_ATTRIBUTE: expires,
        }
        if name:
            item["name"] = _s(name)
        try:
            self.client.put_item(
                TableName=self.table,
                Item=item,
                ConditionExpression="attribute_not_exists(pk)",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except Exception as exc:
            if _error_code(exc) != "ConditionalCheckFailedException":
                raise
            old = getattr(exc, "response", {}).get("Item")
            if old is None:  # a backend that does not return the old item: read it
                old = self.client.get_item(
                    TableName=self.table, Key={"pk": _s(pk), "sk": _s(message_sk(seq))}, ConsistentRead=True
                ).get("Item") or {}
            # this very message: our own put, retried by the SDK after it had succeeded
            return (
                _str(old, "type") == "message" and _str(old, "role") == role and _str(old, "content") == content
                and _num(old, "appended_at", _num(old, "created_at", -1)) == now
            )
        return True

    def _lift_counter(self, pk: str, floor: int) -> None:
        """After a seq turned out used: move a counter that is behind ``floor`` (that seq, or the
        summary) or behind the newest stored seq up to it, so the next ``ADD`` gets a free seq."""
        newest = self.client.query(
            TableName=self.table,
            KeyConditionExpression="pk = :pk AND sk BETWEEN :lo AND :hi",
            ExpressionAttributeValues={":pk": _s(pk), ":lo": _s(message_sk(0)), ":hi": _s(_MSG_LAST)},
            ProjectionExpression="sk",
            ScanIndexForward=False,
            Limit=1,
            ConsistentRead=True,
        ).get("Items", [])
        floor = max([floor] + [_seq_of(i) for i in newest])
        try:
            self.client.update_item(
                TableName=self.table,
                Key={"pk": _s(pk), "sk": _s("META")},
                UpdateExpression="SET last_seq = :floor",
                ConditionExpression="attribute_exists(pk) AND last_seq < :floor",
                ExpressionAttributeValues={":floor": _n(floor)},
            )
        except Exception as exc:
            if _error_code(exc) != "ConditionalCheckFailedException":
                raise
