"""`cairn ingest --format beir`, `cairn read` and `cairn rm` as a user runs them."""

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.e2e
ROOT = "cairn://resources/dstc"


def run(*args, home):
    env = {**os.environ, "CAIRN_HOME": str(home), "LITELLM_LOCAL_MODEL_COST_MAP": "True", "CAIRN_PROGRESS": "1"}
    return subprocess.run([sys.executable, "-m", "cairn.cli.main", *args], capture_output=True, text=True, env=env, timeout=300, check=False)


@pytest.fixture
def beir(tmp_path):
    folder = tmp_path / "mini"
    folder.mkdir()
    meta = {"domain": "hotel", "entity_id": "7", "entity_name": "ACORN GUEST HOUSE"}
    rows = [
        {"_id": "hotel/7/faq/0", "title": "Is there parking?", "text": "Yes, free parking on site.",
         "metadata": {"path": ["hotel", "7", "faq", "0"], **meta, "doc_type": "faq"}},
        {"_id": "hotel/7/review/1/0", "title": "", "text": "The breakfast was excellent.",
         "metadata": {"path": ["hotel", "7", "review", "1", "0"], **meta, "doc_type": "review",
                      "review_metadata": {"traveler_type": "Couples"}}},
        {"_id": "hotel/7/review/1/1", "title": "", "text": "Rooms were quiet and clean.",
         "metadata": {"path": ["hotel", "7", "review", "1", "1"], **meta, "doc_type": "review",
                      "review_metadata": {"traveler_type": "Couples"}}},
    ]
    (folder / "corpus.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n{broken\n")
    return folder


def test_ingest_beir_read_and_rm(tmp_path, beir):
    home = tmp_path / "home"
    rules = ["2={entity_name} ({domain})", "*/*/faq=FAQ of {entity_name}", "*/*/review=Reviews of {entity_name}",
             "*/*/review/*=Review of {entity_name} by {review_metadata.traveler_type}"]
    titles = [arg for rule in rules for arg in ("--dir-title", rule)]
    out = run("ingest", str(beir), "--uri", ROOT, "--format", "beir", *titles, home=home)
    assert out.returncode == 0, out.stderr
    assert "3 documents -> 15 records (15 embedded, 0 unchanged, 0 removed)" in out.stdout
    assert "records/s" in out.stderr and "skipped" in out.stderr and "invalid JSON" in out.stderr

    entity = run("read", f"{ROOT}/hotel/7", "--level", "0", home=home)
    assert entity.returncode == 0, entity.stderr
    assert entity.stdout.startswith("# ACORN GUEST HOUSE (hotel)  [L0 of directory")
    overview = run("read", f"{ROOT}/hotel/7/.overview.md", "--json", home=home)
    data = json.loads(overview.stdout)
    assert data["level"] == 1 and "Reviews of ACORN GUEST HOUSE" in data["text"]
    leaf = run("read", f"{ROOT}/hotel/7/faq/0", "--level", "2", home=home)
    assert "Yes, free parking on site." in leaf.stdout

    rm = run("rm", f"{ROOT}/hotel/7/review", home=home)
    assert rm.returncode == 0, rm.stderr
    assert "removed cairn://resources/dstc/hotel/7/review: 6 records deleted" in rm.stdout
    gone = run("read", f"{ROOT}/hotel/7/review/1", home=home)
    assert gone.returncode == 2 and gone.stderr.startswith("error: nothing is stored at")
    after = run("read", f"{ROOT}/hotel/7", "--level", "1", home=home)
    assert "Reviews of" not in after.stdout and "FAQ of ACORN GUEST HOUSE" in after.stdout


@pytest.mark.parametrize(
    "args, says",
    [
        (("ingest", ".", "--uri", ROOT, "--dir-title", "{entity_name}"), "has no '='"),
        (("ingest", "/tmp", "--uri", ROOT, "--format", "beir"), "no BEIR corpus at '/tmp'"),
        (("read", "cairn://resources/x", "--level", "3"), "invalid choice"),
        (("rm", "cairn://nowhere/x"), "unknown root 'nowhere'"),
    ],
)
def test_errors_are_one_clear_line(tmp_path, args, says):
    out = run(*args, home=tmp_path)
    assert out.returncode == 2 and says in out.stderr and "Traceback" not in out.stderr
