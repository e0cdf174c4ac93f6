"""Bedrock and LiteLLM embedders through their real clients (boto3, litellm) against a local server
speaking the providers' wire formats (tests/emulators/embeddings_emulator.py)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from cairn.core.errors import ConfigError, EmbeddingError
from cairn.ports.embeddings.base import DimensionMismatch, Embedder, check_dimension
from tests.emulators.embeddings_emulator import EmbeddingsEmulator, fake_vector

pytestmark = [pytest.mark.integration, pytest.mark.filterwarnings("ignore::UserWarning")]

TITAN = "amazon.titan-embed-text-v2:0"
COHERE = "cohere.embed-english-v3"


@pytest.fixture(scope="module")
def emulator():
    server = EmbeddingsEmulator()
    yield server
    server.close()


@pytest.fixture
def fake(emulator, monkeypatch):
    emulator.reset()
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    return emulator


def unit(vec: list[float]) -> np.ndarray:
    v = np.asarray(vec, dtype=np.float32)
    return v / np.linalg.norm(v)


def bedrock(fake, model, **kw):
    from cairn.ports.embeddings.bedrock import BedrockEmbedder

    embedder = BedrockEmbedder(model, region="us-east-1", endpoint_url=fake.url, **kw)
    embedder.sleep = lambda s: None  # backoff waits are not what these tests check
    return embedder


# --- Bedrock: Titan Text Embeddings v2 ----------------------------------------------------------


def test_titan_v2_sends_one_signed_request_per_text_with_the_dimension(fake):
    embedder = bedrock(fake, TITAN, dimension=256)
    texts = ["alpha beta", "gamma", "delta epsilon zeta"]
    out = embedder.embed(texts)
    assert out.shape == (3, 256) and out.dtype == np.float32
    for row, text in zip(out, texts, strict=True):
        np.testing.assert_allclose(row, unit(fake_vector(text, 256)), atol=1e-6)
    assert len(fake.requests) == 3
    path, headers, body = fake.requests[0]
    assert path == f"/model/{TITAN}/invoke"
    assert headers["Authorization"].startswith("AWS4-HMAC-SHA256") and "/bedrock/aws4_request" in headers["Authorization"]
    assert {b["inputText"] for _, _, b in fake.requests} == set(texts)
    assert all(b["dimensions"] == 256 and b["normalize"] is True for _, _, b in fake.requests)
    assert embedder.tokens == 6  # from X-Amzn-Bedrock-Input-Token-Count
    assert embedder.dimension == 256 and not embedder.distinguishes_input_type


def test_titan_v2_defaults_to_1024_and_rejects_a_dimension_it_does_not_offer(fake):
    assert bedrock(fake, TITAN).dimension == 1024
    with pytest.raises(ConfigError, match="dimension 300 is not offered; allowed: 256, 512, 1024"):
        bedrock(fake, TITAN, dimension=300)


def test_an_unknown_bedrock_model_is_a_config_error_naming_the_supported_ones(fake):
    with pytest.raises(ConfigError, match="amazon.titan-embed-text-v2:0, cohere.embed-english-v3"):
        bedrock(fake, "amazon.titan-embed-image-v1")


# --- Bedrock: Cohere Embed v3 ------------------------------------------------------------------


def test_cohere_batches_of_96_keep_the_order_and_use_the_document_type(fake):
    embedder = bedrock(fake, COHERE)
    texts = [f"document number {i} " + "word " * (i % 7) for i in range(200)]
    out = embedder.embed(texts)
    assert out.shape == (200, 1024)
    assert [len(b["texts"]) for _, _, b in fake.requests] == [96, 96, 8]
    assert {b["input_type"] for _, _, b in fake.requests} == {"search_document"}
    assert all(b["truncate"] == "END" for _, _, b in fake.requests)
    for i in (0, 57, 199):
        np.testing.assert_allclose(out[i], unit(fake_vector(texts[i], 1024, "search_document")), atol=1e-6)
    assert np.allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)


def test_cohere_embeds_a_query_with_the_query_type(fake):
    embedder = bedrock(fake, "cohere.embed-multilingual-v3")
    vec = embedder.embed_query("where is the pool?")
    assert fake.requests[-1][2]["input_type"] == "search_query"
    np.testing.assert_allclose(vec, unit(fake_vector("where is the pool?", 1024, "search_query")), atol=1e-6)
    assert embedder.distinguishes_input_type
    with pytest.raises(ConfigError, match="allowed: 1024"):
        bedrock(fake, COHERE, dimension=512)


# --- Bedrock: errors and retries ---------------------------------------------------------------


def test_throttling_is_retried_with_backoff_then_succeeds(fake):
    embedder = bedrock(fake, COHERE, max_retries=3)
    waits: list[float] = []
    embedder.sleep = waits.append
    fake.fail = [(429, "ThrottlingException"), (503, "ServiceUnavailableException")]
    out = embedder.embed(["a", "b"])
    assert out.shape == (2, 1024) and len(fake.requests) == 3
    assert embedder.retries == 2 and len(waits) == 2 and all(w > 0 for w in waits)


def test_throttling_past_the_retries_is_a_retryable_error(fake):
    embedder = bedrock(fake, TITAN, max_retries=1)
    fake.fail = [(429, "ThrottlingException")] * 2
    with pytest.raises(EmbeddingError, match="ThrottlingException") as err:
        embedder.embed(["only one"])
    assert err.value.retryable and len(fake.requests) == 2


@pytest.mark.parametrize("status, code, hint", [
    (400, "ValidationException", "dimensions: 256, 512 or 1024"),
    (403, "AccessDeniedException", "bedrock:InvokeModel"),
])
def test_a_refused_request_fails_at_once_with_a_hint(fake, status, code, hint):
    embedder = bedrock(fake, TITAN, max_retries=3)
    fake.fail = [(status, code)]
    with pytest.raises(EmbeddingError, match=code) as err:
        embedder.embed(["x"])
    assert not err.value.retryable and hint in err.value.message and len(fake.requests) == 1


def test_an_unreachable_endpoint_is_retryable(fake):
    from cairn.ports.embeddings.bedrock import BedrockEmbedder

    embedder = BedrockEmbedder(TITAN, region="us-east-1", endpoint_url="http://127.0.0.1:9", max_retries=0, timeout_s=1)
    with pytest.raises(EmbeddingError, match="cannot reach Bedrock") as err:
        embedder.embed(["x"])
    assert err.value.retryable


def test_vectors_of_another_dimension_are_refused_with_the_fix(fake):
    embedder = bedrock(fake, COHERE)
    fake.returned_dimension = 768
    with pytest.raises(EmbeddingError, match="returned 768-dimensional vectors; this embedder is configured for 1024"):
        embedder.embed(["x"])


# --- LiteLLM -----------------------------------------------------------------------------------


def test_litellm_is_imported_only_when_embedding():
    code = ("import sys; from cairn.ports.embeddings.litellm_embedder import LiteLLMEmbedder; "
            "LiteLLMEmbedder('openai/m', dimension=8); assert 'litellm' not in sys.modules, 'litellm imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


def litellm_embedder(fake, model="openai/fake-embed", **kw):
    pytest.importorskip("litellm")
    from cairn.ports.embeddings.litellm_embedder import LiteLLMEmbedder

    kw.setdefault("dimension", 64)
    embedder = LiteLLMEmbedder(model, base_url=fake.url + "/v1", api_key="sk-test", **kw)
    embedder.sleep = lambda s: None
    return embedder


def test_litellm_over_an_openai_compatible_server(fake):
    embedder = litellm_embedder(fake, batch_size=4)
    texts = [f"text {i}" for i in range(10)]
    out = embedder.embed(texts)
    assert out.shape == (10, 64)
    for i in (0, 9):
        np.testing.assert_allclose(out[i], unit(fake_vector(texts[i], 64)), atol=1e-5)
    assert [len(b["input"]) for _, _, b in fake.requests] == [4, 4, 2]
    path, headers, body = fake.requests[0]
    assert path == "/v1/embeddings" and {k.lower(): v for k, v in headers.items()}["authorization"] == "Bearer sk-test" and body["model"] == "fake-embed"
    assert "dimensions" not in body and embedder.tokens == 20


def test_litellm_asks_for_the_dimension_when_told(fake):
    embedder = litellm_embedder(fake, "openai/text-embedding-3-small", dimension=32, request_dimensions=True)
    assert embedder.embed_query("q").shape == (32,)
    assert fake.requests[-1][2]["dimensions"] == 32


def test_litellm_rate_limit_is_retried_and_a_bad_request_is_not(fake):
    embedder = litellm_embedder(fake, max_retries=2)
    fake.fail = [(429, "rate_limit_exceeded")]
    assert embedder.embed(["a"]).shape == (1, 64) and embedder.retries == 1
    fake.fail = [(400, "invalid_request_error")]
    with pytest.raises(EmbeddingError) as err:
        embedder.embed(["a"])
    assert not err.value.retryable


def test_litellm_checks_the_configured_dimension(fake):
    embedder = litellm_embedder(fake, dimension=384)
    with pytest.raises(EmbeddingError, match="returned 64-dimensional vectors; this embedder is configured for 384"):
        embedder.embed(["a"])


def test_litellm_sends_the_input_type_to_models_that_take_one():
    from cairn.ports.embeddings.litellm_embedder import LiteLLMEmbedder

    assert LiteLLMEmbedder("cohere/embed-english-v3.0", dimension=1024).distinguishes_input_type
    assert LiteLLMEmbedder("gemini/text-embedding-004", dimension=768).distinguishes_input_type
    assert not LiteLLMEmbedder("openai/text-embedding-3-small", dimension=1536).distinguishes_input_type
    with pytest.raises(ConfigError, match="dimension must be a positive whole number"):
        LiteLLMEmbedder("openai/x", dimension=0)


# --- the base: input types, retries, the index dimension ----------------------------------------


class _Plain(Embedder):
    """An embedder without input types, as the local model is: ``_embed(texts)`` only."""

    name, dimension = "plain", 3

    def _embed(self, texts):
        return np.tile(np.array([1.0, 0.0, 0.0], dtype=np.float32), (len(texts), 1))


def test_an_embedder_without_input_types_serves_queries_unchanged():
    plain = _Plain()
    assert plain.embed_query("q").tolist() == [1.0, 0.0, 0.0]
    assert plain.embed(["a", "b"], input_type="document").shape == (2, 3)
    with pytest.raises(EmbeddingError, match="input_type 'passage' is not valid; allowed: query, document"):
        plain.embed(["a"], input_type="passage")


class _Store:
    def __init__(self, found):
        self.found, self.index = found, "cairn-contexts"

    def index_dimension(self):
        return self.found


def test_check_dimension_names_both_numbers_and_the_fix():
    plain = _Plain()
    assert check_dimension(plain, _Store(3)) == 3
    assert check_dimension(plain, _Store(None)) == 3  # no index yet: it will be created with 3
    with pytest.raises(DimensionMismatch) as err:
        check_dimension(plain, _Store(1024))
    msg = err.value.message
    assert "3-dimensional" in msg and "1024-dimensional" in msg and "'cairn-contexts'" in msg
    assert "create a new index with dimension 3" in msg and isinstance(err.value, ConfigError)
    assert err.value.details == {"embedder": "plain", "embedder_dimension": 3, "index_dimension": 1024}
