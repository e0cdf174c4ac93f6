"""The documentation is a test: every shell and Python block of README.md and docs/ runs as written,
in a fresh working folder with a fresh home, and a block's shown output must still match.

How a block is declared (run, shown, skipped with a reason, a server in the background, an
expected error) is told in :mod:`tests.docs.blocks`. A file's blocks share one folder, the shell
variables of the blocks before them, and one Python process (started with what the shell blocks before it exported), as a reader
following the page in one terminal would.
The folder holds ``examples/`` (the sample handbook) and ``.venv`` (this interpreter's venv), so
``cairn ingest ./examples/handbook`` and ``.venv/bin/cairn`` work as the README says.
"""

from __future__ import annotations

import doctest
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from cairn.core.tls import verified_context
from tests.ports import free_port

from .blocks import PORTS, Block, blocks, problems

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
BLOCK_TIMEOUT_S = 300
CHECKER = doctest.OutputChecker()
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


class Page:
    """One Markdown file being followed: its folder, its shell state, its Python process, its servers."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.state = work.parent / "shell.env"
        self.state.write_text("")
        (work / "examples").symlink_to(REPO / "examples", target_is_directory=True)
        (work / ".venv").symlink_to(Path(sys.prefix), target_is_directory=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("CAIRN_") and k != "PYTHONPATH"}
        env.update({"PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
                    "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONUNBUFFERED": "1"})
        self.env = env
        self.python: subprocess.Popen[str] | None = None
        self.servers: list[subprocess.Popen[bytes]] = []
        self.ports = {port: str(free_port()) for port in PORTS}

    def localise(self, text: str) -> str:
        """``text`` with the docs' ports replaced by this page's free ones."""
        return re.sub(r"\b(" + "|".join(PORTS) + r")\b", lambda m: self.ports[m.group(1)], text)

    def shell(self, block: Block) -> tuple[int, str]:
        script = (f'set -a; source "{self.state}"; trap \'export -p > "{self.state}"\' EXIT; '
                  f"set -eo pipefail\n{block.code}")
        done = subprocess.run(["bash", "-c", script], cwd=self.work, env=self.env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=BLOCK_TIMEOUT_S)
        return done.returncode, done.stdout

    def background(self, block: Block, url: str) -> tuple[int, str]:
        log = self.work.parent / f"server-{block.line}.log"
        script = f'set -a; source "{self.state}"; set +a\nexec {block.code}'
        server = subprocess.Popen(["bash", "-c", script], cwd=self.work, env=self.env, start_new_session=True,
                                  stdout=log.open("wb"), stderr=subprocess.STDOUT)
        self.servers.append(server)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if server.poll() is not None:
                return server.returncode or 1, log.read_text()
            try:
                httpx.get(url, timeout=2, verify=verified_context())
                return 0, ""
            except httpx.HTTPError:
                time.sleep(0.3)
        return 1, f"{url} did not answer within 120 s\n{log.read_text()}"

    def run_python(self, block: Block) -> tuple[int, str]:
        if self.python is None:
            runner = f'set -a; source "{self.state}"; exec "{sys.executable}" "{Path(__file__).with_name("pyrunner.py")}"'
            self.python = subprocess.Popen(["bash", "-c", runner],  # with what the shell blocks before it exported
                                           cwd=self.work, env=self.env, text=True,
                                           stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert self.python.stdin and self.python.stdout
        self.python.stdin.write(json.dumps({"code": block.code, "where": block.where}) + "\n")
        self.python.stdin.flush()
        answer = self.python.stdout.readline()
        if not answer:
            return 1, "the Python process died"
        reply = json.loads(answer)
        return (0 if reply["ok"] else 1), reply["stdout"] + reply["error"]

    def close(self) -> None:
        for server in self.servers:
            if server.poll() is None:
                os.killpg(server.pid, signal.SIGTERM)
                try:
                    server.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    os.killpg(server.pid, signal.SIGKILL)
        if self.python is not None:
            self.python.stdin.close()  # type: ignore[union-attr]
            self.python.wait(timeout=30)


def _run(page: Page, block: Block) -> tuple[int, str]:
    block = Block(block.path, block.line, block.lang, page.localise(block.code), block.mark, block.output)
    if block.background:
        return page.background(block, page.localise(block.background))
    if block.kind == "shell":
        return page.shell(block)
    return page.run_python(block)


def _failure(block: Block, why: str, output: str) -> str:
    return f"{block.where} ({block.kind}) {why}\n--- the block\n{block.code}--- what it printed\n{output}"


@pytest.mark.parametrize("path", PAGES, ids=[str(p.relative_to(REPO)) for p in PAGES])
def test_every_block_is_declared(path: Path):
    found = [p for b in blocks(path) for p in problems(b)]
    assert not found, "\n".join(found)


@pytest.mark.parametrize("path", PAGES, ids=[str(p.relative_to(REPO)) for p in PAGES])
def test_the_page_runs_as_written(path: Path, tmp_path: Path):
    runnable = [b for b in blocks(path) if b.runnable]
    if not runnable:
        pytest.skip(f"{path.name} has no runnable block (each is shown or skipped with its reason)")
    work = tmp_path / "work"
    work.mkdir()
    page = Page(work)
    try:
        for block in runnable:
            status, output = _run(page, block)
            assert status == block.expected_exit, _failure(block, f"ended with status {status}, "
                                                           f"expected {block.expected_exit}", output)
            want = page.localise(block.output.code) if block.output is not None else None
            if want is not None and not CHECKER.check_output(want, output, FLAGS):
                diff = CHECKER.output_difference(doctest.Example("", want), output, FLAGS)
                pytest.fail(_failure(block, f"no longer prints what {block.output.where} shows", diff))
    finally:
        page.close()
