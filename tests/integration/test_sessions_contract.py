"""One behavioural suite for every SessionStore backend: SQLite, and DynamoDB on a moto server."""

from __future__ import annotations

import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from cairn.core.errors import RequestError, SessionConflict, SessionNotFound
from cairn.engine.memory.session_summaries import ExtractiveSummarizer
from cairn.ports.sessions import Message, open_session_store
from cairn.ports.sessions.base import MAX_CONTENT_CHARS, MAX_SUMMARY_CHARS
from tests.ports import free_port, fresh_moto

pytestmark = pytest.mark.integration
TABLE = "cairn-sessions"


@pytest.fixture(scope="module")
def moto_endpoint(monkeypatch_module):
    from moto.server import ThreadedMotoServer

    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch_module.setenv(key, value)
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield fresh_moto(f"http://127.0.0.1:{port}")
    server.stop()


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


@pytest.fixture(scope="module")
def dynamodb_client(moto_endpoint):
    import boto3
    from botocore.config import Config

    from cairn.ports.sessions.dynamodb import create_table

    client = boto3.client(
        "dynamodb", region_name="us-east-1", endpoint_url=moto_endpoint,
        config=Config(max_pool_connections=32, retries={"max_attempts": 2}),
    )
    create_table(client, TABLE)
    return client


@pytest.fixture(params=["sqlite", "dynamodb"])
def store(request, tmp_path):
    if request.param == "sqlite":
        yield open_session_store("sqlite", path=tmp_path / "sessions.db", keep_last=3, max_messages=6)
    else:
        client = request.getfixturevalue("dynamodb_client")
        yield open_session_store("dynamodb", table=TABLE, client=client, keep_last=3, max_messages=6)


def test_create_append_get(store):
    s = store.create("acme", user="ann")
    store.append("acme", s.id, "user", "Is the Acorn Guest House quiet?")
    store.append("acme", s.id, "assistant", "Yes, guests say it is very quiet.")
    m = store.append("acme", s.id, "user", "Do they have parking?")
    assert isinstance(m, Message) and m.seq == 3 and m.role == "user"
    view = store.get("acme", s.id, recent=2)
    assert [x.content for x in view.recent] == ["Yes, guests say it is very quiet.", "Do they have parking?"]
    assert view.message_count == 3 and view.unsummarized_count == 3
    assert view.session.user == "ann" and view.summary == "" and view.prefetched is None
    assert [x.seq for x in store.list_messages("acme", s.id)] == [1, 2, 3]
    assert [x.seq for x in store.list_messages("acme", s.id, after_seq=1, limit=1)] == [2]


def test_tenants_are_isolated(store):
    s = store.create("acme")
    store.append("acme", s.id, "user", "hello")
    with pytest.raises(SessionNotFound):
        store.get("globex", s.id)
    with pytest.raises(SessionNotFound):
        store.append("globex", s.id, "user", "sneaky")
    assert store.get("acme", s.id).message_count == 1


def test_prefetched_context_round_trips(store):
    s = store.create("acme")
    ctx = {"resources": [{"uri": "cairn://resources/a.md", "score": 0.7}], "total": 1}
    store.set_prefetched("acme", s.id, ctx)
    assert store.get("acme", s.id).prefetched == ctx


def test_a_prefetch_for_an_earlier_message_never_replaces_a_later_ones(store):
    """The stream's prefetch is keyed on the message: written only over an earlier message's."""
    s = store.create("acme")
    assert store.prefetched_seq("acme", s.id) == 0
    assert store.set_prefetched("acme", s.id, {"total": 2}, seq=2) is True
    assert store.set_prefetched("acme", s.id, {"total": 1}, seq=1) is False  # late: the newer one stays
    assert store.set_prefetched("acme", s.id, {"total": 9}, seq=2) is False  # redelivered: stays too
    assert store.get("acme", s.id).prefetched == {"total": 2} and store.prefetched_seq("acme", s.id) == 2
    assert store.set_prefetched("acme", s.id, {"total": 3}, seq=3) is True
    assert store.get("acme", s.id).prefetched == {"total": 3}
    assert store.set_prefetched("acme", s.id, {"total": 0}) is True  # a search the caller asked for: always
    assert store.prefetched_seq("acme", s.id) == 0


def test_not_found_and_bad_input(store):
    with pytest.raises(SessionNotFound, match="not found"):
        store.get("acme", "nope")
    with pytest.raises(SessionNotFound):
        store.append("acme", "nope", "user", "hi")
    with pytest.raises(SessionNotFound):
        store.set_prefetched("acme", "nope", {})
    s = store.create("acme")
    with pytest.raises(RequestError, match="role 'robot' is not valid; allowed: user, assistant, system, tool"):
        store.append("acme", s.id, "robot", "hi")
    with pytest.raises(RequestError, match="content is empty"):
        store.append("acme", s.id, "user", "   ")
    with pytest.raises(RequestError, match=f"limit is {MAX_CONTENT_CHARS:,}"):
        store.append("acme", s.id, "user", "x" * (MAX_CONTENT_CHARS + 1))
    with pytest.raises(RequestError, match="tenant"):
        store.create("bad#tenant")
    with pytest.raises(RequestError, match="ttl_s"):
        store.create("acme", ttl_s=5)
    assert store.get("acme", s.id).message_count == 0


def test_delete(store):
    s = store.create("acme")
    store.append("acme", s.id, "user", "hello")
    store.set_prefetched("acme", s.id, {"total": 0})
    assert store.delete("acme", s.id) is True
    assert store.delete("acme", s.id) is False
    with pytest.raises(SessionNotFound):
        store.get("acme", s.id)


def test_expired_sessions_read_as_not_found(store, monkeypatch):
    s = store.create("acme", ttl_s=60)
    store.append("acme", s.id, "user", "hello")
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + 120)
    with pytest.raises(SessionNotFound):
        store.get("acme", s.id)
    with pytest.raises(SessionNotFound):
        store.append("acme", s.id, "user", "too late")


def test_compression_folds_the_oldest_into_the_summary(store):
    s = store.create("acme")
    for n in range(1, 9):
        store.append("acme", s.id, "user" if n % 2 else "assistant", f"Message number {n}. Extra detail.")
    assert store.compress_if_needed("acme", s.id) is not None  # 8 > max_messages=6
    view = store.get("acme", s.id, recent=10)
    assert [m.seq for m in view.recent] == [6, 7, 8]  # keep_last=3
    assert view.summary.splitlines() == [f"{'user' if n % 2 else 'assistant'}: Message number {n}. Extra detail." for n in range(1, 6)]
    assert view.message_count == 8 and view.unsummarized_count == 3
    assert store.compress_if_needed("acme", s.id) is None
    nothing = store.compress("acme", s.id, keep_last=3)
    assert nothing.folded == 0


def test_compression_while_appends_continue_loses_nothing(store):
    s = store.create("acme")
    for n in range(20):
        store.append("acme", s.id, "user", f"early {n}.")
    # The writer is capped: summaries are bounded (MAX_SUMMARY_CHARS; the extractive summarizer
    # drops its oldest lines past it), so "every message is in the summary" only holds below the
    # bound. 1,020 lines of at most 16 characters stay far below it however fast the writer runs.
    late_cap = 1000
    stop = threading.Event()
    appended: list[int] = []

    def writer() -> None:
        n = 0
        while n < 10 or (n < late_cap and not stop.is_set()):
            appended.append(store.append("acme", s.id, "user", f"late {n}.").seq)
            n += 1

    t = threading.Thread(target=writer)

    class SlowSummarizer(ExtractiveSummarizer):
        def summarize(self, previous, messages):  # messages arrive while this runs: wait for some
            seen, deadline = len(appended), time.monotonic() + 5
            while len(appended) < seen + 3 and t.is_alive() and time.monotonic() < deadline:
                time.sleep(0.002)
            return super().summarize(previous, messages)

    t.start()
    try:
        for _ in range(3):
            store.compress("acme", s.id, keep_last=2, summarizer=SlowSummarizer())
    finally:
        stop.set()
        t.join()
    view = store.get("acme", s.id, recent=0)
    held = store.list_messages("acme", s.id)
    summarized = view.summary.splitlines()
    assert len(view.summary) < MAX_SUMMARY_CHARS  # no line dropped by the bound
    # every message is either in the summary (exactly once) or still held, in order
    total = 20 + len(appended)
    assert view.message_count == total
    assert len(summarized) + len(held) == total
    assert [m.seq for m in held] == list(range(view.session.summarized_through + 1, total + 1))
    everything = [line.split(": ", 1)[1] for line in summarized] + [m.content for m in held]
    assert everything == [f"early {n}." for n in range(20)] + [f"late {n}." for n in range(len(appended))]


def test_a_lost_compression_race_is_a_retryable_conflict(store):
    s = store.create("acme")
    for n in range(6):
        store.append("acme", s.id, "user", f"m{n}.")

    class Racing(ExtractiveSummarizer):
        def summarize(self, previous, messages):
            store.compress("acme", s.id, keep_last=1)  # another worker commits first
            return super().summarize(previous, messages)

    with pytest.raises(SessionConflict) as err:
        store.compress("acme", s.id, keep_last=3, summarizer=Racing(), max_attempts=1)
    assert err.value.retryable
    assert [m.seq for m in store.list_messages("acme", s.id)] == [6]


def test_concurrent_appends_store_every_message_once_in_order(store):
    s = store.create("acme")
    with ThreadPoolExecutor(max_workers=16) as pool:
        seqs = list(pool.map(lambda n: store.append("acme", s.id, "user", f"message {n}").seq, range(100)))
    held = store.list_messages("acme", s.id)
    # never lost, never duplicated, listed in seq order
    assert len(set(seqs)) == 100 and len(held) == 100
    assert [m.seq for m in held] == sorted(seqs)
    assert sorted(m.content for m in held) == sorted(f"message {n}" for n in range(100))
    by_seq = dict(zip(seqs, range(100)))
    assert [m.content for m in held] == [f"message {by_seq[m.seq]}" for m in held]
    if store.backend == "sqlite":  # one transaction per append: no gaps
        assert sorted(seqs) == list(range(1, 101))
    else:  # two writes per append: a seq may stay unused (moto's counter skips one under load)
        assert store.get("acme", s.id).message_count >= max(seqs)


def test_dynamodb_item_layout_ttl_and_stream(dynamodb_client):
    from cairn.ports.sessions.dynamodb import TTL_ATTRIBUTE, DynamoDBSessionStore

    store = DynamoDBSessionStore(TABLE, client=dynamodb_client)
    s = store.create("acme", ttl_s=3600)
    store.append("acme", s.id, "user", "hello")
    items = dynamodb_client.query(
        TableName=TABLE, KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": {"S": f"TENANT#acme#SESSION#{s.id}"}},
    )["Items"]
    by_sk = {i["sk"]["S"]: i for i in items}
    assert set(by_sk) == {"META", "MSG#0000000001"}
    msg = by_sk["MSG#0000000001"]
    assert msg["type"]["S"] == "message" and msg["session_id"]["S"] == s.id and msg["seq"]["N"] == "1"
    expires = int(by_sk["META"][TTL_ATTRIBUTE]["N"])
    assert msg[TTL_ATTRIBUTE]["N"] == str(expires) and abs(expires - (time.time() + 3600)) < 60
    ttl = dynamodb_client.describe_time_to_live(TableName=TABLE)["TimeToLiveDescription"]
    assert ttl["TimeToLiveStatus"] == "ENABLED" and ttl["AttributeName"] == TTL_ATTRIBUTE
    table = dynamodb_client.describe_table(TableName=TABLE)["Table"]
    assert table["StreamSpecification"] == {"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"}


def _stall_put(store, monkeypatch, content):
    """Make the append of ``content`` stop after its seq is allocated, before its message is put."""
    allocated, release = threading.Event(), threading.Event()
    real = store._put_message

    def put(pk, tenant, session_id, seq, role, text, *rest):
        if text == content and not allocated.is_set():
            allocated.set()
            assert release.wait(10)
        return real(pk, tenant, session_id, seq, role, text, *rest)

    monkeypatch.setattr(store, "_put_message", put)
    return allocated, release


def test_dynamodb_a_seq_in_flight_is_sealed_by_compression_and_the_append_moves_up(dynamodb_client, monkeypatch):
    from cairn.ports.sessions.dynamodb import DynamoDBSessionStore

    store = DynamoDBSessionStore(TABLE, client=dynamodb_client)
    s = store.create("acme")
    for n in range(3):
        store.append("acme", s.id, "user", f"m{n}.")  # seqs 1-3
    allocated, release = _stall_put(store, monkeypatch, "late.")
    late: list[Message] = []
    t = threading.Thread(target=lambda: late.append(store.append("acme", s.id, "user", "late.")))
    t.start()
    try:
        assert allocated.wait(10)  # the late append holds seq 4, its message is not stored yet
        store.append("acme", s.id, "user", "m3.")  # seq 5
        store.append("acme", s.id, "user", "m4.")  # seq 6
        done = store.compress("acme", s.id, keep_last=1)  # folds 1, 2, 3, 5; seals the empty seq 4
        assert (done.folded, done.summarized_through) == (4, 5)
    finally:
        release.set()
        t.join()
    assert late[0].seq == 7  # seq 4 was sealed: stored above the summary, not hidden below it
    view = store.get("acme", s.id, recent=5)
    assert view.summary.splitlines() == ["user: m0.", "user: m1.", "user: m2.", "user: m3."]
    assert [(m.seq, m.content) for m in view.recent] == [(6, "m4."), (7, "late.")]
    assert [m.seq for m in store.list_messages("acme", s.id)] == [6, 7]


def test_dynamodb_a_message_stored_after_the_read_makes_compression_retry(dynamodb_client, monkeypatch):
    from cairn.ports.sessions.dynamodb import DynamoDBSessionStore

    store = DynamoDBSessionStore(TABLE, client=dynamodb_client)
    s = store.create("acme")
    for n in range(3):
        store.append("acme", s.id, "user", f"m{n}.")  # seqs 1-3
    allocated, release = _stall_put(store, monkeypatch, "late.")
    t = threading.Thread(target=store.append, args=("acme", s.id, "user", "late."))
    t.start()
    assert allocated.wait(10)  # seq 4 allocated, not stored
    store.append("acme", s.id, "user", "m3.")  # seq 5
    store.append("acme", s.id, "user", "m4.")  # seq 6

    class LetItLand(ExtractiveSummarizer):
        def summarize(self, previous, messages):  # the first read missed seq 4; it lands now
            release.set()
            t.join()
            return super().summarize(previous, messages)

    done = store.compress("acme", s.id, keep_last=1, summarizer=LetItLand())
    assert done.attempts == 2 and done.summarized_through == 5
    assert store.get("acme", s.id).summary.splitlines() == ["user: m0.", "user: m1.", "user: m2.", "user: late.", "user: m3."]
    assert [m.content for m in store.list_messages("acme", s.id)] == ["m4."]


def test_dynamodb_a_counter_moved_back_is_lifted_and_a_retried_put_is_stored_once(dynamodb_client):
    from cairn.ports.sessions.dynamodb import DynamoDBSessionStore, session_pk

    store = DynamoDBSessionStore(TABLE, client=dynamodb_client)
    s = store.create("acme")
    for n in range(4):
        store.append("acme", s.id, "user", f"m{n}.")
    store.compress("acme", s.id, keep_last=2)  # summarized through seq 2
    key = {"pk": {"S": session_pk("acme", s.id)}, "sk": {"S": "META"}}
    dynamodb_client.update_item(  # a restore or a manual edit moves the counter back
        TableName=TABLE, Key=key, UpdateExpression="SET last_seq = :z", ExpressionAttributeValues={":z": {"N": "0"}}
    )
    assert store.append("acme", s.id, "user", "after the reset.").seq == 5
    dynamodb_client.update_item(
        TableName=TABLE, Key=key, UpdateExpression="SET last_seq = :z", ExpressionAttributeValues={":z": {"N": "3"}}
    )
    assert store.append("acme", s.id, "user", "again.").seq == 6

    real = dynamodb_client.put_item

    class RetryingClient:  # the SDK re-sends a put whose first response was lost
        def __getattr__(self, name):
            return getattr(dynamodb_client, name)

        def put_item(self, **kwargs):
            real(**kwargs)
            return real(**kwargs)

    store.client = RetryingClient()
    assert store.append("acme", s.id, "user", "once.").seq == 7
    assert [m.content for m in store.list_messages("acme", s.id)] == ["m2.", "m3.", "after the reset.", "again.", "once."]


def test_dynamodb_errors_are_mapped(moto_endpoint):
    import boto3

    from cairn.core.errors import SessionError
    from cairn.ports.sessions.dynamodb import DynamoDBSessionStore

    client = boto3.client("dynamodb", region_name="us-east-1", endpoint_url=moto_endpoint)
    store = DynamoDBSessionStore("no-such-table", client=client)
    with pytest.raises(SessionError, match="table does not exist"):
        store.create("acme")


def test_speaker_and_time_set_by_the_caller_are_kept(store):
    s = store.create("acme", user="ann")
    said = 1_683_554_160.0  # a transcript appended after the fact keeps when each line was said
    m = store.append("acme", s.id, "user", "I went to a support group yesterday.", name="Caroline", created_at=said)
    store.append("acme", s.id, "assistant", "How was it?")
    assert (m.name, m.created_at) == ("Caroline", said)
    first, second = store.list_messages("acme", s.id)
    assert (first.name, first.created_at) == ("Caroline", said)
    assert second.name is None and second.created_at > said
    with pytest.raises(RequestError):
        store.append("acme", s.id, "user", "x", created_at="yesterday")
    assert store.get("acme", s.id).session.user == "ann"


def test_commit_mark_moves_forward_only(store):
    s = store.create("acme", user="ann")
    for n in range(4):
        store.append("acme", s.id, "user", f"m{n}.")
    assert store.get("acme", s.id).uncommitted_count == 4
    assert store.mark_committed("acme", s.id, 3) == 3
    assert store.mark_committed("acme", s.id, 2) == 3  # a late commit never moves it back
    view = store.get("acme", s.id)
    assert (view.session.committed_through, view.uncommitted_count) == (3, 1)
    with pytest.raises(RequestError):
        store.mark_committed("acme", s.id, 9)  # past the last message


def test_compression_holds_uncommitted_messages_when_asked(store):
    store.hold_uncommitted = True
    s = store.create("acme", user="ann")
    for n in range(6):
        store.append("acme", s.id, "user", f"m{n}.")
    store.mark_committed("acme", s.id, 2)
    done = store.compress("acme", s.id, keep_last=1)
    assert (done.folded, done.summarized_through) == (2, 2)  # seqs 3-5 wait for the next commit
    assert [m.seq for m in store.list_messages("acme", s.id)] == [3, 4, 5, 6]


def test_memory_commit_reads_new_messages_once_on_every_backend(store, embedder, tmp_path):
    from cairn.engine.memory import MemoryService
    from cairn.ports.vectorstores.local import LocalVectorStore

    vectors = LocalVectorStore(tmp_path / "vectors", dimension=embedder.dimension)
    memory = MemoryService(vectors, embedder, "acme", sessions=store)
    s = store.create("acme", user="ann")
    store.append("acme", s.id, "user", "My sister Anna lives in Porto.", name="Ann", created_at=1_683_554_160.0)
    store.append("acme", s.id, "assistant", "Noted: Anna lives in Porto.")
    first = memory.commit(s.id)
    # both messages are read; only what the user said becomes an episode (the reply is its context)
    assert (first.messages, first.committed_through, len(first.episodes)) == (2, 2, 1)
    assert memory.commit(s.id).messages == 0  # committing twice adds nothing
    store.append("acme", s.id, "user", "She is a teacher.", name="Ann")
    assert memory.commit(s.id).episodes == [f"cairn://user/ann/memories/episodes/{s.id}-000003"]
    assert vectors.count("acme", {"ancestors": "cairn://user/ann/memories", "level": 2}) == 2
    assert vectors.count("acme", {"ancestors": "cairn://user/bob/memories"}) == 0


def test_an_append_retried_with_its_idempotency_key_lands_once(store):
    sid = store.create("acme", "ann").id
    first = store.append("acme", sid, "user", "book a table for two", idempotency_key="k-1")
    again = store.append("acme", sid, "user", "book a table for two", idempotency_key="k-1")
    other = store.append("acme", sid, "user", "and a taxi", idempotency_key="k-2")
    assert again == first and other.seq == first.seq + 1
    assert [m.content for m in store.get("acme", sid, recent=10).recent] == ["book a table for two", "and a taxi"]
    # the key belongs to the session: the same key in another session is another message
    sid2 = store.create("acme", "ann").id
    assert store.append("acme", sid2, "user", "hello", idempotency_key="k-1").content == "hello"
    with pytest.raises(RequestError, match="idempotency key"):
        store.append("acme", sid, "user", "x", idempotency_key="")
    with pytest.raises(SessionNotFound):
        store.append("acme", "nosuchsession", "user", "x", idempotency_key="k-3")


def test_concurrent_retries_with_one_key_store_one_message(store):
    sid = store.create("acme").id
    with ThreadPoolExecutor(max_workers=6) as pool:
        outcomes = list(pool.map(lambda _: _try_append(store, sid), range(6)))
    stored = store.get("acme", sid, recent=20).recent
    assert len(stored) == 1 and stored[0].content == "once"
    assert all(o in ("ok", "conflict") for o in outcomes) and "ok" in outcomes


def _try_append(store, sid):
    try:
        store.append("acme", sid, "user", "once", idempotency_key="same")
        return "ok"
    except SessionConflict:  # the first try is still in flight (DynamoDB): the client retries
        return "conflict"


def test_a_users_sessions_are_listed_newest_first_and_only_theirs(store):
    ann, bob = f"ann-{uuid.uuid4().hex[:8]}", f"bob-{uuid.uuid4().hex[:8]}"  # the moto table is shared by the module
    first = store.create("acme", user=ann)
    second = store.create("acme", user=ann)
    store.create("acme", user=bob)
    store.create("acme")  # no user: in nobody's list
    store.create("globex", user=ann)  # another tenant's user of the same name
    listed = store.list_sessions("acme", ann)
    assert {s.id for s in listed} == {first.id, second.id}
    assert all(s.user == ann and s.tenant == "acme" for s in listed)
    assert listed[0].created_at >= listed[1].created_at
    store.delete("acme", first.id)
    assert [s.id for s in store.list_sessions("acme", ann)] == [second.id]
    assert store.list_sessions("acme", f"carol-{uuid.uuid4().hex[:8]}") == []
