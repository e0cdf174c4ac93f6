"""The embedded store under concurrent writer processes and under a kill at every write step.

* Concurrency: 8 ingest processes (one root each), a process deleting seeded records and a
  process answering finds, all on one home at once, 3 trials: afterwards every root holds
  exactly what a sequential ingest gives, the deletes all happened, and no find failed.
* Faults: a hook in the store (``local_persistence.set_fault_hook``) SIGKILLs a worker
  process at one named write step, for every step and at the 1st and 2nd write of the job;
  the store must then load, hold the state before or after each whole write (never a mix),
  and a re-run of the job must end with exactly the expected records.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from cairn.core.models import ContextRecord
from cairn.ports.vectorstores import VectorQuery
from cairn.ports.vectorstores import local_persistence as persist
from cairn.ports.vectorstores.local import LocalVectorStore

pytestmark = pytest.mark.integration

DIM = 4
TENANT = "acme"
WORKER = textwrap.dedent(
    '''
    import json, os, signal, sys, time
    from pathlib import Path
    import numpy as np
    from cairn.core.models import ContextRecord
    from cairn.ports.vectorstores import VectorQuery
    from cairn.ports.vectorstores import local_persistence as persist
    from cairn.ports.vectorstores.local import LocalVectorStore

    args = json.loads(sys.argv[1])
    home, mode = Path(args["home"]), args["mode"]
    persist.MAX_SEGMENTS = args.get("max_segments", persist.MAX_SEGMENTS)
    if args.get("fault"):
        step, nth = args["fault"]
        seen = {"n": 0}
        def hook(name):
            if name == step:
                seen["n"] += 1
                if seen["n"] == nth:
                    os.kill(os.getpid(), signal.SIGKILL)
        persist.set_fault_hook(hook)
    while not (home / "go").exists():  # start together
        time.sleep(0.005)
    store = LocalVectorStore(home / "store", dimension=4)
    if mode == "ingest":
        from cairn.ports.embeddings.base import Embedder, normalize
        from cairn.engine.ingest import Ingestor
        from cairn.engine.ingest.sources import Document

        class Tiny(Embedder):
            name, dimension = "tiny", 4
            def _embed(self, texts):
                return normalize(np.array([[len(t) + 1, t.count("e") + 1, t.count(" ") + 1, 1] for t in texts], dtype=np.float32))

        docs = [Document(("notes", f"n{i}.md"), f"note {i} of root {args['root']}: " + "word " * (i % 7)) for i in range(args["docs"])]
        Ingestor(store, Tiny(), "acme", batch_size=args["batch"]).ingest(docs, f"cairn://resources/r{args['root']}")
    elif mode == "delete":
        for i in args["ids"]:
            store.delete("acme", [i])
    elif mode == "find":
        n = 0
        while not (home / "stop").exists():
            store.query(VectorQuery(tenant="acme", vector=[1.0, 0.0, 0.0, 0.0], limit=5))
            store.count("acme", {"level": 2})
            n += 1
        print(n)
    elif mode == "job":
        exec(args["job"])
    '''
)


def _run_workers(tmp_path: Path, home: Path, specs: list[dict]) -> list[subprocess.CompletedProcess]:
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    procs = [
        subprocess.Popen([sys.executable, str(script), json.dumps({"home": str(home), **s})],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        for s in specs
    ]
    return procs  # type: ignore[return-value]


def _wait(procs, timeout=120):
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=timeout)
        out.append((p.returncode, stdout, stderr))
    return out


# ------------------------------------------------------------------ concurrency


def _rec(i: str, title: str = "", vec=(1.0, 0.0, 0.0, 0.0)) -> ContextRecord:
    return ContextRecord.build(tenant=TENANT, uri=f"cairn://resources/seed/{i}", level=2, vector=list(vec), title=title)


def _root_ids(store: LocalVectorStore, root: int) -> set[str]:
    hits = store.query(VectorQuery(tenant=TENANT, vector=[1.0, 0, 0, 0], limit=1000,
                                   filter={"ancestors": f"cairn://resources/r{root}"}))
    below = {h.record.id for h in hits}
    return below | {r.id for r in store.fetch(TENANT, [*_root_record_ids(root)])}


def _root_record_ids(root: int) -> list[str]:
    from cairn.core.models import record_id

    return [record_id(TENANT, f"cairn://resources/r{root}", level) for level in (0, 1)]


def test_eight_concurrent_ingests_a_deleter_and_a_reader_lose_nothing(tmp_path):
    writers, trials, docs, seeds = 8, 3, 24, 30
    # what one ingest gives, alone
    ref_home = tmp_path / "ref"
    (ref_home).mkdir()
    (ref_home / "go").touch()
    assert [rc for rc, *_ in _wait(_run_workers(tmp_path, ref_home, [{"mode": "ingest", "root": 0, "docs": docs, "batch": 5}]))] == [0]
    per_root = len(_root_ids(LocalVectorStore(ref_home / "store", dimension=DIM), 0))
    assert per_root == docs + 4  # the leaves, and L0 + L1 of the root and of its folder

    for trial in range(trials):
        home = tmp_path / f"trial{trial}"
        home.mkdir()
        seeded = LocalVectorStore(home / "store", dimension=DIM)
        seed_recs = [_rec(f"s{i}") for i in range(seeds)]
        seeded.upsert(seed_recs)
        doomed = [r.id for r in seed_recs[::2]]
        specs = [{"mode": "ingest", "root": k, "docs": docs, "batch": 5} for k in range(writers)]
        specs += [{"mode": "delete", "ids": doomed}, {"mode": "find"}]
        procs = _run_workers(tmp_path, home, specs)
        time.sleep(0.5)
        (home / "go").touch()
        results = _wait(procs[:-1])
        (home / "stop").touch()
        results += _wait(procs[-1:])
        assert [rc for rc, *_ in results] == [0] * len(specs), [err[-2000:] for rc, _, err in results if rc]
        assert int(results[-1][1]) > 0  # the reader answered while the writers wrote

        store = LocalVectorStore(home / "store", dimension=DIM)
        for k in range(writers):
            assert len(_root_ids(store, k)) == per_root, f"trial {trial}: root r{k}"
        assert store.count(TENANT) == writers * per_root + seeds - len(doomed)
        assert store.fetch(TENANT, doomed) == []
        segments = json.loads((home / "store" / "tenants" / TENANT / persist.MANIFEST).read_text())["segments"]
        assert len(segments) <= persist.MAX_SEGMENTS


# ------------------------------------------------------------------ a kill at every write step

JOB = textwrap.dedent(
    '''
    def rec(i, title, vec):
        return ContextRecord.build(tenant="acme", uri=f"cairn://resources/seed/{i}", level=2, vector=vec, title=title)
    store.upsert([rec(f"b{i}", "first", [1.0, i, 0.0, 0.0]) for i in range(10)])
    store.delete("acme", [ContextRecord.build(tenant="acme", uri=f"cairn://resources/seed/s{i}", level=2, vector=[1.0, 0, 0, 0]).id for i in range(3)])
    store.upsert([rec(f"b{i}", "second", [0.0, 1.0, i, 0.0]) for i in range(5, 15)])
    '''
)


def _state(store: LocalVectorStore) -> dict[str, str]:
    hits = store.query(VectorQuery(tenant=TENANT, vector=[1.0, 1.0, 1.0, 1.0], limit=1000))
    return {h.record.uri: h.record.title for h in hits}


def _seed(path: Path) -> None:
    store = LocalVectorStore(path, dimension=DIM)
    store.upsert([_rec(f"s{i}", "seed") for i in range(3)])
    store.upsert([_rec(f"s{i}", "seed") for i in range(3, 6)])  # two segments, so the job compacts


def _reference_states(tmp_path: Path) -> list[dict[str, str]]:
    """The state after 0, 1, 2 and 3 writes of the job, computed in memory."""
    store = LocalVectorStore(None, dimension=DIM)
    store.upsert([_rec(f"s{i}", "seed") for i in range(6)])
    states = [_state(store)]
    for line in JOB.strip().splitlines()[2:]:
        exec(line, {"store": store, "ContextRecord": ContextRecord, "rec": lambda i, title, vec: ContextRecord.build(
            tenant=TENANT, uri=f"cairn://resources/seed/{i}", level=2, vector=vec, title=title)})
        states.append(_state(store))
    return states


@pytest.mark.parametrize("nth", [1, 2])
def test_a_kill_at_every_write_step_leaves_a_store_that_loads_and_a_rerun_finishes(tmp_path, nth):
    states = _reference_states(tmp_path)
    killed = []
    for step in persist.WRITE_STEPS:
        home = tmp_path / f"{step}-{nth}"
        home.mkdir()
        (home / "go").touch()
        _seed(home / "store")
        [(rc, _out, err)] = _wait(_run_workers(tmp_path, home, [{"mode": "job", "job": JOB, "fault": [step, nth], "max_segments": 2}]))
        assert rc == -signal.SIGKILL, f"{step}: the worker was not killed (rc {rc}): {err[-1500:]}"
        killed.append(step)

        after_kill = LocalVectorStore(home / "store", dimension=DIM)  # loads
        assert _state(after_kill) in states, f"kill at {step} (#{nth}) left a state that is no whole write"
        rerun = LocalVectorStore(home / "store", dimension=DIM)
        exec(JOB, {"store": rerun, "ContextRecord": ContextRecord})
        assert _state(LocalVectorStore(home / "store", dimension=DIM)) == states[-1], f"re-run after a kill at {step}"
    assert killed == list(persist.WRITE_STEPS)


def test_a_failed_write_in_a_live_process_leaves_it_consistent(tmp_path):
    """A write step that raises (a full disk, say) loses only that write; the process goes on."""
    states = _reference_states(tmp_path)

    class DiskFull(OSError):
        pass

    for step in persist.WRITE_STEPS:
        path = tmp_path / step
        _seed(path)
        store = LocalVectorStore(path, dimension=DIM)
        old_max = persist.MAX_SEGMENTS
        persist.MAX_SEGMENTS = 2

        def hook(name, step=step):
            if name == step:
                raise DiskFull(28, "No space left on device")

        persist.set_fault_hook(hook)
        try:
            with pytest.raises(Exception):
                exec(JOB, {"store": store, "ContextRecord": ContextRecord})
        finally:
            persist.set_fault_hook(None)
            persist.MAX_SEGMENTS = old_max
        assert _state(store) in states[:2]  # this process: the first write committed, or not
        assert _state(store) == _state(LocalVectorStore(path, dimension=DIM))  # and it agrees with the disk
        exec(JOB, {"store": store, "ContextRecord": ContextRecord})
        assert _state(store) == _state(LocalVectorStore(path, dimension=DIM)) == states[-1]


def test_vectors_are_stored_bit_for_bit(tmp_path):
    _seed(tmp_path / "s")
    store = LocalVectorStore(tmp_path / "s", dimension=DIM)
    vec = np.asarray([0.1, 0.2, 0.3, 0.4], dtype=np.float32)
    store.upsert([_rec("v", "v", vec.tolist())])
    got = LocalVectorStore(tmp_path / "s", dimension=DIM).fetch(TENANT, [_rec("v").id])[0].vector
    np.testing.assert_array_equal(np.asarray(got, dtype=np.float32), vec / np.linalg.norm(vec))
