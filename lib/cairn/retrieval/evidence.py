"""No evidence, no results: a query made of words the tenant's content never uses must beat noise.

A score threshold on cosine similarity cannot tell noise from an answer on every collection: an
embedding model gives random letters a similarity of 0.2–0.37 to the nearest document of some
collections (all-MiniLM-L6-v2 on abstracts of biomedical papers), which is where the relevant
documents of hard questions score on others. So the threshold alone lets gibberish through.

The gate asks for evidence of one of two kinds before a typed query keeps its candidates:

* **lexical**: at least one of the query's words (stemmed, stop words aside) occurs in the
  content the query may search (its roots and filter: another user's memories never count) — one
  keyword search with limit 1, on backends that have keyword search;
* **semantic**: else, its best dense match must score above the tenant's **noise floor**, the
  score random letters are expected to stay under against this tenant's vectors: the larger of
  the best score of ``FLOOR_PROBES`` fixed random strings and their mean plus ``FLOOR_SIGMAS``
  standard deviations (the tail is long: on the shared collections 0–0.2 % of 1,000 fresh random
  strings still beat it, against 0.1–3.6 % for the best of 32 probes alone and 0.1–1.2 % with four
  standard deviations; benchmarks/README.md). The floor is
  learned from the tenant's own content (one ``query_many``), cached per store and tenant for
  ``FLOOR_TTL_S``; a store that keeps learned facts with the tenant (the embedded store) keeps it
  for every process while the tenant's record count stays within ``FLOOR_DRIFT`` of the count
  it was learned at, so a fresh process (``cairn find``) does not embed the probes again.

A misspelt query ("refnds") keeps its dense answers when they are clearly closer than noise;
random letters never do. A backend without keyword search (Pinecone dense) skips the gate, and
the trace says so. The check costs one keyword search per typed query; the floor, a few
milliseconds once per tenant and TTL.
"""

from __future__ import annotations

import random
import string
import threading
import time
from functools import lru_cache

import numpy as np

from ..embeddings import Embedder
from ..models import ThinkingTrace
from ..vectorstores import SearchMode, VectorQuery, VectorStore
from .scope import scope_filter

FLOOR_PROBES = 64
FLOOR_SIGMAS = 5.0
FLOOR_TTL_S = 300.0
_SEED = 20261201

_floors: dict[tuple[int, str], tuple[float, float]] = {}  # (store, tenant) -> (computed at, floor)
_lock = threading.Lock()


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
    with _lock:
        cached = _floors.get(key)
    if cached is not None and now - cached[0] < FLOOR_TTL_S:
        return cached[1]
    floor = _kept_floor(store, embedder, tenant)
    if floor is None:
        requests = [VectorQuery(tenant=tenant, vector=v.tolist(), limit=1) for v in _probe_vectors(embedder)]
        best = np.asarray([hits[0].score for hits in store.query_many(requests) if hits], dtype=np.float64)
        floor = float(max(best.max(), best.mean() + FLOOR_SIGMAS * best.std())) if best.size else 0.0
        _keep_floor(store, embedder, tenant, floor)
    with _lock:
        _floors[key] = (now, floor)
    return floor


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
    count = store.count(tenant)
    return float(fact["floor"]) if abs(count - int(fact.get("records", -1))) <= FLOOR_DRIFT * max(count, 1) else None


def _keep_floor(store: VectorStore, embedder: Embedder, tenant: str, floor: float) -> None:
    learn = getattr(store, "learn", None)
    if callable(learn):
        learn(tenant, _floor_key(embedder), {"floor": floor, "records": store.count(tenant)})


def has_evidence(
    store: VectorStore,
    embedder: Embedder,
    tenant: str,
    text: str,
    vector: list[float],
    roots: list[str],
    user_filter: dict | None,
    trace: ThinkingTrace,
) -> bool:
    """True when the query may keep its candidates (see the module doc); the trace says why not."""
    if not store.capabilities().keyword:
        trace.add("fallback", detail=f"the {store.backend} backend has no keyword search: no evidence gate")
        return True
    scope = scope_filter(roots, user_filter)  # only what this query may search: no word of another user's memories counts
    if store.query(VectorQuery(tenant=tenant, text=text, mode=SearchMode.KEYWORD, filter=scope, limit=1)):
        return True
    floor = noise_floor(store, embedder, tenant)
    hits = store.query(VectorQuery(tenant=tenant, vector=vector, filter=scope, limit=1))
    best = hits[0].score if hits else 0.0
    if best > floor:
        trace.add("keep", detail=f"no query word occurs in the content; the best dense match {best:.3f} beats the noise floor {floor:.3f}")
        return True
    trace.add(
        "exclude",
        detail=f"no evidence: no query word occurs in the content and the best dense match {best:.3f} "
        f"is no better than random text scores here ({floor:.3f})",
    )
    return False
