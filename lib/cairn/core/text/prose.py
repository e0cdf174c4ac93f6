"""Markdown read as prose: its plain text, its headings, its first sentences."""

from __future__ import annotations

import re

ABSTRACT_CHARS = 400
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])")
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.+?)\s*#*\s*$", re.MULTILINE)
_MD_NOISE = re.compile(r"```.*?```|`|\*\*|__|!\[[^\]]*\]\([^)]*\)|<[^>]+>", re.DOTALL)
_LINK = re.compile(r"\[([^\]]+)\]\([^)]*\)")


def plain(text: str) -> str:
    """Markdown reduced to its prose: no code fences, headings, links or emphasis marks."""
    text = _MD_NOISE.sub(" ", text)
    text = _LINK.sub(r"\1", text)
    text = _HEADING.sub("", text)
    text = re.sub(r"^\s*[-*+>|]\s*", "", text, flags=re.MULTILINE)
    return re.sub(r"\s+", " ", text).strip()


def first_heading(text: str) -> str | None:
    m = _HEADING.search(text)
    return m.group(2).strip() if m else None


def headings(text: str, max_level: int = 3) -> list[str]:
    return [m.group(2).strip() for m in _HEADING.finditer(text) if len(m.group(1)) <= max_level]


def first_sentences(text: str, max_chars: int = ABSTRACT_CHARS, max_sentences: int = 3) -> str:
    prose = plain(text)
    out = ""
    for sentence in _SENTENCE.split(prose)[:max_sentences]:
        if out and len(out) + len(sentence) + 1 > max_chars:
            break
        out = f"{out} {sentence}".strip()
    return out[:max_chars].rstrip()
