"""Embedding providers' wire formats, served on 127.0.0.1 for the real clients.

- Bedrock ``InvokeModel``: ``POST /model/{modelId}/invoke`` (boto3 ``bedrock-runtime`` with
  ``endpoint_url``). Titan v2 bodies ``{"inputText", "dimensions", "normalize"}`` answer
  ``{"embedding", "inputTextTokenCount"}``; Cohere v3 bodies ``{"texts", "input_type", "truncate"}``
  answer ``{"id", "texts", "embeddings", "response_type": "embeddings_floats"}``. Errors carry
  ``x-amzn-ErrorType`` and ``{"message"}``, as Bedrock sends them. The input token count is the
  ``X-Amzn-Bedrock-Input-Token-Count`` header.
- OpenAI ``POST /v1/chat/completions`` answers like Converse (``converse_for``, else ``converse_default``),
  as a ``chat.completion`` with usage; Cohere ``POST /v1/rerank`` or ``/v2/rerank`` ``{"query", "documents"}``
  answers ``{"results": [{"index", "relevance_score"}]}`` scored by the words a document shares with the
  query (LiteLLM's clients as a Lambda function runs them).
- OpenAI ``POST /v1/embeddings`` ``{"model", "input", "encoding_format"?, "dimensions"?}`` answers
  ``{"object": "list", "data": [{"object": "embedding", "index", "embedding"}], "model", "usage"}``;
  ``encoding_format: "base64"`` (what the openai SDK asks for by default) gives little-endian
  float32 bytes in base64.

A vector is a pure function of (text, input type, dimension), so a test can tell which text a row
came from and whether the query or document type was used. With ``words = True`` it is instead the
normalised sum of one random vector per (lower-cased) word: texts that share words are close, so a
test of the whole search path can assert that the right document ranks first. ``fail`` queues failures: each request
takes the next one (status, error type) until the queue is empty.
"""

from __future__ import annotations

import base64
import hashlib
import json
import urllib.parse
from typing import Any

import numpy as np

from .http_base import EmulatorHandler, serve, shut


def fake_vector(text: str, dimension: int, kind: str = "") -> list[float]:
    seed = int.from_bytes(hashlib.sha256(f"{kind}|{text}".encode()).digest()[:8], "little")
    vec = np.random.default_rng(seed).standard_normal(dimension)
    return [float(x) for x in vec * 3.0]  # deliberately not unit length: the client normalises


def word_vector(text: str, dimension: int) -> list[float]:
    """A bag-of-words embedding: the sum of one fixed random vector per distinct word, unit length."""
    words = sorted({w for w in "".join(ch.lower() if ch.isalnum() else " " for ch in text).split() if len(w) > 2})
    total = np.zeros(dimension)
    for word in words:
        total += np.asarray(fake_vector(word, dimension, "word"))
    norm = float(np.linalg.norm(total))
    return [float(x) for x in (total / norm if norm else np.asarray(fake_vector(text, dimension)))]


class EmbeddingsEmulator:
    def __init__(self) -> None:
        self.reset()
        emulator = self

        class Handler(EmulatorHandler):
            def _handle(self, method: str) -> None:
                length = int(self.headers.get("Content-Length", 0))
                raw = self.rfile.read(length) if length else b""
                path = urllib.parse.unquote(self.path)
                body = json.loads(raw or b"{}")
                emulator.requests.append((path, dict(self.headers), body))
                if emulator.fail:
                    status, error_type = emulator.fail.pop(0)
                    if path.startswith("/model/"):
                        self._send(status, {"message": f"fake {error_type}"}, {"x-amzn-ErrorType": error_type})
                    else:
                        self._send(status, {"error": {"message": f"fake {error_type}", "type": error_type}})
                    return
                if method == "POST" and path.startswith("/model/") and path.endswith("/invoke"):
                    self._invoke(path[len("/model/"):-len("/invoke")], body)
                elif method == "POST" and path.startswith("/model/") and path.endswith("/converse"):
                    self._converse(body)
                elif method == "POST" and path.endswith("/embeddings"):
                    self._openai(body)
                elif method == "POST" and path.endswith("/chat/completions"):
                    self._chat(body)
                elif method == "POST" and path.endswith("/rerank"):
                    self._rerank(body)
                else:
                    self._send(404, {"message": f"no route {method} {path}"})

            def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def _invoke(self, model: str, body: dict[str, Any]) -> None:
                if "titan-embed-text-v2" in model:
                    dim = body.get("dimensions", 1024)
                    if dim not in (256, 512, 1024) or not isinstance(body.get("inputText"), str):
                        self._send(400, {"message": "Malformed input request"}, {"x-amzn-ErrorType": "ValidationException"})
                        return
                    tokens = len(body["inputText"].split())
                    vec = emulator.vector(body["inputText"], emulator.returned_dimension or dim)
                    self._send(200, {"embedding": vec, "inputTextTokenCount": tokens},
                               {"X-Amzn-Bedrock-Input-Token-Count": str(tokens)})
                elif "cohere.embed" in model:
                    texts, kind = body.get("texts"), body.get("input_type")
                    if not isinstance(texts, list) or not 1 <= len(texts) <= 96 or kind not in (
                            "search_query", "search_document", "classification", "clustering"):
                        self._send(400, {"message": "Malformed input request"}, {"x-amzn-ErrorType": "ValidationException"})
                        return
                    tokens = sum(len(t.split()) for t in texts)
                    self._send(200, {"id": "emb-1", "texts": texts, "response_type": "embeddings_floats",
                                     "embeddings": [fake_vector(t, emulator.returned_dimension or 1024, kind) for t in texts]},
                               {"X-Amzn-Bedrock-Input-Token-Count": str(tokens)})
                else:
                    self._send(400, {"message": f"The provided model identifier is invalid: {model}"},
                               {"x-amzn-ErrorType": "ValidationException"})

            def _converse(self, body: dict[str, Any]) -> None:
                """Bedrock Converse: the answer of the first ``converse_for`` key the prompt contains, else ``converse_default``."""
                prompt = " ".join(str(block.get("text", "")) for m in body.get("messages", []) for block in m.get("content", []))
                text = next((answer for key, answer in emulator.converse_for.items() if key in prompt), emulator.converse_default)
                asked = len(prompt.split())
                out_tokens = len(text.split())
                self._send(200, {"output": {"message": {"role": "assistant", "content": [{"text": text}]}},
                                 "stopReason": "end_turn", "metrics": {"latencyMs": 5},
                                 "usage": {"inputTokens": asked, "outputTokens": out_tokens, "totalTokens": asked + out_tokens}})

            def _chat(self, body: dict[str, Any]) -> None:
                """OpenAI chat completions: the answer Converse would give to the same messages."""
                prompt = " ".join(str(m.get("content", "")) for m in body.get("messages", []))
                text = next((answer for key, answer in emulator.converse_for.items() if key in prompt), emulator.converse_default)
                asked, out_tokens = len(prompt.split()), len(text.split())
                self._send(200, {"id": "chatcmpl-emulator", "object": "chat.completion", "created": 0, "model": body.get("model"),
                                 "choices": [{"index": 0, "finish_reason": "stop",
                                              "message": {"role": "assistant", "content": text}}],
                                 "usage": {"prompt_tokens": asked, "completion_tokens": out_tokens,
                                           "total_tokens": asked + out_tokens}})

            def _rerank(self, body: dict[str, Any]) -> None:
                words = set(str(body.get("query", "")).lower().split())
                docs = [d if isinstance(d, str) else str(d.get("text", "")) for d in body.get("documents", [])]
                scores = [len(words & set(d.lower().split())) / (len(words) or 1) for d in docs]
                order = sorted(range(len(docs)), key=lambda i: -scores[i])
                self._send(200, {"id": "rerank-emulator", "meta": {"billed_units": {"search_units": 1}},
                                 "results": [{"index": i, "relevance_score": scores[i]} for i in order]})

            def _openai(self, body: dict[str, Any]) -> None:
                texts = body.get("input")
                texts = [texts] if isinstance(texts, str) else texts
                dim = emulator.returned_dimension or body.get("dimensions") or emulator.openai_dimension
                data = []
                for i, text in enumerate(texts):
                    vec = fake_vector(text, dim)
                    if body.get("encoding_format") == "base64":
                        emb: Any = base64.b64encode(np.asarray(vec, dtype="<f4").tobytes()).decode()
                    else:
                        emb = vec
                    data.append({"object": "embedding", "index": i, "embedding": emb})
                tokens = sum(len(t.split()) for t in texts)
                self._send(200, {"object": "list", "data": data, "model": body.get("model"),
                                 "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})

        self.server = serve(Handler, "embeddings-emulator")
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def reset(self) -> None:
        self.requests: list[tuple[str, dict[str, str], dict[str, Any]]] = []
        self.fail: list[tuple[int, str]] = []
        self.returned_dimension: int | None = None  # answer with this dimension whatever was asked
        self.openai_dimension = 64
        self.words = False  # True: bag-of-words vectors (texts that share words are close)
        self.converse_for: dict[str, str] = {}  # Converse: a text the prompt contains -> the answer
        self.converse_default = '{"reasoning": "", "queries": []}'

    def vector(self, text: str, dimension: int, kind: str = "") -> list[float]:
        return word_vector(text, dimension) if self.words else fake_vector(text, dimension, kind)

    def close(self) -> None:
        shut(self.server)
