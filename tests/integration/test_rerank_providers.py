"""Provider rerankers against local fake servers that speak their real wire formats.

* Cohere-style ``POST /v2/rerank`` through httpx (``CohereReranker``) and through LiteLLM;
* Bedrock ``POST /rerank`` (rest-json) through the real boto3 ``bedrock-agent-runtime``
  client, pointed at the fake with ``endpoint_url`` and dummy credentials (moto does not
  implement rerank).

Each fake scores by word overlap, answers best first like the real services, and can be
scripted to fail: 429 and 500 (retried), empty answers, short answers, indices out of
range, NaN scores.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

import pytest

from cairn.core.models import Candidate, ContextRecord
from cairn.ports.rerank import build_reranker
from cairn.ports.rerank.bedrock import BedrockReranker
from cairn.ports.rerank.cohere import CohereReranker

pytestmark = pytest.mark.integration

QUERY = "refund to the original card"
TEXTS = {
    "invoices": "Invoices are emailed on the first day of each month.",
    "refunds": "Refunds are paid back to the original card within five business days.",
    "hotels": "Hotel costs above 200 euros per night need approval.",
}


def candidates() -> list[Candidate]:
    # vector order differs from the relevant order, so a working reranker visibly reorders
    scores = {"invoices": 0.61, "refunds": 0.55, "hotels": 0.40}
    return [
        Candidate(
            record=ContextRecord.build(tenant="acme", uri=f"cairn://resources/handbook/{k}", level=2, text=t),
            score=scores[k],
        )
        for k, t in TEXTS.items()
    ]


def names(outcome) -> list[str]:
    return [c.uri.rsplit("/", 1)[1] for c in outcome.candidates]


def overlap(query: str, doc: str) -> float:
    q = set(re.findall(r"\w+", query.lower()))
    d = set(re.findall(r"\w+", doc.lower()))
    return len(q & d) / len(q) if q else 0.0


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # an object (sent as JSON, NaN allowed) or raw str
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class FakeServer:
    """A scripted HTTP server: pops a reply from ``script`` per request, else asks ``default``."""

    default: Callable[[str, dict], Reply]
    script: list[Reply] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    url: str = ""

    def start(self) -> FakeServer:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                raw = self.rfile.read(int(self.headers.get("content-length", 0)))
                body = json.loads(raw or b"{}")
                fake.requests.append({"path": self.path, "headers": dict(self.headers), "json": body})
                reply = fake.script.pop(0) if fake.script else fake.default(self.path, body)
                payload = reply.body if isinstance(reply.body, str) else json.dumps(reply.body)
                data = payload.encode()
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in reply.headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# --- Cohere-style ----------------------------------------------------------------------------


def cohere_answer(path: str, body: dict) -> Reply:
    if not path.endswith("/rerank"):
        return Reply(404, {"message": f"no route {path}"})
    scored = [(i, overlap(body["query"], d)) for i, d in enumerate(body["documents"])]
    scored.sort(key=lambda p: -p[1])
    top = scored[: body.get("top_n") or len(scored)]
    return Reply(200, {"id": "fake", "results": [{"index": i, "relevance_score": s} for i, s in top],
                       "meta": {"billed_units": {"search_units": 1}}})


@pytest.fixture
def cohere_server() -> Iterator[FakeServer]:
    with FakeServer(default=cohere_answer) as server:
        yield server


@pytest.fixture
def cohere(cohere_server) -> Iterator[CohereReranker]:
    r = CohereReranker(base_url=cohere_server.url, model="rerank-v3.5", api_key="test-key", backoff_s=0.0,
                       timeout_s=5.0)
    yield r
    r.close()


def test_cohere_wire_format_and_reordering(cohere, cohere_server):
    out = cohere.rerank(QUERY, candidates())
    assert names(out)[0] == "refunds"
    assert out.fallback is None and out.used and out.sent == 3
    (req,) = cohere_server.requests
    assert req["path"] == "/v2/rerank"
    assert req["headers"]["Authorization"] == "Bearer test-key"
    assert req["json"] == {"model": "rerank-v3.5", "query": QUERY, "documents": list(TEXTS.values()), "top_n": 3}


def test_cohere_retries_429_and_500_then_succeeds(cohere, cohere_server):
    cohere_server.script = [Reply(429, {"message": "slow down"}, {"Retry-After": "0"}),
                            Reply(500, {"message": "oops"})]
    out = cohere.rerank(QUERY, candidates())
    assert out.fallback is None and names(out)[0] == "refunds"
    assert len(cohere_server.requests) == 3


def test_cohere_persistent_429_falls_back_as_retryable_error(cohere, cohere_server):
    cohere_server.script = [Reply(429, {"message": "rate limited"})] * 3
    out = cohere.rerank(QUERY, candidates())
    assert out.fallback == "error" and out.retryable and "429" in out.error and "rate limited" in out.error
    assert names(out) == ["invoices", "refunds", "hotels"]  # vector order kept
    assert len(cohere_server.requests) == 3  # 1 + max_retries


def test_cohere_4xx_is_not_retried(cohere, cohere_server):
    cohere_server.script = [Reply(400, {"message": "invalid model"})]
    out = cohere.rerank(QUERY, candidates())
    assert out.fallback == "error" and not out.retryable and "invalid model" in out.error
    assert len(cohere_server.requests) == 1


def test_cohere_bad_api_key_says_how_to_fix(cohere, cohere_server):
    cohere_server.script = [Reply(401, {"message": "invalid api token"})]
    out = cohere.rerank(QUERY, candidates())
    assert out.fallback == "error" and "CAIRN_RERANK_API_KEY" in out.error


@pytest.mark.parametrize(
    "body, fallback",
    [
        ({"results": []}, "empty"),
        ({"results": [{"index": 1, "relevance_score": 0.9}]}, "length_mismatch"),
        ({"results": [{"index": 0, "relevance_score": 0.9}, {"index": 1, "relevance_score": 0.5},
                      {"index": 7, "relevance_score": 0.1}]}, "bad_index"),
        ({"results": [{"index": 0, "relevance_score": 0.9}, {"index": 0, "relevance_score": 0.5},
                      {"index": 1, "relevance_score": 0.1}]}, "bad_index"),
        ({"message": "no results here"}, "error"),
        ("not json at all", "error"),
    ],
)
def test_cohere_bad_answers_keep_all_vector_scores(cohere, cohere_server, body, fallback):
    cohere_server.script = [Reply(200, body)]
    out = cohere.rerank(QUERY, candidates())
    assert out.fallback == fallback
    assert out.scores == [0.61, 0.55, 0.40]


def test_cohere_nan_score_keeps_that_vector_score(cohere, cohere_server):
    cohere_server.script = [Reply(200, '{"results": [{"index": 1, "relevance_score": 0.93}, '
                                       '{"index": 0, "relevance_score": NaN}, {"index": 2, "relevance_score": 0.05}]}')]
    out = cohere.rerank(QUERY, candidates())
    assert out.non_finite == 1 and out.fallback is None
    by = {c.uri.rsplit("/", 1)[1]: c.score for c in out.candidates}
    assert by == {"refunds": 0.93, "invoices": 0.61, "hotels": 0.05}
    assert names(out) == ["refunds", "invoices", "hotels"]


def test_cohere_unreachable_server_falls_back():
    r = CohereReranker(base_url="http://127.0.0.1:9", model="m", max_retries=1, backoff_s=0.0, timeout_s=1.0)
    try:
        out = r.rerank(QUERY, candidates())
    finally:
        r.close()
    assert out.fallback == "error" and out.retryable and "cannot reach" in out.error


def test_voyage_style_data_answer_is_accepted(cohere_server):
    cohere_server.script = [Reply(200, {"data": [{"index": 2, "relevance_score": 0.1},
                                                 {"index": 0, "relevance_score": 0.2},
                                                 {"index": 1, "relevance_score": 0.8}]})]
    r = build_reranker("voyage", base_url=cohere_server.url + "/v1", path="rerank", model="rerank-2",
                       api_key="k", backoff_s=0.0)
    try:
        out = r.rerank(QUERY, candidates())
    finally:
        r.close()
    assert cohere_server.requests[0]["path"] == "/v1/rerank"
    assert names(out) == ["refunds", "invoices", "hotels"]


# --- Bedrock ---------------------------------------------------------------------------------


def bedrock_answer(path: str, body: dict) -> Reply:
    if path != "/rerank":
        return Reply(404, {"message": f"no route {path}"}, {"x-amzn-ErrorType": "ResourceNotFoundException"})
    query = body["queries"][0]["textQuery"]["text"]
    docs = [s["inlineDocumentSource"]["textDocument"]["text"] for s in body["sources"]]
    n = body["rerankingConfiguration"]["bedrockRerankingConfiguration"].get("numberOfResults", len(docs))
    scored = sorted(((i, overlap(query, d)) for i, d in enumerate(docs)), key=lambda p: -p[1])[:n]
    return Reply(200, {"results": [{"index": i, "relevanceScore": s} for i, s in scored]})


def bedrock_error(status: int, code: str, message: str) -> Reply:
    return Reply(status, {"message": message}, {"x-amzn-ErrorType": f"{code}:http://internal.amazon.com/"})


@pytest.fixture
def bedrock_server() -> Iterator[FakeServer]:
    with FakeServer(default=bedrock_answer) as server:
        yield server


@pytest.fixture
def bedrock(bedrock_server, monkeypatch) -> BedrockReranker:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    return BedrockReranker(model="amazon.rerank-v1:0", region="us-west-2", endpoint_url=bedrock_server.url,
                           backoff_s=0.0, timeout_s=5.0)


def test_bedrock_wire_format_and_reordering(bedrock, bedrock_server):
    out = bedrock.rerank(QUERY, candidates())
    assert names(out)[0] == "refunds" and out.fallback is None and out.used
    (req,) = bedrock_server.requests
    assert req["path"] == "/rerank"
    assert req["headers"]["Authorization"].startswith("AWS4-HMAC-SHA256")
    assert req["json"]["queries"] == [{"type": "TEXT", "textQuery": {"text": QUERY}}]
    assert req["json"]["sources"][1] == {
        "type": "INLINE", "inlineDocumentSource": {"type": "TEXT", "textDocument": {"text": TEXTS["refunds"]}}
    }
    assert req["json"]["rerankingConfiguration"] == {
        "type": "BEDROCK_RERANKING_MODEL",
        "bedrockRerankingConfiguration": {
            "numberOfResults": 3,
            "modelConfiguration": {"modelArn": "arn:aws:bedrock:us-west-2::foundation-model/amazon.rerank-v1:0"},
        },
    }


def test_bedrock_follows_next_token(bedrock, bedrock_server):
    bedrock_server.script = [Reply(200, {"results": [{"index": 1, "relevanceScore": 0.9}], "nextToken": "page2"}),
                             Reply(200, {"results": [{"index": 0, "relevanceScore": 0.3},
                                                     {"index": 2, "relevanceScore": 0.1}]})]
    out = bedrock.rerank(QUERY, candidates())
    assert out.scores == [0.9, 0.3, 0.1]
    assert bedrock_server.requests[1]["json"]["nextToken"] == "page2"


def test_bedrock_retries_throttling_and_500(bedrock, bedrock_server):
    bedrock_server.script = [bedrock_error(429, "ThrottlingException", "Too many requests"),
                             bedrock_error(500, "InternalServerException", "oops")]
    out = bedrock.rerank(QUERY, candidates())
    assert out.fallback is None and names(out)[0] == "refunds"
    assert len(bedrock_server.requests) == 3  # botocore's own retries are off: only ours ran


def test_bedrock_persistent_throttling_falls_back(bedrock, bedrock_server):
    bedrock_server.script = [bedrock_error(429, "ThrottlingException", "Too many requests")] * 3
    out = bedrock.rerank(QUERY, candidates())
    assert out.fallback == "error" and out.retryable and "ThrottlingException" in out.error
    assert out.scores == [0.61, 0.55, 0.40]


def test_bedrock_access_denied_is_not_retried_and_explains(bedrock, bedrock_server):
    bedrock_server.script = [bedrock_error(403, "AccessDeniedException", "not authorized")]
    out = bedrock.rerank(QUERY, candidates())
    assert out.fallback == "error" and not out.retryable and "bedrock:Rerank" in out.error
    assert len(bedrock_server.requests) == 1


@pytest.mark.parametrize(
    "body, fallback",
    [
        ({"results": []}, "empty"),
        ({"results": [{"index": 0, "relevanceScore": 0.5}]}, "length_mismatch"),
        ({"results": [{"index": 0, "relevanceScore": 0.5}, {"index": 1, "relevanceScore": 0.4},
                      {"index": 5, "relevanceScore": 0.3}]}, "bad_index"),
    ],
)
def test_bedrock_bad_answers_keep_all_vector_scores(bedrock, bedrock_server, body, fallback):
    bedrock_server.script = [Reply(200, body)]
    out = bedrock.rerank(QUERY, candidates())
    assert out.fallback == fallback and out.scores == [0.61, 0.55, 0.40]


def test_bedrock_nan_score_keeps_that_vector_score(bedrock, bedrock_server):
    bedrock_server.script = [Reply(200, '{"results": [{"index": 2, "relevanceScore": NaN}, '
                                        '{"index": 1, "relevanceScore": 0.8}, {"index": 0, "relevanceScore": 0.2}]}')]
    out = bedrock.rerank(QUERY, candidates())
    assert out.non_finite == 1 and out.fallback is None
    by = {c.uri.rsplit("/", 1)[1]: c.score for c in out.candidates}
    assert by == {"refunds": 0.8, "invoices": 0.2, "hotels": 0.40}


def test_bedrock_accepts_a_model_arn(bedrock_server, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    arn = "arn:aws:bedrock:eu-central-1::foundation-model/cohere.rerank-v3-5:0"
    r = build_reranker("bedrock", model=arn, region="eu-central-1", endpoint_url=bedrock_server.url,
                       additional_fields={"max_tokens_per_doc": 512})
    r.rerank(QUERY, candidates())
    config = bedrock_server.requests[0]["json"]["rerankingConfiguration"]["bedrockRerankingConfiguration"]
    assert config["modelConfiguration"] == {
        "modelArn": arn, "additionalModelRequestFields": {"max_tokens_per_doc": 512}
    }


# --- LiteLLM (through the fake Cohere-compatible server) ---------------------------------------


def test_litellm_reranks_through_a_cohere_compatible_api_base(cohere_server, monkeypatch):
    pytest.importorskip("litellm", reason="litellm is an optional extra (cairn-context[llm])")
    from cairn.ports.rerank.litellm_provider import LiteLLMReranker

    r = LiteLLMReranker(model="cohere/rerank-v3.5", api_base=cohere_server.url, api_key="test-key", backoff_s=0.0)
    out = r.rerank(QUERY, candidates())
    assert out.fallback is None, out.error
    assert names(out)[0] == "refunds"
    req = cohere_server.requests[-1]
    assert req["path"].endswith("/rerank") and req["json"]["query"] == QUERY
    assert req["json"]["documents"] == list(TEXTS.values())

    cohere_server.script = [Reply(200, {"results": [{"index": 0, "relevance_score": 0.5}]})]
    out = r.rerank(QUERY, candidates())
    assert out.fallback == "length_mismatch" and out.scores == [0.61, 0.55, 0.40]

    cohere_server.script = [Reply(500, {"message": "down"})] * 3
    out = r.rerank(QUERY, candidates())
    assert out.fallback == "error" and out.retryable
