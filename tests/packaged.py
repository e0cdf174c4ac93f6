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
calls_file = os.environ.pop("CAIRN_TEST_CALLS", "")


def record(entry):
    with open(calls_file, "a") as f:
        f.write(json.dumps(entry, default=str) + "\n")


def slim(params):
    out = {k: v for k, v in params.items() if isinstance(v, str) and len(v) < 400}
    for key in ("RequestItems", "TransactItems"):
        if isinstance(params.get(key), dict):
            out[key] = sorted(params[key])
        elif isinstance(params.get(key), list):
            out[key] = sorted({next(iter(op.values())).get("TableName", "") for op in params[key] if isinstance(op, dict)})
    return out


if calls_file and app is not None:  # after the init was measured: what the code calls, for the permission test
    import http.client
    real_putrequest = http.client.HTTPConnection.putrequest

    def putrequest(self, method, url, *args, **kwargs):
        record({"kind": "http", "method": method, "host": f"{self.host}:{self.port}", "path": url.split("?")[0]})
        return real_putrequest(self, method, url, *args, **kwargs)

    http.client.HTTPConnection.putrequest = putrequest
    try:
        import botocore.client
    except ImportError:
        pass
    else:
        real_call = botocore.client.BaseClient._make_api_call

        def make_api_call(self, operation, params):
            model = self.meta.service_model
            record({"kind": "aws", "service": model.signing_name or model.endpoint_prefix, "operation": operation,
                    "params": slim(params)})
            return real_call(self, operation, params)

        botocore.client.BaseClient._make_api_call = make_api_call
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

    def __init__(self, name: str, paths: list[Path], env: dict[str, str], logs: Path, timeout_s: int = 900,
                 calls: Path | None = None) -> None:
        self.name, self.paths, self.env, self.logs, self.timeout_s = name, paths, env, logs, timeout_s
        self.calls = calls  # where the worker records every AWS API call and HTTP request it makes
        self._proc: subprocess.Popen | None = None
        self._answers: Any = None
        self._lock = threading.Lock()
        self.init: dict[str, Any] | None = None
        self.invocations = 0

    def start(self) -> None:
        with self._lock:
            if self._proc is None:
                self._start()

    def _start(self) -> None:
        read, write = os.pipe()
        env = {**self.env, "CAIRN_TEST_SYS_PATH": json.dumps([str(p) for p in self.paths]),
               "CAIRN_TEST_ANSWER_FD": str(write), "AWS_LAMBDA_FUNCTION_TIMEOUT": str(self.timeout_s),
               "PYTHONUNBUFFERED": "1", **({"CAIRN_TEST_CALLS": str(self.calls)} if self.calls else {})}
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

    def recorded(self) -> list[dict[str, Any]]:
        """Every AWS API call and HTTP request the function made so far."""
        if self.calls is None or not self.calls.exists():
            return []
        return [json.loads(line) for line in self.calls.read_text().splitlines() if line.strip()]

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


class FunctionPool:
    """A function's containers, as Lambda scales it: an invocation takes an idle container, or
    starts a new one (a cold start) when every container is busy — so the workflow's Map runs its
    Retrieve iterations side by side, as it does on AWS."""

    def __init__(self, name: str, paths: list[Path], env: dict[str, str], logs: Path, timeout_s: int = 900,
                 calls: Path | None = None) -> None:
        self.name, self.paths, self.env, self.logs, self.timeout_s, self.calls = name, paths, env, logs, timeout_s, calls
        self._idle: list[PackagedFunction] = []
        self._all: list[PackagedFunction] = []
        self._lock = threading.Lock()

    def _take(self) -> PackagedFunction:
        with self._lock:
            if self._idle:
                return self._idle.pop()
            fn = PackagedFunction(self.name, self.paths, self.env, self.logs, self.timeout_s, self.calls)
            self._all.append(fn)
            return fn

    def invoke(self, event: Any) -> tuple[Any, str | None]:
        fn = self._take()
        try:
            return fn.invoke(event)
        finally:
            with self._lock:
                self._idle.append(fn)

    def warm(self, count: int) -> None:
        """Start ``count`` containers side by side (provisioned concurrency): their init is paid now."""
        with self._lock:  # new containers (an idle one is already warm)
            started = [PackagedFunction(self.name, self.paths, self.env, self.logs, self.timeout_s, self.calls)
                       for _ in range(count - len(self._all))]
            self._all.extend(started)
        threads = [threading.Thread(target=fn.start) for fn in started]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        with self._lock:
            self._idle.extend(started)

    @property
    def containers(self) -> list[PackagedFunction]:
        return list(self._all)

    def recorded(self) -> list[dict[str, Any]]:
        return self._all[0].recorded() if self._all else []  # every container appends to the same file

    def close(self) -> None:
        for fn in self._all:
            fn.close()
