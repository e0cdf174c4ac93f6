"""Chunks cut along a document's structure, each with its citation.

A parser (:mod:`cairn.engine.ingest.parsers`) cuts a file into :class:`~cairn.engine.ingest.parsers.base.Section` s:
Markdown sections under their heading path, PDF pages, slides, tables with their header, functions
and classes. The chunker

1. splits a section longer than ``chunk_chars`` at the best boundary inside the budget — a blank
   line outside a code fence, else a line break, else a sentence end, else a space — and gives each
   continuation the end of the previous piece (``overlap_chars``, from a word boundary) and the
   section's ``prefix`` (a table's header row);
2. packs neighbouring small sections into one chunk while they fit, are ``mergeable`` (pages and
   slides never are: a chunk cites one page) and no new heading starts once a chunk is a third
   full.

With a token window (``max_tokens`` and ``count_tokens``: the embedder's own tokenizer, set by the
ingest service from :attr:`cairn.ports.embeddings.Embedder.max_tokens`), a piece or a packed chunk
must also fit that many of the embedder's tokens: a piece over it is cut again at the best boundary
inside a proportionally smaller budget, and its overlap is shortened to a quarter of the window
at most (dense scripts take a token a character). An embedder reads only its window: without this,
the end of a longer chunk is never embedded (benchmarks/README.md, issue 38).

Each :class:`Chunk` is a slice of the document's text (``start``/``end`` are offsets in it), so
``text[start:end]`` is the chunk without its repeated prefix. Every step is linear in the text's
length: a 2 MB file is chunked in milliseconds.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from cairn.engine.ingest.parsers.base import Section

CHUNK_CHARS = 1500
OVERLAP_CHARS = 200
MIN_CHUNK_CHARS = 200
MAX_CHUNK_CHARS = 8000  # a record's text is bounded to this (cairn.core.models.MAX_TEXT_CHARS)
SPECIAL_TOKENS = 2  # what an embedder adds to every text ([CLS]/[SEP], <s>/</s>)
LABEL_TOKENS = 16  # room for the section label a chunk's title carries ("Guide — Refunds")
MIN_WINDOW_TOKENS = 32
OVERLAP_SHARE = 0.25  # of the token window, at most, repeated from the previous chunk
MIN_OVERLAP_CHARS = 20

_PARAGRAPH = re.compile(r"\n[ \t]*\n")
_FENCE = re.compile(r"(?m)^[ \t]{0,3}(```|~~~)")
_SENTENCE_END = re.compile(r"[.!?。！？][\"')\]]?\s")
_HEADING = re.compile(r"(?m)^[ \t]{0,3}(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$")


@dataclass(frozen=True)
class ChunkingConfig:
    """How a document is cut: ``chunk_chars`` per chunk at most (plus a repeated prefix), and
    ``overlap_chars`` carried from one piece of a long section into the next."""

    chunk_chars: int = CHUNK_CHARS
    overlap_chars: int = OVERLAP_CHARS
    # the embedder's window in its tokens, and how it counts them (None: characters only)
    max_tokens: int | None = None
    count_tokens: Callable[[str], int] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        problems = []
        if self.max_tokens is not None and (self.max_tokens < MIN_WINDOW_TOKENS or self.count_tokens is None):
            problems.append(f"max_tokens must be at least {MIN_WINDOW_TOKENS} and come with count_tokens, got {self.max_tokens}")
        if not MIN_CHUNK_CHARS <= self.chunk_chars <= MAX_CHUNK_CHARS:
            problems.append(f"chunk_chars must be between {MIN_CHUNK_CHARS} and {MAX_CHUNK_CHARS}, got {self.chunk_chars}")
        if not 0 <= self.overlap_chars <= self.chunk_chars // 2:
            problems.append(f"overlap_chars must be between 0 and half of chunk_chars ({self.chunk_chars // 2}), got {self.overlap_chars}")
        if problems:
            from cairn.core.errors import RequestError

            raise RequestError("invalid chunking settings: " + "; ".join(problems), details=problems)

    def for_embedder(self, max_tokens: int | None, count_tokens: Callable[[str], int] | None) -> ChunkingConfig:
        """These settings bounded by an embedder's window (``max_tokens`` with its special tokens:
        :data:`SPECIAL_TOKENS` are left for them); unchanged without a window or a counter, or when
        they already hold a smaller window (cut for another embedder a tenant may move to)."""
        if not max_tokens or count_tokens is None:
            return self
        window = max(MIN_WINDOW_TOKENS, max_tokens - SPECIAL_TOKENS)
        if self.max_tokens is not None and self.max_tokens <= window:
            return self
        return replace(self, max_tokens=window, count_tokens=count_tokens)

    def reserving(self, text: str) -> ChunkingConfig:
        """The window less what ``text`` (a title embedded before every chunk) and a section label take."""
        if self.max_tokens is None or self.count_tokens is None or not text:
            return self
        left = self.max_tokens - self.count_tokens(text) - LABEL_TOKENS
        return replace(self, max_tokens=max(MIN_WINDOW_TOKENS, left))


@dataclass(frozen=True)
class Chunk:
    text: str  # the prefix (if any) and text[start:end]
    start: int
    end: int
    kind: str = "text"
    heading_path: tuple[str, ...] = ()
    page: int | None = None
    page_end: int | None = None
    label: str = ""

    def citation(self) -> dict[str, str | int | list[str]]:
        """Flat metadata (as records hold it) that says where this chunk is in its document."""
        out: dict[str, str | int | list[str]] = {"citation.start": self.start, "citation.end": self.end, "citation.kind": self.kind}
        if self.heading_path:
            out["citation.heading_path"] = list(self.heading_path)
        if self.page is not None:
            out["citation.page"] = self.page
            if self.page_end is not None and self.page_end != self.page:
                out["citation.page_end"] = self.page_end
        if self.label:
            out["citation.label"] = self.label
        return out


@dataclass(frozen=True)
class _Piece:
    section: Section
    start: int  # offsets in the document's text
    end: int
    first: bool  # the piece starts its section
    body_start: int  # start without the overlap


# ----------------------------------------------------------------------------- Markdown sections


def markdown_sections(text: str, kind: str = "section") -> list[Section]:
    """A Markdown (or plain) text cut at ATX headings outside code fences, with heading paths."""
    heads: list[tuple[int, int, str]] = []  # (offset, level, title)
    fences = [m.start() for m in _FENCE.finditer(text)]
    for m in _HEADING.finditer(text):
        inside = bisect.bisect_left(fences, m.start()) % 2 == 1  # an odd number of fences before it
        if not inside:
            heads.append((m.start(), len(m.group(1)), m.group(2).strip()))
    out: list[Section] = []
    stack: list[tuple[int, str]] = []
    bounds = [h[0] for h in heads]
    if not bounds or bounds[0] > 0:
        _add(out, text, 0, bounds[0] if bounds else len(text), (), kind)
    for i, (pos, level, title) in enumerate(heads):
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, title))
        end = bounds[i + 1] if i + 1 < len(bounds) else len(text)
        _add(out, text, pos, end, tuple(t for _, t in stack), kind)
    return out


def _add(out: list[Section], text: str, start: int, end: int, path: tuple[str, ...], kind: str) -> None:
    while start < end and text[start] in "\r\n":
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    if end > start and text[start:end].strip():
        out.append(Section(text=text[start:end], start=start, kind=kind, heading_path=path))  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- splitting


def _split_section(text: str, sec: Section, cfg: ChunkingConfig) -> list[_Piece]:
    """Pieces of one section, each within the budget (a continuation leaves room for the overlap)."""
    s0, s1 = sec.start, sec.start + len(sec.text)
    # a repeated prefix (a table's header row) counts against the window unless it would take more
    # than half of it: then the body alone is fitted, or every piece would shrink to nothing
    prefix = sec.prefix if _within_tokens(cfg, sec.prefix, share=0.5) else ""
    if s1 - s0 <= cfg.chunk_chars and _within_tokens(cfg, prefix + text[s0:s1]):
        return [_Piece(sec, s0, s1, True, s0)]
    budget_first = cfg.chunk_chars
    budget_next = max(MIN_CHUNK_CHARS // 2, cfg.chunk_chars - cfg.overlap_chars - len(sec.prefix))
    paras = _paragraph_breaks(text, s0, s1)
    pieces: list[_Piece] = []
    pos = s0
    while pos < s1:
        budget = budget_first if not pieces else budget_next
        start = pos if not pieces else _overlap_start(text, pos, cfg.overlap_chars, s0)
        overlap = pos - start
        while start < pos and not _within_tokens(cfg, text[start:pos], share=OVERLAP_SHARE):
            overlap //= 2  # an overlap in a dense script would take the window: a shorter one
            start = _overlap_start(text, pos, overlap, s0) if overlap >= MIN_OVERLAP_CHARS else pos
        cut = s1 if s1 - pos <= budget else _best_cut(text, pos, pos + budget, paras)
        while cut > pos + 1 and cfg.max_tokens and cfg.count_tokens and not _within_tokens(cfg, prefix + text[start:cut]):
            # over the token window: a budget as much smaller as the piece is over, cut again
            used = cfg.count_tokens(prefix + text[start:cut])
            limit = pos + max(1, int((cut - pos) * 0.9 * cfg.max_tokens / max(used, 1)))
            cut = _best_cut(text, pos, min(limit, cut - 1), paras)
        body_start = pos
        pieces.append(_Piece(sec, start, cut, not pieces, body_start))
        pos = cut
        while pos < s1 and text[pos].isspace():
            pos += 1
    return pieces


def _within_tokens(cfg: ChunkingConfig, text: str, share: float = 1.0) -> bool:
    """``text`` takes at most ``share`` of the token window (always, without one)."""
    if cfg.max_tokens is None or cfg.count_tokens is None:
        return True
    return cfg.count_tokens(text) <= cfg.max_tokens * share


def _paragraph_breaks(text: str, s0: int, s1: int) -> list[int]:
    """Offsets just after each blank line in ``text[s0:s1]`` that is not inside a code fence."""
    fences = [m.start() for m in _FENCE.finditer(text, s0, s1)]
    out = []
    for m in _PARAGRAPH.finditer(text, s0, s1):
        if bisect.bisect_left(fences, m.start()) % 2 == 0:
            out.append(m.end())
    return out


def _best_cut(text: str, pos: int, limit: int, paras: list[int]) -> int:
    """The best place to end a piece that starts at ``pos`` and may reach ``limit``."""
    floor = pos + (limit - pos) // 3  # never cut a piece shorter than a third of the budget
    i = bisect.bisect_right(paras, limit) - 1
    if i >= 0 and paras[i] > floor:
        return paras[i]
    nl = text.rfind("\n", floor, limit)
    if nl > floor:
        return nl + 1
    best = -1
    for m in _SENTENCE_END.finditer(text, floor, limit):
        best = m.end()
    if best > floor:
        return best
    space = text.rfind(" ", floor, limit)
    return space + 1 if space > floor else limit


def _overlap_start(text: str, pos: int, overlap: int, floor: int) -> int:
    if overlap <= 0:
        return pos
    start = max(floor, pos - overlap)
    space = text.find(" ", start, pos)
    return space + 1 if 0 <= space < pos - 1 and start > floor else start


# ----------------------------------------------------------------------------- packing


def chunk_sections(text: str, sections: Sequence[Section], config: ChunkingConfig | None = None) -> list[Chunk]:
    """Chunks of ``text`` along ``sections`` (see the module doc)."""
    cfg = config or ChunkingConfig()
    pieces = [p for sec in sections for p in _split_section(text, sec, cfg)]
    chunks: list[Chunk] = []
    group: list[_Piece] = []
    for piece in pieces:
        if group and _fits(text, group, piece, cfg):
            group.append(piece)
            continue
        if group:
            chunks.append(_make_chunk(text, group))
        group = [piece]
    if group:
        chunks.append(_make_chunk(text, group))
    return chunks


def _fits(text: str, group: list[_Piece], piece: _Piece, cfg: ChunkingConfig) -> bool:
    last = group[-1]
    if not (piece.first and group[0].first and last.section.mergeable and piece.section.mergeable):
        return False
    if last.section.page != piece.section.page or last.section.kind != piece.section.kind:
        return False
    if piece.end - group[0].start + len(group[0].section.prefix) > cfg.chunk_chars:
        return False
    if not _within_tokens(cfg, group[0].section.prefix + text[group[0].start : piece.end]):
        return False
    size = last.end - group[0].start
    new_heading = piece.section.heading_path != last.section.heading_path
    return not (new_heading and size > cfg.chunk_chars // 3)


def _make_chunk(text: str, group: list[_Piece]) -> Chunk:
    head, tail = group[0], group[-1]
    sec = head.section
    body = text[head.start : tail.end]
    prefix = sec.prefix if sec.prefix and not (head.first and body.startswith(sec.prefix.strip())) else ""
    label = sec.label
    if not label and sec.heading_path:
        label = sec.heading_path[-1]
    return Chunk(
        text=(prefix + body) if prefix else body,
        start=head.start,
        end=tail.end,
        kind=sec.kind,
        heading_path=sec.heading_path,
        page=sec.page,
        page_end=tail.section.page,
        label=label,
    )


def chunk(text: str, config: ChunkingConfig | None = None) -> list[str]:
    """The chunk texts of a Markdown or plain text (one chunk when it is short)."""
    return [c.text for c in chunk_sections(text, markdown_sections(text), config)]
