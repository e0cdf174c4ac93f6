"""Two requests answered at the same time in one process each see their own event.

``cairn serve`` answers requests on several threads of one process (:mod:`cairn.api.server`).
Powertools keeps the event being answered on a class shared by every resolver, so without
:class:`cairn.api.routes.ThreadResolver` the second request's event replaced the first's while
the first was still being answered: one tenant's search ran as the other tenant."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from cairn import Cairn
from cairn.api.routes import build_app, resolve
from cairn.app.services import Services
from cairn.core.config import Settings
from cairn.engine.ingest import IngestPayload

pytestmark = pytest.mark.integration


def _find(tenant: str, query: str) -> dict[str, Any]:
    return {"version": "2.0", "rawPath": "/v1/find", "rawQueryString": "",
            "headers": {"content-type": "application/json"},
            "requestContext": {"requestId": f"req-{tenant}", "stage": "$default",
                               "http": {"method": "POST", "path": "/v1/find"},
                               "authorizer": {"lambda": {"tenant": tenant}}},
            "body": json.dumps({"query": query}), "isBase64Encoded": False}


def test_two_tenants_answered_at_once_each_get_their_own_documents(tmp_path: Path, embedder) -> None:
    services = Services(Settings(home=tmp_path), embedder=embedder)
    for tenant, doc in (("acme", {"path": "refunds.md", "text": "# Refunds\n\nAcme refunds reach the card in five days."}),
                        ("globex", {"path": "parking.md", "text": "# Parking\n\nGlobex staff park in garage B."})):
        root = "cairn://resources/handbook"
        Cairn(services, tenant).ingestor().ingest(IngestPayload.parse({"root_uri": root, "documents": [doc]}).to_documents(), root)

    both_inside = threading.Barrier(2, timeout=10)

    def meet(app: Any, next_middleware: Any) -> Any:  # both requests are past routing before either handler runs
        both_inside.wait()
        return next_middleware(app)

    answers: dict[str, dict[str, Any]] = {}

    def ask(tenant: str, query: str) -> None:
        app = build_app(services)  # one resolver per thread, as cairn serve keeps them
        app.use(middlewares=[meet])
        answers[tenant] = resolve(app, _find(tenant, query))

    threads = [threading.Thread(target=ask, args=("acme", "how long does a refund take")),
               threading.Thread(target=ask, args=("globex", "where can staff park"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)

    uris = {tenant: [m["uri"] for m in json.loads(a["body"])["resources"]] for tenant, a in answers.items()}
    assert [answers[t]["statusCode"] for t in ("acme", "globex")] == [200, 200], answers
    names = {tenant: [u.rsplit("/", 1)[1] for u in found] for tenant, found in uris.items()}
    assert names["acme"][:1] == ["refunds.md"] and "parking.md" not in names["acme"], names
    assert names["globex"][:1] == ["parking.md"] and "refunds.md" not in names["globex"], names
