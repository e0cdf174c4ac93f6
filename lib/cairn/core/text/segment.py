"""Words of Chinese and Japanese text, which has no spaces between them.

* Chinese: rjieba (the Rust port of jieba, with jieba's dictionary inside the wheel), in search
  mode: a long word also yields the shorter words inside it ("数据存储" → 数据, 存储, 数据存储),
  so a question and a document that cut a phrase differently still share words.
* Japanese: Janome (pure Python, the IPADIC dictionary inside the wheel); each word as its
  dictionary form (降った → 降る), particles, auxiliary verbs and symbols left out.

Either way the stop words of the language (``stopwordsiso``) are dropped. Where a segmenter is
not installed (a Lambda layer without the ``local`` extra), the text is cut into overlapping
character pairs, the classic fallback of CJK search engines (Lucene's CJK analyzer); that is
logged once. Libraries load on first use.
"""

from __future__ import annotations

import re
import threading
from functools import lru_cache
from typing import Any

from cairn.core.logging import get_logger

log = get_logger(__name__)

_WORD = re.compile(r"\w")
_JA_SKIP = ("助詞", "助動詞", "記号", "補助記号", "空白")
_local = threading.local()
_warned: set[str] = set()


@lru_cache(maxsize=4)
def stop_words(code: str) -> frozenset[str]:
    """The stop words of a language from ``stopwordsiso`` (empty when it is not installed)."""
    try:
        import stopwordsiso
    except ImportError:
        return frozenset()
    return frozenset(stopwordsiso.stopwords(code)) if stopwordsiso.has_lang(code) else frozenset()


def _missing(package: str, code: str) -> None:
    if package not in _warned:
        _warned.add(package)
        log.warning("segmenter_missing", package=package, language=code, fallback="character bigrams",
                    hint="pip install 'cairn[local]'")


def bigrams(run: str) -> list[str]:
    """Overlapping character pairs of a run of CJK characters (a single character stays one)."""
    return [run] if len(run) < 2 else [run[i : i + 2] for i in range(len(run) - 1)]


def _chinese(run: str) -> list[str]:
    try:
        import rjieba
    except ImportError:
        _missing("rjieba", "zh")
        return bigrams(run)
    return list(rjieba.cut_for_search(run))


def _janome() -> Any:
    tokenizer = getattr(_local, "janome", None)
    if tokenizer is None:
        from janome.tokenizer import Tokenizer

        tokenizer = _local.janome = Tokenizer()
    return tokenizer


def _japanese(run: str) -> list[str]:
    try:
        tokenizer = _janome()
    except ImportError:
        _missing("janome", "ja")
        return bigrams(run)
    out = []
    for token in tokenizer.tokenize(run):
        if token.part_of_speech.split(",", 1)[0] in _JA_SKIP:
            continue
        base = token.base_form
        out.append(token.surface if base in ("*", "") else base)
    return out


def segment(run: str, code: str) -> list[str]:
    """The words of ``run`` (text in ``code``, ``"zh"`` or ``"ja"``), lower-cased, without stop
    words or punctuation."""
    words = _japanese(run) if code == "ja" else _chinese(run)
    stop = stop_words(code)
    return [w for w in (w.strip().lower() for w in words) if w and _WORD.search(w) and w not in stop]
