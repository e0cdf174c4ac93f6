"""Retrieval quality cannot fall silently: the agent path's figures on the repository's own chats
(benchmarks/quality_gate.py, each set through a `cairn serve` of its own) against the committed
baseline, and the gate's own rule on figures that moved."""

from __future__ import annotations

import pytest

from benchmarks.quality_gate import TOLERANCE, load_baseline, measure, regressions

pytestmark = pytest.mark.e2e


def test_no_quality_figure_falls_more_than_the_tolerance_under_the_baseline():
    baseline = load_baseline()
    now = measure()
    assert set(now) == set(baseline), "the gate measures what its baseline holds (python -m benchmarks.quality_gate --write)"
    found = regressions(now, baseline)
    assert not found, "quality fell; fix it, or lower the baseline in a commit of its own that says why:\n" + "\n".join(found)


def test_a_drop_over_the_tolerance_fails_and_a_smaller_one_or_a_gain_does_not():
    baseline = {"s.search_session.nDCG@10": 0.80, "s.unasked_memory_in_top3": 0.30, "s.memory_recall@3": 0.50}
    within = {"s.search_session.nDCG@10": (0.80 - TOLERANCE / 2, True), "s.unasked_memory_in_top3": (0.28, False),
              "s.memory_recall@3": (0.75, True)}
    assert regressions(within, baseline) == []
    worse = {"s.search_session.nDCG@10": (0.78, True), "s.unasked_memory_in_top3": (0.33, False)}
    found = regressions(worse, baseline)
    assert len(found) == 3  # nDCG fell, memories flood more turns, and a guarded figure went unmeasured
    assert "s.search_session.nDCG@10 fell from 0.8 to 0.78" in found[1]
    assert "s.unasked_memory_in_top3 rose from 0.3 to 0.33" in found[2]
    assert "s.memory_recall@3: in the baseline (0.5) but not measured" in found[0]


def test_the_quality_table_takes_every_quality_figure_and_no_timing():
    from benchmarks.quality_table import figures

    result = {"arms": {"find": {"nDCG@10": 0.5, "p50_ms": 3.0, "recall@3": 0.25}}, "memory_recall@3": 0.9,
              "memory_misses": [{"turn": "c1#2"}], "wall_seconds": 12.0, "staff": {"arms": {"bm25": {"nDCG@10": 0.4}}}}
    assert dict(figures(result)) == {("arms", "find", "nDCG@10"): 0.5, ("arms", "find", "recall@3"): 0.25,
                                     ("memory_recall@3",): 0.9, ("staff", "arms", "bm25", "nDCG@10"): 0.4}
