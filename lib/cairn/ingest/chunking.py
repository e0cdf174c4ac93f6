"""Splitting long files into chunks at section boundaries, with a little overlap."""

from __future__ import annotations

import re

CHUNK_CHARS = 1500
OVERLAP_CHARS = 200
_SECTION = re.compile(r"(?m)^(?=\s{0,3}#{1,6}\s)")


def _pieces(text: str) -> list[str]:
    """Sections (split at Markdown headings), then paragraphs of sections that are too long."""
    out: list[str] = []
    for section in _SECTION.split(text):
        if not section.strip():
            continue
        if len(section) <= CHUNK_CHARS:
            out.append(section.strip())
            continue
        for para in re.split(r"\n\s*\n", section):
            para = para.strip()
            while len(para) > CHUNK_CHARS:  # a single huge paragraph: cut at a space
                cut = para.rfind(" ", 0, CHUNK_CHARS) or CHUNK_CHARS
                out.append(para[:cut])
                para = para[cut:].strip()
            if para:
                out.append(para)
    return out


def chunk(text: str) -> list[str]:
    """One chunk for a short text; else chunks of at most ~CHUNK_CHARS that start at sections
    or paragraphs, each carrying the tail of the previous one as overlap."""
    text = text.strip()
    if len(text) <= CHUNK_CHARS:
        return [text]
    chunks: list[str] = []
    current = ""
    for piece in _pieces(text):
        starts_section = piece.lstrip().startswith("#")
        if current and (len(current) + len(piece) + 2 > CHUNK_CHARS or (starts_section and len(current) > CHUNK_CHARS // 3)):
            chunks.append(current)
            tail = current[-OVERLAP_CHARS:]
            space = tail.find(" ")
            current = (tail[space + 1 :] if space >= 0 else tail) + "\n\n" + piece if not starts_section else piece
        else:
            current = f"{current}\n\n{piece}" if current else piece
    if current:
        chunks.append(current)
    return chunks
