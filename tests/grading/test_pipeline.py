"""A small class graded end to end: scores, gradebook, CSV, feedback, isolation, tampering, reruns.

One grading run (module fixture) serves every test: six submissions of Chapter 1 (the reference, a
partly wrong one, an untouched release copy, two hostile ones and an unreadable file).
"""

import csv
import json
import re
import shutil
from html import escape
from pathlib import Path

import nbformat
import pytest

from autograder.demo import filled_notebook, with_slips
from autograder.grading.jail import landlock_abi
from autograder.grading.pipeline import CourseError, grade
from autograder.questions import Formula, load_chapter
from tests.grading.tamper_cell import PATCH_ONLY, TAMPER

ROOT = Path(__file__).resolve().parents[2]
CHAPTER = "ch01_rooflines"
pytestmark = pytest.mark.slow


def _prepend(nb, code: str):
    nb = nbformat.from_dict(json.loads(json.dumps(nb)))
    first = next(c for c in nb.cells if c.get("metadata", {}).get("nbgrader", {}).get("solution"))
    first.source = code + "\n" + first.source
    return nb


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    course = tmp_path_factory.mktemp("course")
    shutil.copy(ROOT / "nbgrader_config.py", course)
    shutil.copytree(ROOT / "source", course / "source")
    release_nb = nbformat.read(ROOT / "release" / CHAPTER / f"{CHAPTER}.ipynb", as_version=4)
    source_nb = nbformat.read(ROOT / "source" / CHAPTER / f"{CHAPTER}.ipynb", as_version=4)
    reference = filled_notebook(release_nb, source_nb)
    partly = with_slips(reference, CHAPTER)
    tamper = TAMPER if landlock_abi() >= 6 else TAMPER.replace("os.kill(os.getppid(), signal.SIGKILL)", "pass")
    notebooks = {"reference": reference, "partly-wrong": partly, "untouched": release_nb,
                 "tamper-fake": _prepend(with_slips(reference, CHAPTER, every=1), tamper),
                 "tamper-patch": _prepend(partly, PATCH_ONLY)}
    for student, nb in notebooks.items():
        folder = course / "submitted" / student / CHAPTER
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / f"{CHAPTER}.ipynb")
    broken = course / "submitted" / "broken-json" / CHAPTER
    broken.mkdir(parents=True)
    (broken / f"{CHAPTER}.ipynb").write_text('{"cells": [ this is not json')
    summary = grade(course, CHAPTER, jobs=2)
    return course, {r["student"]: r for r in summary.results}, summary


def test_scores(course):
    _, results, _ = course
    total = load_chapter(CHAPTER).total_points
    assert results["reference"]["score"] == total
    assert results["untouched"]["score"] == 0
    assert 0 < results["partly-wrong"]["score"] < total
    assert results["broken-json"]["score"] == 0
    assert any("cannot be read" in p for p in results["broken-json"]["problems"])


def test_feedback_shows_the_students_plots(course):
    path, _, _ = course
    source = nbformat.read(ROOT / "source" / CHAPTER / f"{CHAPTER}.ipynb", as_version=4)
    plotting = sum("plots." in c.source for c in source.cells if c.cell_type == "code")
    assert plotting >= 2
    html = (path / "feedback" / "reference" / CHAPTER / f"{CHAPTER}.html").read_text()
    assert html.count("src='data:image/png;base64,") >= plotting - 1  # the measured roofline is NaN here


def test_monkeypatching_cannot_raise_a_score(course):
    _, results, _ = course
    assert results["tamper-fake"]["score"] == 0
    assert results["tamper-patch"]["score"] == results["partly-wrong"]["score"]
    for qid, q in results["tamper-patch"]["questions"].items():
        assert q["score"] == results["partly-wrong"]["questions"][qid]["score"], qid


@pytest.mark.skipif(landlock_abi() == 0, reason="no Landlock on this kernel: isolation is limits only")
def test_kernel_cannot_read_solutions_or_signal_the_grader(course):
    path, _, _ = course
    graded = nbformat.read(path / "autograded" / "tamper-fake" / CHAPTER / f"{CHAPTER}.ipynb", as_version=4)
    nb = "".join(o.get("text", "") for c in graded.cells if c.cell_type == "code" for o in c.outputs)
    assert "TAMPER: blocked ch01_rooflines.py PermissionError" in nb
    assert "TAMPER: blocked ch01_rooflines.ipynb PermissionError" in nb
    assert "TAMPER: read" not in nb
    if landlock_abi() >= 6:
        assert "TAMPER: blocked signal" in nb


def test_gradebook_and_csv(course):
    from nbgrader.api import Gradebook

    path, results, _ = course
    with Gradebook(f"sqlite:///{path / 'gradebook.db'}") as gb:
        for student, r in results.items():
            sub = gb.find_submission(CHAPTER, student)
            assert sub.score == pytest.approx(r["score"]), student
    rows = {row["student"]: row for row in csv.DictReader((path / "grades.csv").open())}
    assert set(rows) == set(results)
    assert float(rows["reference"]["score"]) == results["reference"]["max_score"]
    assert float(rows["partly-wrong"]["ch01-e3-critical-batch"]) == results["partly-wrong"]["questions"][
        "ch01-e3-critical-batch"]["score"]


def _grader_text(path: Path, student: str) -> str:
    """What the grader wrote for a student: the feedback summary and the verdicts in test cells
    (the rest of the report is the student's own notebook, release text included)."""
    html = (path / "feedback" / student / CHAPTER / f"{CHAPTER}.html").read_text()
    summary = re.search(r"<section id='scaling-course-summary'.*?</section>", html, re.S).group(0)
    graded = nbformat.read(path / "autograded" / student / CHAPTER / f"{CHAPTER}.ipynb", as_version=4)
    verdicts = [o.get("text", "") for c in graded.cells if c.get("metadata", {}).get("nbgrader", {}).get("grade")
                for o in c.get("outputs", [])]
    return summary + "\n".join(verdicts)


def test_feedback_leaks_no_reference_or_hidden_test(course):
    from autograder.formula import parse_formula

    path, results, _ = course
    chapter = load_chapter(CHAPTER)
    for student in ("partly-wrong", "untouched", "tamper-fake"):
        html = (path / "feedback" / student / CHAPTER / f"{CHAPTER}.html").read_text()
        assert not re.search(r"(?<!\w)grade\(", html) and "HIDDEN" not in html  # the tamperer's fake_grade may show
        text = _grader_text(path, student)
        for q in results[student]["questions"].values():  # the student's own answers may repeat a reference
            if q["answer_text"]:
                text = text.replace(escape(q["answer_text"], quote=False), "").replace(q["answer_text"], "")
        for option in (o for q in chapter.questions for o in getattr(q, "options", ())):
            text = text.replace(option, "")  # choice options are public
        for q in chapter.questions:
            if isinstance(q, Formula):
                ref = parse_formula(q.reference, q.names).text
                assert len(ref) < 6 or ref not in text, f"{q.qid}: reference {ref} in {student}'s feedback"
            elif isinstance(getattr(q, "reference", None), float | int):
                for digits in (3, 4, 6):
                    token = f"{float(q.reference):.{digits}g}"
                    found = re.search(rf"(?<![\d.]){re.escape(token)}(?!\d)", text)
                    assert len(token) <= 2 or not found, f"{q.qid}: reference {token} in {student}'s feedback"


def test_rerun_keeps_unchanged_submissions(course):
    path, results, _ = course
    again = grade(path, CHAPTER, jobs=2)
    assert again.skipped == len(results)
    assert {r["student"]: r["score"] for r in again.results} == {s: r["score"] for s, r in results.items()}


def test_broken_course_directory_is_explained(tmp_path):
    with pytest.raises(CourseError, match="nbgrader_config.py"):
        grade(tmp_path, CHAPTER)
    shutil.copy(ROOT / "nbgrader_config.py", tmp_path)
    with pytest.raises(CourseError, match="no source notebook"):
        grade(tmp_path, CHAPTER)
