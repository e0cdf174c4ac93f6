"""Write the API function's HttpApi events in template.yaml from the /v1 route table (run by
`make openapi`; tests/unit/test_api_contract.py fails when the two differ)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from cairn.api import openapi_document
from cairn.api.routes import PUBLIC_ROUTES

TEMPLATE = Path(__file__).resolve().parents[1] / "template.yaml"


def events_block() -> str:
    doc = json.loads(openapi_document())
    routes = {(m.upper(), path) for path, ops in doc["paths"].items() for m in ops} | {("GET", "/v1/openapi.json")}
    lines = ["      Events:"]
    for method, path in sorted(routes, key=lambda r: (r[1], r[0])):
        words = [w for p in path.split("/") if p and p != "v1" for w in re.split(r"[_.{}]", p) if w]
        auth = ", Auth: {Authorizer: NONE}" if path in PUBLIC_ROUTES else ""
        lines += [f"        {method.capitalize()}{''.join(w.capitalize() for w in words)}:", "          Type: HttpApi",
                  f'          Properties: {{ApiId: !Ref HttpApi, Method: {method}, Path: "{path}"{auth}}}']
    return "\n".join(lines) + "\n"


def main() -> None:
    text = TEMPLATE.read_text()
    api = text.index("  ApiFunction:")
    start = text.index("      Events:\n", api)
    end = text.index("\n  ApiLogGroup:", start)
    TEMPLATE.write_text(text[:start] + events_block() + text[end:])


if __name__ == "__main__":
    main()
