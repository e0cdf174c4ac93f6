"""The docs name what exists, and what exists is in the docs: every command in docs/cli.md, every
route in docs/api.md, and every ``cairn.…`` a docstring or a page names can be imported."""

from __future__ import annotations

import argparse
import ast
import importlib
import json
import re
from pathlib import Path

import pytest

from cairn.cli.main import build_parser

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
_DOTTED = re.compile(r"(?<![\w./-])(cairn(?:\.[A-Za-z_][A-Za-z0-9_]*)+)")


def _commands(parser: argparse.ArgumentParser, prefix: str = "cairn") -> list[str]:
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out.append(f"{prefix} {name}")
                out.extend(_commands(sub, f"{prefix} {name}"))
    return out


def test_every_command_is_in_docs_cli():
    page = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    missing = [c for c in _commands(build_parser()) if f"`{c}" not in page]
    assert not missing, f"commands docs/cli.md does not describe: {missing}"


def test_every_route_is_in_docs_api():
    page = (REPO / "docs" / "api.md").read_text(encoding="utf-8")
    doc = json.loads((REPO / "docs" / "openapi.json").read_text())
    mentioned = {(m, re.sub(r"\{[^}]+\}", "{}", p)) for m, p in re.findall(r"`(GET|POST|PUT|DELETE|PATCH) (/v1/[^`?\s]*)", page)}
    routes = {(m.upper(), re.sub(r"\{[^}]+\}", "{}", p)) for p, ops in doc["paths"].items() for m in ops}
    missing = sorted(routes - mentioned)
    assert not missing, f"routes docs/api.md's table does not list: {missing}"


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return False
        return True
    return False


_ROLE = re.compile(r":(?:func|class|mod|meth|attr|data|exc|obj):`~?([^`<]+)`|``([^`]+)``")
_INLINE = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")


def _names(text: str, pattern: re.Pattern[str]) -> list[str]:
    out = []
    for match in pattern.finditer(text):
        literal = next(g for g in match.groups() if g)
        out += [n.rstrip(".") for n in _DOTTED.findall(literal.split("(")[0]) if literal.startswith(n)]
    return out


def _outside_fences(text: str) -> str:
    return re.sub(r"^(\s*)(`{3,}|~{3,}).*?^\1\2\s*$", "", text, flags=re.M | re.S)


def _named_in_docstrings() -> dict[str, str]:
    """``cairn.x.y`` in docstrings (reST roles and literals) and in the docs' inline code; a name
    in a code example (``cairn = Cairn.from_settings(); cairn.find(...)``) is a variable, not checked."""
    found: dict[str, str] = {}
    for path in sorted((REPO / "lib" / "cairn").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                for name in _names(ast.get_docstring(node) or "", _ROLE):
                    found.setdefault(name, str(path.relative_to(REPO)))
    for page in [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]:
        for name in _names(_outside_fences(page.read_text(encoding="utf-8")), _INLINE):
            found.setdefault(name, str(page.relative_to(REPO)))
    return found


def test_every_cairn_name_in_docstrings_and_docs_exists():
    ignored = ("cairn.ai", "cairn.example")  # host names in examples, not modules
    broken = {n: where for n, where in _named_in_docstrings().items()
              if not n.startswith(ignored) and not _resolves(n)}
    assert not broken, f"names that do not exist: {broken}"


_PATH = re.compile(r"(?<![\w/.-])((?:lib|tests|docs|benchmarks|infra|functions|examples|events|requirements)/[\w./*-]+)")


_EXAMPLES = {"docs/passwd.txt"}  # a path in an example of what ingestion refuses, not a file of ours
_OUTPUTS = ("benchmarks/results/",)  # what a benchmark writes when it runs (git ignores it): named, not shipped


def test_every_repository_path_the_docs_name_exists():
    texts = {str(p.relative_to(REPO)): p.read_text(encoding="utf-8")
             for p in [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md")), *sorted((REPO / "lib").rglob("*.py"))]}
    broken = {}
    for where, text in texts.items():
        for name in _PATH.findall(text):
            name = name.rstrip(".,:;)")
            if "*" in name or "<" in name or name in _EXAMPLES or name.startswith(_OUTPUTS):
                continue
            if not (REPO / name).exists() and not list(REPO.glob(name + "*")):
                broken.setdefault(name, where)
    assert not broken, f"paths named that are not in the repository: {broken}"
