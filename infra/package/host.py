"""Build cairn's Lambda layers and functions for THIS machine, from the same locks as ``make package``.

    python infra/package/host.py [--out build/package-host]

``make package`` builds for python3.12 on arm64, whose wheels (numpy, pydantic-core, PyStemmer, ...)
cannot run here. The packaged-handler tests (``tests/integration/test_packaged.py``) need the same
layers built for this interpreter and platform: the same distributions at the same versions (read
from ``infra/package/locks/<layer>.txt``), installed ``--no-deps`` (so nothing a lock leaves out can
slip in), pruned as the real build prunes, with the cairn library copied into ``core`` and every
layer's bytecode compiled as the real build compiles it (unchecked-hash files, in place of the source
but for cairn and the packages that read their own). The hashes in the locks pin the arm64 wheels, so they are not checked
here; the versions are.

Beside the layers, ``runtime`` holds what the Lambda python3.12 runtime itself provides (boto3,
botocore, s3transfer, jmespath, python-dateutil, six, urllib3), at the versions of this machine's
environment: a handler finds them on its path as it would on Lambda, and nothing else.

A layer whose lock, layer definition and interpreter did not change is not reinstalled (a stamp
file holds their digest); only the cairn library is copied again (and recompiled), so a test run
after a code change costs seconds, not a rebuild.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import shutil
import subprocess
import sys
import sysconfig
from importlib.metadata import version
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
HOST_OUT = REPO / "build" / "package-host"
# what the Lambda python3.12 runtime puts on sys.path (/var/runtime) besides the standard library
RUNTIME_DISTRIBUTIONS = ("boto3", "botocore", "s3transfer", "jmespath", "python-dateutil", "six", "urllib3")
BYTECODE = "unchecked-hash"  # how compile_tree writes it: a folder stamped before with another mode is rebuilt


def _builder():
    spec = importlib.util.spec_from_file_location("cairn_package_build", HERE / "build.py")
    assert spec is not None and spec.loader is not None, "infra/package/build.py is missing"
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return sys.modules[spec.name]


def pins(lockfile: Path) -> list[str]:
    """``name==version`` of every distribution a lock file pins (its hashes dropped)."""
    lines = [ln.split("--hash")[0].strip() for ln in lockfile.read_text().splitlines()]
    return [ln for ln in lines if ln and not ln.startswith("#")]


def _interpreter_tag() -> str:
    return f"{sys.implementation.cache_tag}-{sysconfig.get_platform()}"


def _install(requirements: list[str], target: Path) -> None:
    """The wheels of ``requirements`` for this interpreter, unpacked into ``target`` without their
    dependencies or bytecode: with uv where the venv has it (requirements/pip.lock installs it; the llm
    layer in 0.9 s from its cache instead of pip's 14 s), else with pip."""
    if not requirements:
        return
    uv = Path(sys.executable).with_name("uv")
    if uv.is_file():
        cmd = [str(uv), "pip", "install", "-q", "--no-deps", "--only-binary", ":all:", "--target", str(target),
               "--python", sys.executable, *requirements]
    else:
        cmd = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", "install", "--no-deps",
               "--only-binary=:all:", "--no-compile", "--target", str(target), *requirements]
    out = subprocess.run(cmd, text=True, capture_output=True, check=False)
    if out.returncode:
        errors = [ln for ln in out.stderr.splitlines() if "is ignored" not in ln]
        raise SystemExit(f"{Path(cmd[0]).name} install for {target} failed (exit {out.returncode}):\n" + "\n".join(errors[-30:]))


def compile_tree(path: Path) -> None:
    """Bytecode for every module under ``path``, written as ``make package`` writes it (unchecked-hash),
    by this interpreter."""
    _builder().compile_bytecode(path, sys.executable, prefix=None)


def _stamped(out: Path, digest: str) -> bool:
    stamp = out / ".stamp"
    return (out / "python").exists() and stamp.exists() and stamp.read_text() == digest


def build_layer(name: str, out: Path) -> Path:
    """Layer ``name`` for this interpreter into ``out/python``; reused while its inputs are unchanged."""
    build = _builder()
    layer = build.layers()[name]
    lockfile = build.LOCKS / f"{name}.txt"
    target = out / "python"
    inputs = repr((layer.inputs(), build.COMMON_PRUNE, build.KEEP_SOURCE, build.READS_SOURCE.pattern, build.PRUNE_RULES,
                   _interpreter_tag(), BYTECODE))
    digest = hashlib.sha256(lockfile.read_bytes() + inputs.encode()).hexdigest()
    if not _stamped(out, digest):
        shutil.rmtree(out, ignore_errors=True)
        target.mkdir(parents=True)
        _install(pins(lockfile), target)
        build.prune_layer(layer, target)
        compile_tree(target)
        build.drop_sources(target, sys.implementation.cache_tag)
        (out / ".stamp").write_text(digest)
    if layer.with_cairn:
        shutil.rmtree(target / "cairn", ignore_errors=True)
        build._copy_cairn(target)
        compile_tree(target / "cairn")
    return target


def build_runtime(out: Path) -> Path:
    """What the Lambda runtime provides, at this environment's versions."""
    requirements = [f"{name}=={version(name)}" for name in RUNTIME_DISTRIBUTIONS]
    target = out / "python"
    digest = hashlib.sha256(repr((requirements, _interpreter_tag(), BYTECODE)).encode()).hexdigest()
    if not _stamped(out, digest):
        shutil.rmtree(out, ignore_errors=True)
        target.mkdir(parents=True)
        _install(requirements, target)
        compile_tree(target)
        (out / ".stamp").write_text(digest)
    return target


def build_all(out: Path = HOST_OUT, layers: tuple[str, ...] | None = None) -> dict[str, Path]:
    """The layers (default: every one), the runtime and every function's folder; {name: path}."""
    build = _builder()
    paths = {name: build_layer(name, out / "layers" / name) for name in (layers or tuple(build.layers()))}
    paths["runtime"] = build_runtime(out / "runtime")
    for fn in build.FUNCTIONS:
        paths[f"function:{fn}"] = build.build_function(fn, out / "functions")
        compile_tree(paths[f"function:{fn}"])
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=HOST_OUT)
    parser.add_argument("--layer", action="append", help="only these layers (default: every one)")
    args = parser.parse_args(argv)
    for name, path in build_all(args.out, tuple(args.layer) if args.layer else None).items():
        print(f"{name:24} {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
