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
    return subprocess.run([sys.executable, "-m", "cairn.cli.main", *args], capture_output=True, text=True, env=env, timeout=300)


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

    explained = run("find", "refund within 30 days", "--limit", "1", "--explain", home=home)
    lines = explained.stdout.splitlines()
    score = lines[0].split()[1]  # "  1. 0.612  L2  cairn://..."
    at = next(i for i, line in enumerate(lines) if line.strip().startswith("score = "))
    arithmetic, arm = lines[at], lines[at + 1]
    assert arithmetic.strip().startswith("score = ") and arithmetic.split("]")[0].endswith("weight")
    assert f"= {score}" in arithmetic  # the line beside the score says how it was made, and gives the same number
    value, weight = float(arm.split()[0]), float(arm.split()[2])
    assert f"{value * weight:.3f}" == score and "typed query 1" in arm


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
    # and a search() whose session says what "it" is: the folder the dialogue names is boosted and
    # its page comes first. (Whether the turn is also searched with the previous one, flat, or alone,
    # hierarchically, depends on what other folders docs/ has: docs/concepts alone, or beside
    # docs/integrations; the answer does not.)
    searched = out.stdout.split("== search (session ", 1)[1]
    assert "plan [session-rewrite]: 'What are the three levels?' (all) boosting cairn://resources/cairn-docs/concepts" in searched
    first = next(line for line in searched.splitlines() if line.strip().startswith("1. "))
    assert "cairn://resources/cairn-docs/concepts/uris-and-levels.md" in first, searched
    assert "provenance: mode=" in searched
    assert "through the HTTP API (cairn serve on http://127.0.0.1:" in out.stdout
    assert '"message":"usage"' not in out.stderr  # a command's answer, not the service's logs


def test_chinese_questions_find_their_documents_through_the_command(tmp_path):
    docs = tmp_path / "help"
    docs.mkdir()
    (docs / "refund-policy.md").write_text("# 退款政策\n\n购买后三十天内，您可以申请全额退款。退款审核通过后，款项将在五到七个工作日内退回原支付方式。\n", encoding="utf-8")
    (docs / "invoices.md").write_text("# 发票\n\n我们为每一笔订单开具电子增值税发票。您可以在账户的账单页面下载发票，也可以联系财务部门补开。\n", encoding="utf-8")
    (docs / "data-storage.md").write_text("# 数据存储\n\n您的所有数据都存放在位于法兰克福的欧盟数据中心，静态数据使用 AES-256 加密，每天备份一次。\n", encoding="utf-8")
    home = tmp_path / "home"
    out = run("ingest", str(docs), "--uri", "cairn://resources/help", home=home)
    assert out.returncode == 0, out.stderr
    assert "does not cover" in out.stderr and "Chinese" in out.stderr  # MiniLM is English: said at ingest
    for question, doc in (("退款需要多长时间？", "refund-policy.md"), ("我的数据存储在哪里？", "data-storage.md"), ("可以开发票吗", "invoices.md")):
        table = run("find", question, "--limit", "3", home=home)
        assert table.returncode == 0, table.stderr
        assert f"cairn://resources/help/{doc}" in table.stdout.splitlines()[0], (question, table.stdout)
    assert "no results" in run("find", "鑫龘靐齉爨", home=home).stdout


def test_remember_without_a_category_says_where_the_memory_went(tmp_path):
    done = run("remember", "Eve works night shifts.", "--user", "eve", home=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("created cairn://user/eve/memories/profile/")
    assert "no category given: stored under 'profile'" in done.stderr
    shown = run("read", done.stdout.split()[1], home=tmp_path)
    assert "Eve works night shifts." in shown.stdout, shown.stdout + shown.stderr
