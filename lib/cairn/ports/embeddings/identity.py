"""The embedder's identity, kept with the index it filled, and checked before the index is used.

Two embedders of the same dimension (MiniLM and multilingual-e5-small are both 384-d; Titan v2
and Cohere v3 both 1024) make vectors that cannot be compared: searching one's index with the
other's query vectors returns noise, silently. So the index records **who embedded it**
(:class:`EmbedderIdentity`: provider, model, dimension and declared languages) and every process
checks it on a tenant's first use (:func:`check_identity`):

* the same identity: nothing to do;
* another identity: :class:`~cairn.core.errors.EmbedderMismatch` naming both and the two ways out
  (configure the recorded embedder again, or move the tenant with ``cairn reindex``);
* nothing recorded and records present (a store from before identities were kept): the store
  *adopts* the current identity, and a warning says so;
* nothing recorded and nothing stored: the identity is written with the tenant's first records.

Where it is kept is the backend's business (``VectorStore.embedder_identity`` /
``keep_embedder_identity``): a fact in the local tenant's side table, the OpenSearch index's
mapping ``_meta``, a marker record in a reserved Pinecone namespace.

Content hashes carry the identity's :attr:`~EmbedderIdentity.tag` too (:func:`stamp`), so a record
whose text did not change is still embedded again when the embedder did.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from cairn.core.errors import EmbedderMismatch
from cairn.core.logging import get_logger

log = get_logger("cairn.ports.embeddings")

TAG_SEPARATOR = "~"


@dataclass(frozen=True)
class EmbedderIdentity:
    """What makes two embedders' vectors comparable: the same provider, model, dimension and languages."""

    provider: str
    model: str
    dimension: int
    languages: tuple[str, ...] | None = None  # None: many (multilingual) or not declared

    @classmethod
    def of(cls, embedder: Any) -> EmbedderIdentity:
        """The identity of ``embedder`` (from its ``name``: ``bedrock:<model>``, ``litellm:<model>``,
        ``local-<model>``), its dimension and its declared languages."""
        name = str(getattr(embedder, "name", type(embedder).__name__))
        if ":" in name:
            provider, model = name.split(":", 1)
        elif name.startswith("local-"):
            provider, model = "local", name.removeprefix("local-")
        else:
            provider, model = "custom", name
        langs = getattr(embedder, "languages", None)
        return cls(provider, model, int(getattr(embedder, "dimension", 0)), tuple(sorted(langs)) if langs is not None else None)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EmbedderIdentity:
        langs = data.get("languages")
        return cls(str(data.get("provider", "?")), str(data.get("model", "?")), int(data.get("dimension", 0)),
                   tuple(sorted(langs)) if langs is not None else None)

    def as_dict(self) -> dict[str, Any]:
        return {"provider": self.provider, "model": self.model, "dimension": self.dimension,
                "languages": list(self.languages) if self.languages is not None else None}

    @property
    def tag(self) -> str:
        """Eight hex digits that tell this identity from another (what content hashes carry)."""
        blob = json.dumps(self.as_dict(), sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:8]

    def describe(self) -> str:
        langs = ", ".join(self.languages) if self.languages is not None else "many"
        return f"{self.provider}/{self.model} ({self.dimension}-d, languages: {langs})"

    def settings_hint(self) -> str:
        """The settings that configure this embedder again."""
        if self.provider == "local":
            model = "" if self.model == "minilm" else f" CAIRN_EMBEDDING_MODEL={self.model}"
            return f"CAIRN_EMBEDDER=local{model}"
        return f"CAIRN_EMBEDDER={self.provider} CAIRN_EMBEDDING_MODEL={self.model} CAIRN_EMBEDDING_DIMENSION={self.dimension}"


def stamp(digest: str, tag: str) -> str:
    """``digest`` marked with the embedder identity's tag (``<digest>~<tag>``)."""
    return f"{digest}{TAG_SEPARATOR}{tag}" if tag else digest


def digest_of(content_hash: str) -> str:
    """The part of a content hash that says what the inputs were (without the embedder's tag)."""
    return content_hash.split(TAG_SEPARATOR, 1)[0]


def tag_of(content_hash: str) -> str:
    """The embedder tag a content hash carries ('' for hashes from before tags were kept)."""
    return content_hash.split(TAG_SEPARATOR, 1)[1] if TAG_SEPARATOR in content_hash else ""


def check_identity(embedder: Any, store: Any, tenant: str) -> str:
    """Check that ``tenant``'s index in ``store`` was filled by ``embedder`` (see the module doc).

    Returns what was found: ``"matched"``, ``"adopted"``, ``"pending"`` (recorded with the first
    write) or ``"unchecked"`` (a store that keeps no identity); raises
    :class:`~cairn.core.errors.EmbedderMismatch` on another identity."""
    keeps = getattr(store, "keeps_identity", None)
    if not callable(keeps) or not keeps():
        return "unchecked"
    want = EmbedderIdentity.of(embedder)
    found = store.embedder_identity(tenant)
    if found is None:
        if store.count(tenant) > 0:
            store.keep_embedder_identity(tenant, want.as_dict())
            log.warning("embedder identity adopted", tenant=tenant, embedder=want.describe(),
                        note="this index kept no embedder identity; it is assumed to hold the configured embedder's "
                             "vectors. If it was filled by another embedder, run `cairn reindex`.")
            return "adopted"
        store.expect_embedder_identity(tenant, want.as_dict())
        return "pending"
    have = EmbedderIdentity.from_dict(found)
    if have != want:
        raise mismatch(have, want, tenant, getattr(store, "backend", type(store).__name__))
    return "matched"


def mismatch(have: EmbedderIdentity, want: EmbedderIdentity, tenant: str, where: str) -> EmbedderMismatch:
    return EmbedderMismatch(
        f"the {where} index of tenant {tenant!r} was embedded by {have.describe()}, but this process is configured "
        f"with {want.describe()}: their vectors cannot be compared. Either configure the recorded embedder again "
        f"({have.settings_hint()}), or move the tenant to the new one with `cairn reindex --tenant {tenant}` "
        "(with the new embedder configured; docs/reindex.md)",
        details={"tenant": tenant, "index_embedder": have.as_dict(), "configured_embedder": want.as_dict()},
    )
