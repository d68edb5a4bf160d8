"""What a grading run says and leaves for the staff, without running a notebook: grades.csv's cells and columns,
``--student``, the summary's counts, the problems of kept results, the feedback ``nbgrader release_feedback``
cannot release, and the staff-only files git must never take into the course repository.

A run here is ``pipeline.grade`` with the stages replaced by a stub result (the stages have their own tests,
and tests/grading/test_class_review.py runs the same through real notebooks)."""

import contextlib
import csv
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from autograder import cli
from autograder.grading import factory, pipeline, results
from autograder.grading.feedback import write_atomic
from autograder.grading.pipeline import Assignment, Summary
from autograder.grading.warmup import Warming
from tests.grading.test_stages import QID, _course
from tests.paths import ROOT


def _result(student: str, assignment: str = "hw", scores: dict[str, float] | None = None,
            problems: list[str] | None = None) -> dict:
    scores = {QID: 2.0} if scores is None else scores
    return {"student": student, "assignment": assignment, "notebook": assignment, "grader": "2", "sha256": "x" * 64,
            "timestamp": None, "score": sum(scores.values()), "max_score": 2.0 * len(scores),
            "questions": {q: {"points": 2.0, "score": s, "status": "correct", "diagnosis": "", "message": "",
                              "answer_text": ""} for q, s in scores.items()},
            "problems": list(problems or []), "isolation": "", "seconds": 1.0}


def _stored(a: Assignment, result: dict) -> None:
    write_atomic(a.course_dir / ".scaling-course" / "results" / result["assignment"] / f"{result['student']}.json",
                 json.dumps(result))


# --- grades.csv ----------------------------------------------------------------------------------------------

def test_grades_csv_leaves_a_question_outside_the_rows_assignment_empty(tmp_path):
    """One row per student and assignment, one column per question of every assignment graded: a question of
    another assignment is an empty cell, never a 0 that reads as a wrong answer (and lowers a column's mean)."""
    a = Assignment(tmp_path, "ch13_example", "ch13_example", tmp_path / "m.ipynb", {},
                   {"ch13-x1": 1.0, "ch13-x2": 1.0})
    _stored(a, _result("refstu", "ch13_example", {"ch13-x1": 1.0, "ch13-x2": 0.0}))
    _stored(a, _result("refstu", "ch01_rooflines", {"ch01-e1": 0.0, "ch01-e2": 2.0}))
    for name in ("ch13_example", "ch01_rooflines"):
        (tmp_path / "submitted" / "refstu" / name).mkdir(parents=True)
    results.Grades(a).write()
    with (tmp_path / "grades.csv").open() as f:
        header = next(csv.reader(f))
        f.seek(0)
        rows = {row["assignment"]: row for row in csv.DictReader(f)}
    assert header == ["student", "assignment", "ch01-e1", "ch01-e2", "ch13-x1", "ch13-x2", "score", "max_score",
                      "status"]
    assert rows["ch13_example"]["ch01-e1"] == rows["ch13_example"]["ch01-e2"] == ""
    assert rows["ch01_rooflines"]["ch13-x1"] == rows["ch01_rooflines"]["ch13-x2"] == ""
    assert rows["ch13_example"]["ch13-x2"] == "0" and rows["ch01_rooflines"]["ch01-e1"] == "0"  # real zeros stay
    assert rows["ch13_example"]["score"] == "1" and rows["ch01_rooflines"]["score"] == "2"


def test_the_docs_say_what_grades_csv_holds():
    text = " ".join((ROOT / "docs" / "grading.md").read_text().split())
    assert "one row per student and assignment" in text
    assert "empty where the question is not in that row's assignment" in text
    assert "in chapter order" in text


# --- a run of the class --------------------------------------------------------------------------------------

class Run:
    """``pipeline.grade`` on the course of test_stages.py, each submission "graded" by a stub that notes who."""

    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
        self.a = _course(tmp_path)
        (self.a.course_dir / "nbgrader_config.py").write_text("")
        self.graded: list[str] = []
        self.kept_problems: dict[str, list[str]] = {}
        monkeypatch.setattr(factory, "shared", lambda home: contextlib.nullcontext())
        monkeypatch.setattr(pipeline, "prepare", lambda course_dir, name, late=None: self.a)
        monkeypatch.setattr(pipeline, "warm", lambda a, n: (a, Warming("")))
        monkeypatch.setattr(results, "write_result", lambda db_url, result: None)  # no gradebook here
        monkeypatch.setattr(results, "unchanged", self._unchanged)
        monkeypatch.setattr(pipeline, "grade_submission", self._grade)

    def submit(self, student: str, receipts: bool = True) -> None:
        folder = self.a.course_dir / "submitted" / student / "hw"
        folder.mkdir(parents=True)
        (folder / "hw.ipynb").write_text("{}")
        if receipts:
            (folder / "timestamp.txt").write_text("2026-12-02 10:00:00.000000 UTC")
            (folder / "submission_secret.txt").write_text(f"{student:0>32}")

    def _unchanged(self, a, student, folder):
        stored = results.stored(a, student)
        return (stored, "") if stored else (None, "")

    def _grade(self, a, student, folder, limits):
        """What the stages leave: a result, and the report with the receipts the submission had."""
        self.graded.append(student)
        report = a.course_dir / "feedback" / student / a.name
        report.mkdir(parents=True, exist_ok=True)
        (report / "hw.html").write_text("<html></html>")
        for name in ("timestamp.txt", "submission_secret.txt"):
            if (folder / name).is_file():
                shutil.copy(folder / name, report / name)
        return _result(student, problems=[f"a note on {student}'s notebook"])

    def grade(self, **kwargs) -> Summary:
        self.graded = []
        return pipeline.grade(self.a.course_dir, "hw", jobs=1, **kwargs)


def test_student_grades_only_the_named_students_and_grades_csv_keeps_everyone(tmp_path, monkeypatch):
    run = Run(tmp_path, monkeypatch)
    for student in ("ada", "bob", "cy"):
        run.submit(student)
    run.grade()
    assert sorted(run.graded) == ["ada", "bob", "cy"]
    again = run.grade(students=["bob"], force=True)  # --force regrades only the named student
    assert run.graded == ["bob"]
    assert [r["student"] for r in again.results] == ["bob"] and again.skipped == 0
    kept = run.grade(students=["bob", "cy"])  # unchanged: kept, nobody else looked at
    assert run.graded == [] and kept.skipped == 2 and {r["student"] for r in kept.results} == {"bob", "cy"}
    rows = list(csv.DictReader((run.a.course_dir / "grades.csv").open()))
    assert sorted(r["student"] for r in rows) == ["ada", "bob", "cy"]
    typo = run.grade(students=["bbo"])
    assert run.graded == [] and not typo.results
    assert "bbo" in typo.problems and "not graded" in typo.problems["bbo"][0]
    assert "submitted/bbo/hw/" in typo.problems["bbo"][0]


def test_the_cli_passes_each_student(monkeypatch, tmp_path):
    seen = {}

    def fake(course_dir, name, **kwargs):
        seen.update(kwargs)
        return Summary()

    monkeypatch.setattr(pipeline, "grade", fake)
    assert cli.main(["grade", "hw", "--course-dir", str(tmp_path), "--student", "ada", "--student", "bob",
                     "--force"]) == 0
    assert seen["students"] == ["ada", "bob"] and seen["force"] is True
    assert cli.main(["grade", "hw", "--course-dir", str(tmp_path)]) == 0
    assert seen["students"] is None  # the whole class


def test_the_docs_show_grading_one_student():
    text = (ROOT / "docs" / "grading.md").read_text()
    assert re.search(r"scaling-course grade \S+ --student \S+ --force", text)


def test_a_rerun_lists_the_problems_of_the_results_it_keeps(tmp_path, monkeypatch):
    run = Run(tmp_path, monkeypatch)
    for student in ("ada", "bob"):
        run.submit(student)
    first = run.grade()
    again = run.grade()
    assert run.graded == [] and again.skipped == 2
    assert again.problems == first.problems == {s: [f"a note on {s}'s notebook"] for s in ("ada", "bob")}


def test_the_summary_says_how_many_were_graded_and_how_many_kept(tmp_path, capsys):
    summary = Summary(results=[_result(s) for s in ("ada", "bob", "cy")], skipped=2, seconds=10.2)
    cli.print_summary(tmp_path, "hw", summary)
    out = capsys.readouterr().out
    assert "1 graded, 2 unchanged and kept, in 10 s" in out, out
    assert "Graded 3" not in out


# --- feedback nbgrader cannot release ---------------------------------------------------------------------------

def test_a_report_without_receipts_is_named_with_a_way_to_release_the_others(tmp_path, monkeypatch, capsys):
    """nbgrader release_feedback reads timestamp.txt and submission_secret.txt beside every report, and stops for
    the whole class at the first report without them (work copied into submitted/ by hand)."""
    run = Run(tmp_path, monkeypatch)
    run.submit("ada")
    run.submit("dave", receipts=False)
    run.submit("eve", receipts=False)
    summary = run.grade()
    assert len(summary.warnings) == 1, summary.warnings
    warning = summary.warnings[0]
    assert "dave" in warning and "eve" in warning and not re.search(r"\bada\b", warning), warning
    assert "nbgrader release_feedback hw --CourseDirectory.student_id_exclude=dave,eve" in warning
    assert "nbgrader submit" in warning
    again = run.grade(students=["ada"], force=True)  # the reports on disk decide, whoever this run graded
    assert again.warnings == summary.warnings
    cli.print_summary(tmp_path, "hw", again)
    assert capsys.readouterr().out.count("student_id_exclude") == 1  # once a run


def test_a_class_collected_with_nbgrader_gets_no_warning(tmp_path, monkeypatch):
    run = Run(tmp_path, monkeypatch)
    run.submit("ada")
    assert run.grade().warnings == []


def test_a_class_without_any_receipt_is_told_release_feedback_cannot_serve_it(tmp_path, monkeypatch):
    run = Run(tmp_path, monkeypatch)
    run.submit("ada", receipts=False)
    run.submit("bob", receipts=False)
    [warning] = run.grade().warnings
    assert "student_id_exclude" not in warning and "feedback/<student>/hw/" in warning


def test_the_docs_say_what_a_missing_receipt_does_to_release_feedback():
    text = " ".join((ROOT / "docs" / "grading.md").read_text().split())
    assert "for the whole class" in text and "--CourseDirectory.student_id_exclude=" in text


# --- what git must not take into the course repository ------------------------------------------------------------

# Files the docs have instructors make in the course folder, which docs/authoring.md says to commit and push:
# grades with student ids, the grading secret, and the references (a grader wheel, a Gradescope zip).
STAFF_ONLY = ["submitted/jdoe/ch01_rooflines/ch01_rooflines.ipynb", "autograded/jdoe/ch01_rooflines/x.ipynb",
              "feedback/jdoe/ch01_rooflines/ch01_rooflines.html", "gradebook.db", "grades.csv", "gradebook.csv",
              ".scaling-course/secret", ".scaling-course/results/ch01_rooflines/jdoe.json", "downloaded/x.zip",
              "exchange/cs599/inbound/x", "ch01_rooflines-gradescope.zip", "dist/grader/x.whl",
              "trial/source/run_autograder", "trial/results/results.json"]
COMMITTED = ["nbgrader_config.py", "source/ch01_rooflines/ch01_rooflines.ipynb",
             "release/ch01_rooflines/ch01_rooflines.ipynb", "course/fingerprints/ch01_rooflines.json",
             "solutions/program_traffic.json", "README.md", "docs/grading.md"]


def _documented_outputs() -> list[str]:
    """What the commands of the docs' code blocks (and the command's own examples) write into the course folder:
    ``nbgrader export --to FILE``, the zips of ``scaling-course gradescope`` (``--out``, else
    ASSIGNMENT-gradescope.zip) and the wheels of ``scaling-course dist --out DIR``."""
    docs = [p.read_text() for p in (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))]
    blocks = [b for text in docs for b in re.findall(r"^```[^\n]*\n(.*?)^```", text, re.S | re.M)]
    out = []
    for line in "\n".join([*blocks, cli.EXAMPLES]).splitlines():
        words = line.split("#")[0].split()
        for i, word in enumerate(words[:-2]):
            if not word.endswith(("nbgrader", "scaling-course")):
                continue
            to = words[words.index("--out") + 1] if "--out" in words else None
            if words[i + 1] == "export" and "--to" in words:
                out.append(words[words.index("--to") + 1])
            elif words[i + 1] == "gradescope":
                out.append(to or f"{words[i + 2]}-gradescope.zip")
            elif words[i + 1] == "dist" and to:
                out.append(to.rstrip("/") + "/scaling_course-1-py3-none-any.whl")
    return sorted(set(out))


def _ignored(tmp_path: Path, paths: list[str]) -> set[str]:
    git = shutil.which("git")
    if git is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "course"
    repo.mkdir()
    shutil.copy(ROOT / ".gitignore", repo / ".gitignore")
    env = {"HOME": str(tmp_path), "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "PATH": ""}
    subprocess.run([git, "init", "-q", str(repo)], check=True, env=env)
    out = subprocess.run([git, "-C", str(repo), "check-ignore", "--no-index", "--stdin"], input="\n".join(paths),
                         capture_output=True, text=True, env=env)
    assert out.returncode in (0, 1), out.stderr
    return set(out.stdout.splitlines())


def test_staff_only_outputs_are_ignored_by_git_and_the_course_is_not(tmp_path):
    documented = _documented_outputs()
    assert "gradebook.csv" in documented and "ch01_rooflines-gradescope.zip" in documented, documented
    ignored = _ignored(tmp_path, STAFF_ONLY + documented + COMMITTED)
    assert not set(STAFF_ONLY + documented) - ignored, sorted(set(STAFF_ONLY + documented) - ignored)
    assert not set(COMMITTED) & ignored, sorted(set(COMMITTED) & ignored)


def test_keeping_grades_csv_current_costs_a_bounded_share_of_a_run(tmp_path, monkeypatch):
    """grades.csv is rewritten whole, one row per student and assignment, one column per question of every
    assignment: late in a term (300 students, 12 chapters) one write took a second, and after every result that
    was most of a run. A write now waits until the run has spent many times its last write's cost on other work
    (a cheap table is still written after every result); the last write of a run, or of an interrupted one, always
    happens."""
    a = Assignment(tmp_path, "hw", "hw", tmp_path / "m.ipynb", {}, {QID: 2.0})
    _stored(a, _result("ada"))
    clock, written = [0.0], []

    def write_csv(path, qids, rows, missing=None, stale=None):
        written.append(clock[0])
        clock[0] += cost_of_a_write[0]

    monkeypatch.setattr(results, "write_csv", write_csv)
    monkeypatch.setattr(results.time, "monotonic", lambda: clock[0])
    for cost, most in ((1.0, 3), (0.001, 30)):
        cost_of_a_write, table = [cost], results.Grades(a)
        written.clear()
        for _ in range(30):  # a result a second
            table.write()
            clock[0] += 1.0
        assert 1 <= len(written) <= most, (cost, written)
        before = len(written)
        table.write(final=True)
        assert len(written) == before + 1


def _flagged(student: str) -> dict:
    r = _result(student, scores={QID: 0.0})
    r["questions"][QID].update(status="invalid", diagnosis="grader_error")
    return r


def test_a_run_the_grader_failed_on_says_so_in_its_status_its_last_lines_and_grades_csv(tmp_path, monkeypatch,
                                                                                         capsys):
    """A run where the grader failed (every kernel unable to start, say) ended with "120 graded", status 0 and 120
    zeros marked "graded": a scheduled job noticed nothing. Now its status is 3, its last lines count and name the
    flagged submissions, and grades.csv says "grader error" for them."""
    done = Summary(results=[_result("ada"), _flagged("bob")])
    monkeypatch.setattr(pipeline, "grade", lambda course_dir, name, **kwargs: done)
    assert cli.main(["grade", "hw", "--course-dir", str(tmp_path)]) == cli.GRADER_FAILED
    said = capsys.readouterr().out
    assert "The grader failed on part of 1 submission(s): bob" in said and "not final" in said, said
    monkeypatch.setattr(pipeline, "grade", lambda course_dir, name, **kwargs: Summary(results=[_result("ada")]))
    assert cli.main(["grade", "hw", "--course-dir", str(tmp_path)]) == 0

    a = Assignment(tmp_path, "hw", "hw", tmp_path / "m.ipynb", {}, {QID: 2.0})
    _stored(a, _result("ada"))
    _stored(a, _flagged("bob"))
    for student in ("ada", "bob"):
        (tmp_path / "submitted" / student / "hw").mkdir(parents=True)
    results.Grades(a).write(final=True)
    with (tmp_path / "grades.csv").open() as f:
        assert {row["student"]: row["status"] for row in csv.DictReader(f)} == {"ada": "graded",
                                                                                "bob": "grader error"}


def test_a_large_class_is_summed_up_by_question_not_a_column_a_student(tmp_path, capsys):
    """The demo's table (a column a student) reached 1,711 characters a line at 120 students."""
    many = Summary(results=[_result(f"s{i:03d}", scores={QID: float(i % 3)}) for i in range(120)])
    cli.print_summary(tmp_path, "hw", many)
    said = capsys.readouterr().out
    assert max(len(x) for x in said.splitlines() if str(tmp_path) not in x) <= 120, said  # but for the paths
    assert "120 students" in said and "grades.csv" in said
    line = next(x for x in said.splitlines() if x.startswith(QID))
    assert line.split()[1:4] == ["2", "1.00", "40/120"], line  # points, mean, full marks


def test_the_summary_names_the_late_penalties_its_table_leaves_out(tmp_path, capsys):
    """The table shows each question's automatic score; nbgrader's late penalty comes off the total, in grades.csv,
    the gradebook and the reports. The printed summary says so, with whom and how much."""
    late = {**_result("bob"), "gradebook": {"hand": {}, "late_penalty": 3.0, "seconds_late": 7200.0}}
    on_time = {**_result("ada"), "gradebook": {"hand": {}, "late_penalty": None, "seconds_late": None}}
    cli.print_summary(tmp_path, "hw", Summary(results=[on_time, late], seconds=1.0))
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if "late penalt" in x.lower())
    assert "bob 3 points (2.0 hours late)" in line and "ada" not in line, line
    assert "grades.csv" in line, line
    cli.print_summary(tmp_path, "hw", Summary(results=[on_time], seconds=1.0))
    assert "late penalt" not in capsys.readouterr().out.lower()
