"""The ``Embedder`` interface: validation and batching in the base, the model in ``_embed``."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

import numpy as np

from ..errors import CairnError, EmbeddingError


class Embedder(ABC):
    """Turns texts into unit-length vectors of a fixed dimension."""

    name: str = "abstract"
    dimension: int = 0
    batch_size: int = 32

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` in batches; returns a float32 matrix (len(texts) × dimension)."""
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
            try:
                vecs = self._embed(batch)
            except CairnError:
                raise
            except Exception as exc:
                raise EmbeddingError(f"{self.name} embedder failed: {type(exc).__name__}: {exc}") from exc
            out[rows] = vecs
        self.calls = getattr(self, "calls", 0) + 1
        self.texts_embedded = getattr(self, "texts_embedded", 0) + len(texts)
        return out

    def embed_one(self, text: str) -> np.ndarray:
        return self.embed([text])[0]

    @abstractmethod
    def _embed(self, texts: list[str]) -> np.ndarray:
        """Embed one batch; rows must be L2-normalised."""


def normalize(mat: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(mat, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (mat / norms).astype(np.float32)
