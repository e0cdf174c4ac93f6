"""Who is calling: the tenant (and optionally the end user) of the caller's credentials.

Both doors put the caller where API Gateway puts it, in ``requestContext.authorizer``, and the
route table reads it from there only — never from a header or the body:

* **On AWS** an authorizer fills it: a Lambda authorizer's context ``tenant`` (and ``user``); a
  JWT authorizer's claims (``tenant_claim``, default ``custom:tenant``; ``user_claim``, default
  ``custom:user``); IAM auth, the caller's ``userArn`` or ``accountId`` mapped to a tenant.
* **``cairn serve``** is its own authorizer: :class:`ApiKeys` maps ``Authorization: Bearer
  <key>`` to a tenant (and optionally a user) and writes them into the same place.

A caller bound to one user (``user`` set) may act only for that user.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError, Forbidden, Unauthorized

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,127}$")


@dataclass(frozen=True)
class Caller:
    tenant: str
    user: str | None = None  # the end user this caller is bound to (None: any user of the tenant)

    def user_for(self, asked: str | None) -> str | None:
        """The end user a request acts for: the bound user, or the one asked when unbound."""
        if self.user is None:
            return asked
        if asked not in (None, self.user):
            raise Forbidden(f"these credentials act for user {self.user!r} only; they cannot act for {asked!r}")
        return self.user


@dataclass(frozen=True)
class AuthorizerConfig:
    """How the API Lambda reads the caller from API Gateway's authorizer context."""

    tenant_claim: str = "custom:tenant"
    user_claim: str = "custom:user"
    iam_tenants: Mapping[str, str] | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> AuthorizerConfig:
        env = os.environ if env is None else env
        try:
            iam = json.loads(env.get("CAIRN_IAM_TENANTS") or "{}")
        except ValueError:
            raise ConfigError("CAIRN_IAM_TENANTS is not valid JSON; use {\"<userArn or accountId>\": \"<tenant>\"}") from None
        return cls(
            tenant_claim=env.get("CAIRN_TENANT_CLAIM") or cls.tenant_claim,
            user_claim=env.get("CAIRN_USER_CLAIM") or cls.user_claim,
            iam_tenants=iam,
        )


def caller_of(event: Mapping[str, Any], config: AuthorizerConfig) -> Caller:
    """The caller of an API Gateway (payload 2.0) event; 401 when the credentials name no tenant."""
    context = event.get("requestContext") if isinstance(event, Mapping) else None
    auth = (context or {}).get("authorizer") if isinstance(context, Mapping) else None
    auth = auth if isinstance(auth, Mapping) else {}
    found: dict[str, Any] = {}
    if isinstance(auth.get("lambda"), Mapping):
        found = {"tenant": auth["lambda"].get("tenant"), "user": auth["lambda"].get("user")}
    if not found.get("tenant") and isinstance(auth.get("jwt"), Mapping):
        claims = auth["jwt"].get("claims")
        claims = claims if isinstance(claims, Mapping) else {}
        found = {"tenant": claims.get(config.tenant_claim), "user": claims.get(config.user_claim)}
    if not found.get("tenant") and isinstance(auth.get("iam"), Mapping):
        iam, mapping = auth["iam"], config.iam_tenants or {}
        found = {"tenant": mapping.get(str(iam.get("userArn") or "")) or mapping.get(str(iam.get("accountId") or ""))}
    tenant, user = found.get("tenant"), found.get("user")
    if not isinstance(tenant, str) or not tenant:
        raise Unauthorized("no tenant in the caller's credentials: call through an authorizer that sets one")
    if not _NAME.match(tenant) or (user is not None and (not isinstance(user, str) or not _NAME.match(user))):
        raise Unauthorized("the credentials carry a tenant or user that is not a valid name")
    return Caller(tenant, user or None)


class ApiKeys:
    """API keys of ``cairn serve``: ``{"<key>": "<tenant>"}`` or ``{"<key>": {"tenant", "user"}}``.

    A key may be written as ``"sha256:<hex digest>"`` so the file holds no usable secret. Keys are
    compared in constant time."""

    def __init__(self, keys: Mapping[str, Any]) -> None:
        self._callers: list[tuple[str, Caller]] = []
        for key, value in keys.items():
            entry = {"tenant": value} if isinstance(value, str) else value
            if not isinstance(entry, Mapping) or not isinstance(entry.get("tenant"), str):
                raise ConfigError(f"API key entry {_hint(key)}: the value must be a tenant name or {{\"tenant\", \"user\"}}")
            tenant, user = entry["tenant"], entry.get("user")
            if not _NAME.match(tenant) or (user is not None and not (isinstance(user, str) and _NAME.match(user))):
                raise ConfigError(f"API key entry {_hint(key)}: tenant and user must be names of letters, digits, _ . @ -")
            if not key.startswith("sha256:") and len(key) < 16:
                raise ConfigError(f"API key {_hint(key)} is shorter than 16 characters; use a long random key")
            digest = key[len("sha256:"):].lower() if key.startswith("sha256:") else _sha256(key)
            self._callers.append((digest, Caller(tenant, user)))

    @classmethod
    def load(cls, *, file: str | Path | None = None, env: Mapping[str, str] | None = None) -> ApiKeys | None:
        """Keys from ``file`` (JSON), else ``CAIRN_API_KEYS_FILE``, else ``CAIRN_API_KEYS`` (JSON); None: no keys."""
        env = os.environ if env is None else env
        path = file or env.get("CAIRN_API_KEYS_FILE")
        if path:
            try:
                raw = Path(path).read_text(encoding="utf-8")
            except OSError as exc:
                raise ConfigError(f"cannot read the API keys file {str(path)!r}: {exc.strerror}") from None
            source = f"the API keys file {str(path)!r}"
        elif env.get("CAIRN_API_KEYS"):
            raw, source = env["CAIRN_API_KEYS"], "CAIRN_API_KEYS"
        else:
            return None
        try:
            data = json.loads(raw)
        except ValueError as exc:
            raise ConfigError(f"{source} is not valid JSON ({exc}); use {{\"<key>\": \"<tenant>\"}}") from None
        if not isinstance(data, dict) or not data:
            raise ConfigError(f"{source} must be a non-empty JSON object: {{\"<key>\": \"<tenant>\"}}")
        return cls(data)

    def caller(self, authorization: str | None) -> Caller:
        """The caller of an ``Authorization`` header value; 401 when missing or unknown."""
        if not authorization:
            raise Unauthorized("missing credentials: send 'Authorization: Bearer <API key>'")
        scheme, _, key = authorization.strip().partition(" ")
        if scheme.lower() != "bearer" or not key.strip():
            raise Unauthorized("the Authorization header must be 'Bearer <API key>'")
        digest = _sha256(key.strip())
        found = None
        for known, caller in self._callers:
            if hmac.compare_digest(known, digest):
                found = caller
        if found is None:
            raise Unauthorized("unknown API key")
        return found


def _sha256(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def _hint(key: str) -> str:
    return repr(key[:4] + "…") if not key.startswith("sha256:") else repr(key[:15] + "…")
