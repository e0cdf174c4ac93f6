"""Where documents come from. A :class:`Document` is a leaf's content and its place in the tree."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..models import MetadataValue

TEXT_SUFFIXES = {".md", ".markdown", ".txt", ".rst", ".text"}
MAX_FILE_BYTES = 2_000_000


@dataclass(frozen=True)
class Document:
    path: tuple[str, ...]  # segments below the ingest root; the last one is the file name
    text: str
    title: str = ""
    metadata: dict[str, MetadataValue] = field(default_factory=dict)


@dataclass(frozen=True)
class Rejected:
    """A file that was not ingested, and why; the rest of the batch goes on."""

    source: str
    reason: str


def read_folder(root: Path) -> Iterator[Document | Rejected]:
    """Every Markdown/text file under ``root`` (sorted, hidden files skipped)."""
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
    for f in files:
        rel = f.relative_to(root.parent if root.is_file() else root)
        if any(part.startswith(".") for part in rel.parts):
            continue
        if f.suffix.lower() not in TEXT_SUFFIXES:
            yield Rejected(str(f), f"unsupported file type {f.suffix or '(none)'!r}; supported: {', '.join(sorted(TEXT_SUFFIXES))}")
            continue
        yield read_file(f, tuple(rel.parts))


def read_file(f: Path, path: tuple[str, ...]) -> Document | Rejected:
    size = f.stat().st_size
    if size > MAX_FILE_BYTES:
        return Rejected(str(f), f"file is {size:,} bytes; the limit is {MAX_FILE_BYTES:,}")
    raw = f.read_bytes()
    if b"\x00" in raw[:8192]:
        return Rejected(str(f), "looks like a binary file (contains NUL bytes)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Rejected(str(f), f"is not valid UTF-8 ({exc.reason} at byte {exc.start})")
    if not text.strip():
        return Rejected(str(f), "is empty")
    return Document(path=path, text=text)
