"""Parsing untrusted binary formats in a worker process bounded in time and memory.

A PDF whose object graph makes the parser loop, or a file that makes a library allocate without
end, must not stop an ingest or exhaust the machine. :class:`IsolatedRunner` keeps one worker
process (started with ``spawn``: nothing of the parent's threads or state is inherited), sends it
one file at a time over a pipe and waits at most ``Limits.timeout_s`` for the answer. The worker
caps its own address space at ``Limits.memory_mb`` (``RLIMIT_AS``), so an allocation past the cap
fails inside the worker with ``MemoryError`` and is reported as such. A worker that overruns its
time is killed and replaced; the file is reported with the reason, and the run goes on.
"""

from __future__ import annotations

import multiprocessing
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from cairn.engine.ingest.parsers.base import Limits, Parsed, ParseFailed

_START_TIMEOUT_S = 60.0  # starting Python and importing the parser modules


def _serve(conn: Connection, memory_mb: int) -> None:  # pragma: no cover - runs in the worker process
    try:
        import resource

        limit = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (ImportError, ValueError, OSError):
        pass  # no RLIMIT_AS on this platform: the time bound still holds
    from cairn.engine.ingest.parsers import ParserSpec, parse_in_process

    conn.send(("ready", None))
    while True:
        try:
            job = conn.recv()
        except (EOFError, OSError):
            return
        if job is None:
            return
        spec_fields, path, limits = job
        try:
            result: tuple[str, Any] = ("ok", parse_in_process(ParserSpec(**spec_fields), Path(path), limits))
        except ParseFailed as exc:
            result = ("failed", exc.message)
        except MemoryError:
            result = ("failed", f"needs more than {memory_mb:,} MB of memory to parse")
        except BaseException as exc:  # noqa: BLE001 - the worker answers every job
            result = ("failed", f"parser crashed: {type(exc).__name__}: {str(exc)[:300]}")
        try:
            conn.send(result)
        except MemoryError:
            conn.send(("failed", f"needs more than {memory_mb:,} MB of memory to parse"))


class IsolatedRunner:
    """Runs parsers in one bounded worker process, restarted after a timeout or a crash."""

    def __init__(self, limits: Limits | None = None) -> None:
        self.limits = limits or Limits()
        self._ctx = multiprocessing.get_context("spawn")
        self._proc: Any = None
        self._conn: Connection | None = None
        self.restarts = 0

    def _start(self) -> Connection:
        if self._proc is not None and self._proc.is_alive() and self._conn is not None:
            return self._conn
        self._stop()
        parent, child = self._ctx.Pipe()
        proc = self._ctx.Process(target=_serve, args=(child, self.limits.memory_mb), daemon=True, name="cairn-parser")
        proc.start()
        child.close()
        if not parent.poll(_START_TIMEOUT_S):
            proc.kill()
            raise ParseFailed("the parser process did not start")
        parent.recv()
        self._proc, self._conn = proc, parent
        return parent

    def parse(self, spec: Any, path: Path) -> Parsed:
        from dataclasses import asdict

        conn = self._start()
        try:
            conn.send((asdict(spec), str(path), self.limits))
            if not conn.poll(self.limits.timeout_s):
                self._kill()
                raise ParseFailed(f"parsing took longer than {self.limits.timeout_s:g} s and was stopped")
            status, value = conn.recv()
        except (EOFError, OSError, BrokenPipeError):
            self._kill()
            raise ParseFailed("the parser process died while reading this file (out of memory, or a crash)") from None
        if status != "ok":
            raise ParseFailed(value)
        return value

    def _kill(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.join(5)
            self.restarts += 1
        self._proc = None
        if self._conn is not None:
            self._conn.close()
        self._conn = None

    def _stop(self) -> None:
        if self._conn is not None:
            try:
                self._conn.send(None)
            except (OSError, BrokenPipeError):
                pass
        if self._proc is not None:
            self._proc.join(2)
            if self._proc.is_alive():
                self._proc.kill()
                self._proc.join(2)
        self._proc, self._conn = None, None

    def close(self) -> None:
        self._stop()

    def __enter__(self) -> IsolatedRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class RunnerPool:
    """Several :class:`IsolatedRunner` s, so files are parsed in parallel (one per worker process);
    ``parse`` may be called from several threads at once."""

    def __init__(self, limits: Limits | None = None, workers: int = 2) -> None:
        import queue

        self.workers = max(1, workers)
        self._runners = [IsolatedRunner(limits) for _ in range(self.workers)]
        self._free: queue.SimpleQueue[IsolatedRunner] = queue.SimpleQueue()
        for r in self._runners:
            self._free.put(r)

    @property
    def restarts(self) -> int:
        return sum(r.restarts for r in self._runners)

    def parse(self, spec: Any, path: Path) -> Parsed:
        runner = self._free.get()
        try:
            return runner.parse(spec, path)
        finally:
            self._free.put(runner)

    def close(self) -> None:
        for r in self._runners:
            r.close()

    def __enter__(self) -> RunnerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
