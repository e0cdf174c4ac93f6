"""What cairn.api.openapi adds to the generated document so that a generated client works unedited."""

from __future__ import annotations

import json

import pytest

from cairn.api import openapi_document
from cairn.api.openapi import OPERATIONS, SECURITY_SCHEME
from cairn.api.routes import PUBLIC_ROUTES

pytestmark = pytest.mark.unit

DOC = json.loads(openapi_document())
OPS = [(method, path, op) for path, ops in DOC["paths"].items() for method, op in ops.items()]


def test_every_route_has_a_short_operation_id_from_the_table():
    missing = [f"{m.upper()} {p}" for m, p, _ in OPS if (m, p) not in OPERATIONS]
    assert not missing, f"add these routes to cairn.api.openapi.OPERATIONS: {missing}"
    ids = [op["operationId"] for _, _, op in OPS]
    assert len(ids) == len(set(ids))
    assert all(i.isidentifier() and "_v1_" not in i for i in ids), ids


def test_bearer_auth_is_declared_and_required_except_on_public_routes():
    assert DOC["components"]["securitySchemes"][SECURITY_SCHEME] == {
        "type": "http", "scheme": "bearer", "description": DOC["components"]["securitySchemes"][SECURITY_SCHEME]["description"]}
    for method, path, op in OPS:
        if path in PUBLIC_ROUTES:
            assert op["security"] == [] and "401" not in op["responses"], path
        else:
            assert op["security"] == [{SECURITY_SCHEME: []}] and "401" in op["responses"], f"{method} {path}"


def test_a_route_that_creates_declares_201():
    assert set(DOC["paths"]["/v1/sessions"]["post"]["responses"]) & {"200", "201"} == {"201"}
    assert set(DOC["paths"]["/v1/sessions/{session_id}/messages"]["post"]["responses"]) & {"200", "201"} == {"201"}
    assert {"200", "201"} <= set(DOC["paths"]["/v1/memories"]["post"]["responses"])  # new, or updated in place


def test_every_error_is_the_envelope_with_a_description():
    for method, path, op in OPS:
        for status, answer in op["responses"].items():
            assert answer["description"] and answer["description"] != "Successful Response", (method, path, status)
            if int(status) >= 400:
                assert answer["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/ErrorBody"}
        assert op["description"], f"{method} {path}"
    assert {"409", "413", "429"} <= set(DOC["paths"]["/v1/sessions/{session_id}/messages"]["post"]["responses"])


def _untyped(schema: dict) -> bool:
    return schema.get("type") == "object" and "properties" not in schema and "$ref" not in schema


def test_every_success_answer_has_a_typed_schema():
    untyped = [f"{m.upper()} {p} {s}" for m, p, op in OPS for s, a in op["responses"].items()
               if int(s) < 300 and _untyped(a.get("content", {}).get("application/json", {}).get("schema", {}))]
    assert not untyped, f"answers without a schema of their fields: {untyped}"
