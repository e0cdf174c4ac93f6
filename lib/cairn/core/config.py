"""Settings: explicit argument, then environment variable, then default.

Validated once at start-up; a bad value is a :class:`ConfigError` naming the setting and the
environment variable. Every provider has its own settings model, chosen by a discriminator
(``backend``, ``provider`` or ``kind``), so no model is a bag of every provider's fields.
Services are built from these settings in one place: :mod:`cairn.app.services`.

Environment variables (all optional; the embedded default needs none)::

    CAIRN_HOME, CAIRN_TENANT, CAIRN_SCORE_THRESHOLD, CAIRN_DEFAULT_LIMIT, CAIRN_PLANNER,
    CAIRN_ALPHA, CAIRN_HOTNESS_WEIGHT, CAIRN_STATE_MACHINE_ARN, CAIRN_FIND_HYBRID, CAIRN_SEARCH_HYBRID,
    CAIRN_PLANNER_MIN_CONFIDENCE, CAIRN_PLANNER_STOP_WORDS (comma-separated), CAIRN_MEMORY_EXTRACTION,
    CAIRN_MEMORY_WINDOW, CAIRN_MEMORY_HYBRID, CAIRN_RECORD_USE, CAIRN_USE_COUNTS_TABLE,
    CAIRN_LANGUAGE (auto|en|zh|ja|de|...), CAIRN_TENANT_LANGUAGES (acme=zh,globex=de)
    CAIRN_RATE_LIMITS ("20/second, 100000/day"), CAIRN_TENANT_RATE_LIMITS (JSON), CAIRN_RATE_LIMIT_TABLE
    CAIRN_STORE=local|pinecone|opensearch     + CAIRN_STORE_PATH, CAIRN_PINECONE_*, CAIRN_OPENSEARCH_*
    CAIRN_EMBEDDER=local|bedrock|litellm      + CAIRN_EMBEDDING_MODEL, _DIMENSION, _REGION,
                                                CAIRN_EMBEDDING_BASE_URL, _API_KEY, _BATCH_SIZE
    CAIRN_SESSIONS=sqlite|dynamodb            + CAIRN_SESSIONS_PATH | CAIRN_SESSIONS_TABLE, _REGION, _ENDPOINT_URL
    CAIRN_CONTENT_BUCKET (S3 content store)   + CAIRN_CONTENT_PREFIX; else CAIRN_CONTENT_PATH (a folder)
    CAIRN_LLM_PROVIDER=bedrock|openai|litellm + CAIRN_LLM_MODEL, _BASE_URL, _API_KEY, _REGION, _TIMEOUT_S
    CAIRN_RERANKER=none|local|cohere|bedrock|litellm + CAIRN_RERANK_MODEL, _BASE_URL, _API_KEY, _REGION

A value of a key setting (``*_API_KEY``, ``*_PASSWORD``) may name a secret instead of holding it
(``ssm:/path`` or ``secretsmanager:name#field``); it is read at run time (:mod:`cairn.ports.secrets`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from cairn.core.errors import ConfigError
from cairn.core.text.languages import LANGUAGES, check

ENV_PREFIX = "CAIRN_"


class _Settings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


# --------------------------------------------------------------------------- vector store


class LocalStoreSettings(_Settings):
    backend: Literal["local"] = "local"
    path: Path = Path(".cairn/store")
    ann: Literal["auto", "exact"] = "auto"
    ann_min_rows: int = Field(default=200_000, ge=1)


class PineconeSettings(_Settings):
    backend: Literal["pinecone"] = "pinecone"
    api_key: str
    index_host: str  # the data-plane host of the index, https://<index>-<project>.svc.<env>.pinecone.io
    timeout_s: float = 10.0
    max_retries: int = 3
    pool_threads: int = 4
    backoff_s: float = 0.25  # first retry delay; doubles each retry (with jitter)


class OpenSearchSettings(_Settings):
    backend: Literal["opensearch"] = "opensearch"
    url: str
    index: str = "cairn-contexts"
    engine: Literal["lucene", "faiss"] = "lucene"
    auth: Literal["none", "basic", "sigv4"] = "none"
    username: str | None = None
    password: str | None = None
    region: str | None = None
    service: Literal["es", "aoss"] = "es"  # es: OpenSearch Service; aoss: Serverless
    timeout_s: float = 10.0
    max_retries: int = 3
    backoff_s: float = 0.2  # first retry delay; doubles per retry (with jitter), capped at 5 s
    verify_certs: bool = True
    # languages with their own analysed subfields (CAIRN_OPENSEARCH_LANGUAGES=zh,ja,de; English always)
    languages: tuple[str, ...] = tuple(code for code in LANGUAGES if code != "en")


StoreSettings = Annotated[
    LocalStoreSettings | PineconeSettings | OpenSearchSettings, Field(discriminator="backend")
]


# --------------------------------------------------------------------------- embedder


class LocalEmbedderSettings(_Settings):
    """all-MiniLM-L6-v2 (int8 ONNX, 384 dimensions, English), shipped on PyPI: the embedded default;
    or multilingual-e5-small (4-bit, 384 dimensions, ~100 languages; CAIRN_EMBEDDING_MODEL)."""

    provider: Literal["local"] = "local"
    model: Literal["all-MiniLM-L6-v2", "multilingual-e5-small"] = "all-MiniLM-L6-v2"
    batch_size: int = Field(default=8, ge=1, le=1024)  # 8: a third of the memory of 32, no slower (benchmarks/README.md)
    cache: str = Field(default="auto", min_length=1, description=(
        "the local model's vectors, kept for every process of the machine so a text is embedded once: "
        "`auto` (`$XDG_CACHE_HOME/cairn/embeddings`, else `~/.cache/cairn/embeddings`; off inside AWS Lambda), "
        "`off`, or a folder (docs/ingestion.md). It holds vectors of every home and tenant embedded here"))
    cache_mb: int = Field(default=512, ge=1, le=1_000_000, description=(
        "the local model's vector cache's size in MB; past it the oldest vectors are dropped"))


class BedrockEmbedderSettings(_Settings):
    """Amazon Bedrock: Titan Text Embeddings v2 (256/512/1024 dimensions) or Cohere Embed v3."""

    provider: Literal["bedrock"] = "bedrock"
    model: str = "amazon.titan-embed-text-v2:0"
    dimension: int | None = Field(default=None, ge=1)  # None: the model's default
    region: str | None = None
    batch_size: int = Field(default=96, ge=1, le=1024)


class LiteLLMEmbedderSettings(_Settings):
    """Any embedding model LiteLLM reaches (OpenAI, Azure, Vertex, an OpenAI-compatible server)."""

    provider: Literal["litellm"] = "litellm"
    model: str
    dimension: int = Field(ge=1)
    base_url: str | None = None
    api_key: str | None = None
    batch_size: int = Field(default=96, ge=1, le=2048)


EmbedderSettings = Annotated[
    LocalEmbedderSettings | BedrockEmbedderSettings | LiteLLMEmbedderSettings, Field(discriminator="provider")
]


# --------------------------------------------------------------------------- sessions and content


class SQLiteSessionSettings(_Settings):
    backend: Literal["sqlite"] = "sqlite"
    path: Path | None = None  # default: <home>/sessions.db


class DynamoDBSessionSettings(_Settings):
    backend: Literal["dynamodb"] = "dynamodb"
    table: str
    region: str | None = None
    endpoint_url: str | None = None


SessionSettings = Annotated[SQLiteSessionSettings | DynamoDBSessionSettings, Field(discriminator="backend")]


class LocalContentSettings(_Settings):
    backend: Literal["local"] = "local"
    path: Path | None = None  # default: <home>/content


class S3ContentSettings(_Settings):
    backend: Literal["s3"] = "s3"
    bucket: str
    prefix: str = "content"  # the same in Lambda and on a laptop pointed at the bucket


ContentSettings = Annotated[LocalContentSettings | S3ContentSettings, Field(discriminator="backend")]


# --------------------------------------------------------------------------- LLM


class _LLM(_Settings):
    model: str
    timeout_s: float = Field(default=5.0, gt=0, le=120)


class BedrockLLMSettings(_LLM):
    provider: Literal["bedrock"] = "bedrock"
    region: str | None = None


class OpenAILLMSettings(_LLM):
    """Any OpenAI-compatible chat completions endpoint (through httpx)."""

    provider: Literal["openai"] = "openai"
    base_url: str | None = None
    api_key: str | None = None


class LiteLLMSettings(_LLM):
    provider: Literal["litellm"] = "litellm"
    base_url: str | None = None
    api_key: str | None = None


LLMSettings = Annotated[BedrockLLMSettings | OpenAILLMSettings | LiteLLMSettings, Field(discriminator="provider")]


# --------------------------------------------------------------------------- rerank


class NoRerankSettings(_Settings):
    kind: Literal["none"] = "none"


class LocalRerankSettings(_Settings):
    """Dense cosine on the full text fused with BM25, with the embedder already loaded."""

    kind: Literal["local"] = "local"
    # the dense part: "stored" = the candidates' stored vectors (only the query is embedded),
    # "text" = re-embed each candidate's text; "auto" = stored unless the embedder is the local model
    vectors: Literal["auto", "stored", "text"] = Field(default="auto", description=(
        "local reranker: `stored` scores the candidates' stored vectors (only the query is embedded), `text` "
        "re-embeds each candidate's text; `auto` is `text` with the local model, `stored` with any paid embedder"))


class CohereRerankSettings(_Settings):
    """A Cohere-compatible ``/v2/rerank`` endpoint (Cohere, or a self-hosted server)."""

    kind: Literal["cohere"] = "cohere"
    model: str
    base_url: str = "https://api.cohere.com"
    api_key: str | None = None


class BedrockRerankSettings(_Settings):
    kind: Literal["bedrock"] = "bedrock"
    model: str = "amazon.rerank-v1:0"
    region: str | None = None


class LiteLLMRerankSettings(_Settings):
    kind: Literal["litellm"] = "litellm"
    model: str
    base_url: str | None = None
    api_key: str | None = None


RerankSettings = Annotated[
    NoRerankSettings | LocalRerankSettings | CohereRerankSettings | BedrockRerankSettings | LiteLLMRerankSettings,
    Field(discriminator="kind"),
]


# --------------------------------------------------------------------------- all of it


class Settings(_Settings):
    home: Path = Path(".cairn")
    tenant: str = "default"  # the tenant of the library, the CLI and a keyless `cairn serve`
    store: StoreSettings = Field(default_factory=LocalStoreSettings)
    embedder: EmbedderSettings = Field(default_factory=LocalEmbedderSettings)
    sessions: SessionSettings = Field(default_factory=SQLiteSessionSettings)
    content: ContentSettings = Field(default_factory=LocalContentSettings)  # full bodies
    llm: LLMSettings | None = None  # None: no LLM (the embedded default)
    planner: Literal["auto", "raw", "session-rewrite", "llm"] = "auto"  # auto: llm if configured
    rerank: RerankSettings = Field(default_factory=NoRerankSettings)  # local rescoring lowered quality where measured
    score_threshold: float = Field(default=0.1, ge=0.0, le=1.0, allow_inf_nan=False)
    default_limit: int = Field(default=5, ge=1, le=100)
    alpha: float = Field(default=0.3, ge=0.0, le=1.0)  # thinking mode's propagation weight
    hotness_weight: float = Field(default=0.0, ge=0.0, le=1.0)
    find_hybrid: bool = True  # find() fuses dense and keyword scores unless the request says
    # search(): "auto" fuses keywords except inside folders the planner narrowed the query to
    # (there they hurt where measured: benchmarks/README.md); true / false: always / never
    search_hybrid: bool | Literal["auto"] = "auto"
    planner_min_confidence: float = Field(default=0.55, ge=0.0, le=1.0)  # scope only above this
    planner_stop_words: tuple[str, ...] = ()  # words of the tenant's domain that are never names
    memory_extraction: Literal["auto", "llm", "archive"] = "auto"  # auto: typed memories with an LLM, else archive turns
    memory_window: int = Field(default=1, ge=1, le=20)  # turns per archived episode (1 measured best on the conversation benchmark)
    memory_hybrid: bool = True  # memory searches fuse dense and keyword scores (measured: benchmarks/README.md)
    record_use: bool = True  # count what is returned and read (hotness), written off the request path
    use_counts_table: str | None = Field(default=None, description=(
        "the DynamoDB table (partition key `pk`, sort key `sk`, TTL `expires_at`) that keeps the use counts beside "
        "the vectors; unset: the embedded store's side table, or `<home>/uses.sqlite` beside a cloud store"))
    state_machine_arn: str | None = None  # run search() through the Express workflow (Lambda)
    fetch_allow_hosts: tuple[str, ...] = ()  # hosts (or host:port) URL ingestion may fetch although private/loopback
    # URL ingestion's budget per ingest: HTTP requests (pages, redirects, robots.txt, sitemaps) and bytes read
    fetch_max_requests: int = Field(default=30_000, ge=1, le=10_000_000)
    fetch_max_bytes: int = Field(default=2_000_000_000, ge=1, le=10**13)
    context_budget_tokens: int = Field(default=1500, ge=50, le=200_000)  # tokens of a context block by default
    # --- languages (issue 25): "auto" detects each document's and query's language; a code fixes it
    language: str = "auto"  # CAIRN_LANGUAGE: every tenant's default
    tenant_languages: dict[str, str] = Field(default_factory=dict)  # CAIRN_TENANT_LANGUAGES=acme=zh,globex=de

    @field_validator("language")
    @classmethod
    def _language(cls, value: str) -> str:
        return check(value, setting="language (CAIRN_LANGUAGE)")

    @field_validator("tenant_languages")
    @classmethod
    def _tenant_languages(cls, value: dict[str, str]) -> dict[str, str]:
        return {tenant: check(code, setting=f"the language of tenant {tenant!r} (CAIRN_TENANT_LANGUAGES)")
                for tenant, code in value.items()}
    # --- per-tenant rate limits and quotas (issue 23, cairn.ports.ratelimit): "COUNT/PERIOD, ..." or "none"
    rate_limits: str = Field(default="none", description=(
        "every tenant's requests allowed per window, e.g. `20/second, 100000/day` (periods: second, minute, hour, "
        "day; `none`: no limit); a request past one answers 429 with Retry-After (docs/rate-limits.md)"))
    tenant_rate_limits: dict[str, str] = Field(default_factory=dict, description=(
        "tenants with their own limits instead of `rate_limits`, as JSON: `{\"acme\": \"5/second\", \"bigco\": \"none\"}`"))
    rate_limit_table: str | None = Field(default=None, description=(
        "the DynamoDB table (partition key `pk`, TTL `expires_at`) that counts requests for every instance; "
        "unset: `<home>/ratelimits.db`, shared by the processes on this machine"))

    @field_validator("rate_limits")
    @classmethod
    def _rate_limits(cls, value: str) -> str:
        from cairn.core.limits import parse_limits

        parse_limits(value, setting="rate_limits (CAIRN_RATE_LIMITS)")
        return value

    @field_validator("tenant_rate_limits")
    @classmethod
    def _tenant_rate_limits(cls, value: dict[str, str]) -> dict[str, str]:
        from cairn.core.limits import parse_limits

        for tenant, limits in value.items():
            parse_limits(limits, setting=f"the limits of tenant {tenant!r} (CAIRN_TENANT_RATE_LIMITS)")
        return value

    @model_validator(mode="after")
    def _local_store_in_home(self) -> Settings:
        """A local store given no path of its own lives in the home, as the sessions and the
        contents do: ``Settings(home=h)`` keeps everything under ``h`` (before, the store stayed in
        ``./.cairn/store`` whatever the home)."""
        if isinstance(self.store, LocalStoreSettings) and "path" not in self.store.model_fields_set:
            object.__setattr__(self, "store", self.store.model_copy(update={"path": self.home / "store"}))
        return self

    # how long search() waits for that workflow (StartSyncExecution's read timeout): longer than the
    # state machine's TimeoutSeconds (25), shorter than the api function's timeout (29)
    workflow_timeout_s: float = Field(default=27.0, gt=0, le=900, description=(
        "how long `search` waits for the Express workflow (StartSyncExecution's read timeout): longer than the "
        "state machine's 25 s, shorter than the api function's 29 s"))


# --------------------------------------------------------------------------- from the environment


def _prefixed(env: dict[str, str], prefix: str) -> dict[str, str]:
    return {k[len(prefix):].lower(): v for k, v in env.items() if k.startswith(prefix) and v != ""}


def _env_store(env: dict[str, str], home: Path) -> dict[str, Any]:
    backend = env.get("CAIRN_STORE") or "local"
    if backend == "local":
        local: dict[str, Any] = {"backend": "local", "path": env.get("CAIRN_STORE_PATH") or str(home / "store")}
        for name in ("ann", "ann_min_rows"):
            if env.get(f"CAIRN_STORE_{name.upper()}"):
                local[name] = env[f"CAIRN_STORE_{name.upper()}"]
        return local
    fields: dict[str, Any] = _prefixed(env, f"CAIRN_{backend.upper()}_")
    if backend == "opensearch" and "languages" in fields:
        fields["languages"] = tuple(w.strip().lower() for w in fields["languages"].split(",") if w.strip())
    return {"backend": backend, **fields}


def _env_services(env: dict[str, str]) -> dict[str, Any]:
    data: dict[str, Any] = {}
    data["embedder"] = {"provider": env.get("CAIRN_EMBEDDER") or "local", **_prefixed(env, "CAIRN_EMBEDDING_")}
    data["sessions"] = {"backend": env.get("CAIRN_SESSIONS") or "sqlite", **_prefixed(env, "CAIRN_SESSIONS_")}
    content = _prefixed(env, "CAIRN_CONTENT_")
    data["content"] = {"backend": "s3" if content.get("bucket") else "local", **content}
    if env.get("CAIRN_LLM_PROVIDER") or env.get("CAIRN_LLM_MODEL"):
        data["llm"] = _prefixed(env, "CAIRN_LLM_")
    data["rerank"] = {"kind": env.get("CAIRN_RERANKER") or "none", **_prefixed(env, "CAIRN_RERANK_")}
    return data


_STORES = (LocalStoreSettings, PineconeSettings, OpenSearchSettings)
_EMBEDDERS = (LocalEmbedderSettings, BedrockEmbedderSettings, LiteLLMEmbedderSettings)
_SESSIONS = (SQLiteSessionSettings, DynamoDBSessionSettings)
_CONTENTS = (LocalContentSettings, S3ContentSettings)
_LLMS = (BedrockLLMSettings, OpenAILLMSettings, LiteLLMSettings)
_RERANKS = (NoRerankSettings, LocalRerankSettings, CohereRerankSettings, BedrockRerankSettings, LiteLLMRerankSettings)


def _for_chosen(fields: dict[str, Any], family: tuple[type[BaseModel], ...], tag: str) -> dict[str, Any]:
    """The variables of the provider chosen. A variable another provider of the family declares is
    left out (a deployment sets keys for every provider it may use: ``CAIRN_LLM_API_KEY`` must not
    break a Bedrock LLM); one that no provider declares is kept, so a misspelt name is an error."""
    chosen = next((m for m in family if fields.get(tag) == m.model_fields[tag].default), None)
    if chosen is None:
        return fields
    known = {name for m in family for name in m.model_fields}
    return {k: v for k, v in fields.items() if k in chosen.model_fields or k not in known}


_SCALARS = ("tenant", "score_threshold", "default_limit", "planner", "alpha", "hotness_weight", "state_machine_arn",
            "find_hybrid", "search_hybrid", "planner_min_confidence", "memory_extraction", "memory_window",
            "memory_hybrid", "record_use", "fetch_max_requests", "fetch_max_bytes", "context_budget_tokens", "language",
            "workflow_timeout_s", "rate_limits", "rate_limit_table", "use_counts_table")


def load_settings(env: dict[str, str] | None = None, **overrides: Any) -> Settings:
    """Build settings from ``overrides`` (explicit), then ``env`` (default: os.environ), then defaults.

    A provider's own variables are read only for the provider chosen (``CAIRN_STORE=pinecone``
    reads ``CAIRN_PINECONE_*``), so a variable of another provider never breaks start-up."""
    env = dict(os.environ if env is None else env)
    home = Path(overrides.get("home") or env.get("CAIRN_HOME") or ".cairn")
    if home.exists() and not home.is_dir():
        raise ConfigError(f"the cairn home {str(home)!r} (CAIRN_HOME or --home) is a file; give a folder, or a path that does not exist yet")
    data: dict[str, Any] = {"home": home, "store": _env_store(env, home), **_env_services(env)}
    for key, family, tag in (("store", _STORES, "backend"), ("embedder", _EMBEDDERS, "provider"), ("sessions", _SESSIONS, "backend"),
                             ("content", _CONTENTS, "backend"), ("llm", _LLMS, "provider"), ("rerank", _RERANKS, "kind")):
        if key in data:
            data[key] = _for_chosen(data[key], family, tag)
    for key in _SCALARS:
        value = env.get(f"{ENV_PREFIX}{key.upper()}")
        if value:
            data[key] = value
    if env.get("CAIRN_FETCH_ALLOW_HOSTS"):
        data["fetch_allow_hosts"] = tuple(h.strip() for h in env["CAIRN_FETCH_ALLOW_HOSTS"].split(",") if h.strip())
    if env.get("CAIRN_TENANT_LANGUAGES"):
        data["tenant_languages"] = _pairs(env["CAIRN_TENANT_LANGUAGES"], "CAIRN_TENANT_LANGUAGES")
    if env.get("CAIRN_TENANT_RATE_LIMITS"):
        data["tenant_rate_limits"] = _json_object(env["CAIRN_TENANT_RATE_LIMITS"], "CAIRN_TENANT_RATE_LIMITS",
                                                  '{"acme": "5/second, 1000/day"}')
    if env.get("CAIRN_PLANNER_STOP_WORDS"):
        data["planner_stop_words"] = tuple(w.strip() for w in env["CAIRN_PLANNER_STOP_WORDS"].split(",") if w.strip())
    data.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        raise ConfigError("invalid settings: " + "; ".join(_problem(e) for e in exc.errors())) from None


def _json_object(value: str, name: str, example: str) -> dict[str, Any]:
    import json

    try:
        data = json.loads(value)
    except ValueError as exc:
        raise ConfigError(f"{name} is not valid JSON ({exc}); write an object, e.g. {example}") from None
    if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
        raise ConfigError(f"{name} must be a JSON object of strings, e.g. {example}")
    return data


def _pairs(value: str, name: str) -> dict[str, str]:
    """``"acme=zh, globex=de"`` as a dict; a ConfigError naming the bad item otherwise."""
    out: dict[str, str] = {}
    for item in (i.strip() for i in value.split(",")):
        tenant, sep, code = item.partition("=")
        if item and (not sep or not tenant.strip() or not code.strip()):
            raise ConfigError(f"{name}: {item!r} is not tenant=language (e.g. acme=zh,globex=de)")
        if item:
            out[tenant.strip()] = code.strip()
    return out


def _problem(error: Any) -> str:
    loc = [str(p) for p in error["loc"] if not str(p).startswith(("function-", "tagged-union"))]
    path = ".".join(loc)
    hint = _ENV_HINT.get(loc[0], "") if loc else ""
    if loc and loc[0] in ("store", "embedder", "sessions", "content", "llm", "rerank") and len(loc) > 2:
        loc = [loc[0], *loc[2:]]  # drop the discriminator value pydantic puts in the path
        path = ".".join(loc)
    return f"{path}: {error['msg']}{hint}"


_ENV_HINT = {
    "store": " (CAIRN_STORE and CAIRN_<BACKEND>_*)",
    "embedder": " (CAIRN_EMBEDDER and CAIRN_EMBEDDING_*)",
    "sessions": " (CAIRN_SESSIONS and CAIRN_SESSIONS_*)",
    "content": " (CAIRN_CONTENT_*)",
    "llm": " (CAIRN_LLM_*)",
    "rerank": " (CAIRN_RERANKER and CAIRN_RERANK_*)",
}
