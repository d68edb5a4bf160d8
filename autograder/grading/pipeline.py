"""``scaling-course grade``: grade every submission of an assignment, in parallel, resumably.

Stages, in order (each a module of this package):

    sanitize  -> rebuild the notebook from the master and the student's cells   (sanitize.py)
    execute   -> run it in a fresh jailed kernel with limits                     (execute.py)
    collect   -> read each test cell's answer record                              (collect.py)
    judge     -> compare with the references in a bounded subprocess              (judge.py)
    annotate  -> verdicts into the notebook; autograded/ and feedback/ files      (feedback.py)
    write     -> gradebook and grades.csv, by the parent process alone            (gradebook.py)

Ordering: sanitize must come before execute (pre-filled outputs would pass for records); judge
only ever sees collect's data, never the kernel. Workers run the first five stages; the parent
alone writes the gradebook, so sqlite never sees two writers.

Crash safety: a worker's files are written atomically; the parent records each result under
``.scaling-course/results/`` only after the gradebook has it. On a rerun, a submission whose file
hash matches its stored result is not regraded (unless ``force``), and every stored result is
written to the gradebook again, which is idempotent. So a kill at any moment loses no grade and
duplicates none.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import nbformat

from ..verdict import Status
from .collect import NO_ANSWER, Collected, collect
from .execute import Limits, execute
from .feedback import annotate, render_html, write_atomic
from .gradebook import write_csv, write_result
from .jail import isolation_paths
from .judge import judge_answers
from .sanitize import release_stubs, sanitize

GRADER_VERSION = "1"
STATE = ".scaling-course"


class CourseError(Exception):
    """The course directory cannot be graded as it is; the message says what to fix."""


@dataclass(frozen=True)
class Assignment:
    course_dir: Path
    name: str
    notebook: str  # notebook name without .ipynb
    master: Path  # source notebook
    stubs: dict[str, str]
    questions: dict[str, float]  # qid -> points, in notebook order

    @property
    def db_url(self) -> str:
        return f"sqlite:///{self.course_dir / 'gradebook.db'}"


@dataclass
class Summary:
    results: list[dict[str, Any]] = field(default_factory=list)
    skipped: int = 0
    problems: dict[str, list[str]] = field(default_factory=dict)
    seconds: float = 0.0


def prepare(course_dir: Path, name: str) -> Assignment:
    """Check the course directory and register the assignment in the gradebook (creating it)."""
    course_dir = course_dir.resolve()
    if not (course_dir / "nbgrader_config.py").exists():
        raise CourseError(f"{course_dir} is not a course directory: it has no nbgrader_config.py. "
                          "Run from the course root or pass --course-dir.")
    source = course_dir / "source" / name
    notebooks = sorted(source.glob("*.ipynb")) if source.is_dir() else []
    if not notebooks:
        known = sorted(p.name for p in (course_dir / "source").glob("*") if p.is_dir())
        raise CourseError(f"no source notebook for {name!r} under {source}. Assignments: {', '.join(known) or 'none'}")
    if len(notebooks) > 1:
        raise CourseError(f"source/{name}/ holds {len(notebooks)} notebooks; the course uses one per chapter")
    if not (course_dir / "submitted").is_dir():
        raise CourseError(f"nothing to grade: {course_dir / 'submitted'} does not exist "
                          "(collect submissions into submitted/<student>/<assignment>/ first)")
    from ..release import generate

    staged = course_dir / STATE / "release"
    generate(course_dir, name, database=True, release_dir=staged)
    release_nb = nbformat.read(staged / name / notebooks[0].name, as_version=4)
    master = nbformat.read(notebooks[0], as_version=4)
    points = {}
    for cell in master.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("grade") and not meta.get("solution") and cell.cell_type == "code":
            points[meta["grade_id"]] = float(meta.get("points", 0))
    return Assignment(course_dir, name, notebooks[0].stem, notebooks[0], release_stubs(release_nb), points)


def submissions(a: Assignment) -> list[tuple[str, Path]]:
    """(student, submission folder) for every submitted/<student>/<assignment>/."""
    out = []
    for student_dir in sorted((a.course_dir / "submitted").iterdir()):
        folder = student_dir / a.name
        if student_dir.is_dir() and not student_dir.name.startswith(".") and folder.is_dir():
            out.append((student_dir.name, folder))
    return out


def _fingerprint(folder: Path, notebook: str) -> str:
    h = hashlib.sha256(GRADER_VERSION.encode())
    path = folder / f"{notebook}.ipynb"
    if path.is_file():
        with path.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    else:
        h.update(b"missing")
    return h.hexdigest()


def grade_submission(a: Assignment, student: str, folder: Path, limits: Limits) -> dict[str, Any]:
    """Sanitize, execute, collect, judge and annotate one submission (runs in a worker)."""
    started = time.monotonic()
    path = folder / f"{a.notebook}.ipynb"
    problems: list[str] = []
    if not path.is_file():
        found = sorted(p.name for p in folder.glob("*.ipynb"))
        if len(found) == 1:
            problems.append(f"graded {found[0]}, expected {a.notebook}.ipynb (renamed?)")
            path = folder / found[0]
        else:
            problems.append(f"no {a.notebook}.ipynb in the submission" + (f" (found {', '.join(found)})" if found
                                                                          else ""))
    master = nbformat.read(a.master, as_version=4)
    clean = sanitize(master, a.stubs, path)
    problems += clean.problems
    work = a.course_dir / STATE / "work" / f"{student}-{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    _copy_supporting_files(a, work)
    deny, allow = isolation_paths(a.course_dir)
    log = a.course_dir / STATE / "logs" / a.name / f"{student}.log"
    run = execute(clean.notebook, work, deny, allow, limits, log)
    problems += run.problems
    recorded = collect(run.notebook, list(a.questions))
    answers = {q: c.answer for q, c in recorded.items() if c.answer is not NO_ANSWER}
    verdicts = judge_answers(a.name, a.course_dir, answers)
    questions = {}
    for qid, points in a.questions.items():
        v = verdicts.get(qid)
        c = recorded[qid]
        if v is None:
            status, score, diagnosis, message = str(Status.INVALID), 0.0, "no_record", f"No answer: {c.reason}."
        else:
            status, score, diagnosis, message = str(v.status), v.score * points, v.diagnosis, v.message
        questions[qid] = {"points": points, "score": round(score, 6), "status": status, "diagnosis": diagnosis,
                          "message": message, "answer_text": _answer_text(c)}
    annotate(run.notebook, questions)
    graded_nb = a.course_dir / "autograded" / student / a.name / f"{a.notebook}.ipynb"
    write_atomic(graded_nb, nbformat.writes(run.notebook))
    html = render_html(run.notebook, f"{a.name} — {student}", questions, problems)
    write_atomic(a.course_dir / "feedback" / student / a.name / f"{a.notebook}.html", html)
    shutil.rmtree(work, ignore_errors=True)
    return {"student": student, "assignment": a.name, "notebook": a.notebook, "grader": GRADER_VERSION,
            "sha256": _fingerprint(folder, a.notebook), "timestamp": _timestamp(folder),
            "questions": questions, "score": round(sum(q["score"] for q in questions.values()), 6),
            "max_score": sum(a.questions.values()), "problems": problems, "isolation": run.isolation,
            "seconds": round(time.monotonic() - started, 2)}


def _answer_text(c: Collected) -> str:
    """The student's answer as feedback shows it."""
    if c.answer is NO_ANSWER:
        return ""
    if c.kind == "program":
        return "(your compiled program)" if isinstance(c.answer, str) else json.dumps(c.answer)[:200]
    text = c.answer if isinstance(c.answer, str) else json.dumps(c.answer)
    return text if len(text) <= 200 else text[:200] + "…"


def _timestamp(folder: Path) -> str | None:
    path = folder / "timestamp.txt"
    try:
        return path.read_text().strip()[:64] or None
    except OSError:
        return None


def _copy_supporting_files(a: Assignment, work: Path) -> None:
    work.mkdir(parents=True, exist_ok=True)
    for f in a.master.parent.iterdir():
        if f.is_file() and f.suffix != ".ipynb":
            shutil.copy(f, work / f.name)


def _worker(args: tuple[Assignment, str, Path, Limits]) -> dict[str, Any]:
    a, student, folder, limits = args
    try:
        return grade_submission(a, student, folder, limits)
    except Exception as e:  # one broken submission must never stop the class
        zero = {q: {"points": p, "score": 0.0, "status": str(Status.INVALID), "diagnosis": "grader_error",
                    "message": f"The grader failed on this submission ({type(e).__name__}: {e}); "
                               "it is flagged for the course staff.", "answer_text": ""}
                for q, p in a.questions.items()}
        return {"student": student, "assignment": a.name, "notebook": a.notebook, "grader": GRADER_VERSION,
                "sha256": "", "timestamp": None, "questions": zero, "score": 0.0,
                "max_score": sum(a.questions.values()), "problems": [f"grader error: {type(e).__name__}: {e}"],
                "isolation": "", "seconds": 0.0}


def _results_dir(a: Assignment) -> Path:
    return a.course_dir / STATE / "results" / a.name


def _stored(a: Assignment, student: str) -> dict[str, Any] | None:
    try:
        return json.loads((_results_dir(a) / f"{student}.json").read_text())
    except (OSError, ValueError):
        return None


DEFAULT_LIMITS = Limits()


def grade(course_dir: Path, name: str, jobs: int | None = None, force: bool = False,
          limits: Limits = DEFAULT_LIMITS, progress: Callable[[str], None] = print) -> Summary:
    """Grade the assignment ``name`` for every submitted student; see the module docstring."""
    started = time.monotonic()
    a = prepare(course_dir, name)
    todo, summary = [], Summary()
    for student, folder in submissions(a):
        stored = _stored(a, student)
        if not force and stored and stored.get("sha256") == _fingerprint(folder, a.notebook):
            write_result(a.db_url, stored)  # idempotent: repairs a gradebook that missed it
            summary.results.append(stored)
            summary.skipped += 1
        else:
            todo.append((a, student, folder, limits))
    jobs = max(1, jobs or os.cpu_count() or 1)
    total = len(todo)
    if summary.skipped:
        progress(f"{summary.skipped} submission(s) unchanged since they were graded: kept")

    def finish(result: dict[str, Any], done: int) -> None:
        write_result(a.db_url, result)
        write_atomic(_results_dir(a) / f"{result['student']}.json", json.dumps(result, indent=1))
        summary.results.append(result)
        if result["problems"]:
            summary.problems[result["student"]] = result["problems"]
        elapsed = time.monotonic() - started
        eta = elapsed / done * (total - done)
        progress(f"[{done}/{total}] {result['student']}: {result['score']:g}/{result['max_score']:g} "
                 f"({result['seconds']:.1f} s; about {eta:.0f} s left)")

    if jobs == 1 or total <= 1:
        for i, job in enumerate(todo, 1):
            finish(_worker(job), i)
    else:
        with ProcessPoolExecutor(max_workers=min(jobs, total), mp_context=get_context("spawn")) as pool:
            futures = [pool.submit(_worker, job) for job in todo]
            for i, fut in enumerate(as_completed(futures), 1):
                finish(fut.result(), i)
    everything = [r for p in (a.course_dir / STATE / "results").glob("*/*.json")
                  if (r := _load(p)) is not None]
    qids = _ordered_qids(everything, a)
    write_csv(a.course_dir / "grades.csv", qids, everything)
    summary.seconds = time.monotonic() - started
    return summary


def _load(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _ordered_qids(results: list[dict[str, Any]], a: Assignment) -> list[str]:
    qids = list(a.questions)
    for r in sorted(results, key=lambda r: r["assignment"]):
        qids += [q for q in r["questions"] if q not in qids]
    return sorted(qids, key=lambda q: (q.split("-", 1)[0], qids.index(q)))

