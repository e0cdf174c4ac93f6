"""docs/configuration.md lists every variable cairn reads, generated from `cairn.core.config.Settings`."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cairn.core import config_doc
from cairn.core.config import load_settings

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "configuration.md"
_READ = re.compile(r"""["'`](CAIRN_[A-Z0-9_]*[A-Z0-9])["'`]""")


def documented() -> set[str]:
    return set(re.findall(r"^\| `(CAIRN_[A-Z0-9_]+)` \|", DOC.read_text(encoding="utf-8"), re.M))


def read_by_code() -> dict[str, str]:
    """Every CAIRN_* name the code spells out as a string (a prefix such as CAIRN_LLM_ is not a variable)."""
    found: dict[str, str] = {}
    for folder in ("lib", "functions", "infra"):
        for path in sorted((REPO / folder).rglob("*.py")):
            for name in _READ.findall(path.read_text(encoding="utf-8")):
                found.setdefault(name, str(path.relative_to(REPO)))
    return found


def test_the_committed_table_is_the_generated_one():
    text = DOC.read_text(encoding="utf-8")
    assert config_doc.render(text) == text, "docs/configuration.md is stale: run `make configuration`"


def test_every_variable_the_code_reads_is_documented():
    missing = {name: where for name, where in read_by_code().items() if name not in documented()}
    assert not missing, f"read by the code, missing from docs/configuration.md: {missing}"


def test_every_documented_settings_variable_is_honoured():
    """Each generated variable changes what load_settings() builds (a table row that lies fails)."""
    probes = {"CAIRN_TENANT": ("acme", lambda s: s.tenant), "CAIRN_DEFAULT_LIMIT": ("7", lambda s: s.default_limit),
              "CAIRN_MEMORY_WINDOW": ("3", lambda s: s.memory_window),
              "CAIRN_STORE_PATH": ("/tmp/x-store", lambda s: str(s.store.path)),
              "CAIRN_EMBEDDING_BATCH_SIZE": ("4", lambda s: s.embedder.batch_size),
              "CAIRN_SESSIONS_PATH": ("/tmp/x.db", lambda s: str(s.sessions.path)),
              "CAIRN_CONTENT_PATH": ("/tmp/x-content", lambda s: str(s.content.path))}
    names = {v.name for v in config_doc.variables()}
    for name, (value, read) in probes.items():
        assert name in names
        assert str(read(load_settings(env={name: value}))) == value, name
    source = Path(config_doc.c.__file__).read_text(encoding="utf-8")
    for v in config_doc.variables():
        if v.group == "general" and v.name != "CAIRN_HOME":
            field = v.name.removeprefix("CAIRN_").lower()
            assert field in config_doc.c._SCALARS or f'"{v.name}"' in source, (
                f"{v.name} is listed but load_settings() does not read it")


def test_a_variable_without_a_meaning_is_refused(monkeypatch):
    monkeypatch.delitem(config_doc.MEANINGS, "CAIRN_ALPHA")
    with pytest.raises(KeyError, match="CAIRN_ALPHA has no meaning"):
        config_doc.table()
