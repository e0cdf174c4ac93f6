"""Moving a tenant to another embedder as a user does it: `cairn` subprocesses, then `cairn serve`.

MiniLM and multilingual-e5-small are both 384-dimensional, so only the recorded identity tells
their indexes apart. After `cairn reindex` the tenant's answers are the answers of a fresh ingest
with the new embedder (same URIs, same scores), memories included.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cairn import Cairn
from cairn.app.services import Services
from cairn.client import CairnClient
from cairn.core.config import load_settings
from cairn.engine.context import token_counter
from cairn.engine.ingest.chunking import ChunkingConfig
from cairn.ports.embeddings.base import Embedder
from cairn.ports.embeddings.local import LocalEmbedder

pytestmark = pytest.mark.e2e

E5 = {"CAIRN_EMBEDDING_MODEL": "multilingual-e5-small"}
ROOT = "cairn://resources/handbook"
QUERIES = ("how long until a refund reaches my card", "when are invoices sent", "card refunds ann prefers")


def run(*args: str, home: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "CAIRN_HOME": str(home), "LITELLM_LOCAL_MODEL_COST_MAP": "True", "CAIRN_RECORD_USE": "false",
            **(env or {})}
    return subprocess.run([sys.executable, "-m", "cairn.cli.main", *args], capture_output=True, text=True, env=full, timeout=600)


def fill(home: Path, corpus: Path, env: dict[str, str] | None = None) -> None:
    out = run("ingest", str(corpus), "--uri", ROOT, home=home, env=env)
    assert out.returncode == 0, out.stderr
    out = run("remember", "I want refunds paid back to my card", "--category", "preferences", "--user", "ann",
              home=home, env=env)
    assert out.returncode == 0, out.stderr


def fill_cut_for(home: Path, corpus: Path, cut_for: Embedder, env: dict[str, str]) -> None:
    """`fill` with the configured embedder, its documents cut for ``cut_for``'s window."""
    chunking = ChunkingConfig().for_embedder(cut_for.max_tokens, token_counter(cut_for))
    Cairn(services(home, env)).ingest(corpus, ROOT, chunking=chunking)
    out = run("remember", "I want refunds paid back to my card", "--category", "preferences", "--user", "ann",
              home=home, env=env)
    assert out.returncode == 0, out.stderr


def services(home: Path, env: dict[str, str] | None = None) -> Services:
    return Services(load_settings(env={"CAIRN_HOME": str(home), "CAIRN_RECORD_USE": "false", **(env or {})}))


def answers(home: Path, env: dict[str, str] | None = None) -> dict[str, list[tuple[str, float]]]:
    """What `cairn find --user ann --limit 5` answers each query (the same engine, in this process):
    ann's memories, then the resources."""
    cairn = Cairn(services(home, env))
    found = {}
    for q in QUERIES:
        result = cairn.find(q, user="ann", limit=5)
        found[q] = [(m.uri, m.score) for m in result.memories + result.resources]
    return found


def top_resource(found: list[tuple[str, float]]) -> str:
    return next(u for u, _ in found if u.startswith(ROOT))


def test_reindex_moves_a_tenant_to_another_embedder_with_a_fresh_ingests_answers(tmp_path: Path, corpus: Path) -> None:
    from cairn.api.server import running

    home, fresh = tmp_path / "home", tmp_path / "fresh"
    fill(home, corpus)
    before = answers(home)
    same = run("reindex", home=home)  # nothing to move
    assert same.returncode == 2 and "already embedded by local/minilm" in same.stderr and "--force" in same.stderr

    refused = run("find", QUERIES[0], home=home, env=E5)  # same dimension: only the identity tells them apart
    assert refused.returncode == 2
    assert "local/minilm (384-d, languages: en)" in refused.stderr
    assert "local/multilingual-e5-small (384-d, languages: many)" in refused.stderr and "cairn reindex" in refused.stderr

    moved = run("reindex", home=home, env=E5)
    assert moved.returncode == 0, moved.stderr
    assert "reindex default: 0/" in moved.stderr and "switched over" in moved.stdout
    records = int(moved.stdout.split(": ", 1)[1].split(" records")[0])
    assert records >= 8  # leaves, folders and the memory with its folders

    # a reindex re-embeds the chunks as they were cut, for MiniLM's 256-token window; a fresh ingest
    # cut for that window too (the new model's 512 would cut the long guide elsewhere) answers alike
    fill_cut_for(fresh, corpus, LocalEmbedder(), env=E5)
    after, expected = answers(home, env=E5), answers(fresh, env=E5)
    for q in QUERIES:
        assert [u for u, _ in after[q]] == [u for u, _ in expected[q]], q
        assert [s for _, s in after[q]] == pytest.approx([s for _, s in expected[q]], abs=2e-3), q
        assert top_resource(after[q]) == top_resource(before[q]), q  # the content's answer, whichever model reads it

    with running(services(home, E5)) as url, CairnClient(url, retries=0) as client:  # `cairn serve` on the new index
        served = client.find(QUERIES[0], user="ann", limit=5)
    assert [m.uri for m in served.memories + served.resources] == [u for u, _ in expected[QUERIES[0]]]

    old = run("find", QUERIES[0], home=home)  # the old embedder is refused by the new index now
    assert old.returncode == 2 and "CAIRN_EMBEDDING_MODEL=multilingual-e5-small" in old.stderr
    kept = [p for p in (home / "reindex").iterdir() if ".previous-" in p.name]
    assert len(kept) == 1 and any(kept[0].iterdir())  # the old index, until the user removes it
