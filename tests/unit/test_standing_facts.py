"""The profile arm's rule (cairn.engine.retrieval.profile): which of a user's standing facts bear on
a question, from the fact's cosines to the question and to the pages the question finds."""

from __future__ import annotations

import numpy as np
import pytest

from cairn.engine.retrieval.profile import FIRST_MARGIN, Evidence, fact_scores, standing_out

pytestmark = pytest.mark.unit


def test_facts_that_score_alike_stand_out_none():
    assert standing_out([0.31, 0.30, 0.29, 0.32]) == []


def test_the_fact_that_stands_out_is_kept_and_only_it():
    assert standing_out([0.05, 0.9, 0.1, 0.0]) == [1]


def test_a_second_fact_needs_a_clear_margin_too():
    assert standing_out([1.2, 0.05, 1.1, 0.0, 0.1]) == [0, 2]
    assert standing_out([1.2, 0.05, 0.3, 0.0, 0.1]) == [0]


def test_when_the_best_fact_does_not_stand_out_no_other_is_kept():
    assert standing_out([0.5, 0.45, 0.44, 0.46]) == []


def test_a_single_fact_is_compared_with_the_questions_background():
    assert standing_out([FIRST_MARGIN + 0.05]) == [0]
    assert standing_out([FIRST_MARGIN - 0.05]) == []
    assert standing_out([]) == []


def _unit(*xs: float) -> np.ndarray:
    v = np.asarray(xs, dtype=np.float32)
    return v / np.linalg.norm(v)


def test_a_fact_near_the_pages_the_question_finds_first_outscores_one_that_is_not():
    # axes: 0 the question's topic, 1 what its first pages add, 2 what its next pages are about, 3 elsewhere
    question = _unit(1, 0, 0, 0)
    top = np.stack([_unit(0.7, 0.7, 0, 0)] * 3)
    rest = np.stack([_unit(0.5, 0, 0.8, 0)] * 7)
    evidence = Evidence(best=0.7, background=0.5, top=top, rest=rest)
    bridged = _unit(0.1, 1, 0, 0.3)  # shares no direction with the question itself, but with its first pages
    generic = _unit(0.1, 0, 1, 0.3)  # as far from the question, close to the pages every question finds
    scores = fact_scores(question, np.stack([bridged, generic]), evidence)
    assert scores[0] > scores[1] + FIRST_MARGIN


def test_the_score_is_in_units_of_the_questions_own_margin():
    question = _unit(1, 0, 0)
    fact = np.stack([_unit(0.6, 0.8, 0)])
    pages = np.stack([_unit(0.9, 0, 0.4)] * 3)
    narrow = fact_scores(question, fact, Evidence(best=0.8, background=0.4, top=pages, rest=pages))
    wide = fact_scores(question, fact, Evidence(best=1.0, background=0.2, top=pages, rest=pages))
    assert narrow[0] == pytest.approx(0.5) and wide[0] == pytest.approx(0.5)
