"""YAML (PyYAML, safe loader) and XML (defusedxml: no DTD entities, no external references).

* YAML keeps its source text (it is already readable) and is cut at its top-level keys; it is
  loaded with ``safe_load_all`` first, so a file that is not YAML is rejected with the parser's
  message. Aliases are never expanded into the text, so an alias bomb costs nothing.
* XML becomes text: one section per child of the root element (a record), each line
  ``path/to/element [attr=value]: text``, bounded by ``Limits.max_chars``.
"""

from __future__ import annotations

import re
from pathlib import Path

from cairn.engine.ingest.parsers.base import (
    Limits,
    Parsed,
    ParseFailed,
    Section,
    SectionWriter,
    decode_text,
    read_bytes,
)

_TOP_KEY = re.compile(r"(?m)^(?:---[ \t]*\n)?([^\s#\-][^:\n]*):")


def parse_yaml(path: Path, limits: Limits) -> Parsed:
    import yaml

    text = decode_text(read_bytes(path, limits.max_text_bytes))
    try:
        docs = list(yaml.safe_load_all(text))
    except yaml.YAMLError as exc:
        raise ParseFailed(f"is not valid YAML: {str(exc).splitlines()[0]}") from None
    if not any(d is not None for d in docs):
        raise ParseFailed("holds no YAML data")
    starts = [(m.start(), m.group(1).strip()) for m in _TOP_KEY.finditer(text)]
    sections: list[Section] = []
    if not starts or starts[0][0] > 0:
        head = text[: starts[0][0] if starts else len(text)].rstrip()
        if head.strip():
            sections.append(Section(text=head, start=0, kind="data"))
    for i, (pos, key) in enumerate(starts):
        end = starts[i + 1][0] if i + 1 < len(starts) else len(text)
        body = text[pos:end].rstrip()
        if body.strip():
            sections.append(Section(text=body, start=pos, kind="data", heading_path=(key,), label=key))
    return Parsed(text=text, sections=sections, format="yaml")


def _local(tag: object) -> str:
    name = tag if isinstance(tag, str) else "node"
    return name.rsplit("}", 1)[-1]


def parse_xml(path: Path, limits: Limits) -> Parsed:
    from xml.etree.ElementTree import ParseError

    import defusedxml.ElementTree as DET
    from defusedxml import DefusedXmlException

    raw = read_bytes(path, min(limits.max_bytes, limits.max_text_bytes))
    try:
        root = DET.fromstring(raw, forbid_dtd=False, forbid_entities=True, forbid_external=True)
    except DefusedXmlException as exc:
        raise ParseFailed(f"was refused: {type(exc).__name__} (entity declarations and external references are not allowed)") from None
    except ParseError as exc:
        raise ParseFailed(f"is not well-formed XML: {exc}") from None
    out = SectionWriter()
    budget = [limits.max_chars]

    def lines(el: object, prefix: str, acc: list[str], depth: int) -> None:
        if budget[0] <= 0 or depth > 100:
            return
        name = f"{prefix}/{_local(el.tag)}" if prefix else _local(el.tag)  # type: ignore[attr-defined]
        attrs = " ".join(f"{_local(k)}={v}" for k, v in list(el.attrib.items())[:10])  # type: ignore[attr-defined]
        text = (el.text or "").strip()  # type: ignore[attr-defined]
        if text or attrs:
            line = f"{name}" + (f" [{attrs}]" if attrs else "") + (f": {text}" if text else "")
            acc.append(line)
            budget[0] -= len(line) + 1
        for child in el:  # type: ignore[attr-defined]
            lines(child, name, acc, depth + 1)

    children = list(root)
    if not children:
        acc: list[str] = []
        lines(root, "", acc, 0)
        out.add("\n".join(acc), kind="data", heading_path=(_local(root.tag),))
    for child in children:
        acc = []
        lines(child, _local(root.tag), acc, 1)
        ident = next((child.attrib[k] for k in ("id", "name", "key", "title") if k in child.attrib), "")
        label = _local(child.tag) + (f" {ident}" if ident else "")
        out.add("\n".join(acc), kind="data", heading_path=(label,), label=label)
        if budget[0] <= 0:
            break
    parsed = out.build(format="xml")
    if budget[0] <= 0:
        parsed.warnings.append(f"text cut at about {limits.max_chars:,} characters")
    return parsed
