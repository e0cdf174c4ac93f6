"""An on-disk embedding cache for benchmarks: each text is embedded once across suites and runs.

Only benchmarks use it (cached vectors are keyed by the model name and the text's hash)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

from cairn.ports.embeddings.base import Embedder

CACHE_DIR = Path(__file__).parent / "results" / "cache"


class CachedEmbedder(Embedder):
    def __init__(self, inner: Embedder, name: str = "embeddings") -> None:
        self.inner = inner
        self.name = f"cached-{inner.name}"
        self.dimension = inner.dimension
        self.batch_size = 4096
        self.languages = inner.languages  # what the model covers decides the fusion (cairn.engine.stages.retrieve)
        self.max_tokens = inner.max_tokens  # the chunker cuts to the model's window
        self._path = CACHE_DIR / f"{name}-{inner.name}"
        self._keys: dict[str, int] = {}
        self._vecs = np.zeros((0, inner.dimension), dtype=np.float32)
        if (self._path / "keys.json").exists():
            self._keys = json.loads((self._path / "keys.json").read_text())
            self._vecs = np.load(self._path / "vectors.npy")
        self.misses = 0

    def tokenizer(self):  # the wrapped model's (the evidence gate and token counts read it)
        return self.inner.tokenizer()

    @staticmethod
    def _key(text: str) -> str:
        return hashlib.sha1(text.encode()).hexdigest()

    def _embed(self, texts: list[str]) -> np.ndarray:
        keys = [self._key(t) for t in texts]
        missing = [i for i, k in enumerate(keys) if k not in self._keys]
        if missing:
            self.misses += len(missing)
            fresh = self.inner.embed([texts[i] for i in missing])
            start = len(self._vecs)
            self._vecs = np.vstack([self._vecs, fresh])
            for n, i in enumerate(missing):
                self._keys[keys[i]] = start + n
        return self._vecs[[self._keys[k] for k in keys]]

    def save(self) -> None:
        self._path.mkdir(parents=True, exist_ok=True)
        np.save(self._path / "vectors.npy", self._vecs)
        (self._path / "keys.json").write_text(json.dumps(self._keys))
