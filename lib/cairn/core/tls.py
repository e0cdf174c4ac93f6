"""The process's verified TLS context, made once and shared by every HTTP client cairn builds.

httpx builds a new context for each client it makes (``verify=True``): it reads the whole CA bundle
again, about 40 ms a client on this project's machines, where the client itself costs 0.1 ms. An
agent that opens a :class:`~cairn.client.CairnClient` per call, a web ingest's pool per origin and
every provider client paid that each time. A context is safe to share between clients and threads;
this one is what httpx itself would build (certifi's bundle, or ``SSL_CERT_FILE`` / ``SSL_CERT_DIR``
when the environment is trusted), made again only when those variables change.
"""

from __future__ import annotations

import os
import ssl
from functools import lru_cache


@lru_cache(maxsize=8)
def _made(trust_env: bool, cert_file: str | None, cert_dir: str | None) -> ssl.SSLContext:
    """``cert_file``/``cert_dir`` only key the cache: httpx reads the same variables itself."""
    import httpx

    return httpx.create_ssl_context(trust_env=trust_env)


def verified_context(trust_env: bool = True) -> ssl.SSLContext:
    """The shared context that verifies servers as ``httpx.Client(verify=True, trust_env=trust_env)`` would."""
    if not trust_env:
        return _made(False, None, None)
    return _made(True, os.environ.get("SSL_CERT_FILE") or None, os.environ.get("SSL_CERT_DIR") or None)
