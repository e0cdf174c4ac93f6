"""Words for keyword (BM25) search: one tokenizer for the local store and the local reranker.

Each text is analysed by the language it is written in (:mod:`cairn.text`): Chinese and
Japanese are cut into words by a segmenter; the other languages are split by ``bm25s`` (words
of two characters or more), their stop words dropped and every word reduced to its Snowball
stem (PyStemmer): "flows", "flowing" and "flow" are one term, so a question matches a document
that words the same idea in another form. English is analysed exactly as before (bm25s's
English stop words, the Snowball English stemmer; benchmarks/README.md, "Keyword stemming").

OpenSearch does the same with an analyzer per language on subfields of the text fields
(:mod:`cairn.vectorstores.opensearch`), so a keyword score means the same on both backends.
The libraries are imported on first use: a dense-only process never loads them.
"""

from __future__ import annotations

from typing import Any

from .. import text as _text
from ..text.analyze import bm25s as _bm25s


def bm25s() -> Any:
    """The ``bm25s`` module (imported once)."""
    return _bm25s()


def tokenize(texts: list[str], language: str | None = None) -> list[list[str]]:
    """Each text as its words for keyword search, in order: segmented (Chinese, Japanese) or
    stemmed with stop words dropped (the others), by each text's detected language, or by
    ``language`` when the tenant fixed it (an ISO 639-1 code; None or ``"auto"``: detect)."""
    return _text.words(texts, language)
