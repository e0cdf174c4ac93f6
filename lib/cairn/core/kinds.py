"""The three kinds of context and the three levels of a record: the words every layer shares."""

from __future__ import annotations

from enum import Enum, IntEnum


class ContextType(str, Enum):
    MEMORY = "memory"
    RESOURCE = "resource"
    SKILL = "skill"

    @property
    def bucket(self) -> str:
        """The name of this type's list in a :class:`FindResult`."""
        return {"memory": "memories", "resource": "resources", "skill": "skills"}[self.value]


class Level(IntEnum):
    ABSTRACT = 0  # L0: a directory's one-to-three sentence abstract
    OVERVIEW = 1  # L1: a directory's overview
    DETAIL = 2  # L2: a leaf (file or chunk)
