"""DynamoDB sessions: one table, single-table design, conditional writes, TTL, a stream.

Item layout (every item of a session shares its partition key)::

    pk = TENANT#<tenant>#SESSION#<id>
    sk = META                 type=session   user, created_at, updated_at, expires_at,
                                             summary, summarized_through, last_seq (the counter)
    sk = MSG#<seq:010d>       type=message   tenant, session_id, seq, role, content, created_at, expires_at
    sk = PREFETCH             type=prefetch  context (FindResult JSON), updated_at, expires_at

Appending is two conditional writes: ``ADD last_seq 1`` on META (condition: the session exists
and has not expired; DynamoDB serialises updates of one item, so every caller gets a distinct
seq), then a put of ``MSG#<seq>`` with ``attribute_not_exists(pk)`` (a message is never
overwritten). 100 concurrent appends therefore store 100 messages with seq 1..100. If a writer
dies between the two writes, its seq stays unused: a hole, never a duplicate or a reorder.

TTL: ``expires_at`` (epoch seconds, a Number) is the table's TTL attribute and every item of a
session carries the same value, so the session expires as a whole. DynamoDB deletes expired
items lazily (up to ~48 h late): reads treat an expired META as "not found".

Stream: the table's stream (``NEW_IMAGE``) carries every new message as an INSERT whose image has
``type = message`` and the full message (tenant, session_id, seq, role, content); a consumer
subscribes with the Lambda event filter
``{"eventName": ["INSERT"], "dynamodb": {"NewImage": {"type": {"S": ["message"]}}}}``.
"""

from __future__ import annotations

import json
import math
import time
from typing import Any

from ..errors import CairnError, ConfigError, SessionConflict, SessionError
from .base import Message, Role, Session, SessionStore

TTL_ATTRIBUTE = "expires_at"
SEQ_DIGITS = 10
_MSG_LAST = "MSG#" + "9" * SEQ_DIGITS
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
            raise ConfigError("the DynamoDB session table name is empty; set CAIRN_SESSION_TABLE")
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
        }
        if session.user:
            item["user"] = _s(session.user)
        try:
            self.client.put_item(TableName=self.table, Item=item, ConditionExpression="attribute_not_exists(pk)")
        except Exception as exc:
            if _error_code(exc) == "ConditionalCheckFailedException":
                raise SessionConflict(f"session {session.id!r} already exists; create again for a new id") from None
            raise

    def _append(self, tenant: str, session_id: str, role: Role, content: str, now: float) -> Message:
        pk = session_pk(tenant, session_id)
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
        meta = out["Attributes"]
        seq = int(_num(meta, "last_seq"))
        try:
            self.client.put_item(
                TableName=self.table,
                Item={
                    "pk": _s(pk),
                    "sk": _s(message_sk(seq)),
                    "type": _s("message"),
                    "tenant": _s(tenant),
                    "session_id": _s(session_id),
                    "seq": _n(seq),
                    "role": _s(role),
                    "content": _s(content),
                    "created_at": _n(now),
                    TTL_ATTRIBUTE: meta[TTL_ATTRIBUTE],
                },
                ConditionExpression="attribute_not_exists(pk)",
            )
        except Exception as exc:
            if _error_code(exc) == "ConditionalCheckFailedException":
                raise SessionError(f"session {session_id!r}: message seq {seq} already exists; the counter was reset") from None
            raise
        return Message(seq=seq, role=role, content=content, created_at=now)

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
        )

    def _query_messages(self, pk: str, after_seq: int, newest: int | None, keys_only: bool = False) -> list[dict]:
        args: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :pk AND sk BETWEEN :lo AND :hi",
            "ExpressionAttributeValues": {":pk": _s(pk), ":lo": _s(message_sk(after_seq + 1)), ":hi": _s(_MSG_LAST)},
            "ConsistentRead": True,
        }
        if keys_only:
            args["ProjectionExpression"] = "pk, sk"
        if newest is not None:
            args.update(ScanIndexForward=False, Limit=newest)
            return list(reversed(self.client.query(**args).get("Items", [])))
        items: list[dict] = []
        while True:
            page = self.client.query(**args)
            items.extend(page.get("Items", []))
            if "LastEvaluatedKey" not in page:
                return items
            args["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def _messages(self, tenant: str, session_id: str, after_seq: int, newest: int | None = None) -> list[Message]:
        items = self._query_messages(session_pk(tenant, session_id), after_seq, newest)
        return [
            Message(
                seq=int(_num(i, "seq")), role=_str(i, "role"), content=_str(i, "content") or "",  # type: ignore[arg-type]
                created_at=_num(i, "created_at"),
            )
            for i in items
        ]

    def _get_prefetched(self, tenant: str, session_id: str) -> dict[str, Any] | None:
        item = self.client.get_item(
            TableName=self.table, Key={"pk": _s(session_pk(tenant, session_id)), "sk": _s("PREFETCH")}, ConsistentRead=True
        ).get("Item")
        return json.loads(item["context"]["S"]) if item else None

    def _set_prefetched(self, session: Session, context: dict[str, Any], now: float) -> None:
        self.client.put_item(
            TableName=self.table,
            Item={
                "pk": _s(session_pk(session.tenant, session.id)),
                "sk": _s("PREFETCH"),
                "type": _s("prefetch"),
                "context": _s(json.dumps(context, ensure_ascii=False)),
                "updated_at": _n(now),
                TTL_ATTRIBUTE: _n(math.ceil(session.expires_at)),
            },
        )

    def _commit_summary(self, session: Session, summary: str, through: int, now: float) -> None:
        pk = session_pk(session.tenant, session.id)
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
        folded = [i for i in self._query_messages(pk, session.summarized_through, None, keys_only=True)
                  if i["sk"]["S"] <= message_sk(through)]
        self._batch_delete(folded)

    def _delete(self, tenant: str, session_id: str) -> bool:
        pk = session_pk(tenant, session_id)
        args: dict[str, Any] = {
            "TableName": self.table,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": _s(pk)},
            "ProjectionExpression": "pk, sk",
        }
        keys: list[dict] = []
        while True:
            page = self.client.query(**args)
            keys.extend(page.get("Items", []))
            if "LastEvaluatedKey" not in page:
                break
            args["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        self._batch_delete(keys)
        return any(k["sk"]["S"] == "META" for k in keys)

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
