"""The console: static HTML, CSS and ES modules that ``cairn serve`` answers at ``/console/``.

The files ship in the package (no build step); the page talks only to the ``/v1`` API with the
key its user types, so it shows what that key may see and nothing more. :func:`response` maps a
request path to the response the server sends: only the files of this folder, by exact name,
with a content security policy that lets the page load nothing but itself and call the API URL
its user chose. Each file carries an ``ETag`` (a hash of its bytes): a browser revalidates it and
gets a bodiless 304 while it is unchanged; a client that accepts gzip gets it compressed.
``/favicon.ico``, which browsers ask for on their own, is the console's icon (no key needed).
"""

from __future__ import annotations

import base64
import gzip
import hashlib
from collections.abc import Mapping
from functools import lru_cache
from importlib import resources
from typing import Any

PREFIX = "/console"
FAVICON = "/favicon.ico"
_ICON = "favicon.svg"
GZIP_MIN_BYTES = 512  # smaller files are sent as they are
_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".svg": "image/svg+xml",
}
# connect-src: the page may call any API URL its user types (a deployed stack's, too); nothing
# else loads from anywhere but this server.
_POLICY = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
           "connect-src 'self' http: https:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")


def is_console(path: str) -> bool:
    return path in (PREFIX, FAVICON) or path.startswith(PREFIX + "/")


@lru_cache(maxsize=1)
def files() -> dict[str, bytes]:
    """Every file the console serves, by its path below ``/console/`` (``js/app.js``)."""
    root = resources.files(__package__)
    found: dict[str, bytes] = {}

    def walk(node: Any, prefix: str) -> None:
        for child in node.iterdir():
            name = prefix + child.name
            if child.is_dir():
                walk(child, name + "/")
            elif any(child.name.endswith(ext) for ext in _TYPES):
                found[name] = child.read_bytes()

    walk(root, "")
    return found


@lru_cache(maxsize=64)
def _packed(name: str) -> tuple[str, bytes]:
    """A file's ETag and its gzip form (compressed once per process)."""
    body = files()[name]
    return f'"{hashlib.sha256(body).hexdigest()[:20]}"', gzip.compress(body, mtime=0)


def response(path: str, method: str = "GET", headers: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The response to ``method path`` below ``/console`` (or ``/favicon.ico``): a file, a 304 when
    the request's ``If-None-Match`` holds its ETag, a redirect to ``/console/``, or 404/405.
    ``headers``: the request's, lower-cased names."""
    headers = headers or {}
    if path == PREFIX:
        return {"statusCode": 308, "headers": {"location": PREFIX + "/"}, "body": ""}
    if method not in ("GET", "HEAD"):
        return _text(405, "the console's files are read with GET", {"allow": "GET, HEAD"})
    name = _ICON if path == FAVICON else path[len(PREFIX) + 1:] or "index.html"
    body = files().get(name)
    if body is None:
        return _text(404, f"no console file {name!r}")
    etag, packed = _packed(name)
    ext = name[name.rfind("."):]
    out = {"content-type": _TYPES[ext], "cache-control": "no-cache", "etag": etag, "vary": "accept-encoding",
           "x-content-type-options": "nosniff", "content-security-policy": _POLICY, "referrer-policy": "no-referrer"}
    if etag in [t.strip() for t in headers.get("if-none-match", "").split(",")]:
        return {"statusCode": 304, "headers": out, "body": ""}
    if "gzip" in headers.get("accept-encoding", "") and len(body) >= GZIP_MIN_BYTES:
        out["content-encoding"] = "gzip"
        data = "" if method == "HEAD" else base64.b64encode(packed).decode("ascii")
        return {"statusCode": 200, "headers": out, "body": data, "isBase64Encoded": True}
    return {"statusCode": 200, "headers": out, "body": "" if method == "HEAD" else body.decode("utf-8")}


def _text(status: int, message: str, extra: dict[str, str] | None = None) -> dict[str, Any]:
    return {"statusCode": status, "headers": {"content-type": "text/plain; charset=utf-8", **(extra or {})},
            "body": message}
