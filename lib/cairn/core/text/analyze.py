"""A text's words for keyword matching, by the language it is written in.

``words(texts, language=None)`` is the one analysis behind every keyword match on the local
side (the store's BM25 index, the reranker, the evidence gate's keyword check):

* each text's language is detected (:func:`.detect`), unless the tenant fixed it;
* runs of Chinese or Japanese characters are cut into words by a segmenter (:mod:`.segment`),
  wherever they occur (a German manual quoting a Japanese product name included);
* the rest is split by ``bm25s`` into words of two characters or more, the language's stop words
  dropped and every word reduced to its Snowball stem (PyStemmer) when the language has one.

English text is analysed exactly as cairn always has (bm25s's English stop words, the Snowball
English stemmer): the same tokens, so English figures do not move.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from cairn.core.errors import require
from cairn.core.text.detect import CJK_RUN, cjk_language, detect, has_kana
from cairn.core.text.languages import DEFAULT, LANGUAGES, OTHER
from cairn.core.text.segment import segment, stop_words

# languages whose stop words bm25s ships (NLTK's lists, about 200 words each); stopwordsiso's larger
# lists for the others. Where both exist the shorter lists measured better than stopwordsiso's
# (benchmarks/README.md, "Languages")
_BM25S_STOP = frozenset({"en", "de", "nl", "fr", "es", "pt", "it", "ru", "sv", "no", "da"})


@lru_cache(maxsize=1)
def bm25s() -> Any:
    """The ``bm25s`` module (imported once)."""
    return require("bm25s", extra="local", feature="keyword search")


@lru_cache(maxsize=32)
def _stemmer(algorithm: str) -> Any:
    return require("Stemmer", extra="local", feature="keyword search").Stemmer(algorithm)


_WORD = re.compile(r"(?u)\b\w\w+\b")  # bm25s's token pattern: words of two characters or more
_BM25S_LISTS = {"en": "STOPWORDS_EN", "de": "STOPWORDS_GERMAN", "nl": "STOPWORDS_DUTCH", "fr": "STOPWORDS_FRENCH",
                "es": "STOPWORDS_SPANISH", "pt": "STOPWORDS_PORTUGUESE", "it": "STOPWORDS_ITALIAN",
                "ru": "STOPWORDS_RUSSIAN", "sv": "STOPWORDS_SWEDISH", "no": "STOPWORDS_NORWEGIAN", "da": "STOPWORDS_DANISH"}


@lru_cache(maxsize=32)
def _bm25s_stop_words(code: str) -> frozenset[str]:
    """bm25s's stop words for ``code`` (NLTK's lists), read from its ``stopwords`` module alone:
    importing the package imports scipy.sparse (~0.4 s per process), which splitting words never uses."""
    spec = importlib.util.find_spec("bm25s")
    if spec is None or spec.origin is None:
        bm25s()  # not installed: the install hint
    try:
        path = Path(spec.origin).parent / "stopwords.py"  # type: ignore[union-attr, arg-type]
        module_spec = importlib.util.spec_from_file_location("cairn._bm25s_stopwords", path)
        module = importlib.util.module_from_spec(module_spec)  # type: ignore[arg-type]
        module_spec.loader.exec_module(module)  # type: ignore[union-attr]
        return frozenset(getattr(module, _BM25S_LISTS[code]))
    except (OSError, AttributeError, ImportError, SyntaxError):  # another layout: from the package
        return frozenset(getattr(bm25s().stopwords, _BM25S_LISTS[code]))


def _alphabetic(texts: list[str], code: str) -> list[list[str]]:
    """Words of ``texts`` as bm25s splits them (lower-cased, two characters or more), with the stop
    words and stems of language ``code``: the tokens ``bm25s.tokenize`` gives, without importing it."""
    if not texts:
        return []
    lang = LANGUAGES.get(code)
    if code in _BM25S_STOP:
        stop = _bm25s_stop_words(code)  # bm25s's own list (NLTK's, the Snowball stemmers' companions); English as always
    else:
        stop = frozenset(stop_words(code)) if lang else frozenset()
    stem = _stemmer(lang.stemmer).stemWords if lang and lang.stemmer else None
    out = []
    for text in texts:
        words = [w for w in _WORD.findall(text.lower()) if w not in stop]
        out.append(stem(words) if stem is not None and words else words)
    return out


def _mixed(text: str, cjk: str, rest: str) -> list[str]:
    """Words of a text with CJK runs: each run segmented as ``cjk``, the rest analysed as ``rest``."""
    out: list[str] = []
    pos = 0
    for match in CJK_RUN.finditer(text):
        if match.start() > pos:
            out.extend(_alphabetic([text[pos : match.start()]], rest)[0])
        out.extend(segment(match.group(), cjk))
        pos = match.end()
    if pos < len(text):
        out.extend(_alphabetic([text[pos:]], rest)[0])
    return out


def language_of(text: str, language: str | None = None) -> str:
    """The language ``text`` is analysed as: ``language`` when fixed (not ``auto``), else detected."""
    return language if language and language != "auto" else detect(text)


def words(texts: Sequence[str], language: str | None = None) -> list[list[str]]:
    """Each text as its words for keyword matching, in order (see the module doc).

    ``language``: an ISO 639-1 code from :data:`cairn.core.text.LANGUAGES` to read every text in
    (a tenant's fixed language), or None / ``"auto"`` to detect each text's own."""
    fixed = language if language and language != "auto" else None
    out: list[list[str] | None] = [None] * len(texts)
    groups: dict[str, list[int]] = {}
    for n, text in enumerate(texts):
        text = text if isinstance(text, str) else str(text)
        code = fixed or detect(text)
        if not text.isascii() and CJK_RUN.search(text):
            cjk = code if code in ("zh", "ja") else (cjk_language(text) or _script_cjk(text))
            rest = code if code not in ("zh", "ja") else DEFAULT
            out[n] = _mixed(text, cjk, rest)
        else:
            groups.setdefault(code if code in LANGUAGES else OTHER, []).append(n)
    for code, rows in groups.items():
        analysed = _alphabetic([texts[n] for n in rows], DEFAULT if code in ("zh", "ja") else code)
        for n, tokens in zip(rows, analysed, strict=True):
            out[n] = tokens
    return [tokens or [] for tokens in out]


def _script_cjk(text: str) -> str:
    """A few CJK characters in a mostly alphabetic text: Japanese if any is kana, else Chinese."""
    return "ja" if has_kana(text) else "zh"
