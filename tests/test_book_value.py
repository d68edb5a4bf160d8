"""The book's answer typed in a setting dealt other values (variants.py): both judges say that it is the book's
answer and where the student's own values are, before any factor, "close" or slip diagnosis (which would
mislead: the student's arithmetic may be right, at the wrong values). Two of each setting's choices other than
the book's are sampled, so the test stays fast; every chapter and every setting is visited."""

from __future__ import annotations

import json

import nbformat
import pytest

from autograder import kinds, record, variants
from autograder.checks import judge
from autograder.kinds.common import diagnosed_as
from autograder.messages import phrase
from autograder.questions import chapter_names, load_chapter
from autograder.release import released
from autograder.verdict import Status
from tests.chapter_checks import recorded
from tests.paths import ROOT

SCALAR = kinds.SCALAR if hasattr(kinds, "SCALAR") else ("number", "choice", "formula")
SETTINGS = [(c, s.name) for c in chapter_names() for s in load_chapter(c).settings]


def _sampled(combos: list) -> list[int]:
    """Two choices other than the book's (the first): the second and the last."""
    return sorted({1, len(combos) - 1} - {0})


def _book_entry(base: dict) -> dict:
    return {k: v for k, v in base.items() if k not in ("setting", "variants")}


@pytest.mark.parametrize("chapter,name", SETTINGS)
def test_the_books_answer_at_other_values_is_named_so_by_both_judges(chapter, name):
    data = released(chapter)
    book_chapter = load_chapter(chapter)
    s = next(x for x in book_chapter.settings if x.name == name)
    combos = data["variants"]["settings"][name]["combos"]
    said = phrase("book_value", setting=name)
    assert f'course.setting("{name}")' in said and "book" in said
    for i in _sampled(combos):
        for q in s.questions(combos[i]):
            if q.kind not in SCALAR:
                continue
            book_q = book_chapter[q.qid]
            base = data["questions"][q.qid]
            fp = variants.merge(_book_entry(base), base["variants"][i])
            answer = recorded(q, book_q.reference)
            graded = kinds.judge(q, answer, None, book_q, name)
            checked = kinds.selfcheck(fp, q.qid, kinds.encode(fp, book_q.reference), (name, _book_entry(base)))
            assert (checked.diagnosis, checked.message) == (graded.diagnosis, graded.message), \
                f"{q.qid} choice {i}: {checked.diagnosis} / {graded.diagnosis}"
            if judge(q, answer).ok:  # the book's answer is right at these values too
                assert graded.ok
                continue
            assert graded.status is Status.INCORRECT and graded.diagnosis == "book_value", \
                f"{q.qid} choice {i}: {graded.diagnosis}: {graded.message}"
            # the book's sentence first; a simple factor or a slip's hint at the student's values may follow it
            assert graded.message == said or graded.message.startswith(said + " If you did use your own values: ")
            # the student's own answer is still right, and a slip at their values keeps its diagnosis
            assert kinds.judge(q, recorded(q, q.reference), None, book_q, name).ok
            for slip in q.slips:
                if not kinds.judge(book_q, recorded(book_q, slip.answer)).ok:
                    v = kinds.judge(q, recorded(q, slip.answer), None, book_q, name)
                    assert diagnosed_as(v.diagnosis, slip.diagnosis), f"{q.qid} choice {i}: slip {slip.answer!r}"


def test_at_the_books_values_nothing_changes():
    chapter = load_chapter("ch01_rooflines")
    for q in chapter.questions:
        if q.kind in SCALAR and chapter.setting_of(q.qid) is not None:
            name = chapter.setting_of(q.qid).name
            assert kinds.judge(q, recorded(q, q.reference), None, q, name).ok


def _student_with_other_values(chapter: str, name: str) -> str:
    data = released(chapter)
    book = data["variants"]["settings"][name]["book"]
    return next(f"s{i}" for i in range(200) if variants.dealt(data, f"s{i}")[name] != variants.ordered(
        data["variants"]["settings"][name], book))


def test_the_notebooks_check_and_the_graders_service_say_it(monkeypatch):
    """Through the doors a student and the grader use: ``course.answers.verdict`` in a kernel dealt other
    values, and the judging service's ``handle`` with the student's values."""
    from autograder.grading.judge import handle
    from course import answers, variant

    qid, name, chapter = "ch01-e3-critical-batch", "ch01-e3", "ch01_rooflines"
    student = _student_with_other_values(chapter, name)
    book = load_chapter(chapter)[qid].reference
    monkeypatch.delenv(record.GRADER_ENV, raising=False)
    monkeypatch.setattr(variant, "_state", {"student": None, "mode": "student"})
    monkeypatch.setenv(record.STUDENT_ENV, student)
    checked = answers.verdict(qid, book)
    assert checked.diagnosis == "book_value", checked.message
    setting = variants.dealt(released(chapter), student)
    reply = handle({"chapter": chapter, "course_dir": str(ROOT), "seed": None, "setting": setting,
                    "items": [{"qid": qid, "answer": json.loads(json.dumps(recorded(load_chapter(chapter)[qid],
                                                                                      book)))}]})
    assert (reply[qid]["diagnosis"], reply[qid]["message"]) == (checked.diagnosis, checked.message)
    variant.configure(variant="book")
    assert answers.verdict(qid, book).ok


def test_a_kernel_that_computed_with_other_values_is_flagged_for_the_staff(monkeypatch, capsys):
    """The record of a varied answer says which values the kernel computed with; the grader, which judges
    against the folder's student whatever the notebook did, notes for the staff a record made with others."""
    from autograder.grading.collect import collect, other_settings
    from course import answers, variant

    qid, name, chapter = "ch01-e3-critical-batch", "ch01-e3", "ch01_rooflines"
    student = _student_with_other_values(chapter, name)
    assigned = variants.dealt(released(chapter), student)
    monkeypatch.setenv(record.GRADER_ENV, "1")
    monkeypatch.setenv(record.STUDENT_ENV, student)
    monkeypatch.setattr(variant, "_state", {"student": None, "mode": "student"})

    def recorded_cell() -> dict:
        answers._display = lambda bundle: outputs.append({"output_type": "display_data", "data": bundle})
        outputs: list = []
        answers.grade(qid, 1.0)
        return {"cell_type": "code", "metadata": {"nbgrader": {"grade_id": qid}}, "outputs": outputs,
                "execution_count": 1}

    monkeypatch.setattr(answers, "_display", answers._display)
    honest = collect(nbformat.from_dict({"cells": [recorded_cell()]}), [qid])
    assert honest[qid].setting == {"name": name, "values": assigned[name]}
    assert other_settings(honest, assigned) == []
    monkeypatch.setattr(variant, "_graded", lambda: False)  # the notebook's own tampering
    variant.configure(variant="book")
    tampered = collect(nbformat.from_dict({"cells": [recorded_cell()]}), [qid])
    notes = other_settings(tampered, assigned)
    assert len(notes) == 1 and "another exercise setting than its own" in notes[0] and name in notes[0]
    assert other_settings(tampered, {}) == [], "no assigned values (variants off): nothing to compare"
