"""The console: static HTML, CSS and ES modules that ``cairn serve`` answers at ``/console/``.

The files ship in the package (no build step); the page talks only to the ``/v1`` API with the
key its user types, so it shows what that key may see and nothing more. :func:`response` maps a
request path to the response the server sends: only the files of this folder, by exact name,
with a content security policy that lets the page load nothing but itself and call the API URL
its user chose.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from typing import Any

PREFIX = "/console"
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
    return path == PREFIX or path.startswith(PREFIX + "/")


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


def response(path: str, method: str = "GET") -> dict[str, Any]:
    """The response to ``method path`` below ``/console``: a file, a redirect to ``/console/``, or 404/405."""
    if path == PREFIX:
        return {"statusCode": 308, "headers": {"location": PREFIX + "/"}, "body": ""}
    if method not in ("GET", "HEAD"):
        return _text(405, "the console's files are read with GET", {"allow": "GET, HEAD"})
    name = path[len(PREFIX) + 1:] or "index.html"
    body = files().get(name)
    if body is None:
        return _text(404, f"no console file {name!r}")
    ext = name[name.rfind("."):]
    headers = {"content-type": _TYPES[ext], "cache-control": "no-cache", "x-content-type-options": "nosniff",
               "content-security-policy": _POLICY, "referrer-policy": "no-referrer"}
    return {"statusCode": 200, "headers": headers, "body": "" if method == "HEAD" else body.decode("utf-8")}


def _text(status: int, message: str, extra: dict[str, str] | None = None) -> dict[str, Any]:
    return {"statusCode": status, "headers": {"content-type": "text/plain; charset=utf-8", **(extra or {})},
            "body": message}
