"""DynamoDB sessions: one table, single-table design, conditional writes, TTL, a stream.

The item layout, the TTL and the stream: :mod:`cairn.ports.sessions.dynamodb_items`.

Appending (two writes, and what an append guarantees): :mod:`cairn.ports.sessions.dynamodb_appends`.

Compression folds the oldest messages into the summary, but a message with a lower seq can still
be in flight (allocated, not yet put). So before the conditional commit of
``summarized_through`` it *seals* the folded range: every seq in it that holds no message gets a
hole marker (``type = hole``, put with ``attribute_not_exists(pk)``). A late writer's put then
fails and it takes a new seq above the summary; if its put landed first, the seal sees a message
the summary lacks and the compression retries (:class:`SessionConflict`). Hole markers stay when
the folded messages are deleted (they go with the session), so a seq below the summary can never
be filled later. One compression writes at most ``MAX_SEALS`` markers: a wider stretch of empty
seqs (a counter moved forward by hand) stops compression with a clear error.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator, Sequence
from typing import Any

from cairn.core.errors import CairnError, ConfigError, SessionConflict, SessionError, SessionNotFound
from cairn.ports.sessions.base import Message, Session
from cairn.ports.sessions.dynamodb_appends import DynamoDBAppends
from cairn.ports.sessions.dynamodb_items import (
    _MSG_LAST,
    _RETRYABLE_CODES,
    TTL_ATTRIBUTE,  # noqa: F401 - re-exported
    _error_code,
    _is_message,
    _message_of,
    _n,
    _num,
    _s,
    _seq_of,
    _str,
    create_table,  # noqa: F401 - re-exported
    message_sk,
    session_pk,  # noqa: F401 - re-exported
    user_pk,
)

MAX_SEALS = 1000  # hole markers one compression writes at most

class DynamoDBSessionStore(DynamoDBAppends):
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
            return SessionError(f"{where}: the table does not exist; create it (cairn.ports.sessions.dynamodb.create_table)")
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
