"""Document parsers behind one interface, chosen by file extension (or MIME type).

Each format family lives in its own module and imports its library only when a file of that
format is parsed, so ``import cairn`` stays light and a missing library costs only its formats:

=============================  ==========================  =============================
extensions                     module                      library (``cairn-context[docs]``)
=============================  ==========================  =============================
.md .markdown .txt .text .rst  :mod:`.text`                (standard library)
.csv .tsv                      :mod:`.tables`              (standard library)
.eml                           :mod:`.mail`                (standard library)
.py .pyi                       :mod:`.code`                (standard library: ``ast``)
.js .ts .go .java .rs .c ...   :mod:`.code`                tree-sitter-language-pack when
                                                           installed, else a heuristic
.xlsx                          :mod:`.tables`              openpyxl
.pdf                           :mod:`.pdf`                 pypdf
.html .htm                     :mod:`.html`                trafilatura
.docx                          :mod:`.office`              python-docx
.pptx                          :mod:`.office`              python-pptx
.yaml .yml .xml                :mod:`.structured`          PyYAML, defusedxml
=============================  ==========================  =============================

``.json`` and ``.jsonl`` are not parsed here: they hold documents (see :mod:`cairn.engine.ingest.sources`).

A parser is a function ``parse(path, limits) -> Parsed`` that raises
:class:`~.base.ParseFailed` with a reason. :func:`parse_file` runs it, in this process or (for the
formats whose libraries read untrusted binary structures) under an :class:`~.isolation.IsolatedRunner`
that bounds its time and memory.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cairn.core.distribution import install_hint
from cairn.engine.ingest.parsers.base import Limits, Parsed, ParseFailed, ParserMissing, Section, SectionWriter

DOCS_EXTRA = install_hint("docs")


@dataclass(frozen=True)
class ParserSpec:
    """One format: the module and function that parse it, and the packages it needs."""

    format: str
    module: str  # a module of this package ("pdf"), or a full dotted name for a parser of your own
    function: str
    needs: tuple[str, ...] = ()  # import names of the libraries it needs
    mime: tuple[str, ...] = ()
    isolate: bool = False  # parse in a bounded worker process (untrusted binary structures)

    def missing(self) -> list[str]:
        return [name for name in self.needs if importlib.util.find_spec(name) is None]

    def load(self) -> Callable[[Path, Limits], Parsed]:
        missing = self.missing()
        if missing:
            raise ParserMissing(f"{self.format} files need {', '.join(missing)}: {DOCS_EXTRA}")
        name = self.module if "." in self.module else f"{__name__}.{self.module}"
        module = importlib.import_module(name)
        return getattr(module, self.function)


_CODE_SUFFIXES = (
    ".js", ".jsx", ".mjs", ".cjs", ".ts", ".tsx", ".go", ".java", ".kt", ".rs", ".c", ".h", ".cc", ".cpp",
    ".hpp", ".cs", ".rb", ".php", ".swift", ".scala", ".sh", ".bash", ".lua", ".sql",
)

PARSERS: dict[str, ParserSpec] = {
    **dict.fromkeys((".md", ".markdown"), ParserSpec("markdown", "text", "parse_markdown", mime=("text/markdown",))),
    **dict.fromkeys((".txt", ".text", ".rst"), ParserSpec("text", "text", "parse_text", mime=("text/plain",))),
    ".csv": ParserSpec("csv", "tables", "parse_csv", mime=("text/csv",)),
    ".tsv": ParserSpec("tsv", "tables", "parse_tsv", mime=("text/tab-separated-values",)),
    ".eml": ParserSpec("email", "mail", "parse_eml", mime=("message/rfc822",)),
    **dict.fromkeys((".py", ".pyi"), ParserSpec("python", "code", "parse_python", mime=("text/x-python",))),
    **dict.fromkeys(_CODE_SUFFIXES, ParserSpec("code", "code", "parse_code")),
    ".pdf": ParserSpec("pdf", "pdf", "parse_pdf", ("pypdf",), ("application/pdf",), isolate=True),
    **dict.fromkeys(
        (".html", ".htm", ".xhtml"),
        ParserSpec("html", "html", "parse_html", ("trafilatura",), ("text/html", "application/xhtml+xml"), isolate=True),
    ),
    ".docx": ParserSpec(
        "docx", "office", "parse_docx", ("docx",),
        ("application/vnd.openxmlformats-officedocument.wordprocessingml.document",), isolate=True,
    ),
    ".pptx": ParserSpec(
        "pptx", "office", "parse_pptx", ("pptx",),
        ("application/vnd.openxmlformats-officedocument.presentationml.presentation",), isolate=True,
    ),
    ".xlsx": ParserSpec(
        "xlsx", "tables", "parse_xlsx", ("openpyxl",),
        ("application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",), isolate=True,
    ),
    **dict.fromkeys((".yaml", ".yml"), ParserSpec("yaml", "structured", "parse_yaml", ("yaml",), ("application/yaml", "text/yaml"), isolate=True)),
    ".xml": ParserSpec("xml", "structured", "parse_xml", ("defusedxml",), ("application/xml", "text/xml"), isolate=True),
}

_BY_MIME = {m: spec for spec in PARSERS.values() for m in spec.mime}


def parser_for(path: Path | str, mime: str | None = None) -> ParserSpec | None:
    """The parser for a file name (by its extension), else for a MIME type; ``None`` if unsupported."""
    spec = PARSERS.get(Path(path).suffix.lower())
    if spec is None and mime:
        spec = _BY_MIME.get(mime.split(";")[0].strip().lower())
    return spec


def supported_suffixes() -> list[str]:
    return sorted(PARSERS)


def parse_in_process(spec: ParserSpec, path: Path, limits: Limits) -> Parsed:
    """Run ``spec``'s parser here; any exception a library raises becomes a :class:`ParseFailed`."""
    fn = spec.load()
    try:
        parsed = fn(path, limits)
    except ParseFailed:
        raise
    except RecursionError:
        raise ParseFailed("is nested too deeply to parse") from None
    except MemoryError:
        raise ParseFailed("needs more memory than a parse may use") from None
    except Exception as exc:  # noqa: BLE001 - a library's error on a bad file is a rejected file, not a crash
        raise ParseFailed(f"could not be parsed as {spec.format}: {type(exc).__name__}: {str(exc)[:300]}") from None
    if not parsed.text.strip():
        raise ParseFailed("is empty")
    parsed.format = parsed.format or spec.format
    return parsed


__all__ = [
    "DOCS_EXTRA",
    "PARSERS",
    "Limits",
    "ParserMissing",
    "ParseFailed",
    "Parsed",
    "ParserSpec",
    "Section",
    "SectionWriter",
    "parse_in_process",
    "parser_for",
    "supported_suffixes",
]
