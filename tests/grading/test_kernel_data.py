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
           "uses", "exact_uses", "small", "limit", "counts", "variants_targets"}


def _whole(name: str) -> dict[str, Any]:
    return json.loads((resources.files("course") / "fingerprints" / f"{name}.json").read_text())


# Where the public format holds what the notebook gives a student, not what judges: a function's probes are its
# public cases, keyword arguments by the names the prompt gives them, so their keys are the author's (an argument
# may well be called ``counts`` or ``limit``) and their values the student's inputs.
GIVEN = frozenset({"probes"})


def _keys(value: Any, path: str) -> list[tuple[str, str]]:
    """Every key under ``value``, with where it sits (``program.mesh_choices[0]``)."""
    if isinstance(value, dict):
        return [(f"{path}.{k}", k) for k in value] + [p for k, v in value.items() for p in _keys(v, f"{path}.{k}")]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _keys(v, f"{path}[{i}]")]
    return []


def _judging(entry: dict[str, Any], path: str) -> list[str]:
    """The keys of one question's public data (or one variant's) named like a key that judges, read by the format's
    structure: a variant is an entry again, and what ``GIVEN`` names is the student's, whatever its keys."""
    found = []
    for key, value in entry.items():
        if key in JUDGING:
            found.append(f"{path}.{key}")
        if key in GIVEN:
            continue
        if key == "variants" and isinstance(value, list):
            found += [p for i, v in enumerate(value) for p in _judging(v, f"{path}.variants[{i}]")]
            continue
        found += [where for where, k in _keys(value, f"{path}.{key}") if k in JUDGING]
    return found


def _public_holds_nothing_that_judges(public: dict[str, Any]) -> None:
    clashes = [p for qid, entry in public["questions"].items() for p in _judging(entry, qid)]
    assert not clashes, (
        f"the public part holds keys named like ones that judge an answer: {', '.join(clashes)}. Where it judges, "
        "leave it out of autograder.kernel_data (PUBLIC_KEYS, public_entry); where it is public (a field of a "
        "program's spec, of an output), rename that field where autograder/kinds/ writes it, or take the name out "
        "of JUDGING here if no kind judges with it")
    assert public["public"] is True


@pytest.mark.parametrize("name", chapter_names())
def test_the_public_part_holds_nothing_that_judges(name):
    _public_holds_nothing_that_judges(public_chapter(_whole(name)))


def test_a_probe_argument_may_be_named_like_a_key_that_judges():
    """Probes are public by design: a function whose arguments are ``counts``, ``limit`` and ``tolerance`` (the
    names authoring.md's own examples use) keeps them in the public part, and the check above passes it; a key that
    judges where the format puts one is still named, with where it sits."""
    whole = _whole("ch01_rooflines")
    qid, entry = next((q, e) for q, e in whole["questions"].items() if e["kind"] == "function")
    probes = [{name: i for i, name in enumerate(sorted(JUDGING))}, {"counts": [1, 2, 3], "limit": {"at": 1}}]
    whole = {**whole, "questions": {qid: {**entry, "probes": probes}}}
    public = public_chapter(whole)
    assert public["questions"][qid]["probes"] == probes
    _public_holds_nothing_that_judges(public)
    leaked = {**public, "questions": {qid: {**public["questions"][qid], "outputs": [[{"kind": "number", "at": 1}]]}}}
    with pytest.raises(AssertionError, match=rf"{qid}\.outputs\[0\]\[0\]\.at"):
        _public_holds_nothing_that_judges(leaked)


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
