"""The import graph of each Lambda handler, checked in a fresh interpreter (a cold container).

No handler may import litellm, onnxruntime, opensearch-py, pinecone, tokenizers, bm25s or
Powertools when it is imported (but the api function, whose route table is Powertools' event
handler): each is loaded on the first invocation that needs it, so a cold start pays only for
what the function uses. (The import *time* is measured by the ``imports``
benchmark, not asserted here.)
"""

from __future__ import annotations

import pytest

from benchmarks.imports import ALLOWED, FORBIDDEN, HANDLERS, probe

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("handler", HANDLERS)
def test_importing_a_handler_loads_no_heavy_module(handler):
    loaded = probe(handler)["loaded"]
    heavy = sorted(set(loaded) & (set(FORBIDDEN) - set(ALLOWED.get(handler, ()))))
    assert heavy == [], f"functions/{handler}/app.py imports {heavy} at import time; import them lazily"


def test_the_workflow_handlers_do_not_build_clients_at_import():
    # boto3 is only needed when a handler reaches AWS; the retrieve and rerank tasks never do at import
    for handler in ("retrieve", "rerank"):
        assert "boto3" not in probe(handler)["loaded"]
