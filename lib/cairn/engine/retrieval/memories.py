"""A user's memories in every answer that needs them, and not in the ones that don't.

A search across every context type for a known user (``search()`` with a session, or any call
naming a user) searches that user's memories with a search of their own (:func:`cairn.engine.stages.retrieve`):
in one global search over resources and memories together, a short memory ("Bob's company is on
the Enterprise plan") loses its place to ten resource pages and never reaches the answer. Only
memory leaves are kept (a memory folder's summary cites nothing).

**One scale.** A memory then competes on relevance with the resources and skills of the same
query, and the two are compared on scores computed the same way: the *raw* score of the query's
own vector (one quick search, dense + keyword where the other search is hybrid), for the memories
and for the best resource or skill alike. Thinking mode moves the query toward its first hits
(relevance feedback) and lifts the best of each separate search toward 1, so two such searches do
not share a scale: a repeated question lifted to 0.85 pushed the fact it asked about under the bar
(benchmarks/README.md, issue 19). A memory is kept when its raw score is at least ``RELATIVE`` times
the best raw resource score (or above the threshold when the query found no resource), and stands
above the query's *background* (the raw score of its ``BACKGROUND_RANK``-th resource match) by
``ABOVE_BACKGROUND`` of the best match's margin over that background. The second bar is what holds
for every embedder: a ratio of cosines depends on the model's scale (a model whose cosines sit in a
narrow high band scores an unrelated sentence 0.86 of the best match), a margin over the query's own
background does not (it is the same under any affine change of the scores). Kept
memories are then listed next to the resources: thinking mode lifts the best match of its search
toward 1, so the kept memories are lifted alike, in proportion, until the best of them scores
what the best resource scores in the end (never lowered: a memory that scores higher stays higher).

**A question is not its own answer.** An archived episode in which the user only asked (every line
the user said is a question) records what they wanted to know, not something true about them;
it matches a later query best when that query asks the same thing again. So when a typed memory
(a remembered or extracted fact or preference: something stated about the user, not a transcript)
is kept too, every question-only episode ranks under the best of them: "Which plan are we
on?" answers with "Ann's workspace is on the Growth plan.", not with her earlier "Which plan am I on
again?". The rule reads only the episode's form (:func:`cairn.engine.memory.archive.asks_only`), never its
words, so it holds for any tenant and language that marks questions with a question mark.
"""

from __future__ import annotations

from collections.abc import Sequence

from cairn.core.models import Candidate, ContextType
from cairn.core.uri import default_roots
from cairn.engine.assemble import finite
from cairn.engine.memory.archive import asks_only

# Chosen by measurement (benchmarks/README.md, issue 19): a memory within this share of the
# best other candidate's raw score is relevant enough to be in the answer. There the remembered
# fact a memory turn asks about scored 0.47-1.14 of the best resource's raw score, the user's
# unrelated memories 0.02-0.43 (short facts sit lower on the cosine scale than pages do).
RELATIVE = 0.45
# Chosen by measurement (benchmarks/README.md, issue 19): on the same 157 turns with two embedders,
# this keeps every remembered fact a memory turn asks about that RELATIVE alone keeps, with either
# model, while an unrelated memory is kept on 71 of the 144 other turns with multilingual-e5 instead
# of all 144, and on 70 with MiniLM, as with RELATIVE alone. 0.2 lost an asked-about fact with e5.
ABOVE_BACKGROUND = 0.15
BACKGROUND_RANK = 10
STANDING_REASON = "standing-fact"  # a standing fact's provenance reason (:mod:`.profile`)
STANDING_UNDER = 0.999  # a standing fact's score at most, in shares of the best other match's


def memory_roots(user: str | None) -> list[str]:
    return default_roots(ContextType.MEMORY, user) if user else []


def relevant(memories: list[Candidate], best_other: float, threshold: float, relative: float | None = None,
             background: float | None = None, above: float | None = None) -> list[Candidate]:
    """The memories that compete with the best other match (its raw score ``best_other``) on
    relevance: at least ``relative`` times it, over ``threshold``, and, with the query's
    ``background`` (:func:`background_of`), ``above`` (default ``ABOVE_BACKGROUND``) of the way
    from it to the best other match (module doc)."""
    bar = relevance_bar(best_other, relative, background, above)
    return [m for m in memories if finite(m.score) > threshold and finite(m.score) >= bar]


def relevance_bar(best_other: float, relative: float | None = None, background: float | None = None,
                  above: float | None = None) -> float:
    """The raw score a memory needs to be kept (:func:`relevant`, besides the threshold)."""
    relative = RELATIVE if relative is None else relative
    above = ABOVE_BACKGROUND if above is None else above
    bar = best_other * relative
    if background is not None and best_other > background:
        bar = max(bar, background + above * (best_other - background))
    return bar


def background_of(raw_scores: Sequence[float]) -> float | None:
    """The query's background among its raw resource scores: the ``BACKGROUND_RANK``-th best, or the
    last when fewer were found (None when none was)."""
    ranked = sorted((finite(s) for s in raw_scores), reverse=True)
    return ranked[min(BACKGROUND_RANK, len(ranked)) - 1] if ranked else None


def lifted(memories: list[Candidate], final_best: float) -> list[Candidate]:
    """Kept ``memories`` (raw scores) listed next to the other matches: when the best of them
    scores under ``final_best`` (the best other match's final score), all are raised in proportion
    so that it scores ``final_best``; never lowered (module doc), but for a standing fact, which
    stays just under ``final_best``."""
    top = max((finite(m.score) for m in memories), default=0.0)
    if top > 0 and final_best > top:
        memories = [m.model_copy(update={"score": finite(m.score) * final_best / top}) for m in memories]
    # a standing fact bears on the question through its pages (:mod:`.profile`): it comes right under
    # the best other match, never before the page that answers
    cap = STANDING_UNDER * final_best
    return [m.model_copy(update={"score": cap}) if m.reason == STANDING_REASON and final_best > 0 and finite(m.score) > cap
            else m for m in memories]


def questions_under_facts(memories: Sequence[Candidate]) -> list[Candidate]:
    """Question-only episodes under the best typed memory (module doc), best first."""
    return sorted(questions_capped(memories), key=lambda m: -finite(m.score))


def questions_capped(memories: Sequence[Candidate]) -> list[Candidate]:
    """``memories`` in their order, each question-only episode scoring under the best typed memory."""
    stated = [finite(m.score) for m in memories if m.record.metadata.get("kind") != "episode"]
    if not stated:
        return list(memories)
    cap = 0.999 * max(stated)
    return [
        m.model_copy(update={"score": min(finite(m.score), cap), "reason": f"{m.reason}+question"})
        if _asks_only(m) and finite(m.score) > cap else m
        for m in memories
    ]


def _asks_only(m: Candidate) -> bool:
    return m.record.metadata.get("kind") == "episode" and asks_only(m.record.text)


def standing_beside(kept: Sequence[Candidate], standing: Sequence[tuple[Candidate, float]], bar: float) -> list[Candidate]:
    """The standing facts that bear on the query (:mod:`.profile`) and are not in ``kept`` already,
    each at its raw score or at ``bar`` (what the other memories had to reach) when under it: a fact
    kept on its own evidence counts as relevant as they are, listed after those that scored higher."""
    have = {c.record.uri for c in kept}
    return [c.model_copy(update={"score": max(finite(c.score), bar)}) for c, _ in standing if c.record.uri not in have]
