"""Wrong numbers right at a classmate's values (grading/copied_values.py): which answers are found, and which
students the staff's report names. The class run that finds a copier is in test_variants_class.py."""

import json
from types import SimpleNamespace

import pytest

from autograder.grading import STATE
from autograder.grading.copied_values import KEY, MIN_ANSWERS, MIN_SETTINGS, find, report, right_elsewhere
from autograder.questions import load_chapter

CHAPTER = "ch01_rooflines"
SETTING = load_chapter(CHAPTER).setting_of("ch01-e3-critical-batch")
QID = "ch01-e3-critical-batch"


def _at(chip: str) -> float:
    return next(q.reference for q in SETTING.questions({"chip": chip}) if q.qid == QID)


def test_a_number_right_at_other_values_names_those_values():
    assert right_elsewhere(SETTING, QID, repr(_at("TPU v6e")), {"chip": "TPU v3"}) == [{"chip": "TPU v6e"}]
    assert right_elsewhere(SETTING, QID, f"{_at('TPU v6e'):.4g}", {"chip": "TPU v3"}) == [{"chip": "TPU v6e"}]


@pytest.mark.parametrize("answer", [
    pytest.param(lambda: repr(_at("TPU v3")), id="right at the student's own values"),
    pytest.param(lambda: repr(_at("TPU v5e")), id="the book's answer (public, told to the student)"),
    pytest.param(lambda: repr(_at("TPU v6e") * 1.3), id="right at no values"),
    pytest.param(lambda: "a lot", id="not a number"),
])
def test_other_answers_name_no_values(answer):
    assert right_elsewhere(SETTING, QID, answer(), {"chip": "TPU v3"}) == []


def _result(student, chip, model="a", right=()):
    """A stored result: the student's values of two settings, and its answers right at other values."""
    questions = {f"q{i}": {"points": 1, "score": 0.0, KEY: {"setting": setting, "values": values}}
                 for i, (setting, values) in enumerate(right)}
    return {"student": student, "setting": {"s1": {"chip": chip}, "s2": {"model": model}}, "questions": questions}


def _class(tmp_path, *results, gone=()):
    """The stored results, each with its submission folder but the students in ``gone``."""
    folder = tmp_path / STATE / "results" / CHAPTER
    folder.mkdir(parents=True)
    for r in results:
        (folder / f"{r['student']}.json").write_text(json.dumps(r))
        if r["student"] not in gone:
            (tmp_path / "submitted" / r["student"] / CHAPTER).mkdir(parents=True)
    return SimpleNamespace(course_dir=tmp_path, name=CHAPTER)


def test_two_answers_at_one_classmates_values_name_the_student_beside_them(tmp_path):
    copier = _result("copier", "x", "a", [("s1", [{"chip": "y"}]), ("s2", [{"model": "b"}])])
    a = _class(tmp_path, copier, _result("yuki", "y", "b"), _result("zoe", "y", "c"), _result("ann", "x", "a"))
    assert find(a) == [("copier", ("q0", "q1"), ("yuki",))]
    lines = report(a)
    assert "copier: 2 answers (q0, q1) right at the values of yuki" in lines[1]
    assert "no grade or feedback was changed" in lines[0]
    assert (tmp_path / STATE / "copies" / f"{CHAPTER}-values.csv").read_text().count("\n") == 2


def test_one_answer_or_answers_at_different_classmates_values_name_no_one(tmp_path):
    one = _result("one", "x", "a", [("s1", [{"chip": "y"}])])
    split = _result("split", "x", "a", [("s1", [{"chip": "y"}]), ("s2", [{"model": "c"}])])
    a = _class(tmp_path, one, split, _result("yuki", "y", "b"), _result("zoe", "z", "c"))
    assert MIN_ANSWERS == 2 and find(a) == [] and report(a) == []


def test_values_the_student_shares_with_a_classmate_are_no_sign(tmp_path):
    """A classmate holding the student's own values of a setting is not where an answer of it came from."""
    odd = _result("odd", "x", "a", [("s1", [{"chip": "x"}]), ("s1", [{"chip": "x"}])])
    assert find(_class(tmp_path, odd, _result("twin", "x", "b"))) == []


def test_unreadable_results_are_passed_over(tmp_path):
    a = _class(tmp_path, _result("copier", "x", "a", [("s1", [{"chip": "y"}]), ("s2", [{"model": "b"}])]),
               _result("yuki", "y", "b"))
    (tmp_path / STATE / "results" / CHAPTER / "broken.json").write_text("{")
    (tmp_path / STATE / "results" / CHAPTER / "odd.json").write_text(json.dumps({"student": "odd", "setting": 3}))
    assert [f[0] for f in find(a)] == ["copier"]


def test_answers_of_one_setting_are_one_piece_of_evidence(tmp_path):
    """A setting's answers share its inputs: one misread (the book's sequence length for the dealt one) makes two
    of them right at another choice. An honest student with that one slip was named in review."""
    slip = _result("slip", "x", "a", [("s1", [{"chip": "y"}]), ("s1", [{"chip": "y"}])])
    assert MIN_SETTINGS == 2 and find(_class(tmp_path, slip, _result("yuki", "y", "b"))) == []


def test_a_result_whose_submission_is_gone_is_neither_named_nor_a_source(tmp_path):
    """grades.csv leaves out a result whose submitted/ folder was removed (a trial, a dropped student, an id
    misspelt); the copy reports named it still, as a copier or as the classmate copied from."""
    from autograder.grading.copies import graded

    copier = _result("copier", "x", "a", [("s1", [{"chip": "y"}]), ("s2", [{"model": "b"}])])
    trial = _result("ta-check", "x", "a", [("s1", [{"chip": "y"}]), ("s2", [{"model": "b"}])])
    a = _class(tmp_path, copier, trial, _result("yuki", "y", "b"), _result("zoe", "y", "b"), gone=("ta-check", "zoe"))
    assert find(a) == [("copier", ("q0", "q1"), ("yuki",))]
    for r in (copier, trial):
        r["sha256"] = "x"
    a2 = _class(tmp_path / "cells", copier, trial, gone=("ta-check",))
    assert graded(a2) == ["copier"]
