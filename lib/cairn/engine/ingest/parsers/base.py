"""What every parser returns, the bounds every parser runs under, and the checks done before a
third-party library ever sees a file.

A parser turns one file into a :class:`Parsed`: the file's full text (what the content store keeps
and ``read --level 2`` returns) cut into :class:`Section` s — its units of structure: a Markdown
section under its heading path, a PDF page, a slide, a table with its header, a function or class.
The chunker (:mod:`cairn.engine.ingest.chunking`) packs sections into chunks and never loses where a chunk
came from: each section knows its page, its heading path and its character offsets in the text.

A file a parser cannot read raises :class:`ParseFailed` with a reason a user can act on; the
folder reader turns it into a :class:`~cairn.engine.ingest.sources.Rejected` and goes on.
"""

from __future__ import annotations

import os
import stat
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from cairn.core.errors import IngestError, ParseFailed, ParserMissing  # noqa: F401 - re-exported for the parsers

SectionKind = Literal["text", "section", "page", "slide", "table", "code", "message", "data"]



@dataclass(frozen=True)
class Section:
    """One unit of a document's structure, positioned in the document's text.

    ``start`` is the offset of ``text`` in :attr:`Parsed.text`. ``prefix`` is repeated at the start
    of every chunk cut from this section (a table's header row), so a piece of a long table still
    says what its columns are. ``mergeable`` sections (Markdown sections, small functions) may share
    a chunk with their neighbours; pages and slides never do, so a chunk cites one page or slide.
    """

    text: str
    start: int = 0
    kind: SectionKind = "text"
    heading_path: tuple[str, ...] = ()
    page: int | None = None  # 1-based page (PDF) or slide (PPTX) number
    label: str = ""  # what a title shows: "p. 3", "slide 2: Roadmap", "def parse", "Sheet1 rows 2-41"
    prefix: str = ""
    mergeable: bool = True


@dataclass
class Parsed:
    """A parsed file: its full text, its sections (in order, inside ``text``) and what it said of itself."""

    text: str
    sections: list[Section] = field(default_factory=list)
    title: str = ""
    format: str = ""  # "pdf", "html", "markdown", ...
    metadata: dict[str, str | int | float | bool] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


class SectionWriter:
    """Builds a :class:`Parsed` text and its sections together, so offsets are always right."""

    def __init__(self, separator: str = "\n\n") -> None:
        self.separator = separator
        self._parts: list[str] = []
        self._length = 0
        self.sections: list[Section] = []

    def add(self, text: str, **fields: object) -> None:
        text = text.strip("\n")
        if not text.strip():
            return
        if self._parts:
            self._parts.append(self.separator)
            self._length += len(self.separator)
        self.sections.append(Section(text=text, start=self._length, **fields))  # type: ignore[arg-type]
        self._parts.append(text)
        self._length += len(text)

    @property
    def length(self) -> int:
        return self._length

    def build(self, **fields: object) -> Parsed:
        return Parsed(text="".join(self._parts), sections=self.sections, **fields)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Limits:
    """Bounds for one file. A file past a bound is rejected (or cut, with a warning), never read whole.

    ``max_bytes``: the file's size on disk; ``max_chars``: the text a parser may produce;
    ``max_pages``: PDF pages / slides / sheets rows read; ``max_unzipped_bytes`` and
    ``max_zip_ratio``: what an Office file (a zip) may expand to, checked before it is opened;
    ``timeout_s`` and ``memory_mb``: the wall-clock and address-space budget of an isolated parse.
    """

    max_bytes: int = 50_000_000
    max_text_bytes: int = 20_000_000  # plain text / Markdown files
    max_chars: int = 5_000_000
    max_pages: int = 2_000
    max_rows: int = 100_000
    max_unzipped_bytes: int = 300_000_000
    max_zip_entries: int = 10_000
    max_zip_ratio: float = 200.0
    timeout_s: float = 60.0
    memory_mb: int = 2_048


def read_bytes(path: Path, limit: int) -> bytes:
    """The bytes of a regular file, opened without following a symlink, at most ``limit`` of them."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError as exc:
        raise ParseFailed(f"cannot open: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fh.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise ParseFailed("is not a regular file")
        if info.st_size > limit:
            raise ParseFailed(f"file is {info.st_size:,} bytes; the limit for this type is {limit:,}")
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise ParseFailed(f"file grew past {limit:,} bytes while it was read")
    return data


def decode_text(raw: bytes) -> str:
    """UTF-8 (a BOM is dropped); NUL bytes mean binary data."""
    if b"\x00" in raw[:8192]:
        raise ParseFailed("looks like a binary file (contains NUL bytes)")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ParseFailed(f"is not valid UTF-8 ({exc.reason} at byte {exc.start})") from None


def read_text(path: Path, limits: Limits) -> str:
    """A UTF-8 text file (Markdown, code, ...) within ``limits.max_text_bytes`` and ``limits.max_chars``."""
    text = decode_text(read_bytes(path, limits.max_text_bytes))
    if len(text) > limits.max_chars:
        raise ParseFailed(f"text is {len(text):,} characters; the limit is {limits.max_chars:,}")
    return text


def check_zip(path: Path, limits: Limits) -> None:
    """Refuse an Office file whose zip would expand past the limits (a zip bomb), before opening it.

    The sizes come from the zip's central directory; the libraries that read the members later
    decompress at most what it declares (zipfile checks each member's size and CRC as it reads).
    """
    try:
        with zipfile.ZipFile(path) as zf:
            infos = zf.infolist()
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise ParseFailed(f"is not a valid Office file (bad zip: {exc})") from None
    if len(infos) > limits.max_zip_entries:
        raise ParseFailed(f"holds {len(infos):,} zip entries; the limit is {limits.max_zip_entries:,}")
    total = sum(i.file_size for i in infos)
    if total > limits.max_unzipped_bytes:
        raise ParseFailed(
            f"would expand to {total:,} bytes; the limit is {limits.max_unzipped_bytes:,} (a zip bomb?)"
        )
    for i in infos:
        if i.file_size > 1_000_000 and i.file_size > limits.max_zip_ratio * max(i.compress_size, 1):
            raise ParseFailed(
                f"member {i.filename!r} expands {i.file_size / max(i.compress_size, 1):,.0f}× "
                f"({i.compress_size:,} → {i.file_size:,} bytes); the limit is {limits.max_zip_ratio:,.0f}× (a zip bomb?)"
            )


def cut(text: str, limits: Limits, parsed_warnings: list[str] | None = None) -> str:
    if len(text) <= limits.max_chars:
        return text
    if parsed_warnings is not None:
        parsed_warnings.append(f"text cut at {limits.max_chars:,} characters")
    return text[: limits.max_chars]
