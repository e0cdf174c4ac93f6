"""Lambda: ingest uploaded content (S3 ObjectCreated on ``ingest/{tenant}/...json``).

Each uploaded object is an ingest payload (``cairn.ingest.IngestPayload``: ``{"root_uri",
"documents": [{"path", "text", "title"?, "metadata"?}]}``). The tenant is the second segment of
the object key; uploaders get ``s3:PutObject`` only on ``ingest/${aws:PrincipalTag/tenant}/*``, so
the key prefix is the caller's credential, never a field of the payload. The tree under
``root_uri`` is built (L0/L1/L2), embedded and upserted; full bodies go to the content bucket.

A bad payload is reported (and not retried); a retryable backend failure raises
``CairnRetryableError`` so Lambda's asynchronous retries try the object again.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import unquote_plus

from cairn.errors import CairnError, RequestError
from cairn.observability.logging import get_logger
from cairn.services import Services
from cairn.workflow import task_errors
from pydantic import BaseModel, Field

log = get_logger("cairn.functions.ingest")
services = Services()  # built on the first invocation, then reused while the container is warm
KEY_PREFIX = "ingest/"
MAX_OBJECT_BYTES = 50_000_000


class ObjectReport(BaseModel):
    key: str
    tenant: str | None = None
    root_uri: str | None = None
    documents: int = 0
    records: int = 0
    written: int = 0
    removed: int = 0
    rejected: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    error: dict[str, Any] | None = None


class IngestResponse(BaseModel):
    objects: list[ObjectReport] = Field(default_factory=list)


def tenant_of_key(key: str) -> str:
    parts = key.split("/")
    if len(parts) < 3 or parts[0] + "/" != KEY_PREFIX or not parts[1]:
        raise RequestError(f"object key {key!r} is not under {KEY_PREFIX}<tenant>/; upload to {KEY_PREFIX}<tenant>/<name>.json")
    return parts[1]


def _read(bucket: str, key: str) -> Any:
    obj = services.s3.get_object(Bucket=bucket, Key=key)
    if int(obj.get("ContentLength") or 0) > MAX_OBJECT_BYTES:
        raise RequestError(f"s3://{bucket}/{key} is larger than {MAX_OBJECT_BYTES:,} bytes; split it")
    try:
        return json.loads(obj["Body"].read())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RequestError(f"s3://{bucket}/{key} is not a JSON ingest payload: {exc}") from None


def ingest_object(bucket: str, key: str) -> ObjectReport:
    from cairn.ingest import Ingestor, IngestPayload

    report = ObjectReport(key=key)
    try:
        report.tenant = tenant_of_key(key)
        payload = IngestPayload.parse(_read(bucket, key))
        report.root_uri = payload.root_uri
        ingestor = services.cairn(report.tenant).ingestor()
        done = ingestor.ingest(payload.to_documents(), payload.root_uri)
    except CairnError as exc:
        if exc.retryable:
            raise
        log.warning("ingest rejected", key=key, error=exc.code, message=exc.message)
        report.error = exc.to_dict()
        return report
    report.documents, report.records, report.written, report.removed = done.documents, done.records, done.written, done.removed
    report.rejected = [f"{r.source}: {r.reason}" for r in done.rejected]
    report.warnings = list(done.warnings)
    return report


def handler(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    response = IngestResponse()
    with task_errors():
        for record in event.get("Records") or []:
            s3 = record.get("s3") or {}
            bucket = (s3.get("bucket") or {}).get("name", "")
            key = unquote_plus((s3.get("object") or {}).get("key", ""))
            response.objects.append(ingest_object(bucket, key))
    return response.model_dump()
