"""Loading BEIR-layout data sets (corpus.jsonl, queries.jsonl, qrels/test.tsv)."""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path


@dataclass
class BeirSet:
    name: str
    corpus: list[dict]
    queries: dict[str, dict]  # only the queries that have test qrels
    qrels: dict[str, dict[str, int]]


def load(data: Path, name: str, split: str = "test") -> BeirSet:
    root = data / name
    if not root.is_dir():
        raise SystemExit(f"data set {name!r} not found under {data}; pass --data PATH (the folder holding {name}/)")
    qrels: dict[str, dict[str, int]] = {}
    with open(root / "qrels" / f"{split}.tsv", encoding="utf-8") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            qrels.setdefault(row["query-id"], {})[row["corpus-id"]] = int(row["score"])
    with open(root / "corpus.jsonl", encoding="utf-8") as fh:
        corpus = [json.loads(line) for line in fh if line.strip()]
    queries = {}
    with open(root / "queries.jsonl", encoding="utf-8") as fh:
        for line in fh:
            q = json.loads(line)
            if q["_id"] in qrels:
                queries[q["_id"]] = q
    return BeirSet(name, corpus, queries, qrels)
