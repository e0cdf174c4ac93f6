"""Word (python-docx) and PowerPoint (python-pptx).

Both are zip files: :func:`~.base.check_zip` refuses a zip bomb before either library opens it.

* DOCX: paragraphs in order; a paragraph styled ``Heading N`` (or ``Title``) starts a section with
  that heading path; tables become Markdown table lines under the section they sit in.
* PPTX: one section per slide (``slide N: title``), its title, text frames, tables and notes; slides
  never share a chunk, so a match cites its slide.
"""

from __future__ import annotations

from pathlib import Path

from cairn.engine.ingest.parsers.base import Limits, Parsed, ParseFailed, SectionWriter, check_zip


def _checked(path: Path, limits: Limits) -> None:
    size = path.stat().st_size
    if size > limits.max_bytes:
        raise ParseFailed(f"file is {size:,} bytes; the limit is {limits.max_bytes:,}")
    check_zip(path, limits)


def _heading_level(style_name: str) -> int | None:
    name = (style_name or "").strip().lower()
    if name == "title":
        return 1
    if name.startswith("heading"):
        rest = name[len("heading"):].strip()
        return int(rest) if rest.isdigit() else 1
    return None


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(c.replace("|", "\\|").replace("\n", " ").strip() for c in cells) + " |"


def parse_docx(path: Path, limits: Limits) -> Parsed:
    import docx
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    _checked(path, limits)
    document = docx.Document(str(path))
    out = SectionWriter()
    stack: list[tuple[int, str]] = []
    lines: list[str] = []
    title = (document.core_properties.title or "").strip()

    def flush() -> None:
        if lines:
            out.add("\n\n".join(lines), kind="section", heading_path=tuple(t for _, t in stack))
            lines.clear()

    for block in document.iter_inner_content():
        if isinstance(block, Paragraph):
            text = block.text.strip()
            if not text:
                continue
            level = _heading_level(block.style.name if block.style is not None else "")
            if level is not None:
                flush()
                while stack and stack[-1][0] >= level:
                    stack.pop()
                stack.append((level, text))
                lines.append("#" * min(level, 6) + " " + text)
            else:
                lines.append(text)
        elif isinstance(block, Table):
            rows = [_row([c.text for c in r.cells]) for r in block.rows]
            if rows:
                rows.insert(1, _row(["---"] * (rows[0].count("|") - 1)))
                lines.append("\n".join(rows))
        if out.length + sum(len(x) for x in lines) > limits.max_chars:
            break
    flush()
    return out.build(title=title, format="docx")


def parse_pptx(path: Path, limits: Limits) -> Parsed:
    from pptx import Presentation

    _checked(path, limits)
    deck = Presentation(str(path))
    out = SectionWriter()
    warnings: list[str] = []
    for number, slide in enumerate(deck.slides, 1):
        if number > limits.max_pages:
            warnings.append(f"only the first {limits.max_pages:,} slides were read")
            break
        title_shape = slide.shapes.title
        slide_title = title_shape.text_frame.text.strip() if title_shape is not None and title_shape.has_text_frame else ""
        parts = [f"## Slide {number}" + (f": {slide_title}" if slide_title else "")]
        for shape in slide.shapes:
            if title_shape is not None and shape.shape_id == title_shape.shape_id:
                continue
            if shape.has_text_frame:
                text = "\n".join(p.text.strip() for p in shape.text_frame.paragraphs if p.text.strip())
                if text:
                    parts.append(text)
            if getattr(shape, "has_table", False) and shape.has_table:
                rows = [_row([c.text for c in r.cells]) for r in shape.table.rows]
                if rows:
                    rows.insert(1, _row(["---"] * (rows[0].count("|") - 1)))
                    parts.append("\n".join(rows))
        if slide.has_notes_slide:
            notes = slide.notes_slide.notes_text_frame.text.strip() if slide.notes_slide.notes_text_frame else ""
            if notes:
                parts.append(f"Notes: {notes}")
        label = f"slide {number}" + (f": {slide_title}" if slide_title else "")
        out.add("\n\n".join(parts), kind="slide", page=number, label=label, mergeable=False,
                heading_path=(slide_title,) if slide_title else ())
        if out.length > limits.max_chars:
            warnings.append(f"stopped after slide {number}: the text passed {limits.max_chars:,} characters")
            break
    title = (deck.core_properties.title or "").strip()
    return out.build(title=title, format="pptx", warnings=warnings)
