"""Runs the Python blocks of one Markdown file in one namespace (the harness's child process).

Reads one JSON object per line on stdin ({"code": ..., "where": ...}) and answers one JSON line per
block on the original stdout: {"ok", "stdout", "error"}. What a block prints is captured."""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import traceback


def main() -> None:
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    namespace: dict[str, object] = {"__name__": "__main__"}
    for line in sys.stdin:
        request = json.loads(line)
        out = io.StringIO()
        ok, error = True, ""
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            try:
                exec(compile(request["code"], request["where"], "exec"), namespace)
            except BaseException:  # noqa: BLE001 - the block's failure is the answer
                ok, error = False, traceback.format_exc(limit=-6)
        answers.write(json.dumps({"ok": ok, "stdout": out.getvalue(), "error": error}) + "\n")


if __name__ == "__main__":
    main()
