"""Write: the one process that updates nbgrader's gradebook (its sqlite is not safe for concurrent
writers), and the grades CSV. Writing is idempotent: the same result written twice leaves the same
gradebook, so a grader killed between two writes loses nothing when it runs again."""

from __future__ import annotations

import contextlib
import csv
import io
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .console import printable
from .feedback import write_atomic
from .submissions import UNREADABLE, read_time


def _storable_time(result: dict[str, Any]) -> bool:
    """Whether the gradebook reads the submission time of ``result`` as the time it means (``submissions.read_time``,
    nbgrader's own parser). One it cannot read is dropped here with the note that makes it unknown (``UNREADABLE``),
    never an error that stops the class: the worker let through only what its check takes, and the file is the
    student's."""
    if not result.get("timestamp"):
        return False
    try:
        read_time(result["timestamp"])
        return True
    except ValueError as e:
        result["timestamp"] = None
        result.setdefault("problems", []).append(f"{UNREADABLE} ({printable(str(e))[:100]})")
        return False


def unreadable_time(result: dict[str, Any]) -> bool:
    """Whether ``result``'s hand-in came with a ``timestamp.txt`` that holds no time the gradebook can read (the
    worker's note, or ``_storable_time``'s): its lateness is unknown, which is never "on time"."""
    return not result.get("timestamp") and any(isinstance(p, str) and p.startswith(UNREADABLE)
                                                 for p in result.get("problems") or [])


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
            # No timestamp.txt: the gradebook keeps the time it held, as nbgrader's autograde does (``settle`` says
            # so). One that cannot be read: no time, never an earlier hand-in's (``settle`` flags it).
            submission = gb.update_or_create_submission(result["assignment"], result["student"])
            if unreadable_time(result):
                submission.timestamp = None
        # One query for the notebook's grades, not one per question (0.2 s a notebook for Chapter 1).
        grades = {g.name: g for g in gb.find_submission_notebook(result["notebook"], result["assignment"],
                                                                  result["student"]).grades}
        for qid, q in result["questions"].items():
            grade = grades.get(qid) or gb.find_grade(qid, result["notebook"], result["assignment"], result["student"])
            moved = grade.auto_score is None or abs(grade.auto_score - q["score"]) > 1e-9
            grade.auto_score = q["score"]
            # A grader error is the course's fault, not the student's: flag it for a person. So is a score a
            # person gave (formgrader), which nbgrader keeps over the automatic one, where the automatic one
            # changed under it (``settle`` flags it too where the answer graded for it changed); a result written
            # again unchanged (a rerun keeps it) leaves the person's decision as it was, approved or not.
            hand = grade.manual_score is not None
            grade.needs_manual_grade = (q.get("diagnosis") == "grader_error"
                                        or (hand and (moved or bool(grade.needs_manual_grade))))
        gb.db.commit()


def nbgrader_config(course_dir: Path) -> Any:
    """The configuration nbgrader's commands read for ``course_dir``: ``nbgrader_config.py`` (and ``.json``) of each
    Jupyter config folder, lowest priority first, then the course folder's, which wins."""
    from jupyter_core.paths import jupyter_config_path
    from traitlets.config import Config
    from traitlets.config.loader import JSONFileConfigLoader, PyFileConfigLoader

    config = Config()
    for folder in [*reversed(jupyter_config_path()), str(course_dir)]:
        for loader, suffix in ((PyFileConfigLoader, ".py"), (JSONFileConfigLoader, ".json")):
            if (Path(folder) / (name := f"nbgrader_config{suffix}")).is_file():
                config.merge(loader(name, folder).load_config())
    return config


class LatePolicy:
    """nbgrader's late-submission policy of a course, as ``nbgrader autograde`` applies it after saving the grades (its
    ``AssignLatePenalties`` stage): the plugin that ``c.AssignLatePenalties.plugin_class`` names (by default
    ``LateSubmissionPlugin``, whose ``c.LateSubmissionPlugin.penalty_method`` is "none" or "zero"), configured from
    ``nbgrader_config``, a class named by its module found in the course folder as nbgrader finds it in its working
    folder. Loaded where first used, in the parent (``results.store``); ``check`` loads it before a run grades anything
    (``pipeline.grade``), so that a setting nbgrader could not use is a ValueError naming it. A worker, and a Gradescope
    run (no gradebook, no course folder but the config and the source), never load it."""

    def __init__(self, course_dir: Path):
        self.course_dir = Path(course_dir)
        self._plugin: Any = None

    def check(self) -> None:
        """Load the plugin now: a ValueError naming the setting where nbgrader could not use it."""
        self._plugin = self._load()

    def __getstate__(self) -> dict[str, Any]:
        return {"course_dir": self.course_dir}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.course_dir, self._plugin = state["course_dir"], None

    def _load(self) -> Any:
        from nbgrader.preprocessors import AssignLatePenalties

        config, where = nbgrader_config(self.course_dir), str(self.course_dir)
        sys.path.insert(0, where)
        try:
            try:
                stage = AssignLatePenalties(config=config)
            except Exception as e:
                raise ValueError(f"c.AssignLatePenalties.plugin_class of nbgrader_config.py cannot be loaded "
                                 f"({type(e).__name__}: {e}); name a class importable from the course folder, "
                                 "such as \"late.MyPenalty\" for a class in late.py") from None
            try:
                return stage.plugin_class(parent=stage)
            except Exception as e:
                raise ValueError(f"nbgrader's late-submission plugin cannot be set up from nbgrader_config.py "
                                 f"({type(e).__name__}: {e}); c.LateSubmissionPlugin.penalty_method is \"none\" or "
                                 "\"zero\"") from None
        finally:
            sys.path.remove(where)

    def can_penalise(self) -> bool:
        """Whether the policy can take points at all: a plugin of the course's own, or nbgrader's with a
        ``penalty_method`` other than "none"."""
        from nbgrader.plugins import LateSubmissionPlugin

        if self._plugin is None:
            self._plugin = self._load()
        return type(self._plugin) is not LateSubmissionPlugin or self._plugin.penalty_method != "none"

    def penalty(self, student: str, score: float, seconds_late: float) -> float | None:
        """The plugin's penalty, in points, for a notebook of ``score`` handed in ``seconds_late``; None: no penalty."""
        if self._plugin is None:
            self._plugin = self._load()
        return self._plugin.late_submission_penalty(student, score, seconds_late)


def _graded_from_another(before: dict[str, Any] | None, result: dict[str, Any], qid: str) -> bool:
    """Whether ``result`` graded question ``qid`` from another submission than ``before`` did: another notebook (the
    submission's hash) or another recorded answer. No earlier result: nothing says what a hand score was given for."""
    if before is None or before.get("sha256") != result.get("sha256"):
        return True
    earlier = (before.get("questions") or {}).get(qid)
    return not isinstance(earlier, dict) or earlier.get("answer_text") != result["questions"][qid].get("answer_text")


def settle(db_url: str, result: dict[str, Any], late: LatePolicy, before: dict[str, Any] | None) -> dict[str, Any]:
    """After ``write_result``, what nbgrader's autograde does after saving the grades, and what the student's report
    takes from the gradebook. A score a person gave (formgrader) for a question that ``result`` graded from another
    submission than ``before`` (the result stored earlier, or None) is flagged for review, though its automatic
    score stayed: the person saw another answer. The late penalty is set as autograde sets it, every time: none
    unless the gradebook finds the submission late (its due date, any extension), else ``late``'s penalty for the
    notebook's score in the gradebook (hand scores included), kept between 0 and that score. A hand-in whose
    ``timestamp.txt`` cannot be read (``unreadable_time``) has no time in the gradebook, so its lateness is unknown:
    where the assignment has a due date and ``late`` can take points, its grades that no person scored are flagged
    for review (nbgrader's autograde stops on such a file, for a person to look), on every run until the time can be
    read. Returns the gradebook's part of the grade (results.store keeps it with the result): {"hand": {qid:
    {"score", "review"}}, "late_penalty": points or None, "seconds_late": seconds, where a penalty was set, "time": a
    note on the submission time or None, "late_unknown": whether the lateness is unknown and flagged, "no_time": whether
    the hand-in came with no time at all (no ``timestamp.txt``: a copy by hand, ``zip_collect`` without a timestamp
    group) where a due date and the late policy could take points: counted on time, as nbgrader counts it, and said
    (``pipeline.late_unknown_warning``)}."""
    from nbgrader.api import Gradebook

    a, s = result["assignment"], result["student"]
    with warnings.catch_warnings(), Gradebook(db_url) as gb:
        warnings.simplefilter("ignore")
        notebook = gb.find_submission_notebook(result["notebook"], a, s)
        submission = gb.find_submission(a, s)
        unknown = unreadable_time(result)
        policed = submission.duedate is not None and late.can_penalise()
        flag = unknown and policed
        no_time = policed and not unknown and not result.get("timestamp") and submission.timestamp is None
        hand = {}
        for grade in notebook.grades:
            if grade.manual_score is None:
                if flag and grade.name in result["questions"]:
                    grade.needs_manual_grade = True
                continue
            if grade.name in result["questions"] and _graded_from_another(before, result, grade.name):
                grade.needs_manual_grade = True
            hand[grade.name] = {"score": grade.manual_score, "review": bool(grade.needs_manual_grade)}
        seconds, penalty = submission.total_seconds_late, None
        if seconds > 0 and (asked := late.penalty(s, notebook.score, seconds)) is not None:
            penalty = min(max(float(asked), 0.0), notebook.score)
        notebook.late_submission_penalty = penalty
        time = _time_note(result, submission.timestamp, unknown, flag)
        gb.db.commit()
    return {"hand": hand, "late_penalty": penalty, "seconds_late": seconds if penalty is not None else None,
            "time": time, "late_unknown": flag, "no_time": no_time}


def _time_note(result: dict[str, Any], held: Any, unknown: bool, flagged: bool) -> str | None:
    """What the student and the staff are told of the submission time the gradebook holds (``held``), where it is not
    the one this hand-in's ``timestamp.txt`` gave."""
    if flagged:
        return ("Whether this hand-in was late is not known, since its timestamp.txt cannot be read: no late penalty "
                "is taken, and its grades are flagged for the course staff to review")
    if unknown:
        return "The gradebook holds no submission time for this hand-in; no late penalty can apply to it"
    if held is not None and not result.get("timestamp") and result.get("sha256"):  # graded (a grader error: unread)
        return (f"No timestamp.txt came with this hand-in: the gradebook keeps the submission time it held "
                f"({held:%Y-%m-%d %H:%M:%S} UTC, an earlier hand-in's), and the late policy uses it")
    return None


def late_penalty(result: dict[str, Any]) -> float | None:
    """The late penalty the gradebook holds for ``result`` (``settle``), or None."""
    return (result.get("gradebook") or {}).get("late_penalty")


def said_of(result: dict[str, Any]) -> list[str]:
    """What a run says of ``result`` among its problems: the grader's notes, then the gradebook's on the time."""
    time = (result.get("gradebook") or {}).get("time")
    return [*(result.get("problems") or []), *([time] if time else [])]


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
STALE = "stale"  # graded against the answers before an erratum; the next run regrades it


def grader_failed(result: dict[str, Any]) -> bool:
    """Whether the grader failed on part of ``result`` (flagged for the staff, graded again on the next run)."""
    return any(isinstance(q, dict) and q.get("diagnosis") == "grader_error"
               for q in (result.get("questions") or {}).values())


def write_csv(path: Path, qids: list[str], results: list[dict[str, Any]],
              missing: list[dict[str, Any]] | None = None,
              stale: Callable[[dict[str, Any]], bool] | None = None) -> None:
    """One row per result (student and assignment), one column per question of ``qids``. A question that is not
    in the row's assignment is an empty cell: a 0 is always a score, so a column's mean is that question's.
    ``missing`` (where the gradebook's roster is known): a row for each roster student with no result of an
    assignment (``student``, ``assignment``, ``max_score``), its question cells empty, its score 0. The last
    column, ``status``, says which a row is ("graded", "grader error": its scores are not final, or "not
    submitted", or "stale": graded against answers since changed, an erratum the run regrading it had not reached
    when it stopped, per ``stale``), after the columns readers know. Where any row's submission has nbgrader's late
    penalty, a last column ``late_penalty`` gives it, and ``score`` is the score after it, as in ``nbgrader
    export``."""
    buf = io.StringIO()
    w = csv.writer(buf)
    late = any(late_penalty(r) is not None for r in results)
    w.writerow(["student", "assignment", *qids, "score", "max_score", "status", *(["late_penalty"] if late else [])])
    rows = [(r, GRADER_ERROR if grader_failed(r) else STALE if stale and stale(r) else GRADED) for r in results]
    rows += [(r, NOT_SUBMITTED) for r in missing or []]
    for r, state in sorted(rows, key=lambda row: (row[0]["assignment"], row[0]["student"])):
        questions = r.get("questions") or {}
        cells = [f"{questions[q].get('score', 0):g}" if q in questions else "" for q in qids]
        penalty = late_penalty(r)
        score = max(r.get("score", 0) - (penalty or 0), 0)
        w.writerow([r["student"], r["assignment"], *cells, f"{score:g}", f"{r['max_score']:g}", state,
                    *([] if not late else [f"{penalty:g}" if penalty is not None else ""])])
    write_atomic(path, buf.getvalue())
