"""What nbgrader's autograde does after it saves the grades, kept true after ours: the course's late-submission penalty
(``AssignLatePenalties`` with the plugin of ``nbgrader_config.py``), a hand grade flagged for review again when the
answer it was given for changed (``SaveAutoGrades``), and a student's report that shows the gradebook's total (hand
scores and penalty), rewritten from the gradebook by every run.

The first tests need no kernel: a result is stored as a run stores it (``results.store``) into a gradebook of the
course of test_stages.py. The last ones grade a small Chapter 1 class the way an instructor meets it
(``autograder.demo``): one student on time, one late, one with slips whose hand grade outlives a resubmission."""

import csv
import dataclasses
import re
import subprocess
from html import unescape
from pathlib import Path

import nbformat
import pytest

from autograder.grading import feedback, gradebook, results
from autograder.grading.feedback import render_html
from autograder.grading.gradebook import write_csv
from autograder.grading.pipeline import CourseError, grade, hand_grade_warning
from tests.grading.test_stages import QID, _course
from tests.paths import ROOT

CHAPTER = "ch01_rooflines"
DUE = "2024-01-10 12:00:00 UTC"
ON_TIME, LATE = "2024-01-09 10:00:00.000000 UTC", "2024-01-12 10:00:00.000000 UTC"  # LATE: 46 h after DUE


def _config(a, text: str = "") -> None:
    (a.course_dir / "nbgrader_config.py").write_text("c = get_config()  # noqa: F821\n" + text)


def _course_with(tmp_path, config: str = ""):
    """The course of test_stages.py (assignment ``hw``, one question worth 2), in the gradebook with a due date, and
    the late policy of ``config`` read as a run reads it."""
    from nbgrader.api import Gradebook

    a = _course(tmp_path)
    _config(a, config)
    with Gradebook(a.db_url) as gb:
        gb.add_assignment("hw", duedate=DUE)
        gb.add_notebook("hw", "hw")
        gb.add_grade_cell(QID, "hw", "hw", max_score=2, cell_type="code")
    return dataclasses.replace(a, late=gradebook.LatePolicy(a.course_dir))


def _autograded(a, student: str) -> None:
    """The graded notebook a run writes before it stores the result (a result without one is graded again)."""
    path = a.course_dir / "autograded" / student / a.name / f"{a.notebook}.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{}")


def _result(student="ada", score=2.0, sha="a" * 64, answer="16", timestamp=ON_TIME) -> dict:
    return {"student": student, "assignment": "hw", "notebook": "hw", "grader": "2", "sha256": sha,
            "timestamp": timestamp, "score": score, "max_score": 2.0,
            "questions": {QID: {"points": 2.0, "score": score, "status": "correct" if score else "incorrect",
                                "diagnosis": "", "message": "", "answer_text": answer}},
            "problems": [], "isolation": "", "seconds": 1.0}


def _grade(a, student="ada"):
    from nbgrader.api import Gradebook

    with Gradebook(a.db_url) as gb:
        g = gb.find_grade(QID, "hw", "hw", student)
        return g.auto_score, g.manual_score, g.needs_manual_grade


def _hand_grade(a, student: str, score: float) -> None:
    """What formgrader does when a person gives a score and approves it."""
    from nbgrader.api import Gradebook

    with Gradebook(a.db_url) as gb:
        grade = gb.find_grade(QID, "hw", "hw", student)
        grade.manual_score, grade.needs_manual_grade = score, False
        gb.db.commit()


def _penalty(a, student="ada"):
    from nbgrader.api import Gradebook

    with Gradebook(a.db_url) as gb:
        return gb.find_submission_notebook("hw", "hw", student).late_submission_penalty


# --- a hand grade is reviewed again when what it was given for changed ------------------------------------

def test_a_hand_grade_is_flagged_again_when_the_answer_changed_though_its_score_did_not(tmp_path):
    """The student resubmits another wrong answer: the automatic score stays 0, but the person's 2 points were
    given for an answer the grader no longer holds. nbgrader's autograde flags every hand grade on every run; we
    flag it where the submission graded for it changed."""
    a = _course_with(tmp_path)
    results.store(a, _result(score=0.0, answer="12"))
    _hand_grade(a, "ada", 2.0)
    results.store(a, _result(score=0.0, answer="12"))  # graded again from the same files (--force): kept
    assert _grade(a) == (0.0, 2.0, False)
    results.store(a, _result(score=0.0, sha="b" * 64, answer="12345.0"))  # resubmitted: another answer
    assert _grade(a) == (0.0, 2.0, True)


@pytest.mark.parametrize("changed", [dict(sha="b" * 64), dict(answer="13")])
def test_a_new_notebook_or_a_new_recorded_answer_alone_flags_it(tmp_path, changed):
    a = _course_with(tmp_path)
    results.store(a, _result(score=0.0, answer="12"))
    _hand_grade(a, "ada", 1.0)
    results.store(a, _result(**{"score": 0.0, "answer": "12", **changed}))
    assert _grade(a)[2] is True


def test_a_kept_result_leaves_an_approved_hand_grade_approved(tmp_path):
    """A rerun writes an unchanged submission's stored result again: nothing new was graded, so a person's approval
    stands (docs/grading.md)."""
    a = _course_with(tmp_path)
    folder = a.course_dir / "submitted" / "ada" / "hw"
    folder.mkdir(parents=True)
    (folder / "hw.ipynb").write_text("{}")
    from autograder.grading.submissions import fingerprint

    _autograded(a, "ada")
    results.store(a, {**_result(score=0.0, sha=fingerprint(folder, "hw")), "answers": a.answers, "setting": {}})
    _hand_grade(a, "ada", 2.0)
    kept, why = results.unchanged(a, "ada", folder)
    assert kept is not None and why == ""
    assert _grade(a) == (0.0, 2.0, False)


# --- nbgrader's late penalty ------------------------------------------------------------------------------

def test_the_zero_method_takes_the_whole_score_of_a_late_submission(tmp_path):
    a = _course_with(tmp_path, 'c.LateSubmissionPlugin.penalty_method = "zero"\n')
    results.store(a, _result("ada", timestamp=ON_TIME))
    results.store(a, _result("bob", timestamp=LATE))
    assert _penalty(a, "ada") is None and _penalty(a, "bob") == 2.0  # as autograde stores it
    bob = results.stored(a, "bob")
    assert bob["gradebook"]["late_penalty"] == 2.0 and bob["gradebook"]["seconds_late"] == 46 * 3600
    assert results.stored(a, "ada")["gradebook"]["late_penalty"] is None


def test_a_custom_plugin_named_in_the_config_is_called_as_nbgrader_calls_it(tmp_path):
    """``c.AssignLatePenalties.plugin_class`` names a class in the course folder (nbgrader imports it from there):
    called with the student, the notebook's score in the gradebook (hand scores included) and the seconds late; a
    penalty over the score is cut to the score, as nbgrader cuts it."""
    (tmp_path / "halfoff.py").write_text(
        "from nbgrader.plugins import LateSubmissionPlugin\n"
        "CALLS = []\n"
        "class HalfOff(LateSubmissionPlugin):\n"
        "    def late_submission_penalty(self, student_id, score, total_seconds_late):\n"
        "        CALLS.append((student_id, score, total_seconds_late))\n"
        "        return 99.0 if student_id == 'greedy' else score / 2\n")
    a = _course_with(tmp_path, 'c.AssignLatePenalties.plugin_class = "halfoff.HalfOff"\n')
    results.store(a, _result("bob", timestamp=LATE))
    results.store(a, _result("greedy", timestamp=LATE))
    results.store(a, _result("ada", timestamp=ON_TIME))
    import halfoff

    assert halfoff.CALLS == [("bob", 2.0, 46 * 3600), ("greedy", 2.0, 46 * 3600)]  # never for one on time
    assert (_penalty(a, "bob"), _penalty(a, "greedy"), _penalty(a, "ada")) == (1.0, 2.0, None)


def test_a_policy_turned_off_clears_the_penalty_on_the_next_run(tmp_path):
    a = _course_with(tmp_path, 'c.LateSubmissionPlugin.penalty_method = "zero"\n')
    results.store(a, _result("bob", timestamp=LATE))
    assert _penalty(a, "bob") == 2.0
    _config(a, "")
    a = dataclasses.replace(a, late=gradebook.LatePolicy(a.course_dir))
    results.store(a, _result("bob", timestamp=LATE))
    assert _penalty(a, "bob") is None and results.stored(a, "bob")["gradebook"]["late_penalty"] is None


def test_a_plugin_that_cannot_be_loaded_is_refused_with_the_setting_named(tmp_path):
    a = _course(tmp_path)
    _config(a, 'c.AssignLatePenalties.plugin_class = "nowhere.Plugin"\n')
    with pytest.raises(ValueError, match="AssignLatePenalties.plugin_class"):
        gradebook.LatePolicy(a.course_dir).check()
    _config(a, 'c.LateSubmissionPlugin.penalty_method = "half"\n')
    with pytest.raises(ValueError, match="penalty_method"):
        gradebook.LatePolicy(a.course_dir).check()
    (a.course_dir / "submitted").mkdir()
    with pytest.raises(CourseError, match="penalty_method"):  # the run stops before it writes anything
        grade(a.course_dir, "hw")
    assert not (a.course_dir / "gradebook.db").exists() and not (a.course_dir / ".scaling-course").exists()


def test_grades_csv_shows_the_score_after_the_penalty_and_the_penalty(tmp_path):
    late = {**_result("bob"), "gradebook": {"hand": {}, "late_penalty": 2.0, "seconds_late": 3600}}
    write_csv(tmp_path / "grades.csv", [QID], [_result("ada"), late])
    with (tmp_path / "grades.csv").open() as f:
        rows = {r["student"]: r for r in csv.DictReader(f)}
    assert rows["bob"]["score"] == "0" and rows["bob"]["late_penalty"] == "2" and rows["bob"][QID] == "2"
    assert rows["ada"]["score"] == "2" and rows["ada"]["late_penalty"] == ""


# --- the report shows the gradebook's total -----------------------------------------------------------------

def _report(questions, problems=()):
    return render_html(nbformat.v4.new_notebook(), "hw — ada", questions, list(problems))


def _h1(html: str) -> str:
    return unescape(re.search(r"<h1>(.*?)</h1>", html).group(1))


def test_the_report_is_rewritten_with_the_hand_scores_and_the_penalty(tmp_path):
    questions = _result(score=0.0)["questions"]
    path = tmp_path / "hw.html"
    path.write_text(_report(questions, ["a note"]))
    cells = path.read_text().split("<main", 1)[1]
    book = {"hand": {QID: {"score": 1.5, "review": False}}, "late_penalty": 0.5, "seconds_late": 7200}
    assert feedback.rewrite_summary(path, {**_result(score=0.0), "problems": ["a note"]}, book)
    html = path.read_text()
    assert _h1(html).startswith("hw — ada: 1 / 2")  # 1.5 by hand, less 0.5 late
    assert "graded by hand" in html and "late" in html and "a note" in html
    assert html.split("<main", 1)[1] == cells  # the notebook is as the grader wrote it
    assert feedback.rewrite_summary(path, _result(score=0.0), {"hand": {}, "late_penalty": None})
    assert _h1(path.read_text()).startswith("hw — ada: 0 / 2") and "graded by hand" not in path.read_text()


def test_a_run_writes_the_gradebook_into_the_report_of_a_kept_result(tmp_path):
    """After grading by hand, the same grading command rewrites the reports from the gradebook, regrading nothing."""
    a = _course_with(tmp_path)
    folder = a.course_dir / "submitted" / "ada" / "hw"
    folder.mkdir(parents=True)
    (folder / "hw.ipynb").write_text("{}")
    from autograder.grading.submissions import fingerprint

    result = {**_result(score=0.0, sha=fingerprint(folder, "hw")), "answers": a.answers, "setting": {}}
    report = a.course_dir / "feedback" / "ada" / "hw" / "hw.html"
    report.parent.mkdir(parents=True)
    report.write_text(_report(result["questions"]))
    _autograded(a, "ada")
    results.store(a, result)
    assert _h1(report.read_text()).endswith("0 / 2")
    _hand_grade(a, "ada", 2.0)
    results.unchanged(a, "ada", folder)
    assert _h1(report.read_text()).endswith("2 / 2") and "graded by hand" in report.read_text()
    warning = " ".join(hand_grade_warning(a))
    assert f"scaling-course grade {a.name}" in warning and "feedback/" in warning, warning


# --- a class, graded ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def flows(tmp_path_factory):
    """Three runs of one class, the gradebook and the files read after each (later runs change them)."""
    from nbgrader.api import Gradebook

    from autograder.demo import copy_course, reference_notebook, settings_of, submit, with_answers, with_slips
    from autograder.grading.pipeline import grade

    course = copy_course(ROOT, tmp_path_factory.mktemp("late"), [CHAPTER])
    with (course / "nbgrader_config.py").open("a") as f:
        f.write('\nc.LateSubmissionPlugin.penalty_method = "zero"\n')
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        gb.update_or_create_assignment(CHAPTER, duedate=DUE)
    reference = reference_notebook(ROOT, CHAPTER)
    for student, when in (("alice", ON_TIME), ("latebob", LATE)):
        submit(course, student, CHAPTER, reference)
        (course / "submitted" / student / CHAPTER / "timestamp.txt").write_text(when)
    carol = with_slips(reference, CHAPTER, setting=settings_of(CHAPTER, "carol"))
    submit(course, "carol", CHAPTER, carol)
    url, report = f"sqlite:///{course / 'gradebook.db'}", course / "feedback" / "{}" / CHAPTER / f"{CHAPTER}.html"

    def carol_grade(qid):
        with Gradebook(url) as gb:
            g = gb.find_grade(qid, CHAPTER, CHAPTER, "carol")
            return g.auto_score, g.manual_score, g.needs_manual_grade

    seen = {"first": grade(course, CHAPTER, jobs=2)}
    seen["csv"] = (course / "grades.csv").read_text()
    seen["bob_report"] = Path(str(report).format("latebob")).read_text()
    subprocess.run(["nbgrader", "export", "--to", "gradebook.csv"], cwd=course, check=True, capture_output=True)
    seen["export"] = (course / "gradebook.csv").read_text()
    carol_results = {r["student"]: r for r in seen["first"].results}["carol"]["questions"]
    qid = next(q for q, e in carol_results.items() if e["score"] == 0 and q == "ch01-e1-h100-time")
    with Gradebook(url) as gb:  # formgrader: a person gives full marks and approves
        g = gb.find_grade(qid, CHAPTER, CHAPTER, "carol")
        g.manual_score, g.needs_manual_grade = 1.0, False
        gb.db.commit()
    seen["second"] = grade(course, CHAPTER, jobs=2)  # nothing changed: every result kept
    seen["approved"] = carol_grade(qid)
    seen["carol_report_2"] = Path(str(report).format("carol")).read_text()
    resubmitted = with_answers(nbformat.read(course / "submitted" / "carol" / CHAPTER / f"{CHAPTER}.ipynb",
                                             as_version=4), {qid: 12345.0}, "another wrong answer")
    submit(course, "carol", CHAPTER, resubmitted)
    seen["third"] = grade(course, CHAPTER, jobs=2)
    seen["after_resubmission"] = carol_grade(qid)
    seen["carol_report_3"] = Path(str(report).format("carol")).read_text()
    seen["qid"] = qid
    return seen


@pytest.mark.slow
def test_a_late_submission_gets_nbgraders_penalty_everywhere(flows):
    """nbgrader export gives what plain autograde gives (penalty "zero": the whole score); grades.csv and the
    student's report show it, and the one on time keeps every point."""
    export = {r["student_id"]: r for r in csv.DictReader(flows["export"].splitlines())}
    assert float(export["latebob"]["raw_score"]) == 44 and float(export["latebob"]["late_submission_penalty"]) == 44
    assert float(export["latebob"]["score"]) == 0
    assert float(export["alice"]["late_submission_penalty"]) == 0 and float(export["alice"]["score"]) == 44
    ours = {r["student"]: r for r in csv.DictReader(flows["csv"].splitlines())}
    assert ours["latebob"]["score"] == "0" and ours["latebob"]["late_penalty"] == "44"
    assert ours["alice"]["score"] == "44" and ours["alice"]["late_penalty"] == ""
    assert _h1(flows["bob_report"]).endswith(": 0 / 44 (after a late penalty of 44)")
    assert "after the due date" in flows["bob_report"].split("<main")[0]


@pytest.mark.slow
def test_a_hand_grade_reaches_the_report_and_survives_a_run_that_keeps_everything(flows):
    assert flows["approved"] == (0.0, 1.0, False)  # kept, or regraded from the same files (a grader update)
    html = flows["carol_report_2"]
    auto = {r["student"]: r for r in flows["first"].results}["carol"]["score"]
    assert _h1(html).endswith(f"{auto + 1:g} / 44") and "graded by hand" in html


@pytest.mark.slow
def test_a_resubmission_flags_the_hand_grade_and_the_run_says_the_report_was_rewritten(flows):
    assert flows["after_resubmission"] == (0.0, 1.0, True)
    html = flows["carol_report_3"]
    assert "12345" in html and "graded by hand" in html and "review" in html.split("<main")[0]
    said = " ".join(w for w in flows["third"].warnings if "carol" in w)
    assert "carol" in said and flows["qid"] in said and "review" in said, flows["third"].warnings


def test_the_docs_say_how_reports_follow_hand_grades_and_late_penalties():
    text = " ".join((ROOT / "docs" / "grading.md").read_text().split())
    assert "graded by hand" in text and "late_penalty" in text and "penalty_method" in text
    assert "AssignLatePenalties.plugin_class" in text
