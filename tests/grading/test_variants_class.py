"""A class graded with per-student variants (autograder/variants.py): two honest students with different
values both score full marks; a student who copies a classmate's numbers, and one whose notebook claims the
classmate's id, score only where their own values give the same answers; reruns and ``force`` keep
everyone's values."""

import csv
import json

import nbformat
import pytest

from autograder.checks import judge
from autograder.demo import copy_course, reference_notebook, submit, with_answers
from autograder.grading import STATE
from autograder.grading.copied_values import KEY as RIGHT_AT
from autograder.grading.copied_values import MIN_ANSWERS
from autograder.grading.pipeline import grade
from autograder.questions import load_chapter
from autograder.release import released
from autograder.variants import dealt
from tests.chapter_checks import recorded
from tests.paths import ROOT

CHAPTER = "ch01_rooflines"
HONEST = ("ada", "grace")
pytestmark = pytest.mark.slow
# Claims to be ada everywhere a notebook could: the environment, course.setup, the notebook's metadata.
CLAIM = ('import os\nos.environ["SCALING_COURSE_STUDENT"] = "ada"\nos.environ["JUPYTERHUB_USER"] = "ada"\n'
         'course.setup(student="ada")\n')


def _mine(student: str):
    return load_chapter(CHAPTER).variant(dealt(released(CHAPTER), student))


def _claiming(nb):
    """The notebook with a cell of the student's own, right after the setup cell and before any setting
    cell, that claims to be ada; and ada's id in the notebook's metadata."""
    nb = nbformat.from_dict(json.loads(json.dumps(nb)))
    setup = next(i for i, c in enumerate(nb.cells) if c.get("metadata", {}).get("nbgrader", {}).get("grade_id")
                 == "setup")
    nb.cells.insert(setup + 1, nbformat.v4.new_code_cell(CLAIM))
    nb.metadata["scaling_course"] = {"student": "ada", "seed": "0"}
    return nb


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    course = copy_course(ROOT, tmp_path_factory.mktemp("course"))
    reference = reference_notebook(ROOT, CHAPTER)
    adas = {q.qid: q.reference for q in _mine("ada").questions if q.kind == "number"}
    notebooks = {"ada": reference, "grace": reference,
                 "copier": with_answers(reference, adas, "ada's number"), "mallory": _claiming(reference)}
    for student, nb in notebooks.items():
        submit(course, student, CHAPTER, nb)
    summary = grade(course, CHAPTER, jobs=2)
    return course, {r["student"]: r for r in summary.results}


def test_honest_students_get_other_values_and_full_marks(graded):
    _, results = graded
    assert results["ada"]["setting"] != results["grace"]["setting"]
    for student in HONEST:
        assert results[student]["setting"] == dealt(released(CHAPTER), student)
        assert results[student]["score"] == results[student]["max_score"], results[student]["questions"]


def _score_with_adas_answers(student: str, qid: str) -> float:
    """What ada's right answer to ``qid`` earns on ``student``'s own record of it."""
    q, adas = _mine(student)[qid], _mine("ada")[qid]
    if q.kind in ("function",):
        return q.points  # the same function for everyone
    if q.kind == "program":
        return q.points if q.spec == adas.spec else 0.0
    return q.points * judge(q, recorded(q, adas.reference)).score


@pytest.mark.parametrize("student", ["copier", "mallory"])
def test_a_classmates_numbers_score_only_where_the_values_agree(graded, student):
    _, results = graded
    result = results[student]
    assert result["setting"] == dealt(released(CHAPTER), student), "values from the folder, not the notebook"
    mine, chapter = _mine(student), load_chapter(CHAPTER)
    lost = 0
    for qid, entry in result["questions"].items():
        if student == "copier" and mine[qid].kind != "number":
            expected = mine[qid].points  # the copier typed ada's numbers only, and ran the other cells on their values
        else:
            expected = _score_with_adas_answers(student, qid)
        assert entry["score"] == pytest.approx(expected), f"{student} {qid}: {entry}"
        lost += chapter.setting_of(qid) is not None and expected < mine[qid].points
    assert lost >= 5, "most varied answers differ between the two students"
    assert result["score"] < result["max_score"]


def test_feedback_shows_the_students_own_values(graded):
    path, results = graded
    html = (path / "feedback" / "grace" / CHAPTER / f"{CHAPTER}.html").read_text()
    assert "Your setting (the values your answers were graded with)" in html
    chip = results["grace"]["setting"]["ch01-e3"]["chip"]
    assert f"ch01-e3: chip = {chip}" in html
    autograded = nbformat.read(path / "autograded" / "grace" / CHAPTER / f"{CHAPTER}.ipynb", as_version=4)
    shown = next(c for c in autograded.cells if c.source == 'e3 = course.setting("ch01-e3")')
    assert f"chip = {chip}  (dealt to grace)" in shown.outputs[0]["data"]["text/plain"]  # shown with its values


def test_reruns_and_force_keep_everyones_values(graded):
    path, results = graded
    again = {r["student"]: r for r in grade(path, CHAPTER, jobs=2).results}
    forced = {r["student"]: r for r in grade(path, CHAPTER, jobs=2, force=True).results}
    for student, r in results.items():
        assert again[student]["setting"] == forced[student]["setting"] == r["setting"]
        assert again[student]["score"] == forced[student]["score"] == r["score"]


def test_numbers_typed_from_a_classmate_are_named_for_the_staff(graded):
    """The copier typed ada's numbers: each is wrong at the copier's values and right at ada's, which the
    staff's report of copied values says (grading/copied_values.py). Honest students are not named."""
    path, results = graded
    rows = {r["student"]: r for r in csv.DictReader((path / STATE / "copies" / f"{CHAPTER}-values.csv").open())}
    assert "copier" in rows, rows
    assert "ada" in rows["copier"]["classmates_holding_those_values"].split("; ")
    assert len(rows["copier"]["answers_right_at_other_values"].split("; ")) >= MIN_ANSWERS
    assert not set(rows) & set(HONEST)
    flagged = [qid for qid, e in results["copier"]["questions"].items() if RIGHT_AT in e]
    assert flagged and all(results["copier"]["questions"][q]["score"] < results["copier"]["questions"][q]["points"]
                           for q in flagged)
    assert not any(RIGHT_AT in e for s in HONEST for e in results[s]["questions"].values())
    html = (path / "feedback" / "copier" / CHAPTER / f"{CHAPTER}.html").read_text()
    assert "classmate" not in html and RIGHT_AT not in html, "a note for the staff, never the student's feedback"
