"""The built wheel, installed as a user installs it: `cairn-context[...]` in a fresh venv, outside
the checkout. With `[local,docs,mcp]` it ingests the sample handbook (its PDF and HTML page
included), answers, runs `cairn demo` and serves its MCP tools over stdio; each extra alone does
what it is for (`[langchain]` and `[llamaindex]`: their docs pages' Python, run against the venv's
`cairn serve`).

One venv holds the wheel with every extra (installed constrained to the dev lock's versions, cached
under `.tools/wheel-venvs/` by the requirements, and the wheel reinstalled on every run). Each test
runs in it *as if only its extras were installed*: the venv's `sitecustomize` (written here, never
shipped) refuses every module of a distribution outside the requirements of the base install and
those extras, so an extra that leans on another one's dependency fails here as it would for a user.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from cairn.core.tls import verified_context
from tests.ports import free_port

# one worker runs this module (make test: pytest -n auto --dist loadfile): its tests share one venv
pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / ".tools" / "wheel-venvs"
HANDBOOK = REPO / "examples" / "handbook"
DISTRIBUTION = "cairn-context"


def _key(*extras: str) -> str:
    """What a venv's dependencies depend on: the requirements of the base and of its extras (a lock
    change elsewhere does not rebuild every venv; the wheel itself is reinstalled on every run)."""
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    wanted = [project["dependencies"], *(project["optional-dependencies"][e] for e in extras)]
    return hashlib.sha256(json.dumps([sys.version_info[:2], wanted]).encode()).hexdigest()[:12]


def _constraints() -> Path:
    """The dev lock's pins without their hashes (pip takes no hashes in a constraints file)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / "constraints.txt"
    if not path.exists() or path.stat().st_mtime < (REPO / "requirements/dev.lock").stat().st_mtime:
        pins = re.findall(r"^([A-Za-z0-9_.\-]+(?:\[[^\]]*\])?==[^\s\\]+)", (REPO / "requirements/dev.lock").read_text(), re.M)
        path.write_text("\n".join(re.sub(r"\[[^\]]*\]", "", p) for p in pins) + "\n")
    return path


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CAIRN_", "VIRTUAL_ENV", "PYTHONPATH"))}
    env.update({"LITELLM_LOCAL_MODEL_COST_MAP": "True", **extra})
    return env


def _run(args: list[str], cwd: Path, timeout: int = 900, **env: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(args, cwd=cwd, env=_env(**env), text=True, capture_output=True, timeout=timeout)
    assert done.returncode == 0, f"{' '.join(map(str, args))} -> {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--wheel-dir", str(out), str(REPO)], REPO)
    (found,) = out.glob("cairn_context-*.whl")
    return found


EXTRAS = ("local", "docs", "mcp", "code", "aws", "pinecone", "opensearch", "llm", "serve", "langchain", "llamaindex")
ONLY = "CAIRN_WHEEL_ONLY_EXTRAS"  # read by the venv's sitecustomize: the extras a test may use

# Written into the test venv: with CAIRN_WHEEL_ONLY_EXTRAS set, the venv acts as if only the base
# install and those extras were installed (every process: the cairn command, its parser workers).
SITECUSTOMIZE = '''
import os

_only = os.environ.get("CAIRN_WHEEL_ONLY_EXTRAS")
if _only is not None:
    import importlib.abc
    import importlib.metadata as md
    import importlib.util
    import re
    import sys

    from pip._vendor.packaging.requirements import Requirement

    def _canon(name):
        return re.sub(r"[-_.]+", "-", name).lower()

    def _closure(extras):
        seen, todo = set(), [("cairn-context", frozenset(extras))]
        while todo:
            name, wanted = todo.pop()
            if (name, wanted) in seen:
                continue
            seen.add((name, wanted))
            try:
                requires = md.requires(name) or []
            except md.PackageNotFoundError:
                continue
            for line in requires:
                req = Requirement(line)
                if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in ("", *wanted)):
                    todo.append((_canon(req.name), frozenset(req.extras)))
        return {name for name, _ in seen}

    _allowed = _closure([e for e in _only.split(",") if e]) | {"pip", "setuptools"}
    _blocked = {top for top, dists in md.packages_distributions().items()
                if top != "cairn" and not any(_canon(d) in _allowed for d in dists)}

    class _NotInstalled(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.partition(".")[0] in _blocked:
                raise ModuleNotFoundError(f"No module named {name!r} (not in cairn-context[{_only}])",
                                          name=name.partition(".")[0])
            return None

    sys.meta_path.insert(0, _NotInstalled())
    _find_spec = importlib.util.find_spec

    def _find_installed(name, package=None):
        return None if name.partition(".")[0] in _blocked else _find_spec(name, package)

    importlib.util.find_spec = _find_installed
'''


def venv_all(wheel: Path) -> Path:
    """The venv holding the wheel with every extra (created once, then cached); returns its bin folder."""
    root = CACHE / f"all-{_key(*EXTRAS)}"
    python = root / "bin" / "python"
    CACHE.mkdir(parents=True, exist_ok=True)
    with (CACHE / "all.lock").open("w") as lock:  # two runs at once (two worktrees' make test) take turns
        fcntl.flock(lock, fcntl.LOCK_EX)
        _install(root, python, f"{wheel}[{','.join(EXTRAS)}]", wheel)
        site = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], REPO).stdout.strip()
        (Path(site) / "sitecustomize.py").write_text(SITECUSTOMIZE)
    return root / "bin"


def _install(root: Path, python: Path, spec: str, wheel: Path) -> None:
    if not (root / ".ready").exists():
        _run([sys.executable, "-m", "venv", "--clear", str(root)], REPO)
        # the pip `make` installs with (the venv's own pip lets an extra resolve past a pinned version)
        _run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", "--require-hashes", "-r",
              str(REPO / "requirements/pip.lock")], REPO)
        # the dependencies go in with uv (pip.lock brings it; ~1 minute less than pip), then pip resolves
        # the user's command itself: every requirement of every extra must be met at the pinned versions
        _run([str(root / "bin" / "uv"), "pip", "install", "-q", "--python", str(python), "-c", str(_constraints()), spec],
             REPO, timeout=1800)
        _run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", "-c", str(_constraints()), spec],
             REPO, timeout=1800)
        (root / ".ready").touch()
    else:  # the dependencies are cached; the wheel is this run's
        _run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps",
              "--force-reinstall", str(wheel)], REPO)


@pytest.fixture(scope="module")
def venv(wheel) -> Path:
    return venv_all(wheel)


def only(*extras: str) -> dict[str, str]:
    """The environment that makes the venv act as if only ``extras`` were installed."""
    return {ONLY: ",".join(extras)}


def test_the_wheel_is_the_distribution_named_and_imports_as_cairn(wheel):
    assert wheel.name.startswith("cairn_context-")
    import zipfile

    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        metadata = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert f"Name: {DISTRIBUTION}" in metadata
    assert "cairn/__init__.py" in names and "cairn/_docs/getting-started.md" in names  # the demo's corpus ships
    assert 'Requires-Dist: lxml_html_clean' in metadata


def test_local_docs_mcp_ingests_the_handbook_answers_and_serves_mcp(venv, tmp_path):
    bin_, env = venv, only("local", "docs", "mcp")
    cairn = str(bin_ / "cairn")
    ingest = _run([cairn, "ingest", str(HANDBOOK), "--uri", "cairn://resources/handbook"], tmp_path, **env)
    assert "8 documents" in ingest.stdout and "skipped" not in ingest.stdout + ingest.stderr, ingest.stdout + ingest.stderr
    for question, where in [("who approves a refund of a Stripe payment?", "billing/payment-providers.md"),
                            ("how many days a year may I work from another country?", "people/remote-work.html"),
                            ("what do I do when I lose my laptop?", "security/access-and-incidents.pdf")]:
        answer = json.loads(_run([cairn, "find", question, "--json", "--limit", "3"], tmp_path, **env).stdout)
        uris = [m["uri"] for m in answer["resources"]]
        assert any(where in u for u in uris[:2]), (question, uris)
    demo = _run([cairn, "demo"], tmp_path, **env)
    assert "== find:" in demo.stdout and "through the HTTP API" in demo.stdout
    _lists_mcp_tools(bin_ / "cairn", tmp_path, env)


def _lists_mcp_tools(command: Path, home: Path, env: dict[str, str]) -> None:
    """An MCP client (this interpreter's SDK) launches `cairn mcp` of the venv over stdio, as a host does."""
    import asyncio

    mcp = pytest.importorskip("mcp")
    from mcp.client.stdio import StdioServerParameters, stdio_client

    async def tools() -> list[str]:
        params = StdioServerParameters(command=str(command), args=["mcp"], cwd=str(home), env=_env(**env))
        async with stdio_client(params) as (read, write), mcp.ClientSession(read, write) as session:
            await session.initialize()
            listed = await session.list_tools()
            found = await session.call_tool("find", {"query": "how long until a refund reaches the card?"})
            assert not found.is_error and "refunds.md" in json.dumps([c.model_dump() for c in found.content])
            return [t.name for t in listed.tools]

    assert {"find", "search", "read", "remember"} <= set(asyncio.run(tools()))


# what each extra alone is for, run by the venv's own interpreter in an empty folder
EXERCISES = {
    "": """
        from cairn.api import openapi_document
        from cairn.core.config import Settings
        from cairn.core.errors import MissingExtra
        from cairn.app.services import Services
        assert '"/v1/find"' in openapi_document()
        try:
            Services(Settings()).embedder
        except MissingExtra as exc:
            assert "pip install 'cairn-context[local]'" in str(exc), exc
        else:
            raise AssertionError("the base install has no local embedder")
        import json
        from cairn.integrations.tools import CairnTools, function_tools  # function tools: the base install alone
        assert [d["function"]["name"] for d in function_tools()] == ["find", "search", "context", "remember"]
        assert "limit:" in json.loads(CairnTools(None).run("find", '{"query": "x", "limit": 0}'))["error"]
    """,
    "docs": """
        from pathlib import Path
        from cairn.engine.ingest.parsers import parser_for, parse_in_process
        from cairn.engine.ingest.parsers.base import Limits
        for name, words in [("security/access-and-incidents.pdf", "two-factor authentication"),
                            ("people/remote-work.html", "working from abroad")]:
            path = Path(HANDBOOK) / name
            parsed = parse_in_process(parser_for(path), path, Limits())
            text = " ".join(parsed.text.lower().split())  # a PDF's lines wrap
            assert words in text, (name, text[:300])
            assert "intranet home" not in text  # the HTML page's navigation is dropped
        import docx
        d = docx.Document(); d.add_heading("Leave", 1); d.add_paragraph("Twenty-eight days a year."); d.save("leave.docx")
        parsed = parse_in_process(parser_for("leave.docx"), Path("leave.docx"), Limits())
        assert "Twenty-eight days" in parsed.text
    """,
    "mcp": """
        import asyncio
        from cairn.core.config import Settings
        from cairn.mcp import build_server
        from cairn.app.services import Services
        server = build_server(Services(Settings()))
        names = {t.name for t in asyncio.run(server.list_tools())}
        assert {"find", "search", "read", "tree", "remember", "add_message", "commit"} <= names, names
    """,
    "code": """
        from pathlib import Path
        from cairn.engine.ingest.parsers import parser_for, parse_in_process
        from cairn.engine.ingest.parsers.base import Limits
        Path("pay.js").write_text("function refund(order) {\\n  return order.total;\\n}\\n\\nclass Ledger {\\n  add(x) { return x; }\\n}\\n")
        parsed = parse_in_process(parser_for("pay.js"), Path("pay.js"), Limits())
        titles = [s.label for s in parsed.sections]
        assert any("refund" in (t or "") for t in titles) and any("Ledger" in (t or "") for t in titles), titles
    """,
    "aws": """
        from cairn.core.config import load_settings
        from cairn.app.services import Services
        services = Services(load_settings(env={"CAIRN_SESSIONS": "dynamodb", "CAIRN_SESSIONS_TABLE": "cairn-sessions",
                                               "CAIRN_SESSIONS_REGION": "eu-west-1", "CAIRN_EMBEDDER": "bedrock",
                                               "CAIRN_EMBEDDING_REGION": "eu-west-1"}))
        assert type(services.sessions).__name__ == "DynamoDBSessionStore"
        assert type(services.embedder).__name__.startswith("Bedrock")
    """,
    "pinecone": """
        from cairn.core.config import load_settings
        from cairn.ports.vectorstores.pinecone import PineconeVectorStore
        cfg = load_settings(env={"CAIRN_STORE": "pinecone", "CAIRN_PINECONE_API_KEY": "pcsk-test",
                                 "CAIRN_PINECONE_INDEX_HOST": "https://idx-abc.svc.local.pinecone.io"}).store
        store = PineconeVectorStore.from_settings(cfg, 384)  # the SDK client, built without a call
        assert store.dimension == 384
    """,
    "opensearch": """
        from cairn.core.config import load_settings
        from cairn.ports.vectorstores.opensearch import OpenSearchVectorStore
        cfg = load_settings(env={"CAIRN_STORE": "opensearch", "CAIRN_OPENSEARCH_URL": "https://localhost:9200"}).store
        store = OpenSearchVectorStore.from_settings(cfg, 384)  # opensearch-py's client, built without a call
        assert store.dimension == 384
    """,
    "llm": """
        from cairn.core.config import load_settings
        from cairn.app.services import Services
        llm = Services(load_settings(env={"CAIRN_LLM_PROVIDER": "litellm", "CAIRN_LLM_MODEL": "openai/gpt-4o-mini"})).llm
        assert type(llm).__name__.startswith("LiteLLM"), type(llm)
        import litellm  # noqa: F401
    """,
    "serve": """
        from cairn.core.errors import require
        require("uvicorn", extra="serve", feature="cairn serve")
    """,
}


@pytest.mark.parametrize("extra", list(EXERCISES), ids=[e or "base" for e in EXERCISES])
def test_each_extra_alone_installs_and_works(venv, tmp_path, extra):
    script = f"HANDBOOK = {str(HANDBOOK)!r}\n" + textwrap.dedent(EXERCISES[extra])
    _run([str(venv / "python"), "-c", script], tmp_path, **only(*([extra] if extra else [])))


@pytest.fixture(scope="module")
def served_handbook(venv, tmp_path_factory):
    """The venv's `cairn serve` (as `[local]` alone) over the handbook, ingested by the venv's `cairn
    ingest` (`[local,docs]`); its port."""
    home = tmp_path_factory.mktemp("served")
    _run([str(venv / "cairn"), "ingest", str(HANDBOOK), "--uri", "cairn://resources/handbook"], home, **only("local", "docs"))
    port = free_port()
    server = subprocess.Popen([str(venv / "cairn"), "serve", "--port", str(port), "--workers", "1"], cwd=home,
                              env=_env(**only("local")), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        _wait_for(f"http://127.0.0.1:{port}/v1/health", server)
        yield port
    finally:
        server.terminate()
        server.wait(timeout=30)


def _wait_for(url: str, server: subprocess.Popen[bytes]) -> None:
    import httpx

    deadline = time.monotonic() + 300  # a fresh process loads the model and warms the store first
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise AssertionError(f"cairn serve ended with {server.returncode}: {server.stderr.read().decode()[-3000:]}")  # type: ignore[union-attr]
        try:
            httpx.get(url, timeout=2, verify=verified_context())
            return
        except httpx.HTTPError:
            time.sleep(0.3)
    raise AssertionError(f"{url} did not answer within 300 s")


@pytest.mark.parametrize("extra", ["langchain", "llamaindex"])
def test_a_framework_extra_alone_runs_its_docs_page_against_cairn_serve(venv, served_handbook, tmp_path, extra):
    """`cairn-context[langchain]` (or `[llamaindex]`) alone: the Python of docs/integrations/<extra>.md
    runs as written, in the venv's interpreter, against the venv's `cairn serve`, and prints what the
    page shows; without the extra, the import names it."""
    from tests.docs.blocks import blocks

    page = REPO / "docs" / "integrations" / f"{extra}.md"
    code = [b for b in blocks(page) if b.kind == "python" and b.runnable and b.expected_exit == 0]
    runner = subprocess.Popen([str(venv / "python"), str(REPO / "tests" / "docs" / "pyrunner.py")], cwd=tmp_path,
                              env=_env(**only(extra)), text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    port = str(served_handbook)
    try:
        for block in code:
            runner.stdin.write(json.dumps({"code": block.code.replace("8080", port), "where": block.where}) + "\n")  # type: ignore[union-attr]
            runner.stdin.flush()  # type: ignore[union-attr]
            reply = json.loads(runner.stdout.readline())  # type: ignore[union-attr]
            assert reply["ok"], f"{block.where}\n{block.code}\n{reply['stdout']}{reply['error']}"
            if block.output is not None:
                assert _shows(block.output.code.replace("8080", port), reply["stdout"]), (block.where, reply["stdout"])
    finally:
        runner.stdin.close()  # type: ignore[union-attr]
        runner.wait(timeout=60)
    missing = _run([str(venv / "python"), "-c", textwrap.dedent(f"""
        from cairn.core.errors import MissingExtra
        try:
            import cairn.integrations.{extra}
        except MissingExtra as exc:
            assert "pip install 'cairn-context[{extra}]'" in str(exc), exc
        else:
            raise AssertionError("cairn.integrations.{extra} imported without its extra")
    """)], tmp_path, **only("local"))
    assert missing.returncode == 0


def _shows(want: str, got: str) -> bool:
    import doctest

    return doctest.OutputChecker().check_output(want, got, doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)


def test_local_alone_runs_the_demo(venv, tmp_path):
    demo = _run([str(venv / "cairn"), "demo"], tmp_path, **only("local"))
    assert "== find:" in demo.stdout


def test_the_venv_refuses_what_the_extras_given_do_not_install(venv, tmp_path):
    """The check above is real: with only `[local]`, the MCP SDK and boto3 are absent, as for a user."""
    script = textwrap.dedent("""
        import importlib.util
        from cairn.core.errors import MissingExtra, require
        assert importlib.util.find_spec("onnxruntime") is not None
        assert importlib.util.find_spec("mcp") is None and importlib.util.find_spec("boto3") is None
        try:
            require("boto3", extra="aws", feature="S3")
        except MissingExtra as exc:
            assert "cairn-context[aws]" in str(exc), exc
        else:
            raise AssertionError("boto3 imported under [local] alone")
    """)
    _run([str(venv / "python"), "-c", script], tmp_path, **only("local"))
