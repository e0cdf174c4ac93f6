"""Lambda: the Rerank state (RerankInput -> the FindResult as JSON), and its fallback
AssembleWithoutRerank (the same stage without the reranker, after the Rerank task failed).

One rerank call per typed query (the reranker's fallbacks keep vector scores and are counted),
threshold, dedupe, cut and bucket; the retrieval statistics leave as CloudWatch EMF.
"""

from __future__ import annotations

from typing import Any

from cairn.app import tasks
from cairn.app.services import Services
from cairn.app.workflow import prepare_at_init

services = Services()  # built on the first invocation, then reused while the container is warm
prepare_at_init(services, ("settings", "store", "embedder", "reranker"))  # SnapStart / provisioned concurrency: before the snapshot


def handler(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    return tasks.rerank(services, event)
