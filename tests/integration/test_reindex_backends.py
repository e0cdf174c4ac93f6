"""`cairn reindex` on OpenSearch (emulator, opensearch-py) and Pinecone (emulator, pinecone SDK).

OpenSearch: the tenants are copied into a new index and the configured name becomes an alias of
it in one atomic ``_aliases`` call; the old concrete index is removed by that call the first time,
and kept (the alias moves) on the next reindex. Pinecone has no aliases: the new index is filled and
the switch is a setting (what the summary says).
"""

from __future__ import annotations

import pytest

from cairn import Cairn
from cairn.app.services import Services
from cairn.core.config import load_settings
from cairn.core.errors import EmbedderMismatch, RequestError
from cairn.engine.reindex import reindex
from tests.unit.test_reindex_records import DOCS, ROOT, Hashing

pytestmark = pytest.mark.integration


@pytest.fixture
def opensearch():
    from tests.emulators.opensearch_emulator import start_opensearch_emulator

    emulator = start_opensearch_emulator()
    yield emulator
    emulator.stop()


def _services(env: dict[str, str], model: str) -> Services:
    return Services(load_settings(env={"CAIRN_RECORD_USE": "false", **env}), embedder=Hashing(model))


def _answers(services: Services, tenant: str) -> list[list[str]]:
    cairn = Cairn(services, tenant)
    return [[m.uri for m in cairn.find(q, limit=5).resources] for q in ("refunds five days", "invoices monthly", "trains")]


def test_opensearch_reindex_switches_an_alias_and_keeps_every_tenant(opensearch, tmp_path) -> None:
    env = {"CAIRN_STORE": "opensearch", "CAIRN_OPENSEARCH_URL": opensearch.url, "CAIRN_OPENSEARCH_INDEX": "cairn-ctx",
           "CAIRN_HOME": str(tmp_path)}
    old = _services(env, "custom-a")
    for tenant in ("acme", "globex"):
        Cairn(old, tenant).ingestor().ingest(DOCS, ROOT)
        Cairn(old, tenant).remember("Ann wants refunds to her card", "preferences", user="ann")

    new = _services(env, "custom-b")
    with pytest.raises(EmbedderMismatch):
        Cairn(new, "acme").find("refunds")
    with pytest.raises(RequestError, match="records of other tenants"):
        reindex(new, ["acme"])  # one index serves both tenants: moving one would strand the other
    assert "cairn-ctx" in opensearch.state.indices and not opensearch.state.aliases

    report = reindex(new, ["acme", "globex"])
    assert report.switched and report.new_index.startswith("cairn-ctx-")
    assert opensearch.state.aliases == {"cairn-ctx": report.new_index} and "cairn-ctx" not in opensearch.state.indices

    fresh_env = {**env, "CAIRN_OPENSEARCH_INDEX": "fresh"}
    fresh = _services(fresh_env, "custom-b")
    for tenant in ("acme", "globex"):
        Cairn(fresh, tenant).ingestor().ingest(DOCS, ROOT)
        Cairn(fresh, tenant).remember("Ann wants refunds to her card", "preferences", user="ann")
    served = _services(env, "custom-b")  # a new process with the new embedder, through the alias
    for tenant in ("acme", "globex"):
        assert _answers(served, tenant) == _answers(fresh, tenant)
        assert Cairn(served, tenant).find("refunds to her card", user="ann").memories
    with pytest.raises(EmbedderMismatch):
        Cairn(_services(env, "custom-a"), "acme").find("refunds")

    back = reindex(_services(env, "custom-a"), ["acme", "globex"])  # the next move keeps the old index
    assert opensearch.state.aliases == {"cairn-ctx": back.new_index} and report.new_index in opensearch.state.indices
    assert back.old_index == report.new_index


def test_pinecone_reindex_fills_the_index_you_created_and_says_how_to_switch(tmp_path) -> None:
    from tests.emulators.pinecone_emulator import start_pinecone_emulator

    live, target = start_pinecone_emulator(16), start_pinecone_emulator(16)
    try:
        env = {"CAIRN_STORE": "pinecone", "CAIRN_PINECONE_API_KEY": "emulator-key", "CAIRN_PINECONE_INDEX_HOST": live.host,
               "CAIRN_HOME": str(tmp_path)}
        old = _services(env, "custom-a")
        Cairn(old, "acme").ingestor().ingest(DOCS, ROOT)
        new = _services(env, "custom-b")
        with pytest.raises(RequestError, match="pass its host"):
            reindex(new, ["acme"])
        report = reindex(new, ["acme"], target=target.host)
        assert not report.switched and f"CAIRN_PINECONE_INDEX_HOST={target.host}" in report.summary()
        switched = _services({**env, "CAIRN_PINECONE_INDEX_HOST": target.host}, "custom-b")
        fresh = _services({**env, "CAIRN_PINECONE_INDEX_HOST": start_pinecone_emulator(16).host}, "custom-b")
        Cairn(fresh, "acme").ingestor().ingest(DOCS, ROOT)
        assert _answers(switched, "acme") == _answers(fresh, "acme")
        _answers(old, "acme")  # the old index serves the old embedder until the switch
    finally:
        live.stop()
        target.stop()
