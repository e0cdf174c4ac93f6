"""Shared helpers for the converters of conversational retrieval sets (``convert_*.py``).

Standard library only. The converters read their inputs through :class:`SourceTree`, which
takes either a bare git directory (as the repository snapshots come: read with ``git show``)
or a plain folder that mirrors the repository's paths (for instance the ``raw/`` folder a
converter leaves next to its output, where a file may be stored gzipped as ``<path>.gz``).

The output layout is the BEIR one the benchmarks read (see ``benchmarks/beir.py``):
``corpus.jsonl``, ``queries.jsonl`` and ``qrels/test.tsv``. A corpus document's ``_id`` is
``"/".join(metadata["path"])``, because the benchmarks map a hit's URI back to the corpus id
that way (``benchmarks/collections.py``).

``python -m benchmarks.dialogue_sets --data /work/shared/data/<set>`` prints the sanity
check: counts, three sample judged turns, and how often the relevant document shares a
content word with the current turn alone versus with the previous user turn plus the turn.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import random
import re
import shutil
import subprocess
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any


class SourceTree:
    """Files of one repository, from a bare git directory (HEAD or ``rev``) or a plain folder."""

    def __init__(self, root: str | Path, rev: str = "HEAD") -> None:
        self.root = Path(root)
        self.is_git = (self.root / "HEAD").is_file() and (self.root / "objects").is_dir()
        self.rev = rev
        self.commit = self._git("rev-parse", rev).strip() if self.is_git else None

    def _git(self, *args: str) -> str:
        out = subprocess.run(["git", f"--git-dir={self.root}", *args], check=True, capture_output=True)
        return out.stdout.decode("utf-8")

    def read_bytes(self, path: str) -> bytes:
        if self.is_git:
            out = subprocess.run(["git", f"--git-dir={self.root}", "show", f"{self.rev}:{path}"], capture_output=True)
            if out.returncode != 0:
                raise FileNotFoundError(f"{path} not in {self.root} at {self.rev}")
            return out.stdout
        plain = self.root / path
        if plain.is_file():
            return plain.read_bytes()
        packed = self.root / (path + ".gz")
        if packed.is_file():
            return gzip.decompress(packed.read_bytes())
        raise FileNotFoundError(f"{path} not under {self.root}")

    def read_text(self, path: str) -> str:
        return self.read_bytes(path).decode("utf-8")

    def exists(self, path: str) -> bool:
        try:
            self.read_bytes(path)
            return True
        except FileNotFoundError:
            return False

    def list(self, prefix: str) -> list[str]:
        """Files under the folder ``prefix`` (repository-relative, sorted; ``.gz`` copies listed
        under their original name)."""
        prefix = prefix.rstrip("/") + "/"
        if self.is_git:
            names = self._git("ls-tree", "-r", "--name-only", self.rev, prefix).splitlines()
        else:
            base = self.root / prefix
            names = [str(p.relative_to(self.root)) for p in base.rglob("*") if p.is_file()] if base.is_dir() else []
            names = [n[:-3] if n.endswith(".gz") else n for n in names]
        return sorted(set(names))

    def blob(self, path: str) -> str | None:
        """The git blob id of ``path`` (None for a plain folder)."""
        if not self.is_git:
            return None
        return self._git("rev-parse", f"{self.rev}:{path}").strip()

    def keep(self, path: str, dest_root: Path, gz: bool = False) -> None:
        """Copy ``path`` under ``dest_root`` (same relative path; gzipped as ``.gz`` if asked)."""
        data = self.read_bytes(path)
        dest = dest_root / (path + (".gz" if gz else ""))
        dest.parent.mkdir(parents=True, exist_ok=True)
        if gz:
            dest.write_bytes(gzip.compress(data, compresslevel=9, mtime=0))
        else:
            dest.write_bytes(data)


def write_jsonl(path: Path, rows: Iterable[dict]) -> int:
    n = 0
    with open(path, "w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False, sort_keys=False) + "\n")
            n += 1
    return n


def write_qrels(path: Path, pairs: Iterable[tuple[str, str, int]]) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("query-id\tcorpus-id\tscore\n")
        for q, d, s in pairs:
            fh.write(f"{q}\t{d}\t{s}\n")
            n += 1
    return n


def reset_output(out: Path) -> None:
    """Remove what a previous run wrote (corpus, queries, qrels). ``raw/`` is left alone: it may be
    the very source of this run; ``--keep-raw`` rewrites its files in place."""
    out.mkdir(parents=True, exist_ok=True)
    for name in ("corpus.jsonl", "queries.jsonl"):
        (out / name).unlink(missing_ok=True)
    shutil.rmtree(out / "qrels", ignore_errors=True)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def read_lines(path: Path) -> list[str]:
    with open(path, encoding="utf-8") as fh:
        return [line.rstrip("\n") for line in fh if line.strip()]


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in read_lines(path)]


def validate(out: Path) -> dict[str, Any]:
    """Check the written set: ids unique, ``_id`` == path joined, every qrel points at a doc and
    a query, contexts end with the current turn. Returns counts; raises on a broken set."""
    docs = read_jsonl(out / "corpus.jsonl")
    queries = read_jsonl(out / "queries.jsonl")
    ids = [d["_id"] for d in docs]
    assert len(ids) == len(set(ids)), "duplicate corpus ids"
    for d in docs:
        path = d["metadata"]["path"]
        assert all(isinstance(p, str) and p and "/" not in p for p in path), d["_id"]
        assert "/".join(path) == d["_id"], d["_id"]
        assert d["text"].strip(), d["_id"]
    qids = [q["_id"] for q in queries]
    assert len(qids) == len(set(qids)), "duplicate query ids"
    for q in queries:
        ctx = q["metadata"]["context"]
        assert ctx and ctx[-1]["speaker"] == "U" and ctx[-1]["text"] == q["text"], q["_id"]
        assert all(t["speaker"] in ("U", "S") for t in ctx), q["_id"]
    rows = [line.split("\t") for line in read_lines(out / "qrels" / "test.tsv")]
    assert rows[0] == ["query-id", "corpus-id", "score"]
    pairs = [tuple(r) for r in rows[1:]]
    assert len(pairs) == len(set(pairs)), "duplicate qrels"
    docset, qset = set(ids), set(qids)
    assert all(p[1] in docset for p in pairs), "qrels doc missing"
    assert all(p[0] in qset for p in pairs), "qrels query missing"
    judged = {p[0] for p in pairs}
    assert judged == qset, "a query without qrels, or qrels without a query"
    folders = {tuple(d["metadata"]["path"][:-1]) for d in docs}
    top = Counter(d["metadata"]["path"][0] for d in docs)
    lengths = sorted(len(d["text"]) for d in docs)
    return {
        "docs": len(docs),
        "folders (distinct parent paths)": len(folders),
        "top-level folders": dict(top),
        "doc chars min/median/p90/max": (
            lengths[0],
            lengths[len(lengths) // 2],
            lengths[int(len(lengths) * 0.9)],
            lengths[-1],
        ),
        "dialogues": len({q["metadata"]["dialogue_id"] for q in queries}),
        "judged turns": len(queries),
        "qrels pairs": len(pairs),
        "relevant docs per turn (min/median/max)": _spread([sum(1 for p in pairs if p[0] == q) for q in qids]),
    }


def _spread(xs: list[int]) -> tuple[int, int, int]:
    xs = sorted(xs)
    return (xs[0], xs[len(xs) // 2], xs[-1]) if xs else (0, 0, 0)


_STOP_TEXT = """a about above after again against all am an and any are as at be because been before being below
    between both but by can cannot could did do does doing down during each few for from further had has have
    having he her here hers herself him himself his how i if in into is it its itself let me more most my
    myself no nor not of off on once only or other ought our ours ourselves out over own same she should so
    some such than that the their theirs them themselves then there these they this those through to too
    under until up very was we were what when where which while who whom why with would you your yours
    yourself yourselves also just like know tell please thanks thank yes yeah okay well really get got one
    ones will may might much many say said want need way thing things make made use used does don doesn
    isn aren wasn weren didn won wouldn shouldn couldn can't don't it's i'm what's that's there's"""
STOPWORDS = frozenset(_STOP_TEXT.split())


def content_words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if len(w) >= 3 and w not in STOPWORDS}


def check(out: Path, samples: int = 3, seed: int = 7) -> None:
    """Print counts, sample judged turns, and the content-word overlap check."""
    print(f"== {out}")
    for k, v in validate(out).items():
        print(f"  {k}: {v}")
    docs = {d["_id"]: d for d in read_jsonl(out / "corpus.jsonl")}
    queries = read_jsonl(out / "queries.jsonl")
    qrels: dict[str, list[str]] = {}
    for line in read_lines(out / "qrels" / "test.tsv")[1:]:
        q, d, _ = line.split("\t")
        qrels.setdefault(q, []).append(d)

    # document frequency of content words, to tell rare (topical) words from common ones
    df: Counter[str] = Counter()
    words_of = {}
    for i, d in docs.items():
        w = content_words(d.get("title", "") + " " + d["text"])
        words_of[i] = w
        df.update(w)
    rare_cut = max(2, int(0.01 * len(docs)))  # a word in at most 1% of the documents

    def shares(words: set[str], rel: list[str], rare: bool) -> bool:
        ws = {w for w in words if df[w] <= rare_cut} if rare else words
        return any(ws & words_of[r] for r in rel)

    n = 0
    alone = alone_rare = with_prev = with_prev_rare = first_turns = 0
    for q in queries:
        ctx = q["metadata"]["context"]
        users = [t["text"] for t in ctx if t["speaker"] == "U"]
        prev = users[-2] if len(users) >= 2 else ""
        first_turns += len(users) == 1
        cur_w, prev_w = content_words(q["text"]), content_words(prev)
        rel = qrels[q["_id"]]
        n += 1
        alone += shares(cur_w, rel, False)
        with_prev += shares(cur_w | prev_w, rel, False)
        alone_rare += shares(cur_w, rel, True)
        with_prev_rare += shares(cur_w | prev_w, rel, True)

    def pct(x: int) -> str:
        return f"{100 * x / n:.1f}%"

    print(f"  judged turns that are the dialogue's first user turn: {first_turns} ({pct(first_turns)})")
    print("  a relevant doc shares >= 1 content word with ...")
    print(f"    the current turn alone:          any word {pct(alone)}, rare word (df <= {rare_cut}) {pct(alone_rare)}")
    print(f"    previous user turn + the turn:   any word {pct(with_prev)}, rare word {pct(with_prev_rare)}")

    rng = random.Random(seed)
    later = [q for q in queries if sum(t["speaker"] == "U" for t in q["metadata"]["context"]) >= 3]
    for q in rng.sample(later, min(samples, len(later))):
        print(f"\n  --- sample {q['_id']} (dialogue {q['metadata']['dialogue_id']}, turn {q['metadata']['turn']})")
        for t in q["metadata"]["context"][-5:]:
            print(f"    {t['speaker']}: {_cut(t['text'], 220)}")
        for r in qrels[q["_id"]][:2]:
            d = docs[r]
            print(f"    relevant {r}  [{d.get('title', '')}]")
            print(f"      {_cut(d['text'], 400)}")


def _cut(s: str, n: int) -> str:
    s = " ".join(s.split())
    return s if len(s) <= n else s[: n - 3] + "..."


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, action="append", help="a converted set's folder (repeatable)")
    args = ap.parse_args(argv)
    for d in args.data:
        check(Path(d))
        print()


if __name__ == "__main__":
    main()
