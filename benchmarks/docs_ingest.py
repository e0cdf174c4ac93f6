"""Ingesting real documents: a generated mixed folder (at least 200 files across every format, a
few large ones) and one 2 MB Markdown file.

For each run: documents/s, MB/s (bytes of the files read), records, wall and CPU seconds, and the
peak resident memory of the process that ran it (each run is its own process, so peaks do not
mix; the parser worker's peak is reported apart). Three stages:

* ``parse``: reading and parsing only (``read_folder`` with the isolated parser worker;
  ``parse_2_workers``: two workers in parallel);
* ``ingest_no_embedding``: the whole ingest (parse, chunk, tree, content store, local vector store)
  with an embedder that returns a constant vector — what cairn itself costs;
* ``ingest_with_embedding``: the same with the embedded default (MiniLM int8 on onnxruntime).

    python -m benchmarks.run docs_ingest
    python -m benchmarks.run docs_ingest --queries 1     # smoke: no embedding-included runs
"""

from __future__ import annotations

import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .docs_corpus import WORDS, sentences, write_docx, write_one_of_each, write_pdf, write_xlsx

SUITE = "docs_ingest"
COPIES = 14  # x 15 files of every format = 210 files, plus the large ones


def big_markdown(path: Path, size: int = 1_990_000, seed: int = 1) -> None:
    """About 2 MB of Markdown: sections of a few paragraphs each."""
    rng = random.Random(seed)
    parts = ["# Big document\n\n"]
    total, n = 0, 0
    while total < size:
        n += 1
        body = "\n\n".join(sentences(rng, rng.randint(3, 8)) for _ in range(rng.randint(2, 6)))
        part = f"## Section {n}\n\n{body}\n\n"
        parts.append(part)
        total += len(part)
    path.write_text("".join(parts)[:size])


def mixed_folder(root: Path) -> dict:
    rng = random.Random(7)
    for i in range(COPIES):
        write_one_of_each(root / f"team{i:02d}", rng, prefix=f"t{i}-")
    large = root / "large"
    large.mkdir(parents=True)
    big_markdown(large / "big.md", 1_000_000)
    write_pdf(large / "manual.pdf", [sentences(rng, 30) for _ in range(60)], "Operations manual")
    with open(large / "events.csv", "w") as fh:
        fh.write("id,team,kind,detail\n")
        for i in range(20_000):
            fh.write(f"{i},{rng.choice(WORDS)},{rng.choice(WORDS)},{rng.choice(WORDS)} {rng.choice(WORDS)}\n")
    write_xlsx(large / "ledger.xlsx", {"ledger": [["id", "account", "amount"]] + [[i, rng.choice(WORDS), i * 3] for i in range(5_000)]})
    write_docx(large / "policies.docx", "Policies", [(f"Policy {i}", sentences(rng, 8)) for i in range(150)])
    files = [p for p in root.rglob("*") if p.is_file()]
    by_ext: dict[str, int] = {}
    for p in files:
        by_ext[p.suffix] = by_ext.get(p.suffix, 0) + 1
    return {"files": len(files), "bytes": sum(p.stat().st_size for p in files), "by_extension": dict(sorted(by_ext.items()))}


# ----------------------------------------------------------------------------- one measured run (child process)


def _child(stage: str, path: Path, work: Path) -> dict:
    import numpy as np

    from cairn.engine.ingest import Ingestor, LocalContentStore
    from cairn.engine.ingest.parsers.isolation import IsolatedRunner
    from cairn.engine.ingest.sources import read_folder, split_items
    from cairn.ports.vectorstores.local import LocalVectorStore

    files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
    size = sum(p.stat().st_size for p in files)
    wall, cpu = time.perf_counter(), time.process_time()
    if stage.startswith("parse"):
        from cairn.engine.ingest.parsers.isolation import RunnerPool

        with (RunnerPool(workers=2) if stage == "parse_2_workers" else IsolatedRunner()) as runner:
            docs, rejected = split_items(read_folder(path, runner=runner))
        out = {"documents": len(docs), "rejected": len(rejected), "records": None}
    else:
        if stage == "ingest_with_embedding":
            from cairn.ports.embeddings.local import LocalEmbedder

            embedder = LocalEmbedder()
        else:
            class Constant:
                dimension = 384

                def embed(self, texts, input_type="document"):  # type: ignore[no-untyped-def]
                    v = np.zeros((len(texts), 384), dtype=np.float32)
                    v[:, 0] = 1.0
                    return v

            embedder = Constant()  # type: ignore[assignment]
        store = LocalVectorStore(work / "store", dimension=384)
        report = Ingestor(store, embedder, "bench", content=LocalContentStore(work / "content")).ingest_path(
            path, "cairn://resources/bench"
        )
        out = {"documents": report.documents, "rejected": len(report.rejected), "records": report.records}
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    children = resource.getrusage(resource.RUSAGE_CHILDREN)  # the parser workers, reaped when closed
    return {
        **out,
        "mb": round(size / 1e6, 2),
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "docs_per_s": round(out["documents"] / wall, 1),
        "mb_per_s": round(size / 1e6 / wall, 2),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "parser_worker_peak_rss_mb": round(children.ru_maxrss / 1024),
        "parser_worker_cpu_s": round(children.ru_utime + children.ru_stime, 2),
    }


def _measure(stage: str, path: Path) -> dict:
    with tempfile.TemporaryDirectory() as work:
        env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        proc = subprocess.run(
            [sys.executable, "-m", "benchmarks.docs_ingest", stage, str(path), work],
            capture_output=True, text=True, env=env, check=False, cwd=Path(__file__).resolve().parents[1],
        )
        if proc.returncode != 0:
            raise SystemExit(f"{stage} on {path} failed:\n{proc.stderr[-3000:]}")
        return json.loads(proc.stdout.strip().splitlines()[-1])


def run(data: Path, queries: int | None = None) -> dict:
    smoke = queries is not None
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "mixed"
        started = time.perf_counter()
        corpus = mixed_folder(root)
        corpus["generate_s"] = round(time.perf_counter() - started, 1)
        big = Path(tmp) / "big.md"
        big_markdown(big)
        result: dict = {"corpus": corpus, "mixed": {}, "big_markdown_2mb": {}}
        stages = ["parse", "parse_2_workers", "ingest_no_embedding"] + ([] if smoke else ["ingest_with_embedding"])
        for stage in stages:
            result["mixed"][stage] = _measure(stage, root)
        for stage in ["ingest_no_embedding"] + ([] if smoke else ["ingest_with_embedding"]):
            result["big_markdown_2mb"][stage] = _measure(stage, big)
    return result


if __name__ == "__main__":
    print(json.dumps(_child(sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]))))
