"""Lambda: ingest uploaded content (an S3 "Object Created" under ``ingest/{tenant}/``, delivered by
EventBridge or as an S3 notification).

Two kinds of upload, told apart by the key's suffix:

* ``ingest/{tenant}/<name>.json`` is an ingest payload (``cairn.engine.ingest.IngestPayload``:
  ``{"root_uri", "documents": [{"path", "text", "title"?, "metadata"?}]}``); the tree under
  ``root_uri`` is made to hold exactly those documents (L0/L1/L2), embedded and upserted (:mod:`cairn.app.uploads` does the work).
* any other key is one raw document (``ingest/acme/handbook/policy.pdf``), parsed by the parser
  for its extension exactly as a file in a folder (:mod:`cairn.engine.ingest.s3`; ``.jsonl`` holds
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

from typing import Any
from urllib.parse import unquote_plus

from cairn.app.services import Services
from cairn.app.uploads import IngestResponse, ingest_object
from cairn.app.workflow import task_errors
from cairn.core.logging import get_logger

log = get_logger("cairn.functions.ingest")
services = Services()  # built on the first invocation, then reused while the container is warm


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
            response.objects.append(ingest_object(services, bucket, key))
    return response.model_dump()
