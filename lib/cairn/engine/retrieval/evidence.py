"""No evidence, no results: only nonsense gets nothing.

A score threshold on cosine similarity cannot tell noise from an answer on every collection: an
embedding model gives random letters a similarity of 0.2–0.37 to the nearest document of some
collections (all-MiniLM-L6-v2 on abstracts of biomedical papers), which is where the relevant
documents of hard questions score on others. So the threshold alone lets gibberish through.

The gate asks for evidence of one of three kinds before a typed query keeps its candidates:

* **language**: the query itself reads as words of a language (:func:`reads_as_language`): at
  least ``LANGUAGE_MIN_WORDS`` words, and at least ``LANGUAGE_MIN_SHARE`` of its letters in words
  the embedder's own tokenizer holds whole (one vocabulary entry, not unknown) or spells in long
  pieces (``LANGUAGE_MIN_PIECE_LETTERS`` letters a piece on average: a compound or an inflection,
  "Mittagessen", "automations"). A
  paraphrase that shares no word with its answer ("is there somewhere to leave the car" →
  parking) is a real question on a tenant of any size, so it keeps its best matches; random
  letters break into short word pieces (0 of 23,000 random strings read as language with MiniLM's
  vocabulary, 211 of 223 scripted chat turns do: ``python -m benchmarks.run language_test``). Any script
  the tokenizer knows counts the same way (a CJK character it holds is a word). An embedder whose
  engine only counts tokens (the embedded multilingual-e5) answers ``word_pieces(text)`` instead:
  with its vocabulary 2 of 23,000 random strings read as language (two short words it holds whole,
  "kje sus"), 0 of the benchmark's 1,000; 199 of 223 chat turns do, and 15 of 18 questions in
  Chinese, Japanese, German, French, Spanish, Portuguese and Russian; a language
  analyser (word segmentation) can replace the test with :func:`set_language_check`. Without a
  tokenizer (a remote embedder), this kind of evidence is not available and the two below decide;
* **lexical**: at least one of the query's words (stemmed, stop words aside) occurs in the
  content the query may search (its roots and filter: another user's memories never count) — one
  keyword search with limit 1, on backends that have keyword search;
* **semantic**: else, a query of at least ``SEMANTIC_MIN_LETTERS`` letters (alphabets written
  with spaces; a shorter one that is no word of the content cannot be told from noise: on a
  557-word handbook tenant, 29 % of random 3-letter and 3 % of random 4-letter strings are one
  edit from one of its words, 1 % of 5-letter ones and none longer, and such a near-word's dense
  match can beat the floor, benchmarks/README.md) must have its best dense match score above the
  tenant's **noise floor**, the
  score random letters are expected to stay under against this tenant's vectors: the larger of
  the best score of ``FLOOR_PROBES`` fixed random strings and their mean plus ``FLOOR_SIGMAS``
  standard deviations (the tail is long: on the shared collections 0–0.2 % of 1,000 fresh random
  strings still beat it, against 0.1–3.6 % for the best of 32 probes alone and 0.1–1.2 % with four
  standard deviations; benchmarks/README.md). The floor is
  learned from the tenant's own content (one ``query_many``), cached per store and tenant for
  ``FLOOR_TTL_S``; a store that keeps learned facts with the tenant (the embedded store) keeps it
  for every process while the tenant's record count stays within ``FLOOR_DRIFT`` of the count
  it was learned at, so a fresh process (``cairn find``) does not embed the probes again; on that
  store the cached floor obeys the same drift (a floor learned while documents were still being
  indexed let 154 of 200 random strings through ``cairn serve``). An empty tenant has no floor
  to learn: nothing is cached or kept.

A misspelt query ("refnds") keeps its dense answers when they are clearly closer than noise;
random letters never do. A backend without keyword search (Pinecone dense) skips the gate, and
the trace says so. The check costs one keyword search per typed query; the floor, a few
milliseconds once per tenant and TTL. A typed query whose text holds another's that passed on
its words, over the same roots (a follow-up searched with the turn before it), has the same words
to show and is not asked again (:func:`inherits_words`).
"""

from __future__ import annotations

import random
import string
import threading
import time
import unicodedata
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import Any, Literal

import numpy as np

from cairn.core.models import ThinkingTrace
from cairn.engine.retrieval.scope import scope_filter
from cairn.ports.embeddings import Embedder
from cairn.ports.vectorstores import SearchMode, VectorQuery, VectorStore

FLOOR_PROBES = 64
FLOOR_SIGMAS = 5.0
FLOOR_TTL_S = 300.0
_SEED = 20261201

LANGUAGE_MIN_WORDS = 2
SEMANTIC_MIN_LETTERS = 5
LANGUAGE_MIN_SHARE = 0.75
# a word the vocabulary spells in pieces of this many letters on average (a compound, an inflection:
# "Mittagessen", "automations") is a word of the language too; random letters break into shorter ones
LANGUAGE_MIN_PIECE_LETTERS = 3.5
UNKNOWN_TOKENS = frozenset({"[UNK]", "<unk>"})  # WordPiece's, SentencePiece's

_floors: dict[tuple[int, str], tuple[float, float, int | None]] = {}  # (store, tenant) -> (computed at, floor, records)
_lock = threading.Lock()

LanguageCheck = Callable[[str, Any], bool]  # (query, the embedder's tokenizer or None) -> reads as language
_language_check: LanguageCheck | None = None


def set_language_check(check: LanguageCheck | None) -> None:
    """Replace :func:`reads_as_language` (e.g. by a per-language analyser that segments text
    written without spaces); None restores the default."""
    global _language_check
    _language_check = check


def language_share(text: str, tokenizer: Any) -> tuple[float, int]:
    """(share of the letters of ``text`` in words the tokenizer holds whole or spells in long pieces
    (``LANGUAGE_MIN_PIECE_LETTERS`` on average), number of words with a letter). A word is what the
    tokenizer's pre-tokenizer makes of the text (spaces and
    punctuation split it; each CJK character is a word of its own). ``tokenizer``: a
    ``tokenizers.Tokenizer``, or anything with ``word_pieces(text)`` giving each word and the number
    of vocabulary pieces it takes (an engine that only counts tokens, e.g. the embedded e5)."""
    whole = letters = words = 0
    for word, pieces, unknown in _word_pieces(text, tokenizer):
        n = sum(1 for ch in word if ch.isalpha())
        if not n and not unknown:
            continue  # digits and punctuation say nothing either way
        words += 1
        letters += max(n, 1)
        if not unknown and (pieces == 1 or n / pieces >= LANGUAGE_MIN_PIECE_LETTERS):
            whole += n
    return (whole / letters if letters else 0.0), words


def _word_pieces(text: str, tokenizer: Any) -> list[tuple[str, int, bool]]:
    """(word, pieces, any piece unknown) for each word of ``text``."""
    counted = getattr(tokenizer, "word_pieces", None)
    if callable(counted):
        return [(w, n, False) for w, n in counted(text)]
    enc = tokenizer.encode(text, add_special_tokens=False)
    pieces: dict[int, list[str]] = {}
    for token, word in zip(enc.tokens, enc.word_ids):
        if word is not None:
            pieces.setdefault(word, []).append(token)
    return [("".join(tokens), len(tokens), any(t in UNKNOWN_TOKENS for t in tokens)) for tokens in pieces.values()]


def tokenizer_of(embedder: Any) -> Any:
    """The embedder's tokenizer; else the embedder itself when it counts a word's pieces
    (``word_pieces``); else None (a remote embedder: no evidence of this kind)."""
    get = getattr(embedder, "tokenizer", None)
    tok = get() if callable(get) else None
    if tok is None and callable(getattr(embedder, "word_pieces", None)):
        return embedder
    return tok


def reads_as_language(text: str, tokenizer: Any) -> bool:
    """Whether ``text`` is made of words (module doc); False without a tokenizer."""
    if _language_check is not None:
        return _language_check(text, tokenizer)
    if tokenizer is None:
        return False
    share, words = language_share(text, tokenizer)
    return words >= LANGUAGE_MIN_WORDS and share >= LANGUAGE_MIN_SHARE


def spaced_letters(text: str) -> int:
    """The letters of ``text`` in alphabets written with spaces (CJK characters, each a word, do not count)."""
    return sum(1 for ch in text if ch.isalpha() and unicodedata.east_asian_width(ch) not in ("W", "F"))


def random_strings(n: int, seed: int) -> list[str]:
    """``n`` strings of random lower-case letters (1–3 words of 3–9 letters), the same for a seed."""
    rng = random.Random(seed)
    return [
        " ".join("".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(3, 9))) for _ in range(rng.randint(1, 3)))
        for _ in range(n)
    ]


@lru_cache(maxsize=1)
def probe_texts() -> tuple[str, ...]:
    """The floor's ``FLOOR_PROBES`` probes, the same every run."""
    return tuple(random_strings(FLOOR_PROBES, _SEED))


_probes: dict[tuple[int, str, int], np.ndarray] = {}  # per embedder (any embedder: no hashing needed)


def _probe_vectors(embedder: Embedder) -> np.ndarray:
    key = (id(embedder), str(getattr(embedder, "name", "")), int(getattr(embedder, "dimension", 0)))
    vectors = _probes.get(key)
    if vectors is None:
        vectors = embedder.embed(list(probe_texts()), input_type="query")
        with _lock:
            if len(_probes) >= 8:
                _probes.clear()
            _probes[key] = vectors
    return vectors


def noise_floor(store: VectorStore, embedder: Embedder, tenant: str, *, now: float | None = None) -> float:
    """The score random strings are expected to stay under in ``tenant``: the larger of the probes'
    best dense score and their mean plus ``FLOOR_SIGMAS`` standard deviations (cached for
    ``FLOOR_TTL_S``; 0 for an empty tenant)."""
    now = time.monotonic() if now is None else now
    key = (id(store), tenant)
    keeps = callable(getattr(store, "learned", None))  # the embedded store: its record count costs nothing
    count = store.count(tenant) if keeps else None
    with _lock:
        cached = _floors.get(key)
    if cached is not None and now - cached[0] < FLOOR_TTL_S and (count is None or _near(count, cached[2])):
        return cached[1]
    floor = _kept_floor(store, embedder, tenant)
    if floor is None:
        requests = [VectorQuery(tenant=tenant, vector=v.tolist(), limit=1) for v in _probe_vectors(embedder)]
        best = np.asarray([hits[0].score for hits in store.query_many(requests) if hits], dtype=np.float64)
        if not best.size:  # an empty tenant (or one still being indexed): nothing to learn, nothing kept
            return 0.0
        floor = float(max(best.max(), best.mean() + FLOOR_SIGMAS * best.std()))
        _keep_floor(store, embedder, tenant, floor)
    with _lock:
        _floors[key] = (now, floor, count)
    return floor


def _near(count: int, learned_at: int | None) -> bool:
    """A floor learned at ``learned_at`` records still holds at ``count`` (within ``FLOOR_DRIFT``)."""
    return learned_at is not None and abs(count - learned_at) <= FLOOR_DRIFT * max(count, 1)


FLOOR_DRIFT = 0.1  # a kept floor holds while the tenant's record count stays within this share


def _floor_key(embedder: Embedder) -> str:
    return f"evidence.noise_floor:{getattr(embedder, 'name', '')}:{getattr(embedder, 'dimension', 0)}"


def _kept_floor(store: VectorStore, embedder: Embedder, tenant: str) -> float | None:
    """The floor a store that keeps learned facts with the tenant (``learned``/``learn``, the
    embedded store) holds from any process, while the tenant has about as many records."""
    learned = getattr(store, "learned", None)
    if not callable(learned):
        return None
    fact = learned(tenant, _floor_key(embedder))
    if not isinstance(fact, dict) or not isinstance(fact.get("floor"), float | int):
        return None
    return float(fact["floor"]) if _near(store.count(tenant), int(fact.get("records", -1))) else None


def _keep_floor(store: VectorStore, embedder: Embedder, tenant: str, floor: float) -> None:
    learn = getattr(store, "learn", None)
    if callable(learn):
        learn(tenant, _floor_key(embedder), {"floor": floor, "records": store.count(tenant)})


Evidence = Literal["words", "language", "meaning", "ungated", ""]  # "": none (falsy)


def inherits_words(text: str, others: Iterable[tuple[str, str]]) -> bool:
    """Whether a query ``text`` holds, word for word, the whole text of another query that passed
    on its words (``others``: ``(text, evidence)`` of the plan's queries already searched over the
    same roots and filter): its words occur in the content as theirs do, so its own keyword search
    is spared."""
    padded = f" {' '.join(text.split())} "
    return any(evidence == "words" and other.split() and f" {' '.join(other.split())} " in padded for other, evidence in others)


def has_evidence(
    store: VectorStore,
    embedder: Embedder,
    tenant: str,
    text: str,
    vector: list[float],
    roots: list[str],
    user_filter: dict | None,
    trace: ThinkingTrace,
) -> Evidence:
    """The kind of evidence the query may keep its candidates on (see the module doc), ``""``
    when none (the trace says why)."""
    if not store.capabilities().keyword:
        trace.add("fallback", detail=f"the {store.backend} backend has no keyword search: no evidence gate")
        return "ungated"
    scope = scope_filter(roots, user_filter)  # only what this query may search: no word of another user's memories counts
    if store.query(VectorQuery(tenant=tenant, text=text, mode=SearchMode.KEYWORD, filter=scope, limit=1)):
        return "words"
    if reads_as_language(text, tokenizer_of(embedder)):
        trace.add("keep", detail="no query word occurs in the content, but the query reads as language: its best matches are kept")
        return "language"
    if spaced_letters(text) < SEMANTIC_MIN_LETTERS:
        trace.add("exclude", detail=f"no evidence: no query word occurs in the content, and with fewer than "
                  f"{SEMANTIC_MIN_LETTERS} letters the query cannot be told from random text")
        return ""
    floor = noise_floor(store, embedder, tenant)
    hits = store.query(VectorQuery(tenant=tenant, vector=vector, filter=scope, limit=1))
    best = hits[0].score if hits else 0.0
    if best > floor:
        trace.add("keep", detail=f"no query word occurs in the content; the best dense match {best:.3f} beats the noise floor {floor:.3f}")
        return "meaning"
    trace.add(
        "exclude",
        detail=f"no evidence: no query word occurs in the content and the best dense match {best:.3f} "
        f"is no better than random text scores here ({floor:.3f})",
    )
    return ""
