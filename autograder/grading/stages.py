"""The stages that grade one submission, in a worker, each a small function over a ``Job``.

    sanitize  -> rebuild the notebook from the master and the student's cells   (sanitize.py)
    execute   -> run it in a fresh jailed kernel with limits                     (execute.py)
    collect   -> read each test cell's answer record                              (collect.py)
    judge     -> compare with the references in a bounded subprocess              (judge.py)
    annotate  -> verdicts into the notebook                                       (feedback.py)
    store     -> the autograded notebook and the feedback report, atomically      (feedback.py)

Each stage reads what the earlier ones left on the job and adds its own part, so one can be run alone
on a job that holds what it reads (tests/grading/test_stages.py).
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import nbformat
from nbformat import NotebookNode

from ..notebook_json import half_pairs, text_only
from ..record import DRAWN_ENV, STUDENT_ENV
from ..variants import dealt
from ..verdict import Status, Verdict
from . import STATE
from .collect import NO_ANSWER, Collected, other_settings, worked_with_other_values
from .collect import collect as read_records
from .copied_values import KEY as RIGHT_AT
from .execute import Execution, Limits
from .execute import execute as run_notebook
from .feedback import annotate as annotate_notebook
from .feedback import render_html, write_atomic
from .files import read_plain, remove_tree
from .inert import inert
from .jail import isolation_paths
from .judge import draw_cases, judge_answers
from .sanitize import sanitize as rebuild
from .seeds import submission_seed, write_cases
from .submissions import GRADER_VERSION, fingerprint, locate, timestamp
from .warmup import ENV, ready_cache

if TYPE_CHECKING:
    from .pipeline import Assignment


class GraderFailure(RuntimeError):
    """A stage failed for the grader's own reasons, before anything of the student's ran: the submission is flagged
    for the course staff (pipeline's ``_failed``), never graded 0."""


@dataclass
class Job:
    """One submission on its way through the stages."""

    a: Assignment
    student: str
    folder: Path
    limits: Limits = field(default_factory=Limits)
    sha: str = ""  # fingerprint of the files handed in, taken before they are read
    timestamp: str | None = None  # the submission time nbgrader's collect wrote, where the gradebook can take it
    problems: list[str] = field(default_factory=list)  # for the student, from every stage
    notebook: NotebookNode | None = None  # sanitized, then executed, then annotated
    seed: str = ""  # the submission's grading seed (seeds.py)
    setting: dict[str, dict[str, Any]] = field(default_factory=dict)  # the student's values, by setting
    ticked: set[str] = field(default_factory=set)  # questions the saved notebook shows a passed self-check for
    cache: bool = False  # kernels were pointed at the compilation cache a blank notebook filled
    run: Execution | None = None
    recorded: dict[str, Collected] = field(default_factory=dict)
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    questions: dict[str, dict[str, Any]] = field(default_factory=dict)  # qid -> its graded entry
    seconds: dict[str, float] = field(default_factory=dict)  # per stage

    @property
    def work(self) -> Path:
        """The worker's scratch folder: supporting files, drawn cases, a notebook from a zip."""
        return self.a.course_dir / STATE / "work" / f"{self.student}-{os.getpid()}"


@functools.lru_cache(maxsize=4)
def _master(path: Path, mtime_ns: int) -> nbformat.NotebookNode:
    """The source notebook, read (and validated) once per worker; rebuilding copies what it takes."""
    return nbformat.read(path, as_version=4)


def sanitize(job: Job) -> None:
    a = job.a
    # The student's values come from the submission's folder name, never from the notebook.
    job.setting = dealt(a.variants, job.student) if a.variants else {}
    job.sha = fingerprint(job.folder, a.notebook)  # before reading: a newer upload must not inherit this grade
    remove_tree(job.work)
    _copy_supporting_files(a, job.work)
    path, job.problems = locate(a, job.student, job.folder, job.work)
    clean = rebuild(_master(a.master, a.master.stat().st_mtime_ns), a.stubs, path, a.locked)
    job.problems += clean.problems + worked_with_other_values(clean.shown, job.setting)
    job.ticked = clean.ticked
    job.timestamp, unreadable = timestamp(job.folder)
    job.problems += [unreadable] if unreadable else []
    job.notebook = clean.notebook


def execute(job: Job) -> None:
    a = job.a
    deny, allow = isolation_paths(a.course_dir)
    job.seed = submission_seed(a.course_dir, a.name, job.student, job.sha)
    cases = draw_cases(a.name, a.course_dir, job.seed, job.setting)
    env = {STUDENT_ENV: job.student} | ({DRAWN_ENV: str(write_cases(job.work, cases))} if cases else {})
    # Kernels read the compilation cache once a blank notebook has filled it, and never write it.
    cache = ready_cache(a)
    if cache is not None:
        allow = [*allow, cache]
        env[ENV] = str(cache)
    job.cache = cache is not None
    log = a.course_dir / STATE / "logs" / a.name / f"{job.student}.log"
    for _ in range(2):  # a kernel that failed to start is started once more (a loaded machine), then given up on
        job.run = run_notebook(job.notebook, job.work, deny, allow, job.limits, log, env)
        if job.run.started:
            break
    else:  # nothing of the student's ran: the grader's failure, flagged for a person and never stored as graded
        raise GraderFailure(job.run.problems[-1])
    job.problems += job.run.problems
    # A kernel may send text no file can hold (half of a UTF-16 pair, in a raw message of its own): the notebook
    # that is judged, stored and shown holds U+FFFD in its place, as a handed-in file does (``sanitize``).
    ran, halves = text_only(job.run.notebook)
    job.notebook = nbformat.from_dict(ran) if halves else job.run.notebook
    job.problems += [f"the kernel's output held {half_pairs(halves)}: replaced by \ufffd"] if halves else []


def collect(job: Job) -> None:
    job.recorded = read_records(job.notebook, list(job.a.questions))
    job.problems += other_settings(job.recorded, job.setting)


def judge(job: Job) -> None:
    """Verdicts on the recorded answers only (never the kernel), then each question's graded entry."""
    answers = {q: c.answer for q, c in job.recorded.items() if c.answer is not NO_ANSWER}
    job.verdicts = judge_answers(job.a.name, job.a.course_dir, answers, job.seed, job.setting)
    for qid, points in job.a.questions.items():
        v = job.verdicts.get(qid)
        c = job.recorded[qid]
        if v is None:
            status, score, diagnosis, message = str(Status.INVALID), 0.0, "no_record", f"No answer: {c.reason}."
        else:
            status, score, diagnosis, message = str(v.status), v.score * points, v.diagnosis, v.message
        job.questions[qid] = {"points": points, "score": round(score, 6), "status": status,
                              "diagnosis": diagnosis, "message": message, "answer_text": _answer_text(c)}
        if v is not None and RIGHT_AT in v.data:  # for the staff's report of copied values, never the student's
            job.questions[qid][RIGHT_AT] = v.data[RIGHT_AT]
    job.problems += ticked_then_refused(job.ticked, {q: {**e, "kind": job.recorded[q].kind}
                                                     for q, e in job.questions.items()})


TICK_NOTES = 3  # notes of one each at most; more are one note
SHOWN_TICKS = 10  # questions named in that one note


def ticked_then_refused(ticked: set[str], graded: dict[str, dict[str, Any]]) -> list[str]:
    """A note per question the saved notebook shows ✓ for and the graded run scores less: the student saw a
    passed check, so the feedback says how the two can differ."""
    refused = [q for q in sorted(ticked & set(graded)) if graded[q]["score"] < graded[q]["points"]]
    if len(refused) > TICK_NOTES:  # a notebook whose every ✓ is refused is one finding, not a page of notes
        listed = ", ".join(f"{q} ({graded[q]['score']:g}/{graded[q]['points']:g})" for q in refused[:SHOWN_TICKS])
        more = f" and {len(refused) - SHOWN_TICKS} more" if len(refused) > SHOWN_TICKS else ""
        return [f"The saved notebook shows ✓ for {len(refused)} questions that the graded run, from the top, scores "
                f"lower: {listed}{more}. Its outputs are not what these cells give run in order: cells changed after "
                "they last ran, were run out of order, or the outputs came from another notebook. Restart the kernel "
                "and run all cells to see what the grader sees."]
    notes = []
    for qid in refused:
        e = graded[qid]
        why = ("or the grader's own test cases, drawn for this submission, found what the public ones did not"
               if e.get("kind") in ("function", "program") else "or the cells were run out of order")
        notes.append(f"{qid}: the saved notebook shows ✓ for it, but the graded run, from the top, scores it "
                     f"{e['score']:g}/{e['points']:g}: a cell changed after it last ran, {why}. Restart the kernel "
                     "and run all cells to see what the grader sees.")
    return notes


def annotate(job: Job) -> None:
    annotate_notebook(job.notebook, job.questions)


def store(job: Job) -> None:
    a, student = job.a, job.student
    autograded = a.course_dir / "autograded" / student / a.name
    # Written without nbformat's validation (a tenth of a second a notebook): the notebook was built
    # from the master and filled by nbclient, never read from the student. nbgrader's formgrader and
    # generate_feedback render it as raw HTML: it is written with nothing active of the student's (``inert``);
    # the report is made from the notebook as it ran, and escapes everything itself.
    write_atomic(autograded / f"{a.notebook}.ipynb", nbformat.v4.writes(inert(job.notebook)))
    feedback = a.course_dir / "feedback" / student / a.name
    html = report(job)
    if html is not None:
        write_atomic(feedback / f"{a.notebook}.html", html)
    else:
        (feedback / f"{a.notebook}.html").unlink(missing_ok=True)  # never an earlier submission's report
    # The receipts go beside the report (``nbgrader release_feedback`` reads them there) and, as nbgrader's
    # autograde leaves them, beside the autograded notebook, whence ``nbgrader generate_feedback`` copies them.
    for name, text in receipts(job.folder).items():
        write_atomic(feedback / name, text)
        write_atomic(autograded / name, text)
    remove_tree(job.work)


def report(job: Job) -> str | None:
    """The student's feedback report. The grade never depends on it: a notebook the report cannot show gives a
    report of the scores and notes alone, and where even that fails, no report (each with a note)."""
    title = f"{job.a.name} — {job.student}"
    try:
        return render_html(job.notebook, title, job.questions, job.problems, job.setting)
    except Exception as e:
        job.problems.append(f"the feedback report shows the scores only: the notebook could not be shown "
                            f"({type(e).__name__})")
    try:
        return render_html(nbformat.v4.new_notebook(), title, job.questions, job.problems, job.setting)
    except Exception as e:
        job.problems.append(f"no feedback report was written ({type(e).__name__}): the grade stands")
        return None


RECEIPTS = ("timestamp.txt", "submission_secret.txt")  # what nbgrader's collect leaves beside a submission
RECEIPT_BYTES = 256


def receipts(folder: Path) -> dict[str, str]:
    """nbgrader's receipts of a submission, which ``nbgrader release_feedback`` reads beside the report to
    name it: plain files of a few bytes only (the folder is the student's: a link or a flood is no receipt)."""
    found = {}
    for name in RECEIPTS:
        try:
            data, cut = read_plain(folder / name, RECEIPT_BYTES)
        except OSError:
            continue
        if not cut:
            found[name] = data.decode("utf-8", errors="replace")
    return found


# Order: sanitize before execute (pre-filled outputs would pass for records); judge sees only what
# collect read, never the kernel; execute and judge share the grading seed, which execute draws from
# the fingerprint sanitize took; store writes the notebook annotate marked.
STAGES = (sanitize, execute, collect, judge, annotate, store)


def grade(job: Job) -> dict[str, Any]:
    """Run every stage on ``job``, timing each; the submission's result."""
    started = time.monotonic()
    for stage in STAGES:
        t = time.monotonic()
        stage(job)
        job.seconds[stage.__name__] = time.monotonic() - t
    return result(job, started)


def result(job: Job, started: float) -> dict[str, Any]:
    a, s, run = job.a, job.seconds, job.run
    cells = cell_seconds(job.notebook)
    # Between cells: the kernel's replies, outputs carried back, and the kernel's stop after the last cell.
    timings = {"sanitize": s["sanitize"], "kernel_start": run.kernel_seconds, "cells": cells,
               "between_cells": max(run.seconds - run.kernel_seconds - cells, 0.0),
               "collect_judge": s["collect"] + s["judge"], "feedback": s["annotate"] + s["store"],
               "total": time.monotonic() - started}
    return {"timings": {k: round(v, 3) for k, v in timings.items()},
            "student": job.student, "assignment": a.name, "notebook": a.notebook, "grader": GRADER_VERSION,
            "sha256": job.sha, "answers": a.answers, "timestamp": job.timestamp,
            "setting": job.setting, "questions": job.questions,
            "score": round(sum(q["score"] for q in job.questions.values()), 6),
            "max_score": sum(a.questions.values()), "problems": job.problems, "isolation": run.isolation,
            "compilation_cache": job.cache, "seconds": round(time.monotonic() - started, 2)}


def cell_seconds(nb: NotebookNode) -> float:
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
        if isinstance(c.answer, dict) and isinstance(c.answer.get("program"), str):  # a mesh it chose, and the program
            return f"(your compiled program, on the mesh {json.dumps(c.answer.get('mesh'))[:80]})"
        if isinstance(c.answer, dict) and "error" in c.answer:  # the verdict quotes the error and its line
            return "(your function, which stopped before it compiled)"
        return "(your compiled program)" if isinstance(c.answer, str) else json.dumps(c.answer)[:200]
    if c.kind == "function":  # its results on the cases: the verdict says which fail
        return "(your function, called on the test cases)"
    if isinstance(c.answer, dict) and isinstance(c.answer.get("invalid"), str):  # what the kernel could not record
        said = c.answer.get("detail") or c.answer["invalid"].replace("_", " ")
        text = f"(not read: {said})"
    else:
        text = c.answer if isinstance(c.answer, str) else json.dumps(c.answer)
    return text if len(text) <= 200 else text[:200] + "…"


def _copy_supporting_files(a: Assignment, work: Path) -> None:
    work.mkdir(parents=True, exist_ok=True)
    for f in a.master.parent.iterdir():
        if f.is_file() and f.suffix != ".ipynb":
            shutil.copy(f, work / f.name)
