"""``cairn://`` URIs: parsing, validation and tree arithmetic.

One tree per tenant::

    cairn://resources/...                      resources
    cairn://user/{user}/memories/...           memories of one end user
    cairn://agent/skills/...                   skills shared by every user
    cairn://user/{user}/skills/...             skills of one end user

A directory's URI has no trailing slash. A leaf is a file or a chunk of a long file,
written with a fragment: ``cairn://resources/docs/guide.md#3``. A chunk's parent is the
directory that holds the file.

Bounds, checked when a URI is parsed (so before any work on it): at most ``MAX_URI_LENGTH``
(2,048) characters before the fragment, ``MAX_DEPTH`` (32) path segments (``cairn://resources``
is 1), ``MAX_SEGMENT_LENGTH`` (255, a file name's limit on common file systems) characters a
segment, and a chunk number of at most 9 digits.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from cairn.core.errors import InvalidURIError
from cairn.core.kinds import ContextType, Level

SCHEME = "cairn://"
MAX_URI_LENGTH = 2048  # characters before the chunk fragment
MAX_DEPTH = 32  # path segments: cairn://resources is 1
MAX_SEGMENT_LENGTH = 255  # characters of one segment
MAX_CHUNK_DIGITS = 9
_BAD_SEGMENT = re.compile(r"[\x00-\x1f\x7f/#?\\]")
ROOT_HINT = (
    "a cairn URI starts with cairn://resources, cairn://user/{user}/memories, "
    "cairn://user/{user}/skills or cairn://agent/skills"
)


@dataclass(frozen=True)
class CairnURI:
    segments: tuple[str, ...]
    chunk: int | None = None

    def __str__(self) -> str:
        base = SCHEME + "/".join(self.segments)
        return base if self.chunk is None else f"{base}#{self.chunk}"


def _fail(uri: object, why: str) -> InvalidURIError:
    shown = uri if not isinstance(uri, str) or len(uri) <= 100 else uri[:60] + "..." + uri[-20:]
    return InvalidURIError(f"invalid URI {shown!r}: {why}")


@lru_cache(maxsize=65536)
def parse(uri: str) -> CairnURI:
    """Parse and validate a URI; raise :class:`InvalidURIError` naming what is wrong."""
    if not isinstance(uri, str):
        raise _fail(uri, f"expected a string, got {type(uri).__name__}")
    if not uri.startswith(SCHEME):
        raise _fail(uri, f"must start with {SCHEME!r}; {ROOT_HINT}")
    body = uri[len(SCHEME):]
    chunk: int | None = None
    if "#" in body:
        body, frag = body.split("#", 1)
        if not frag.isdigit() or len(frag) > MAX_CHUNK_DIGITS:
            raise _fail(uri, f"chunk fragment must be a non-negative number of at most {MAX_CHUNK_DIGITS} digits "
                             f"like '#3', got '#{frag[:20]}'")
        chunk = int(frag)
    if len(SCHEME) + len(body) > MAX_URI_LENGTH:
        raise _fail(uri, f"is {len(SCHEME) + len(body):,} characters long; at most {MAX_URI_LENGTH:,} are allowed")
    if not body:
        raise _fail(uri, f"has no path; {ROOT_HINT}")
    if body.endswith("/"):
        raise _fail(uri, "must not end with '/' (directory URIs have no trailing slash)")
    if body.count("/") >= MAX_DEPTH:
        raise _fail(uri, f"has {body.count('/') + 1:,} path segments; at most {MAX_DEPTH} are allowed "
                         "(cairn://resources is 1)")
    segments = tuple(body.split("/"))
    for seg in segments:
        if seg == "":
            raise _fail(uri, "has an empty path segment ('//')")
        if seg in (".", ".."):
            raise _fail(uri, f"segment {seg!r} is not allowed")
        if len(seg) > MAX_SEGMENT_LENGTH:
            raise _fail(uri, f"segment {seg[:40] + '...'!r} is {len(seg):,} characters long; at most "
                             f"{MAX_SEGMENT_LENGTH} are allowed")
        if seg != seg.strip():
            raise _fail(uri, f"segment {seg!r} has leading or trailing white space")
        if _BAD_SEGMENT.search(seg):
            raise _fail(uri, f"segment {seg!r} contains a control character, '?', '#' or a backslash")
    _check_root(uri, segments)
    if chunk is not None and context_type_of_segments(segments) is None:
        raise _fail(uri, "only a file under a context root can carry a chunk fragment")
    return CairnURI(segments, chunk)


def _check_root(uri: str, seg: tuple[str, ...]) -> None:
    head = seg[0]
    if head == "resources":
        return
    if head == "agent":
        if len(seg) >= 2 and seg[1] != "skills":
            raise _fail(uri, f"under cairn://agent only 'skills' is allowed, got {seg[1]!r}")
        return
    if head == "user":
        if len(seg) >= 3 and seg[2] not in ("memories", "skills"):
            raise _fail(uri, f"under cairn://user/{{user}} only 'memories' and 'skills' are allowed, got {seg[2]!r}")
        return
    raise _fail(uri, f"unknown root {head!r}; {ROOT_HINT}")


def context_type_of_segments(seg: tuple[str, ...]) -> ContextType | None:
    if seg[0] == "resources":
        return ContextType.RESOURCE
    if seg[0] == "agent" and len(seg) >= 2:
        return ContextType.SKILL
    if seg[0] == "user" and len(seg) >= 3:
        return ContextType.MEMORY if seg[2] == "memories" else ContextType.SKILL
    return None


def validate(uri: str) -> str:
    """Return ``uri`` unchanged if valid, else raise :class:`InvalidURIError`."""
    parse(uri)
    return uri


def context_type_of(uri: str) -> ContextType:
    """The context type a URI belongs to; an error for namespace URIs like ``cairn://user``."""
    ctype = context_type_of_segments(parse(uri).segments)
    if ctype is None:
        raise _fail(uri, f"is above every context root; {ROOT_HINT}")
    return ctype


def owner_of(uri: str) -> str | None:
    """The end user a URI belongs to (``cairn://user/{user}/...``), or None."""
    seg = parse(uri).segments
    return seg[1] if seg[0] == "user" and len(seg) >= 2 else None


def parent(uri: str) -> str | None:
    """The directory holding ``uri``; None for a top-level namespace like ``cairn://resources``."""
    seg = parse(uri).segments[:-1]  # a chunk's parent is its file's directory
    return SCHEME + "/".join(seg) if seg else None


def ancestors(uri: str) -> list[str]:
    """Every directory above ``uri``, outermost first."""
    seg = parse(uri).segments
    return [SCHEME + "/".join(seg[:i]) for i in range(1, len(seg))]


def depth(uri: str) -> int:
    """Number of path segments: ``cairn://resources`` is 1."""
    return len(parse(uri).segments)


def join(base: str, *parts: str) -> str:
    """Append path segments to a directory URI and validate the result."""
    clean = [p.strip("/") for p in parts if p.strip("/")]
    out = base.rstrip("/") + ("/" + "/".join(clean) if clean else "")
    return validate(out)


def with_chunk(uri: str, chunk: int) -> str:
    return validate(f"{uri}#{chunk}")


def is_under(uri: str, root: str) -> bool:
    """True if ``uri`` is ``root`` or anywhere below it."""
    return uri == root or uri.startswith(root + "/") or uri.startswith(root + "#")


_DISPLAY_SUFFIX = {Level.ABSTRACT: "/.abstract.md", Level.OVERVIEW: "/.overview.md"}


def display_uri(uri: str, level: int) -> str:
    """The URI shown to users: directories get ``/.abstract.md`` (L0) or ``/.overview.md`` (L1)."""
    return uri + _DISPLAY_SUFFIX.get(Level(level), "")


def default_roots(context_type: ContextType, user: str | None = None) -> list[str]:
    """The roots a caller may search for one context type."""
    if context_type is ContextType.RESOURCE:
        return [SCHEME + "resources"]
    if context_type is ContextType.MEMORY:
        return [f"{SCHEME}user/{user}/memories"] if user else []
    roots = [SCHEME + "agent/skills"]
    if user:
        roots.append(f"{SCHEME}user/{user}/skills")
    return roots
