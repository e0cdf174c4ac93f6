"""What the emulators' HTTP handlers share: HTTP/1.1, no Nagle stalls, quiet logs, one dispatch."""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler
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
