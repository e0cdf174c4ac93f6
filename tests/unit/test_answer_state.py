"""The Rerank state's answer fits the workflow's 256 KiB state: a long answer leaves the scores'
arithmetic out (cairn.app.workflow.within_state), never the matches or their scores."""

from __future__ import annotations

import copy
import json

import pytest

from cairn.app.workflow import within_state

pytestmark = pytest.mark.unit


def _match(i: int) -> dict:
    return {"uri": f"cairn://resources/notes/n{i}.md", "score": 0.5, "text": "x" * 200,
            "explanation": {"rule": "weighted_sum", "score": 0.5, "terms": [{"name": "dense", "score": 0.5, "weight": 1.0}] * 8}}


def _answer(n: int) -> dict:
    return {"resources": [_match(i) for i in range(n)],
            "provenance": [{"matches": [{"uri": m["uri"], "score": 0.5, "explanation": m["explanation"]}
                                        for m in (_match(i) for i in range(n))]}]}


def _size(answer: dict) -> int:
    return len(json.dumps(answer, separators=(",", ":")).encode())


def test_an_answer_within_the_budget_is_untouched():
    answer = _answer(5)
    assert within_state(copy.deepcopy(answer), budget=_size(answer)) == answer


def test_the_provenances_arithmetic_goes_first_then_the_matches():
    answer = _answer(50)
    without_provenance = copy.deepcopy(answer)
    for m in without_provenance["provenance"][0]["matches"]:
        m.pop("explanation")
    fitted = within_state(copy.deepcopy(answer), budget=_size(without_provenance))
    assert all("explanation" not in m for m in fitted["provenance"][0]["matches"])
    assert all("explanation" in m for m in fitted["resources"])
    smallest = within_state(copy.deepcopy(answer), budget=1000)
    assert all("explanation" not in m for m in smallest["resources"])
    assert [m["score"] for m in smallest["resources"]] == [0.5] * 50 and len(smallest["resources"]) == 50
