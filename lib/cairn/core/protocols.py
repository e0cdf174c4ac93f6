"""The protocols of the services the composition root builds that have no base class of their own.

Most services are typed by their base class (:class:`~cairn.ports.vectorstores.VectorStore`,
:class:`~cairn.ports.embeddings.Embedder`, :class:`~cairn.ports.llm.base.LLMClient`,
:class:`~cairn.ports.rerank.base.Reranker`, :class:`~cairn.ports.sessions.base.SessionStore`,
:class:`~cairn.engine.ingest.ContentStore`) or protocol (:class:`~cairn.engine.planning.base.Planner`). The AWS
clients are boto3's, which are built at run time and carry no static types: these protocols
name the calls cairn makes on them, so that :mod:`cairn.app.services` (and what reads its services)
is checked against them, and a test or a host application can hand in any object that has them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol


class Paginator(Protocol):
    def paginate(self, **kwargs: Any) -> Iterable[Mapping[str, Any]]: ...


class S3Client(Protocol):
    """The calls cairn makes on a boto3 S3 client (the S3 content store, S3 ingestion)."""

    def get_object(self, **kwargs: Any) -> dict[str, Any]: ...

    def put_object(self, **kwargs: Any) -> dict[str, Any]: ...

    def delete_objects(self, **kwargs: Any) -> dict[str, Any]: ...

    def get_paginator(self, operation_name: str) -> Paginator: ...


class StepFunctionsClient(Protocol):
    """The call cairn makes on a boto3 Step Functions client (the API's retrieval workflow)."""

    def start_sync_execution(self, **kwargs: Any) -> dict[str, Any]: ...
