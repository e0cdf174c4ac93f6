"""Folders of a kind and topic folders, told apart by the tenant's own tree.

A folder is *of a kind* when its siblings hold children of the same names: every product folder
holds ``manual.md`` and ``faq.md``, every customer folder ``contracts/``. There the folder says which instance
a child belongs to, which the child's own words often do not. A folder whose siblings hold fewer
than half of its children's names is a *topic* (``billing/`` beside ``support/``): its documents say what it is
about themselves. Thinking mode lifts a folder's children with it only for folders of a kind
(:mod:`.thinking`), and the planners pass over a topic folder named by an ordinary word of the tenant
(:mod:`cairn.engine.planning.scope`).

The test is one fetch of record ids: for up to ``NAMES`` of the folder's children's names and up to
``SIBLINGS`` of its siblings, whether ``sibling/name`` is stored as a folder (L0), a file (L2) or a
file in chunks (its ``#0``). At least half of the names found under some sibling: of a kind.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from cairn.core.models import Level, record_id
from cairn.core.uri import parent as parent_of
from cairn.engine.assemble import document_key
from cairn.ports.vectorstores import SearchMode, VectorHit, VectorQuery, VectorStore

NAMES = 5  # children's names checked per folder
SIBLINGS = 3  # siblings they are looked up under


def child_names(folder: str, hits: Sequence[VectorHit]) -> list[str]:
    """The names of ``folder``'s children among ``hits`` (a chunk counts as its file), first found first."""
    return list(dict.fromkeys(document_key(h.record.uri).rsplit("/", 1)[-1] for h in hits
                              if h.record.parent_uri == folder))[:NAMES]


def of_a_kind(store: VectorStore, tenant: str, asked: Mapping[str, tuple[Sequence[str], Sequence[str]]]) -> dict[str, bool]:
    """For each folder of ``asked`` (folder -> its siblings, its children's names): whether it is of
    a kind (module doc). A folder with no sibling or no child named is left out; no fetch is made
    when none is left."""
    asked = {f: (sibs[:SIBLINGS], names[:NAMES]) for f, (sibs, names) in asked.items() if sibs and names}
    ids = [record_id(tenant, u, lvl) for sibs, names in asked.values() for sib in sibs for n in names
           for u, lvl in ((f"{sib}/{n}", Level.ABSTRACT), (f"{sib}/{n}", Level.DETAIL), (f"{sib}/{n}#0", Level.DETAIL))]
    if not ids:
        return {}
    there = {document_key(r.uri) for r in store.fetch(tenant, list(dict.fromkeys(ids)))}
    return {f: 2 * sum(any(f"{s}/{n}" in there for s in sibs) for n in names) >= len(names)
            for f, (sibs, names) in asked.items()}


def folder_kinds(store: VectorStore, tenant: str, vector: list[float], folders: Sequence[str]) -> dict[str, bool]:
    """:func:`of_a_kind` for ``folders``: one batched search finds each folder's siblings and
    children (those nearest ``vector``, dense; any vector does), then one fetch (none when no folder
    has a sibling and a child)."""
    requests = [VectorQuery(tenant=tenant, vector=vector, mode=SearchMode.DENSE, limit=limit, filter=flt)
                for f in folders
                for flt, limit in (({"parent_uri": parent_of(f) or "", "level": int(Level.ABSTRACT)}, SIBLINGS + 1),
                                   ({"parent_uri": f}, 2 * NAMES))]
    found = store.query_many(requests)
    asked = {f: ([h.record.uri for h in found[2 * i] if h.record.uri != f], child_names(f, found[2 * i + 1]))
             for i, f in enumerate(folders)}
    return of_a_kind(store, tenant, asked)
