"""Folder names: what a tenant's own tree calls its folders, and which of them a text names.

A conversation is usually about something the tree has a folder for (a customer, a product,
a place); it rarely writes that name the way the folder does: lower case, misspelt, partial
("the granary"), spoken ("b and q warehouse", "data bricks"). :class:`NameIndex` holds every
name the tree gives its folders (their titles and the string metadata all their documents
share) and finds them in a text:

- text and names are normalised the same way (case, accents, ``&`` → ``and``, apostrophes);
  generic English function words (:data:`STOP_WORDS`) carry no weight;
- each word of a name is looked up exactly, then fuzzily (``rapidfuzz`` edit ratio, words of
  4+ characters), and across word boundaries ("ware house" ~ "warehouse");
- a word weighs by how rare it is among the tree's names (idf), so "granary" says more than
  "store"; ``coverage`` is the weighted share of the name the text contains (words found near
  each other), raised half-way to 1 when its rarest found word leads to one subtree only
  ("granary" names one place even said alone); ``distinctiveness`` is how rare that word is (against
  the rarest word of a typical name of the tree);
  ``confidence`` is their product, in 0..1; a one-word name said whole is weakened the same way
  by the share of the content using its word that lies outside its folders (an ordinary word
  of the tenant, "support" or "data", is not a mention by itself);
- a name stands for its outermost folders (a "Reviews of X" folder inside "X" is not a second X).

No word list of any domain: the weights come from the tenant's names. :class:`FolderNames`
builds the index from a vector store lazily and rebuilds it after the store is written to
(or after ``ttl_s``, for writes made by other processes).
"""

from __future__ import annotations

import math
import re
import threading
import time
import unicodedata
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

from cairn.core import uri as uris
from cairn.core.models import Level
from cairn.core.uri import is_under
from cairn.engine.retrieval.kinds import folder_kinds
from cairn.ports.vectorstores import SearchMode, VectorQuery, VectorStore

# Generic English words that never make a name on their own (function words, conversational
# fillers, numbers, days, months). A tenant adds its own domain words with ``stop_words=``.
STOP_WORDS = frozenset(
    str.split(
        """
        i i'm i'd i'll i've im ok okay yes yeah no not sure great good fine perfect thanks thank you
        hello hi hey please sorry well so also and but or the a an this that these those there here
        it its they we he she what which who whom whose when where why how is are was were be do
        does did can could would should will shall may might must have has had let lets let's my
        your our their his her any some all none one two three four five six seven eight nine ten
        first second last next unfortunately however alright absolutely certainly of in on at to
        for from by with about as if then than just number monday tuesday wednesday thursday
        friday saturday sunday today tomorrow tonight am pm january february march april may june
        july august september october november december email phone
        """
    )
)
DEFAULT_MIN_CONFIDENCE = 0.55
MAX_FOLDERS = 3  # a name shared by more disjoint folders than this says too little to scope
MAX_NAME_WORDS = 12  # longer strings are sentences, not names
MAX_READ_TEXTS = 1024  # texts whose matches an index keeps (all dropped at once past it)
FUZZY_CUTOFF = 80  # rapidfuzz ratio (0..100) for two words to count as the same word
FUZZY_MIN_CHARS = 4
STOP_WEIGHT = 0.25
MIN_DISTINCT = 0.4  # matches less distinctive than this are not reported
SPREAD_SAMPLE = 1000
_WORD = re.compile(r"[a-z0-9]+")
_NON_LATIN_WORD = re.compile(r"[^\W\d_A-Za-z\u00c0-\u024f]{2,}")  # letters of a script ASCII folding drops


def normalise(text: str) -> list[str]:
    """Lower-case ASCII words: accents dropped, ``&`` read as ``and``, apostrophes removed; then the
    words of any other script (issue 25: Chinese and Japanese cut by :mod:`cairn.core.text`'s segmenter,
    Cyrillic, Greek, Hangul... as written), which the ASCII folding would drop."""
    folded = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode().lower()
    folded = folded.replace("&", " and ").replace("'", "").replace("’", "")
    words = _WORD.findall(folded)
    return words + _other_script_words(text) if not text.isascii() else words


def _other_script_words(text: str) -> list[str]:
    """Words of ``text`` outside the Latin script (issue 25's hook; issue 19 owns the matching)."""
    from cairn.core.text.detect import CJK_RUN, cjk_language
    from cairn.core.text.segment import segment

    out: list[str] = []
    code = cjk_language(text) or "zh"
    for run in CJK_RUN.findall(text):
        out.extend(segment(run, code))
    rest = CJK_RUN.sub(" ", text)
    out.extend(w.lower() for w in _NON_LATIN_WORD.findall(rest))
    return out


@dataclass(frozen=True)
class NameMatch:
    name: str  # as the tree writes it
    folders: tuple[str, ...]  # the outermost folders that carry it
    confidence: float
    coverage: float
    distinctiveness: float
    said: str  # the words of the text that matched
    position: int  # word offset of the match in the text (later = more recent)
    seq: int = 0  # the message it came from (0: the query)
    # the share of the documents using the name's rarest said word that lie outside its folders
    # (0: none, or not measured): above 0, the word is one the tenant's content uses ordinarily
    spread: float = 0.0


@dataclass
class _Entry:
    name: str
    words: tuple[str, ...]
    folders: set[str]


class NameIndex:
    """Every folder name of a tree, matched against texts (see the module doc)."""

    def __init__(
        self,
        entries: Iterable[tuple[str, str]],
        *,
        stop_words: Iterable[str] = (),
        spread: Callable[[str, tuple[str, ...]], float] | None = None,
    ) -> None:
        """``entries``: (name, folder URI) pairs; a name may label several folders. ``spread(word,
        folders)``, when given, says which share (0..1) of the tenant's content using ``word`` lies
        outside ``folders``: a word the whole tree uses ("north", "new") does not name one folder
        when the rest of the name is not said."""
        self.stop = STOP_WORDS | {w.lower() for w in stop_words}
        self.spread = spread
        self._spread_cache: dict[tuple[str, tuple[str, ...]], float] = {}
        by_words: dict[tuple[str, ...], _Entry] = {}
        for name, uri in entries:
            words = self._content(name)
            if len(words) > MAX_NAME_WORDS or all(w.isdigit() or w in self.stop for w in words):
                continue
            entry = by_words.setdefault(words, _Entry(name.strip(), words, set()))
            entry.folders.add(uri)
        self.entries = list(by_words.values())
        # one spelling of a compound: "warehouse" is read as "ware house" when another name says so
        pairs = {
            a + b: (a, b)
            for e in self.entries
            for a, b in zip(e.words, e.words[1:])
            if min(len(a), len(b)) >= 3 and not {a, b} & self.stop
        }
        for e in self.entries:
            e.words = tuple(part for w in e.words for part in pairs.get(w, (w,)))
        for e in self.entries:  # a name stands for its outermost folders
            e.folders = {u for u in e.folders if not any(o != u and is_under(u, o) for o in e.folders)}
        df: dict[str, int] = defaultdict(int)
        self.inverted: dict[str, list[int]] = defaultdict(list)
        for n, e in enumerate(self.entries):
            for w in set(e.words):
                df[w] += 1
                self.inverted[w].append(n)
        # how many disjoint subtrees a word leads to: a word found in the names of one subtree only
        # ("granary") identifies it even when the rest of the name is not said
        self.subtrees: dict[str, frozenset[str]] = {}
        for w, ns in self.inverted.items():
            folders = {u for n in ns for u in self.entries[n].folders}
            self.subtrees[w] = frozenset(u for u in folders if not any(o != u and is_under(u, o) for o in folders))
        total = max(len(self.entries), 1)
        self.idf = {w: math.log(1.0 + total / c) for w, c in df.items()}
        # a word as rare as the rarest word of a typical name is fully distinctive
        rarest = sorted(max(self.idf[w] for w in e.words if w not in self.stop) for e in self.entries)
        self.idf_ref = rarest[len(rarest) // 2] if rarest else 1.0
        # name words, and adjacent pairs written as one ("ware house" ~ "warehouse")
        self.vocab: dict[str, tuple[str, ...]] = {w: (w,) for w in df}
        for e in self.entries:
            for a, b in zip(e.words, e.words[1:]):
                if min(len(a), len(b)) >= 3 and not {a, b} & self.stop:
                    self.vocab.setdefault(a + b, (a, b))
        self._keys = list(self.vocab)
        self._fuzzy: dict[str, list[tuple[str, float]]] = {}
        # the matches of each text read: a conversation's recent messages are read again on every turn
        self._matched: dict[tuple[str, int], tuple[NameMatch, ...]] = {}

    def __len__(self) -> int:
        return len(self.entries)

    def _content(self, text: str) -> tuple[str, ...]:
        return tuple(normalise(text))

    def _weight(self, word: str) -> float:
        """A word's say in a name: its idf; a generic word (``the``, ``two``) a quarter of it."""
        return self.idf[word] * (STOP_WEIGHT if word in self.stop else 1.0)

    def _spread_of(self, word: str, folders: tuple[str, ...]) -> float:
        if self.spread is None:
            return 0.0
        key = (word, folders)
        if key not in self._spread_cache:
            self._spread_cache[key] = self.spread(word, folders)
        return self._spread_cache[key]

    def _lookup(self, word: str) -> list[tuple[str, float]]:
        """Vocabulary keys equal or close to ``word``, with their similarity in 0..1."""
        if word in self.vocab:
            return [(word, 1.0)]
        if len(word) < FUZZY_MIN_CHARS or word in self.stop:
            return []
        hit = self._fuzzy.get(word)
        if hit is None:
            from rapidfuzz import fuzz, process

            found = process.extract(word, self._keys, scorer=fuzz.ratio, score_cutoff=FUZZY_CUTOFF, limit=5)
            # a near miss counts for less than the word itself: 0.5 at the cutoff, 1 when equal
            hit = [(key, 0.5 + 0.5 * (score - FUZZY_CUTOFF) / (100 - FUZZY_CUTOFF)) for key, score, _ in found if len(key) >= FUZZY_MIN_CHARS]
            if len(self._fuzzy) > 50_000:
                self._fuzzy.clear()
            self._fuzzy[word] = hit
        return hit

    def match(self, text: str, seq: int = 0) -> list[NameMatch]:
        """The names ``text`` mentions, most confident first (ties: the later mention first)."""
        found = self._matched.get((text, seq))
        if found is None:
            found = tuple(self._match(text, seq))
            if len(self._matched) >= MAX_READ_TEXTS:
                self._matched.clear()
            self._matched[(text, seq)] = found
        return list(found)

    def _match(self, text: str, seq: int) -> list[NameMatch]:
        words = normalise(text)
        hits: dict[str, list[tuple[int, float]]] = defaultdict(list)  # name word -> (position, similarity)
        for i, w in enumerate(words):
            probes = [w]
            if i + 1 < len(words) and min(len(w), len(words[i + 1])) >= 3 and not {w, words[i + 1]} & self.stop:
                probes.append(w + words[i + 1])  # "data bricks" ~ "databricks"
            for probe in probes:
                for key, sim in self._lookup(probe):
                    for part in self.vocab[key]:
                        hits[part].append((i, sim))
        # a name is reached through a word of its own that is rare enough to name something
        # (confidence <= distinctiveness, so a name found only through common words is never reported)
        floor = MIN_DISTINCT * self.idf_ref
        candidates = {n for w in hits if w not in self.stop and self.idf[w] >= floor for n in self.inverted[w]}
        out = [m for n in candidates if (m := self._score(self.entries[n], hits, words, seq)) is not None]
        return sorted(out, key=lambda m: (-m.confidence, -m.position, m.name))

    def _score(self, e: _Entry, hits: dict[str, list[tuple[int, float]]], words: list[str], seq: int) -> NameMatch | None:
        if len(e.folders) > MAX_FOLDERS:
            return None
        found = [w for w in e.words if w in hits and w not in self.stop]
        if not found:
            return None
        anchor_word = max(found, key=lambda w: self.idf[w])
        span = len(e.words) + 2  # the words of one mention sit close together
        anchor = max(hits[anchor_word], key=lambda ps: (ps[1], ps[0]))[0]
        got: dict[str, tuple[int, float]] = {}
        for w in set(e.words):
            near = [ps for ps in hits.get(w, ()) if abs(ps[0] - anchor) <= span]
            if near:
                got[w] = max(near, key=lambda ps: (ps[1], ps[0]))
        weight = sum(self._weight(w) for w in set(e.words))
        said_share = sum(self._weight(w) * sim for w, (_, sim) in got.items()) / weight
        coverage = said_share
        if anchor_word in got and got[anchor_word][1] == 1.0 and self.subtrees[anchor_word] == frozenset(e.folders):
            coverage = (1.0 + coverage) / 2.0  # the word, said as written, names this folder and no other
        folders = tuple(sorted(e.folders))
        spread = 0.0
        if said_share < 1.0:  # part of the name said: is its word the tree's common currency?
            spread = self._spread_of(anchor_word, folders)
            coverage *= 1.0 - spread * math.sqrt(1.0 - said_share)
        elif sum(1 for w in set(e.words) if w not in self.stop) == 1:
            # a one-word name said whole ("support", "data") is a mention only when the tenant's
            # content does not use the word everywhere: an ordinary word names no folder by itself
            spread = self._spread_of(anchor_word, folders)
            coverage *= 1.0 - spread
        distinct = min(1.0, max(self.idf[w] for w in got if w not in self.stop) / self.idf_ref)
        positions = [p for p, _ in got.values()]
        said = " ".join(words[min(positions) : max(positions) + 1])
        return NameMatch(
            name=e.name, folders=tuple(sorted(e.folders)), confidence=round(coverage * distinct, 4),
            coverage=round(coverage, 4), distinctiveness=round(distinct, 4), said=said, position=max(positions), seq=seq,
            spread=round(spread, 4),
        )


def _write_count(store: VectorStore) -> int:
    calls = store.metrics.calls
    return calls["upsert"] + calls["delete"] + calls["delete_by_filter"]


class FolderNames:
    """The :class:`NameIndex` of one tenant's folders under some roots, read from the store.

    Built on first use with one batched query per call (every folder record, level L0, depth by
    depth below the roots, up to ``per_depth`` folders a depth), kept, and rebuilt when this
    process wrote to the store since, or after ``ttl_s`` seconds (writes by other processes).
    """

    def __init__(
        self,
        store: VectorStore,
        tenant: str,
        *,
        ttl_s: float = 300.0,
        max_depth: int = 8,
        per_depth: int = 1000,
        stop_words: Iterable[str] = (),
        metadata_names: bool = True,
    ) -> None:
        self.store, self.tenant = store, tenant
        self.ttl_s, self.max_depth, self.per_depth = ttl_s, max_depth, per_depth
        self.stop_words = tuple(stop_words)
        self.metadata_names = metadata_names
        self._cache: dict[tuple[str, ...], tuple[NameIndex, float, int]] = {}
        self._kinds: dict[str, tuple[bool, float, int]] = {}
        self._lock = threading.Lock()
        self.builds = 0

    def index(self, roots: Sequence[str]) -> NameIndex:
        key = tuple(sorted(roots))
        now = time.monotonic()
        writes = _write_count(self.store)
        with self._lock:
            cached = self._cache.get(key)
            if self._fresh(cached, now, writes):
                return cached[0]
        spread = self._spread(list(key)) if self.store.capabilities().keyword else None
        index = NameIndex(self._names(list(key)), stop_words=self.stop_words, spread=spread)
        with self._lock:
            self._cache[key] = (index, now, writes)
            self.builds += 1
        return index

    def topics(self, folders: Sequence[str]) -> set[str]:
        """Which of ``folders`` are topic folders (:mod:`cairn.engine.retrieval.kinds`: their siblings hold
        fewer than half of their children's names), kept as long as the names index is (one batched
        query and one fetch for the folders not known yet). A folder with no sibling or no child
        is not a topic folder."""
        now = time.monotonic()
        writes = _write_count(self.store)
        with self._lock:
            known = {f: k[0] for f in folders if self._fresh(k := self._kinds.get(f), now, writes)}
        missing = [f for f in dict.fromkeys(folders) if f not in known]
        if missing:
            found = folder_kinds(self.store, self.tenant, self._probe(), missing)
            with self._lock:
                for f in missing:
                    known[f] = found.get(f, True)
                    self._kinds[f] = (known[f], now, writes)
        return {f for f in folders if not known[f]}

    def _fresh(self, entry: tuple[Any, float, int] | None, now: float, writes: int) -> TypeGuard[tuple[Any, float, int]]:
        """Whether a kept ``(value, made at, store writes then)`` still holds: this process has not
        written to the store since, and it is younger than ``ttl_s`` (writes by other processes)."""
        return entry is not None and entry[2] == writes and now - entry[1] < self.ttl_s

    def _probe(self) -> list[float]:
        return [1.0 / math.sqrt(self.store.dimension)] * self.store.dimension  # any vector: a filter picks the records

    def _names(self, roots: list[str]) -> list[tuple[str, str]]:
        if not roots:
            return []
        top = min(uris.depth(r) for r in roots) + 1  # the roots' children first
        probe = self._probe()  # every folder is wanted
        requests = [
            VectorQuery(
                tenant=self.tenant, vector=probe, limit=self.per_depth,
                filter={"level": int(Level.ABSTRACT), "depth": d, "ancestors": {"$in": roots}},
            )
            for d in range(top, top + self.max_depth)
        ]
        out: list[tuple[str, str]] = []
        for batch in (requests[i : i + 16] for i in range(0, len(requests), 16)):
            for hits in self.store.query_many(batch):
                for h in hits:
                    out.extend((name, h.record.uri) for name in _folder_names(h.record, self.metadata_names))
        return out


    def _spread(self, roots: list[str]) -> Callable[[str, tuple[str, ...]], float]:
        """The share of the documents that use a word (one keyword search, its best
        ``SPREAD_SAMPLE``) that lie outside the given folders."""

        def spread(word: str, folders: tuple[str, ...]) -> float:
            flt = {"level": int(Level.DETAIL), "ancestors": {"$in": roots}}
            req = VectorQuery(tenant=self.tenant, text=word, mode=SearchMode.KEYWORD, filter=flt, limit=SPREAD_SAMPLE)
            hits = self.store.query(req)
            if not hits:
                return 0.0
            return sum(1 for h in hits if not any(is_under(h.record.uri, f) for f in folders)) / len(hits)

        return spread


def _folder_names(record: Any, metadata: bool) -> list[str]:
    names = [record.title] if record.title else []
    if metadata:
        names += [v for v in record.metadata.values() if isinstance(v, str) and 0 < len(v) <= 120]
    return names
