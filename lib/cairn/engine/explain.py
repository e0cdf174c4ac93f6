"""The arithmetic of a score, written where a stage combines scores.

Each function here returns the new score *together with* its :class:`ScoreExplanation` (the arms,
their weights and the rule), so the score an answer shows is the one its explanation computes:
the two cannot drift apart. The stages that combine scores:

- the reranker replaces the retrieval score (:func:`reranked`: the reranker's score at weight 1,
  the retrieval score beside it at weight 0);
- hotness blends it with use and recency (:func:`hot`: ``(1−a)·score + a·hotness``);
- the typed queries of a plan are merged (:func:`merged`): each match's score times its typed
  query's merge factor; a URI several typed queries of a conversation-carrying plan found is their
  ``1 − Π(1 − w·s)``, else the best ``w·s``;
- a user's memories listed next to the merged matches (:func:`rescaled`): raised in proportion to
  the best other match, or held under the best stated memory.
"""

from __future__ import annotations

from collections.abc import Sequence

from cairn.core.models import Candidate, MatchedContext, ScoreExplanation, ScoreTerm

LABEL_CHARS = 80
SCORE_TOLERANCE = 1e-6  # an explanation's score is rounded to 6 decimals


def consistent(c: Candidate | MatchedContext) -> ScoreExplanation | None:
    """``c``'s explanation while it still computes ``c``'s score; None once a stage moved the score
    without writing why (thinking mode's propagation, a boost, a memory's lift): an answer never
    shows arithmetic that does not add up."""
    why = c.explanation
    return why if why is not None and abs(why.score - c.score) <= SCORE_TOLERANCE else None


def _term(label: str, score: float, weight: float = 1.0, explanation: ScoreExplanation | None = None) -> ScoreTerm:
    return ScoreTerm(label=label, score=score, weight=weight, explanation=explanation)


def reranked(before: Candidate, after: Candidate, reranker: str) -> Candidate:
    """``after`` (a candidate the reranker scored) with the arithmetic of its new score."""
    why = ScoreExplanation.of("weighted_sum", [
        _term(f"reranker {reranker}", after.score),
        _term("retrieval score (replaced by the reranker's)", before.score, 0.0, consistent(before)),
    ], note="the reranker's score replaces the retrieval score")
    return after.model_copy(update={"explanation": why})


def hot(c: Candidate, score: float, hotness: float, weight: float) -> Candidate:
    """``c`` blended with its hotness: ``(1−weight)·score + weight·hotness``."""
    why = ScoreExplanation.of("weighted_sum", [
        _term("retrieval score", score, 1.0 - weight, consistent(c)),
        _term("hotness (use, halving every 7 days since the last update)", hotness, weight),
    ], note="hotness blend")
    return c.model_copy(update={"score": why.score, "explanation": why})


def query_label(n: int, text: str) -> str:
    """``typed query 2 “text”``, the text cut to :data:`LABEL_CHARS`."""
    cut = text if len(text) <= LABEL_CHARS else text[: LABEL_CHARS - 1] + "…"
    return f"typed query {n} “{cut}”"


def merged(found: Sequence[tuple[MatchedContext, ScoreTerm]], combine: bool) -> MatchedContext:
    """One URI's match from every typed query that found it (``(match, term)``, in plan order; a
    term's weight is its typed query's merge factor): with ``combine`` (a conversation-carrying plan;
    not for memories) the first match at ``1 − Π(1 − w·s)``, else the match of the best ``w·s``
    (the first on a tie)."""
    terms = [t for _, t in found]
    if combine and len(found) > 1:
        why = ScoreExplanation.of("noisy_or", terms, note="the typed queries that found it are combined")
        return found[0][0].model_copy(update={"score": why.score, "explanation": why})
    best = 0
    for i, (_, t) in enumerate(found):
        if round(t.weight * t.score, 6) > round(terms[best].weight * terms[best].score, 6):
            best = i
    why = ScoreExplanation.of("max", terms, note="its best typed query's score times that query's weight")
    return found[best][0].model_copy(update={"score": why.score, "explanation": why})


def rescaled(m: MatchedContext, score: float, raised_to: float) -> MatchedContext:
    """A memory ``m`` moved to ``score`` when listed next to the merged matches: raised in
    proportion (the best memory to ``raised_to``, the best other match's score), or held under
    the best stated memory (a question-only episode)."""
    score = round(score, 6)
    if score >= m.score and m.score > 0:
        why = ScoreExplanation.of("weighted_sum", [_term("memory's merged score", m.score, score / m.score, m.explanation)],
                                  note=f"memories raised in proportion, the best to the best other match's {raised_to:.3f}")
    else:
        why = ScoreExplanation.of("min", [_term("memory's merged score", m.score, 1.0, m.explanation),
                                          _term("just under the best stated memory", score)],
                                  note="a question-only episode ranks under the best stated memory")
    return m.model_copy(update={"score": why.score, "explanation": why})
