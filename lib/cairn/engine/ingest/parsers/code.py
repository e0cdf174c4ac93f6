"""Source code: one section per top-level function or class (a large class: one per method).

* Python: the standard library's ``ast`` (decorators and docstrings stay with their definition).
* Other languages: tree-sitter grammars from ``tree-sitter-language-pack`` when it is installed
  (the ``cairn-context[code]`` extra; it bundles its grammars, nothing is downloaded), else a heuristic:
  a new section starts at a non-indented line after a blank line (how most code is laid out
  between top-level definitions).

Module-level code between definitions (imports, constants) forms sections of its own, which
the chunker may pack together with their small neighbours.
"""

from __future__ import annotations

import ast
import bisect
import importlib.util
import re
import warnings
from pathlib import Path

from cairn.engine.ingest.parsers.base import Limits, Parsed, Section, read_text

BIG_CLASS_LINES = 60

LANGUAGES = {
    ".js": "javascript", ".jsx": "javascript", ".mjs": "javascript", ".cjs": "javascript",
    ".ts": "typescript", ".tsx": "tsx", ".go": "go", ".java": "java", ".kt": "kotlin", ".rs": "rust",
    ".c": "c", ".h": "c", ".cc": "cpp", ".cpp": "cpp", ".hpp": "cpp", ".cs": "csharp", ".rb": "ruby",
    ".php": "php", ".swift": "swift", ".scala": "scala", ".sh": "bash", ".bash": "bash", ".lua": "lua",
    ".sql": "sql",
}
_DEFINITION_WORDS = ("function", "class", "method", "interface", "struct", "impl", "enum", "trait", "module",
                     "declaration", "definition", "type_alias", "namespace", "object")


class _Lines:
    def __init__(self, text: str) -> None:
        self.text = text
        self.starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def offset(self, lineno: int) -> int:  # 1-based line -> offset of its first character
        return self.starts[min(max(lineno, 1), len(self.starts)) - 1]

    def end(self, lineno: int) -> int:  # offset just after line ``lineno`` (without its newline)
        if lineno >= len(self.starts):
            return len(self.text)
        return self.starts[lineno] - 1


def _spans_to_sections(text: str, spans: list[tuple[int, int, str, tuple[str, ...]]], lang: str) -> list[Section]:
    """Sections for definition spans (start, end, label, path), with the code between them too."""
    out: list[Section] = []
    pos = 0
    for start, end, label, path in sorted(spans):
        if start < pos:
            continue
        gap = text[pos:start]
        if gap.strip():
            lead = len(gap) - len(gap.lstrip())
            out.append(Section(text=gap.strip(), start=pos + lead, kind="code", label=f"{lang} module code"))
        body = text[start:end].rstrip()
        if body.strip():
            out.append(Section(text=body, start=start, kind="code", label=label, heading_path=path))
        pos = end
    tail = text[pos:]
    if tail.strip():
        lead = len(tail) - len(tail.lstrip())
        out.append(Section(text=tail.strip(), start=pos + lead, kind="code", label=f"{lang} module code"))
    return out



def parse_python(path: Path, limits: Limits) -> Parsed:
    text = read_text(path, limits)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)
            tree = ast.parse(text)
    except SyntaxError as exc:  # still worth indexing: cut it the way other languages are cut
        parsed = _heuristic(text, "python")
        parsed.warnings.append(f"not valid Python ({exc.msg}, line {exc.lineno}): cut at top-level lines instead")
        return parsed
    lines = _Lines(text)
    spans: list[tuple[int, int, str, tuple[str, ...]]] = []
    for node in tree.body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        first = min([node.lineno] + [d.lineno for d in node.decorator_list])
        last = node.end_lineno or node.lineno
        kind = "class" if isinstance(node, ast.ClassDef) else "def"
        if isinstance(node, ast.ClassDef) and last - first > BIG_CLASS_LINES:
            methods = [n for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
            head_end = min([m.lineno for m in methods] + [min([d.lineno for d in m.decorator_list] or [m.lineno]) for m in methods]) - 1 if methods else last
            spans.append((lines.offset(first), lines.end(head_end), f"class {node.name}", (node.name,)))
            for m in methods:
                m_first = min([m.lineno] + [d.lineno for d in m.decorator_list])
                spans.append((lines.offset(m_first), lines.end(m.end_lineno or m.lineno), f"def {node.name}.{m.name}", (node.name, m.name)))
            continue
        spans.append((lines.offset(first), lines.end(last), f"{kind} {node.name}", (node.name,)))
    return Parsed(text=text, sections=_spans_to_sections(text, spans, "python"), format="python")


def _heuristic(text: str, lang: str) -> Parsed:
    starts = [0] + [m.start() + 1 for m in re.finditer(r"\n[ \t]*\n(?=[^\s}\])])", text)]
    spans: list[tuple[int, int, str, tuple[str, ...]]] = []
    for i, s in enumerate(starts):
        while s < len(text) and text[s] in "\r\n \t":
            s += 1
        end = starts[i + 1] if i + 1 < len(starts) else len(text)
        first_line = text[s:end].split("\n", 1)[0].strip()
        spans.append((s, end, first_line[:80], ()))
    return Parsed(text=text, sections=_spans_to_sections(text, spans, lang), format=lang)


def tree_sitter_available() -> bool:
    return importlib.util.find_spec("tree_sitter_language_pack") is not None


def parse_code(path: Path, limits: Limits) -> Parsed:
    text = read_text(path, limits)
    lang = LANGUAGES.get(path.suffix.lower(), "code")
    if lang == "code" or not tree_sitter_available():
        return _heuristic(text, lang)
    try:
        from tree_sitter_language_pack import get_parser

        parser = get_parser(lang)
    except Exception:  # noqa: BLE001 - a grammar that is missing (or would be downloaded) falls back
        return _heuristic(text, lang)
    data = text.encode("utf-8")
    tree = parser.parse(data)
    # tree-sitter reports byte offsets; map them to character offsets
    char_of = _byte_to_char(text) if len(data) != len(text) else None
    spans: list[tuple[int, int, str, tuple[str, ...]]] = []
    for node in tree.root_node.children:
        if not any(w in node.type for w in _DEFINITION_WORDS):
            continue
        name_node = node.child_by_field_name("name")
        name = name_node.text.decode("utf-8", "replace") if name_node is not None and name_node.text else ""
        start, end = node.start_byte, node.end_byte
        if char_of is not None:
            start, end = char_of(start), char_of(end)
        label = f"{node.type.replace('_', ' ')} {name}".strip()
        spans.append((start, end, label, (name,) if name else ()))
    return Parsed(text=text, sections=_spans_to_sections(text, spans, lang), format=lang)


def _byte_to_char(text: str):
    offsets = []  # byte offset of each character
    pos = 0
    for ch in text:
        offsets.append(pos)
        pos += len(ch.encode("utf-8"))
    offsets.append(pos)
    return lambda b: bisect.bisect_left(offsets, b)
