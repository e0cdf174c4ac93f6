"""The API's route table is the single source of the OpenAPI document (committed as
docs/openapi.json) and of the API function's HttpApi events in template.yaml."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cairn.api import openapi_document
from cairn.api.routes import PUBLIC_ROUTES

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
REGENERATE = "make openapi"


def routes_of(doc: dict) -> set[tuple[str, str]]:
    return {(method.upper(), path) for path, ops in doc["paths"].items() for method in ops}


def test_the_committed_openapi_document_is_the_code_s():
    committed = (REPO / "docs" / "openapi.json").read_text()
    assert committed == openapi_document(), f"docs/openapi.json differs from the route table: run `{REGENERATE}`"


def test_the_openapi_document_validates():
    from openapi_spec_validator import validate

    doc = json.loads(openapi_document())
    validate(doc)
    assert all(p.startswith("/v1/") for p in doc["paths"])
    assert "HTTPValidationError" not in json.dumps(doc)  # invalid requests answer 400 with cairn's envelope
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            if "422" in op["responses"]:  # only content that cannot be ingested, in the envelope
                assert (method, path) == ("delete", "/v1/documents")
                assert op["responses"]["422"]["content"]["application/json"]["schema"]["$ref"].endswith("/ErrorBody")


def test_template_http_api_events_are_the_route_table():
    template = (REPO / "template.yaml").read_text()
    block = template[template.index("  ApiFunction:"):]
    block = block[: block.index("\n  ApiLogGroup:")]
    events = set(re.findall(r"Method: (\w+), Path: \"([^\"]+)\"", block))
    expected = routes_of(json.loads(openapi_document())) | {("GET", "/v1/openapi.json")}
    assert events == expected, f"template.yaml's ApiFunction events differ from cairn.api.routes: {events ^ expected}"
    public = set(re.findall(r"Path: \"([^\"]+)\", Auth: \{Authorizer: NONE\}", block))
    assert public == set(PUBLIC_ROUTES) == {"/v1/health", "/v1/openapi.json"}  # every other route goes through the authorizer
