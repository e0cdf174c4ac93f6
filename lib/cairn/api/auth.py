"""Who is calling: the tenant (and optionally the end user) of the caller's credentials.

Both doors put the caller where API Gateway puts it, in ``requestContext.authorizer``, and the
route table reads it from there only — never from a header or the body:

* **On AWS** an authorizer fills it: a Lambda authorizer's context ``tenant`` (and ``user``); a
  JWT authorizer's claims (``tenant_claim``, default ``custom:tenant``; ``user_claim``, default
  ``custom:user``); IAM auth, the caller's ``userArn`` or ``accountId`` mapped to a tenant.
* **``cairn serve``** is its own authorizer: :class:`ApiKeys` maps ``Authorization: Bearer
  <key>`` to a tenant (and optionally a user) and writes them into the same place.

Every credential resolves to a :class:`~cairn.app.Principal`: tenant, optional end user, and a
role (``admin``, ``writer``, ``reader``, ``user``; see :mod:`cairn.app.policy` for what each may
do). A credential that names a user and no role is that user's (role ``user``); one that names
neither is the tenant's admin, as keys written before roles existed were.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cairn.app.principal import NAME as _NAME
from cairn.app.principal import ROLES, Principal
from cairn.core.errors import ConfigError, Unauthorized

Caller = Principal  # the name the doors used before principals had roles


@dataclass(frozen=True)
class AuthorizerConfig:
    """How the API Lambda reads the caller from API Gateway's authorizer context."""

    tenant_claim: str = "custom:tenant"
    user_claim: str = "custom:user"
    role_claim: str = "custom:role"
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
            role_claim=env.get("CAIRN_ROLE_CLAIM") or cls.role_claim,
            iam_tenants=iam,
        )


# the routes that answer without credentials (cairn serve lets them through, template.yaml gives
# them no authorizer, the OpenAPI document lists no 401 for them)
PUBLIC_ROUTES = frozenset({"/v1/health", "/v1/openapi.json"})


def caller_of(event: Mapping[str, Any], config: AuthorizerConfig) -> Caller:
    """The caller of an API Gateway (payload 2.0) event; 401 when the credentials name no tenant."""
    context = event.get("requestContext") if isinstance(event, Mapping) else None
    auth = (context or {}).get("authorizer") if isinstance(context, Mapping) else None
    auth = auth if isinstance(auth, Mapping) else {}
    found: dict[str, Any] = {}
    if isinstance(auth.get("lambda"), Mapping):
        found = {k: auth["lambda"].get(k) for k in ("tenant", "user", "role")}
    if not found.get("tenant") and isinstance(auth.get("jwt"), Mapping):
        claims = auth["jwt"].get("claims")
        claims = claims if isinstance(claims, Mapping) else {}
        found = {"tenant": claims.get(config.tenant_claim), "user": claims.get(config.user_claim),
                 "role": claims.get(config.role_claim)}
    if not found.get("tenant") and isinstance(auth.get("iam"), Mapping):
        iam, mapping = auth["iam"], config.iam_tenants or {}
        found = {"tenant": mapping.get(str(iam.get("userArn") or "")) or mapping.get(str(iam.get("accountId") or ""))}
    tenant, user, role = found.get("tenant"), found.get("user") or None, found.get("role") or None
    if not isinstance(tenant, str) or not tenant:
        raise Unauthorized("no tenant in the caller's credentials: call through an authorizer that sets one")
    if not _NAME.match(tenant) or (user is not None and (not isinstance(user, str) or not _NAME.match(user))):
        raise Unauthorized("the credentials carry a tenant or user that is not a valid name")
    if role is not None and role not in ROLES:
        raise Unauthorized(f"the credentials carry the role {str(role)[:40]!r}; roles are {', '.join(ROLES)}")
    if role == "user" and user is None:
        raise Unauthorized("the credentials carry the role 'user' but name no user")
    return Principal.of(tenant, user, role)


class ApiKeys:
    """API keys of ``cairn serve``: ``{"<key>": "<tenant>"}`` (the tenant's admin) or
    ``{"<key>": {"tenant", "user", "role"}}`` (role: admin, writer, reader or user; a user and no
    role is that user's key).

    A key may be written as ``"sha256:<hex digest>"`` so the file holds no usable secret. Keys are
    compared in constant time."""

    def __init__(self, keys: Mapping[str, Any]) -> None:
        self._callers: list[tuple[str, Caller]] = []
        for key, value in keys.items():
            entry = {"tenant": value} if isinstance(value, str) else value
            if not isinstance(entry, Mapping) or not isinstance(entry.get("tenant"), str):
                raise ConfigError(f"API key entry {_hint(key)}: the value must be a tenant name or {{\"tenant\", \"user\"}}")
            tenant, user, role = entry["tenant"], entry.get("user"), entry.get("role")
            if not _NAME.match(tenant) or (user is not None and not (isinstance(user, str) and _NAME.match(user))):
                raise ConfigError(f"API key entry {_hint(key)}: tenant and user must be names of letters, digits, _ . @ -")
            if role is not None and role not in ROLES:
                raise ConfigError(f"API key entry {_hint(key)}: role {role!r} is not one of {', '.join(ROLES)}")
            if (role == "user") != bool(user) and role is not None:
                raise ConfigError(f"API key entry {_hint(key)}: a key names a user exactly when its role is 'user'")
            if not key.startswith("sha256:") and len(key) < 16:
                raise ConfigError(f"API key {_hint(key)} is shorter than 16 characters; use a long random key")
            digest = key[len("sha256:"):].lower() if key.startswith("sha256:") else _sha256(key)
            self._callers.append((digest, Principal.of(tenant, user, role)))

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

    def caller(self, authorization: str | None) -> Principal:
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
