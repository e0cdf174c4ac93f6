"""Markdown, plain text and reStructuredText (standard library): sections at headings."""

from __future__ import annotations

import re
from pathlib import Path

from cairn.engine.ingest.parsers.base import Limits, Parsed, read_text

_RST_UNDERLINE = re.compile(r"(?m)^(?P<title>[^\s].*)\n(?P<line>[=\-~^\"'`#*+]{3,})[ \t]*$")



def parse_markdown(path: Path, limits: Limits) -> Parsed:
    from cairn.engine.ingest.chunking import markdown_sections

    text = read_text(path, limits)
    return Parsed(text=text, sections=markdown_sections(text), format="markdown")


def parse_text(path: Path, limits: Limits) -> Parsed:
    """Plain text; reStructuredText titles (a line underlined with ``===``) become Markdown-like
    sections so an ``.rst`` file is cut at its titles too."""
    from cairn.engine.ingest.chunking import markdown_sections

    text = read_text(path, limits)
    if path.suffix.lower() == ".rst":
        return Parsed(text=text, sections=_rst_sections(text), format="rst")
    return Parsed(text=text, sections=markdown_sections(text, kind="text"), format="text")


def _rst_sections(text: str) -> list:
    from cairn.engine.ingest.parsers.base import Section

    levels: list[str] = []  # underline characters in the order they first appear
    heads: list[tuple[int, int, str]] = []
    for m in _RST_UNDERLINE.finditer(text):
        char = m.group("line")[0]
        if len(m.group("line")) < len(m.group("title").rstrip()) * 0.6:
            continue
        if char not in levels:
            levels.append(char)
        heads.append((m.start(), levels.index(char) + 1, m.group("title").strip()))
    out: list[Section] = []
    stack: list[tuple[int, str]] = []
    starts = [h[0] for h in heads]
    if not starts or starts[0] > 0:
        first = text[: starts[0] if starts else len(text)]
        if first.strip():
            out.append(Section(text=first.rstrip(), start=0, kind="section"))
    for i, (pos, level, title) in enumerate(heads):
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, title))
        end = starts[i + 1] if i + 1 < len(starts) else len(text)
        body = text[pos:end].rstrip()
        if body.strip():
            out.append(Section(text=body, start=pos, kind="section", heading_path=tuple(t for _, t in stack)))
    return out
