"""A grading kernel is handed the chapters' data without what judges an answer (``autograder.kernel_data``).

The attack it stops: a cell that asks the self-check about its own answers at grading time (``course.answers.verdict``
returns a verdict and prints nothing) found a number in about ten calls and a choice in as many as it has options,
the same cell pasted into every answer, scoring half of several chapters without deriving anything
(``tests/hostile/test_hostile.py`` runs it in a real grading kernel). Here: what the public part keeps is what
recording an answer reads, so every record is the same as with the whole data, and nothing in it judges."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

import pytest

from autograder import kinds, record
from autograder.kernel_data import public_chapter, write_public
from autograder.questions import chapter_names, load_chapter
from autograder.verdict import Status

# What judges an answer, by the keys the self-check data holds it under.
JUDGING = {"targets", "accept", "hints", "hint", "slips", "answer", "traffic", "at", "anchor", "branches", "tolerance",
           "uses", "small", "limit", "counts", "variants_targets"}


def _whole(name: str) -> dict[str, Any]:
    return json.loads((resources.files("course") / "fingerprints" / f"{name}.json").read_text())


def _keys(value: Any) -> set[str]:
    if isinstance(value, dict):
        return set(value) | {k for v in value.values() for k in _keys(v)}
    if isinstance(value, list):
        return {k for v in value for k in _keys(v)}
    return set()


@pytest.mark.parametrize("name", chapter_names())
def test_the_public_part_holds_nothing_that_judges(name):
    public = public_chapter(_whole(name))
    for qid, entry in public["questions"].items():
        assert not _keys(entry) & JUDGING, (qid, _keys(entry) & JUDGING)
    assert public["public"] is True


@pytest.mark.parametrize("name", chapter_names())
def test_answers_are_recorded_alike_from_the_public_part(name):
    """A number, formula and choice answer (the reference) and a function answer (the reference function) are
    encoded the same from either data, at the book's values and at every setting's; a program's spec is the same."""
    whole, public = _whole(name), public_chapter(_whole(name))
    chapter = load_chapter(name)
    for q in chapter.questions:
        full, mine = whole["questions"][q.qid], public["questions"][q.qid]
        if q.kind == "program":
            assert mine["program"] == full["program"]
            continue
        answer = q.reference
        for i in [None, *range(len(full.get("variants") or []))]:
            f = full if i is None else {**full, **full["variants"][i]}
            m = mine if i is None else {**mine, **mine["variants"][i]}
            assert kinds.encode(m, answer) == kinds.encode(f, answer), (q.qid, i)


def test_a_self_check_asked_in_a_grading_kernel_says_the_grader_judges(tmp_path, monkeypatch):
    from course import answers

    monkeypatch.setenv(record.CHAPTER_DATA_ENV, str(write_public(tmp_path / "data")))
    answers._chapter_data.cache_clear()
    try:
        chapter = load_chapter("ch01_rooflines")
        q = next(q for q in chapter.questions if q.kind == "number")
        for answer in (q.reference, 1.0):  # right or wrong: nothing to tell them apart with
            v = answers.verdict(q.qid, answer)
            assert (v.status, v.diagnosis) == (Status.INVALID, "judged_by_grader"), v.message
        answers.check(q.qid, 1.0)  # says so, and raises nothing: the grader's verdict replaces the cell's output
    finally:
        monkeypatch.delenv(record.CHAPTER_DATA_ENV)
        answers._chapter_data.cache_clear()
