"""Extractive summaries: the embedded default when no LLM is configured.

A leaf's abstract is its first sentences; a directory's L0 abstract says what it holds
(from a README/index file when there is one, else from its children's titles); its L1
overview lists its children with their abstracts, bounded to ~4,000 characters.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

ABSTRACT_CHARS = 400
OVERVIEW_CHARS = 4000
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


@dataclass(frozen=True)
class ChildSummary:
    name: str
    title: str
    abstract: str
    is_dir: bool


def directory_abstract(name: str, title: str, children: list[ChildSummary], intro: str | None) -> str:
    """One to three sentences saying what the directory holds."""
    if intro:
        return first_sentences(intro, max_sentences=2)
    dirs = [c for c in children if c.is_dir]
    files = [c for c in children if not c.is_dir]
    parts = []
    if files:
        names = ", ".join(c.title for c in files[:6]) + (", ..." if len(files) > 6 else "")
        parts.append(f"{title}: {len(files)} document{'s' if len(files) != 1 else ''} ({names}).")
    if dirs:
        names = ", ".join(c.title for c in dirs[:6]) + (", ..." if len(dirs) > 6 else "")
        parts.append(f"{'It' if files else title} has {len(dirs)} section{'s' if len(dirs) != 1 else ''}: {names}.")
    return " ".join(parts)[:ABSTRACT_CHARS] or f"{title}: empty."


def directory_overview(title: str, abstract: str, children: list[ChildSummary]) -> str:
    """What is inside and where: the abstract, then one line per child, bounded."""
    lines = [f"# {title}", abstract, ""]
    for c in children:
        kind = "folder" if c.is_dir else "file"
        line = f"- {c.name} ({kind}): {c.title}" + (f" — {c.abstract}" if c.abstract and c.abstract != c.title else "")
        lines.append(line[:400])
    out = "\n".join(lines)
    if len(out) > OVERVIEW_CHARS:
        out = out[: OVERVIEW_CHARS - 20].rsplit("\n", 1)[0] + "\n- ... (more)"
    return out
