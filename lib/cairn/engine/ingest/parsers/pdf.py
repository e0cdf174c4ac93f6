"""PDF (pypdf): the text layer, one section per page, so every chunk cites its page.

pypdf is pure Python (BSD licence), so a hostile file cannot crash the process; a file that makes
it loop or eat memory is stopped by the isolated runner's time and memory bounds
(:mod:`.isolation`), and at most ``Limits.max_pages`` pages are read. A PDF without a text layer
(a scan) is rejected with that reason: cairn does not OCR.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

from cairn.engine.ingest.parsers.base import Limits, Parsed, ParseFailed, SectionWriter

_SPACES = re.compile(r"[ \t\u00a0]+")
_BLANKS = re.compile(r"\n{3,}")
_HYPHEN_BREAK = re.compile(r"(\w)-\n(\w)")


def _clean(text: str) -> str:
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "")
    text = _HYPHEN_BREAK.sub(r"\1\2", text)
    text = "\n".join(_SPACES.sub(" ", line).strip() for line in text.split("\n"))
    return _BLANKS.sub("\n\n", text).strip()


def parse_pdf(path: Path, limits: Limits) -> Parsed:
    import logging

    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    logging.getLogger("pypdf").setLevel(logging.ERROR)  # malformed-but-readable files warn per object
    size = path.stat().st_size
    if size > limits.max_bytes:
        raise ParseFailed(f"file is {size:,} bytes; the limit is {limits.max_bytes:,}")
    try:
        reader = PdfReader(str(path), strict=False)
        if reader.is_encrypted and not reader.decrypt(""):
            raise ParseFailed("is encrypted with a password")
        n_pages = len(reader.pages)
    except PdfReadError as exc:
        raise ParseFailed(f"is not a readable PDF: {exc}") from None
    deadline = time.monotonic() + limits.timeout_s
    out = SectionWriter()
    warnings: list[str] = []
    empty = 0
    for number, page in enumerate(reader.pages, 1):
        if number > limits.max_pages:
            warnings.append(f"only the first {limits.max_pages:,} of {n_pages:,} pages were read")
            break
        if time.monotonic() > deadline:
            raise ParseFailed(f"took longer than {limits.timeout_s:g} s (stopped at page {number} of {n_pages})")
        text = _clean(page.extract_text() or "")
        if not text:
            empty += 1
            continue
        out.add(text, kind="page", page=number, label=f"p. {number}", mergeable=False)
        if out.length > limits.max_chars:
            warnings.append(f"stopped after page {number}: the text passed {limits.max_chars:,} characters")
            break
    if not out.sections:
        raise ParseFailed(f"has no text layer on any of its {n_pages} page(s) (a scanned PDF? cairn does not OCR)")
    if empty:
        warnings.append(f"{empty} page(s) without text were skipped")
    title = ""
    try:
        meta = reader.metadata
        title = str(meta.title).strip() if meta is not None and meta.title else ""
    except Exception:  # noqa: BLE001 - a broken info dictionary costs only the title
        title = ""
    parsed = out.build(title=title, format="pdf", warnings=warnings)
    parsed.metadata["pages"] = n_pages
    return parsed
