"""The content store: full bodies, read on demand (L2), keyed by tenant and node URI.

Vector records keep bounded text; the content store keeps the whole body of every node the
ingestor wrote: a file's full text (one body for all its chunks, under the file's URI) and a
directory's full listing (its overview is bounded; the listing is not). It is also the ingestor's
inventory of what exists under a root, which is how ``sync`` finds what disappeared.

Layout (the same for both backends)::

    {prefix}{tenant}/{segment}/{segment}/.../.body

Segments are percent-encoded (and a leading ``.`` becomes ``%2E``), so ``.body`` can never be a
segment and a directory's body sits beside its children. An encoded segment longer than
``MAX_SEGMENT_CHARS`` (file systems allow 255 bytes a name; 29 CJK characters encode to 261) is
shortened to ``%~`` + :func:`cairn.core.storage_names.bounded_name` of it (its first characters and a
hash of the whole) — a form percent-encoding never produces, so it cannot collide with a plain name — and the node's URI is then kept beside its
body in a ``.uri`` file, which is how :meth:`ContentStore.list` names it. ``LocalContentStore`` writes that layout
under a folder (atomically: temporary file, then rename); ``S3ContentStore`` under a bucket prefix.

Public methods validate the tenant and URI and map backend errors to cairn errors (a throttled or
unreachable S3 is ``retryable``); backends fill the ``_hooks``.
"""

from __future__ import annotations

import builtins
import functools
import os
import shutil
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, ClassVar, TypeVar
from urllib.parse import quote, unquote

from cairn.core import uri as uris
from cairn.core.errors import CairnError, ContentNotFound, ContentStoreError
from cairn.core.storage_names import bounded_name, tenant_folder
from cairn.ports.vectorstores.base import validate_tenant

T = TypeVar("T")
BODY = ".body"
URI_FILE = ".uri"  # the node's URI, kept only when a segment of its path was shortened
MAX_SEGMENT_CHARS = 150  # encoded; well under 255 bytes with room for a temporary file's prefix
HASHED = "%~"


def _enc(segment: str) -> str:
    out = quote(segment, safe="")
    out = "%2E" + out[1:] if out.startswith(".") else out
    if len(out) <= MAX_SEGMENT_CHARS:
        return out
    return HASHED + bounded_name(out, MAX_SEGMENT_CHARS - len(HASHED))


def node_path(tenant: str, uri: str) -> str:
    """``tenant/seg/seg`` for a node URI (a chunk fragment is dropped: chunks share their file's body)."""
    return "/".join([tenant, *(_enc(s) for s in uris.parse(uri).segments)])


def is_shortened(path: str) -> bool:
    return HASHED in path


def uri_of(rel_parts: Iterable[str]) -> str:
    return uris.SCHEME + "/".join(unquote(p) for p in rel_parts)


class ContentStore(ABC):
    backend: ClassVar[str] = "abstract"

    # ----------------------------------------------------------------- public API

    def put(self, tenant: str, uri: str, body: str) -> None:
        self.put_many(tenant, {uri: body})

    def put_many(self, tenant: str, bodies: Mapping[str, str]) -> None:
        validate_tenant(tenant)
        items: dict[str, str] = {}
        for u, b in bodies.items():
            base = node_path(tenant, u)
            if is_shortened(base):  # the name no longer spells the URI: keep it beside the body
                items[base + "/" + URI_FILE] = uris.SCHEME + "/".join(uris.parse(u).segments)
            items[base + "/" + BODY] = b
        if items:
            self._call("put", lambda: self._put_many(items))

    def get(self, tenant: str, uri: str) -> str:
        validate_tenant(tenant)
        key = node_path(tenant, uri) + "/" + BODY
        body = self._call("get", lambda: self._get(key))
        if body is None:
            raise ContentNotFound(f"no content for {uri!r} (tenant {tenant!r}): it was never ingested or was deleted")
        return body

    def exists(self, tenant: str, uri: str) -> bool:
        try:
            self.get(tenant, uri)
        except ContentNotFound:
            return False
        return True

    def list(self, tenant: str, under: str) -> builtins.list[str]:
        """Every node URI with a body at or below ``under``, sorted."""
        validate_tenant(tenant)
        base = node_path(tenant, under)
        keys = self._call("list", lambda: self._list(base + "/"))
        out = []
        for key in keys:
            parts = key.split("/")
            if parts[-1] != BODY:
                continue
            if is_shortened(key):
                stored = self._call("get", functools.partial(self._get, key.rsplit("/", 1)[0] + "/" + URI_FILE))
                if stored:
                    out.append(stored.strip())
                continue
            out.append(uri_of(parts[1:-1]))
        return sorted(out)

    def delete(self, tenant: str, node_uris: Iterable[str]) -> int:
        """Delete the bodies of these nodes (not their descendants)."""
        validate_tenant(tenant)
        bases = [node_path(tenant, u) for u in node_uris]
        keys = [b + "/" + BODY for b in bases]
        names = [b + "/" + URI_FILE for b in bases if is_shortened(b)]
        n = self._call("delete", lambda: self._delete(keys)) if keys else 0
        if names:  # after the bodies: a crash in between leaves a name without a body, never the reverse
            self._call("delete", lambda: self._delete(names))
        return n

    def delete_tree(self, tenant: str, uri: str) -> int:
        """Delete the body of ``uri`` and of everything below it."""
        validate_tenant(tenant)
        base = node_path(tenant, uri)
        keys = self._call("list", lambda: self._list(base + "/"))
        bodies = sum(k.endswith("/" + BODY) for k in keys)
        self._call("delete", lambda: self._delete(keys))
        return bodies

    # ----------------------------------------------------------------- errors

    def _call(self, op: str, fn: Callable[[], T]) -> T:
        try:
            return fn()
        except CairnError:
            raise
        except Exception as exc:
            raise self._map_error(op, exc) from exc

    def _map_error(self, op: str, exc: Exception) -> CairnError:
        return ContentStoreError(f"{self.backend} content store: {op} failed: {type(exc).__name__}: {exc}")

    # ----------------------------------------------------------------- hooks

    @abstractmethod
    def _put_many(self, items: dict[str, str]) -> None: ...

    @abstractmethod
    def _get(self, key: str) -> str | None: ...

    @abstractmethod
    def _list(self, prefix: str) -> builtins.list[str]:
        """Every key starting with ``prefix``."""

    @abstractmethod
    def _delete(self, keys: builtins.list[str]) -> int: ...


class LocalContentStore(ContentStore):
    """Bodies as files under a folder: the embedded default."""

    backend = "local"

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)

    def _file(self, key: str) -> Path:
        # the tenant's folder name is injective on case-insensitive file systems (GLOBEX vs globex)
        tenant, _, rest = key.partition("/")
        return self.folder / "tenants" / tenant_folder(tenant) / rest

    def _put_many(self, items: dict[str, str]) -> None:
        for key, body in items.items():
            path = self._file(key)
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(body)
            os.replace(tmp, path)

    def _get(self, key: str) -> str | None:
        try:
            return self._file(key).read_text(encoding="utf-8")
        except FileNotFoundError:
            return None

    def _list(self, prefix: str) -> builtins.list[str]:
        base = self._file(prefix.rstrip("/"))
        if not base.is_dir():
            return []
        tenant = prefix.split("/", 1)[0]
        root = self._file(tenant + "/")
        return [f"{tenant}/{p.relative_to(root).as_posix()}" for p in base.rglob(".*") if p.name in (BODY, URI_FILE)]

    def _delete(self, keys: builtins.list[str]) -> int:
        n = 0
        for key in keys:
            path = self._file(key)
            try:
                path.unlink()
                n += 1
            except FileNotFoundError:
                continue
            self._prune(path.parent)
        return n

    def _prune(self, folder: Path) -> None:
        """Remove folders left empty, up to the tenant's folder."""
        stop = self.folder / "tenants"
        while folder != stop and folder.is_dir() and stop in folder.parents:
            try:
                folder.rmdir()
            except OSError:  # not empty (children, or a temporary file of a concurrent write)
                return
            folder = folder.parent

    def clear(self) -> None:
        shutil.rmtree(self.folder / "tenants", ignore_errors=True)


PUT_THREADS = 16
_RETRYABLE_S3 = {"SlowDown", "Throttling", "ThrottlingException", "RequestTimeout", "InternalError", "ServiceUnavailable"}


class S3ContentStore(ContentStore):
    """Bodies as S3 objects under ``s3://bucket/prefix``; the client is built once and passed in."""

    backend = "s3"

    def __init__(self, bucket: str, prefix: str = "", client: Any = None) -> None:
        if client is None:
            import boto3

            client = boto3.client("s3")
        self.bucket = bucket
        self.prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""
        self.client = client

    def _put_many(self, items: dict[str, str]) -> None:
        def put(item: tuple[str, str]) -> None:
            self.client.put_object(
                Bucket=self.bucket,
                Key=self.prefix + item[0],
                Body=item[1].encode("utf-8"),
                ContentType="text/plain; charset=utf-8",
            )

        if len(items) <= 1:
            for item in items.items():
                put(item)
            return
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=min(PUT_THREADS, len(items))) as pool:  # boto3 clients are thread-safe
            list(pool.map(put, items.items()))  # re-raises the first failure

    def _get(self, key: str) -> str | None:
        try:
            obj = self.client.get_object(Bucket=self.bucket, Key=self.prefix + key)
        except Exception as exc:
            if _s3_code(exc) in ("NoSuchKey", "404"):
                return None
            raise
        return obj["Body"].read().decode("utf-8")

    def _list(self, prefix: str) -> builtins.list[str]:
        out: list[str] = []
        paginator = self.client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.bucket, Prefix=self.prefix + prefix):
            out.extend(o["Key"][len(self.prefix) :] for o in page.get("Contents", []))
        return out

    def _delete(self, keys: builtins.list[str]) -> int:
        n = 0
        for start in range(0, len(keys), 1000):
            batch = keys[start : start + 1000]
            resp = self.client.delete_objects(
                Bucket=self.bucket, Delete={"Objects": [{"Key": self.prefix + k} for k in batch], "Quiet": True}
            )
            errors = resp.get("Errors", [])
            if errors:
                first = errors[0]
                raise ContentStoreError(
                    f"s3 content store: {len(errors)} object(s) could not be deleted, e.g. "
                    f"{first.get('Key')!r}: {first.get('Code')} {first.get('Message', '')}",
                    retryable=True,
                )
            n += len(batch)
        return n

    def _map_error(self, op: str, exc: Exception) -> CairnError:
        code = _s3_code(exc)
        status = _s3_status(exc)
        retryable = code in _RETRYABLE_S3 or (status is not None and status >= 500) or _is_connection_error(exc)
        what = f"bucket {self.bucket!r}: {op} failed: {code or type(exc).__name__}: {exc}"
        if code == "NoSuchBucket":
            return ContentStoreError(f"s3 content store: {what}; create the bucket or fix CAIRN content settings")
        return ContentStoreError(f"s3 content store: {what}", retryable=retryable)


def _s3_code(exc: Exception) -> str | None:
    response = getattr(exc, "response", None)
    return (response or {}).get("Error", {}).get("Code") if isinstance(response, dict) else None


def _s3_status(exc: Exception) -> int | None:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        return response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return None


def _is_connection_error(exc: Exception) -> bool:
    try:
        from botocore.exceptions import ConnectionError as BotoConnectionError
        from botocore.exceptions import (
            ConnectTimeoutError,
            EndpointConnectionError,
            ReadTimeoutError,
        )
    except ImportError:  # pragma: no cover - boto3 is installed with the aws extra
        return False
    return isinstance(exc, (BotoConnectionError, EndpointConnectionError, ConnectTimeoutError, ReadTimeoutError))
