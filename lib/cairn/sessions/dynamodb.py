"""DynamoDB sessions: one table, single-table design, conditional writes, TTL, a stream.

Item layout (every item of a session shares its partition key)::

    pk = TENANT#<tenant>#SESSION#<id>
    sk = META                 type=session   user, created_at, updated_at, expires_at,
                                             summary, summarized_through, last_seq (the counter),
                                             committed_through (memories extracted up to this seq)
    sk = MSG#<seq:010d>       type=message   tenant, session_id, seq, role, content, created_at, expires_at,
                                             appended_at (the append's clock), name (the speaker, optional)
    sk = MSG#<seq:010d>       type=hole      tenant, session_id, seq, created_at, expires_at (a sealed seq)
    sk = PREFETCH             type=prefetch  context (FindResult JSON), updated_at, expires_at

    pk = TENANT#<tenant>#USER#<user>          (one item per session of a user: the user's listing)
    sk = SESSION#<id>         type=user_session  session_id, created_at, expires_at

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

Compression folds the oldest messages into the summary, but a message with a lower seq can still
be in flight (allocated, not yet put). So before the conditional commit of
``summarized_through`` it *seals* the folded range: every seq in it that holds no message gets a
hole marker (``type = hole``, put with ``attribute_not_exists(pk)``). A late writer's put then
fails and it takes a new seq above the summary; if its put landed first, the seal sees a message
the summary lacks and the compression retries (:class:`SessionConflict`). Hole markers stay when
the folded messages are deleted (they go with the session), so a seq below the summary can never
be filled later. One compression writes at most ``MAX_SEALS`` markers: a wider stretch of empty
seqs (a counter moved forward by hand) stops compression with a clear error.

TTL: ``expires_at`` (epoch seconds, a Number) is the table's TTL attribute and every item of a
session carries the same value, so the session expires as a whole. DynamoDB deletes expired
items lazily (up to ~48 h late): reads treat an expired META as "not found".

Stream: the table's stream (``NEW_IMAGE``) carries every new message as an INSERT whose image has
``type = message`` and the full message (tenant, session_id, seq, role, content); hole markers
(``type = hole``) are INSERTs too, so a consumer subscribes with the Lambda event filter
``{"eventName": ["INSERT"], "dynamodb": {"NewImage": {"type": {"S": ["message"]}}}}``.
"""

from __future__ import annotations

import json
import math
import random
import time
from collections.abc import Iterator, Sequence
from typing import Any

from ..errors import CairnError, ConfigError, SessionConflict, SessionError, SessionNotFound
from .base import Message, Role, Session, SessionStore

TTL_ATTRIBUTE = "expires_at"
SEQ_DIGITS = 10
_MSG_LAST = "MSG#" + "9" * SEQ_DIGITS
APPEND_ATTEMPTS = 8  # seqs an append tries before giving up (a taken seq is rare on DynamoDB)
MAX_SEALS = 1000  # hole markers one compression writes at most
_RETRYABLE_CODES = {
    "ProvisionedThroughputExceededException",
    "ThrottlingException",
    "RequestLimitExceeded",
    "InternalServerError",
    "ServiceUnavailable",
    "TransactionConflictException",
    "LimitExceededException",
}


def session_pk(tenant: str, session_id: str) -> str:
    return f"TENANT#{tenant}#SESSION#{session_id}"


def user_pk(tenant: str, user: str) -> str:
    return f"TENANT#{tenant}#USER#{user}"


def message_sk(seq: int) -> str:
    return f"MSG#{seq:0{SEQ_DIGITS}d}"


def _s(v: str) -> dict[str, str]:
    return {"S": v}


def _n(v: float) -> dict[str, str]:
    return {"N": repr(v) if isinstance(v, float) else str(v)}


def _num(item: dict[str, Any], key: str, default: float = 0) -> float:
    return float(item[key]["N"]) if key in item else default


def _str(item: dict[str, Any], key: str) -> str | None:
    return item[key]["S"] if key in item and "S" in item[key] else None


def _seq_of(item: dict[str, Any]) -> int:
    return int(item["sk"]["S"][len("MSG#"):])


def _message_of(item: dict[str, Any]) -> Message:
    return Message(
        seq=int(_num(item, "seq")), role=_str(item, "role"), content=_str(item, "content") or "",  # type: ignore[arg-type]
        created_at=_num(item, "created_at"), name=_str(item, "name"),
    )


def _is_message(item: dict[str, Any]) -> bool:
    return _str(item, "type") != "hole"


class DynamoDBSessionStore(SessionStore):
    backend = "dynamodb"

    def __init__(
        self,
        table_name: str,
        *,
        client: Any = None,
        region: str | None = None,
        endpoint_url: str | None = None,
        **options: Any,
    ) -> None:
        super().__init__(**options)
        if not table_name:
            raise ConfigError("the DynamoDB session table name is empty; set CAIRN_SESSIONS_TABLE")
        self.table = table_name
        if client is None:
            import boto3
            from botocore.config import Config

            cfg = Config(retries={"max_attempts": 4, "mode": "adaptive"}, connect_timeout=3, read_timeout=10)
            client = boto3.client("dynamodb", region_name=region, endpoint_url=endpoint_url, config=cfg)
        self.client = client

    # errors ----------------------------------------------------------------------------

    def _map_error(self, exc: Exception, op: str, session_id: str) -> CairnError:
        where = f"session {session_id!r}: {op} on DynamoDB table {self.table!r}"
        code = _error_code(exc)
        if code == "ResourceNotFoundException":
            return SessionError(f"{where}: the table does not exist; create it (cairn.sessions.dynamodb.create_table)")
        if code in _RETRYABLE_CODES:
            return SessionError(f"{where}: {code}; retry", retryable=True)
        if code is not None:
            return SessionError(f"{where}: {code}: {exc}")
        name = type(exc).__name__
        if name in {"EndpointConnectionError", "ConnectTimeoutError", "ReadTimeoutError", "ConnectionClosedError"}:
            return SessionError(f"{where}: {name}; retry", retryable=True)
        return SessionError(f"{where}: {name}: {exc}")

    # backend methods -----------------------------------------------------------------

    def _create(self, session: Session) -> None:
        item = {
            "pk": _s(session_pk(session.tenant, session.id)),
            "sk": _s("META"),
            "type": _s("session"),
            "tenant": _s(session.tenant),
            "session_id": _s(session.id),
            "created_at": _n(session.created_at),
            "updated_at": _n(session.updated_at),
            TTL_ATTRIBUTE: _n(math.ceil(session.expires_at)),
            "summary": _s(""),
            "summarized_through": _n(0),
            "last_seq": _n(0),
            "committed_through": _n(0),
        }
        if session.user:
            item["user"] = _s(session.user)
        try:
            self.client.put_item(TableName=self.table, Item=item, ConditionExpression="attribute_not_exists(pk)")
        except Exception as exc:
            if _error_code(exc) == "ConditionalCheckFailedException":
                raise SessionConflict(f"session {session.id!r} already exists; create again for a new id") from None
            raise
        if session.user:  # the user's listing (a lost write here hides the session from the list only)
            self.client.put_item(TableName=self.table, Item={
                "pk": _s(user_pk(session.tenant, session.user)), "sk": _s(f"SESSION#{session.id}"),
                "type": _s("user_session"), "session_id": _s(session.id), "created_at": _n(session.created_at),
                TTL_ATTRIBUTE: _n(math.ceil(session.expires_at)),
            })

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

    def _load(self, tenant: str, session_id: str) -> Session:
        item = self.client.get_item(
            TableName=self.table, Key={"pk": _s(session_pk(tenant, session_id)), "sk": _s("META")}, ConsistentRead=True
        ).get("Item")
        if not item or _num(item, TTL_ATTRIBUTE) <= time.time():
            raise self.not_found(session_id)
        return Session(
            id=session_id,
            tenant=tenant,
            user=_str(item, "user"),
            created_at=_num(item, "created_at"),
            updated_at=_num(item, "updated_at"),
            expires_at=_num(item, TTL_ATTRIBUTE),
            summary=_str(item, "summary") or "",
            summarized_through=int(_num(item, "summarized_through")),
            last_seq=int(_num(item, "last_seq")),
            committed_through=int(_num(item, "committed_through")),
        )

    def _mark_committed(self, session: Session, through: int, now: float) -> int:
        try:
            self.client.update_item(
                TableName=self.table,
                Key={"pk": _s(session_pk(session.tenant, session.id)), "sk": _s("META")},
                UpdateExpression="SET committed_through = :c",
                ConditionExpression="attribute_exists(pk) AND (attribute_not_exists(committed_through) OR committed_through < :c)",
                ExpressionAttributeValues={":c": _n(through)},
            )
        except Exception as exc:
            if _error_code(exc) != "ConditionalCheckFailedException":
                raise
            return self._load(session.tenant, session.id).committed_through  # already further (or gone)
        return through

    def _items(
        self, pk: str, after_seq: int, *, through: int | None = None, newest_first: bool = False,
        page: int | None = None, keys_only: bool = False,
    ) -> Iterator[dict[str, Any]]:
        """The ``MSG#`` items (messages and hole markers) with ``after_seq < seq <= through``, page by page."""
        hi = message_sk(through) if through is not None else _MSG_LAST
        args: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :pk AND sk BETWEEN :lo AND :hi",
            "ExpressionAttributeValues": {":pk": _s(pk), ":lo": _s(message_sk(after_seq + 1)), ":hi": _s(hi)},
            "ConsistentRead": True,
            "ScanIndexForward": not newest_first,
        }
        if keys_only:
            args.update(ProjectionExpression="pk, sk, #type", ExpressionAttributeNames={"#type": "type"})
        if page is not None:
            args["Limit"] = page
        while True:
            out = self.client.query(**args)
            yield from out.get("Items", [])
            if "LastEvaluatedKey" not in out:
                return
            args["ExclusiveStartKey"] = out["LastEvaluatedKey"]

    def _messages(self, tenant: str, session_id: str, after_seq: int, newest: int | None = None) -> list[Message]:
        pk = session_pk(tenant, session_id)
        if newest is None:
            items = [i for i in self._items(pk, after_seq) if _is_message(i)]
        else:
            items = []
            if newest > 0:
                for i in self._items(pk, after_seq, newest_first=True, page=newest):
                    if _is_message(i):  # hole markers do not count
                        items.append(i)
                        if len(items) == newest:
                            break
            items.reverse()
        return [_message_of(i) for i in items]

    def _get_prefetched(self, tenant: str, session_id: str) -> dict[str, Any] | None:
        item = self.client.get_item(
            TableName=self.table, Key={"pk": _s(session_pk(tenant, session_id)), "sk": _s("PREFETCH")}, ConsistentRead=True
        ).get("Item")
        return json.loads(item["context"]["S"]) if item else None

    def _set_prefetched(self, session: Session, context: dict[str, Any], now: float, seq: int | None) -> bool:
        item = {
            "pk": _s(session_pk(session.tenant, session.id)),
            "sk": _s("PREFETCH"),
            "type": _s("prefetch"),
            "context": _s(json.dumps(context, ensure_ascii=False)),
            "updated_at": _n(now),
            TTL_ATTRIBUTE: _n(math.ceil(session.expires_at)),
        }
        if seq is None:
            self.client.put_item(TableName=self.table, Item=item)
            return True
        try:  # only over the context of an earlier message: a late or redelivered prefetch loses
            self.client.put_item(TableName=self.table, Item={**item, "seq": _n(seq)},
                                 ConditionExpression="attribute_not_exists(#seq) OR #seq < :seq",
                                 ExpressionAttributeNames={"#seq": "seq"}, ExpressionAttributeValues={":seq": _n(seq)})
        except Exception as exc:
            if _error_code(exc) == "ConditionalCheckFailedException":
                return False
            raise
        return True

    def _prefetched_seq(self, tenant: str, session_id: str) -> int:
        item = self.client.get_item(
            TableName=self.table, Key={"pk": _s(session_pk(tenant, session_id)), "sk": _s("PREFETCH")},
            ConsistentRead=True, ProjectionExpression="#seq", ExpressionAttributeNames={"#seq": "seq"},
        ).get("Item")
        return int(item["seq"]["N"]) if item and "seq" in item else 0

    def _commit_summary(self, session: Session, summary: str, folded: Sequence[Message], now: float) -> None:
        pk = session_pk(session.tenant, session.id)
        through = folded[-1].seq
        self._seal(session, folded, now)
        try:
            self.client.update_item(
                TableName=self.table,
                Key={"pk": _s(pk), "sk": _s("META")},
                UpdateExpression="SET summary = :s, summarized_through = :new, updated_at = :now",
                ConditionExpression="attribute_exists(pk) AND summarized_through = :old",
                ExpressionAttributeValues={
                    ":s": _s(summary), ":new": _n(through), ":old": _n(session.summarized_through), ":now": _n(now)
                },
            )
        except Exception as exc:
            if _error_code(exc) == "ConditionalCheckFailedException":
                raise SessionConflict(f"session {session.id!r}: another compression committed first; retry") from None
            raise
        # the range is sealed: it holds the folded messages (dropped now) and hole markers (kept)
        self._batch_delete([{"pk": _s(pk), "sk": _s(message_sk(m.seq))} for m in folded])

    def _seal(self, session: Session, folded: Sequence[Message], now: float) -> None:
        """Make the seqs ``summarized_through + 1 .. folded[-1].seq`` hold exactly ``folded`` plus
        hole markers, so that no message can be stored there any more; SessionConflict if a
        message got there first (the summary would not contain it)."""
        pk = session_pk(session.tenant, session.id)
        after, through = session.summarized_through, folded[-1].seq
        wanted = {m.seq for m in folded}
        present: set[int] = set()
        for item in self._items(pk, after, through=through, keys_only=True):
            seq = _seq_of(item)
            if _is_message(item) and seq not in wanted:
                raise SessionConflict(
                    f"session {session.id!r}: message seq {seq} was stored after the compression read the session; retry"
                )
            present.add(seq)
        if not wanted <= present:
            raise SessionConflict(f"session {session.id!r}: another compression committed first; retry")
        empty = (through - after) - len(present)
        if empty > MAX_SEALS:
            raise SessionError(
                f"session {session.id!r}: compress: {empty} seqs in {after + 1}..{through} hold no message (was the "
                f"counter last_seq moved forward by hand?); compression seals at most {MAX_SEALS} empty seqs"
            )
        for seq in range(after + 1, through + 1):
            if seq in present:
                continue
            try:
                self.client.put_item(
                    TableName=self.table,
                    Item={
                        "pk": _s(pk),
                        "sk": _s(message_sk(seq)),
                        "type": _s("hole"),
                        "tenant": _s(session.tenant),
                        "session_id": _s(session.id),
                        "seq": _n(seq),
                        "created_at": _n(now),
                        TTL_ATTRIBUTE: _n(math.ceil(session.expires_at)),
                    },
                    ConditionExpression="attribute_not_exists(pk)",
                )
            except Exception as exc:
                if _error_code(exc) == "ConditionalCheckFailedException":
                    raise SessionConflict(
                        f"session {session.id!r}: message seq {seq} was stored while the compression sealed it; retry"
                    ) from None
                raise

    def _list(self, tenant: str, user: str, limit: int) -> list[Session]:
        args: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": _s(user_pk(tenant, user))},
        }
        ids: list[str] = []
        while len(ids) < limit:
            page = self.client.query(**args)
            ids += [_str(i, "session_id") or "" for i in page.get("Items", []) if _num(i, TTL_ATTRIBUTE) > time.time()]
            if "LastEvaluatedKey" not in page:
                break
            args["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        found = []
        for sid in ids[:limit]:
            try:
                found.append(self._load(tenant, sid))
            except SessionNotFound:  # deleted or expired since: the listing item goes with its TTL
                continue
        return found

    def _delete(self, tenant: str, session_id: str) -> bool:
        pk = session_pk(tenant, session_id)
        args: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": _s(pk)},
            "ProjectionExpression": "pk, sk, #u",
            "ExpressionAttributeNames": {"#u": "user"},
        }
        keys: list[dict] = []
        while True:
            page = self.client.query(**args)
            keys.extend(page.get("Items", []))
            if "LastEvaluatedKey" not in page:
                break
            args["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        owners = [_str(k, "user") for k in keys if k["sk"]["S"] == "META"]
        if owners and owners[0]:
            keys.append({"pk": _s(user_pk(tenant, owners[0])), "sk": _s(f"SESSION#{session_id}")})
        self._batch_delete(keys)
        return bool(owners)

    def _batch_delete(self, keys: list[dict]) -> None:
        for start in range(0, len(keys), 25):
            requests = [{"DeleteRequest": {"Key": {"pk": k["pk"], "sk": k["sk"]}}} for k in keys[start : start + 25]]
            for attempt in range(8):
                out = self.client.batch_write_item(RequestItems={self.table: requests})
                requests = out.get("UnprocessedItems", {}).get(self.table, [])
                if not requests:
                    break
                time.sleep(0.05 * 2**attempt)
            else:
                raise SessionError(f"DynamoDB table {self.table!r}: {len(requests)} deletes left unprocessed; retry", retryable=True)


def _error_code(exc: Exception) -> str | None:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        return response.get("Error", {}).get("Code")
    return None


def create_table(client: Any, table_name: str, *, wait: bool = True) -> dict[str, Any]:
    """Create the sessions table: pk/sk strings, on-demand, TTL on ``expires_at``, a NEW_IMAGE stream.

    Idempotent: an existing table is left as it is (its TTL is switched on if it was off).
    """
    try:
        client.create_table(
            TableName=table_name,
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "S"},
            ],
            BillingMode="PAY_PER_REQUEST",
            StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"},
        )
    except Exception as exc:
        if _error_code(exc) != "ResourceInUseException":
            raise
    if wait:
        client.get_waiter("table_exists").wait(TableName=table_name, WaiterConfig={"Delay": 1, "MaxAttempts": 60})
    ttl = client.describe_time_to_live(TableName=table_name)["TimeToLiveDescription"]
    if ttl.get("TimeToLiveStatus") not in ("ENABLED", "ENABLING"):
        client.update_time_to_live(
            TableName=table_name, TimeToLiveSpecification={"Enabled": True, "AttributeName": TTL_ATTRIBUTE}
        )
    return client.describe_table(TableName=table_name)["Table"]
