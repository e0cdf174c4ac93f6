"""Structured JSON logs through Powertools Logger, with keyword fields.

``get_logger(__name__)`` is cheap: it returns a small wrapper around the standard logger
``cairn.<module>``. The first record that is actually emitted configures the ``cairn``
logger once with a Powertools ``Logger`` (JSON lines, on stderr so that CLI output on
stdout stays clean; Lambda ships both streams to CloudWatch Logs). An application that
configured the ``cairn`` logger itself (a Lambda handler calling ``Logger(service="cairn")``,
or a test) keeps its own configuration.

    log = get_logger(__name__)
    log.warning("rerank fallback", reranker="cohere", fallback="error", sent=12)

One request's id travels as ``correlation_id`` on every line (:func:`set_correlation_id`): the
API sets it from the request, the workflow's state carries it to every task.

Fields are keyword arguments, never formatted into the message. A field whose name
clashes with a standard ``LogRecord`` attribute (``name``, ``msg``, ``args``, ...) is
written with a ``field_`` prefix instead of raising.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from contextvars import ContextVar
from typing import IO, Any

ROOT = "cairn"
_RESERVED = frozenset(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime"}
_PRECONFIGURED = "init"  # the attribute Powertools sets on a logger it configured
_configure_lock = threading.Lock()
_powertools_logger: Any = None


def configure_logging(
    *, level: str | int | None = None, service: str | None = None, stream: IO[str] | None = None, force: bool = False
) -> Any:
    """Configure the ``cairn`` logger with a Powertools JSON logger; return that Powertools ``Logger``.

    ``level``: argument, else ``CAIRN_LOG_LEVEL``, else ``POWERTOOLS_LOG_LEVEL``, else INFO.
    ``service`` (the ``service`` key of every line): argument, else ``POWERTOOLS_SERVICE_NAME``,
    else ``cairn``. ``stream`` defaults to stderr. Without ``force`` a second call returns
    the logger configured first.
    """
    global _powertools_logger
    with _configure_lock:
        if _powertools_logger is not None and not force:
            return _powertools_logger
        from aws_lambda_powertools import Logger

        root = logging.getLogger(ROOT)
        if force:
            for handler in list(root.handlers):
                root.removeHandler(handler)
            if hasattr(root, _PRECONFIGURED):
                delattr(root, _PRECONFIGURED)
        resolved = level or os.environ.get("CAIRN_LOG_LEVEL") or os.environ.get("POWERTOOLS_LOG_LEVEL") or "INFO"
        handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
        pt = Logger(service=ROOT, level=resolved, logger_handler=handler)
        pt.append_keys(service=service or os.environ.get("POWERTOOLS_SERVICE_NAME") or ROOT)
        _powertools_logger = pt
        return pt


_correlation_id: str | None = None
_UNSET = object()
_request_correlation: ContextVar[object] = ContextVar("cairn_correlation_id", default=_UNSET)


def set_correlation_id(value: str | None) -> None:
    """Every log line from now on carries ``correlation_id``: the API request's id, set by the
    door that received the request and by each workflow task from its state (None: no id).

    A Lambda container serves one request at a time; a ``cairn serve`` process serves several side
    by side, each in a context of its own (:mod:`cairn.api.server`). So the id is kept per context,
    where it wins, and process-wide, for the lines of threads a request starts without its context
    (the last request's id there)."""
    global _correlation_id
    _correlation_id = value
    _request_correlation.set(value)
    pt = _powertools_logger
    if pt is None and not logging.getLogger(ROOT).handlers:
        pt = configure_logging()
    if pt is not None:
        pt.set_correlation_id(value)
        pt.thread_safe_append_keys(correlation_id=value)  # this context's lines: its own request's id


def set_thread_correlation_id(value: str) -> None:
    """The correlation id of this thread's lines only (a worker of a handler that serves several
    requests side by side, as on_message does one per session)."""
    pt = _powertools_logger if _powertools_logger is not None else configure_logging()
    pt.thread_safe_append_keys(correlation_id=value)


def correlation_id() -> str | None:
    """The correlation id of the request being served in this context, if any."""
    value = _request_correlation.get()
    return _correlation_id if value is _UNSET else value  # type: ignore[return-value]


class StructuredLogger:
    """A standard logger that takes fields as keyword arguments."""

    __slots__ = ("_logger",)

    def __init__(self, name: str) -> None:
        if name != ROOT and not name.startswith(ROOT + "."):
            name = f"{ROOT}.{name}"
        self._logger = logging.getLogger(name)

    @property
    def name(self) -> str:
        return self._logger.name

    def _log(self, level: int, msg: str, fields: dict[str, Any], exc_info: Any = None) -> None:
        if _powertools_logger is None and not logging.getLogger(ROOT).handlers:
            configure_logging()
        if not self._logger.isEnabledFor(level):
            return
        extra = {(f"field_{k}" if k in _RESERVED else k): v for k, v in fields.items()}
        self._logger.log(level, msg, extra=extra, exc_info=exc_info, stacklevel=3)

    def debug(self, msg: str, **fields: Any) -> None:
        self._log(logging.DEBUG, msg, fields)

    def info(self, msg: str, **fields: Any) -> None:
        self._log(logging.INFO, msg, fields)

    def warning(self, msg: str, **fields: Any) -> None:
        self._log(logging.WARNING, msg, fields)

    def error(self, msg: str, **fields: Any) -> None:
        self._log(logging.ERROR, msg, fields)

    def exception(self, msg: str, **fields: Any) -> None:
        self._log(logging.ERROR, msg, fields, exc_info=True)


def get_logger(name: str) -> StructuredLogger:
    """The structured logger for module ``name`` (``cairn.`` is prefixed when missing)."""
    return StructuredLogger(name)
