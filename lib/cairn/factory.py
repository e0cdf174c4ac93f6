"""Build the configured store and embedder. Adding a backend is one line here."""

from __future__ import annotations

from typing import Any

from .config import Settings
from .embeddings import Embedder
from .errors import ConfigError
from .vectorstores import VectorStore


def build_embedder(settings: Settings) -> Embedder:
    if settings.embedder == "local":
        from .embeddings.local import LocalEmbedder

        return LocalEmbedder(batch_size=settings.embed_batch_size)
    raise ConfigError(f"unknown embedder {settings.embedder!r}; available: local")


def build_store(settings: Settings, dimension: int) -> VectorStore:
    cfg = settings.store
    if cfg.backend == "local":
        from .vectorstores.local import LocalVectorStore

        return LocalVectorStore(cfg.path, dimension=dimension)
    if cfg.backend == "pinecone":
        from .vectorstores.pinecone import PineconeVectorStore

        return PineconeVectorStore.from_settings(cfg, dimension)
    if cfg.backend == "opensearch":
        from .vectorstores.opensearch import OpenSearchVectorStore

        return OpenSearchVectorStore.from_settings(cfg, dimension)
    raise ConfigError(f"unknown store backend {cfg.backend!r}; available: local, pinecone, opensearch")


def build_llm_client(settings: Settings) -> Any:
    """The configured LLM client, or None (the embedded default has no LLM)."""
    cfg = settings.llm
    if cfg is None:
        return None
    from .llm import build_llm

    opts: dict[str, Any] = {"timeout_s": cfg.timeout_s}
    if cfg.provider == "openai":
        opts.update(base_url=cfg.base_url, api_key=cfg.api_key)
    elif cfg.provider == "bedrock":
        opts.update(region=cfg.region)
    return build_llm(cfg.provider, cfg.model, **{k: v for k, v in opts.items() if v is not None})


def build_planner(settings: Settings, llm: Any = None, store: VectorStore | None = None, embedder: Embedder | None = None) -> Any:
    """``auto``: the intent analyzer when an LLM is configured, else the session-rewrite planner
    (which, given the store, scopes a query to the folder named after its entity)."""
    choice = settings.planner
    if choice == "auto":
        choice = "llm" if llm is not None else "session-rewrite"
    if choice == "raw":
        return None
    if choice == "llm":
        if llm is None:
            raise ConfigError("planner 'llm' needs an LLM: set CAIRN_LLM_PROVIDER and CAIRN_LLM_MODEL")
        from .planning.intent import IntentAnalyzer

        return IntentAnalyzer(llm, timeout_s=settings.llm.timeout_s if settings.llm else 5.0)
    from .planning.session_planner import SessionRewritePlanner

    if store is None:
        return SessionRewritePlanner()
    from .planning.scope import FolderResolver
    from .retrieval.scope import roots_for

    return SessionRewritePlanner(
        resolver=FolderResolver(store, settings.tenant, embedder), roots=lambda ct: roots_for(ct, (), None)
    )


def build_reranker_from(settings: Settings, embedder: Embedder) -> Any:
    cfg = settings.rerank
    if cfg.kind == "none":
        return None
    from .rerank import build_reranker

    if cfg.kind == "local":
        return build_reranker("local", embedder=embedder)
    opts = {"model": cfg.model, "base_url": cfg.base_url, "api_key": cfg.api_key, "region": cfg.region}
    return build_reranker(cfg.kind, **{k: v for k, v in opts.items() if v is not None})


def build_session_store(settings: Settings) -> Any:
    from .sessions import open_session_store

    cfg = settings.sessions
    if cfg.backend == "sqlite":
        return open_session_store("sqlite", path=cfg.path or settings.home / "sessions.db")
    return open_session_store("dynamodb", table=cfg.table, region=cfg.region, endpoint_url=cfg.endpoint_url)


def build_content_store(settings: Settings) -> Any:
    from .ingest import LocalContentStore, S3ContentStore

    cfg = settings.content
    if cfg.backend == "s3":
        return S3ContentStore(cfg.bucket, cfg.prefix)
    return LocalContentStore(cfg.path or settings.home / "content")
