"""Local rescoring: the embedded default reranker, no network and no extra model.

Each candidate's full rerank text (a leaf's text, a directory's title and abstract) is
scored two ways over the candidate set, then fused:

* **dense**: cosine between the query and the text, embedded with the same ``Embedder``
  the store uses. Vector search scored the record's stored vector (a chunk, an abstract or
  an overview); here the model reads the text the reranker is given. The model reads at
  most its window (256 tokens for MiniLM); with ``windows > 1`` a longer text is embedded
  as that many windows spread over it and the best window counts.
* **BM25** (``bm25s``, imported on first use) over the candidate set itself, English
  stop words removed and words stemmed as in the store's keyword search: lexical evidence — names, codes, numbers — that embeddings blur.

**Stored vectors** (``vectors="stored"``; ``"auto"``, the default, picks it for any embedder but the
local model): the dense part is the cosine between the query and each candidate's *stored* vector
(what the store fetched with the record), so only the query is embedded — one embedding call per
typed query instead of one per candidate. On AWS that is the difference between 1 and 11 Bedrock
calls per typed query at limit 5 (201 at limit 100); benchmarks/README.md ("Rerank: stored
vectors or the full text") measures what it costs in ranking. A candidate without a vector of
the embedder's dimension sends the whole set down the text path.

Fusion is a **convex combination**, ``w·max(cos, 0) + (1−w)·bm25/max(bm25)`` with
``w = 0.7`` by default, and not reciprocal-rank fusion. RRF keeps only ranks: its scores
(about 1/(60+rank)) all sit far below the 0.1 threshold that follows rerank, and it ranks an
all-irrelevant batch as confidently as a good one. The convex combination keeps the dense
part on its absolute scale (an unrelated text stays near 0) and uses BM25, normalised by
the best BM25 score in the set, as a bounded bonus; the result lies in 0..1, so the
threshold keeps its meaning. When no candidate shares a term with the query, BM25 adds 0.

A query in a language the embedder was not trained on (``Embedder.languages``) is rescored by
its words alone, as the retrieval fused it (``UNCOVERED_DENSE_WEIGHT``): the model's cosines there
are noise (MiniLM gives unrelated Japanese texts 0.3–0.4).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from cairn.core.errors import ConfigError
from cairn.ports.rerank.base import CHARS_PER_TOKEN, Reranker

if TYPE_CHECKING:
    from cairn.core.models import Candidate
    from cairn.ports.embeddings.base import Embedder

VECTOR_MODES = ("auto", "stored", "text")

DEFAULT_DENSE_WEIGHT = 0.7
WINDOW_TOKENS = 256  # MiniLM's window; longer texts are cut (or windowed) to this


def _windows(text: str, size: int, count: int) -> list[str]:
    """``count`` windows of ``size`` characters spread evenly over ``text`` (first and last included)."""
    if count <= 1 or len(text) <= size:
        return [text[:size]]
    needed = -(-len(text) // size)
    count = min(count, needed)
    last = len(text) - size
    starts = sorted({round(i * last / (count - 1)) for i in range(count)})
    return [text[s : s + size] for s in starts]


def bm25_scores(query: str, documents: list[str]) -> np.ndarray:
    """BM25 of ``query`` against each document, indexed over ``documents`` only (stemmed words,
    as the local store's keyword search: :mod:`cairn.ports.vectorstores.keywords`)."""
    from cairn.ports.vectorstores import keywords

    corpus = keywords.tokenize(documents)
    q_tokens = keywords.tokenize([query])[0]
    if not q_tokens or not any(corpus):
        return np.zeros(len(documents), dtype=np.float32)
    index = keywords.bm25s().BM25()
    index.index(corpus, show_progress=False)
    return np.asarray(index.get_scores(q_tokens), dtype=np.float32)


class LocalReranker(Reranker):
    """Dense cosine on the full text fused with BM25 over the candidates (see the module doc)."""

    def __init__(
        self,
        embedder: Embedder,
        *,
        dense_weight: float = DEFAULT_DENSE_WEIGHT,
        windows: int = 1,
        window_tokens: int = WINDOW_TOKENS,
        max_tokens: int | None = None,
        vectors: str = "auto",
    ) -> None:
        self.name = f"local:{embedder.name}"
        super().__init__(max_tokens=max_tokens)
        if not 0.0 <= dense_weight <= 1.0:
            raise ConfigError(f"local reranker: dense_weight must be in [0, 1], got {dense_weight!r}")
        if windows < 1:
            raise ConfigError(f"local reranker: windows must be at least 1, got {windows!r}")
        if vectors not in VECTOR_MODES:
            raise ConfigError(f"local reranker: vectors must be one of {', '.join(VECTOR_MODES)}, got {vectors!r}")
        self.embedder = embedder
        # re-embedding every candidate is free with the local model, paid per call with any other
        self.stored_vectors = vectors == "stored" or (vectors == "auto" and not embedder.name.startswith("local"))
        self.dense_weight = float(dense_weight)
        self.windows = int(windows)
        self.window_chars = int(window_tokens) * CHARS_PER_TOKEN

    def dense_scores(self, query: str, documents: list[str]) -> np.ndarray:
        """Best cosine between the query and each document's window(s), clipped at 0."""
        owners: list[int] = []
        texts: list[str] = [query]
        for i, doc in enumerate(documents):
            parts = _windows(doc, self.window_chars, self.windows)
            texts.extend(parts)
            owners.extend([i] * len(parts))
        vecs = self.embedder.embed(texts)
        cos = vecs[1:] @ vecs[0]
        best = np.full(len(documents), -1.0, dtype=np.float32)
        np.maximum.at(best, np.asarray(owners), cos)
        return np.clip(best, 0.0, 1.0)

    def stored_scores(self, query: str, candidates: list[Candidate]) -> np.ndarray | None:
        """Cosine between the query and each candidate's stored vector, clipped at 0; None when a
        candidate carries none of the embedder's dimension."""
        vectors = [c.record.vector for c in candidates]
        dim = self.embedder.dimension
        if not vectors or any(v is None or len(v) != dim for v in vectors):
            return None
        matrix = np.asarray(vectors, dtype=np.float32)
        matrix /= np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
        q = np.asarray(self.embedder.embed([query])[0], dtype=np.float32)
        q /= max(float(np.linalg.norm(q)), 1e-12)
        return np.clip(matrix @ q, 0.0, 1.0)

    def weight_for(self, query: str, language: str | None = None) -> float:
        """The dense score's share for ``query``: ``dense_weight``, or ``UNCOVERED_DENSE_WEIGHT``
        when the embedder was not trained on the query's language (``language``: the tenant's
        fixed one, else detected), as in the retrieval's fusion: there its cosines rank noise."""
        from cairn.ports.embeddings.base import covers
        from cairn.ports.vectorstores.fusion import UNCOVERED_DENSE_WEIGHT

        return self.dense_weight if covers(self.embedder, query, language) is None else UNCOVERED_DENSE_WEIGHT

    def _score_candidates(self, query: str, documents: list[str], candidates: list[Candidate],
                          language: str | None = None) -> list[float]:
        w = self.weight_for(query, language)
        dense = self.stored_scores(query, candidates) if self.stored_vectors and w > 0 else None
        return self._fuse(query, documents, dense, w)

    def _score(self, query: str, documents: list[str]) -> list[float]:
        return self._fuse(query, documents, None, self.weight_for(query))

    def _fuse(self, query: str, documents: list[str], dense: np.ndarray | None, w: float) -> list[float]:
        fused = np.zeros(len(documents), dtype=np.float64)
        if w > 0:
            fused += w * (dense if dense is not None else self.dense_scores(query, documents))
        if w < 1:
            lexical = bm25_scores(query, documents)
            top = float(lexical.max()) if len(lexical) else 0.0
            if top > 0:
                fused += (1 - w) * (lexical / top)
        return fused.tolist()

    def describe(self) -> dict[str, Any]:
        return {"kind": "local", "embedder": self.embedder.name, "dense_weight": self.dense_weight,
                "windows": self.windows, "vectors": "stored" if self.stored_vectors else "text"}
