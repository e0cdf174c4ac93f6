"""cairn: context retrieval for AI agents.

The public entry points are :class:`cairn.Cairn` (the in-process door, ``Cairn.from_settings()``),
the HTTP client :class:`cairn.CairnClient` and the ``cairn`` command. The distribution is
``cairn-context`` on PyPI (``pip install 'cairn-context[local]'``); it installs the ``cairn`` package.
Heavy dependencies (onnxruntime, SDKs of vector stores, litellm) are imported lazily
by the one module that needs them, so importing ``cairn`` stays cheap.

The package is layered, each layer importing only those below it (``make lint`` enforces it):

* doors — :mod:`cairn.cli`, :mod:`cairn.mcp`, :mod:`cairn.client`, :mod:`cairn.api`,
  :mod:`cairn.console`, :mod:`cairn.inprocess` (and the Lambda functions under ``functions/``);
* :mod:`cairn.app` — the application: authorization, the composition root, the workflow;
* :mod:`cairn.engine` — planning, retrieval, the stages, ingest, memory, the ``Pipeline``;
* :mod:`cairn.ports` — vector stores, session stores, embedders, LLMs, rerankers, content, and
  their adapters;
* :mod:`cairn.core` — models, URIs, errors, filters, settings, text analysis.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings
from typing import TYPE_CHECKING, Any

from cairn.core.distribution import DISTRIBUTION, __version__, install_hint

if TYPE_CHECKING:
    from cairn.client import CairnClient
    from cairn.inprocess import Cairn

__all__ = ["DISTRIBUTION", "Cairn", "CairnClient", "__version__", "errors", "install_hint"]


def __getattr__(name: str) -> Any:
    """``from cairn import Cairn, CairnClient, errors`` without importing either door up front."""
    if name == "Cairn":
        from cairn.inprocess import Cairn

        return Cairn
    if name == "CairnClient":
        from cairn.client import CairnClient

        return CairnClient
    if name == "errors":
        from cairn.core import errors

        return errors
    raise AttributeError(f"module 'cairn' has no attribute {name!r}")


# ------------------------------------------------------------------ the modules' former names

RENAMED: dict[str, str] = {  # cairn.<former> -> cairn.<now>, since the layers (one release of grace)
    "api.browse": "engine.browse",
    "assemble": "engine.assemble",
    "cli_access": "cli.access",
    "config": "core.config",
    "config_doc": "core.config_doc",
    "context": "engine.context",
    "embeddings": "ports.embeddings",
    "errors": "core.errors",
    "filters": "core.filters",
    "ingest": "engine.ingest",
    "ingest.content": "ports.content",
    "llm": "ports.llm",
    "memory": "engine.memory",
    "models": "core.models",
    "observability": "ports.observability",
    "observability.logging": "core.logging",
    "pipeline": "inprocess",
    "planning": "engine.planning",
    "protocols": "core.protocols",
    "ratelimit": "ports.ratelimit",
    "reindex": "engine.reindex",
    "requests": "core.requests",
    "rerank": "ports.rerank",
    "retrieval": "engine.retrieval",
    "retry": "core.retry",
    "secrets": "ports.secrets",
    "services": "app.services",
    "sessions": "ports.sessions",
    "sessions.compression": "engine.memory.session_summaries",
    "stages": "engine.stages",
    "storage_names": "core.storage_names",
    "text": "core.text",
    "uri": "core.uri",
    "vectorstores": "ports.vectorstores",
    "workflow": "app.workflow",
}


def _current(name: str) -> str | None:
    """The module's name now, when ``name`` is one of the names it had before the layers."""
    rest = name.removeprefix("cairn.")
    for former in sorted(RENAMED, key=len, reverse=True):
        if rest == former or rest.startswith(former + "."):
            return "cairn." + RENAMED[former] + rest[len(former):]
    return None


class _FormerNames(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """``import cairn.vectorstores.local`` still works and warns: the module is the one at its new name."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if not name.startswith("cairn.") or _current(name) is None:
            return None
        return importlib.util.spec_from_loader(name, self)

    def create_module(self, spec: Any) -> Any:
        now = _current(spec.name)
        warnings.warn(f"{spec.name} is now {now}", DeprecationWarning, stacklevel=2)
        module = importlib.import_module(now or spec.name)
        self._spec = module.__spec__
        return module

    def exec_module(self, module: Any) -> None:
        module.__spec__ = self._spec  # the import system set the former name's spec; the module keeps its own


sys.meta_path.insert(0, _FormerNames())  # before the path finder, which would load a second copy
