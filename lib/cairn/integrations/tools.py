"""cairn's ``find``, ``search``, ``context`` and ``remember`` as function tools for tool-calling models,
and the dispatcher that runs the calls a model makes.

The definitions have the shape OpenAI's APIs take (``{"type": "function", "function": {"name",
"description", "parameters"}}``), which most providers and agent frameworks accept as well. Each
tool's ``parameters`` are generated from the request model of its ``/v1`` route (:class:`FindBody`,
:class:`SearchBody`, :class:`ContextBody`, :class:`MemoryPut`: the models the OpenAPI document is
generated from), keeping only the fields a model should choose. The others are the application's to
decide, never the model's: which end user (:data:`BOUND`) and which conversation, given once to
:class:`CairnTools`, and the operator's switches (provenance, rerank, thresholds), left at their defaults.

:meth:`CairnTools.run` takes a call as a model returns it (the tool's name and its arguments as a
JSON string), validates the arguments with the same request model, calls a
:class:`~cairn.client.CairnClient` or an in-process :class:`~cairn.inprocess.Cairn`, and answers a
JSON string for the model to read (:meth:`CairnTools.arun` awaits an
:class:`~cairn.client.AsyncCairnClient`). Bad arguments, an unknown tool or a refusal from cairn are
answered as ``{"error": ...}`` naming the field and what is allowed, so the model can correct its
call; nothing is raised for them.

    tools = CairnTools(CairnClient(url, key), user="ann", session_id=session.id)
    reply = model(messages, tools=tools.definitions())
    content = tools.run(call.function.name, call.function.arguments)   # for each tool call

Pure Python over the base install: no SDK of any model provider is imported.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import BaseModel

from cairn.api.models import ContextBody, FindBody, MemoryPut, SearchBody
from cairn.core.errors import CairnError
from cairn.core.requests import parse_request

# the fields the application fills (the end user a conversation belongs to, the conversation itself)
BOUND = ("user", "session_id")
RESULT_TEXT_CHARS = 1200  # one match's text in a tool answer at most; `context` is the way to more


class Door(Protocol):
    """What the dispatcher calls: :class:`~cairn.client.CairnClient` and :class:`~cairn.inprocess.Cairn` both are one."""

    def find(self, query: str, **options: Any) -> Any: ...

    def search(self, query: str, session_id: str | None = None, **options: Any) -> Any: ...

    def context(self, query: str, session_id: str | None = None, *, budget_tokens: int | None = None,
                **options: Any) -> Any: ...

    def remember(self, text: str, category: str | None = None, *, user: str | None = None, **fields: Any) -> Any: ...


@dataclass(frozen=True)
class Tool:
    """One function tool: the route whose request model it shares, and the fields a model may set."""

    name: str
    route: str  # "POST /v1/find": the OpenAPI operation whose request body is ``body``
    body: type[BaseModel]
    description: str
    fields: tuple[str, ...]  # of ``body``, in the order the schema lists them


_RETRIEVAL = ("query", "limit", "context_type", "target_uris", "filter", "mode")
TOOLS: dict[str, Tool] = {tool.name: tool for tool in (
    Tool("find", "POST /v1/find", FindBody,
         "Look up what the knowledge base holds for one standalone question (no conversation). Answers the best "
         "matching documents, memories of the user and skills, each with its cairn:// URI, a score and its text.",
         _RETRIEVAL),
    Tool("search", "POST /v1/search", SearchBody,
         "Find what to read for the latest turn of the conversation: cairn plans from what was said before, so a "
         "follow-up like 'and for Stripe?' is understood, and the user's memories come back beside documents.",
         _RETRIEVAL),
    Tool("context", "POST /v1/context", ContextBody,
         "The context to answer the latest turn from, as one block of numbered passages [n] with their sources, "
         "within budget_tokens tokens: the user's memories, skills and documents, deduplicated.",
         ("query", "budget_tokens", "limit", "context_type", "target_uris")),
    Tool("remember", "POST /v1/memories", MemoryPut,
         "Store one fact about the user you are talking with (a preference, a profile detail, an event) so that "
         "later searches find it. Remembering again with the same key updates that memory; others stay.",
         ("text", "category", "key", "title", "source")),
)}
TOOL_NAMES = tuple(TOOLS)


def parameters_schema(tool: Tool) -> dict[str, Any]:
    """The JSON schema of ``tool``'s arguments: its request model's schema, references inlined
    (not every provider follows ``$ref``), titles dropped, only the fields a model may set."""
    schema = tool.body.model_json_schema()
    definitions = schema.get("$defs", {})
    properties = {name: _inline(schema["properties"][name], definitions) for name in tool.fields}
    required = [name for name in schema.get("required", []) if name in properties]
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


def _inline(node: Any, definitions: Mapping[str, Any]) -> Any:
    """``node`` with every ``$ref`` replaced by its definition, and without the keywords that tell a
    model nothing: ``title`` (the field's name again) and a ``default`` of null (it is optional)."""
    if isinstance(node, list):
        return [_inline(item, definitions) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        target = definitions[node["$ref"].rsplit("/", 1)[-1]]
        return _inline({**target, **{k: v for k, v in node.items() if k != "$ref"}}, definitions)
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "title" or (key == "default" and value is None):
            continue
        if key == "properties":  # a mapping of field names, each a schema: a field may be called "title"
            out[key] = {name: _inline(sub, definitions) for name, sub in value.items()}
        else:
            out[key] = _inline(value, definitions)
    return out


def function_tools(names: Iterable[str] = TOOL_NAMES) -> list[dict[str, Any]]:
    """The definitions of the tools ``names`` in OpenAI's function-tool shape (``tools=`` of a request)."""
    return [{"type": "function", "function": {"name": tool.name, "description": tool.description,
                                              "parameters": parameters_schema(tool)}}
            for tool in (_tool(name) for name in names)]


def _tool(name: str) -> Tool:
    if name not in TOOLS:
        raise ValueError(f"no cairn tool {name!r}; the tools are: {', '.join(TOOL_NAMES)}")
    return TOOLS[name]


class ToolCallError(ValueError):
    """A call the model should correct: its message is what the model reads."""


class CairnTools:
    """The tools ``names`` over ``cairn`` (a :class:`~cairn.client.CairnClient` or a
    :class:`~cairn.inprocess.Cairn`; an :class:`~cairn.client.AsyncCairnClient` with :meth:`arun`),
    for one conversation: ``user`` is whose memories are read and written, ``session_id`` the
    conversation ``search`` and ``context`` plan with. Neither is the model's to choose (:data:`BOUND`)."""

    def __init__(self, cairn: Door, *, user: str | None = None, session_id: str | None = None,
                 names: Iterable[str] = TOOL_NAMES) -> None:
        self.cairn = cairn
        self.user, self.session_id = user, session_id
        self.tools = {name: _tool(name) for name in names}

    def definitions(self) -> list[dict[str, Any]]:
        """The definitions to give the model (``tools=`` of a chat or responses request)."""
        return function_tools(self.tools)

    def run(self, name: str, arguments: str | Mapping[str, Any] | None) -> str:
        """Run one tool call (``arguments``: the JSON string the model wrote, or its parsed object);
        the answer is a JSON string: the result, or ``{"error": ...}`` saying what to change."""
        try:
            tool, body = self._call(name, arguments)
            return _answer(tool, CALLS[tool.name](self.cairn, body))
        except ToolCallError as exc:
            return _error(name, str(exc), retryable=False)
        except CairnError as exc:
            return _error(name, _sentence(exc.message), retryable=exc.retryable)

    async def arun(self, name: str, arguments: str | Mapping[str, Any] | None) -> str:
        """:meth:`run` over an :class:`~cairn.client.AsyncCairnClient` (its methods are awaited)."""
        try:
            tool, body = self._call(name, arguments)
            return _answer(tool, await CALLS[tool.name](self.cairn, body))
        except ToolCallError as exc:
            return _error(name, str(exc), retryable=False)
        except CairnError as exc:
            return _error(name, _sentence(exc.message), retryable=exc.retryable)

    def _call(self, name: str, arguments: str | Mapping[str, Any] | None) -> tuple[Tool, dict[str, Any]]:
        tool = self.tools.get(name)
        if tool is None:
            raise ToolCallError(f"there is no tool {name!r}; call one of: {', '.join(self.tools)}")
        return tool, self._body(tool, _arguments(tool, arguments))

    def _body(self, tool: Tool, given: dict[str, Any]) -> dict[str, Any]:
        """``given`` with the bound fields, validated by the route's request model (every problem at once)."""
        bound = {"user": self.user, "session_id": self.session_id}
        fields = {**given, **{k: v for k, v in bound.items() if v is not None and k in tool.body.model_fields}}
        try:
            body = parse_request(tool.body, fields)
        except CairnError as exc:
            raise ToolCallError(_sentence(exc.message)) from None
        return body.model_dump(mode="json", exclude_unset=True)


def run_tool_call(cairn: Door, name: str, arguments: str | Mapping[str, Any] | None, *, user: str | None = None,
                  session_id: str | None = None) -> str:
    """One call, as :meth:`CairnTools.run` runs it (every tool available)."""
    return CairnTools(cairn, user=user, session_id=session_id).run(name, arguments)


def _arguments(tool: Tool, arguments: str | Mapping[str, Any] | None) -> dict[str, Any]:
    """The call's arguments as an object of ``tool``'s fields, or the reason they are not one."""
    example = json.dumps({tool.fields[0]: "..."})
    if arguments is None or (isinstance(arguments, str) and not arguments.strip()):
        parsed: Any = {}
    elif isinstance(arguments, str):
        try:
            parsed = json.loads(arguments)
        except json.JSONDecodeError as exc:
            raise ToolCallError(f"the arguments are not valid JSON ({exc.msg} at character {exc.pos}); "
                                f"send one JSON object, e.g. {example}") from None
    else:
        parsed = arguments
    if not isinstance(parsed, Mapping):
        raise ToolCallError(f"the arguments must be a JSON object, e.g. {example}; got {type(parsed).__name__}")
    unknown = [k for k in parsed if k not in tool.fields]
    if unknown:
        raise ToolCallError(f"unknown argument{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}; "
                            f"{tool.name} takes: {', '.join(tool.fields)}")
    return dict(parsed)


def _error(name: str, message: str, *, retryable: bool) -> str:
    return json.dumps({"error": message, "tool": name, "retryable": retryable}, ensure_ascii=False)


def _sentence(message: str) -> str:
    """A validation message without the parts a model does not need."""
    return message.removeprefix("invalid request: ").split(" For further information visit")[0]


# ---------------------------------------------------------------------- each tool's call and answer

# the door's method for each tool, given the validated body (an awaitable on the async client)
CALLS: dict[str, Callable[[Door, dict[str, Any]], Any]] = {
    "find": lambda door, body: door.find(body.pop("query"), **body),
    "search": lambda door, body: door.search(body.pop("query"), body.pop("session_id", None), **body),
    "context": lambda door, body: door.context(body.pop("query"), body.pop("session_id", None),
                                               budget_tokens=body.pop("budget_tokens", None), **body),
    "remember": lambda door, body: door.remember(body.pop("text"), body.pop("category", None),
                                                 user=body.pop("user", None), **body),
}


def _answer(tool: Tool, result: Any) -> str:
    """What the model reads of a tool's result, as JSON."""
    if tool.name == "context":
        shaped = {"text": result.text or "(nothing relevant found)", "tokens": result.tokens,
                  "sources": [{"n": p.n, "uri": p.uri, "title": p.title} for p in result.passages]}
    elif tool.name == "remember":
        shaped = {"uri": result.uri, "created": result.created, **({"note": result.note} if result.note else {})}
    else:
        shaped = _results(result)
    return json.dumps(shaped, ensure_ascii=False)


def _results(answer: Any) -> dict[str, Any]:
    """A find or search answer (in process or over HTTP: both have ``all()``) as the model reads it:
    one entry per match, best first, with the text it can quote."""
    results = []
    for match in answer.all():
        text = " ".join((match.text or match.abstract).split())
        entry = {"type": match.context_type.value if hasattr(match.context_type, "value") else match.context_type,
                 "uri": match.uri, "title": match.title, "score": round(match.score, 3),
                 "text": text[:RESULT_TEXT_CHARS]}
        if match.citation:
            entry["citation"] = match.citation
        results.append(entry)
    return {"results": results} if results else {"results": [], "note": "nothing matched above the score threshold"}
