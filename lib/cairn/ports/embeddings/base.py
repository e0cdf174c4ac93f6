"""The ``Embedder`` interface: validation, batching and retries in the base, the model in ``_embed``.

Adding a provider: a subclass in ``embeddings/<provider>.py`` that sets ``name`` and ``dimension``
and fills ``_embed(texts)`` (one batch, rows L2-normalised); one that tells queries from documents
sets ``distinguishes_input_type = True`` and takes ``_embed(texts, input_type)``. A provider that
can be throttled raises a ``CairnError`` with ``retryable=True`` (``details={"retry_after": s}``
when the server says how long to wait) and sets ``retry_policy``: the base retries each batch
through the one :class:`~cairn.core.retry.RetryPolicy` (full jitter, Retry-After) and counts retries.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, Literal, Protocol

import numpy as np

from cairn.core.errors import CairnError, DimensionMismatch, EmbeddingError
from cairn.core.retry import RetryPolicy, is_retryable_cairn_error

InputType = Literal["query", "document"]
INPUT_TYPES: tuple[InputType, ...] = ("query", "document")
# a call of at most this many texts is a query's (a search, the evidence gate's probes): the local
# models cache it and answer it before, or beside, an ingest's batches
QUERY_CALL_TEXTS = 4


class Embedder(ABC):
    """Turns texts into unit-length vectors of a fixed dimension."""

    name: str = "abstract"
    dimension: int = 0
    batch_size: int = 32
    # capability: the model embeds queries and documents differently (Cohere, Voyage, Gemini...)
    distinguishes_input_type: bool = False
    # the languages (ISO 639-1, as :data:`cairn.core.text.LANGUAGES`) the model was trained to embed; None:
    # many (a multilingual model) or not declared. Part of the embedder's identity: ingestion tells a
    # tenant whose documents are in another language that their dense scores are noise
    languages: frozenset[str] | None = None
    # the longest input the model reads, in its own tokens (special tokens included); what is longer
    # is cut by the model, so its end is never embedded. None: not known (the chunker does not count)
    max_tokens: int | None = None
    # retries of a retryable error from one batch (throttling, timeouts); none for a local model
    retry_policy: RetryPolicy = RetryPolicy(attempts=1)
    sleep: Callable[[float], None] = staticmethod(time.sleep)

    def embed(self, texts: Sequence[str], input_type: InputType = "document") -> np.ndarray:
        """Embed ``texts`` in batches; returns a float32 matrix (len(texts) × dimension).

        ``input_type`` is ``"document"`` for what is stored and ``"query"`` for what is searched
        with; a model that makes no difference ignores it."""
        if input_type not in INPUT_TYPES:
            raise EmbeddingError(f"input_type {input_type!r} is not valid; allowed: query, document")
        if isinstance(texts, str):
            raise EmbeddingError("embed() takes a list of texts, not a single string; use embed_one()")
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        # Batch texts of similar length together (less padding), then restore the order.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), self.batch_size):
            rows = order[start : start + self.batch_size]
            batch = [texts[i] if isinstance(texts[i], str) else str(texts[i]) for i in rows]
            out[rows] = self._embed_with_retries(batch, input_type)
        self.calls = getattr(self, "calls", 0) + 1
        self.texts_embedded = getattr(self, "texts_embedded", 0) + len(texts)
        return out

    def embed_one(self, text: str) -> np.ndarray:
        return self.embed([text])[0]

    def embed_query(self, text: str) -> np.ndarray:
        """One search query's vector (the query input type where the model has one)."""
        return self.embed([text], input_type="query")[0]

    def tokenizer(self) -> Any | None:
        """The model's own tokenizer (a ``tokenizers.Tokenizer``: no padding, no truncation) when
        the embedder has one on this machine, else None. What token budgets are counted with, and
        how the evidence gate tells words from random letters (:mod:`cairn.engine.retrieval.evidence`)."""
        return None

    def _embed_with_retries(self, batch: list[str], input_type: InputType) -> np.ndarray:
        def once() -> np.ndarray:
            try:
                if self.distinguishes_input_type:  # such an embedder's _embed takes the input type too
                    vecs = self._embed(batch, input_type)  # type: ignore[call-arg]
                else:
                    vecs = self._embed(batch)
            except CairnError:
                raise
            except Exception as exc:
                raise EmbeddingError(f"{self.name} embedder failed: {type(exc).__name__}: {exc}") from exc
            return self._checked(vecs, len(batch))

        return self.retry_policy.call(once, retryable=is_retryable_cairn_error, sleep=self.sleep,
                                      on_retry=self._count_retry, what=f"{self.name} embedding")

    def _count_retry(self, attempt: int, delay: float, exc: BaseException) -> None:
        self.retries = getattr(self, "retries", 0) + 1

    def _checked(self, vecs: Any, n: int) -> np.ndarray:
        mat = np.asarray(vecs, dtype=np.float32)
        if mat.ndim != 2 or mat.shape[0] != n:
            raise EmbeddingError(f"{self.name} returned {mat.shape[0] if mat.ndim else 0} vectors for {n} texts")
        if mat.shape[1] != self.dimension:
            raise EmbeddingError(
                f"{self.name} returned {mat.shape[1]}-dimensional vectors; this embedder is configured for "
                f"{self.dimension}: set its dimension to {mat.shape[1]} (and build the index with it)"
            )
        return mat

    @abstractmethod
    def _embed(self, texts: list[str]) -> np.ndarray:
        """Embed one batch; rows must be L2-normalised. (With ``distinguishes_input_type``:
        ``_embed(texts, input_type)``.)"""


# --- the dimension the index was built with --------------------------------------------------



class IndexDimension(Protocol):
    """A store that can say which dimension its index was built with (None: no index yet)."""

    def index_dimension(self) -> int | None: ...


def check_dimension(embedder: Embedder, store: Any) -> int:
    """Check at start-up that ``embedder`` produces vectors of the dimension ``store``'s index holds.

    The index's dimension comes from ``store.index_dimension()`` (None: the index does not exist
    yet or is empty, and will be created with the embedder's dimension); a store without that
    method is checked against the dimension it was configured with. Returns the dimension;
    raises :class:`DimensionMismatch` naming both numbers and the two ways to fix it."""
    want = int(embedder.dimension)
    probe = getattr(store, "index_dimension", None)
    found = probe() if callable(probe) else getattr(store, "dimension", None)
    if found is None or int(found) == want:
        return want
    where = getattr(store, "index", None) or getattr(store, "backend", type(store).__name__)
    raise DimensionMismatch(
        f"the embedder {embedder.name!r} makes {want}-dimensional vectors but the vector index {where!r} "
        f"holds {found}-dimensional ones: configure an embedder with dimension {found} "
        f"(Titan v2 takes 256, 512 or 1024), or create a new index with dimension {want} and ingest again",
        details={"embedder": embedder.name, "embedder_dimension": want, "index_dimension": int(found)},
    )


def uncovered_languages(embedder: Embedder, texts: Sequence[str]) -> dict[str, int]:
    """How many of ``texts`` are in a language ``embedder`` does not declare (language → count);
    empty for a multilingual embedder. Detection reads each text's first characters only."""
    covered = embedder.languages
    if covered is None:
        return {}
    from cairn.core.text import detect

    counts: dict[str, int] = {}
    for text in texts:
        code = detect(text)
        if code not in covered:
            counts[code] = counts.get(code, 0) + 1
    return counts


def covers(embedder: Embedder, text: str, language: str | None = None) -> str | None:
    """None when ``embedder`` was trained on the language of ``text`` (or declares no languages: a
    multilingual model); else that language's code, so the caller can stop trusting the dense
    side. ``language``: the tenant's fixed language (None or ``"auto"``: detected from ``text``).
    A host's own embedder that declares nothing is taken as covering every language, as before."""
    covered = getattr(embedder, "languages", None)
    if covered is None:
        return None
    from cairn.core.text import language_of

    code = language_of(text, language)
    return None if code in covered else code


def normalize(mat: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(mat, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (mat / norms).astype(np.float32)
