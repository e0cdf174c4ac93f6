"""Build the configured store and embedder. Adding a backend is one line here."""

from __future__ import annotations

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
