"""Tables: CSV and TSV (standard library), XLSX (openpyxl, read-only streaming mode).

A table becomes sections of rows, each section prefixed by the header row, so every chunk of a
long table still names its columns. Rows are written as Markdown table lines
(``| a | b |``), which embedders and readers both handle well.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator
from pathlib import Path

from cairn.engine.ingest.parsers.base import (
    Limits,
    Parsed,
    ParseFailed,
    SectionWriter,
    check_zip,
    decode_text,
    read_bytes,
)

ROWS_PER_SECTION = 20


def _cell(value: object) -> str:
    if value is None:
        return ""
    text = str(value).replace("\r", " ").replace("\n", " ").replace("|", "\\|").strip()
    return text[:500]


def _line(cells: Iterable[object]) -> str:
    return "| " + " | ".join(_cell(c) for c in cells) + " |"


def write_table(out: SectionWriter, rows: Iterator[list[object]], name: str, limits: Limits, warnings: list[str]) -> int:
    """Write one table (its first non-empty row is the header); returns the number of data rows."""
    header: list[object] | None = None
    batch: list[str] = []
    first_row = n = 0
    prefix = ""
    for row in rows:
        if header is None:
            if not any(_cell(c) for c in row):
                continue
            header = list(row)
            width = len(header)
            prefix = (f"{name}\n" if name else "") + _line(header) + "\n" + _line(["---"] * width) + "\n"
            continue
        if not any(_cell(c) for c in row):
            continue
        n += 1
        if n > limits.max_rows:
            warnings.append(f"{name or 'table'}: only the first {limits.max_rows:,} rows were read")
            break
        if not batch:
            first_row = n
        batch.append(_line(row))
        if len(batch) == ROWS_PER_SECTION:
            _flush(out, batch, prefix, name, first_row, n)
            batch = []
    if batch:
        _flush(out, batch, prefix, name, first_row, n)
    if header is not None and n == 0:
        out.add(prefix.rstrip("\n"), kind="table", label=name, prefix="", mergeable=True)
    return n


def _flush(out: SectionWriter, lines: list[str], prefix: str, name: str, first: int, last: int) -> None:
    label = f"{name} rows {first}-{last}".strip() if name else f"rows {first}-{last}"
    body = "\n".join(lines)
    # the first section carries the header itself; later ones get it as the repeated prefix
    text = prefix + body if first == 1 else body
    out.add(text, kind="table", label=label, prefix=prefix, heading_path=(name,) if name else ())


def _delimited(path: Path, limits: Limits, delimiter: str, fmt: str) -> Parsed:
    text = decode_text(read_bytes(path, limits.max_text_bytes))
    out = SectionWriter(separator="\n")
    warnings: list[str] = []
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    try:
        rows = write_table(out, (list(r) for r in reader), "", limits, warnings)
    except csv.Error as exc:
        raise ParseFailed(f"is not valid {fmt.upper()}: {exc}") from None
    parsed = out.build(format=fmt, warnings=warnings)
    parsed.metadata["rows"] = rows
    return parsed


def parse_csv(path: Path, limits: Limits) -> Parsed:
    return _delimited(path, limits, ",", "csv")


def parse_tsv(path: Path, limits: Limits) -> Parsed:
    return _delimited(path, limits, "\t", "tsv")


def parse_xlsx(path: Path, limits: Limits) -> Parsed:
    """Every sheet, in order, as a table titled with the sheet's name (cached values, not formulas)."""
    import openpyxl

    if path.stat().st_size > limits.max_bytes:
        raise ParseFailed(f"file is {path.stat().st_size:,} bytes; the limit is {limits.max_bytes:,}")
    check_zip(path, limits)
    wb = openpyxl.load_workbook(path, read_only=True, data_only=True)
    out = SectionWriter(separator="\n\n")
    warnings: list[str] = []
    total = 0
    try:
        for ws in wb.worksheets:
            rows = (list(r) for r in ws.iter_rows(values_only=True))
            total += write_table(out, rows, f"Sheet: {ws.title}", limits, warnings)
            if out.length > limits.max_chars:
                warnings.append(f"stopped after sheet {ws.title!r}: the text passed {limits.max_chars:,} characters")
                break
    finally:
        wb.close()
    parsed = out.build(format="xlsx", warnings=warnings)
    parsed.metadata["rows"] = total
    return parsed
