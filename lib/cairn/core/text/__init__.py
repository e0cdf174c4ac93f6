"""Language-aware text: which language a text is in, and its words for keyword matching.

:func:`words` is what every keyword match uses (the local store's BM25 index, the local
reranker, the evidence gate's keyword check, the planner's folder names); :func:`detect` names
a text's language; :data:`LANGUAGES` is the table of languages analysed by name (segmenter or
stemmer, stop words, the OpenSearch analyzer). See :mod:`.analyze`, :mod:`.detect`,
:mod:`.segment` and :mod:`.languages`.
"""

from cairn.core.text.analyze import language_of, words
from cairn.core.text.detect import detect
from cairn.core.text.languages import AUTO, DEFAULT, LANGUAGES, OTHER, Language, LanguagePolicy, check

__all__ = ["AUTO", "DEFAULT", "LanguagePolicy", "LANGUAGES", "OTHER", "Language", "check", "detect", "language_of", "words"]
