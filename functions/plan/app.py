"""Lambda: the Plan state of the retrieval workflow (WorkflowInput -> PlanOutput).

Reads the session (summary + last messages) when the execution names one, then plans the typed
queries. The planner never raises for a bad model answer (it falls back to the raw query); a
missing session or a bad input is a ``CairnTaskError``, a throttled read a ``CairnRetryableError``.
"""

from __future__ import annotations

from typing import Any

from cairn.app import tasks
from cairn.app.services import Services
from cairn.app.workflow import prepare_at_init

services = Services()  # built on the first invocation, then reused while the container is warm
prepare_at_init(services, ("settings", "sessions", "llm"))  # SnapStart / provisioned concurrency: before the snapshot


def handler(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    return tasks.plan(services, event)
