"""Every HTTP client cairn builds shares one verified TLS context (cairn.core.tls): the CA bundle is
read once per process, and certificates are still checked as httpx checks them."""

from __future__ import annotations

import ssl

import certifi
import httpx
import pytest

from cairn.client import AsyncCairnClient, CairnClient
from cairn.core import tls
from cairn.engine.ingest.fetchguard import FetchPolicy, GuardedTransport

pytestmark = pytest.mark.unit


@pytest.fixture
def bundle_reads(monkeypatch):
    """How many times a CA bundle is read into a new context."""
    tls._made.cache_clear()
    reads = []
    real = httpx.create_ssl_context

    def counting(*args, **kwargs):
        reads.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(httpx, "create_ssl_context", counting)
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    yield reads
    tls._made.cache_clear()


def test_a_hundred_clients_read_the_ca_bundle_once_and_still_verify(bundle_reads):
    clients = [CairnClient("https://cairn.example.com") for _ in range(100)]
    clients += [AsyncCairnClient("https://cairn.example.com") for _ in range(3)]  # type: ignore[misc]
    assert len(bundle_reads) == 1
    ctx = tls.verified_context()
    assert ctx.verify_mode is ssl.CERT_REQUIRED and ctx.check_hostname  # a bad certificate is still refused
    assert ctx.get_ca_certs() or ctx.cert_store_stats()["x509_ca"] > 0
    for c in clients[:100]:
        c.close()


def test_a_ca_file_named_in_the_environment_is_used_as_httpx_would(bundle_reads, monkeypatch, tmp_path):
    default = tls.verified_context()
    mine = tmp_path / "ca.pem"
    mine.write_bytes(open(certifi.where(), "rb").read())
    monkeypatch.setenv("SSL_CERT_FILE", str(mine))
    from_env = tls.verified_context()
    assert from_env is not default and len(bundle_reads) == 2
    assert tls.verified_context() is from_env  # made once for that value
    assert tls.verified_context(trust_env=False) is not from_env  # a web ingest ignores the environment, as before


def test_a_web_ingests_pools_share_the_context_unless_given_their_own(bundle_reads):
    guarded = GuardedTransport(FetchPolicy())
    assert guarded._options["verify"] is tls.verified_context(trust_env=False)
    own = ssl.create_default_context()
    assert GuardedTransport(FetchPolicy(), verify=own)._options["verify"] is own
    assert GuardedTransport(FetchPolicy(), verify=False)._options["verify"] is False
