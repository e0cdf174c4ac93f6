"""What the application runs on, as a protocol: the composition root (:class:`cairn.app.services.Services`)
provides it; the application and the workflow name only this, so they sit below the root that
builds them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from cairn.engine.pipeline import Parts

if TYPE_CHECKING:
    from cairn.core.protocols import S3Client, StepFunctionsClient
    from cairn.engine.pipeline import Pipeline
    from cairn.ports.ratelimit import RateLimiter


class AppParts(Parts, Protocol):
    """The engine's parts, plus each tenant's engine, the rate limiter, the workflow's and S3's clients."""

    @property
    def limiter(self) -> RateLimiter: ...
    @property
    def sfn(self) -> StepFunctionsClient: ...
    @property
    def s3(self) -> S3Client: ...

    def pipeline(self, tenant: str | None = None) -> Pipeline: ...
