"""The package builder (infra/package/build.py): the layers leave out only what cairn never
imports, every configuration the template accepts is size-checked, and a function over Lambda's
limit fails the build. (The build itself downloads wheels: `make package`, not run here.)"""

from __future__ import annotations

import importlib.util
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


def test_what_the_layers_drop_is_never_imported(build):
    """The local embedder and the OpenSearch client work with every dropped distribution blocked."""
    pytest.importorskip("onnxruntime")
    pytest.importorskip("opensearchpy")
    dropped = {"huggingface_hub", "hf_xet", "fsspec", "tqdm", "yaml", "filelock", "httpx2", "httpcore2",
               "truststore", "click", "grpc", "opensearch_protobufs", "google"}
    code = f"""
import sys, importlib.abc
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split('.')[0] in {sorted(dropped)!r}:
            raise ImportError('dropped from the layer: ' + name)
sys.meta_path.insert(0, Block())
from cairn.ports.embeddings.local import LocalEmbedder
assert LocalEmbedder().embed(['a short text']).shape == (1, 384)
from opensearchpy import OpenSearch
OpenSearch(hosts=['http://127.0.0.1:9'])
"""
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
