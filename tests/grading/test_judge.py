"""The judging service: a class's repeated answers are judged once, with the same verdict."""

from __future__ import annotations

from pathlib import Path

import autograder.checks
from autograder.grading import judge

ROOT = Path(__file__).resolve().parents[2]


def _request(answers: dict[str, object]) -> dict:
    return {"chapter": "ch01_rooflines", "course_dir": str(ROOT),
            "items": [{"qid": q, "answer": a} for q, a in answers.items()]}


def test_a_repeated_answer_is_judged_once_with_the_same_verdict(monkeypatch):
    calls: list[str] = []
    real = autograder.checks.judge

    def counting(question, answer, **kw):
        calls.append(question.qid)
        return real(question, answer, **kw)

    monkeypatch.setattr(autograder.checks, "judge", counting)
    monkeypatch.setattr(judge, "_memo", {})
    first = judge.handle(_request({"ch01-e4-t-math": "B*D*F/C", "ch01-e4-t-comms": "B*F/W_link"}))
    assert first["ch01-e4-t-math"]["status"] == "correct"
    assert first["ch01-e4-t-comms"]["diagnosis"] == "ratio:1/2"  # a factor of 2 short
    again = judge.handle(_request({"ch01-e4-t-math": "B*D*F/C", "ch01-e4-t-comms": "2*B*F/W_link"}))
    assert again["ch01-e4-t-math"] == first["ch01-e4-t-math"]
    assert again["ch01-e4-t-comms"]["status"] == "correct"  # a different answer is judged afresh
    assert calls == ["ch01-e4-t-math", "ch01-e4-t-comms", "ch01-e4-t-comms"]


def test_verdicts_that_depend_on_load_are_not_remembered(monkeypatch):
    from autograder.verdict import Status, Verdict

    monkeypatch.setattr(judge, "_memo", {})
    monkeypatch.setattr(autograder.checks, "judge", lambda q, a, **kw: Verdict(
        Status.INVALID, 0.0, "too_expensive", "Checking this answer took too long."))
    judge.handle(_request({"ch01-e4-t-math": "B*D*F/C"}))
    assert judge._memo == {}
