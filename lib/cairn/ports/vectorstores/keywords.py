"""Words for keyword (BM25) search: one tokenizer for the local store and the local reranker.

Each text is analysed by the language it is written in (:mod:`cairn.core.text`): Chinese and
Japanese are cut into words by a segmenter; the other languages are split by ``bm25s`` (words
of two characters or more), their stop words dropped and every word reduced to its Snowball
stem (PyStemmer): "flows", "flowing" and "flow" are one term, so a question matches a document
that words the same idea in another form. English is analysed exactly as before (bm25s's
English stop words, the Snowball English stemmer; benchmarks/README.md, "Keyword stemming").

OpenSearch does the same with an analyzer per language on subfields of the text fields
(:mod:`cairn.ports.vectorstores.opensearch`), so a keyword score means the same on both backends.

**What is matched** (:func:`record_text`, the same rule on OpenSearch): a leaf's title, abstract and
text, a directory's L0 record (its title and abstract). A directory's L1 overview is not matched
by its words (only by meaning): it lists its children's abstracts, so in keyword ranking it
competed with the very children it lists and counted their words twice, lowering their idf
(on a Chinese benchmark it pushed three answers down a place; benchmarks/README.md, "Languages").
The libraries are imported on first use: a dense-only process never loads them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cairn.core import text as _text
from cairn.core.text.analyze import bm25s as _bm25s


def bm25s() -> Any:
    """The ``bm25s`` module (imported once)."""
    return _bm25s()


def tokenize(texts: list[str], language: str | None = None) -> list[list[str]]:
    """Each text as its words for keyword search, in order: segmented (Chinese, Japanese) or
    stemmed with stop words dropped (the others), by each text's detected language, or by
    ``language`` when the tenant fixed it (an ISO 639-1 code; None or ``"auto"``: detect)."""
    return _text.words(texts, language)


OVERVIEW_LEVEL = 1  # Level.OVERVIEW (not imported: the models are not needed to index)


def record_text(record: Mapping[str, Any]) -> str:
    """What keyword search reads of a record (a stored record's fields): its title, abstract and
    text; nothing for a directory's L1 overview (module doc)."""
    if record.get("level") == OVERVIEW_LEVEL:
        return ""
    return " ".join(filter(None, (record.get("title"), record.get("abstract"), record.get("text"))))
