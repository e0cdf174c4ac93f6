"""cairn's HTTP API: one ``/v1`` route table (:mod:`.routes`) with two doors — the API Lambda
behind API Gateway (``functions/api``) and ``cairn serve`` (:mod:`.server`)."""

from .auth import ApiKeys, AuthorizerConfig, Caller
from .openapi import openapi_document
from .routes import build_app

__all__ = ["ApiKeys", "AuthorizerConfig", "Caller", "build_app", "openapi_document"]
