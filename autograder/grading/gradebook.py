"""Write: the one process that updates nbgrader's gradebook (its sqlite is not safe for concurrent
writers), and the grades CSV. Writing is idempotent: the same result written twice leaves the same
gradebook, so a grader killed between two writes loses nothing when it runs again."""

from __future__ import annotations

import contextlib
import csv
import io
import warnings
from pathlib import Path
from typing import Any

from .feedback import write_atomic


def _storable_time(result: dict[str, Any]) -> bool:
    """Whether the gradebook can read the submission time: the worker let through only dates and times
    (``submissions.timestamp``), and a zone the gradebook still cannot read is dropped here, with a note,
    rather than stopping the class (the file is the student's)."""
    if not result.get("timestamp"):
        return False
    from nbgrader.utils import parse_utc

    try:
        parse_utc(result["timestamp"])
        return True
    except Exception as e:  # dateutil raises ValueError, OverflowError and more on some inputs
        result["timestamp"] = None
        result.setdefault("problems", []).append(
            f"timestamp.txt does not hold a time the gradebook can store ({type(e).__name__}): the submission "
            "time is not recorded")
        return False


def write_result(db_url: str, result: dict[str, Any]) -> None:
    from nbgrader.api import Gradebook

    if not str(result.get("assignment") or "").strip() or not str(result.get("student") or "").strip():
        raise ValueError("a result without an assignment or a student is not written to the gradebook")
    with warnings.catch_warnings(), Gradebook(db_url) as gb:
        warnings.simplefilter("ignore")  # SQLAlchemy autoflush notices from nbgrader's own queries
        gb.update_or_create_student(result["student"])
        if _storable_time(result):
            gb.update_or_create_submission(result["assignment"], result["student"], timestamp=result["timestamp"])
        else:
            gb.update_or_create_submission(result["assignment"], result["student"])
        # One query for the notebook's grades, not one per question (0.2 s a notebook for Chapter 1).
        grades = {g.name: g for g in gb.find_submission_notebook(result["notebook"], result["assignment"],
                                                                  result["student"]).grades}
        for qid, q in result["questions"].items():
            grade = grades.get(qid) or gb.find_grade(qid, result["notebook"], result["assignment"], result["student"])
            moved = grade.auto_score is None or abs(grade.auto_score - q["score"]) > 1e-9
            grade.auto_score = q["score"]
            # A grader error is the course's fault, not the student's: flag it for a person. So is a score a
            # person gave (formgrader), which nbgrader keeps over the automatic one, where the automatic one
            # changed under it; a result written again unchanged (a rerun keeps it) leaves the person's
            # decision as it was, approved or not.
            hand = grade.manual_score is not None
            grade.needs_manual_grade = (q.get("diagnosis") == "grader_error"
                                        or (hand and (moved or bool(grade.needs_manual_grade))))
        gb.db.commit()


def hand_grades(db_url: str, assignment: str) -> dict[str, list[tuple[str, float, float | None]]]:
    """Where the gradebook holds a score a person gave (formgrader) that differs from the automatic one, by
    student: (question, score by hand, automatic score). nbgrader's export uses the hand score; grades.csv
    and the run's table show the automatic one."""
    from nbgrader.api import Assignment, Grade, Gradebook, GradeCell, Student, SubmittedAssignment, SubmittedNotebook

    with warnings.catch_warnings(), Gradebook(db_url) as gb:
        warnings.simplefilter("ignore")
        rows = (gb.db.query(Student.id, GradeCell.name, Grade.manual_score, Grade.auto_score)
                .join(SubmittedAssignment, SubmittedAssignment.student_id == Student.id)
                .join(Assignment, Assignment.id == SubmittedAssignment.assignment_id)
                .join(SubmittedNotebook, SubmittedNotebook.assignment_id == SubmittedAssignment.id)
                .join(Grade, Grade.notebook_id == SubmittedNotebook.id)
                .join(GradeCell, GradeCell.id == Grade.cell_id)
                .filter(Assignment.name == assignment, Grade.manual_score.isnot(None))
                .order_by(Student.id, GradeCell.name).all())
    out: dict[str, list[tuple[str, float, float | None]]] = {}
    for student, qid, manual, auto in rows:
        if auto is None or abs(manual - auto) > 1e-9:
            out.setdefault(student, []).append((qid, manual, auto))
    return out


def roster(db_path: Path) -> list[str] | None:
    """The students of nbgrader's gradebook (``nbgrader db student add``, an LMS import, and every student a run
    graded), or None where there is no gradebook to read. Read with sqlite alone, read-only: a note for the
    staff, which no gradebook error may turn into a stopped class."""
    import sqlite3

    if not db_path.is_file():
        return None
    try:
        with contextlib.closing(sqlite3.connect(f"{db_path.resolve().as_uri()}?mode=ro", uri=True)) as db:
            return sorted(str(row[0]) for row in db.execute("SELECT id FROM student") if row[0] is not None)
    except sqlite3.Error:
        return None


GRADED, NOT_SUBMITTED, GRADER_ERROR = "graded", "not submitted", "grader error"  # grades.csv's status column


def grader_failed(result: dict[str, Any]) -> bool:
    """Whether the grader failed on part of ``result`` (flagged for the staff, graded again on the next run)."""
    return any(isinstance(q, dict) and q.get("diagnosis") == "grader_error"
               for q in (result.get("questions") or {}).values())


def write_csv(path: Path, qids: list[str], results: list[dict[str, Any]],
              missing: list[dict[str, Any]] | None = None) -> None:
    """One row per result (student and assignment), one column per question of ``qids``. A question that is not
    in the row's assignment is an empty cell: a 0 is always a score, so a column's mean is that question's.
    ``missing`` (where the gradebook's roster is known): a row for each roster student with no result of an
    assignment (``student``, ``assignment``, ``max_score``), its question cells empty, its score 0. The last
    column, ``status``, says which a row is ("graded", "grader error": its scores are not final, or "not
    submitted"), after the columns readers know."""
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["student", "assignment", *qids, "score", "max_score", "status"])
    rows = [(r, GRADER_ERROR if grader_failed(r) else GRADED) for r in results]
    rows += [(r, NOT_SUBMITTED) for r in missing or []]
    for r, state in sorted(rows, key=lambda row: (row[0]["assignment"], row[0]["student"])):
        questions = r.get("questions") or {}
        cells = [f"{questions[q].get('score', 0):g}" if q in questions else "" for q in qids]
        w.writerow([r["student"], r["assignment"], *cells, f"{r.get('score', 0):g}", f"{r['max_score']:g}", state])
    write_atomic(path, buf.getvalue())
