"""Names cairn gives things on a file system or in an object store, safe everywhere.

* :func:`tenant_folder` maps a tenant name to a folder name injectively even on a
  case-insensitive file system (macOS, Windows): ``GLOBEX`` and ``globex`` never share a folder.
  Used by the local vector store; the local content store should use it too.
* :func:`bounded_name` keeps one path segment within a byte budget (255 bytes is the limit of
  most file systems), hashing the tail of a longer one so distinct names stay distinct.
"""

from __future__ import annotations

import hashlib

_WINDOWS_RESERVED = frozenset(
    ["con", "prn", "aux", "nul"] + [f"com{i}" for i in range(10)] + [f"lpt{i}" for i in range(10)]
)
MAX_SEGMENT_BYTES = 255


def tenant_folder(tenant: str) -> str:
    """An injective, case-insensitive-safe folder name for a validated tenant name.

    Lower-case letters, digits, '-' and '.' stay; an upper-case letter becomes '_' + its lower
    case, '_' becomes '__'. So names that differ only by case get different folders, and a
    tenant of lower-case letters keeps the folder it always had. A name Windows reserves
    (``con``, ``nul.x``, ...) is prefixed with ``_-`` and a final '.' becomes ``_0``: sequences
    the escapes above never produce, so the map stays injective.
    """
    out = "".join("__" if c == "_" else f"_{c.lower()}" if c.isupper() else c for c in tenant)
    if out.endswith("."):
        out = out[:-1] + "_0"
    if out.split(".", 1)[0] in _WINDOWS_RESERVED:
        out = "_-" + out
    return out


def bounded_name(name: str, max_bytes: int = MAX_SEGMENT_BYTES) -> str:
    """``name`` if its UTF-8 form fits ``max_bytes``, else a prefix of it + ``~`` + 32 hex digits
    of its sha256 (cut on a character boundary; the suffix keeps distinct names distinct)."""
    raw = name.encode()
    if len(raw) <= max_bytes:
        return name
    digest = hashlib.sha256(raw).hexdigest()[:32]
    prefix = raw[: max_bytes - len(digest) - 1].decode("utf-8", errors="ignore")
    return f"{prefix}~{digest}"
