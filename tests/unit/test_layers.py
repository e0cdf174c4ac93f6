"""The layers hold: ``make lint`` (lint-imports, configured in pyproject.toml) passes on this tree and
fails, naming the import, when someone adds an upward import or an import cycle."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LINT = Path(sys.executable).with_name("lint-imports")

pytestmark = pytest.mark.skipif(not LINT.exists(), reason="lint-imports is installed by `make dev`")


def _lint(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": f"{root / 'lib'}{os.pathsep}{root}"}
    return subprocess.run([str(LINT), "--no-cache"], cwd=root, env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of what lint-imports reads: the package, the functions, the contracts and their config."""
    for part in ("lib/cairn", "functions", "tools"):
        shutil.copytree(REPO / part, tmp_path / part, ignore=shutil.ignore_patterns("__pycache__", "*.js", "*.css"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def _append(path: Path, code: str) -> None:
    path.write_text(path.read_text(encoding="utf-8") + "\n\n" + code + "\n", encoding="utf-8")


def test_this_tree_keeps_every_contract(tree: Path) -> None:
    done = _lint(tree)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout


def test_the_engine_importing_the_application_fails_lint_even_lazily(tree: Path) -> None:
    _append(tree / "lib/cairn/engine/pipeline.py",
            "def _upward() -> object:\n    from cairn.app.services import Services\n\n    return Services")
    done = _lint(tree)
    assert done.returncode != 0
    assert "cairn.engine.pipeline -> cairn.app.services" in done.stdout
    assert "cairn's layers" in done.stdout and "BROKEN" in done.stdout


def test_a_type_only_import_of_a_door_fails_lint(tree: Path) -> None:
    _append(tree / "lib/cairn/app/application.py",
            "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from cairn.inprocess import Cairn  # noqa: F401")
    done = _lint(tree)
    assert done.returncode != 0
    assert "cairn.app.application -> cairn.inprocess" in done.stdout


def test_a_cycle_inside_one_layer_fails_lint_and_is_shown(tree: Path) -> None:
    _append(tree / "lib/cairn/core/uri.py",
            "def _back() -> object:\n    from cairn.core.models import ContextRecord\n\n    return ContextRecord")
    done = _lint(tree)
    assert done.returncode != 0
    assert "Import cycle 1:" in done.stdout
    assert "cairn.core.uri -> cairn.core.models" in done.stdout
    assert "cairn.core.models -> cairn.core.uri" in done.stdout


def test_a_lambda_function_calling_the_engine_directly_fails_lint(tree: Path) -> None:
    _append(tree / "functions/plan/app.py", "from cairn.engine import stages  # noqa: E402,F401")
    done = _lint(tree)
    assert done.returncode != 0
    assert "functions.plan.app -> cairn.engine.stages" in done.stdout


def test_the_public_names_import_from_the_top() -> None:
    from cairn import Cairn, CairnClient, errors

    assert Cairn.__module__ == "cairn.inprocess" and CairnClient.__module__ == "cairn.client"
    assert errors.CairnError.__module__ == "cairn.core.errors"


def test_a_module_s_former_name_is_the_same_module_and_says_where_it_went() -> None:
    """Code written before the layers (``from cairn.vectorstores.local import LocalVectorStore``) keeps
    working on the very same module, not a second copy, with a DeprecationWarning naming the new path."""
    code = (
        "import warnings; warnings.simplefilter('error')\n"
        "import cairn.ports.vectorstores.local as now\n"
        "try:\n"
        "    import cairn.vectorstores.local\n"
        "except DeprecationWarning as w:\n"
        "    print(w)\n"
        "warnings.simplefilter('ignore')\n"
        "from cairn.vectorstores.local import LocalVectorStore\n"
        "from cairn.pipeline import Cairn, Pipeline\n"
        "from cairn.models import ContextRecord\n"
        "assert LocalVectorStore is now.LocalVectorStore, LocalVectorStore.__module__\n"
        "assert Cairn.__module__ == 'cairn.inprocess' and Pipeline.__module__ == 'cairn.engine.pipeline'\n"
        "assert ContextRecord.__module__ == 'cairn.core.models'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert "cairn.vectorstores is now cairn.ports.vectorstores" in done.stdout
