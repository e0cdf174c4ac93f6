"""The contract suite's backends: one behavioural suite, run against every ``VectorStore``.

``store`` is parametrised over the local store, the Pinecone and OpenSearch emulators (driven
through the real SDKs over HTTP) and, when their endpoints are in the environment, real
Pinecone and real OpenSearch (see README.md, "Testing against real services"). Emulators and
stores are built once per session; every test writes to fresh tenants with unique names, so
tests never see each other's records.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from cairn.ports.vectorstores.base import VectorStore
from tests.contract.support import DIM, is_real

REAL_BACKENDS = ("pinecone-real", "opensearch-real")
BACKENDS = ("local", "pinecone-emulator", "opensearch-emulator", *REAL_BACKENDS)


def _real_pinecone() -> VectorStore:
    key, host = os.environ["CAIRN_TEST_PINECONE_API_KEY"], os.environ["CAIRN_TEST_PINECONE_INDEX_HOST"]
    from cairn.ports.vectorstores.pinecone import PineconeVectorStore

    return PineconeVectorStore(dimension=DIM, index_host=host, api_key=key)


def _real_opensearch() -> VectorStore:
    url = os.environ["CAIRN_TEST_OPENSEARCH_URL"]
    from cairn.ports.vectorstores.opensearch import OpenSearchVectorStore

    user, region = os.environ.get("CAIRN_TEST_OPENSEARCH_USER"), os.environ.get("CAIRN_TEST_OPENSEARCH_SIGV4_REGION")
    auth = "sigv4" if region else "basic" if user else "none"
    return OpenSearchVectorStore(
        dimension=DIM, url=url, index=f"cairn-contract-{uuid.uuid4().hex[:10]}", auth=auth,
        username=user, password=os.environ.get("CAIRN_TEST_OPENSEARCH_PASSWORD"), region=region,
        service=os.environ.get("CAIRN_TEST_OPENSEARCH_SIGV4_SERVICE", "es"),
    )


@pytest.fixture(scope="session")
def pinecone_emulator() -> Iterator[Any]:
    from tests.emulators.pinecone_emulator import start_pinecone_emulator

    emulator = start_pinecone_emulator(DIM)
    yield emulator
    emulator.stop()


@pytest.fixture(scope="session")
def opensearch_emulator() -> Iterator[Any]:
    from tests.emulators.opensearch_emulator import start_opensearch_emulator

    emulator = start_opensearch_emulator()
    yield emulator
    emulator.stop()


@pytest.fixture(scope="session")
def _stores(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Stores built on first use, one per backend for the whole session."""
    built: dict[str, VectorStore] = {}

    def get(backend: str) -> VectorStore:
        if backend not in built:
            built[backend] = _build(backend, request, tmp_path_factory)
        return built[backend]

    yield {"get": get}
    for backend, store in built.items():
        if backend == "opensearch-real":
            store._client.indices.delete(index=store.index, ignore_unavailable=True)  # type: ignore[attr-defined]
        store.close()


def _build(backend: str, request: pytest.FixtureRequest, tmp: pytest.TempPathFactory) -> VectorStore:
    if backend == "local":
        from cairn.ports.vectorstores.local import LocalVectorStore

        return LocalVectorStore(tmp.mktemp("contract-local"), dimension=DIM)
    if backend == "pinecone-emulator":
        from tests.emulators.pinecone_emulator import make_pinecone_store

        return make_pinecone_store(request.getfixturevalue("pinecone_emulator"), DIM)
    if backend == "opensearch-emulator":
        from tests.emulators.opensearch_emulator import make_opensearch_store

        return make_opensearch_store(request.getfixturevalue("opensearch_emulator"), DIM, index="cairn-contract")
    store = _real_pinecone() if backend == "pinecone-real" else _real_opensearch()
    store._contract_real = True  # type: ignore[attr-defined]
    return store


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, _stores: dict[str, Any]) -> VectorStore:
    reason = _missing_env(request.param)
    if reason:
        pytest.skip(reason)
    return _stores["get"](request.param)  # type: ignore[no-any-return]


def _missing_env(backend: str) -> str | None:
    if backend == "pinecone-real" and not (
        os.environ.get("CAIRN_TEST_PINECONE_API_KEY") and os.environ.get("CAIRN_TEST_PINECONE_INDEX_HOST")
    ):
        return (f"real Pinecone: set CAIRN_TEST_PINECONE_API_KEY and CAIRN_TEST_PINECONE_INDEX_HOST (a dense "
                f"cosine index of dimension {DIM}) to run the contract suite against it")
    if backend == "opensearch-real" and not os.environ.get("CAIRN_TEST_OPENSEARCH_URL"):
        return ("real OpenSearch: set CAIRN_TEST_OPENSEARCH_URL (+ CAIRN_TEST_OPENSEARCH_USER/PASSWORD or "
                "CAIRN_TEST_OPENSEARCH_SIGV4_REGION) to run the contract suite against it")
    return None


@pytest.fixture
def new_tenant(store: VectorStore) -> Iterator[Callable[[], str]]:
    """Unique tenant names; on real services their records are deleted afterwards."""
    made: list[str] = []

    def make() -> str:
        made.append(f"ct-{uuid.uuid4().hex[:16]}")
        return made[-1]

    yield make
    if is_real(store):
        for tenant in made:
            store.delete_by_filter(tenant, {"uri": {"$exists": True}})


@pytest.fixture
def tenant(new_tenant: Callable[[], str]) -> str:
    return new_tenant()
