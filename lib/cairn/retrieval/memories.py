"""A user's memories in every answer that needs them, and not in the ones that don't.

A search across every context type for a known user (``search()`` with a session, or any call
naming a user) searches that user's memories with a search of their own, in the same mode as the
rest (:func:`cairn.stages.retrieve`): in one global search over resources and memories together, a
short memory ("Bob's company is on the Enterprise plan") loses its place to ten resource pages and
never reaches the answer. Only memory leaves are kept (a memory folder's summary cites nothing).

A memory then competes on relevance: it is kept when it scores at least ``RELATIVE`` times the best
resource or skill candidate of the same query (or above the threshold when there is none), so
"Which plan am I on?" brings back the plan and "how long do refunds take?" does not bring back
the user's hobbies.
"""

from __future__ import annotations

from ..assemble import finite
from ..models import Candidate, ContextType
from ..uri import default_roots

# Chosen on the agent-day benchmark (benchmarks/README.md): a memory within this share of the
# best other candidate's score is relevant enough to be in the answer.
RELATIVE = 0.8


def memory_roots(user: str | None) -> list[str]:
    return default_roots(ContextType.MEMORY, user) if user else []


def relevant(memories: list[Candidate], others: list[Candidate], threshold: float, relative: float = RELATIVE) -> list[Candidate]:
    """The memories that compete with ``others`` on relevance (module doc)."""
    bar = max((finite(c.score) for c in others), default=0.0) * relative
    return [m for m in memories if finite(m.score) > threshold and finite(m.score) >= bar]
