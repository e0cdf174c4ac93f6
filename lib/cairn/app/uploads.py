"""Uploaded content ingested: one S3 object under ``ingest/{tenant}/`` into its tenant's tree (the
ingest function's work; the function only reads the event).

* ``ingest/{tenant}/<name>.json`` is an ingest payload (:class:`cairn.engine.ingest.IngestPayload`);
  the tree under its ``root_uri`` is made to hold exactly those documents.
* any other key is one raw document, parsed by the parser for its extension and upserted at
  ``cairn://resources/<the key after the tenant>``; its siblings stay.

The tenant is the second segment of the object key, never a field of the payload. A bad payload
or document is reported in the object's report (and not retried); a retryable backend failure
raises, so that Lambda's asynchronous retries try the object again.
"""

from __future__ import annotations

import json
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from cairn.core.errors import CairnError, IngestError, RequestError, Unavailable
from cairn.core.logging import get_logger
from cairn.core.retry import AwsError
from cairn.ports.observability.usage import record_usage

if TYPE_CHECKING:
    from cairn.app.parts import AppParts

log = get_logger("cairn.functions.ingest")
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


def _read(services: AppParts, bucket: str, key: str) -> Any:
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


def _ingest_document(services: AppParts, ingestor: Any, bucket: str, key: str, report: ObjectReport) -> Any:
    """One raw document (any key but a ``.json`` payload), parsed by its extension and upserted at
    ``DOCUMENTS_ROOT/<the key after the tenant>``; None when it was not ingested (``report`` says why)."""
    from cairn.core import uri as uris
    from cairn.engine.ingest import split_items
    from cairn.engine.ingest.parsers.isolation import IsolatedRunner
    from cairn.engine.ingest.s3 import read_object

    *folders, name = key.split("/")[2:]
    report.root_uri = uris.join(DOCUMENTS_ROOT, *folders)
    with IsolatedRunner(ingestor.limits) if ingestor.isolate_parsers else nullcontext() as runner:
        docs, rejected = split_items(read_object(services.s3, bucket, key, (name,), limits=ingestor.limits, runner=runner))
    report.rejected = [f"{r.source}: {r.reason}" for r in rejected]
    if not docs:
        reason = "; ".join(r.reason for r in rejected) or "it holds no document"
        raise IngestError(f"s3://{bucket}/{key} was not ingested: {reason}")
    return ingestor.upsert(docs, report.root_uri)


def ingest_object(services: AppParts, bucket: str, key: str) -> ObjectReport:
    """One uploaded object ingested into its tenant's tree; the report says what was written, or why nothing was."""
    from cairn.engine.ingest import IngestPayload

    report = ObjectReport(key=key)
    try:
        report.tenant = tenant_of_key(key)
        if key.endswith("/"):  # a "folder" made in the console: nothing to read
            report.warnings.append("a folder marker (the key ends with '/'); nothing to ingest")
            return report
        if key.lower().endswith(PAYLOAD_SUFFIX):
            payload = IngestPayload.parse(_read(services, bucket, key))
            report.root_uri = payload.root_uri
            ingestor = services.pipeline(report.tenant).ingestor()
            done = ingestor.ingest(payload.to_documents(), payload.root_uri)
        else:
            done = _ingest_document(services, services.pipeline(report.tenant).ingestor(), bucket, key, report)
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
