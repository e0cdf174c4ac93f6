import pytest

from cairn.core.config import LocalStoreSettings, OpenSearchSettings, load_settings
from cairn.core.errors import ConfigError, RequestError
from cairn.core.requests import FindRequest, parse_request

pytestmark = pytest.mark.unit


def test_request_errors_list_every_problem():
    with pytest.raises(RequestError) as err:
        parse_request(FindRequest, {"query": "  ", "limit": 0, "colour": "red", "target_uris": ["x://y"]})
    msg = err.value.message
    assert "query: the query is empty" in msg
    assert "limit: Input should be greater than or equal to 1" in msg
    assert "colour: unknown field; allowed: query" in msg
    assert "must start with 'cairn://'" in msg


def test_settings_precedence_explicit_over_env_over_default(tmp_path):
    env = {"CAIRN_TENANT": "acme", "CAIRN_HOME": str(tmp_path)}
    assert load_settings(env).tenant == "acme"
    assert load_settings(env, tenant="beta").tenant == "beta"
    assert load_settings({}).tenant == "default"
    s = load_settings(env)
    assert isinstance(s.store, LocalStoreSettings) and s.store.path == tmp_path / "store"


def test_backend_settings_are_a_discriminated_union():
    s = load_settings({"CAIRN_STORE": "opensearch", "CAIRN_OPENSEARCH_URL": "https://search.example:9200"})
    assert isinstance(s.store, OpenSearchSettings) and s.store.url == "https://search.example:9200"


def test_bad_settings_name_the_variable():
    with pytest.raises(ConfigError, match=r"store\.api_key: Field required \(CAIRN_STORE and CAIRN_<BACKEND>_\*\)"):
        load_settings({"CAIRN_STORE": "pinecone"})
    with pytest.raises(ConfigError, match=r"embedder\.batch_size.*CAIRN_EMBEDDING_"):
        load_settings({"CAIRN_EMBEDDING_BATCH_SIZE": "lots"})
    with pytest.raises(ConfigError, match="store"):
        load_settings({"CAIRN_STORE": "redis"})


def test_service_settings_come_from_the_environment():
    s = load_settings(
        {
            "CAIRN_SESSIONS": "dynamodb", "CAIRN_SESSIONS_TABLE": "sessions",
            "CAIRN_RERANKER": "cohere", "CAIRN_RERANK_BASE_URL": "http://rerank.local", "CAIRN_RERANK_MODEL": "rerank-v3.5",
            "CAIRN_LLM_PROVIDER": "openai", "CAIRN_LLM_MODEL": "gpt-4o-mini",
            "CAIRN_CONTENT_BUCKET": "bodies", "CAIRN_ALPHA": "0.4",
        }
    )
    assert (s.sessions.backend, s.sessions.table) == ("dynamodb", "sessions")
    assert (s.rerank.kind, s.rerank.base_url) == ("cohere", "http://rerank.local")
    assert (s.llm.provider, s.llm.model, s.llm.timeout_s) == ("openai", "gpt-4o-mini", 5.0)
    assert (s.content.backend, s.content.bucket) == ("s3", "bodies") and s.alpha == 0.4
    defaults = load_settings({})
    assert defaults.llm is None and defaults.rerank.kind == "none" and defaults.sessions.backend == "sqlite"


def test_bad_service_settings_name_what_is_allowed():
    with pytest.raises(ConfigError, match=r"rerank: Input tag 'magic'.*'none', 'local', 'cohere', 'bedrock', 'litellm'"):
        load_settings({"CAIRN_RERANKER": "magic"})
    with pytest.raises(ConfigError, match=r"sessions\.table: Field required"):
        load_settings({"CAIRN_SESSIONS": "dynamodb"})
    with pytest.raises(ConfigError, match="alpha"):
        load_settings({"CAIRN_ALPHA": "2"})


def test_a_key_for_another_provider_never_breaks_start_up_and_a_misspelt_variable_is_named():
    # a stack sets every key it may use; a Bedrock LLM and reranker declare no api_key
    s = load_settings({"CAIRN_LLM_PROVIDER": "bedrock", "CAIRN_LLM_MODEL": "m", "CAIRN_LLM_API_KEY": "secretsmanager:x#k",
                       "CAIRN_RERANKER": "bedrock", "CAIRN_RERANK_API_KEY": "secretsmanager:x#r",
                       "CAIRN_EMBEDDING_DIMENSION": "1024"})
    assert (s.llm.provider, s.rerank.kind, s.embedder.provider) == ("bedrock", "bedrock", "local")
    with pytest.raises(ConfigError, match=r"llm\.modle: Extra inputs are not permitted \(CAIRN_LLM_\*\)"):
        load_settings({"CAIRN_LLM_PROVIDER": "bedrock", "CAIRN_LLM_MODEL": "m", "CAIRN_LLM_MODLE": "x"})


def test_a_home_that_is_a_file_is_named(tmp_path):
    afile = tmp_path / "notes.txt"
    afile.write_text("x")
    with pytest.raises(ConfigError, match="is a file; give a folder"):
        load_settings({"CAIRN_HOME": str(afile)})


def test_search_hybrid_is_auto_unless_set():
    assert load_settings({}).search_hybrid == "auto" and load_settings({}).find_hybrid is True
    assert load_settings({"CAIRN_SEARCH_HYBRID": "false"}).search_hybrid is False
    assert load_settings({"CAIRN_SEARCH_HYBRID": "true"}).search_hybrid is True
    with pytest.raises(ConfigError, match="search_hybrid"):
        load_settings({"CAIRN_SEARCH_HYBRID": "sometimes"})
