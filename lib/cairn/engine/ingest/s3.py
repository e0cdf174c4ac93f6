"""S3 sources: every object under ``s3://bucket/prefix``, parsed as a file in a folder would be.

The prefix is a folder: ``s3://docs/handbook`` reads ``handbook/policy.pdf`` and
``handbook/hr/leave.md`` (not ``handbook-old/...``), placed at ``policy.pdf`` and ``hr/leave.md``
below the ingest root; a prefix that names one object (``s3://docs/handbook/policy.pdf``) reads
that object alone, placed at its name. Each object is parsed by the parser for its key's
extension (:mod:`cairn.engine.ingest.parsers`; ``.json``/``.jsonl`` hold documents, as in a folder) and
carries ``metadata.source.uri`` (``s3://bucket/key``). Folder markers (keys ending in ``/``) and
hidden names (a segment starting with ``.``) are skipped silently, as in a folder.

Every other object that is not ingested is a :class:`~cairn.engine.ingest.sources.Rejected` with its
reason, and the run goes on: an unsupported type or an object past ``Limits.max_bytes`` is
reported from the listing, without a download; an object that cannot be parsed, that was
deleted meanwhile, that is archived (Glacier, not restored) or that the credentials may not read
(``s3:GetObject``) after it.

What stops the run (one :class:`~cairn.core.errors.CairnError` naming the bucket and prefix, and what
to do), before anything is written: the bucket does not exist, listing it is denied, there are
no credentials, or S3 cannot be reached (retryable) — a transient failure never makes a stored
document look deleted.

Up to ``DOWNLOADS`` objects are fetched at once (threads, one boto3 client) while the parser
reads the ones before them; items still come in listing order, and a failure that stops the run
stops it at the object where it happened.

Incremental as folders are: unchanged objects are downloaded and parsed again, but neither
embedded nor written (the tree compares content hashes); changed ones are re-embedded alone;
objects no longer under the prefix are removed. Downloads are not skipped by ETag: the tree is
built from every document's text, and a stored record does not keep the full body to rebuild it.
"""

from __future__ import annotations

import tempfile
from collections import deque
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from cairn.core.errors import CairnError, Forbidden, NotFound, RequestError, Unauthorized, Unavailable, UpstreamError
from cairn.core.retry import AwsError
from cairn.engine.ingest.parsers import parser_for
from cairn.engine.ingest.parsers.base import Limits
from cairn.engine.ingest.sources import JSON_SUFFIXES, MAX_JSON_BYTES, Document, Rejected, read_file, read_json_file

SCHEME = "s3://"
READ_CHUNK = 1 << 20
DOWNLOADS = 8  # objects fetched at once, ahead of the parser

# how S3 answers a listing (or a download) that cannot go on: the family, and what to do
_ERRORS: dict[str, tuple[type[CairnError], str]] = {
    "NoSuchBucket": (NotFound, "the bucket does not exist; check its name (s3://BUCKET/PREFIX)"),
    "AccessDenied": (Forbidden, "access denied; the credentials in use need s3:ListBucket on the bucket "
                                "and s3:GetObject on the objects under the prefix"),
    "AllAccessDisabled": (Forbidden, "all access to the bucket is disabled"),
    "InvalidAccessKeyId": (Unauthorized, "AWS does not know the access key in use; check AWS_PROFILE or "
                                         "AWS_ACCESS_KEY_ID"),
    "SignatureDoesNotMatch": (Unauthorized, "the secret key does not match the access key; check "
                                            "AWS_SECRET_ACCESS_KEY or the profile"),
    "ExpiredToken": (Unauthorized, "the AWS session has expired; sign in again (e.g. `aws sso login`)"),
    "InvalidToken": (Unauthorized, "the AWS session token is invalid; sign in again"),
    "PermanentRedirect": (RequestError, "the bucket is in another region; set AWS_REGION to the bucket's region"),
    "AuthorizationHeaderMalformed": (RequestError, "the bucket is in another region; set AWS_REGION to the "
                                                   "bucket's region"),
}
# why one object was not read (the run goes on); other codes are told as S3 tells them
_OBJECT_REASONS = {
    "NoSuchKey": "was deleted while the ingest ran",
    "AccessDenied": "access denied; the credentials in use need s3:GetObject on it",
    "InvalidObjectState": "is archived (S3 Glacier); restore it to ingest it",
}
NO_CREDENTIALS = ("no AWS credentials found; set AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
                  "or sign in (`aws configure`, `aws sso login`)")


def parse_s3_url(url: str) -> tuple[str, str]:
    """``s3://bucket/prefix`` → ``("bucket", "prefix")`` (the prefix may be empty: the whole bucket)."""
    if not url.startswith(SCHEME):
        raise RequestError(f"{url!r} is not an S3 location; write s3://BUCKET/PREFIX")
    bucket, _, prefix = url[len(SCHEME):].partition("/")
    if not bucket:
        raise RequestError(f"{url!r} names no bucket; write s3://BUCKET/PREFIX")
    return bucket, prefix


def s3_error(exc: BaseException, where: str) -> CairnError:
    """The cairn error for a botocore exception met while reading ``where`` (``s3://bucket/prefix``)."""
    from botocore.exceptions import NoCredentialsError, ParamValidationError, PartialCredentialsError

    if isinstance(exc, (NoCredentialsError, PartialCredentialsError)):
        return Unauthorized(f"cannot read {where}: {NO_CREDENTIALS}")
    if isinstance(exc, ParamValidationError):
        return RequestError(f"cannot read {where}: {exc}")
    aws = AwsError.of(exc)
    if aws.code in _ERRORS:
        family, advice = _ERRORS[aws.code]
        return family(f"cannot read {where}: {advice}")
    if aws.retryable or not aws.code:  # throttled, 5xx, or never reached (connection, timeout)
        return Unavailable(f"cannot read {where} now ({aws.code or type(exc).__name__}: {aws.message or exc}); "
                           "nothing was changed; try again")
    return UpstreamError(f"cannot read {where}: {aws.code} {aws.message}".strip())


def list_objects(client: Any, bucket: str, prefix: str) -> Iterator[dict[str, Any]]:
    """Every object under ``prefix`` (its ``Key``, ``Size``, ``ETag``), page by page."""
    paginator = client.get_paginator("list_objects_v2")
    try:
        for page in paginator.paginate(Bucket=bucket, Prefix=prefix):
            yield from page.get("Contents", [])
    except Exception as exc:  # botocore: mapped once, here
        raise s3_error(exc, f"s3://{bucket}/{prefix}") from None


def read_prefix(
    client: Any, bucket: str, prefix: str, *, limits: Limits | None = None, runner: Any = None,
    downloads: int = DOWNLOADS,
) -> Iterator[Document | Rejected]:
    """Every object under ``s3://bucket/prefix`` as a :class:`Document` placed at its key below the
    prefix, or a :class:`Rejected` with the reason (see the module doc). Up to ``downloads``
    objects are fetched at once, ahead of the parser; items come in listing order."""
    limits = limits or Limits()
    folder = prefix if not prefix or prefix.endswith("/") else prefix + "/"
    found = False
    todo: list[tuple[str, tuple[str, ...], int | None]] = []
    for obj in list_objects(client, bucket, prefix):
        key = obj["Key"]
        if key == prefix and not key.endswith("/"):
            path: tuple[str, ...] = (key.rsplit("/", 1)[-1],)
        elif key.startswith(folder):
            path = tuple(s for s in key[len(folder):].split("/") if s)
        else:
            continue  # a sibling sharing the name's start (handbook-old/ for handbook)
        found = True
        if key.endswith("/") or not path or any(s.startswith(".") for s in path):
            continue
        todo.append((key, path, obj.get("Size")))
    if not found:
        raise NotFound(f"nothing to ingest under s3://{bucket}/{prefix}: no object there; check the prefix "
                       "(keys are case-sensitive)")
    with tempfile.TemporaryDirectory(prefix="cairn-s3-") as tmp, ThreadPoolExecutor(max(1, downloads)) as pool:
        window: deque[tuple[str, tuple[str, ...], Any]] = deque()
        items = iter(enumerate(todo))

        def submit() -> None:
            for n, (key, path, size) in items:
                early = _before_download(bucket, key, path, size, limits)
                fetch = None if early else pool.submit(_download_to, client, bucket, key, Path(tmp) / f"{n}{_suffix(path)}",
                                                      _limit(path, limits))
                window.append((key, path, early or fetch))
                if len(window) >= max(1, downloads):
                    return

        submit()
        while window:
            key, path, pending = window.popleft()
            submit()
            if isinstance(pending, Rejected):
                yield pending
                continue
            file, problem = pending.result()  # a retryable failure raises here and stops the run
            if problem:
                yield Rejected(f"s3://{bucket}/{key}", problem)
                continue
            try:
                yield from _parse(file, path, f"s3://{bucket}/{key}", limits, runner)
            finally:
                file.unlink(missing_ok=True)


def read_object(
    client: Any, bucket: str, key: str, path: tuple[str, ...], *, size: int | None = None,
    limits: Limits | None = None, runner: Any = None,
) -> Iterator[Document | Rejected]:
    """One object, downloaded (bounded) and parsed by its key's extension, placed at ``path``."""
    limits = limits or Limits()
    early = _before_download(bucket, key, path, size, limits)
    if early:
        yield early
        return
    with tempfile.TemporaryDirectory(prefix="cairn-s3-") as tmp:
        file, problem = _download_to(client, bucket, key, Path(tmp) / ("object" + _suffix(path)), _limit(path, limits))
        if problem:
            yield Rejected(f"s3://{bucket}/{key}", problem)
            return
        yield from _parse(file, path, f"s3://{bucket}/{key}", limits, runner)


def _suffix(path: tuple[str, ...]) -> str:
    return Path(path[-1]).suffix.lower()


def _limit(path: tuple[str, ...], limits: Limits) -> int:
    return MAX_JSON_BYTES if _suffix(path) in JSON_SUFFIXES else limits.max_bytes


def _before_download(bucket: str, key: str, path: tuple[str, ...], size: int | None, limits: Limits) -> Rejected | None:
    """Why the object is skipped without a download (its type, or its listed size), or None."""
    url = f"s3://{bucket}/{key}"
    if _suffix(path) not in JSON_SUFFIXES and parser_for(path[-1]) is None:
        item = read_file(Path(key), path, shown=url)  # "unsupported file type": the file is never opened
        return item if isinstance(item, Rejected) else Rejected(url, "unsupported file type")
    limit = _limit(path, limits)
    if size is not None and size > limit:
        return Rejected(url, f"object is {size:,} bytes; the limit is {limit:,}; not downloaded")
    return None


def _parse(file: Path, path: tuple[str, ...], url: str, limits: Limits, runner: Any) -> Iterator[Document | Rejected]:
    if _suffix(path) in JSON_SUFFIXES:
        yield from read_json_file(file, path, shown=url)
        return
    item = read_file(file, path, limits=limits, runner=runner, shown=url)
    if isinstance(item, Document):
        item = Document(item.path, item.text, item.title, {**item.metadata, "source.uri": url}, item.sections, item.notes)
    yield item


def _download_to(client: Any, bucket: str, key: str, file: Path, limit: int) -> tuple[Path, str | None]:
    """:func:`_download` into ``file``: the file, and the reason it was not read (or None)."""
    return file, _download(client, bucket, key, file, limit)


def _download(client: Any, bucket: str, key: str, file: Path, limit: int) -> str | None:
    """Stream the object into ``file``; the reason it was not read, or None. Failures that a
    retry may fix (and missing credentials) raise: they stop the run before anything is written."""
    try:
        obj = client.get_object(Bucket=bucket, Key=key)
        declared = int(obj.get("ContentLength") or 0)
        if declared > limit:
            obj["Body"].close()
            return f"object is {declared:,} bytes; the limit is {limit:,}"
        written = 0
        with open(file, "wb") as out:
            for part in iter(lambda: obj["Body"].read(READ_CHUNK), b""):
                written += len(part)
                if written > limit:
                    obj["Body"].close()
                    return f"object passed {limit:,} bytes; the limit"
                out.write(part)
    except Exception as exc:  # botocore
        error = s3_error(exc, f"s3://{bucket}/{key}")
        if error.retryable or isinstance(error, Unauthorized):
            raise error from None
        code = AwsError.of(exc).code
        return _OBJECT_REASONS.get(code) or error.message.removeprefix(f"cannot read s3://{bucket}/{key}: ")
    return None
