"""Memories: remember, commit (episodes; typed memories with a scripted LLM), isolation between
users, idempotent and fault-tolerant commits, and the use recorder behind hotness."""

from __future__ import annotations

import json
from typing import Any

import pytest

from cairn import Cairn
from cairn.core.errors import RequestError, VectorStoreError
from cairn.core.models import Level, record_id
from cairn.engine.memory import MemoryService, UseRecorder, memory_root
from cairn.engine.memory.hotness import LAST_USED, use_hotness
from cairn.ports.sessions import open_session_store
from cairn.ports.vectorstores.local import LocalVectorStore

pytestmark = pytest.mark.unit
T = "acme"
MAY_8_2023 = 1_683_554_160.0


class FailingStore:
    """The real store, except that upsert call number ``fail_on`` raises (once)."""

    def __init__(self, real: LocalVectorStore, fail_on: int) -> None:
        self.real = real
        self.fail_on = fail_on
        self.upserts = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def upsert(self, records):
        self.upserts += 1
        if self.upserts == self.fail_on:
            raise VectorStoreError("injected failure", retryable=True)
        return self.real.upsert(records)

    def record_uses(self, tenant, uses, now):  # the side table the use recorder writes to
        self.upserts += 1
        if self.upserts == self.fail_on:
            raise VectorStoreError("injected failure", retryable=True)
        return self.real.record_uses(tenant, uses, now)


class ScriptedLLM:
    """Answers each prompt by its name with the next scripted answer; records the prompts."""

    model = "scripted"

    def __init__(self, answers: dict[str, list[str]]) -> None:
        self.answers = answers
        self.prompts: list[str] = []

    def complete(self, prompt: str, *, system: str | None = None, timeout_s: float | None = None, json: bool = True) -> str:
        self.prompts.append(prompt)
        name = "memory_merge" if "<existing>" in prompt else "memory_extraction"
        queue = self.answers.get(name) or []
        if not queue:
            from cairn.core.errors import PlanningError

            raise PlanningError("no scripted answer")
        return queue.pop(0)


@pytest.fixture
def store(tmp_path, embedder):
    return LocalVectorStore(tmp_path / "store", dimension=embedder.dimension)


@pytest.fixture
def sessions(tmp_path):
    return open_session_store("sqlite", path=tmp_path / "sessions.db")


def _records_under(store, user: str) -> dict[str, tuple[str, list[str]]]:
    """Every record under the user's memories: uri@level -> (text, cites), read by a full scan."""
    part = store._part(T)
    out = {}
    for doc in part.docs if part else []:
        if doc and doc["uri"].startswith(memory_root(user)):
            out[f"{doc['uri']}@{doc['level']}"] = (doc["text"], list(doc["metadata"].get("cites", [])))
    return out


def _chat(sessions, user: str, lines: list[tuple[str, str, str]]) -> str:
    s = sessions.create(T, user=user)
    for n, (role, name, text) in enumerate(lines):
        sessions.append(T, s.id, role, text, name=name, created_at=MAY_8_2023 + 60 * n)
    return s.id


CHAT = [
    ("user", "Caroline", "I went to an LGBTQ support group yesterday and it was so powerful."),
    ("assistant", "Melanie", "That sounds amazing! What happened there?"),
    ("user", "Caroline", "People shared their transgender stories; I felt accepted."),
    ("assistant", "Melanie", "I painted a sunrise over the lake last week."),
    ("user", "Caroline", "I want to study counseling and mental health next year."),
]


def test_remember_adds_and_updates_one_memory_and_keeps_its_siblings(store, embedder):
    svc = MemoryService(store, embedder, T)
    food = svc.remember("ann", "Ann is vegetarian and loves spicy Thai food.", "preferences", key="food")
    svc.remember("ann", "Ann drinks oat milk.", "preferences", key="milk", metadata={"confidence": 0.9}, source="chat:42")
    again = svc.remember("ann", "Ann is vegan since March.", "preferences", key="food")
    assert food.created and not again.created and again.uri == food.uri == "cairn://user/ann/memories/preferences/food"
    milk = store.fetch(T, [record_id(T, "cairn://user/ann/memories/preferences/milk", Level.DETAIL)])
    assert milk and milk[0].metadata["source"] == "chat:42" and milk[0].metadata["confidence"] == 0.9
    food_rec = store.fetch(T, [record_id(T, food.uri, Level.DETAIL)])[0]
    assert food_rec.text == "Ann is vegan since March."
    assert store.count(T, {"parent_uri": "cairn://user/ann/memories/preferences", "level": 2}) == 2
    l0, l1 = (store.fetch(T, [record_id(T, "cairn://user/ann/memories/preferences", lv)])[0] for lv in (0, 1))
    assert "2 memories" in l0.abstract and "vegan" in l1.text and "oat milk" in l1.text
    root = store.fetch(T, [record_id(T, memory_root("ann"), Level.ABSTRACT)])[0]
    assert "1 category" in root.abstract and "preferences" in root.abstract


def test_remember_rejects_what_it_cannot_store(store, embedder):
    svc = MemoryService(store, embedder, T)
    with pytest.raises(RequestError, match="category"):
        svc.remember("ann", "x", "Food Prefs")
    with pytest.raises(RequestError, match="reserved"):
        svc.remember("ann", "x", "notes", metadata={"cites": ["s#1"]})
    with pytest.raises(RequestError, match="empty"):
        svc.remember("ann", "  ", "notes")
    with pytest.raises(RequestError, match="user"):
        svc.remember("../bob", "x", "notes")


def test_a_users_search_never_returns_another_users_memories(store, embedder, sessions):
    svc = MemoryService(store, embedder, T, sessions=sessions)
    svc.remember("ann", "Ann's dog is a beagle named Rex.", "entities", key="dog")
    svc.remember("bob", "Bob's dog is a beagle named Max.", "entities", key="dog")
    svc.commit(_chat(sessions, "bob", [("user", "Bob", "My beagle Max chewed my shoes.")]))
    cairn = Cairn(store, embedder, T, sessions=sessions)
    asked = sessions.create(T, user="ann")
    for result in (
        cairn.search("what is the name of the beagle dog", session_id=asked.id, user="ann", context_type="memory", limit=20),
        cairn.find("beagle dog name", user="ann", context_type="memory", limit=20),
    ):
        assert result.memories, "ann's own memory must be found"
        assert all(m.uri.startswith("cairn://user/ann/") for m in result.memories)


def test_commit_keeps_what_the_user_said_with_speaker_date_citations_and_the_replies_as_context(store, embedder, sessions):
    svc = MemoryService(store, embedder, T, sessions=sessions, window=2)
    sid = _chat(sessions, "caroline", CHAT)
    done = svc.commit(sid)
    assert (done.messages, done.committed_through, len(done.episodes), done.stored) == (5, 5, 3, 3)
    first = store.fetch(T, [record_id(T, done.episodes[0], Level.DETAIL)])[0]
    assert first.metadata["cites"] == [f"{sid}#1"]  # only the user's own words are a memory of the user
    assert first.metadata["context_seqs"] == ["2"]
    assert first.metadata["speakers"] == ["Caroline"] and first.metadata["date"].startswith("8 May 2023")
    assert first.text.startswith("[8 May 2023, 13:56] Caroline: I went to an LGBTQ support group")
    assert first.text.endswith("(context) Melanie: That sounds amazing! What happened there?")
    assert "kept 3 things caroline said as episodic memories" in done.summary and "no LLM" in done.summary
    # two replies, each the context of the turn before and after it: the report counts them once
    assert "(with 2 assistant replies as their context)" in done.summary
    assert sessions.get(T, sid).session.committed_through == 5


def test_without_an_llm_an_assistants_reply_is_never_a_memory_of_the_user(store, embedder, sessions):
    svc = MemoryService(store, embedder, T, sessions=sessions)
    sid = _chat(sessions, "ann", [("user", None, "Which plan am I on?"), ("assistant", None, "I don't know."),
                                  ("assistant", None, "Anything else?")])
    done = svc.commit(sid)
    texts = [t for t, _ in _records_under(store, "ann").values()]
    assert len(done.episodes) == 1 and done.stored == 1
    assert not any(t.startswith("[") and "assistant: I don't know" in t.split("\n")[0] for t in texts)
    episode = store.fetch(T, [record_id(T, done.episodes[0], Level.DETAIL)])[0]
    assert episode.metadata["cites"] == [f"{sid}#1"] and "(context) assistant: I don't know." in episode.text


def test_committing_twice_adds_nothing_and_a_later_commit_completes_the_open_window(store, embedder, sessions):
    svc = MemoryService(store, embedder, T, sessions=sessions, window=2)
    sid = _chat(sessions, "caroline", CHAT)
    svc.commit(sid)
    before = _records_under(store, "caroline")
    again = svc.commit(sid)
    assert (again.messages, again.written) == (0, 0) and _records_under(store, "caroline") == before
    sessions.append(T, sid, "assistant", "Counseling would suit you.", name="Melanie")
    sessions.append(T, sid, "user", "Thanks, I will apply in March.", name="Caroline")
    later = svc.commit(sid)
    # the window 5-6 is completed in place (its user turn now has its reply as context), 7-8 is new
    assert later.episodes == [f"cairn://user/caroline/memories/episodes/{sid}-00000{n}" for n in (5, 7)]
    rec = store.fetch(T, [record_id(T, later.episodes[0], Level.DETAIL)])[0]
    assert rec.metadata["cites"] == [f"{sid}#5"] and rec.text.endswith("(context) Melanie: Counseling would suit you.")
    assert store.count(T, {"ancestors": memory_root("caroline"), "level": 2}) == 4


@pytest.mark.parametrize("fail_on", [1, 2, 3, 4])
def test_a_commit_failing_half_way_leaves_no_partial_memory_and_a_retry_completes(tmp_path, embedder, fail_on):
    clean_store = LocalVectorStore(tmp_path / "clean", dimension=embedder.dimension)
    clean_sessions = open_session_store("sqlite", path=tmp_path / "clean.db")
    clean_sid = _chat(clean_sessions, "caroline", CHAT)
    MemoryService(clean_store, embedder, T, sessions=clean_sessions, write_batch=2).commit(clean_sid)

    sessions = open_session_store("sqlite", path=tmp_path / "s.db")
    sid = _chat(sessions, "caroline", CHAT)
    failing = FailingStore(LocalVectorStore(tmp_path / "store", dimension=embedder.dimension), fail_on)
    svc = MemoryService(failing, embedder, T, sessions=sessions, write_batch=2)  # 5 turns: 3 upserts, then folders
    with pytest.raises(VectorStoreError):
        svc.commit(sid)
    assert sessions.get(T, sid).session.committed_through == 0  # the mark moves only after every write
    for key, (text, cites) in _records_under(failing.real, "caroline").items():
        if key.endswith("@2"):  # every memory stored is whole: one turn, its own citation
            seq = int(cites[0].split("#")[1])
            assert len(cites) == 1 and CHAT[seq - 1][2] in text
    done = svc.commit(sid)
    assert done.committed_through == 5
    got = {k.replace(sid, "S"): v[0].replace(sid, "S") for k, v in _records_under(failing.real, "caroline").items()}
    want = {k.replace(clean_sid, "S"): v[0].replace(clean_sid, "S") for k, v in _records_under(clean_store, "caroline").items()}
    assert got == want  # the retry finished exactly what a clean commit writes


def test_a_session_without_user_cannot_be_committed(store, embedder, sessions):
    s = sessions.create(T)
    sessions.append(T, s.id, "user", "hello")
    with pytest.raises(RequestError, match="no user"):
        MemoryService(store, embedder, T, sessions=sessions).commit(s.id)


def _extraction(*memories: dict) -> str:
    return json.dumps({"memories": list(memories)})


def test_llm_commit_extracts_typed_memories_that_cite_their_messages_and_merges_repeats(store, embedder, sessions):
    llm = ScriptedLLM({
        "memory_extraction": [
            _extraction(
                {"category": "events", "key": "support-group", "title": "Support group",
                 "text": "Caroline went to an LGBTQ support group on 7 May 2023.", "seqs": [1, 3]},
                {"category": "hobbies", "key": "x", "text": "dropped: unknown category", "seqs": [1]},
                {"category": "profile", "key": "y", "text": "dropped: cites no message given", "seqs": [99]},
            ),
            _extraction({"category": "events", "key": "group-again", "text": "Caroline went to an LGBTQ support group again.", "seqs": [6]}),
        ],
        "memory_merge": [json.dumps({"decision": "update", "target": "support-group",
                                     "text": "Caroline goes to an LGBTQ support group (first on 7 May 2023)."})],
    })
    svc = MemoryService(store, embedder, T, sessions=sessions, llm=llm)
    sid = _chat(sessions, "caroline", CHAT)
    first = svc.commit(sid)
    assert first.extracted == ["cairn://user/caroline/memories/events/support-group"] and len(first.episodes) == 3
    assert "<messages>" in llm.prompts[0] and "[seq 1]" in llm.prompts[0]  # the conversation goes in as data
    sessions.append(T, sid, "user", "Went to the support group again tonight.", name="Caroline")
    second = svc.commit(sid)
    assert second.merged == 1 and second.extracted == ["cairn://user/caroline/memories/events/support-group"]
    rec = store.fetch(T, [record_id(T, second.extracted[0], Level.DETAIL)])[0]
    assert rec.text.startswith("Caroline goes to an LGBTQ support group")
    assert rec.metadata["cites"] == sorted([f"{sid}#1", f"{sid}#3", f"{sid}#6"])
    assert store.count(T, {"parent_uri": "cairn://user/caroline/memories/events", "level": 2}) == 1


def test_llm_failure_falls_back_to_archiving_and_a_retry_skips_known_memories(store, embedder, sessions):
    answer = _extraction({"category": "preferences", "key": "counseling", "text": "Caroline wants to study counseling.", "seqs": [5]})
    llm = ScriptedLLM({"memory_extraction": [answer]})
    svc = MemoryService(store, embedder, T, sessions=sessions, llm=llm)
    sid = _chat(sessions, "caroline", CHAT)
    assert svc.commit(sid).extracted
    llm.answers["memory_extraction"] = [answer]  # the same answer again, e.g. a commit retried after its writes
    assert svc.extractor.extract("caroline", sid, sessions.list_messages(T, sid)).skipped == 1
    sessions.append(T, sid, "user", "More news soon.", name="Caroline")
    broken = svc.commit(sid)  # no scripted answer left: the LLM fails
    assert broken.extractor.startswith("fallback:") and len(broken.episodes) == 1 and broken.committed_through == 6


def test_use_recorder_counts_top_results_and_l2_reads_off_the_request_path(store, embedder):
    svc = MemoryService(store, embedder, T)
    uri = svc.remember("ann", "Ann's dog is a beagle named Rex.", "entities", key="dog").uri
    svc.remember("ann", "Ann works night shifts.", "profile", key="work")
    result = Cairn(store, embedder, T).find("beagle", user="ann", context_type="memory", limit=1)
    recorder = UseRecorder(store, background=False, clock=lambda: 2_000_000_000.0)
    recorder.record_result(T, result)
    recorder.record_read(T, uri, 2)
    rid = record_id(T, uri, Level.DETAIL)
    assert store.fetch(T, [rid])[0].active_count == 0  # nothing written on the request path
    assert recorder.flush() >= 1
    rec = store.fetch(T, [rid])[0]
    assert rec.active_count == 2 and rec.metadata[LAST_USED] == 2_000_000_000.0
    assert use_hotness(rec, 2_000_000_000.0) > use_hotness(rec, 2_000_000_000.0 + 30 * 86400) > 0
    assert rec.text == "Ann's dog is a beagle named Rex." and rec.vector is not None


def test_use_recorder_keeps_counts_when_a_flush_fails(store, embedder):
    svc = MemoryService(store, embedder, T)
    uri = svc.remember("ann", "Ann likes tea.", "preferences", key="tea").uri
    rid = record_id(T, uri, Level.DETAIL)
    failing = FailingStore(store, fail_on=1)
    recorder = UseRecorder(failing, background=False)
    recorder.record(T, [rid])
    assert recorder.flush() == 0 and recorder.failures == 1 and recorder.pending() == 1
    recorder.record(T, [rid])
    recorder.close()
    assert store.fetch(T, [rid])[0].active_count == 2


def test_memory_search_matches_words_and_stays_in_the_users_memories(store, embedder):
    from cairn.engine.memory.search import search_memories

    svc = MemoryService(store, embedder, T)
    svc.remember("ann", "Ann's passport number ends in XK42.", "profile", key="passport")
    svc.remember("ann", "Ann enjoys hiking in the Alps.", "preferences", key="hiking")
    svc.remember("bob", "Bob's passport number ends in XK42 too.", "profile", key="passport")
    hits = search_memories(store, embedder, T, "ann", "XK42", limit=5)
    assert hits[0].record.uri == "cairn://user/ann/memories/profile/passport"
    assert all(h.record.owner == "ann" and h.record.level == Level.DETAIL for h in hits)
    only = search_memories(store, embedder, T, "ann", "mountains", limit=5, categories=["preferences"])
    assert [h.record.uri for h in only] == ["cairn://user/ann/memories/preferences/hiking"]


def test_a_commit_writes_what_it_stored_on_its_usage_line(monkeypatch, store, embedder, sessions) -> None:
    from cairn.app import application
    from cairn.ports.observability.usage import record_usage

    lines = []
    monkeypatch.setattr(application, "record_usage", lambda *a, **kw: lines.append((a, kw)) or record_usage(*a, **kw))
    cairn = Cairn(store, embedder, "acme", sessions=sessions)
    sid = sessions.create("acme", user="ann").id
    for role, text in (("user", "I moved to Lisbon last month."), ("assistant", "Welcome to Lisbon!"),
                       ("user", "My daughter starts school there in September.")):
        sessions.append("acme", sid, role, text)
    done = cairn.commit(sid)
    (args, counts), = [line for line in lines if line[0][1] == "commit"]
    assert args == ("acme", "commit")
    assert counts["messages"] == 3 and counts["episodes"] == len(done.episodes) >= 1
    assert counts["typed_memories"] == 0 and counts["records_written"] == done.written > 0
