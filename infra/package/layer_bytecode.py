"""Bytecode for the Lambda runtime: the interpreter that writes it, how it is written, how it is checked.

The functions run ``RUNTIME`` (template.yaml's Globals and every layer's CompatibleRuntimes say the
same; tests/integration/test_package.py checks it). ``/opt``, where Lambda unpacks the layers, is
read-only: a module without bytecode for the runtime is compiled again on every cold start. So the
build compiles every layer with an interpreter of the runtime's version (``target_python``), and
``missing_bytecode`` names any module left without it (``build.py build`` and ``layer`` then fail).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

# the functions' runtime, and the name its bytecode files carry: __pycache__/<module>.cpython-312.pyc
TARGET_VERSION = (3, 12)
RUNTIME = "python{}.{}".format(*TARGET_VERSION)
CACHE_TAG = "cpython-{}{}".format(*TARGET_VERSION)
LAYER_ROOT = "/opt/python"  # where Lambda unpacks a layer's python/ folder: the path tracebacks show
# Bytecode only (``module.pyc`` where ``module.py`` was) for every package but these and those that read
# source through ``inspect`` (anyio parses its own to find its lazy imports; pydantic reads a model's to
# find attribute docstrings): source and bytecode together do not fit (core + a store + litellm would be
# about 300 MB, over Lambda's limit). cairn keeps its source: its tracebacks show the lines.
KEEP_SOURCE = frozenset({"cairn"})
READS_SOURCE = re.compile(r"\binspect\.(getsource|getsourcelines|findsource)\(")


def _candidates() -> list[str]:
    """Interpreters that may be the runtime's version: ``CAIRN_TARGET_PYTHON``, this one, ``python3.12``
    on the PATH, then pyenv's installed 3.12 (its shim on the PATH refuses a version not selected)."""
    found = [os.environ.get("CAIRN_TARGET_PYTHON", ""), sys.executable, shutil.which(RUNTIME) or ""]
    pyenv_root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    major_minor = ".".join(map(str, TARGET_VERSION))
    versions = sorted(pyenv_root.glob(f"versions/{major_minor}.*/bin/python{major_minor}"), reverse=True)
    return [c for c in found if c] + [str(v) for v in versions]


def target_python() -> str | None:
    """An interpreter of the runtime's version (python3.12) to compile the layers' bytecode with, or None.
    ``CAIRN_TARGET_PYTHON`` wins when it is that version; one of another version is passed over."""
    check = f"import sys; assert sys.version_info[:2] == {TARGET_VERSION!r}"
    for candidate in _candidates():
        if subprocess.run([candidate, "-c", check], capture_output=True, check=False).returncode == 0:
            return candidate
    return None


def compile_bytecode(path: Path, python: str, prefix: str | None = LAYER_ROOT) -> None:
    """Write the bytecode of every module under ``path`` with ``python`` (``/opt`` is read-only on Lambda:
    a layer without ``.pyc`` files compiles every module it imports on every cold start).

    Unchecked-hash files: the interpreter loads them without reading the source's modification time,
    which a zip archive stores to two seconds only (a timestamp ``.pyc`` would then be stale on Lambda,
    and recompiled in memory on every cold start). A layer never changes once published, so nothing
    needs checking. ``prefix`` replaces ``path`` in the file names tracebacks show (``/opt/python/...``).
    A file that is not Python for the runtime (a template, a test of a syntax error) gets no ``.pyc``:
    ``missing_bytecode`` names it."""
    where = ["-s", str(path), "-p", prefix] if prefix else []
    subprocess.run([python, "-m", "compileall", "-q", "-q", "-j", "0", "--invalidation-mode", "unchecked-hash",
                    *where, str(path)], check=False, capture_output=True)


def reads_own_source(top: Path) -> bool:
    """Whether the package (or module) ``top`` reads Python source files at run time."""
    files = [top] if top.is_file() else top.rglob("*.py")
    return any(READS_SOURCE.search(f.read_text(errors="replace")) for f in files)


def drop_sources(path: Path, cache_tag: str = CACHE_TAG) -> list[str]:
    """Put each compiled module's bytecode where its source was and remove the source, in every
    top-level package under ``path`` but ``KEEP_SOURCE`` and those that read their own source; the
    names of the packages that keep their source."""
    kept = []
    for top in sorted(path.iterdir()):
        if not (top.suffix == ".py" or (top.is_dir() and any(top.rglob("*.py")))):
            continue
        if top.stem in KEEP_SOURCE or reads_own_source(top):
            kept.append(top.stem)
            continue
        for source in [top] if top.is_file() else list(top.rglob("*.py")):
            compiled = bytecode_file(source, cache_tag)
            if compiled.is_file():
                compiled.replace(source.with_suffix(".pyc"))
                source.unlink()
    return kept


def bytecode_file(source: Path, cache_tag: str = CACHE_TAG) -> Path:
    return source.parent / "__pycache__" / f"{source.stem}.{cache_tag}.pyc"


def magic_number(python: str) -> bytes:
    """The first four bytes of the bytecode files ``python`` writes (its version's)."""
    code = "import importlib.util, sys; sys.stdout.write(importlib.util.MAGIC_NUMBER.hex())"
    return bytes.fromhex(subprocess.run([python, "-c", code], capture_output=True, text=True, check=True).stdout)


def missing_bytecode(path: Path, cache_tag: str = CACHE_TAG, magic: bytes | None = None) -> list[Path]:
    """Every ``.py`` under ``path`` without its ``.pyc`` for ``cache_tag``, and (with ``magic``) every
    ``.pyc`` written by another version of Python."""
    missing = [p for p in path.rglob("*.py") if not bytecode_file(p, cache_tag).is_file()]
    if magic is not None:
        for compiled in path.rglob("*.pyc"):
            with compiled.open("rb") as f:
                if f.read(4) != magic:
                    missing.append(compiled)
    return sorted(missing)


def count_modules(path: Path) -> int:
    """Modules under ``path``: sources, and bytecode that stands in for a source."""
    return sum(1 for _ in path.rglob("*.py")) + sum(1 for p in path.rglob("*.pyc") if p.parent.name != "__pycache__")
