"""Vector stores behind one base class: local (embedded default), pinecone, opensearch."""

from cairn.ports.vectorstores.base import Capabilities, SearchMode, VectorHit, VectorQuery, VectorStore

__all__ = ["Capabilities", "SearchMode", "VectorHit", "VectorQuery", "VectorStore"]
