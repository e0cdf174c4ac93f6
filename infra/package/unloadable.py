"""The modules of a package that no function can load: left out of the layer.

A module that imports, as it loads, a package no layer of the function ships (litellm's proxy server
imports ``fastapi``; none of cairn's layers has it) raises ``ModuleNotFoundError`` on every import, on
every code path: its bytecode is dead weight. ``unloadable`` finds such modules from the source, before
it is compiled, without running it (the layers are built for arm64 and cannot be imported here):

- an import runs at load when it is a statement of the module's body, of a class body, of a ``with``
  block, or of a ``try`` block none of whose handlers catches ``ImportError`` (nor a parent of it).
  Imports inside functions, ``if`` blocks (``TYPE_CHECKING`` among them) and guarded ``try`` blocks may
  never run, so they do not count: the rule errs towards keeping a module;
- a module is unloadable when such an import names an absent top-level package, or a module of the
  package that is unloadable itself, or when its parent package is unloadable (a fixed point).

Which packages are absent is declared by the layer (``Layer.absent`` in build.py) and checked by the
build against every built layer and the runtime: a name some layer ships is never absent.
tests/integration/test_package.py imports every module this rule removes with the absent packages
blocked, and each fails to load.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# what a kept memo was parsed by: this file, so a change to the rule parses again
_RULE = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]
# an except clause naming one of these catches an ImportError raised by an import in its try block
_CATCHES_IMPORT_ERROR = frozenset({"ImportError", "ModuleNotFoundError", "Exception", "BaseException"})


def module_files(root: Path, package: str) -> dict[str, Path]:
    """{dotted module name: source file} of every module of ``package`` under ``root``."""
    out = {}
    for path in (root / package).rglob("*.py"):
        parts = path.relative_to(root).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(isinstance(n, (ast.Name, ast.Attribute)) and (n.id if isinstance(n, ast.Name) else n.attr)
               in _CATCHES_IMPORT_ERROR for n in names)


def _load_time_imports(body: list[ast.stmt]) -> list[ast.Import | ast.ImportFrom]:
    found: list[ast.Import | ast.ImportFrom] = []
    for stmt in body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            found.append(stmt)
        elif isinstance(stmt, (ast.ClassDef, ast.With, ast.AsyncWith)) or (
                isinstance(stmt, ast.Try) and not any(_catches_import_error(h) for h in stmt.handlers)):
            found += _load_time_imports(stmt.body)
    return found


Statement = tuple[int, str, list[str]]  # (level, module, names): ``from`` statements; level -1 is ``import``


def _statements(source: bytes) -> list[Statement]:
    """A module's load-time imports as they are written (relative ones not yet resolved)."""
    out: list[Statement] = []
    for stmt in _load_time_imports(ast.parse(source).body):
        if isinstance(stmt, ast.Import):
            out.append((-1, "", [alias.name for alias in stmt.names]))
        else:
            out.append((stmt.level, stmt.module or "", [alias.name for alias in stmt.names]))
    return out


def load_time_imports(path: Path, name: str, memo: dict[str, list[Statement]] | None = None) -> set[str]:
    """The absolute names (modules, or names in them) ``path``, module ``name``, imports as it loads.
    ``memo``: statements by the source's digest, filled as files are parsed (litellm's 3,000 modules
    take ~15 s to parse; the same files are read by the build, the host build and the tests)."""
    source = path.read_bytes()
    key = hashlib.sha256(source).hexdigest()[:24]
    statements = memo.get(key) if memo is not None else None
    if statements is None:
        statements = _statements(source)
        if memo is not None:
            memo[key] = statements
    here = name if path.name == "__init__.py" else name.rpartition(".")[0]
    names: set[str] = set()
    for level, module, aliases in statements:
        if level < 0:
            names.update(aliases)
            continue
        if level:
            base = here.split(".")[: len(here.split(".")) - level + 1]
            module = ".".join(base + ([module] if module else []))
        names.add(module)
        names.update(f"{module}.{alias}" for alias in aliases)  # a submodule, or a name in ``module``
    return names


def _read_memo(path: Path | None) -> dict[str, list[Statement]]:
    """The statements kept by an earlier run of this rule (none when the rule changed since)."""
    try:
        kept = json.loads(path.read_text()) if path is not None else {}
    except (OSError, ValueError):
        return {}
    if kept.get("rule") != _RULE:
        return {}
    return {k: [(int(lv), str(m), list(a)) for lv, m, a in v] for k, v in kept.get("statements", {}).items()}


def _write_memo(path: Path | None, memo: dict[str, list[Statement]]) -> None:
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        part = path.with_name(f"{path.name}.{os.getpid()}")
        part.write_text(json.dumps({"rule": _RULE, "statements": memo}))
        os.replace(part, path)  # whole, or not at all: another process may read it now
    except OSError:
        pass


@contextmanager
def _memo_held(path: Path | None) -> Iterator[None]:
    """The memo to this process alone while it reads, parses and writes: two builds at once (a layer
    and its test, side by side) parse the sources once, the second reading what the first kept."""
    try:
        import fcntl

        if path is None:
            raise OSError("no memo")
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = path.with_name(f"{path.name}.lock").open("w")
    except (ImportError, OSError):  # no memo, or nowhere to keep one: parse alone, as before
        yield
        return
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def unloadable(root: Path, package: str, absent: frozenset[str], memo: Path | None = None) -> dict[str, str]:
    """{module: why} for every module of ``package`` (under ``root``) that cannot load without the
    top-level packages ``absent``. ``memo``: a file that keeps each source's parsed imports between runs."""
    files = module_files(root, package)
    with _memo_held(memo):
        statements = _read_memo(memo)
        known = len(statements)
        imports = {name: load_time_imports(path, name, statements) for name, path in files.items()}
        if len(statements) > known:
            _write_memo(memo, statements)
    why: dict[str, str] = {}
    changed = True
    while changed:
        changed = False
        for name in files:
            if name in why:
                continue
            parent = name.rpartition(".")[0]
            reason = f"its package {parent} cannot load" if parent in why else None
            for imported in sorted(imports[name]):
                if reason:
                    break
                if imported.split(".")[0] in absent:
                    reason = f"it imports {imported.split('.')[0]}, which no layer ships"
                elif imported in why:
                    reason = f"it imports {imported}, which cannot load"
            if reason:
                why[name] = reason
                changed = True
    return why


def remove_unloadable(root: Path, package: str, absent: frozenset[str], memo: Path | None = None) -> dict[str, str]:
    """Delete the source of every module ``unloadable`` names, and the folders left empty (a data file
    stays: a module that loads may read it); {module: why}."""
    files = module_files(root, package)
    gone = unloadable(root, package, absent, memo)
    for name in gone:
        files[name].unlink()
    for folder in sorted({files[n].parent for n in gone}, key=lambda p: len(p.parts), reverse=True):
        for sub in sorted((d for d in [folder, *folder.rglob("*")] if d.is_dir()), key=lambda p: len(p.parts), reverse=True):
            if not any(sub.iterdir()):
                sub.rmdir()
    return gone
