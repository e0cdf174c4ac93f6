"""Convert TREC CAsT 2020 and 2022 (conversational assistance track) to the benchmarks' BEIR layout.

CAsT's own collections (MS MARCO, TREC CAR, KILT, Washington Post; tens of millions of
passages) cannot be had here. The passage texts come instead from CAsT-snippets (Łajewska and
Balog, CIKM 2023), which holds, for every judged CAsT 2020 and 2022 turn, the five most relevant
judged passages with their full text and their official relevance grade.

Sources
-------
``--source``: ``daltonj/treccastweb`` (the track's official repository; a bare git dir or a
folder with its paths). Used:

* ``2020/2020_manual_evaluation_topics_v1.0.json`` - 25 topics, 216 user turns: the raw
  utterance (the query here) and the manual rewrite (kept as ``metadata.rewrite``);
* ``2020/2020qrels.txt`` - the official graded judgments (0-4) of 2020;
* ``2022/2022_evaluation_topics_tree_v1.0.json`` - 18 topics as trees of user and system turns
  (branches, mixed-initiative system questions), with the canonical system responses.

``--snippets``: ``iai-group/CAsT-snippets``: ``data/large_scale/all/{2020,2022}/*.csv`` (the
crowdsourcing batches; only the columns turn id, passage id, passage text and relevance score
are read, not the snippet annotations).

What is built
-------------
* Corpus: every distinct passage in those files (2020: MS MARCO v1 passages and TREC CAR
  paragraphs; 2022: MS MARCO v2 document segments and KILT Wikipedia segments), except the
  Washington Post passages of 2022 (TREC's WaPo licence does not allow passing its text on).
  ``metadata.path`` = [collection, passage id] for the 2020 collections (which have no document
  grouping), [collection, document id, passage id] for the 2022 segments.
* Queries: each user turn with at least one passage of grade >= 2 in the corpus;
  ``text`` = the raw utterance as the user said it (CAsT's "What does a smart one do?"), not the
  rewrite. ``metadata.context``: 2022 - the path of the tree from the first turn to this one,
  user ``U`` and system ``S`` turns (system turns are the official canonical responses, including
  the system's clarifying questions); 2020 - the user turns only (CAsT 2020 published its
  canonical responses as passage ids, most of which are not in this pool).
* Qrels (``qrels/test.tsv``): grade >= 2 (CAsT's threshold for relevant) -> score 1. 2020 takes
  every corpus passage the official 2020 qrels grade for the turn; 2022 (whose qrels are not in
  the official repository) takes the grades CAsT-snippets lists for the turn.
  ``qrels/graded.tsv`` keeps the grades 0-4 of the same judged (turn, passage) pairs.

Run: ``python -m benchmarks.convert_trec_cast --source <treccastweb git dir> --snippets
<CAsT-snippets git dir> --out /work/shared/data/trec_cast --keep-raw``. ``--keep-raw`` copies
every input used under ``<out>/raw/treccastweb`` and ``<out>/raw/cast-snippets`` (gzipped when
large); those folders are valid ``--source`` / ``--snippets`` for a rebuild. Deterministic.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import re
from collections import Counter, defaultdict
from pathlib import Path

from .dialogue_sets import SourceTree, reset_output, sha256, validate, write_jsonl, write_qrels

TOPICS_2020 = "2020/2020_manual_evaluation_topics_v1.0.json"
QRELS_2020 = "2020/2020qrels.txt"
TREE_2022 = "2022/2022_evaluation_topics_tree_v1.0.json"
SNIPPETS = "data/large_scale/all"
RELEVANT = 2  # CAsT grades 0-4; >= 2 is relevant
GZIP_ABOVE = 20_000


def doc_path(pid: str) -> list[str]:
    """Folder path + leaf for a CAsT passage id."""
    m = re.fullmatch(r"MARCO_(\d+_\d+)-(\d+)", pid)
    if m:  # MS MARCO v2 document segment (2022)
        return ["msmarco-v2-doc", m.group(1), pid]
    m = re.fullmatch(r"KILT_(\d+)-(\d+)", pid)
    if m:  # KILT Wikipedia page segment (2022)
        return ["kilt", m.group(1), pid]
    if re.fullmatch(r"MARCO_\d+", pid):  # MS MARCO v1 passage (2020)
        return ["msmarco-passage", pid]
    if re.fullmatch(r"CAR_[0-9a-f]+", pid):  # TREC CAR paragraph (2020)
        return ["trec-car", pid]
    raise ValueError(f"unknown passage id {pid!r}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(
        description="Convert TREC CAsT 2020 + 2022 (with CAsT-snippets passages) to the BEIR layout."
    )
    ap.add_argument("--source", required=True, help="daltonj/treccastweb: bare git dir or folder")
    ap.add_argument("--snippets", required=True, help="iai-group/CAsT-snippets: bare git dir or folder")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--keep-raw", action="store_true")
    args = ap.parse_args(argv)
    web, snip = SourceTree(args.source), SourceTree(args.snippets)
    out: Path = args.out
    reset_output(out)

    # --- passages and per-turn grades from the snippet batches
    texts: dict[str, str] = {}
    conflicts = 0
    grades: dict[str, dict[str, int]] = {"2020": defaultdict(dict), "2022": defaultdict(dict)}
    snippet_files: list[str] = []
    dropped_wapo: set[str] = set()
    for year in ("2020", "2022"):
        for path in snip.list(f"{SNIPPETS}/{year}"):
            if not path.endswith(".csv"):
                continue
            snippet_files.append(path)
            for row in csv.DictReader(io.StringIO(snip.read_text(path))):
                tid, pid, text = row["Input.turn_id"], row["Input.passage_id"], row["Input.passage"].strip()
                if pid.startswith("WAPO_"):
                    dropped_wapo.add(pid)
                    continue
                if pid in texts and " ".join(texts[pid].split()) != " ".join(text.split()):
                    conflicts += 1
                texts.setdefault(pid, text)
                g = int(row["Input.relevance_score"])
                assert grades[year][tid].get(pid, g) == g, (tid, pid)
                grades[year][tid][pid] = g

    # 2020: the official qrels, restricted to the passages we have
    official: dict[str, dict[str, int]] = defaultdict(dict)
    for line in web.read_text(QRELS_2020).splitlines():
        if line.strip():
            qid, _, pid, g = line.split()
            official[qid][pid] = int(g)
    disagree = sum(official[t].get(p) != g for t, ps in grades["2020"].items() for p, g in ps.items())
    judged_2020 = {t: {p: g for p, g in official[t].items() if p in texts} for t in official}

    corpus = []
    for pid in sorted(texts):
        path = doc_path(pid)
        meta = {"path": path, "collection": path[0], "passage_id": pid}
        if len(path) == 3:
            meta["source_doc"] = path[1]
        corpus.append({"_id": "/".join(path), "title": "", "text": texts[pid], "metadata": meta})
    id_of = {d["metadata"]["passage_id"]: d["_id"] for d in corpus}

    queries: list[dict] = []
    pairs: list[tuple[str, str, int]] = []
    graded: list[tuple[str, str, int]] = []
    skipped = Counter()

    # --- 2020: linear topics, user turns only
    for topic in json.loads(web.read_text(TOPICS_2020)):
        users = []
        for t in topic["turn"]:
            users.append(t["raw_utterance"])
            qid = f"{topic['number']}_{t['number']}"
            judged = judged_2020.get(qid, {})
            rel = sorted(p for p, g in judged.items() if g >= RELEVANT)
            if not rel:
                skipped["2020 turn with no relevant passage in the pool"] += 1
                continue
            queries.append(
                {
                    "_id": qid,
                    "text": t["raw_utterance"],
                    "metadata": {
                        "context": [{"speaker": "U", "text": u} for u in users],
                        "dialogue_id": f"cast2020-{topic['number']}",
                        "turn": t["number"],
                        "year": 2020,
                        "topic": str(topic["number"]),
                        "rewrite": t.get("manual_rewritten_utterance", ""),
                    },
                }
            )
            pairs += [(qid, id_of[p], 1) for p in rel]
            graded += [(qid, id_of[p], g) for p, g in sorted(judged.items())]

    # --- 2022: trees; the context of a user turn is its path from the root
    for topic in json.loads(web.read_text(TREE_2022)):
        nodes = {t["number"]: t for t in topic["turn"]}
        for t in topic["turn"]:
            if t["participant"] != "User":
                continue
            qid = f"{topic['number']}_{t['number']}"
            judged = grades["2022"].get(qid, {})
            rel = sorted(p for p, g in judged.items() if g >= RELEVANT)
            if not rel:
                skipped["2022 user turn with no relevant passage in the pool"] += 1
                continue
            chain, node = [], t
            while node is not None:
                chain.append(node)
                node = nodes.get(node.get("parent")) if node.get("parent") else None
            chain.reverse()
            ctx = [
                {"speaker": "U", "text": n["utterance"]}
                if n["participant"] == "User"
                else {"speaker": "S", "text": n["response"]}
                for n in chain
            ]
            queries.append(
                {
                    "_id": qid,
                    "text": t["utterance"],
                    "metadata": {
                        "context": ctx,
                        "dialogue_id": f"cast2022-{topic['number']}",
                        "turn": sum(n["participant"] == "User" for n in chain),
                        "turn_number": t["number"],
                        "year": 2022,
                        "topic": str(topic["number"]),
                        "rewrite": t.get("manual_rewritten_utterance", ""),
                    },
                }
            )
            pairs += [(qid, id_of[p], 1) for p in rel]
            graded += [(qid, id_of[p], g) for p, g in sorted(judged.items())]
    assert set(grades["2022"]) <= {q["_id"] for q in queries} | {
        f"{tp['number']}_{t['number']}" for tp in json.loads(web.read_text(TREE_2022)) for t in tp["turn"]
    }

    write_jsonl(out / "corpus.jsonl", corpus)
    write_jsonl(out / "queries.jsonl", queries)
    write_qrels(out / "qrels" / "test.tsv", sorted(set(pairs)))
    write_qrels(out / "qrels" / "graded.tsv", sorted(set(graded)))
    if args.keep_raw:
        for p in ["LICENSE", "README.md", TOPICS_2020, QRELS_2020, TREE_2022]:
            web.keep(p, out / "raw" / "treccastweb", gz=len(web.read_bytes(p)) > GZIP_ABOVE)
        for p in ["README.md", "data/README.md", *snippet_files]:
            snip.keep(p, out / "raw" / "cast-snippets", gz=len(snip.read_bytes(p)) > GZIP_ABOVE)

    stats = validate(out)
    print(
        json.dumps(
            {
                "treccastweb_commit": web.commit,
                "cast_snippets_commit": snip.commit,
                "snippet batch files": len(snippet_files),
                "passage text conflicts": conflicts,
                "snippet grades that differ from the official 2020 qrels": disagree,
                "WaPo passages dropped": len(dropped_wapo),
                "skipped": skipped,
                "judged turns by year": Counter(q["metadata"]["year"] for q in queries),
                "docs by collection": Counter(d["metadata"]["collection"] for d in corpus),
                **stats,
                "sha256": {
                    p: sha256(out / p) for p in ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv", "qrels/graded.tsv")
                },
            },
            indent=1,
            default=str,
        )
    )


if __name__ == "__main__":
    main()
