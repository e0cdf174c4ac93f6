"""The `cairn` command as a user runs it: a real subprocess, real output."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]


def run(*args, home):
    env = {**os.environ, "CAIRN_HOME": str(home), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    return subprocess.run([sys.executable, "-m", "cairn.cli", *args], capture_output=True, text=True, env=env, timeout=300)


def test_ingest_then_find_prints_a_ranked_table(tmp_path, corpus):
    home = tmp_path / "home"
    out = run("ingest", str(corpus), "--uri", "cairn://resources/handbook", home=home)
    assert out.returncode == 0, out.stderr
    assert "5 documents ->" in out.stdout and "embedded" in out.stdout
    assert "Ingesting" in out.stderr
    again = run("ingest", str(corpus), "--uri", "cairn://resources/handbook", home=home)
    assert "0 embedded" in again.stdout

    table = run("find", "refund within 30 days", "--limit", "3", home=home)
    assert table.returncode == 0, table.stderr
    first = table.stdout.splitlines()[0]
    assert first.split()[0] == "1." and "cairn://resources/handbook/billing/refunds.md" in first
    assert "L2" in first and "Customers can request a refund" in table.stdout

    js = run("find", "refund within 30 days", "--json", "--explain", home=home)
    data = json.loads(js.stdout)
    assert data["resources"][0]["uri"].endswith("refunds.md")
    assert data["total"] == len(data["resources"]) + len(data["memories"]) + len(data["skills"])
    assert data["provenance"][0]["trace"]["stats"]["vector_calls"] == 1


@pytest.mark.parametrize(
    "args, says",
    [
        (("ingest", "/no/such/folder", "--uri", "cairn://resources/x"), "path '/no/such/folder' does not exist"),
        (("ingest", ".", "--uri", "https://example.com"), "invalid URI 'https://example.com'"),
        (("ingest", ".", "--uri", "cairn://user/bob"), "above every context root"),
        (("find", "   "), "the query is empty"),
        (("find", "x", "--filter", "{not json"), "--filter is not valid JSON"),
        (("find", "x", "--limit", "0"), "limit"),
    ],
)
def test_errors_are_one_clear_line_without_a_stack_trace(tmp_path, args, says):
    out = run(*args, home=tmp_path)
    assert out.returncode == 2
    assert out.stderr.startswith("error: ") and says in out.stderr
    assert "Traceback" not in out.stderr


def test_demo_answers_questions_about_cairn(tmp_path):
    out = run("demo", "--docs", str(REPO / "docs"), home=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "== find: How do I install cairn and try it?" in out.stdout
    assert "cairn://resources/cairn-docs/getting-started.md" in out.stdout
    assert "provenance: mode=quick" in out.stdout
    # and a search() whose session says what "it" is
    assert "== search (session " in out.stdout
    assert "plan [session-rewrite]: 'What are the three levels?' (all) in cairn://resources/cairn-docs/concepts" in out.stdout
    assert "searched cairn://resources/cairn-docs/concepts" in out.stdout  # scoped to the folder the dialogue names
    assert "cairn://resources/cairn-docs/concepts/uris-and-levels.md" in out.stdout
    assert "through the HTTP API (cairn serve on http://127.0.0.1:" in out.stdout
    assert '"message":"usage"' not in out.stderr  # a command's answer, not the service's logs
    assert "provenance: mode=thinking" in out.stdout
