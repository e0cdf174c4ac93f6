"""The socket `cairn serve --workers N` listens on: its connections send without Nagle's delay,
and a port already taken is refused with the address in the message."""

from __future__ import annotations

import asyncio
import socket

import pytest

from cairn.api.server import listening_socket
from cairn.core.errors import ConfigError


def _nodelay_of_accepted_connection(sock: socket.socket) -> int:
    """Serve ``sock`` with asyncio (as a uvicorn worker does), connect once, and read TCP_NODELAY
    of the connection the server accepted."""
    seen: list[int] = []

    async def main() -> None:
        accepted = asyncio.Event()

        def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            conn = writer.get_extra_info("socket")
            seen.append(conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()
            accepted.set()

        server = await asyncio.start_server(on_connect, sock=sock)
        host, port = sock.getsockname()[:2]
        _, writer = await asyncio.open_connection(host, port)
        await asyncio.wait_for(accepted.wait(), 10)
        writer.close()
        server.close()
        await server.wait_closed()

    asyncio.run(main())
    return seen[0]


def test_connections_on_the_workers_socket_have_nagle_off():
    assert _nodelay_of_accepted_connection(listening_socket("127.0.0.1", 0)) != 0


def test_a_socket_without_the_tcp_protocol_number_would_keep_nagle_on():
    # what uvicorn's own bind_socket() makes (socket.socket(family)): the cause of 64 ms per request
    plain = socket.socket(socket.AF_INET)
    plain.bind(("127.0.0.1", 0))
    assert _nodelay_of_accepted_connection(plain) == 0


def test_a_port_in_use_is_refused_naming_the_address():
    taken = listening_socket("127.0.0.1", 0)
    taken.listen()
    port = taken.getsockname()[1]
    try:
        with pytest.raises(ConfigError, match=f"cannot listen on 127.0.0.1:{port}"):
            listening_socket("127.0.0.1", port)
    finally:
        taken.close()
