"""Rerankers behind one interface (docs/rerank.md); the fallback rules live in ``base``.

    reranker = build_reranker("local", embedder=embedder)
    outcome = reranker.rerank(query, candidates)   # never raises on backend failure
    outcome.candidates, outcome.fallback, outcome.sent, outcome.non_finite

Backends are imported by the factory only when chosen, so ``import cairn.ports.rerank`` does not
import httpx, boto3, bm25s or litellm.
"""

from __future__ import annotations

import inspect
from typing import Any

from cairn.core.errors import ConfigError
from cairn.ports.rerank.base import Reranker, RerankOutcome, RerankResponseError

__all__ = ["KINDS", "RerankOutcome", "RerankResponseError", "Reranker", "build_reranker"]

# kind -> (module, class). Aliases name the servers that speak the Cohere wire format.
_BACKENDS: dict[str, tuple[str, str]] = {
    "local": ("cairn.ports.rerank.local", "LocalReranker"),
    "cohere": ("cairn.ports.rerank.cohere", "CohereReranker"),
    "bedrock": ("cairn.ports.rerank.bedrock", "BedrockReranker"),
    "litellm": ("cairn.ports.rerank.litellm_provider", "LiteLLMReranker"),
}
_ALIASES = {"cohere-compatible": "cohere", "jina": "cohere", "voyage": "cohere", "tei": "cohere"}
KINDS = tuple(_BACKENDS) + tuple(_ALIASES)


def build_reranker(kind: str, **options: Any) -> Reranker:
    """Build the reranker ``kind`` (``local``, ``cohere``, ``bedrock``, ``litellm``) from its options.

    ``local`` takes ``embedder=`` (the store's embedder; a ``LocalEmbedder`` is built when
    omitted). Unknown kinds and unknown or missing options raise ``ConfigError`` naming what
    is allowed.
    """
    import importlib

    key = _ALIASES.get(kind, kind)
    if key not in _BACKENDS:
        raise ConfigError(f"reranker kind {kind!r} is not known; choose one of: {', '.join(KINDS)}")
    module, cls_name = _BACKENDS[key]
    cls = getattr(importlib.import_module(module), cls_name)
    if key == "local" and options.get("embedder") is None:
        from cairn.ports.embeddings.local import LocalEmbedder

        options["embedder"] = LocalEmbedder()
    params = inspect.signature(cls.__init__).parameters
    allowed = [p for p in params if p != "self"]
    unknown = sorted(set(options) - set(allowed))
    missing = [p.name for p in params.values()
               if p.name != "self" and p.default is inspect.Parameter.empty and p.name not in options]
    if unknown or missing:
        problems = []
        if unknown:
            problems.append(f"unknown option(s) {', '.join(unknown)}")
        if missing:
            problems.append(f"missing option(s) {', '.join(missing)}")
        raise ConfigError(f"reranker {kind!r}: {'; '.join(problems)}; allowed: {', '.join(allowed)}")
    return cls(**options)
