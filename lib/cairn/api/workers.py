"""The processes of ``cairn serve --workers N``: uvicorn's supervisor, with workers forked on Linux.

uvicorn starts each worker with ``spawn``: a new interpreter that imports the command's main module
again (cairn's CLI, and with it the application) before it imports the app, about a second of CPU a
worker on this project's machines, paid again for every worker a supervisor replaces. The supervisor
has imported all of it already and holds nothing a worker must not share (no model, no store, no
thread: the line that says the server listens starts only after the workers are started), so on
Linux a worker is forked from it instead, starting with the modules loaded and their memory shared
until written. Each worker still builds its own services, model sessions and store in
:func:`cairn.api.server.worker_app`.

A forked worker first puts back the signal handlers a new interpreter starts with: the supervisor's
handlers only queue a signal for its own loop, and a worker that inherited them would ignore a
``SIGTERM`` that reaches it before uvicorn installs its own (while it sets up its logging).
Elsewhere (macOS, whose system libraries do not survive a fork of a process that used them;
Windows, which has no fork) workers are spawned as uvicorn does.
"""

from __future__ import annotations

import multiprocessing
import signal
import sys
from collections.abc import Callable
from multiprocessing.context import ForkProcess
from socket import socket
from typing import Any


class ForkedWorker(ForkProcess):
    """A worker forked from the supervisor, with a new interpreter's signal handlers."""

    def run(self) -> None:
        from uvicorn.supervisors.multiprocess import SIGNALS

        for sig in SIGNALS:
            signal.signal(sig, signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL)
        super().run()


class _Forking:
    """What uvicorn asks for a worker's process: ``Process(target=..., kwargs=...)``."""

    Process = ForkedWorker


def forks_workers() -> bool:
    """Whether workers are forked here (Linux) rather than spawned."""
    return sys.platform == "linux" and "fork" in multiprocessing.get_all_start_methods()


def supervisor(config: Any, sockets: list[socket], started: Callable[[], None] | None = None) -> Any:
    """uvicorn's ``Multiprocess`` over ``sockets``; ``started`` runs once the first workers are started."""
    from uvicorn import _subprocess
    from uvicorn.supervisors import Multiprocess

    if forks_workers():
        _subprocess.spawn = _Forking()  # type: ignore[assignment]  # read by get_subprocess for each worker

    class Supervisor(Multiprocess):
        def init_processes(self) -> None:
            super().init_processes()
            if started is not None:
                started()

    return Supervisor(config, sockets=sockets)
