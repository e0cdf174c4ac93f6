"""Each LLM client against a local fake server speaking its provider's wire format."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from cairn.core.errors import LLMError

pytestmark = [pytest.mark.integration, pytest.mark.filterwarnings("ignore::UserWarning")]


class FakeLLMServer:
    """Bedrock Converse (POST /model/{id}/converse) and OpenAI chat (POST /v1/chat/completions).

    ``reply`` is the text to answer; ``status``/``error_type`` make it fail; ``delay_s`` makes it slow.
    Every request is recorded as (path, headers, json body).
    """

    def __init__(self) -> None:
        self.reset()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                path = urllib.parse.unquote(self.path)
                server.requests.append((path, dict(self.headers), body))
                if server.delay_s:
                    time.sleep(server.delay_s)
                if path.startswith("/model/") and path.endswith("/converse"):
                    self._converse()
                elif path.endswith("/chat/completions"):
                    self._chat(body)
                else:
                    self._send(404, {"message": f"no route {path}"})

            def _send(self, status, payload, headers=None):
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def _converse(self):
                if server.status != 200:
                    self._send(server.status, {"message": "fake failure"}, {"x-amzn-ErrorType": server.error_type})
                    return
                self._send(200, {
                    "output": {"message": {"role": "assistant", "content": [{"text": server.reply}]}},
                    "stopReason": "end_turn",
                    "usage": {"inputTokens": 10, "outputTokens": 5, "totalTokens": 15},
                    "metrics": {"latencyMs": 12},
                })

            def _chat(self, body):
                if server.status != 200:
                    self._send(server.status, {"error": {"message": "fake failure", "type": server.error_type}})
                    return
                self._send(200, {
                    "id": "chatcmpl-1", "object": "chat.completion", "created": int(time.time()), "model": body.get("model"),
                    "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": server.reply}}],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
                })

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def reset(self) -> None:
        self.requests: list[tuple[str, dict, dict]] = []
        self.reply = '{"queries": []}'
        self.status = 200
        self.error_type = ""
        self.delay_s = 0.0

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module")
def fake_server():
    server = FakeLLMServer()
    yield server
    server.close()


@pytest.fixture
def fake(fake_server):
    fake_server.reset()
    return fake_server


@pytest.fixture
def aws_env(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")


MODEL = "anthropic.claude-3-haiku-20240307-v1:0"


# --- Bedrock Converse ------------------------------------------------------------------


def test_bedrock_converse_wire_format(fake, aws_env):
    from cairn.ports.llm import build_llm

    fake.reply = '{"reasoning": "ok", "queries": []}'
    llm = build_llm("bedrock", MODEL, region="us-east-1", endpoint_url=fake.url, max_tokens=300)
    out = llm.complete([{"role": "user", "content": "plan this"}], system="You plan.", timeout_s=3)
    assert out == fake.reply
    path, headers, body = fake.requests[0]
    assert path == f"/model/{MODEL}/converse"
    assert headers["Authorization"].startswith("AWS4-HMAC-SHA256")
    assert body["messages"] == [{"role": "user", "content": [{"text": "plan this"}]}]
    assert body["system"][0]["text"].startswith("You plan.") and "JSON" in body["system"][0]["text"]
    assert body["inferenceConfig"] == {"maxTokens": 300, "temperature": 0.0}


@pytest.mark.parametrize(
    "status, error_type, retryable",
    [(429, "ThrottlingException", True), (503, "ServiceUnavailableException", True),
     (400, "ValidationException", False), (403, "AccessDeniedException", False)],
)
def test_bedrock_errors_are_planning_errors(fake, aws_env, status, error_type, retryable):
    from cairn.ports.llm.bedrock import BedrockLLM

    fake.status, fake.error_type = status, error_type
    with pytest.raises(LLMError, match=error_type) as err:
        BedrockLLM(MODEL, region="us-east-1", endpoint_url=fake.url).complete("hi", timeout_s=3)
    assert err.value.retryable is retryable


def test_bedrock_read_timeout_is_retryable(fake, aws_env):
    from cairn.ports.llm.bedrock import BedrockLLM

    fake.delay_s = 1.5
    with pytest.raises(LLMError, match="ReadTimeoutError") as err:
        BedrockLLM(MODEL, region="us-east-1", endpoint_url=fake.url).complete("hi", timeout_s=0.3)
    assert err.value.retryable


# --- OpenAI-compatible -------------------------------------------------------------------


def test_openai_compatible_wire_format(fake):
    from cairn.ports.llm import build_llm

    fake.reply = "a summary"
    llm = build_llm("openai", "gpt-4o-mini", base_url=fake.url + "/v1", api_key="sk-test")
    assert llm.complete("summarise", system="Be brief.", json=False) == "a summary"
    llm.complete("plan", json=True)
    (path, headers, plain), (_, _, as_json) = fake.requests[0], fake.requests[1]
    assert path == "/v1/chat/completions" and headers["Authorization"] == "Bearer sk-test"
    assert plain["model"] == "gpt-4o-mini" and "response_format" not in plain
    assert plain["messages"] == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "summarise"}]
    assert as_json["response_format"] == {"type": "json_object"}


@pytest.mark.parametrize("status, retryable", [(429, True), (500, True), (401, False), (400, False)])
def test_openai_compatible_http_errors(fake, status, retryable):
    from cairn.ports.llm.openai_compat import OpenAICompatLLM

    fake.status = status
    with pytest.raises(LLMError, match=f"HTTP {status}.*fake failure") as err:
        OpenAICompatLLM("m", base_url=fake.url + "/v1", api_key="k").complete("hi")
    assert err.value.retryable is retryable


def test_openai_compatible_timeout_and_unreachable(fake):
    from cairn.ports.llm.openai_compat import OpenAICompatLLM

    fake.delay_s = 1.0
    with pytest.raises(LLMError, match="timed out") as err:
        OpenAICompatLLM("m", base_url=fake.url + "/v1").complete("hi", timeout_s=0.2)
    assert err.value.retryable
    with pytest.raises(LLMError, match="cannot reach") as err:
        OpenAICompatLLM("m", base_url="http://127.0.0.1:9/v1").complete("hi", timeout_s=1)
    assert err.value.retryable


def test_the_intent_analyzer_over_a_real_client(fake):
    from cairn.engine.planning.intent import IntentAnalyzer
    from cairn.ports.llm.openai_compat import OpenAICompatLLM

    fake.reply = '```json\n{"reasoning": "r", "queries": [{"query": "Avalon room size", "context_type": "resource"}]}\n```'
    plan = IntentAnalyzer(OpenAICompatLLM("gpt-4o", base_url=fake.url + "/v1"), timeout_s=3).plan("is the room large?")
    assert [q.query for q in plan.queries] == ["Avalon room size"] and not plan.fallback
    fake.delay_s = 1.0
    plan = IntentAnalyzer(OpenAICompatLLM("gpt-4o", base_url=fake.url + "/v1"), timeout_s=0.2).plan("is the room large?")
    assert plan.fallback and [q.query for q in plan.queries] == ["is the room large?"]


# --- LiteLLM --------------------------------------------------------------------------


def test_litellm_is_imported_lazily():
    code = (
        "import sys, cairn.ports.llm, cairn.ports.llm.litellm_client, cairn.engine.planning.intent, cairn.engine.planning.session_planner, "
        "cairn.ports.sessions.dynamodb; assert 'litellm' not in sys.modules, 'litellm imported'; "
        "cairn.ports.llm.build_llm('litellm', 'openai/m'); assert 'litellm' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_litellm_over_an_openai_compatible_fake(fake):
    pytest.importorskip("litellm")
    from cairn.ports.llm import build_llm

    fake.reply = '{"queries": []}'
    llm = build_llm("litellm", "openai/fake-model", api_base=fake.url + "/v1", api_key="sk-test")
    assert llm.complete("plan", system="You plan.", timeout_s=5) == '{"queries": []}'
    path, _headers, body = fake.requests[-1]
    assert path == "/v1/chat/completions" and body["model"] == "fake-model"
    assert body["messages"][0]["role"] == "system" and body["messages"][-1] == {"role": "user", "content": "plan"}
    fake.status, fake.error_type = 429, "rate_limit_exceeded"
    with pytest.raises(LLMError, match="RateLimitError") as err:
        llm.complete("plan", timeout_s=5)
    assert err.value.retryable
    fake.status = 400
    with pytest.raises(LLMError) as err:
        llm.complete("plan", timeout_s=5)
    assert not err.value.retryable
