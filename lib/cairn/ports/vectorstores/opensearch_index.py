"""The OpenSearch index cairn writes: its mapping (a subfield per language on every text field), the
fields a keyword search reads, and each document's id.

Full text is analysed with the built-in ``english`` analyzer (stop words, Porter stems), as the local
store's keyword search (:mod:`cairn.ports.vectorstores.keywords`). Each of ``title``, ``abstract`` and
``text`` also has a subfield per other language, analysed by that language's analyzer (``text.zh``:
smartcn, ``text.ja``: kuromoji, ``text.de``: german, ...: the table :data:`cairn.core.text.LANGUAGES`);
a query is matched on the subfields of its own language (the tenant's fixed language, else the
query's detected one), so a Chinese question meets Chinese words cut by a Chinese segmenter and an
English one the English stems as before. An index created before a subfield existed keeps working
without it until it is re-created.
"""

from __future__ import annotations

import hashlib
from typing import Any

from cairn.core.text import LANGUAGES

KEYWORD_FIELDS = ("title.text^2", "abstract", "text")
_MAX_ID_BYTES = 512
_KEYWORD = {"type": "keyword"}
_ENGLISH_TEXT = {"type": "text", "analyzer": "english"}
SUBFIELD_LANGUAGES = tuple(code for code in LANGUAGES if code != "en")


def _subfields(languages: tuple[str, ...]) -> dict[str, Any]:
    return {code: {"type": "text", "analyzer": LANGUAGES[code].opensearch} for code in languages}


META_IDENTITY = "cairn_embedder"  # the key of the embedder's identity in the mapping's _meta


def index_body(dimension: int, engine: str, languages: tuple[str, ...] = SUBFIELD_LANGUAGES) -> dict[str, Any]:
    """Settings and mappings of the cairn index (``knn`` on, one ``knn_vector`` field ``vector``;
    a subfield per language of ``languages`` on every text field)."""
    keyword_fields = ("tenant", "id", "uri", "parent_uri", "ancestors", "context_type", "owner", "tags", "content_hash")
    properties: dict[str, Any] = {name: dict(_KEYWORD) for name in keyword_fields}
    per_language = _subfields(languages)
    # filters read the title exactly; its words are ``title.text`` (English) and ``title.<language>``
    properties["title"] = {"type": "keyword", "fields": {"text": dict(_ENGLISH_TEXT), **per_language}}
    for name in ("abstract", "text"):
        properties[name] = {**_ENGLISH_TEXT, "fields": {"keyword": {"type": "keyword", "ignore_above": 256}, **per_language}}
    properties.update({name: {"type": "long"} for name in ("depth", "level", "active_count")})
    properties.update({name: {"type": "double"} for name in ("created_at", "updated_at")})
    properties["metadata"] = {"type": "object", "dynamic": True}
    properties["vector"] = {
        "type": "knn_vector",
        "dimension": dimension,
        "method": {"name": "hnsw", "space_type": "cosinesimil", "engine": engine},
    }
    return {
        "settings": {"index": {"knn": True}},
        "mappings": {
            "date_detection": False,  # a metadata string like "2024-01-01" stays a keyword
            "dynamic_templates": [
                {"metadata_strings": {"path_match": "metadata.*", "match_mapping_type": "string", "mapping": _KEYWORD}}
            ],
            "properties": properties,
        },
    }


def keyword_fields(language: str | None, languages: tuple[str, ...] = SUBFIELD_LANGUAGES) -> list[str]:
    """The fields a keyword query in ``language`` is matched on: that language's subfields when
    the index has them, else the English-analysed fields (English, and any other language)."""
    if language and language in languages:
        return [f"title.{language}^2", f"abstract.{language}", f"text.{language}"]
    return list(KEYWORD_FIELDS)


def doc_id(tenant: str, record_id: str) -> str:
    """The OpenSearch ``_id`` of a record: tenant-prefixed, so two tenants never collide."""
    out = f"{tenant}:{record_id}"
    if len(out.encode()) > _MAX_ID_BYTES:
        out = f"{tenant}:sha256:{hashlib.sha256(record_id.encode()).hexdigest()}"
    return out
