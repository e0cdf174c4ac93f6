"""The language detector's unpacked model is kept between processes: read back it answers as the
model does, a damaged copy is never trusted, and copies nobody can use any more are removed."""

from __future__ import annotations

import importlib

import pytest

detect = importlib.import_module("cairn.core.text.detect")
langid = pytest.importorskip("py3langid.langid")

TEXTS = ["Das ist ein kleiner Test für die Erkennung der Sprache", "Ceci est une phrase en français pour tester",
         "Dit is een korte Nederlandse zin om te testen", "This is a short English sentence to test with"]


def _identifier():
    return detect._cached_identifier(langid.LanguageIdentifier, langid.MODEL_FILE)


@pytest.fixture
def cache_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path / "cairn"


def test_the_kept_model_answers_as_the_model_itself(cache_home):
    fresh = _identifier()  # unpacks the model and keeps it
    kept = list(cache_home.glob("langid-*"))
    assert len(kept) == 1 and (kept[0] / "source").is_file()
    again = _identifier()  # read from the kept copy, its state table mapped
    assert isinstance(again.tk_nextmove, memoryview)
    for text in TEXTS:
        assert again.classify(text) == pytest.approx(fresh.classify(text))
    assert [again.classify(t)[0] for t in TEXTS] == ["de", "fr", "nl", "en"]


def test_a_damaged_copy_is_not_trusted(cache_home):
    _identifier()
    kept = next(cache_home.glob("langid-*"))
    (kept / "nextmove.npy").write_bytes(b"not an array")
    assert [_identifier().classify(t)[0] for t in TEXTS] == ["de", "fr", "nl", "en"]
    assert isinstance(_identifier().tk_nextmove, memoryview)  # and it was written again, whole


def test_copies_nobody_can_read_are_removed(cache_home):
    cache_home.mkdir(parents=True)
    legacy = cache_home / "langid-0123456789abcdef.npz"  # the one-file format of earlier versions
    legacy.write_bytes(b"x" * 10)
    orphan = cache_home / "langid-fedcba9876543210"  # its model file was uninstalled
    orphan.mkdir()
    (orphan / "source").write_text(str(cache_home / "gone" / "model.plzma"))
    _identifier()
    assert not legacy.exists() and not orphan.exists()
    assert len(list(cache_home.glob("langid-*"))) == 1
