"""The languages cairn analyses by name, and how each one's words are found.

One table for every place that matches words: the local keyword index and reranker (through
:func:`cairn.core.text.words`), the OpenSearch mapping (its analyzer per language) and the
embedders' declared coverage. A language outside the table is still searchable: its text is
split into Unicode words, lower-cased, with no stemming and no stop words (``"other"``).

* Chinese and Japanese have no spaces: their text is cut into words by a segmenter
  (:mod:`.segment`); on OpenSearch by the ``smartcn`` and ``kuromoji`` analyzers (plugins that
  Amazon OpenSearch Service installs on every domain).
* The others are split on word boundaries, stop words dropped, words reduced to their Snowball
  stem (PyStemmer); on OpenSearch by the built-in analyzer of that language.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT = "en"  # a Latin-script text the detector is not sure about is read as English, as before
OTHER = "other"  # any language outside the table: Unicode words, no stems, no stop words


@dataclass(frozen=True)
class Language:
    code: str  # ISO 639-1
    name: str
    stemmer: str | None  # PyStemmer's algorithm name; None: the words are kept as written
    opensearch: str  # the analyzer of the OpenSearch subfield for this language
    segmented: bool = False  # written without spaces: a segmenter finds the words


LANGUAGES: dict[str, Language] = {
    lang.code: lang
    for lang in (
        Language("en", "English", "english", "english"),
        Language("zh", "Chinese", None, "smartcn", segmented=True),
        Language("ja", "Japanese", None, "kuromoji", segmented=True),
        Language("de", "German", "german", "german"),
        Language("fr", "French", "french", "french"),
        Language("es", "Spanish", "spanish", "spanish"),
        Language("it", "Italian", "italian", "italian"),
        Language("pt", "Portuguese", "portuguese", "portuguese"),
        Language("nl", "Dutch", "dutch", "dutch"),
        Language("sv", "Swedish", "swedish", "swedish"),
        Language("da", "Danish", "danish", "danish"),
        Language("no", "Norwegian", "norwegian", "norwegian"),
        Language("fi", "Finnish", "finnish", "finnish"),
        Language("ru", "Russian", "russian", "russian"),
    )
}
# languages a detector may name for a text in the Latin or Cyrillic script (CJK is told by script)
ALPHABETIC = tuple(code for code, lang in LANGUAGES.items() if not lang.segmented)


def check(code: str, *, setting: str = "language") -> str:
    """``code`` if cairn analyses it (or ``auto``); else a ValueError naming what is allowed."""
    value = code.strip().lower()
    if value == "auto" or value in LANGUAGES:
        return value
    allowed = ", ".join(["auto", *LANGUAGES])
    raise ValueError(f"{setting} {code!r} is not a language cairn analyses; allowed: {allowed}")


@dataclass(frozen=True)
class LanguagePolicy:
    """Which language each tenant's text is read in: ``default`` for every tenant (``auto``:
    detected per document and per query), overridden per tenant by ``tenants`` (tenant → code).
    Built once from the settings (``CAIRN_LANGUAGE``, ``CAIRN_TENANT_LANGUAGES``)."""

    default: str = "auto"
    tenants: tuple[tuple[str, str], ...] = ()

    def for_tenant(self, tenant: str) -> str | None:
        """The tenant's fixed language code, or None when its texts are detected one by one."""
        code = dict(self.tenants).get(tenant, self.default)
        return None if code == "auto" else code


AUTO = LanguagePolicy()
