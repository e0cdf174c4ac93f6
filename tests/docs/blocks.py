"""The fenced code blocks of README.md and docs/*.md, with what the docs-as-tests harness does with each.

Every fence names its language. ``sh``/``bash``/``shell`` and ``python`` blocks run, in the order
of the file, against a fresh home (one working folder and one Python process per file, so a block
sees the variables and files of the blocks before it). A block tagged ``output`` right after a
runnable block is what that block prints: it must match (doctest rules: whitespace is normalised
and ``...`` stands for any text). Any other language (``json``, ``text``, ``http``, ...) is shown,
never run.

An HTML comment on the line before a fence says something else:

- ``<!-- docs-test: skip <reason> -->``: not runnable as written, for the reason given (needs AWS,
  a fragment of the block above, ...). The reason is required.
- ``<!-- docs-test: background <url> -->``: a server; it is started, the next blocks run once
  ``<url>`` answers, and it is stopped when the file is done.
- ``<!-- docs-test: exit=<N> -->``: the block is expected to end with status N (an error shown).

The ports the docs use (8080 for ``cairn serve``, 8765 for ``cairn mcp --transport http``) are
replaced by free ones in a page's blocks, so that two runs on one machine do not collide.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

SHELL = frozenset({"sh", "bash", "shell"})
PYTHON = frozenset({"python", "py"})
OUTPUT = "output"
SHOWN = frozenset({"json", "text", "http", "yaml", "toml", "jsonc", "ini", "console-output", "diff", "ts", "typescript"})
PORTS = ("8080", "8765")
_FENCE = re.compile(r"^(?P<indent>[ ]*)(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")
_MARK = re.compile(r"^\s*<!--\s*docs-test:\s*(?P<what>.*?)\s*-->\s*$")


@dataclass
class Block:
    path: Path
    line: int  # 1-based line of the opening fence
    lang: str
    code: str
    mark: str = ""  # the docs-test comment before the fence, if any
    output: Block | None = field(default=None, repr=False)  # the ``output`` block that follows

    @property
    def kind(self) -> str:
        if self.lang in SHELL:
            return "shell"
        if self.lang in PYTHON:
            return "python"
        return self.lang

    @property
    def runnable(self) -> bool:
        return self.kind in ("shell", "python") and not self.mark.startswith("skip")

    @property
    def skip_reason(self) -> str:
        return self.mark[len("skip"):].strip(" :—-") if self.mark.startswith("skip") else ""

    @property
    def background(self) -> str | None:
        return self.mark.split(None, 1)[1].strip() if self.mark.startswith("background") else None

    @property
    def expected_exit(self) -> int:
        found = re.match(r"exit=(\d+)", self.mark)
        return int(found.group(1)) if found else 0

    @property
    def where(self) -> str:
        return f"{self.path.name}:{self.line}"


def blocks(path: Path) -> list[Block]:
    """The fenced blocks of one Markdown file, in order, each ``output`` block attached to the block before it."""
    lines = path.read_text(encoding="utf-8").splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        opened = _FENCE.match(lines[i])
        if not opened:
            i += 1
            continue
        indent, fence, info = opened["indent"], opened["fence"], opened["info"].strip()
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not (lines[j].strip().startswith(fence) and lines[j].strip().strip(fence[0]) == ""):
            body.append(lines[j][len(indent):] if lines[j].startswith(indent) else lines[j].lstrip())
            j += 1
        prev = next((lines[k] for k in range(i - 1, -1, -1) if lines[k].strip()), "")
        mark = _MARK.match(prev)
        block = Block(path, i + 1, info.split()[0].lower() if info else "", "\n".join(body) + "\n",
                      mark["what"] if mark else "")
        if block.lang == OUTPUT and out:
            out[-1].output = block
        out.append(block)
        i = j + 1
    return out


def problems(block: Block) -> list[str]:
    """What is wrong with a block's declaration (not with what it does)."""
    found = []
    if not block.lang:
        found.append(f"{block.where}: the fence names no language; use sh, python, output, json or text")
    elif block.kind not in ("shell", "python", OUTPUT) and block.lang not in SHOWN:
        found.append(f"{block.where}: unknown language {block.lang!r}")
    if block.mark.startswith("skip") and not block.skip_reason:
        found.append(f"{block.where}: `docs-test: skip` needs the reason the block cannot run")
    if block.mark and not re.match(r"(skip|background|exit=\d+)", block.mark):
        found.append(f"{block.where}: unknown docs-test mark {block.mark!r}")
    if block.lang == OUTPUT and block.mark:
        found.append(f"{block.where}: an output block takes no mark")
    return found
