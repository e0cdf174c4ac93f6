"""cairn's HTTP API: one ``/v1`` route table (:mod:`.routes`) with two doors — the API Lambda
behind API Gateway (``functions/api``) and ``cairn serve`` (:mod:`.server`)."""

from cairn.api.auth import ApiKeys, AuthorizerConfig, Caller
from cairn.api.openapi import openapi_json
from cairn.api.routes import build_app

__all__ = ["ApiKeys", "AuthorizerConfig", "Caller", "build_app", "openapi_document"]


def openapi_document() -> str:
    """The OpenAPI document of the route table, built without any service (nothing is loaded)."""
    from cairn.app.services import Services
    from cairn.core.config import Settings

    return openapi_json(build_app(Services(Settings())))
