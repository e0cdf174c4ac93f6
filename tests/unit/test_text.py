"""cairn.core.text: a text's language, and its words for keyword matching, by that language."""

from __future__ import annotations

import builtins

import pytest

from cairn.core import text
from cairn.core.config import load_settings
from cairn.core.errors import ConfigError
from cairn.core.text import segment

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    "sample, code",
    [
        ("退款需要多长时间？", "zh"),
        ("我们为每一笔订单开具电子增值税发票，也可以在账户页面下载 PDF 版本。", "zh"),
        ("日本で梅雨がないのは北海道とどこか。", "ja"),
        ("Wie lange dauert eine Rückerstattung bei Ihnen normalerweise?", "de"),
        ("Les remboursements sont traités sous sept jours ouvrables.", "fr"),
        ("How long does a refund take?", "en"),
        ("cell death", "en"),  # too short to tell: English, as before
        ("환불은 얼마나 걸리나요?", "other"),  # Hangul: no stemmer, Unicode words
        ("", "en"),
    ],
)
def test_detect_names_the_language(sample, code):
    assert text.detect(sample) == code


def test_chinese_is_cut_into_words_and_stop_words_dropped():
    assert text.words(["我的数据存储在哪里？"]) == [["数据", "存储"]]
    # search mode: a long word also yields the words inside it, so a different cut still meets
    assert {"工作日", "工作"} <= set(text.words(["五到七个工作日内退回"])[0])


def test_japanese_words_are_dictionary_forms_without_particles():
    tokens = text.words(["昨日は雨が降った。"])[0]
    assert "降る" in tokens and "雨" in tokens
    assert "は" not in tokens and "が" not in tokens


def test_english_is_analysed_exactly_as_before():
    import bm25s
    import Stemmer

    sample = ["Refunds are paid back to the original card within five business days.", "flows flowing flow"]
    before = bm25s.tokenize(sample, stopwords="en", stemmer=Stemmer.Stemmer("english").stemWords,
                            return_ids=False, show_progress=False)
    assert text.words(sample) == before


def test_german_gets_german_stems_and_stop_words():
    assert text.words(["Die Erstattungen werden auf die ursprüngliche Karte zurückgezahlt."]) == [
        ["erstatt", "ursprung", "kart", "zuruckgezahlt"]
    ]


def test_a_fixed_language_overrides_detection():
    # two words: detected, they are English; fixed to German, they get German stems
    assert text.words(["Erstattungen zurückgezahlt"]) == [["erstattungen", "zurückgezahlt"]]
    assert text.words(["Erstattungen zurückgezahlt"], "de") == [["erstatt", "zuruckgezahlt"]]


def test_mixed_text_segments_the_chinese_and_stems_the_english():
    tokens = text.words(["静态数据使用 AES encryption keys 加密"])[0]
    assert {"静态", "数据", "加密", "ae", "encrypt", "key"} <= set(tokens)  # Snowball: aes -> ae


def test_without_a_segmenter_chinese_falls_back_to_character_pairs(monkeypatch):
    real_import = builtins.__import__

    def no_rjieba(name, *args, **kwargs):
        if name == "rjieba":
            raise ImportError("no rjieba")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_rjieba)
    assert segment.segment("数据存储", "zh") == ["数据", "据存", "存储"]


def test_a_language_cairn_does_not_analyse_is_refused_with_the_allowed_ones():
    with pytest.raises(ValueError, match=r"language 'xx' is not a language cairn analyses; allowed: auto, en, zh, ja"):
        text.check("xx")
    with pytest.raises(ConfigError, match="CAIRN_LANGUAGE"):
        load_settings({"CAIRN_LANGUAGE": "klingon"})


def test_tenant_languages_come_from_the_environment():
    settings = load_settings({"CAIRN_TENANT_LANGUAGES": "acme=zh, globex=DE"})
    assert settings.tenant_languages == {"acme": "zh", "globex": "de"}
    policy = text.LanguagePolicy(settings.language, tuple(settings.tenant_languages.items()))
    assert policy.for_tenant("acme") == "zh" and policy.for_tenant("other") is None
    with pytest.raises(ConfigError, match=r"CAIRN_TENANT_LANGUAGES: 'acme' is not tenant=language"):
        load_settings({"CAIRN_TENANT_LANGUAGES": "acme"})
    with pytest.raises(ConfigError, match="tenant 'acme'"):
        load_settings({"CAIRN_TENANT_LANGUAGES": "acme=xx"})


@pytest.mark.parametrize("code", ["en", "de", "fr", "es", "ru", "nl", "sv", "da", "fi", "other"])
def test_words_are_the_tokens_bm25s_gives_without_importing_it(code):
    import bm25s

    from cairn.core.text import analyze
    from cairn.core.text.languages import LANGUAGES

    texts = ["The flows were flowing; a flow of 3 ISSUES, x-ray’s A/B tests and naïve cafés!", "Die Häuser standen am Flußufer",
             "Les maisons étaient près de la rivière", "Дома стояли у реки, и мы шли домой", "", "a b c", "Ölçüm 12 kg über"]
    lang = LANGUAGES.get(code)
    if code in analyze._BM25S_STOP:
        stop = code
    else:
        stop = sorted(analyze.stop_words(code)) if lang else []
    stemmer = analyze._stemmer(lang.stemmer).stemWords if lang and lang.stemmer else None
    expected = bm25s.tokenize(texts, stopwords=stop, stemmer=stemmer, return_ids=False, show_progress=False)
    assert analyze._alphabetic(texts, code) == expected


def test_an_embedder_covers_the_languages_it_declares():
    from cairn.ports.embeddings.base import covers
    from cairn.ports.embeddings.local import LocalEmbedder
    from cairn.ports.embeddings.local_e5 import LocalE5Embedder

    minilm, e5 = LocalEmbedder.__new__(LocalEmbedder), LocalE5Embedder.__new__(LocalE5Embedder)  # no model loaded
    assert covers(minilm, "How long does a refund take?") is None
    assert covers(minilm, "返金にはどのくらいかかりますか") == "ja"
    assert covers(minilm, "환불은 얼마나 걸리나요?") == "other"
    assert covers(minilm, "Erstattung zurückgezahlt", "de") == "de"  # the tenant's fixed language, not the guess
    assert covers(e5, "返金にはどのくらいかかりますか") is None  # multilingual
