"""`cairn serve --workers 2` as a user runs it: two processes on one home and one port, warm
before they answer; a document written through one is found through every request after it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cairn.client import CairnClient

from tests.fakes import HANDBOOK_DOCS
from tests.ports import cairn_serve

pytestmark = pytest.mark.e2e
KEY = "acme-key-0123456789abcdef"
ROOT = "cairn://resources/handbook"


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


@pytest.fixture(scope="module")
def two_workers(tmp_path_factory):
    home = tmp_path_factory.mktemp("workers")
    keys = home / "keys.json"
    keys.write_text(json.dumps({KEY: "acme"}))
    with cairn_serve(home, keys, workers=2) as (proc, url):
        yield proc, url


def test_two_processes_serve_one_home_and_see_each_others_writes(two_workers):
    proc, url = two_workers
    workers = [c for c in _children(proc.pid) if "spawn_main" in Path(f"/proc/{c}/cmdline").read_text()]
    assert len(workers) == 2
    with CairnClient(url, KEY, retries=0) as client:
        assert client.put_documents(ROOT, HANDBOOK_DOCS).documents == 3
        for _ in range(6):  # new connections: both workers answer some of them
            with CairnClient(url, KEY, retries=0) as fresh:
                found = fresh.find("how long until my refund reaches the card?", limit=3)
                assert found.resources[0].uri == f"{ROOT}/billing/refunds.md"


def test_a_negative_worker_count_is_refused_with_what_is_allowed(tmp_path):
    out = subprocess.run([sys.executable, "-m", "cairn.cli", "--home", str(tmp_path), "serve", "--workers", "-1"],
                         capture_output=True, text=True, timeout=120, env=dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True"))
    assert out.returncode != 0 and "--workers -1" in out.stderr and "0 for one per core" in out.stderr
