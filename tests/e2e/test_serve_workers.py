"""`cairn serve --workers N` as a user runs it: two processes on one home and one port, warm
before they answer; a document written through one is found through every request after it; a
process answers searches while a bulk ingest it received still runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
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


def _workers(pid: int) -> list[int]:
    """The supervisor's worker processes: forked from it on Linux, so they run its command line."""
    own = Path(f"/proc/{pid}/cmdline").read_bytes()
    return [c for c in _children(pid) if _cmdline(c) == own]


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()  # empty for a process that has ended
    except OSError:  # gone between the listing and the read
        return b""


def test_two_processes_serve_one_home_and_see_each_others_writes(two_workers):
    proc, url = two_workers
    assert len(_workers(proc.pid)) == 2  # forked: no interpreter of their own that imports cairn again
    with CairnClient(url, KEY, retries=0) as client:
        assert client.put_documents(ROOT, HANDBOOK_DOCS).documents == 3
        for _ in range(6):  # new connections: both workers answer some of them
            with CairnClient(url, KEY, retries=0) as fresh:
                found = fresh.find("how long until my refund reaches the card?", limit=3)
                assert found.resources[0].uri == f"{ROOT}/billing/refunds.md"


def test_a_negative_worker_count_is_refused_with_what_is_allowed(tmp_path):
    out = subprocess.run([sys.executable, "-m", "cairn.cli.main", "--home", str(tmp_path), "serve", "--workers", "-1"],
                         capture_output=True, text=True, timeout=120, env=dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True"))
    assert out.returncode != 0 and "--workers -1" in out.stderr and "0 for one per core" in out.stderr


OTHER_KEY = "globex-key-0123456789abcdef"
OTHER_DOC = {"path": "parking.md", "text": "# Parking\n\nGlobex staff park in garage B, level two."}


@pytest.fixture(scope="module")
def one_worker(tmp_path_factory):
    """One worker, so every request below reaches the same process."""
    home = tmp_path_factory.mktemp("one-worker")
    keys = home / "keys.json"
    keys.write_text(json.dumps({KEY: "acme", OTHER_KEY: "globex"}))
    # the bulk ingest below must run the model: with the machine's embedding cache warm it ends in
    # well under a second, before the searches begin
    with cairn_serve(home / "home", keys, workers=1, env={"CAIRN_EMBEDDING_CACHE": "off"}) as (_, url):
        with CairnClient(url, KEY, retries=0) as client:
            client.put_documents(ROOT, HANDBOOK_DOCS)
        with CairnClient(url, OTHER_KEY, retries=0) as client:
            client.put_documents(ROOT, [OTHER_DOC])
        yield url


def _long_documents(n: int) -> list[dict[str, str]]:
    """``n`` pages of a few thousand characters each: an ingest of them runs for seconds."""
    return [{"path": f"archive/team{i % 5}/minutes-{i}.md",
             "text": f"# Meeting minutes {i}\n\n" + " ".join(
                 f"Item {j}: the team reviewed the rollout of release {i}.{j} and agreed on the next step for ticket {i * 31 + j}."
                 for j in range(25))} for i in range(n)]


def test_a_search_is_answered_while_a_bulk_ingest_runs_in_the_same_process(one_worker):
    """The searches are answered while the ingest still runs (before, each waited for all of it)."""
    url, ingest = one_worker, {}

    def bulk() -> None:
        with CairnClient(url, KEY, retries=0, timeout_s=600) as writer:
            ingest["summary"] = writer.put_documents("cairn://resources/archive", _long_documents(40))
        ingest["done"] = time.monotonic()

    thread = threading.Thread(target=bulk)
    thread.start()
    time.sleep(1.0)  # the ingest is under way
    answered = []
    with CairnClient(url, KEY, retries=0) as reader:
        for _ in range(5):
            found = reader.find("how long until my refund reaches the card?", limit=3)
            assert found.resources[0].uri == f"{ROOT}/billing/refunds.md"
            answered.append(time.monotonic())
    thread.join(timeout=600)
    assert ingest["summary"].documents == 40
    assert max(answered) < ingest["done"], "the searches waited for the ingest to finish"


def test_agents_chatting_remembering_and_writing_side_by_side_lose_nothing(one_worker):
    """Three chats, two users' memories, a writer and another tenant's searches at once through one
    process: every answer is a success and the caller's own (tenant, user), every message is kept
    in order, every memory and document is there after."""
    url, failures = one_worker, []

    def chat(user: str) -> None:
        with CairnClient(url, KEY, retries=0) as client:
            sid = client.create_session(user=user).id
            for i in range(8):
                client.append_message(sid, "user", f"{user} asks question {i} about refunds")
                found = client.search("how long until my refund reaches the card?", session_id=sid, limit=3)
                assert any(r.uri == f"{ROOT}/billing/refunds.md" for r in found.resources)
            said = [m.content for m in client.get_session(sid, recent=100).recent]
            assert said == [f"{user} asks question {i} about refunds" for i in range(8)]

    def remember(user: str) -> None:
        with CairnClient(url, KEY, retries=0) as client:
            for i in range(10):
                client.remember(f"{user} prefers option {i}", "preferences", user=user, key=f"pref-{i}")
            listed = client.list_memories(user).memories
            assert {f"pref-{i}" for i in range(10)} <= {m.uri.rsplit("/", 1)[-1] for m in listed}
            assert all(m.text.startswith(user) for m in listed), [m.text for m in listed]

    def write() -> None:
        with CairnClient(url, KEY, retries=0) as client:
            for i in range(8):
                client.put_documents("cairn://resources/notices", [{"path": f"n{i}.md", "text": f"# Notice {i}\n\nThe lift in block {i} is serviced."}])
            names = {c.uri.rsplit("/", 1)[-1] for c in client.tree("cairn://resources/notices").children}
            assert names == {f"n{i}.md" for i in range(8)}

    def other_tenant() -> None:
        with CairnClient(url, OTHER_KEY, retries=0) as client:
            for _ in range(20):
                found = [r.uri.rsplit("/", 1)[-1] for r in client.find("where can staff leave the car?", limit=3).resources]
                assert found[:1] == ["parking.md"] and "refunds.md" not in found, found

    def run(job: Callable[..., None], *args: str) -> None:
        try:
            job(*args)
        except Exception as exc:  # noqa: BLE001 (reported below, with the job that failed)
            failures.append(f"{job.__name__}{args}: {exc!r}")

    jobs = [(chat, "ann"), (chat, "bob"), (chat, "carol"), (remember, "ann"), (remember, "dave"), (write,), (other_tenant,)]
    threads = [threading.Thread(target=run, args=job) for job in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert failures == []


def test_a_worker_that_dies_is_replaced_and_the_port_keeps_answering(tmp_path):
    keys = tmp_path / "keys.json"
    keys.write_text(json.dumps({KEY: "acme"}))
    with cairn_serve(tmp_path / "home", keys, workers=2) as (proc, url):
        with CairnClient(url, KEY, retries=0) as client:
            client.put_documents(ROOT, HANDBOOK_DOCS)
        first = _workers(proc.pid)
        os.kill(first[0], 9)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and (len(_workers(proc.pid)) < 2 or first[0] in _workers(proc.pid)):
            time.sleep(0.2)
        assert len(_workers(proc.pid)) == 2 and first[0] not in _workers(proc.pid)
        for _ in range(6):  # new connections: the replacement answers some of them once it is warm
            with CairnClient(url, KEY, retries=3) as fresh:
                assert fresh.find("how long until my refund reaches the card?", limit=3).resources[0].uri.endswith("refunds.md")


def test_a_server_stopped_while_its_workers_warm_leaves_no_process_behind(tmp_path):
    """Stopped while its forked workers still load the model: every worker ends with the supervisor."""
    proc = subprocess.Popen([sys.executable, "-m", "cairn.cli.main", "--home", str(tmp_path), "serve", "--workers", "2",
                             "--port", "0"], stderr=subprocess.DEVNULL, env=dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True"))
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(_workers(proc.pid)) < 2:
            time.sleep(0.05)
        workers = _workers(proc.pid)
        assert len(workers) == 2
        proc.terminate()
        assert proc.wait(timeout=60) is not None
        time.sleep(0.5)
        assert [w for w in workers if Path(f"/proc/{w}").exists() and "Z" not in Path(f"/proc/{w}/stat").read_text().split()[2]] == []
    finally:
        proc.kill()
