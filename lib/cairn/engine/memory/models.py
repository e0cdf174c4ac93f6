"""Typed data of the memory package: what is written, what a write or a commit did."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from cairn.core import uri as uris
from cairn.core.errors import RequestError
from cairn.core.models import MAX_TEXT_CHARS, MetadataValue

MEMORY_SEGMENT = "memories"
MAX_MEMORY_CHARS = MAX_TEXT_CHARS
MAX_SLUG_CHARS = 80
_SLUG_BAD = re.compile(r"[^a-z0-9]+")
_CATEGORY = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
# metadata keys cairn writes on every memory; a caller's metadata may not use them
RESERVED_KEYS = frozenset({"category", "kind", "cites", "session_id", "seqs", "speakers", "said_at", "date", "memory_key"})


class MemoryKind(str, Enum):
    NOTE = "note"  # written by a caller (remember)
    EPISODE = "episode"  # turns of a conversation, archived as they were said
    EXTRACTED = "extracted"  # a typed memory an LLM extracted from a conversation


class TypedCategory(str, Enum):
    """The categories an LLM extracts into (``remember`` accepts any category name)."""

    PROFILE = "profile"
    PREFERENCES = "preferences"
    ENTITIES = "entities"
    EVENTS = "events"
    CASES = "cases"


EPISODES = "episodes"


def cite(session_id: str, seq: int) -> str:
    """A citation of one message: ``"<session id>#<seq>"`` (every memory lists its own in ``cites``)."""
    return f"{session_id}#{seq}"


def memory_root(user: str) -> str:
    """``cairn://user/{user}/memories``: every memory of one end user is under it."""
    return uris.validate(f"{uris.SCHEME}user/{user}/{MEMORY_SEGMENT}")


def check_category(category: Any) -> str:
    if not isinstance(category, str) or not _CATEGORY.match(category):
        raise RequestError(
            f"memory category {category!r} is not valid; use 1-64 lowercase letters, digits, '_' or '-' "
            f"(e.g. {', '.join(c.value for c in TypedCategory)})"
        )
    return category


def slugify(text: str, max_chars: int = MAX_SLUG_CHARS) -> str:
    """A file name from free text: lowercase words joined by '-', bounded; '' when nothing is left."""
    slug = _SLUG_BAD.sub("-", text.lower()).strip("-")
    return slug[:max_chars].rstrip("-")


def text_key(text: str, words: int = 6) -> str:
    """A stable key for a memory given without one: its first words plus a hash of the whole text,
    so remembering the same text twice updates one memory instead of adding a second."""
    head = slugify(" ".join(text.split()[:words]), 48)
    digest = hashlib.sha256(" ".join(text.split()).encode()).hexdigest()[:10]
    return f"{head}-{digest}" if head else digest


def check_metadata(metadata: Mapping[str, Any] | None) -> dict[str, MetadataValue]:
    """A caller's metadata: flat (str, number, bool, list of str), none of the reserved keys."""
    out: dict[str, MetadataValue] = {}
    problems = []
    for key, value in (metadata or {}).items():
        if key in RESERVED_KEYS:
            problems.append(f"metadata.{key}: reserved (cairn sets it); reserved keys: {', '.join(sorted(RESERVED_KEYS))}")
        elif isinstance(value, bool | int | float | str) or (
            isinstance(value, list) and all(isinstance(v, str) for v in value)
        ):
            out[key] = value
        else:
            problems.append(f"metadata.{key}: {type(value).__name__} is not allowed; use a string, number, bool or list of strings")
    if problems:
        raise RequestError("invalid memory metadata: " + "; ".join(problems), details=problems)
    return out


class MemoryItem(BaseModel):
    """One memory to write: where it goes and what it says (built by ``remember`` or a commit)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    user: str
    category: str
    key: str  # the file name under the category folder
    text: str
    title: str = ""
    kind: MemoryKind = MemoryKind.NOTE
    metadata: dict[str, MetadataValue] = Field(default_factory=dict)
    said_at: float | None = None  # when what it records happened (a message's time), epoch seconds

    @property
    def uri(self) -> str:
        return uris.join(memory_root(self.user), self.category, self.key)


class WriteReport(BaseModel):
    """What one write did: memories written or unchanged, folders refreshed."""

    model_config = ConfigDict(extra="forbid")

    uris: list[str] = Field(default_factory=list)
    written: int = 0  # records upserted (memories and folder summaries)
    unchanged: int = 0  # memories already stored exactly so
    embedded: int = 0
    folders: list[str] = Field(default_factory=list)


class CommitResult(BaseModel):
    """What one commit did."""

    model_config = ConfigDict(extra="forbid")

    session_id: str
    user: str
    committed_through: int  # the session's mark after the commit
    messages: int = 0  # messages read (new since the last commit)
    episodes: list[str] = Field(default_factory=list)  # URIs of archived turns
    extracted: list[str] = Field(default_factory=list)  # URIs of typed memories created or updated
    merged: int = 0  # typed memories merged into an existing one
    skipped: int = 0  # typed memories already known
    missed: int = 0  # messages folded into the summary before any commit read them
    extractor: str = "none"  # none | llm | fallback:<reason>
    written: int = 0
    stored: int = 0  # memories stored by this commit: episodes + typed memories
    summary: str = ""  # what was stored, in words ("kept 3 things ann said as episodic memories ...")
    seconds: float = 0.0
