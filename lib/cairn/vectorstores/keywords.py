"""Words for keyword (BM25) search: one tokenizer for the local store and the local reranker.

Text is lower-cased and split by ``bm25s`` (words of two characters or more), English stop words
are dropped and every word is reduced to its stem by the Snowball English stemmer (PyStemmer,
a C extension): "flows", "flowing" and "flow" are one term, so a question matches a document
that words the same idea in another form. Stemming is the one step every classic BM25 setup
takes and cairn's did not; measured on every shared collection it raised hybrid nDCG@10 and
did not change the best fusion weight (benchmarks/README.md, "Keyword stemming").

OpenSearch does the same with its built-in ``english`` analyzer on the text fields
(:mod:`cairn.vectorstores.opensearch`), so a keyword score means the same on both backends.
Both libraries are imported on first use: a dense-only process never loads them.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from ..errors import require

LANGUAGE = "english"
STOPWORDS = "en"


@lru_cache(maxsize=1)
def _libraries() -> tuple[Any, Any]:
    bm25s = require("bm25s", extra="local", feature="keyword search on the local store")
    stemmer = require("Stemmer", extra="local", feature="keyword search on the local store").Stemmer(LANGUAGE)
    return bm25s, stemmer


def bm25s() -> Any:
    """The ``bm25s`` module (imported once)."""
    return _libraries()[0]


def tokenize(texts: list[str]) -> list[list[str]]:
    """Each text as its stemmed, stop-word-free words, in order."""
    lib, stemmer = _libraries()
    return lib.tokenize(texts, stopwords=STOPWORDS, stemmer=stemmer.stemWords, return_ids=False, show_progress=False)  # type: ignore[no-any-return]
