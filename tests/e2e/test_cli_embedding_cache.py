"""The machine's embedding cache as a user meets it: the handbook ingested into a second home takes its
vectors from the first one's, answers exactly as the first home does, and `off` keeps nothing."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e
HANDBOOK = Path(__file__).resolve().parents[2] / "examples" / "handbook"
QUESTION = "how many days a year may I work from another country?"


def cairn(*args: str, home: Path, cache: str, **more: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAIRN_")}
    env.update({"CAIRN_HOME": str(home), "CAIRN_EMBEDDING_CACHE": cache, "LITELLM_LOCAL_MODEL_COST_MAP": "True", **more})
    done = subprocess.run([sys.executable, "-m", "cairn.cli.main", *args], capture_output=True, text=True, env=env,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    return done


def ranked(home: Path, cache: str) -> list[tuple[str, float]]:
    out = cairn("find", QUESTION, "--json", "--limit", "5", home=home, cache=cache)
    return [(r["uri"], r["score"]) for r in json.loads(out.stdout)["resources"]]


def test_a_second_home_takes_the_handbooks_vectors_from_the_cache_and_answers_the_same(tmp_path):
    cache = tmp_path / "vectors"
    first = cairn("ingest", str(HANDBOOK), "--uri", "cairn://resources/handbook", home=tmp_path / "a", cache=str(cache))
    assert "from the embedding cache" not in first.stderr
    (kept,) = cache.glob("local-minilm-*.sqlite3")
    rows = sqlite3.connect(kept).execute("SELECT count(*) FROM vectors").fetchone()[0]
    assert rows >= 22  # the chunks, the files' and folders' summaries

    second = cairn("ingest", str(HANDBOOK), "--uri", "cairn://resources/handbook", home=tmp_path / "b", cache=str(cache))
    assert "22 embedded" in second.stdout  # every record got its vector...
    assert f"{rows} vectors came from the embedding cache" in second.stderr  # ...and none from the model
    assert "0 texts were embedded by the model" in second.stderr
    assert ranked(tmp_path / "b", str(cache)) == ranked(tmp_path / "a", str(cache))


def test_off_keeps_nothing_and_answers_the_same(tmp_path):
    cached, xdg = tmp_path / "vectors", tmp_path / "xdg"
    cairn("ingest", str(HANDBOOK), "--uri", "cairn://resources/handbook", home=tmp_path / "a", cache=str(cached))
    off = cairn("ingest", str(HANDBOOK), "--uri", "cairn://resources/handbook", home=tmp_path / "b", cache="off",
                XDG_CACHE_HOME=str(xdg))
    assert "embedding cache" not in off.stderr
    assert not (xdg / "cairn" / "embeddings").exists()  # where `auto` would have kept them
    assert [u for u, _ in ranked(tmp_path / "b", "off")] == [u for u, _ in ranked(tmp_path / "a", str(cached))]
