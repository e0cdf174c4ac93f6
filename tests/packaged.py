"""Run a packaged Lambda function as the Lambda Python runtime would: its own process, its own
``sys.path`` (the function's folder, then the layers the template attaches, then what the runtime
provides), its own environment (the template's variables, resolved), one warm container per function.

    fn = PackagedFunction("rerank", paths=[fn_dir, core, opensearch, runtime], env={...}, logs=log_file)
    fn.invoke({"tenant": "acme", ...})      # -> (payload, error_type or None)
    fn.close()

The worker is started with ``-S -I``: no site-packages and no PYTHONPATH, so a module the
function's layers do not hold cannot be imported — exactly the ``ModuleNotFoundError`` (or
cairn's ``missing_extra``) the deployed function would raise. Events go in on stdin and answers
come back on a private pipe, so the handler's stdout (its logs and EMF, as CloudWatch would get
them) goes to ``logs``. A raised exception answers as the runtime does:
``{"errorMessage", "errorType", "stackTrace"}``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import uuid
from pathlib import Path
from typing import Any

_WORKER = r"""
import json, os, sys, traceback, uuid, time
paths = json.loads(os.environ.pop("CAIRN_TEST_SYS_PATH"))
stdlib = [p for p in sys.path if p and "site-packages" not in p and "dist-packages" not in p]
sys.path[:] = paths + stdlib
answers = os.fdopen(int(os.environ.pop("CAIRN_TEST_ANSWER_FD")), "w", buffering=1)

class Context:
    def __init__(self, request_id, timeout_s):
        self.aws_request_id = request_id
        self.function_name = os.environ.get("AWS_LAMBDA_FUNCTION_NAME", "fn")
        self.function_version = "$LATEST"
        self.memory_limit_in_mb = int(os.environ.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "1024"))
        self.invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:" + self.function_name
        self.log_group_name = "/aws/lambda/" + self.function_name
        self.log_stream_name = "test"
        self._deadline = time.time() + timeout_s
    def get_remaining_time_in_millis(self):
        return max(0, int((self._deadline - time.time()) * 1000))

started = time.perf_counter()
try:
    import app
    init = {"ok": True, "init_ms": (time.perf_counter() - started) * 1000}
except BaseException as exc:
    app, init = None, {"ok": False, "errorType": type(exc).__name__, "errorMessage": str(exc),
                       "stackTrace": traceback.format_exc().splitlines()}
answers.write(json.dumps(init) + "\n")
timeout_s = float(os.environ.get("AWS_LAMBDA_FUNCTION_TIMEOUT", "900"))
for line in sys.stdin:
    request = json.loads(line)
    try:
        result = app.handler(request["event"], Context(request["id"], timeout_s))
        out = {"ok": True, "payload": result}
    except BaseException as exc:
        out = {"ok": False, "errorType": type(exc).__name__, "errorMessage": str(exc),
               "stackTrace": traceback.format_exc().splitlines()[-12:]}
    sys.stdout.flush()
    answers.write(json.dumps(out, default=str) + "\n")
"""


class PackagedFunction:
    """One warm container of one packaged function (started on the first invocation)."""

    def __init__(self, name: str, paths: list[Path], env: dict[str, str], logs: Path, timeout_s: int = 900) -> None:
        self.name, self.paths, self.env, self.logs, self.timeout_s = name, paths, env, logs, timeout_s
        self._proc: subprocess.Popen | None = None
        self._answers: Any = None
        self._lock = threading.Lock()
        self.init: dict[str, Any] | None = None
        self.invocations = 0

    def _start(self) -> None:
        read, write = os.pipe()
        env = {**self.env, "CAIRN_TEST_SYS_PATH": json.dumps([str(p) for p in self.paths]),
               "CAIRN_TEST_ANSWER_FD": str(write), "AWS_LAMBDA_FUNCTION_TIMEOUT": str(self.timeout_s),
               "PYTHONUNBUFFERED": "1"}
        self._log = open(self.logs, "a")  # noqa: SIM115 - closed in close()
        self._proc = subprocess.Popen([sys.executable, "-S", "-I", "-c", _WORKER], stdin=subprocess.PIPE,
                                      stdout=self._log, stderr=subprocess.STDOUT, env=env, pass_fds=(write,),
                                      text=True, cwd=str(self.paths[0]))
        os.close(write)
        self._answers = os.fdopen(read, "r")
        self.init = json.loads(self._answers.readline() or '{"ok": false, "errorType": "Runtime.ExitError"}')

    def invoke(self, event: Any) -> tuple[Any, str | None]:
        """The handler's answer and, when it raised, the error type (the payload is then the
        runtime's error document)."""
        with self._lock:  # one container serves one invocation at a time, as on Lambda
            if self._proc is None:
                self._start()
            assert self.init is not None
            self.invocations += 1
            if not self.init["ok"]:
                return {k: self.init[k] for k in ("errorMessage", "errorType", "stackTrace")}, "Runtime.ImportModuleError"
            assert self._proc is not None and self._proc.stdin is not None
            self._proc.stdin.write(json.dumps({"id": str(uuid.uuid4()), "event": event}) + "\n")
            self._proc.stdin.flush()
            line = self._answers.readline()
            if not line:
                return {"errorMessage": "the function's process exited", "errorType": "Runtime.ExitError",
                        "stackTrace": []}, "Runtime.ExitError"
            out = json.loads(line)
        if out["ok"]:
            return out["payload"], None
        return {k: out[k] for k in ("errorMessage", "errorType", "stackTrace")}, out["errorType"]

    def close(self) -> None:
        if self._proc is not None:
            assert self._proc.stdin is not None
            self._proc.stdin.close()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
            self._answers.close()
            self._log.close()
            self._proc = None
