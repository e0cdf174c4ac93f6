"""The OpenAPI document of the ``/v1`` route table (``GET /v1/openapi.json``; committed as
``docs/openapi.json`` by ``make openapi``).

Powertools generates the document from the route table; this module adds what the table does not
say: cairn's error envelope on every authenticated route (invalid requests answer 400, never 422).
"""

from __future__ import annotations

import json

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver

from .. import __version__
from ..services import Services
from .models import ErrorBody
from .routes import PUBLIC_ROUTES, build_app

TITLE = "cairn"
_ERROR_ANSWERS = {
    "400": "bad request: every problem is listed, each with where it is",
    "401": "missing or unknown credentials",
    "403": "the credentials may not act for that end user",
    "404": "not found (route, session, URI)",
    "503": "unavailable for now: retry after Retry-After seconds",
}


def openapi_json(app: APIGatewayHttpResolver) -> str:
    """The OpenAPI document of the route table (stable key order: committed as docs/openapi.json)."""
    doc = json.loads(app.get_openapi_json_schema(
        title=TITLE,
        version=__version__,
        summary="Context retrieval for AI agents: memories, resources and skills, ranked and explained.",
        description="Authenticate with 'Authorization: Bearer <API key>' (cairn serve) or your API Gateway authorizer.",
    ))
    schemas = doc.setdefault("components", {}).setdefault("schemas", {})
    for name in ("HTTPValidationError", "ValidationError", "ResponseValidationError"):
        schemas.pop(name, None)
    schemas["ErrorBody"] = ErrorBody.model_json_schema()
    envelope = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
    for path, operations in doc.get("paths", {}).items():  # invalid requests answer 400 (ErrorBody), never 422
        for op in operations.values():
            answers = op.setdefault("responses", {})
            answers.pop("422", None)
            if path not in PUBLIC_ROUTES:
                answers.update({code: {"description": text, "content": envelope} for code, text in _ERROR_ANSWERS.items()})
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def openapi_document() -> str:
    """The OpenAPI document, built without any service (nothing is loaded)."""
    from ..config import Settings

    return openapi_json(build_app(Services(Settings())))
