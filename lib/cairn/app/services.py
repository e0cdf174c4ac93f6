"""The one composition root: :class:`Settings` in, typed services out.

Everything that runs cairn — the in-process :class:`~cairn.Cairn`, every Lambda handler, the CLI,
``cairn serve`` and ``cairn mcp`` — takes a :class:`Services`; no other code builds a store, an
embedder, an LLM client, a planner, a reranker, a session store or a content store.

Each service is built on first use and kept (a warm Lambda container reuses it), so importing a
handler stays cheap and ``find()`` never loads a planner or an LLM. Pass a service in to replace
it (tests, a host application); what is not passed is built from ``settings``::

    services = Services.from_settings()          # explicit > CAIRN_* environment > defaults
    engine = services.pipeline("acme")           # one tenant's engine (what the application calls)
    services = Services(settings, store=my_store)

An optional extra that a configuration needs and that is not installed is one
:class:`~cairn.core.errors.MissingExtra` naming the extra to install.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import cached_property
from typing import TYPE_CHECKING, TypeVar, cast

from cairn.core.config import EmbedderSettings, LocalEmbedderSettings, Settings, load_settings
from cairn.core.errors import ConfigError, EmbedderMismatch, require
from cairn.core.text.languages import LanguagePolicy

if TYPE_CHECKING:
    from cairn.app.application import Application
    from cairn.core.protocols import S3Client, StepFunctionsClient
    from cairn.engine.ingest import ContentStore
    from cairn.engine.ingest.fetchguard import FetchPolicy
    from cairn.engine.memory import MemoryService, UseRecorder
    from cairn.engine.pipeline import Pipeline
    from cairn.engine.planning.base import Planner
    from cairn.ports.embeddings import Embedder
    from cairn.ports.llm.base import LLMClient
    from cairn.ports.observability.operations import OperationStats
    from cairn.ports.observability.stats import RetrievalStats
    from cairn.ports.ratelimit import RateLimiter
    from cairn.ports.rerank.base import Reranker
    from cairn.ports.sessions.base import SessionStore
    from cairn.ports.usecounts import UseCounts
    from cairn.ports.vectorstores import VectorStore

_UNSET = object()  # no planner given: each tenant's is built from the settings
_UNCHECKED = object()  # a tenant whose index this process has not checked yet
_SERVICES = ("store", "embedder", "llm", "reranker", "sessions", "content", "sfn", "s3", "recorder", "limiter",
             "use_counts")


class Services:
    """The services of one process (or Lambda container), built from :class:`Settings` once."""

    def __init__(self, settings: Settings | None = None, **given: object) -> None:
        unknown = sorted(set(given) - set(_SERVICES) - {"planner"})
        if unknown:
            raise ConfigError(f"Services: unknown service(s) {', '.join(unknown)}; known: {', '.join(_SERVICES)}, planner")
        if settings is not None:
            self.__dict__["settings"] = settings
        self._planner_given = given.pop("planner", _UNSET)
        for name, value in given.items():
            self.__dict__[name] = value  # pre-fills the cached_property of that name
        self._lock = threading.Lock()
        self._planners: dict[str, Planner | None] = {}
        self._stats: dict[str, RetrievalStats] = {}
        self._identity_checked: dict[str, object] = {}  # tenant -> its index's generation when last checked
        self._followed: dict[str, Embedder] = {}  # tenant -> the embedder of a reindex that switched it under us

    @cached_property
    def settings(self) -> Settings:
        """The settings given, else read from the environment on first use (so that building a
        ``Services`` at a Lambda module's import costs nothing and reads nothing)."""
        return load_settings()

    @classmethod
    def from_settings(cls, settings: Settings | None = None, **overrides: object) -> Services:
        """Services for ``settings`` (default: :func:`load_settings` with ``overrides``)."""
        return cls(settings if settings is not None else load_settings(None, **overrides))

    # ------------------------------------------------------------------ the services

    @cached_property
    def embedder(self) -> Embedder:
        """The configured embedder (:meth:`embedder_for` says which one embeds a tenant's queries)."""
        from cairn.ports.observability.usage import watch

        return watch(self._build_embedder())

    def embedder_for(self, tenant: str) -> Embedder:
        """The embedder of ``tenant``'s index: the configured one, or the one a reindex switched the
        index to while this process ran (:meth:`check_index`)."""
        return self._followed.get(tenant) or self.embedder

    def _build_embedder(self, cfg: EmbedderSettings | None = None) -> Embedder:
        cfg = cfg or self.settings.embedder
        if cfg.provider == "local":
            from cairn.ports.embeddings.disk_cache import cached

            return cached(self._local_embedder(cfg), cfg.cache, cfg.cache_mb)
        if cfg.provider == "bedrock":
            require("boto3", extra="aws", feature="Bedrock embeddings")
            from cairn.ports.embeddings.bedrock import BedrockEmbedder

            return BedrockEmbedder(cfg.model, region=cfg.region, dimension=cfg.dimension, batch_size=cfg.batch_size)
        require("litellm", extra="llm", feature="LiteLLM embeddings")
        from cairn.ports.embeddings.litellm_embedder import LiteLLMEmbedder

        return LiteLLMEmbedder(
            cfg.model, dimension=cfg.dimension, base_url=cfg.base_url, api_key=self.secret(cfg.api_key, "embedder.api_key"),
            batch_size=cfg.batch_size,
        )

    @staticmethod
    def _local_embedder(cfg: LocalEmbedderSettings) -> Embedder:
        if cfg.model == "multilingual-e5-small":
            from cairn.ports.embeddings.local_e5 import LocalE5Embedder

            return LocalE5Embedder(batch_size=cfg.batch_size)
        require("onnxruntime", extra="local", feature="the local embedder")
        from cairn.ports.embeddings.local import LocalEmbedder

        return LocalEmbedder(batch_size=cfg.batch_size)

    @cached_property
    def languages(self) -> LanguagePolicy:
        """Which language each tenant's text is read in (CAIRN_LANGUAGE, CAIRN_TENANT_LANGUAGES)."""
        return LanguagePolicy(self.settings.language, tuple(sorted(self.settings.tenant_languages.items())))

    @cached_property
    def store(self) -> VectorStore:
        cfg = self.settings.store
        if cfg.backend == "local":
            from cairn.ports.vectorstores.local import LocalVectorStore

            return LocalVectorStore(cfg.path, dimension=self.embedder.dimension, languages=self.languages, ann=cfg.ann,
                                    ann_min_rows=cfg.ann_min_rows)
        if cfg.backend == "pinecone":
            require("pinecone", extra="pinecone", feature="the Pinecone store")
            from cairn.ports.vectorstores.pinecone import PineconeVectorStore

            cfg = cfg.model_copy(update={"api_key": self.secret(cfg.api_key, "store.api_key")})
            return _checked(PineconeVectorStore.from_settings(cfg, self.embedder.dimension), self.embedder)
        require("opensearchpy", extra="opensearch", feature="the OpenSearch store")
        from cairn.ports.vectorstores.opensearch import OpenSearchVectorStore

        if cfg.password:
            cfg = cfg.model_copy(update={"password": self.secret(cfg.password, "store.password")})
        return _checked(OpenSearchVectorStore.from_settings(cfg, self.embedder.dimension, language_policy=self.languages),
                        self.embedder)

    @cached_property
    def llm(self) -> LLMClient | None:
        """The configured LLM client, or None (the embedded default has no LLM)."""
        from cairn.ports.observability.usage import watch

        client = self._build_llm()
        return watch(client) if client is not None else None

    def _build_llm(self) -> LLMClient | None:
        cfg = self.settings.llm
        if cfg is None:
            return None
        if cfg.provider == "bedrock":
            require("boto3", extra="aws", feature="the Bedrock LLM")
            from cairn.ports.llm.bedrock import BedrockLLM

            return BedrockLLM(cfg.model, region=cfg.region, timeout_s=cfg.timeout_s)
        if cfg.provider == "openai":
            require("httpx", extra="llm", feature="the OpenAI-compatible LLM")
            from cairn.ports.llm.openai_compat import OpenAICompatLLM

            return OpenAICompatLLM(
                cfg.model, base_url=cfg.base_url, api_key=self.secret(cfg.api_key, "llm.api_key"), timeout_s=cfg.timeout_s
            )
        require("litellm", extra="llm", feature="the LiteLLM LLM")
        from cairn.ports.llm.litellm_client import LiteLLMClient

        return LiteLLMClient(
            cfg.model, api_base=cfg.base_url, api_key=self.secret(cfg.api_key, "llm.api_key"), timeout_s=cfg.timeout_s
        )

    @cached_property
    def reranker(self) -> Reranker | None:
        """The configured reranker, or None (``rerank.kind = none``)."""
        cfg = self.settings.rerank
        if cfg.kind == "none":
            return None
        if cfg.kind == "local":
            from cairn.ports.rerank.local import LocalReranker

            return LocalReranker(self.embedder, vectors=cfg.vectors)
        if cfg.kind == "cohere":
            require("httpx", extra="llm", feature="the Cohere reranker")
            from cairn.ports.rerank.cohere import CohereReranker

            return CohereReranker(base_url=cfg.base_url, model=cfg.model, api_key=self.secret(cfg.api_key, "rerank.api_key"))
        if cfg.kind == "bedrock":
            require("boto3", extra="aws", feature="the Bedrock reranker")
            from cairn.ports.rerank.bedrock import BedrockReranker

            return BedrockReranker(model=cfg.model, region=cfg.region)
        require("litellm", extra="llm", feature="the LiteLLM reranker")
        from cairn.ports.rerank.litellm_provider import LiteLLMReranker

        return LiteLLMReranker(model=cfg.model, api_base=cfg.base_url, api_key=self.secret(cfg.api_key, "rerank.api_key"))

    @cached_property
    def sessions(self) -> SessionStore | None:
        """The session store (None only where a host built these services without one)."""
        from cairn.ports.sessions import open_session_store
        from cairn.ports.sessions.base import Summarizer

        cfg = self.settings.sessions
        summarizer: Summarizer | None = None
        llm = self.llm if self.settings.llm is not None else None
        if llm is not None:  # compression folds old messages into the summary with the LLM
            from cairn.engine.memory.session_summaries import LLMSummarizer

            summarizer = LLMSummarizer(llm)
        # hold_uncommitted: never fold a message into the summary before it became memories
        if cfg.backend == "sqlite":
            return open_session_store("sqlite", path=cfg.path or self.settings.home / "sessions.db",
                                      summarizer=summarizer, hold_uncommitted=True)
        require("boto3", extra="aws", feature="DynamoDB sessions")
        return open_session_store("dynamodb", table=cfg.table, region=cfg.region, endpoint_url=cfg.endpoint_url,
                                  summarizer=summarizer, hold_uncommitted=True)

    def session_store(self, what: str = "this operation") -> SessionStore:
        """:attr:`sessions`, or a clear error naming ``what`` needs one when these services were
        built without a session store."""
        sessions = self.sessions
        if sessions is None:
            raise ConfigError(f"{what} needs a session store (CAIRN_SESSIONS)")
        return sessions

    @cached_property
    def content(self) -> ContentStore | None:
        from cairn.ports.content import LocalContentStore, S3ContentStore

        cfg = self.settings.content
        if cfg.backend == "s3":
            require("boto3", extra="aws", feature="the S3 content store")
            return S3ContentStore(cfg.bucket, cfg.prefix, client=self.s3)
        return LocalContentStore(cfg.path or self.settings.home / "content")

    @cached_property
    def sfn(self) -> StepFunctionsClient:
        """Step Functions: one try (a throttle answers 503 and the caller retries), and a read
        timeout (``workflow_timeout_s``, 27 s) just longer than the workflow's own (25 s), inside the
        API function's 29 s."""
        timeout = self.settings.workflow_timeout_s

        def make() -> object:
            boto3 = require("boto3", extra="aws", feature="the Step Functions workflow")
            from botocore.config import Config

            config = Config(connect_timeout=2, read_timeout=timeout, retries={"max_attempts": 1, "mode": "standard"})
            return boto3.client("stepfunctions", config=config)

        return cast("StepFunctionsClient", _OnFirstUse(make))  # made on first use, as s3

    @cached_property
    def s3(self) -> S3Client:
        """An S3 client, made on first use: a process that never reads S3 never imports boto3
        (~1 s: the embedded default's CLI and server never pay it)."""
        return cast("S3Client", _OnFirstUse(lambda: require("boto3", extra="aws", feature="S3").client("s3")))

    @cached_property
    def fetch_policy(self) -> FetchPolicy:
        """What URL ingestion may reach (public addresses, and the hosts the operator allows) and
        its budget per ingest (:mod:`cairn.engine.ingest.fetchguard`)."""
        from cairn.engine.ingest.fetchguard import FetchPolicy

        cfg = self.settings
        return FetchPolicy(cfg.fetch_allow_hosts, max_requests=cfg.fetch_max_requests, max_bytes=cfg.fetch_max_bytes)

    @cached_property
    def limiter(self) -> RateLimiter:
        """Each tenant's rate limits and quotas (:mod:`cairn.ports.ratelimit`), counted in the DynamoDB
        table ``rate_limit_table`` (every Lambda instance) or in ``<home>/ratelimits.db`` (every
        process on this machine); neither is opened while no tenant has a limit."""
        from cairn.ports.ratelimit import DynamoDBCounter, LimitPolicy, RateLimiter, SQLiteCounter

        cfg = self.settings
        policy = LimitPolicy.from_settings(cfg.rate_limits, cfg.tenant_rate_limits)
        if cfg.rate_limit_table:  # the counters open on the first count, so never without a limit
            if policy.limits_anyone:
                require("boto3", extra="aws", feature="rate limits counted in DynamoDB")
            return RateLimiter(policy, DynamoDBCounter(cfg.rate_limit_table))
        return RateLimiter(policy, SQLiteCounter(cfg.home / "ratelimits.db"))

    @cached_property
    def operations(self) -> OperationStats:
        """Requests, errors and latency per API operation in this process (written as EMF by the api function)."""
        from cairn.ports.observability.operations import OperationStats

        return OperationStats()

    def memory(self, tenant: str) -> MemoryService:
        """``tenant``'s memories (:class:`cairn.engine.memory.MemoryService`): remember, commit."""
        from cairn.engine.memory import MemoryService

        cfg = self.settings
        use_llm = cfg.memory_extraction == "llm" or (cfg.memory_extraction == "auto" and cfg.llm is not None)
        if cfg.memory_extraction == "llm" and cfg.llm is None:
            raise ConfigError("memory_extraction 'llm' needs an LLM: set CAIRN_LLM_PROVIDER and CAIRN_LLM_MODEL")
        return MemoryService(self.checked_store(tenant), self.embedder_for(tenant), tenant, sessions=self.sessions, content=self.content,
                             llm=self.llm if use_llm else None, window=cfg.memory_window)

    @cached_property
    def use_counts(self) -> UseCounts | None:
        """Where use counts (hotness) are kept, beside the vectors (:mod:`cairn.ports.usecounts`):
        the DynamoDB table ``use_counts_table``, else the embedded store's side table, else
        ``<home>/uses.sqlite``; None when ``record_use`` is off."""
        cfg = self.settings
        if not cfg.record_use:
            return None
        from cairn.ports import usecounts

        if cfg.use_counts_table:
            return usecounts.DynamoDBUseCounts(cfg.use_counts_table)
        if cfg.store.backend == "local":
            return usecounts.StoreSideCounts(self.store)
        return usecounts.SQLiteUseCounts(cfg.home / "uses.sqlite")

    @cached_property
    def recorder(self) -> UseRecorder | None:
        """Counts what is returned and read (hotness), flushed to :attr:`use_counts` by a
        background thread; None when ``record_use`` is off."""
        counts = self.use_counts
        if counts is None:
            return None
        import atexit

        from cairn.engine.memory import UseRecorder

        recorder = UseRecorder(counts)
        atexit.register(recorder.close)  # what is still buffered is written when the process ends
        return recorder

    def planner(self, tenant: str) -> Planner | None:
        """The planner of ``tenant`` (its folder-name resolver is the tenant's own); None: raw."""
        with self._lock:
            if self._planner_given is not _UNSET and tenant not in self._planners:
                return cast("Planner | None", self._planner_given)
            if tenant not in self._planners:
                self._planners[tenant] = self._build_planner(tenant)
            return self._planners[tenant]

    def set_reranker(self, reranker: Reranker | None) -> None:
        """Replace the reranker (a host application's own, or a test's)."""
        self.__dict__["reranker"] = reranker

    def set_planner(self, tenant: str, planner: Planner | None) -> None:
        """Replace ``tenant``'s planner (a host application's own, or a test's)."""
        with self._lock:
            self._planners[tenant] = planner

    def _build_planner(self, tenant: str) -> Planner | None:
        choice = self.settings.planner
        if choice == "auto":
            choice = "llm" if self.settings.llm is not None else "session-rewrite"
        if choice == "raw":
            return None
        from cairn.engine.planning.scope import FolderResolver
        from cairn.engine.planning.session_planner import SessionRewritePlanner
        from cairn.engine.retrieval.scope import roots_for

        cfg = self.settings
        resolver = FolderResolver(self.store, tenant, min_confidence=cfg.planner_min_confidence, stop_words=cfg.planner_stop_words)
        roots = lambda ct: roots_for(ct, (), None)  # noqa: E731
        if choice == "llm":
            if self.llm is None:
                raise ConfigError("planner 'llm' needs an LLM: set CAIRN_LLM_PROVIDER and CAIRN_LLM_MODEL")
            from cairn.engine.planning.intent import IntentAnalyzer

            # the LLM proposes the names; the tenant's own folder names check them
            return IntentAnalyzer(self.llm, timeout_s=cfg.llm.timeout_s if cfg.llm else 5.0, resolver=resolver, roots=roots)
        return SessionRewritePlanner(resolver=resolver, roots=roots, stop_words=cfg.planner_stop_words)

    def emit_metrics(self) -> int:
        """Write what this process recorded since the last call as CloudWatch EMF: every tenant's
        retrieval statistics and the operations' requests (the api function, before it returns)."""
        with self._lock:
            stats = list(self._stats.values())
        return sum(s.emit_emf() for s in stats) + self.operations.emit_emf()

    def checked_store(self, tenant: str) -> VectorStore:
        """The store, once ``tenant``'s index is known to hold the vectors of the embedder that
        :meth:`embedder_for` gives (:meth:`check_index`; a function that never reads the store
        never checks it). Checked on first use, and again whenever the index's generation marker
        (``VectorStore.index_generation``: a stat, or a cached alias lookup) says a reindex
        replaced it."""
        generation = self.store.index_generation(tenant)
        if self._identity_checked.get(tenant, _UNCHECKED) != generation:
            self.check_index(tenant, generation)
        return self.store

    def check_index(self, tenant: str, generation: object = _UNSET) -> str:
        """Check that ``tenant``'s index was filled by the configured embedder
        (:func:`cairn.ports.embeddings.identity.check_identity`), once per generation of the index.

        On first use another embedder's index raises :class:`~cairn.core.errors.EmbedderMismatch`
        (a configuration that disagrees with the index). An index that a reindex replaced while
        this process ran (its generation changed after a check) is followed instead: this tenant's
        queries are embedded with the index's new embedder (``"followed"``), when it is one this
        process can build (the same provider and dimension); otherwise the mismatch is raised."""
        from cairn.ports.embeddings.identity import check_identity

        if generation is _UNSET:
            generation = self.store.index_generation(tenant)
        previous = self._identity_checked.get(tenant, _UNCHECKED)
        if previous == generation:
            return "matched"
        try:
            outcome = check_identity(self.embedder, self.store, tenant)
            self._followed.pop(tenant, None)
        except EmbedderMismatch as exc:
            if previous is _UNCHECKED:
                raise
            self._followed[tenant] = self._follow(tenant, exc)  # or raises exc: cannot be followed here
            outcome = "followed"
        with self._lock:
            self._identity_checked[tenant] = generation
        return outcome

    def _follow(self, tenant: str, mismatch: EmbedderMismatch) -> Embedder:
        from cairn.app.following import follow_reindex
        from cairn.ports.observability.usage import watch

        return watch(follow_reindex(tenant, mismatch, self.settings.embedder, self.embedder, self._build_embedder))

    def tenant_stats(self, tenant: str) -> RetrievalStats:
        """One tenant's retrieval statistics in this process (what ``GET /v1/stats`` shows)."""
        from cairn.ports.observability.stats import RetrievalStats

        with self._lock:
            return self._stats.setdefault(tenant, RetrievalStats())

    def secret(self, value: str | None, setting: str) -> str | None:
        """A key setting's value, read from SSM / Secrets Manager when it names one."""
        from cairn.ports.secrets import is_reference

        if not is_reference(value):
            return value
        from cairn.ports.secrets import resolve_secret

        return resolve_secret(value, setting=setting)

    # ------------------------------------------------------------------ views

    def pipeline(self, tenant: str | None = None) -> Pipeline:
        """``tenant``'s engine (:class:`~cairn.engine.pipeline.Pipeline`): what the application layer calls."""
        from cairn.engine.pipeline import Pipeline

        return Pipeline(self, tenant or self.settings.tenant)

    @cached_property
    def application(self) -> Application:
        """The application layer over these services: what every door calls."""
        from cairn.app.application import Application

        return Application(self)


class _OnFirstUse:
    """Stands for the object ``make()`` returns, made the first time an attribute is read (the
    accessor casts it to the protocol of what it stands for)."""

    def __init__(self, make: Callable[[], object]) -> None:
        self._make = make
        self._made: object | None = None
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> object:
        if self._made is None:
            with self._lock:
                if self._made is None:
                    self._made = self._make()
        return getattr(self._made, name)


StoreT = TypeVar("StoreT", bound="VectorStore")


def _checked(store: StoreT, embedder: Embedder) -> StoreT:
    """The store, once its index's dimension is known to be the embedder's (one call at start-up)."""
    from cairn.ports.embeddings.base import check_dimension

    check_dimension(embedder, store)
    return store
