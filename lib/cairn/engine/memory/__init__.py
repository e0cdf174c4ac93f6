"""Memories of end users: written one at a time (``remember``), extracted from committed sessions
(episodes without an LLM, typed memories with one), and counted when used (hotness).

Everything takes its dependencies as arguments; :class:`MemoryService` is what ``Cairn``, the API
and the CLI call.
"""

from cairn.engine.memory.archive import episodes, format_date
from cairn.engine.memory.extract import Extraction, LLMExtractor
from cairn.engine.memory.hotness import UseRecorder, use_hotness
from cairn.engine.memory.models import (
    EPISODES,
    CommitResult,
    MemoryItem,
    MemoryKind,
    TypedCategory,
    WriteReport,
    cite,
    memory_root,
)
from cairn.engine.memory.service import MemoryService, RememberResult
from cairn.engine.memory.writer import MemoryWriter

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
