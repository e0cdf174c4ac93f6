"""Secrets in settings, read at run time through Powertools Parameters, cached.

A setting that holds a secret (a Pinecone, Cohere or OpenAI/LiteLLM API key) may name where the
secret lives instead of holding it, so no key sits in a plaintext environment variable:

    ssm:/cairn/prod/pinecone-api-key             an SSM parameter (SecureString: decrypted)
    secretsmanager:cairn/prod/pinecone            a Secrets Manager secret's SecretString
    secretsmanager:cairn/prod/pinecone#api_key    ... the field ``api_key`` of a JSON secret
    secretsmanager:arn:aws:secretsmanager:...#api_key   an ARN works too
    anything else                                 the value itself (local development)

Values are cached for ``max_age_s`` (Powertools' cache), so a warm Lambda container reads each
secret once per ``max_age_s`` and a rotated secret is picked up without a redeploy. Powertools is
imported on the first reference, never at import time. A secret that cannot be read is a
``SecretUnavailable`` (a ``ConfigError``) naming the reference and what the role needs.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from cairn.core.errors import SecretUnavailable

SSM_PREFIX = "ssm:"
SECRETS_MANAGER_PREFIX = "secretsmanager:"
DEFAULT_MAX_AGE_S = 300
_THROTTLED = ("Throttling", "TooManyRequests", "Rate exceeded")



def is_reference(value: str | None) -> bool:
    """Whether ``value`` names a secret (``ssm:...`` / ``secretsmanager:...``) rather than being one."""
    return isinstance(value, str) and value.startswith((SSM_PREFIX, SECRETS_MANAGER_PREFIX))


class SecretResolver:
    """Resolves secret references through Powertools' SSM and Secrets Manager providers, cached.

    ``ssm`` / ``secrets`` are Powertools providers (``parameters.SSMProvider(boto3_client=...)``,
    ``parameters.SecretsProvider(...)``); by default they are built on first use with the default
    boto3 session. Build one resolver per process (or Lambda container) and reuse it."""

    def __init__(self, *, max_age_s: int = DEFAULT_MAX_AGE_S, ssm: Any = None, secrets: Any = None) -> None:
        self.max_age_s = max_age_s
        self._ssm, self._secrets = ssm, secrets
        self._lock = threading.Lock()

    def resolve(self, value: str | None, *, setting: str = "a setting") -> str | None:
        """The secret ``value`` refers to, or ``value`` itself when it is not a reference."""
        if value is None or not is_reference(value):
            return value
        if value.startswith(SSM_PREFIX):
            name = value[len(SSM_PREFIX):]
            return self._read(value, setting, lambda: self._provider("ssm").get(name, max_age=self.max_age_s, decrypt=True),
                              need="ssm:GetParameter (and kms:Decrypt for a SecureString)")
        ref = value[len(SECRETS_MANAGER_PREFIX):]
        name, _, field = ref.partition("#")
        raw = self._read(value, setting, lambda: self._provider("secrets").get(name, max_age=self.max_age_s),
                         need="secretsmanager:GetSecretValue")
        return raw if not field else self._field(raw, field, value, setting)

    def _provider(self, kind: str) -> Any:
        with self._lock:
            if kind == "ssm" and self._ssm is None:
                from aws_lambda_powertools.utilities.parameters import SSMProvider

                self._ssm = SSMProvider()
            if kind == "secrets" and self._secrets is None:
                from aws_lambda_powertools.utilities.parameters import SecretsProvider

                self._secrets = SecretsProvider()
            return self._ssm if kind == "ssm" else self._secrets

    @staticmethod
    def _read(ref: str, setting: str, get: Any, *, need: str) -> str:
        try:
            out = get()
        except Exception as exc:  # Powertools wraps every AWS error in GetParameterError
            text = str(exc)
            throttled = any(t in text for t in _THROTTLED)
            raise SecretUnavailable(
                f"{setting}: cannot read {ref!r}: {text}"
                + ("" if throttled else f"; check that it exists in this account and region and that the role has {need}"),
                retryable=throttled,
            ) from exc
        if isinstance(out, bytes):
            out = out.decode("utf-8")
        if not isinstance(out, str) or not out:
            raise SecretUnavailable(f"{setting}: {ref!r} is empty; store the secret's value in it")
        return out

    @staticmethod
    def _field(raw: str, field: str, ref: str, setting: str) -> str:
        try:
            data = json.loads(raw)
        except json.JSONDecodeError:
            raise SecretUnavailable(f"{setting}: {ref!r} asks for the field {field!r} but the secret is not a JSON object") from None
        if not isinstance(data, dict) or not isinstance(data.get(field), str) or not data[field]:
            keys = sorted(data) if isinstance(data, dict) else []
            raise SecretUnavailable(f"{setting}: the secret in {ref!r} has no text field {field!r}; its fields: {keys}")
        return data[field]


_default: SecretResolver | None = None
_default_lock = threading.Lock()


def resolve_secret(value: str | None, *, setting: str = "a setting") -> str | None:
    """Resolve through one process-wide :class:`SecretResolver` (built on first use)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = SecretResolver()
    return _default.resolve(value, setting=setting)
