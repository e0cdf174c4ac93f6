"""Which language a text is written in: by its script first, then by a language detector.

* Chinese and Japanese are told apart from everything else by their characters: a text whose
  letters are mostly Han ideographs or kana is CJK; it is Japanese when kana make up a
  noticeable share of it (every Japanese sentence has particles in hiragana), else Chinese.
* A text in the Latin or Cyrillic script is given to py3langid (a naive Bayes model of byte
  n-grams over 97 languages, shipped inside its wheel: nothing is downloaded), restricted to
  the languages cairn stems. Its answer is taken only when it is sure (``MIN_PROBABILITY``)
  and the text has at least ``MIN_WORDS`` words: a short query ("cell death") carries too few
  letters to tell English from Dutch, and English, as before, is the default.
* Any other script (Hangul, Greek, Arabic, Devanagari, ...) is ``"other"``: Unicode words,
  no stems, no stop words.

Only the first characters of a long text are read (``SAMPLE_CHARS``, four times as many for
the script). Answers are cached per text (a reranker sees the same candidates again and again).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import threading
from array import array
from functools import lru_cache
from pathlib import Path
from typing import Any

from cairn.core.logging import get_logger
from cairn.core.text.languages import ALPHABETIC, DEFAULT, OTHER

MIN_PROBABILITY = 0.9
SAMPLE_CHARS = 300  # the detector reads this much of a text: plenty to tell a language, and fast
MIN_WORDS = 3
KANA_SHARE = 0.05  # of the CJK characters; below it a text is Chinese

_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ffff"
_KANA = "\u3040-\u309f\u30a0-\u30fa\u30fd-\u30ff\u31f0-\u31ff\uff66-\uff9d"  # not ・ or ー, which Chinese uses too
CJK_RUN = re.compile(f"[{_HAN}{_KANA}\u30fb\u30fc\u3005]+")
_HAN_RE = re.compile(f"[{_HAN}]")
_KANA_RE = re.compile(f"[{_KANA}]")
_LETTER_RE = re.compile(r"[^\W\d_]")
_ALPHABET_RE = re.compile(r"[A-Za-z\u00c0-\u024f\u0400-\u04ff]")  # Latin (with accents) and Cyrillic
_WORDS_RE = re.compile(r"\w+")

# English function words: a fifth of the words of running English text are these (a quarter to
# a third, measured on abstracts and questions); no other language's text comes near
_ENGLISH_MARKERS = frozenset(["the", "of", "and", "to", "in", "a", "is", "that", "for", "are", "with", "as", "on", "by", "this", "was", "be", "it", "from", "or", "an"])
ENGLISH_SHARE = 0.2

_lock = threading.Lock()
_identifier: Any = None


def _detector() -> Any:
    """py3langid's identifier, restricted to the alphabetic languages cairn stems (loaded once);
    None where py3langid is not installed (alphabetic text is then read as English, logged once)."""
    global _identifier
    with _lock:
        if _identifier is None:
            try:
                from py3langid.langid import MODEL_FILE, LanguageIdentifier
            except ImportError:
                _identifier = False
                get_logger(__name__).warning("language_detector_missing", package="py3langid",
                                             fallback="English", hint="pip install 'cairn[local]'")
                return None

            _identifier = _cached_identifier(LanguageIdentifier, MODEL_FILE)
    return _identifier or None


def _cache_path(model: Path) -> Path:
    """Where the restricted, uncompressed model is kept for the next process (per model file and
    language set): a folder ``$XDG_CACHE_HOME/cairn/langid-<key>`` (default ``~/.cache/cairn``)."""
    st = model.stat()
    key = hashlib.sha256(f"{model}:{st.st_size}:{st.st_mtime_ns}:{','.join(sorted(ALPHABETIC))}".encode()).hexdigest()[:16]
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "cairn"
    return root / f"langid-{key}"


def _cached_identifier(cls: Any, model_file: str) -> Any:
    """py3langid's identifier restricted to :data:`ALPHABETIC`. Its model ships LZMA-compressed
    (68 MB unpacked: ~1.3 s per process on an idle core), so the unpacked, restricted arrays are
    kept in a cache folder, one ``.npy`` each, and later processes map its 39 MB state table
    instead of reading it (a text walks a few hundred of its entries): ~25 ms instead of ~100 ms
    for a copy. Where the cache cannot be written (a read-only home), every process unpacks the
    model as before."""
    from py3langid.langid import MODEL_DIR

    model = Path(model_file) if Path(model_file).is_absolute() else MODEL_DIR / model_file
    cache: Path | None = None
    try:
        cache = _cache_path(model)  # stats the model file
        return _read_cache(cls, cache)
    except (OSError, ValueError, KeyError, TypeError):
        if cache is not None:
            shutil.rmtree(cache, ignore_errors=True)  # damaged or partial: written again below
    identifier = cls.from_model_file(model_file, norm_probs=True)
    identifier.set_languages(list(ALPHABETIC))
    try:
        if cache is not None:
            _save_identifier(identifier, cache, model)
    except (OSError, ValueError, TypeError):
        pass
    return identifier


def _read_cache(cls: Any, cache: Path) -> Any:
    import numpy as np

    if not (cache / "source").is_file():  # written last: a folder without it is incomplete
        raise OSError(f"no complete cache at {cache}")
    nextmove = np.load(cache / "nextmove.npy", mmap_mode="r", allow_pickle=False)
    if nextmove.dtype != np.uint32:
        raise ValueError("another layout than this cache reads")
    row = np.load(cache / "row.npy", allow_pickle=False)
    return cls(np.load(cache / "ptc.npy", allow_pickle=False), np.load(cache / "pc.npy", allow_pickle=False),
               json.loads((cache / "classes.json").read_text()), memoryview(nextmove),
               np.load(cache / "output.npy", allow_pickle=False).tolist(), norm_probs=True,
               tk_row=array("H", row.astype(np.uint16).tobytes()))


def _save_identifier(identifier: Any, cache: Path, model: Path) -> None:
    import numpy as np

    if identifier.tk_nextmove.itemsize != 4 or identifier.tk_row.itemsize != 2:
        return  # another layout than this cache reads
    _prune(cache.parent, model)
    tmp = cache.with_name(f"{cache.name}.{os.getpid()}.tmp")
    tmp.mkdir(parents=True, exist_ok=True)
    arrays = {"ptc": np.asarray(identifier.nb_ptc), "pc": np.asarray(identifier.nb_pc),
              "nextmove": np.frombuffer(identifier.tk_nextmove, dtype=np.uint32),
              "row": np.frombuffer(identifier.tk_row, dtype=np.uint16),
              "output": np.asarray(identifier.tk_output, dtype=np.int64)}
    for name, values in arrays.items():
        np.save(tmp / f"{name}.npy", values, allow_pickle=False)
    (tmp / "classes.json").write_text(json.dumps(list(identifier.nb_classes)))
    (tmp / "source").write_text(str(model))
    try:
        os.replace(tmp, cache)
    except OSError:  # another process wrote it first
        shutil.rmtree(tmp, ignore_errors=True)


def _prune(root: Path, model: Path) -> None:
    """Drop caches nobody reads any more (42 MB each): those of the older one-file format, and
    those whose model file is gone (an uninstalled environment, a deleted clone)."""
    if not root.is_dir():
        return
    for entry in root.glob("langid-*"):
        try:
            if entry.suffix == ".npz" and entry.is_file():
                entry.unlink()
            elif entry.is_dir() and (entry / "source").is_file() and not Path((entry / "source").read_text()).exists():
                shutil.rmtree(entry, ignore_errors=True)
        except OSError:
            continue


def has_kana(text: str) -> bool:
    return _KANA_RE.search(text) is not None


def cjk_language(text: str) -> str | None:
    """``"zh"`` or ``"ja"`` when most of the letters of ``text`` are Han or kana, else None."""
    han = len(_HAN_RE.findall(text))
    kana = len(_KANA_RE.findall(text))
    if not han and not kana:
        return None
    letters = len(_LETTER_RE.findall(text))
    cjk = han + kana
    # a CJK character is about a word; an alphabetic word is about five letters
    if cjk * 5 < letters - cjk:
        return None
    return "ja" if kana >= max(1.0, KANA_SHARE * cjk) else "zh"


@lru_cache(maxsize=8192)
def detect(text: str) -> str:
    """The language code of ``text``: one of :data:`cairn.core.text.LANGUAGES`, or ``"other"``."""
    text = text[: 4 * SAMPLE_CHARS]
    if not text.isascii():  # ASCII text is in the Latin script: no need to count scripts
        cjk = cjk_language(text) if CJK_RUN.search(text) else None
        if cjk:
            return cjk
        sample = text[:SAMPLE_CHARS]
        letters = len(_LETTER_RE.findall(sample))
        if letters and len(_ALPHABET_RE.findall(sample)) * 2 < letters:
            return OTHER  # Hangul, Greek, Arabic, Devanagari, Thai, ...
    words = _WORDS_RE.findall(text[:SAMPLE_CHARS].lower())
    if len(words) < MIN_WORDS:
        return DEFAULT
    if sum(w in _ENGLISH_MARKERS for w in words) >= ENGLISH_SHARE * len(words):
        return "en"  # plainly English (most texts of an English tenant): no model needed
    detector = _detector()
    if detector is None:
        return DEFAULT
    code, probability = detector.classify(text[:SAMPLE_CHARS])
    return str(code) if probability >= MIN_PROBABILITY else DEFAULT
