"""Convert IBM's MTRAG benchmark (multi-turn RAG conversations) to the benchmarks' BEIR layout.

Sources
-------
``--source``: the GitHub repository ``IBM/mt-rag-benchmark`` (a bare git dir or a folder with
its paths). Used from it:

* ``mtrag-human/retrieval_tasks/<domain>/qrels/dev.tsv`` - the official relevance judgments of
  the 110 human conversations (answerable and partially answerable turns only);
* ``mtrag-human/retrieval_tasks/<domain>/<domain>_questions.jsonl`` - all user turns up to each
  judged turn (used to match the conversations below to their official ids, and checked);
* ``mtrag-human/retrieval_tasks/<domain>/<domain>_rewrite.jsonl`` - the official stand-alone
  rewrite of each judged turn (kept as ``metadata.rewrite``; not used as the query);
* ``mtragun-human/generation_tasks/reference.jsonl`` and
  ``mtragun-human/retrieval_tasks/qrels/<domain>.tsv`` - MTRAG-UN: 507 further conversations on
  the same four corpora, each with one judged turn, its full history and its reference passages;
* ``mtrag-human/evaluations/reference_subset_with_human_evaluations.json`` - only to check the
  conversations (159 of their turns, 350 passages) against a file of the official repository.

``--conversations``: the 110 human conversations with every passage the annotators were shown.
The official ``mtrag-human/conversations/conversations.json`` is larger than the snapshots carry,
so this reads the same conversations as split, one file each, into
``cleaned_data/conversations/<n>.json`` by the fork ``pashaAbri/mt-rag-benchmark``. The fork's
files are matched to official ids by their user turns and checked against the official files.

What is built
-------------
* Corpus: every passage that appears in any of these conversations (the passages ELSER
  retrieved for the annotators, relevant or not, plus MTRAG-UN's reference passages), with the
  official passage ids and text. MTRAG's full corpora (183k + 61k + 50k + 72k passages) are not
  in the snapshots; this pool of about 3k retrieved passages stands in for them, so every
  distractor is a passage a strong retriever ranked high for some turn of the same domain.
  A passage is one document (the official 512-token chunks, up to about 3,000 characters; they
  are not re-split, so the qrels keep their official granularity).
  ``metadata.path`` = [domain, source document, passage id]; the source document is the page /
  article / post the passage was cut from (``clapnq``: Wikipedia page id; ``cloud``, ``govt``,
  ``fiqa``: the id before the character offsets).
* Queries: each judged turn; ``text`` = the user's utterance as written (not the rewrite);
  ``metadata.context`` = the conversation up to and including that turn, user ``U`` and agent
  ``S`` (the agent turns are the final, annotator-repaired responses).
* Qrels: the official judgments, score 1 (MTRAG's qrels are binary).

Run: ``python -m benchmarks.convert_mtrag --source <IBM git dir> --conversations <fork git dir>
--out /work/shared/data/mtrag --keep-raw``. ``--keep-raw`` copies every input file it used under
``<out>/raw/ibm`` and ``<out>/raw/fork`` (large ones gzipped); those folders are valid
``--source`` / ``--conversations`` for a rebuild. Deterministic: same inputs, same bytes.
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter, defaultdict
from pathlib import Path

from .dialogue_sets import SourceTree, reset_output, sha256, validate, write_jsonl, write_qrels

DOMAINS = ("clapnq", "cloud", "fiqa", "govt")
HUMAN = "mtrag-human/retrieval_tasks"
UN_REF = "mtragun-human/generation_tasks/reference.jsonl"
UN_QRELS = "mtragun-human/retrieval_tasks/qrels"
HUMAN_EVAL = "mtrag-human/evaluations/reference_subset_with_human_evaluations.json"
CONV_DIR = "cleaned_data/conversations"
N_CONVERSATIONS = 110
GZIP_ABOVE = 20_000  # bytes; raw copies larger than this are stored gzipped


def domain_of(collection: str) -> str:
    c = collection.lower()
    for key, dom in (("clapnq", "clapnq"), ("cloud", "cloud"), ("fiqa", "fiqa"), ("govt", "govt")):
        if key in c:
            return dom
    raise ValueError(f"unknown collection {collection!r}")


def source_doc(domain: str, passage_id: str) -> str:
    """The page / article / post a passage was cut from."""
    if domain == "clapnq":  # <wikipedia page id>_<start>-<end>-<s>-<e>
        return passage_id.split("_", 1)[0]
    return passage_id.split("-", 1)[0]  # ibmcld_00474-7885-8455, 162428-0-349, 775449d1aa187ec5-11505-13676


def norm(s: str) -> str:
    return " ".join(s.split())


def split_users(text: str) -> list[str]:
    """'|user|: a\\n|user|: b' -> ['a', 'b'] (the retrieval tasks' multi-turn query format)."""
    parts = re.split(r"(?:^|\n)\|user\|: ?", text)
    return [p for p in parts[1:]]


def read_tsv(src: SourceTree, path: str) -> list[tuple[str, str, int]]:
    lines = src.read_text(path).splitlines()
    assert lines[0].split("\t") == ["query-id", "corpus-id", "score"], path
    return [(q, d, int(s)) for q, d, s in (line.split("\t") for line in lines[1:] if line.strip())]


def read_jsonl(src: SourceTree, path: str) -> list[dict]:
    return [json.loads(line) for line in src.read_text(path).splitlines() if line.strip()]


class Corpus:
    def __init__(self) -> None:
        self.docs: dict[str, dict] = {}  # corpus _id -> doc
        self.by_orig: dict[tuple[str, str], str] = {}
        self.conflicts = 0

    def add(self, domain: str, ctx: dict) -> str:
        pid = ctx["document_id"]
        key = (domain, pid)
        text = ctx["text"].strip()
        if key in self.by_orig:
            doc = self.docs[self.by_orig[key]]
            if norm(doc["text"]) != norm(text):
                self.conflicts += 1
            if not doc["title"] and ctx.get("title"):
                doc["title"] = ctx["title"]
            return self.by_orig[key]
        path = [domain, source_doc(domain, pid), pid]
        _id = "/".join(path)
        meta = {"path": path, "domain": domain, "passage_id": pid, "source_doc": path[1]}
        if ctx.get("title"):
            meta["doc_title"] = ctx["title"]
        if ctx.get("url"):
            meta["url"] = ctx["url"]
        self.docs[_id] = {"_id": _id, "title": ctx.get("title") or "", "text": text, "metadata": meta}
        self.by_orig[key] = _id
        return _id


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="Convert MTRAG (IBM/mt-rag-benchmark) to the BEIR layout.")
    ap.add_argument("--source", required=True, help="IBM/mt-rag-benchmark: bare git dir or folder")
    ap.add_argument(
        "--conversations",
        required=True,
        help="pashaAbri/mt-rag-benchmark (cleaned_data/conversations): git dir or folder",
    )
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--keep-raw", action="store_true", help="copy the inputs used under <out>/raw/")
    args = ap.parse_args(argv)

    ibm, fork = SourceTree(args.source), SourceTree(args.conversations)
    out: Path = args.out
    reset_output(out)
    used_ibm: list[str] = []
    used_fork: list[str] = []
    corpus = Corpus()

    # --- official judged turns of the human conversations
    qrels_h: dict[str, list[str]] = defaultdict(list)  # qid -> passage ids
    users_of: dict[str, list[str]] = {}  # qid -> user turns 1..k
    rewrite_of: dict[str, str] = {}
    domain_of_q: dict[str, str] = {}
    for dom in DOMAINS:
        for p in (
            f"{HUMAN}/{dom}/qrels/dev.tsv",
            f"{HUMAN}/{dom}/{dom}_questions.jsonl",
            f"{HUMAN}/{dom}/{dom}_rewrite.jsonl",
        ):
            used_ibm.append(p)
        for q, d, s in read_tsv(ibm, f"{HUMAN}/{dom}/qrels/dev.tsv"):
            assert s == 1
            qrels_h[q].append(d)
            domain_of_q[q] = dom
        for row in read_jsonl(ibm, f"{HUMAN}/{dom}/{dom}_questions.jsonl"):
            users_of[row["_id"]] = split_users(row["text"])
        for row in read_jsonl(ibm, f"{HUMAN}/{dom}/{dom}_rewrite.jsonl"):
            rewrite_of[row["_id"]] = split_users(row["text"])[-1].strip()
    assert set(qrels_h) <= set(users_of), "qrels for a turn without its questions"

    # official conversation id -> {turn: users[:turn]}
    conv_turns: dict[str, dict[int, list[str]]] = defaultdict(dict)
    for qid, users in users_of.items():
        cid, turn = qid.split("<::>")
        assert len(users) == int(turn), qid
        conv_turns[cid][int(turn)] = users

    # --- the 110 conversations (fork split), matched to official ids by their user turns
    conv_by_id: dict[str, dict] = {}
    unmatched = 0
    for n in range(1, N_CONVERSATIONS + 1):
        path = f"{CONV_DIR}/{n}.json"
        used_fork.append(path)
        conv = json.loads(fork.read_text(path))
        dom = domain_of(conv["retriever"]["collection"]["name"])
        for m in conv["messages"]:
            for c in m.get("contexts") or []:
                corpus.add(dom, c)
        users = [norm(m["text"]) for m in conv["messages"] if m["speaker"] == "user"]
        hits = [
            cid
            for cid, turns in conv_turns.items()
            if all(len(users) >= t and [norm(u) for u in us] == users[:t] for t, us in turns.items())
        ]
        if not hits:
            unmatched += 1  # no turn of it is judged (all unanswerable / conversational)
            continue
        assert len(hits) == 1, (n, hits)
        assert hits[0] not in conv_by_id, hits
        conv_by_id[hits[0]] = {"n": n, "domain": dom, "messages": conv["messages"]}
    missing = sorted({q.split("<::>")[0] for q in qrels_h} - set(conv_by_id))
    assert not missing, f"judged conversations not found in the fork: {missing[:5]}"

    # --- MTRAG-UN: one judged turn per conversation, with its history and reference passages
    used_ibm.append(UN_REF)
    qrels_un: dict[str, list[str]] = defaultdict(list)
    for dom in DOMAINS:
        used_ibm.append(f"{UN_QRELS}/{dom}.tsv")
        for q, d, s in read_tsv(ibm, f"{UN_QRELS}/{dom}.tsv"):
            assert s == 1
            qrels_un[q].append(d)
            domain_of_q[q] = dom
    un_tasks = {}
    for row in read_jsonl(ibm, UN_REF):
        dom = domain_of(row["Collection"])
        for c in row["contexts"]:
            corpus.add(dom, c)
        un_tasks[row["task_id"]] = (dom, row)
    assert set(qrels_un) <= set(un_tasks)
    assert not (set(qrels_un) & set(qrels_h))

    # --- queries and qrels
    queries: list[dict] = []
    pairs: list[tuple[str, str, int]] = []

    def doc_id(dom: str, pid: str) -> str:
        key = (dom, pid)
        assert key in corpus.by_orig, f"judged passage without text: {key}"
        return corpus.by_orig[key]

    text_mismatch = 0
    for qid in sorted(qrels_h, key=lambda q: (domain_of_q[q], q.split("<::>")[0], int(q.split("<::>")[1]))):
        cid, turn = qid.split("<::>")
        turn = int(turn)
        conv = conv_by_id[cid]
        ctx, seen = [], 0
        for m in conv["messages"]:
            ctx.append({"speaker": "U" if m["speaker"] == "user" else "S", "text": m["text"]})
            if m["speaker"] == "user":
                seen += 1
                if seen == turn:
                    user_msg = m
                    break
        official = users_of[qid][-1]
        if norm(official) != norm(user_msg["text"]):
            text_mismatch += 1
        meta = {
            "context": ctx,
            "dialogue_id": cid,
            "turn": turn,
            "domain": conv["domain"],
            "subset": "mtrag-human",
            "rewrite": rewrite_of.get(qid, ""),
        }
        for k in ("Question Type", "Multi-Turn", "Answerability"):
            if k in (user_msg.get("enrichments") or {}):
                meta[k.lower().replace(" ", "_")] = user_msg["enrichments"][k]
        queries.append({"_id": qid, "text": user_msg["text"], "metadata": meta})
        for pid in sorted(set(qrels_h[qid])):
            pairs.append((qid, doc_id(domain_of_q[qid], pid), 1))

    for qid in sorted(qrels_un, key=lambda q: (domain_of_q[q], q)):
        dom, row = un_tasks[qid]
        ctx = [{"speaker": "U" if m["speaker"] == "user" else "S", "text": m["text"]} for m in row["input"]]
        assert ctx[-1]["speaker"] == "U"
        meta = {
            "context": ctx,
            "dialogue_id": row["conversation_id"],
            "turn": int(row["turn"]),
            "domain": dom,
            "subset": "mtrag-un",
            "question_type": row.get("Question Type"),
            "multi-turn": row.get("Multi-Turn"),
            "answerability": row.get("answerability"),
        }
        queries.append({"_id": qid, "text": ctx[-1]["text"], "metadata": meta})
        for pid in sorted(set(qrels_un[qid])):
            pairs.append((qid, doc_id(dom, pid), 1))

    # --- checks against official files that overlap the fork
    checks = {
        "fork user turns that differ from the official question text": text_mismatch,
        "passage text conflicts": corpus.conflicts,
    }
    if ibm.exists(HUMAN_EVAL):
        used_ibm.append(HUMAN_EVAL)
        ev = json.loads(ibm.read_text(HUMAN_EVAL))
        docs_ok = sum(
            norm(d["text"]) == norm(corpus.docs[corpus.by_orig[k]]["text"])
            for d in ev["documents"]
            for k in [
                next(((dom, d["document_id"]) for dom in DOMAINS if (dom, d["document_id"]) in corpus.by_orig), None)
            ]
            if k
        )
        checks["official human-eval passages found with identical text"] = f"{docs_ok}/{len(ev['documents'])}"
        agree = total = 0
        for t in ev["tasks"]:
            cid, turn = t["task_id"].split("<::>")
            if cid not in conv_by_id:
                continue
            msgs = conv_by_id[cid]["messages"]
            want = [norm(m["text"]) for m in t["input"]]
            have = [norm(m["text"]) for m in msgs[: len(want)]]
            total += 1
            agree += want == have
        checks["official human-eval task histories identical to the fork's"] = f"{agree}/{total}"

    # --- write
    docs = sorted(corpus.docs.values(), key=lambda d: d["_id"])
    write_jsonl(out / "corpus.jsonl", docs)
    write_jsonl(out / "queries.jsonl", queries)
    write_qrels(out / "qrels" / "test.tsv", sorted(set(pairs)))
    if args.keep_raw:
        for p in ["LICENSE", "README.md", "corpora/README.md", *used_ibm]:
            ibm.keep(p, out / "raw" / "ibm", gz=len(ibm.read_bytes(p)) > GZIP_ABOVE)
        for p in ["LICENSE", *used_fork]:
            fork.keep(p, out / "raw" / "fork", gz=len(fork.read_bytes(p)) > GZIP_ABOVE)

    stats = validate(out)
    print(
        json.dumps(
            {
                "ibm_commit": ibm.commit,
                "fork_commit": fork.commit,
                "fork conversations matched": len(conv_by_id),
                "fork conversations without judged turns": unmatched,
                **checks,
                "judged turns by subset": Counter(q["metadata"]["subset"] for q in queries),
                "judged turns by domain": Counter(q["metadata"]["domain"] for q in queries),
                **{k: v for k, v in stats.items()},
                "sha256": {p: sha256(out / p) for p in ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv")},
            },
            indent=1,
            default=str,
        )
    )


if __name__ == "__main__":
    main()
