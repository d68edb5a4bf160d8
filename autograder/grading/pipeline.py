"""``scaling-course grade``: grade every submission of an assignment, in parallel, resumably.

Stages, in order (each a module of this package):

    warm      -> the reference fills a read-only compilation cache, once, alongside (warmup.py)
    sanitize  -> rebuild the notebook from the master and the student's cells   (sanitize.py)
    execute   -> run it in a fresh jailed kernel with limits                     (execute.py)
    collect   -> read each test cell's answer record                              (collect.py)
    judge     -> compare with the references in a bounded subprocess              (judge.py)
    annotate  -> verdicts into the notebook; autograded/ and feedback/ files      (feedback.py)
    write     -> gradebook and grades.csv, by the parent process alone            (gradebook.py)

Ordering: sanitize must come before execute (pre-filled outputs would pass for records); judge
only ever sees collect's data, never the kernel. Execute and judge share the submission's grading
seed (seeds.py): the kernel calls a function answer on the cases drawn from it, the judge draws them
again. A thread of the parent warms the cache while workers run the next five stages; the parent alone
writes the gradebook, so sqlite never sees two writers.

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat

from ..record import DRAWN_ENV
from ..verdict import Status
from .collect import NO_ANSWER, Collected, collect
from .execute import KILL_GRACE_SECONDS, ZYGOTE_START_SECONDS, Limits, execute
from .feedback import annotate, render_html, write_atomic
from .gradebook import write_csv, write_result
from .jail import isolation_paths
from .judge import BATCH_SECONDS, judge_answers
from .progress import Progress
from .runners import run_dask, run_local, run_serial
from .sanitize import MAX_NOTEBOOK_BYTES, release_stubs, sanitize
from .seeds import drawn_cases, secret, submission_seed, write_cases
from .warmup import ENV, Warming, ready_cache, warm

GRADER_VERSION = "2"  # 2: function answers judged on cases drawn per submission; kernels in private namespaces
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
    jax_cache: Path | None = None  # compiled programs of the reference run, read-only to kernels (warmup.py)

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

    secret(course_dir)  # made here, once, before any worker needs it
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
    """Hash of everything submitted (a renamed notebook or a zip counts too) and the grader version."""
    h = hashlib.sha256(f"{GRADER_VERSION}|{notebook}".encode())
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()):
        h.update(str(path.relative_to(folder)).encode() + b"\0")
        with path.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def find_notebook(folder: Path, notebook: str, work: Path) -> tuple[Path | None, list[str]]:
    """The submitted notebook: by its name; else the only notebook in the folder (renamed or moved);
    else the only notebook inside a zip (an LMS download), extracted safely into ``work``."""
    path = folder / f"{notebook}.ipynb"
    if path.is_file() and not path.is_symlink():
        return path, []
    found = [p for p in sorted(folder.rglob("*.ipynb")) if ".ipynb_checkpoints" not in p.parts and
             p.is_file() and not p.is_symlink()]
    if len(found) == 1:
        return found[0], [f"graded {found[0].relative_to(folder)}, expected {notebook}.ipynb (renamed or moved?)"]
    for archive in sorted(folder.glob("*.zip")):
        extracted = _notebook_from_zip(archive, notebook, work)
        if extracted:
            return extracted, [f"graded the notebook inside {archive.name}"]
    names = ", ".join(str(p.relative_to(folder)) for p in found)
    linked = " (symbolic links are not followed)" if path.is_symlink() else ""
    return None, [f"no {notebook}.ipynb in the submission{linked}" + (f" (found {names}: which one?)" if found
                                                                         else "")]


def _notebook_from_zip(archive: Path, notebook: str, work: Path) -> Path | None:
    import zipfile

    try:
        with zipfile.ZipFile(archive) as z:
            members = [m for m in z.infolist() if m.filename.endswith(".ipynb") and "__MACOSX" not in m.filename
                       and ".ipynb_checkpoints" not in m.filename]
            exact = [m for m in members if Path(m.filename).name == f"{notebook}.ipynb"]
            chosen = exact[:1] or (members if len(members) == 1 else [])
            if not chosen or chosen[0].file_size > MAX_NOTEBOOK_BYTES:
                return None
            target = work / "submitted-from-zip.ipynb"  # never the member's own path: no traversal
            target.write_bytes(z.read(chosen[0]))
            return target
    except (OSError, zipfile.BadZipFile, RuntimeError, ValueError):
        return None


def grade_submission(a: Assignment, student: str, folder: Path, limits: Limits) -> dict[str, Any]:
    """Sanitize, execute, collect, judge and annotate one submission (runs in a worker)."""
    started = time.monotonic()
    sha = _fingerprint(folder, a.notebook)  # before reading: a newer upload must not inherit this grade
    work = a.course_dir / STATE / "work" / f"{student}-{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    _copy_supporting_files(a, work)
    path, problems = find_notebook(folder, a.notebook, work)
    if folder.resolve() != a.course_dir / "submitted" / student / a.name:
        path, problems = None, ["the submission folder is a symbolic link, which the grader does not follow"]
    master = nbformat.read(a.master, as_version=4)
    clean = sanitize(master, a.stubs, path)
    problems += clean.problems
    t_sanitized = time.monotonic()
    deny, allow = isolation_paths(a.course_dir)
    seed = submission_seed(a.course_dir, a.name, student, sha)
    cases = drawn_cases(a.course_dir, a.name, seed)
    env = {DRAWN_ENV: str(write_cases(work, cases))} if cases else {}
    # The cache folder is readable from the start (so a worker's kernel factory, jailed once, serves
    # the whole run); kernels are pointed at it once the reference run has filled it.
    cache = ready_cache(a)
    if a.jax_cache is not None:
        allow = [*allow, a.jax_cache]
    if cache is not None:
        env[ENV] = str(cache)
    log = a.course_dir / STATE / "logs" / a.name / f"{student}.log"
    run = execute(clean.notebook, work, deny, allow, limits, log, env)
    problems += run.problems
    t_executed = time.monotonic()
    recorded = collect(run.notebook, list(a.questions))
    answers = {q: c.answer for q, c in recorded.items() if c.answer is not NO_ANSWER}
    verdicts = judge_answers(a.name, a.course_dir, answers, seed)
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
    t_judged = time.monotonic()
    annotate(run.notebook, questions)
    graded_nb = a.course_dir / "autograded" / student / a.name / f"{a.notebook}.ipynb"
    write_atomic(graded_nb, nbformat.writes(run.notebook))
    html = render_html(run.notebook, f"{a.name} — {student}", questions, problems)
    write_atomic(a.course_dir / "feedback" / student / a.name / f"{a.notebook}.html", html)
    shutil.rmtree(work, ignore_errors=True)
    cells = cell_seconds(run.notebook)
    timings = {"sanitize": t_sanitized - started, "kernel_start": max(run.seconds - cells, 0.0), "cells": cells,
               "collect_judge": t_judged - t_executed, "feedback": time.monotonic() - t_judged,
               "total": time.monotonic() - started}
    return {"timings": {k: round(v, 3) for k, v in timings.items()},
            "student": student, "assignment": a.name, "notebook": a.notebook, "grader": GRADER_VERSION,
            "sha256": sha, "timestamp": _timestamp(folder),
            "questions": questions, "score": round(sum(q["score"] for q in questions.values()), 6),
            "max_score": sum(a.questions.values()), "problems": problems, "isolation": run.isolation,
            "compilation_cache": cache is not None, "seconds": round(time.monotonic() - started, 2)}


def cell_seconds(nb: nbformat.NotebookNode) -> float:
    """Time the kernel spent executing the notebook's cells (nbclient's per-cell timestamps)."""
    from datetime import datetime

    total = 0.0
    for cell in nb.cells:
        timing = cell.get("metadata", {}).get("execution", {})
        start, end = timing.get("iopub.execute_input"), timing.get("shell.execute_reply")
        if start and end:
            total += (datetime.fromisoformat(end.replace("Z", "+00:00")) -
                      datetime.fromisoformat(start.replace("Z", "+00:00"))).total_seconds()
    return total


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
        return _failed(a, student, f"{type(e).__name__}: {e}")


def _crashed(args: tuple[Assignment, str, Path, Limits]) -> dict[str, Any]:
    a, student, _, _ = args
    return _failed(a, student, "the grading process died twice on this submission")


def _deadline(limits: Limits) -> float:
    """Seconds one submission may take in a worker: every bound it can meet, one after the other."""
    return limits.submission_seconds or (ZYGOTE_START_SECONDS + limits.startup_seconds + limits.notebook_seconds
                                         + KILL_GRACE_SECONDS + BATCH_SECONDS + 60)


def _stalled(args: tuple[Assignment, str, Path, Limits]) -> dict[str, Any]:
    a, student, _, limits = args
    return _failed(a, student, f"grading did not finish within {_deadline(limits):.0f} s, twice (timed out)")


def _failed(a: Assignment, student: str, reason: str) -> dict[str, Any]:
    """A result that gives nothing and asks a person to look (never stored as graded: no hash)."""
    zero = {q: {"points": p, "score": 0.0, "status": str(Status.INVALID), "diagnosis": "grader_error",
                "message": f"The grader failed on this submission ({reason}); it is flagged for the course staff.",
                "answer_text": ""} for q, p in a.questions.items()}
    return {"student": student, "assignment": a.name, "notebook": a.notebook, "grader": GRADER_VERSION,
            "sha256": "", "timestamp": None, "questions": zero, "score": 0.0,
            "max_score": sum(a.questions.values()), "problems": [f"grader error: {reason}"],
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
          limits: Limits = DEFAULT_LIMITS, progress: Progress | None = None,
          scheduler: str | None = None) -> Summary:
    """Grade the assignment ``name`` for every submitted student; see the module docstring."""
    started = time.monotonic()
    progress = progress or Progress(bar=False)
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
        progress.note(f"{summary.skipped} submission(s) unchanged since they were graded: kept")
    warming = Warming("")
    if todo:
        a, warming = warm(a, len(todo))
        progress.note(warming.note)
        todo = [(a, *rest) for _, *rest in todo]

    def finish(result: dict[str, Any], done: int) -> None:
        write_result(a.db_url, result)
        write_atomic(_results_dir(a) / f"{result['student']}.json", json.dumps(result, indent=1))
        summary.results.append(result)
        if result["problems"]:
            summary.problems[result["student"]] = result["problems"]
        progress.update(done, total, f"{result['student']}: {result['score']:g}/{result['max_score']:g} "
                                     f"({result['seconds']:.1f} s)")

    if scheduler:
        results = run_dask(_worker, todo, scheduler, _crashed, seconds=_deadline(limits), on_stall=_stalled)
    elif jobs == 1 or total <= 1:
        results = run_serial(_worker, todo)
    else:
        results = run_local(_worker, todo, jobs, _crashed, seconds=_deadline(limits), on_stall=_stalled)
    for i, (_, result) in enumerate(results, 1):
        finish(result, i)
    if warming.thread is not None:
        progress.note(warming.finish())
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

