"""What the emulators' HTTP handlers share: HTTP/1.1, no Nagle stalls, quiet logs, one dispatch."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class EmulatorHandler(BaseHTTPRequestHandler):
    """Routes every method to ``_handle(method)``, which each emulator implements."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out as two writes: no 40 ms delayed-ACK stalls

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        return

    def _handle(self, method: str) -> None:
        raise NotImplementedError

    def do_GET(self) -> None:
        self._handle("GET")

    def do_HEAD(self) -> None:
        self._handle("HEAD")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_DELETE(self) -> None:
        self._handle("DELETE")


def serve(handler: type[EmulatorHandler], name: str) -> ThreadingHTTPServer:
    """Start ``handler`` on a free port of 127.0.0.1 in a daemon thread; returns the server."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    server.block_on_close = False
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, name=name, daemon=True).start()
    return server


def shut(server: ThreadingHTTPServer | None) -> None:
    """Stop a server started by :func:`serve` (None: nothing to do)."""
    if server is not None:
        server.shutdown()
        server.server_close()
