"""A warm process that outlives a reindex embeds with the new model.

A process checks a tenant's embedder identity on first use; the reindex that another process
runs (`cairn reindex`) then replaces the index under it: the local tenant folder is swapped, the
OpenSearch alias moves. The index's generation marker (a stat; a cached alias lookup) changes, the
process checks the identity again and embeds that tenant's queries with the index's new embedder,
so its answers are those of a process started with the new embedder. A process started with a
configuration that disagrees with the index still refuses (embedder_mismatch)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from cairn import Cairn
from cairn.app.services import Services
from cairn.core.config import load_settings
from cairn.core.errors import EmbedderMismatch
from cairn.engine.reindex import reindex
from cairn.ports.embeddings.identity import EmbedderIdentity
from tests.unit.test_reindex_records import DOCS, ROOT, Hashing

pytestmark = pytest.mark.integration
E5 = {"CAIRN_EMBEDDING_MODEL": "multilingual-e5-small"}
QUESTIONS = ("refunds five days", "invoices monthly", "trains")


@pytest.fixture(params=["local", "opensearch"])
def env(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[dict[str, str]]:
    base = {"CAIRN_HOME": str(tmp_path), "CAIRN_RECORD_USE": "false"}
    if request.param == "local":
        yield base
        return
    from tests.emulators.opensearch_emulator import start_opensearch_emulator

    emulator = start_opensearch_emulator()
    try:
        yield {**base, "CAIRN_STORE": "opensearch", "CAIRN_OPENSEARCH_URL": emulator.url, "CAIRN_OPENSEARCH_INDEX": "ctx"}
    finally:
        emulator.stop()


def _answers(services: Services) -> list[list[tuple[str, float]]]:
    cairn = Cairn(services, "acme")
    return [[(m.uri, round(m.score, 4)) for m in cairn.find(q, limit=5).resources] for q in QUESTIONS]


def test_a_warm_process_follows_a_reindex_to_the_new_model(env: dict[str, str], embedder: Any) -> None:
    warm = Services(load_settings(env=env), embedder=embedder)  # MiniLM, configured
    Cairn(warm, "acme").ingestor().ingest(DOCS, ROOT)
    before = _answers(warm)  # the identity is checked here, once
    mover = Services(load_settings(env={**env, **E5}))
    assert reindex(mover, ["acme"]).switched
    if env.get("CAIRN_STORE") == "opensearch":
        warm.store.generation_ttl_s = 0  # type: ignore[attr-defined]  # (else noticed within 5 s)

    after = _answers(warm)  # the same warm process, the same configuration

    used = EmbedderIdentity.of(warm.embedder_for("acme"))
    assert used == EmbedderIdentity.of(mover.embedder) != EmbedderIdentity.of(warm.embedder)
    assert after == _answers(Services(load_settings(env={**env, **E5})))  # a process started with the new model
    assert after != before  # another model's scores: the old query vectors would not have matched these
    with pytest.raises(EmbedderMismatch):  # a process started with the old configuration still refuses
        Cairn(Services(load_settings(env=env), embedder=embedder), "acme").find("refunds")


def test_a_reindex_to_an_embedder_this_process_cannot_build_is_refused_not_followed(tmp_path: Any) -> None:
    """The index moved to another provider's model (its credentials and settings are not this
    process's): the warm process stops with the mismatch instead of embedding with the wrong model."""
    env = {"CAIRN_HOME": str(tmp_path), "CAIRN_RECORD_USE": "false"}
    warm = Services(load_settings(env=env), embedder=Hashing("custom-a"))
    Cairn(warm, "acme").ingestor().ingest(DOCS, ROOT)
    Cairn(warm, "acme").find("refunds")
    assert reindex(Services(load_settings(env=env), embedder=Hashing("custom-b")), ["acme"]).switched
    with pytest.raises(EmbedderMismatch, match="custom-b"):
        Cairn(warm, "acme").find("refunds")
