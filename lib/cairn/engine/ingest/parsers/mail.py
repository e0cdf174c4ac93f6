"""E-mail messages (``.eml``, standard library ``email`` package): the headers that matter
(subject, from, to, date), the body (plain text preferred; HTML reduced to its text), and the
names of attachments (which are listed, not parsed)."""

from __future__ import annotations

import re
from email import policy
from email.parser import BytesParser
from pathlib import Path

from cairn.engine.ingest.parsers.base import Limits, Parsed, ParseFailed, Section, read_bytes

_TAGS = re.compile(r"<(script|style)[^>]*>.*?</\1>|<[^>]+>", re.IGNORECASE | re.DOTALL)


def _html_text(html: str) -> str:
    try:
        from cairn.engine.ingest.parsers.html import html_to_markdown

        _, md = html_to_markdown(html)
        if md:
            return md
    except ImportError:
        pass
    import html as htmllib

    return re.sub(r"[ \t]+", " ", htmllib.unescape(_TAGS.sub(" ", html))).strip()


def parse_eml(path: Path, limits: Limits) -> Parsed:
    from cairn.engine.ingest.chunking import markdown_sections

    raw = read_bytes(path, limits.max_bytes)
    try:
        msg = BytesParser(policy=policy.default).parsebytes(raw)
    except Exception as exc:  # noqa: BLE001 - the parser is lenient; anything raised means an unreadable message
        raise ParseFailed(f"is not a readable e-mail message: {exc}") from None
    subject = str(msg.get("subject", "") or "").strip()
    header_lines = [f"{name}: {str(msg.get(name, '')).strip()}" for name in ("Subject", "From", "To", "Cc", "Date") if msg.get(name)]
    if not header_lines:
        raise ParseFailed("has no e-mail headers (Subject, From, To, Date)")
    body_part = msg.get_body(preferencelist=("plain", "html"))
    body = ""
    if body_part is not None:
        try:
            content = body_part.get_content()
        except (LookupError, ValueError) as exc:
            raise ParseFailed(f"has a body that cannot be decoded: {exc}") from None
        body = _html_text(content) if body_part.get_content_type() == "text/html" else str(content)
    attachments = [name for part in msg.iter_attachments() if (name := part.get_filename())]
    head = "\n".join(header_lines) + ("\nAttachments: " + ", ".join(attachments) if attachments else "")
    text = head + "\n\n" + body.strip()
    text = text[: limits.max_chars]
    offset = len(head) + 2
    sections = [Section(text=head, start=0, kind="message", label="headers")]
    for s in markdown_sections(text[offset:], kind="message"):
        sections.append(Section(text=s.text, start=s.start + offset, kind="message", heading_path=s.heading_path))
    parsed = Parsed(text=text, sections=sections, title=subject, format="email")
    if attachments:
        parsed.metadata["attachments"] = len(attachments)
    return parsed
