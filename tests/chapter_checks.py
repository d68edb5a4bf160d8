"""Checks every chapter's records must pass; each tests/chapters/test_chNN.py parametrises these.

For every question: the reference answer passes both the grader and the offline self-check; every
listed slip fails both, with the diagnosis the record names; book answers lie within tolerance.
"""

from __future__ import annotations

from typing import Any

from autograder import fingerprint, kinds
from autograder.checks import judge
from autograder.questions import Chapter, Function, Number, Program, Question

_PRINTS: dict[tuple[str, int], dict] = {}


def printed(q: Question) -> dict:
    """The question's self-check data, made once per question object."""
    key = (q.qid, id(q))
    if key not in _PRINTS:
        _PRINTS[key] = fingerprint.make(q)
    return _PRINTS[key]


def recorded(q: Question, answer: Any) -> Any:
    """What ``grade(qid, answer)`` would record for this answer in a student's notebook."""
    return kinds.encode(printed(q), answer)


def reference_answer(q: Question) -> Any:
    return q.solution if isinstance(q, Function | Program) else q.reference


def assert_reference_passes(chapter: Chapter, q: Question) -> None:
    answer = recorded(q, reference_answer(q))
    v = judge(q, answer)
    assert v.ok, f"{q.qid}: grader rejects the reference: {v}"
    s = kinds.selfcheck_live(printed(q), q.qid, reference_answer(q), answer)
    assert s.ok, f"{q.qid}: self-check rejects the reference: {s}"


def assert_slip_fails(chapter: Chapter, q: Question, index: int) -> None:
    slip = q.slips[index]
    answer = recorded(q, slip.answer)
    v = judge(q, answer)
    assert not v.ok and v.score < 1, f"{q.qid}: slip {slip.answer!r} passes the grader"
    assert v.diagnosis == slip.diagnosis, f"{q.qid}: slip {slip.answer!r}: grader says {v.diagnosis}: {v.message}"
    s = kinds.selfcheck_live(printed(q), q.qid, slip.answer, answer)
    assert not s.ok, f"{q.qid}: slip {slip.answer!r} passes the self-check"
    if not isinstance(q, Program):  # a program's self-check runs on other inputs than the grader's
        assert (s.diagnosis, s.message) == (v.diagnosis, v.message), \
            f"{q.qid}: self-check says {s.diagnosis}, grader {v.diagnosis}"
    if slip.hint:
        assert slip.hint in v.message and slip.hint in s.message, f"{q.qid}: hint not shown"


def assert_book_answer(q: Question, book: float) -> None:
    assert isinstance(q, Number)
    lo, hi = q.tolerance.bounds(float(q.reference))
    assert lo <= book <= hi, f"{q.qid}: book's {book} is outside [{lo}, {hi}] around {q.reference}"
