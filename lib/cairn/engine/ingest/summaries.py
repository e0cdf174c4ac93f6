"""Extractive summaries: the embedded default when no LLM is configured.

A leaf's abstract is its first sentences; a directory's L0 abstract says what it holds
(from a README/index file when there is one, else from its children's titles); its L1
overview lists its children with their abstracts, bounded to ~4,000 characters.
"""

from __future__ import annotations

from dataclasses import dataclass

from cairn.core.text.prose import ABSTRACT_CHARS, first_sentences

OVERVIEW_CHARS = 4000


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
