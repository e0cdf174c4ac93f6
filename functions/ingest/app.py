"""Lambda: ingest uploaded content (an S3 "Object Created" under ``ingest/{tenant}/``, delivered by
EventBridge or as an S3 notification).

Two kinds of upload, told apart by the key's suffix:

* ``ingest/{tenant}/<name>.json`` is an ingest payload (``cairn.ingest.IngestPayload``:
  ``{"root_uri", "documents": [{"path", "text", "title"?, "metadata"?}]}``); the tree under
  ``root_uri`` is made to hold exactly those documents (L0/L1/L2), embedded and upserted.
* any other key is one raw document (``ingest/acme/handbook/policy.pdf``), parsed by the parser
  for its extension exactly as a file in a folder (:mod:`cairn.ingest.s3`; ``.jsonl`` holds
  documents, as in a folder) and added with ``Ingestor.upsert`` at
  ``cairn://resources/<the key after the tenant>`` (``cairn://resources/handbook/policy.pdf``);
  its siblings stay, and the folders above it are re-summarised. Uploading it again replaces it
  (unchanged content is not re-embedded). A document that cannot be read (unsupported type, too
  large, unparseable) is reported in ``rejected`` and ``error``, and nothing changes.

The tenant is the second segment of the object key; uploaders get ``s3:PutObject`` only on
``ingest/${aws:PrincipalTag/tenant}/*``, so the key prefix is the caller's credential, never a
field of the payload. Full bodies go to the content bucket.

A bad payload or document is reported (and not retried); a retryable backend failure raises
``CairnRetryableError`` so Lambda's asynchronous retries try the object again.
"""

from __future__ import annotations

import json
from contextlib import nullcontext
from typing import Any
from urllib.parse import unquote_plus

from pydantic import BaseModel, Field

from cairn.errors import CairnError, IngestError, RequestError, Unavailable
from cairn.observability.logging import get_logger
from cairn.observability.usage import record_usage
from cairn.retry import AwsError
from cairn.services import Services
from cairn.workflow import task_errors

log = get_logger("cairn.functions.ingest")
services = Services()  # built on the first invocation, then reused while the container is warm
KEY_PREFIX = "ingest/"
MAX_OBJECT_BYTES = 50_000_000
PAYLOAD_SUFFIX = ".json"
DOCUMENTS_ROOT = "cairn://resources"  # a raw document goes to DOCUMENTS_ROOT/<the key after the tenant>


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
        raise RequestError(f"object key {key!r} is not under {KEY_PREFIX}<tenant>/; upload to {KEY_PREFIX}<tenant>/<name>.json "
                           f"(a payload) or {KEY_PREFIX}<tenant>/<folder>/<document> (a PDF, a Markdown file, ...)")
    return parts[1]


def _read(bucket: str, key: str) -> Any:
    try:
        obj = services.s3.get_object(Bucket=bucket, Key=key)
        if int(obj.get("ContentLength") or 0) > MAX_OBJECT_BYTES:
            raise RequestError(f"s3://{bucket}/{key} is larger than {MAX_OBJECT_BYTES:,} bytes; split it")
        raw = obj["Body"].read()
    except CairnError:
        raise
    except Exception as exc:  # botocore: a deleted object is reported, a throttled read retried
        aws = AwsError.of(exc)
        if aws.retryable or not aws.code:
            raise Unavailable(f"s3://{bucket}/{key} could not be read now ({aws.code or type(exc).__name__}); retrying") from None
        raise RequestError(f"s3://{bucket}/{key} could not be read: {aws.code} {aws.message}".strip()) from None
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        reason = "it is nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise RequestError(f"s3://{bucket}/{key} is not a JSON ingest payload: {reason}") from None


def _ingest_document(ingestor: Any, bucket: str, key: str, report: ObjectReport) -> Any:
    """One raw document (any key but a ``.json`` payload), parsed by its extension and upserted at
    ``DOCUMENTS_ROOT/<the key after the tenant>``; None when it was not ingested (``report`` says why)."""
    from cairn import uri as uris
    from cairn.ingest import split_items
    from cairn.ingest.parsers.isolation import IsolatedRunner
    from cairn.ingest.s3 import read_object

    *folders, name = key.split("/")[2:]
    report.root_uri = uris.join(DOCUMENTS_ROOT, *folders)
    with IsolatedRunner(ingestor.limits) if ingestor.isolate_parsers else nullcontext() as runner:
        docs, rejected = split_items(read_object(services.s3, bucket, key, (name,), limits=ingestor.limits, runner=runner))
    report.rejected = [f"{r.source}: {r.reason}" for r in rejected]
    if not docs:
        reason = "; ".join(r.reason for r in rejected) or "it holds no document"
        raise IngestError(f"s3://{bucket}/{key} was not ingested: {reason}")
    return ingestor.upsert(docs, report.root_uri)


def ingest_object(bucket: str, key: str) -> ObjectReport:
    from cairn.ingest import IngestPayload

    report = ObjectReport(key=key)
    try:
        report.tenant = tenant_of_key(key)
        if key.endswith("/"):  # a "folder" made in the console: nothing to read
            report.warnings.append("a folder marker (the key ends with '/'); nothing to ingest")
            return report
        if key.lower().endswith(PAYLOAD_SUFFIX):
            payload = IngestPayload.parse(_read(bucket, key))
            report.root_uri = payload.root_uri
            ingestor = services.cairn(report.tenant).ingestor()
            done = ingestor.ingest(payload.to_documents(), payload.root_uri)
        else:
            done = _ingest_document(services.cairn(report.tenant).ingestor(), bucket, key, report)
    except CairnError as exc:
        if exc.retryable:
            raise
        log.warning("ingest rejected", key=key, error=exc.code, message=exc.message)
        report.error = exc.to_dict()
        return report
    report.documents, report.records, report.written, report.removed = done.documents, done.records, done.written, done.removed
    record_usage(report.tenant, "ingest_s3", documents=done.documents, records=done.records, embedded_texts=done.embedded,
                 written=done.written, removed=done.removed)  # + the embedder's and summarizer's tokens
    report.rejected += [f"{r.source}: {r.reason}" for r in done.rejected]
    report.warnings = list(done.warnings)
    return report


def objects_of(event: Any) -> list[tuple[str, str]]:
    """The (bucket, key) pairs of an S3 notification (``Records``) or an EventBridge "Object
    Created" event (``detail``); a malformed event yields none (it is logged, never retried)."""
    if not isinstance(event, dict):
        return []
    if isinstance(event.get("detail"), dict):
        detail = event["detail"]
        bucket, obj = detail.get("bucket"), detail.get("object")
        if isinstance(bucket, dict) and isinstance(obj, dict):
            return [(str(bucket.get("name", "")), str(obj.get("key", "")))]
        return []
    records = event.get("Records")
    if not isinstance(records, list):
        return []
    found = []
    for record in records:
        s3 = record.get("s3") if isinstance(record, dict) else None
        if isinstance(s3, dict) and isinstance(s3.get("bucket"), dict) and isinstance(s3.get("object"), dict):
            found.append((str(s3["bucket"].get("name", "")), unquote_plus(str(s3["object"].get("key", "")))))
    return found


def handler(event: Any, context: Any = None) -> dict[str, Any]:
    response = IngestResponse()
    objects = objects_of(event)
    if not objects:
        log.warning("ingest event holds no S3 object; skipped", event_type=type(event).__name__)
    with task_errors():
        for bucket, key in objects:
            response.objects.append(ingest_object(bucket, key))
    return response.model_dump()
