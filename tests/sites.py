"""Real HTTP(S) servers on loopback for the URL-ingestion tests: each serves a table of paths and
records every request it receives (path and Host header), so a test can say what was never asked."""

from __future__ import annotations

import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

Route = tuple[int, dict[str, str], bytes]  # status, headers, body


def page(title: str, text: str) -> Route:
    body = f"<html><head><title>{title}</title></head><body><h1>{title}</h1><p>{text}</p></body></html>"
    return 200, {"Content-Type": "text/html; charset=utf-8"}, body.encode()


def redirect(to: str, status: int = 302) -> Route:
    return status, {"Location": to}, b""


def xml(body: str) -> Route:
    return 200, {"Content-Type": "application/xml"}, body.encode()


@dataclass
class Site:
    routes: dict[str, Route] = field(default_factory=dict)
    requests: list[tuple[str, str]] = field(default_factory=list)  # (path, Host header)
    port: int = 0
    scheme: str = "http"

    @property
    def base(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}"

    @property
    def paths(self) -> list[str]:
        return [p for p, _ in self.requests]


def _handler(site: Site) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the http.server hook
            site.requests.append((self.path, self.headers.get("Host", "")))
            status, headers, body = site.routes.get(self.path, (404, {"Content-Type": "text/plain"}, b"not found"))
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:  # quiet
            return None

    return Handler


@contextmanager
def serve(routes: dict[str, Route] | None = None, *, tls: ssl.SSLContext | None = None) -> Iterator[Site]:
    """A :class:`Site` listening on 127.0.0.1 (a free port) until the block ends."""
    site = Site(dict(routes or {}), scheme="https" if tls else "http")
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(site))
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    site.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield site
    finally:
        server.shutdown()
        server.server_close()
