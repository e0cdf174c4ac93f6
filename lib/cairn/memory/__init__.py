"""Memories of end users: written one at a time (``remember``), extracted from committed sessions
(episodes without an LLM, typed memories with one), and counted when used (hotness).

Everything takes its dependencies as arguments; :class:`MemoryService` is what ``Cairn``, the API
and the CLI call.
"""

from .archive import episodes, format_date
from .extract import Extraction, LLMExtractor
from .hotness import UseRecorder, use_hotness
from .models import (
    EPISODES,
    CommitResult,
    MemoryItem,
    MemoryKind,
    TypedCategory,
    WriteReport,
    cite,
    memory_root,
)
from .service import MemoryService, RememberResult
from .writer import MemoryWriter

__all__ = [
    "EPISODES",
    "CommitResult",
    "Extraction",
    "LLMExtractor",
    "MemoryItem",
    "MemoryKind",
    "MemoryService",
    "MemoryWriter",
    "RememberResult",
    "TypedCategory",
    "UseRecorder",
    "WriteReport",
    "cite",
    "episodes",
    "format_date",
    "memory_root",
    "use_hotness",
]
