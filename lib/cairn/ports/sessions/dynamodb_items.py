"""The DynamoDB sessions table: its item layout, the encoding of its attributes, and the table itself.

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

TTL: ``expires_at`` (epoch seconds, a Number) is the table's TTL attribute and every item of a
session carries the same value, so the session expires as a whole. DynamoDB deletes expired
items lazily (up to ~48 h late): reads treat an expired META as "not found".

Stream: the table's stream (``NEW_IMAGE``) carries every new message as an INSERT whose image has
``type = message`` and the full message (tenant, session_id, seq, role, content); hole markers
(``type = hole``) are INSERTs too, so a consumer subscribes with the Lambda event filter
``{"eventName": ["INSERT"], "dynamodb": {"NewImage": {"type": {"S": ["message"]}}}}``.
"""

from __future__ import annotations

from typing import Any

from cairn.ports.sessions.base import Message

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
