"""Lambda: the Retrieve state, one invocation per typed query (RetrieveTask -> RetrieveOutput).

Embeds the query once and runs quick or thinking (hierarchical) retrieval against the vector
store; the output is compacted (no vectors, bounded texts) to fit Step Functions' state size.
"""

from __future__ import annotations

from typing import Any

from cairn.app import tasks
from cairn.app.services import Services
from cairn.app.workflow import prepare_at_init

services = Services()  # built on the first invocation, then reused while the container is warm
prepare_at_init(services, ("settings", "store", "embedder"))  # SnapStart / provisioned concurrency: before the snapshot


def handler(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    return tasks.retrieve(services, event)
