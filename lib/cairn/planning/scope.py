"""Resolving a named entity to the folder named after it.

A conversation names what it is about ("Hobsons House"); a tree often has a folder with that
name (a customer, a product, a shop). Searching inside that folder is what tells one shop's
"is there parking?" from another's. :class:`FolderResolver` finds the outermost folder whose
title contains every word of the name, with one keyword search over folder abstracts (L0),
or a dense one where the backend has no keyword search. It is precise on purpose: a name
that matches no folder, or too many, scopes nothing.
"""

from __future__ import annotations

import re
from typing import Any

from ..models import Level
from ..vectorstores import SearchMode, VectorQuery, VectorStore

_WORD = re.compile(r"[a-z0-9]+")
MAX_FOLDERS = 3


def words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


class FolderResolver:
    def __init__(self, store: VectorStore, tenant: str, embedder: Any = None, candidates: int = 10) -> None:
        self.store, self.tenant, self.embedder, self.candidates = store, tenant, embedder, candidates
        self.lookups = 0

    def __call__(self, name: str, roots: list[str]) -> list[str]:
        """The outermost folders (at most 3) under ``roots`` whose title has every word of ``name``."""
        want = words(name)
        if not want or not roots:
            return []
        flt = {"level": int(Level.ABSTRACT), "ancestors": {"$in": roots}}
        if self.store.capabilities().keyword:
            req = VectorQuery(tenant=self.tenant, text=name, mode=SearchMode.KEYWORD, filter=flt, limit=self.candidates)
        elif self.embedder is not None:
            req = VectorQuery(tenant=self.tenant, vector=self.embedder.embed_one(name).tolist(), filter=flt, limit=self.candidates)
        else:
            return []
        self.lookups += 1
        named = [h.record for h in self.store.query(req) if want <= words(h.record.title)]
        if not named:
            return []
        top = min(r.depth for r in named)
        # a folder inside another match ("Reviews of X" inside "X") is not a second entity
        found = sorted({r.uri for r in named if r.depth == top})
        return found if len(found) <= MAX_FOLDERS else []
