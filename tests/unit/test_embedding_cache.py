"""The local model's vectors kept on disk (cairn.ports.embeddings.disk_cache): a text is embedded once
per machine, whichever process asks; a cache that cannot be used never fails an embedding."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest

from cairn.app.services import Services
from cairn.core.config import load_settings
from cairn.core.errors import ConfigError
from cairn.ports.embeddings.base import Embedder
from cairn.ports.embeddings.disk_cache import DiskCachedEmbedder, cache_folder, cached

pytestmark = pytest.mark.unit


class Model(Embedder):
    """A stand-in model that counts the texts it embeds; its vector depends on the text alone."""

    name = "local-counting"
    dimension = 8

    def __init__(self, packages: tuple[str, ...] = ()) -> None:
        self.seen: list[str] = []
        self.packages = packages

    def _embed(self, texts: list[str]) -> np.ndarray:
        self.seen += texts
        rows = [np.random.default_rng(abs(hash(t)) % 2**32).standard_normal(self.dimension) for t in texts]
        mat = np.array(rows, dtype=np.float32)
        return mat / np.linalg.norm(mat, axis=1, keepdims=True)


TEXTS = [f"chunk number {i} of the handbook" for i in range(12)]


def test_a_second_process_gets_the_same_vectors_without_the_model(tmp_path):
    first, later = Model(), Model()
    vectors = DiskCachedEmbedder(first, tmp_path).embed(TEXTS)
    again = DiskCachedEmbedder(later, tmp_path).embed(TEXTS)  # another process: a new embedder, the same folder
    assert len(first.seen) == len(TEXTS) and later.seen == []
    assert np.array_equal(vectors, again)
    assert np.array_equal(vectors, Model().embed(TEXTS))  # what the model itself gives


def test_only_the_texts_the_file_lacks_reach_the_model_and_the_order_is_kept(tmp_path):
    DiskCachedEmbedder(Model(), tmp_path).embed(TEXTS[:8])
    model = Model()
    mixed = [TEXTS[10], TEXTS[1], TEXTS[10], TEXTS[9], TEXTS[2], TEXTS[11]]
    out = DiskCachedEmbedder(model, tmp_path).embed(mixed)
    assert sorted(model.seen) == sorted({TEXTS[9], TEXTS[10], TEXTS[11]})  # each new text once
    assert np.array_equal(out, Model().embed(mixed))


def test_a_query_stays_with_the_model_and_writes_nothing(tmp_path):
    model = Model()
    embedder = DiskCachedEmbedder(model, tmp_path)
    embedder.embed_query("how do refunds work?")
    embedder.embed(["one", "two"])
    assert model.seen == ["how do refunds work?", "one", "two"]
    assert not list(tmp_path.glob("*.sqlite3"))


def test_queries_and_documents_are_kept_apart_for_a_model_that_tells_them_apart(tmp_path):
    class Typed(Model):
        distinguishes_input_type = True

        def _embed(self, texts, input_type="document"):  # type: ignore[override]
            return super()._embed([f"{input_type}: {t}" for t in texts])

    DiskCachedEmbedder(Typed(), tmp_path).embed(TEXTS, input_type="document")
    model = Typed()
    DiskCachedEmbedder(model, tmp_path).embed(TEXTS, input_type="query")
    assert len(model.seen) == len(TEXTS)


def test_another_model_version_starts_a_file_of_its_own(tmp_path):
    DiskCachedEmbedder(Model(packages=("numpy",)), tmp_path).embed(TEXTS)
    model = Model(packages=("numpy", "pytest"))
    DiskCachedEmbedder(model, tmp_path).embed(TEXTS)
    assert len(model.seen) == len(TEXTS)
    assert len(list(tmp_path.glob("local-counting-*.sqlite3"))) == 2


def test_the_file_keeps_the_newest_vectors_within_its_size(tmp_path):
    embedder = DiskCachedEmbedder(Model(), tmp_path, max_mb=1)
    embedder.file.max_rows = 10
    embedder.embed(TEXTS[:6])
    embedder.embed(TEXTS[6:])
    db = sqlite3.connect(embedder.file.path)
    assert db.execute("SELECT count(*) FROM vectors").fetchone() == (10,)
    model = Model()
    DiskCachedEmbedder(model, tmp_path).embed(TEXTS)
    assert sorted(model.seen) == sorted(TEXTS[:2])  # the two oldest went


@pytest.mark.parametrize("spoil", ["a file where the folder goes", "a damaged file"])
def test_a_cache_that_cannot_be_used_never_fails_an_embedding(tmp_path, spoil, caplog):
    folder = tmp_path / "cache"
    if spoil == "a file where the folder goes":
        folder.write_text("not a folder")
    else:
        folder.mkdir()
        earlier = DiskCachedEmbedder(Model(), folder)
        earlier.embed(TEXTS[:6])
        earlier.file.close()  # its process ended
        (path,) = folder.glob("*.sqlite3")
        path.write_bytes(b"this is not a database" * 200)
    model = Model()
    embedder = DiskCachedEmbedder(model, folder)
    first = embedder.embed(TEXTS)
    second = embedder.embed(TEXTS)
    assert np.array_equal(first, Model().embed(TEXTS)) and np.array_equal(second, first)
    assert len(model.seen) == 2 * len(TEXTS)  # the model answered both times
    assert "embedding_cache_unusable" in caplog.text or embedder.file._broken


def test_a_new_cache_folder_is_readable_by_its_user_alone(tmp_path):
    folder = tmp_path / "cache" / "embeddings"
    DiskCachedEmbedder(Model(), folder).embed(TEXTS)
    assert folder.stat().st_mode & 0o777 == 0o700


def test_where_the_cache_lives():
    assert cache_folder("auto", {"XDG_CACHE_HOME": "/x/cache"}).as_posix() == "/x/cache/cairn/embeddings"
    assert cache_folder("auto", {"AWS_LAMBDA_FUNCTION_NAME": "ingest"}) is None
    assert cache_folder("off", {}) is None and cache_folder("OFF", {}) is None
    assert cache_folder("/srv/vectors", {"AWS_LAMBDA_FUNCTION_NAME": "ingest"}).as_posix() == "/srv/vectors"


def test_the_local_embedder_is_cached_by_default_and_off_turns_it_off(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("AWS_LAMBDA_FUNCTION_NAME", raising=False)
    default = Services(load_settings({"CAIRN_HOME": str(tmp_path / "home")}))._build_embedder()
    assert isinstance(default, DiskCachedEmbedder)
    assert default.file.path.parent == tmp_path / "cairn" / "embeddings"
    assert default.max_tokens == 256 and default.tokenizer() is not None  # the model's, through the cache
    off = Services(load_settings({"CAIRN_HOME": str(tmp_path / "home"), "CAIRN_EMBEDDING_CACHE": "off"}))._build_embedder()
    assert not isinstance(off, DiskCachedEmbedder) and off.name == "local-minilm"
    assert cached(Model(), "off").name == "local-counting"


def test_a_cache_size_out_of_range_is_refused_naming_the_variable():
    with pytest.raises(ConfigError, match="cache_mb"):
        load_settings({"CAIRN_EMBEDDING_CACHE_MB": "0"})
