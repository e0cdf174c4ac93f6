"""Following a reindex that switched a tenant's index while this process ran.

:meth:`cairn.app.services.Services.check_index` reads a tenant's embedder identity again when the
index's generation marker changes (docs/reindex.md). If the index now holds another embedder's
vectors, the process embeds that tenant's queries with that embedder: :func:`follow_reindex`
builds it from the configured embedder's settings with the index's model, or raises the mismatch
when this process cannot (another provider, whose credentials and settings are not this
process's; another dimension than the store it opened).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cairn.core.errors import ConfigError, EmbedderMismatch
from cairn.core.logging import get_logger
from cairn.ports.embeddings.base import Embedder
from cairn.ports.embeddings.identity import EmbedderIdentity

log = get_logger("cairn.app.following")
MINILM = "all-MiniLM-L6-v2"  # the setting of the model whose identity says "minilm"


def follow_reindex(tenant: str, mismatch: EmbedderMismatch, configured_settings: Any, configured: Embedder,
                   build: Callable[[Any], Embedder]) -> Embedder:
    """The embedder the index of ``tenant`` holds now (``mismatch`` names it), built with
    ``build`` from ``configured_settings`` with the index's model; raises ``mismatch`` when it
    cannot be built here or is not the same identity once built."""
    have = EmbedderIdentity.from_dict(mismatch.details["index_embedder"])
    if have.provider != configured_settings.provider or have.dimension != configured.dimension:
        raise mismatch  # restart with the new embedder configured
    model = MINILM if (have.provider, have.model) == ("local", "minilm") else have.model
    try:
        follows = build(configured_settings.model_copy(update={"model": model}))
    except (ValueError, ConfigError) as exc:
        raise mismatch from exc
    if EmbedderIdentity.of(follows) != have:
        raise mismatch
    log.warning("embedder follows a reindex", tenant=tenant, embedder=have.describe(),
                note="the index was reindexed while this process ran; configure the new embedder where cairn starts")
    return follows
