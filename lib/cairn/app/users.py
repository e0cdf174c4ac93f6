"""One end user's data as one thing: list their memories and sessions, export it all, erase it all.

A user's data is everything under ``cairn://user/{user}`` (memories and user skills, in the index
and the content store) and the sessions created for them (with their messages and prefetched
context). Erasing removes all of it and answers how much was removed; what remains afterwards
is nothing any route returns.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cairn.app.models import MemoryItemOut, SessionExport, UserErased, UserExport
from cairn.core import uri as uris
from cairn.core.models import ContextRecord, ContextType, Level
from cairn.ports.vectorstores import VectorQuery

if TYPE_CHECKING:
    from cairn.engine.pipeline import Pipeline

PAGE = 1000  # records listed at most per kind (a user with more is exported in pages of the tree)


def user_root(user: str) -> str:
    return uris.validate(f"{uris.SCHEME}user/{user}")


def records_under(pipeline: Pipeline, root: str, limit: int = PAGE) -> list[ContextRecord]:
    """The L2 records under ``root`` (one per chunk), newest first."""
    store, tenant = pipeline.store, pipeline.tenant
    where = {"ancestors": root, "level": int(Level.DETAIL)}
    if store.count(tenant, where) == 0:
        return []
    probe = pipeline.embedder.embed_one(root.rsplit("/", 1)[-1]).tolist()
    hits = store.query(VectorQuery(tenant=tenant, vector=probe, filter=where, limit=limit))
    return sorted((h.record for h in hits), key=lambda r: (-r.updated_at, r.uri))


def item_of(record: ContextRecord) -> MemoryItemOut:
    seg = uris.parse(record.uri.split("#", 1)[0]).segments
    return MemoryItemOut(uri=record.uri, category=seg[3] if len(seg) > 4 else "", title=record.title,
                         text=record.text or record.abstract, updated_at=record.updated_at,
                         metadata=dict(record.metadata))


def memories(pipeline: Pipeline, user: str, category: str | None = None) -> list[MemoryItemOut]:
    root = f"{user_root(user)}/memories" + (f"/{category}" if category else "")
    uris.validate(root)
    return [item_of(r) for r in records_under(pipeline, root)]


def skills(pipeline: Pipeline, user: str) -> list[MemoryItemOut]:
    return [item_of(r) for r in records_under(pipeline, f"{user_root(user)}/skills")
            if r.context_type is ContextType.SKILL]


def export(pipeline: Pipeline, user: str) -> UserExport:
    sessions = pipeline.sessions
    held: list[SessionExport] = []
    if sessions is not None:
        for session in sessions.list_sessions(pipeline.tenant, user):
            view = sessions.get(pipeline.tenant, session.id, recent=0)
            messages = sessions.list_messages(pipeline.tenant, session.id)
            held.append(SessionExport(session=session, messages=messages, prefetched=view.prefetched))
    return UserExport(tenant=pipeline.tenant, user=user, memories=memories(pipeline, user),
                      skills=skills(pipeline, user), sessions=held)


def erase(pipeline: Pipeline, user: str) -> UserErased:
    """Delete the user's records (index and content store), their use counts (the embedded store
    drops them with the records; a counts table is told) and sessions; counts of what went."""
    root = user_root(user)
    store, tenant = pipeline.store, pipeline.tenant
    records = int(store.delete_by_filter(tenant, {"$or": [{"ancestors": root}, {"uri": root}]}))
    counts = pipeline.services.use_counts
    if counts is not None:
        counts.forget_under(tenant, root)
    if pipeline.content is not None:
        pipeline.content.delete_tree(tenant, root)
    sessions_removed = messages_removed = 0
    if pipeline.sessions is not None:
        for session in pipeline.sessions.list_sessions(tenant, user):
            messages_removed += len(pipeline.sessions.list_messages(tenant, session.id))
            sessions_removed += int(pipeline.sessions.delete(tenant, session.id))
    return UserErased(user=user, records=records, sessions=sessions_removed, messages=messages_removed)
