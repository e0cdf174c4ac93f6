"""Settings: explicit argument, then environment variable, then default.

Validated once at start-up; a bad value is a :class:`ConfigError` naming the variable.
Backend settings are a discriminated union keyed on ``backend``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import ConfigError

ENV_PREFIX = "CAIRN_"


class _Settings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class LocalStoreSettings(_Settings):
    backend: Literal["local"] = "local"
    path: Path = Path(".cairn/store")


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


StoreSettings = Annotated[
    LocalStoreSettings | PineconeSettings | OpenSearchSettings, Field(discriminator="backend")
]


class SQLiteSessionSettings(_Settings):
    backend: Literal["sqlite"] = "sqlite"
    path: Path | None = None  # default: <home>/sessions.db


class DynamoDBSessionSettings(_Settings):
    backend: Literal["dynamodb"] = "dynamodb"
    table: str
    region: str | None = None
    endpoint_url: str | None = None


SessionSettings = Annotated[SQLiteSessionSettings | DynamoDBSessionSettings, Field(discriminator="backend")]


class LLMSettings(_Settings):
    provider: Literal["bedrock", "openai", "litellm"]
    model: str
    base_url: str | None = None
    api_key: str | None = None
    region: str | None = None
    timeout_s: float = Field(default=5.0, gt=0, le=120)


class RerankSettings(_Settings):
    kind: Literal["none", "local", "cohere", "bedrock", "litellm"] = "local"
    model: str | None = None
    base_url: str | None = None
    api_key: str | None = None
    region: str | None = None


class LocalContentSettings(_Settings):
    backend: Literal["local"] = "local"
    path: Path | None = None  # default: <home>/content


class S3ContentSettings(_Settings):
    backend: Literal["s3"] = "s3"
    bucket: str
    prefix: str = ""


ContentSettings = Annotated[LocalContentSettings | S3ContentSettings, Field(discriminator="backend")]


class Settings(_Settings):
    home: Path = Path(".cairn")
    tenant: str = "default"
    store: StoreSettings = Field(default_factory=LocalStoreSettings)
    sessions: SessionSettings = Field(default_factory=SQLiteSessionSettings)
    content: ContentSettings = Field(default_factory=LocalContentSettings)  # full bodies
    llm: LLMSettings | None = None  # None: no LLM (the embedded default)
    planner: Literal["auto", "raw", "session-rewrite", "llm"] = "auto"  # auto: llm if configured
    rerank: RerankSettings = Field(default_factory=RerankSettings)
    embedder: Literal["local"] = "local"
    embed_batch_size: int = Field(default=32, ge=1, le=1024)
    score_threshold: float = 0.1
    default_limit: int = Field(default=5, ge=1, le=200)
    alpha: float = Field(default=0.3, ge=0.0, le=1.0)  # thinking mode's propagation weight
    hotness_weight: float = Field(default=0.0, ge=0.0, le=1.0)


def _env_store(env: dict[str, str], home: Path) -> dict[str, Any]:
    backend = env.get("CAIRN_STORE", "local")
    if backend == "local":
        return {"backend": "local", "path": env.get("CAIRN_STORE_PATH", str(home / "store"))}
    prefix = f"CAIRN_{backend.upper()}_"
    fields = {k[len(prefix):].lower(): v for k, v in env.items() if k.startswith(prefix)}
    return {"backend": backend, **fields}


def _prefixed(env: dict[str, str], prefix: str) -> dict[str, str]:
    return {k[len(prefix):].lower(): v for k, v in env.items() if k.startswith(prefix)}


def _env_services(env: dict[str, str]) -> dict[str, Any]:
    data: dict[str, Any] = {}
    backend = env.get("CAIRN_SESSIONS", "sqlite")
    data["sessions"] = {"backend": backend, **_prefixed(env, "CAIRN_SESSIONS_")}
    if env.get("CAIRN_CONTENT_BUCKET"):  # full bodies in S3, else a folder under the home
        data["content"] = {"backend": "s3", **_prefixed(env, "CAIRN_CONTENT_")}
    if env.get("CAIRN_LLM_PROVIDER") or env.get("CAIRN_LLM_MODEL"):
        data["llm"] = _prefixed(env, "CAIRN_LLM_")
    data["rerank"] = _prefixed(env, "CAIRN_RERANK_")  # CAIRN_RERANK_MODEL, _BASE_URL, _API_KEY, _REGION
    if "CAIRN_RERANKER" in env:
        data["rerank"]["kind"] = env["CAIRN_RERANKER"]
    return data


def load_settings(env: dict[str, str] | None = None, **overrides: Any) -> Settings:
    """Build settings from ``overrides`` (explicit), then ``env`` (default: os.environ), then defaults."""
    env = dict(os.environ if env is None else env)
    home = Path(overrides.get("home") or env.get("CAIRN_HOME", ".cairn"))
    data: dict[str, Any] = {"home": home, "store": _env_store(env, home), **_env_services(env)}
    for key in ("tenant", "embed_batch_size", "score_threshold", "default_limit", "planner", "alpha", "hotness_weight"):
        if f"{ENV_PREFIX}{key.upper()}" in env:
            data[key] = env[f"{ENV_PREFIX}{key.upper()}"]
    data.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
        )
        raise ConfigError(f"invalid settings: {problems}") from None
