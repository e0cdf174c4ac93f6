"""A free TCP port on the loopback interface, for the servers tests start (moto, cairn serve, ...),
and `cairn serve` started on one as a user starts it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def free_port() -> int:
    """A port nothing listens on now (the OS picks it; the caller binds it soon after)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def fresh_moto(endpoint: str) -> str:
    """``endpoint`` (a moto server just started) with nothing in it: moto's backends are global to
    the process, so what an earlier test module of this pytest worker created (a state machine, a
    table, functions of the same name) would still be there. Returns ``endpoint``."""
    import requests

    requests.post(f"{endpoint}/moto-api/reset", timeout=10).raise_for_status()
    return endpoint


@contextmanager
def moto_server() -> Iterator[str]:
    """A moto server on a free loopback port, emptied, with test credentials in the environment;
    its endpoint URL."""
    import pytest
    from moto.server import ThreadedMotoServer

    with pytest.MonkeyPatch.context() as mp:
        for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                           "AWS_DEFAULT_REGION": "us-east-1"}.items():
            mp.setenv(key, value)
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=free_port(), verbose=False)
        server.start()
        try:
            yield fresh_moto(f"http://127.0.0.1:{server._server.server_port}")  # type: ignore[union-attr]
        finally:
            server.stop()


@contextmanager
def cairn_serve(home: Path, keys: Path, *, workers: int = 2, env: dict[str, str] | None = None,
                startup_s: float = 300) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``cairn serve --workers N`` on ``home`` with the keys file ``keys``, as a user starts it:
    yields the process and its base URL once it says it listens; stopped when the block ends."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "cairn.cli.main", "--home", str(home), "serve", "--workers", str(workers), "--port", str(port),
         "--api-keys", str(keys)],
        stderr=subprocess.PIPE, text=True, env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", **(env or {})},
    )
    try:
        deadline, lines = time.monotonic() + startup_s, []
        while time.monotonic() < deadline:
            line = proc.stderr.readline()  # type: ignore[union-attr]
            lines.append(line)
            if "listening on" in line or proc.poll() is not None:
                break
        assert "listening on" in lines[-1], "".join(lines)
        yield proc, f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=60)
