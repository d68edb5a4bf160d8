"""``scaling-course grade``: grade every submission of an assignment, in parallel, resumably.

    prepare   -> check the course directory, release the assignment into the gradebook
    find      -> every submitted/<student>/<assignment>/ (or the students named), unchanged ones kept with
                 their problems (submissions.py, results.py); work handed in elsewhere under submitted/ is
                 listed, not graded
    warm      -> the reference fills a read-only compilation cache, once, alongside (warmup.py)
    grade     -> sanitize, execute, collect, judge, annotate, store: in workers   (stages.py)
    write     -> gradebook, stored results and grades.csv, by the parent alone   (results.py)
    warn      -> reports that ``nbgrader release_feedback`` would stop at, named with a way round them
    copies    -> students whose written cells are the same, named for the staff, never graded (copies.py)

A thread of the parent warms the cache while workers run the stages of stages.py; the parent alone
writes the gradebook, so sqlite never sees two writers. A worker's files are written atomically and a
result is stored only after the gradebook has it, so a kill at any moment loses no grade and
duplicates none (results.py). Nothing a student handed in may stop the class in the parent: a result
the gradebook refuses is that student's problem (``keep``), and so is a stored result it cannot take
again or a folder name it cannot hold. A run interrupted (Ctrl-C) keeps what it graded, writes
grades.csv, and says so (``Interrupted``): the same command continues. One run of an assignment at a time
(``grading_lock``): two would each store what they graded, the later over the other's.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import os
import re
import shlex
import signal
import sys
import threading
import time
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat

from ..verdict import Status
from . import STATE, copied_values, copies, factory, release_check, results, stages
from .console import Progress, printable
from .execute import KILL_GRACE_SECONDS, Limits
from .files import remove_tree
from .gradebook import LatePolicy, hand_grades, roster, said_of
from .judge import BATCH_SECONDS
from .runners import run_dask, run_local, run_serial
from .sanitize import release_locked, release_stubs
from .seeds import secret
from .stages import Job
from .submissions import GRADER_VERSION, misplaced, near_ids, same_id, spelled, submissions
from .warmup import Warming, warm


class CourseError(Exception):
    """The course directory cannot be graded as it is; the message says what to fix."""


class Interrupted(Exception):
    """A run stopped by Ctrl-C: the ``kept`` results it graded are stored (in the gradebook and grades.csv), and
    the same command grades the rest."""

    def __init__(self, kept: int):
        super().__init__(f"interrupted: {kept} graded and kept, rerun the same command to continue")
        self.kept = kept


class CtrlC:
    """Ctrl-C for the length of a run, never lost. Python raises the interrupt wherever the main thread is, and
    where that is an object's cleanup (a weakref callback the garbage collector runs), it prints the exception
    and goes on: on a loaded machine a run once graded to the end after Ctrl-C. The press is also remembered, and
    ``check`` stops the run at its next result; an interrupt reported from a cleanup is not printed, since the
    run stops for it. Outside the main thread (a caller's thread) it changes nothing."""

    def __init__(self) -> None:
        self.pressed = False
        self._handler: Any = None
        self._hook: Any = None

    def __enter__(self) -> CtrlC:
        if threading.current_thread() is threading.main_thread():
            self._handler = signal.signal(signal.SIGINT, self._press)
            self._hook, sys.unraisablehook = sys.unraisablehook, self._reported
        return self

    def __exit__(self, *_: object) -> None:
        if self._handler is not None:
            signal.signal(signal.SIGINT, self._handler)
            sys.unraisablehook = self._hook

    def _press(self, signum: int, frame: object) -> None:
        self.pressed = True
        raise KeyboardInterrupt

    def _reported(self, unraisable: Any) -> None:
        if not (self.pressed and isinstance(unraisable.exc_value, KeyboardInterrupt)):
            self._hook(unraisable)

    def check(self) -> None:
        if self.pressed:
            raise KeyboardInterrupt


@dataclass(frozen=True)
class Assignment:
    course_dir: Path
    name: str
    notebook: str  # notebook name without .ipynb
    master: Path  # source notebook
    stubs: dict[str, str]
    questions: dict[str, float]  # qid -> points, in notebook order
    # The released data the students' settings are dealt from (``variants.dealt``): the chapter's name and
    # its variant plan; None for an assignment that is not a chapter.
    variants: dict[str, Any] | None = None
    jax_cache: Path | None = None  # what a blank notebook compiled, read-only to kernels (warmup.py)
    answers: str = ""  # what the answers are judged against (results.answers_key): a change regrades
    # nbgrader's late-submission policy of the course, applied with the gradebook's hand grades after each result is
    # written (results.store); None in an Assignment made by hand, which writes the gradebook as write_result does.
    late: LatePolicy | None = None
    # the release text and checksum of each graded cell that is not an answer (``sanitize.release_locked``)
    locked: dict[str, tuple[str, str]] = field(default_factory=dict)

    @property
    def db_url(self) -> str:
        return f"sqlite:///{self.course_dir / 'gradebook.db'}"


@dataclass
class Summary:
    results: list[dict[str, Any]] = field(default_factory=list)
    skipped: int = 0
    problems: dict[str, list[str]] = field(default_factory=dict)
    seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)  # for the staff, about the class as a whole
    # Students of the gradebook's roster with no result of the assignment (a run of the whole class only; those
    # with a note in ``problems`` are said there): each has a "not submitted" row in grades.csv.
    not_submitted: list[str] = field(default_factory=list)
    copies: list[str] = field(default_factory=list)  # possible copies, for the staff alone (copies.py)


def assignment_name(typed: str) -> str:
    """The assignment's name as typed, without the slashes shell completion adds (``ch01_rooflines/``); a CourseError
    for what names no assignment folder (empty, ``.``, ``..``, a path): it would reach the gradebook as an
    assignment of its own."""
    name = typed.rstrip("/")
    if not name.strip() or name in (".", "..") or any(c in name for c in "/\\\0") or name != name.strip():
        raise CourseError(f"{printable(typed)!r} is not an assignment's name: give the name of a folder in source/, "
                          "such as ch01_rooflines")
    return name


LOCKS = "locks"  # under STATE: one lock file per assignment


@contextlib.contextmanager
def grading_lock(course_dir: Path, name: str) -> Iterator[None]:
    """Hold the assignment's grading lock for the block, or raise a CourseError naming the run that holds it. Two
    runs of one assignment at once would each store what it graded, the last to finish winning, even over a
    newer submission the other graded. The lock is the operating system's (``flock``): it goes with the process
    that holds it, ``kill -9`` included, so no lock outlives a run; the file keeps only the holder's pid, for
    the message."""
    folder = course_dir / STATE / LOCKS
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / f"grade-{name}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", errors="replace").strip()
            pid = f" (pid {holder})" if holder.isdigit() else ""
            raise CourseError(f"grading of {name} is already running{pid}: wait for it to end, or stop it, then run "
                              "this again (two runs at once could store an older grade over a newer one)") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    except (OverflowError, ValueError):  # no such pid can exist
        return False
    return True


STALE_WORK_SECONDS = 3600  # longer than one submission may take with the default limits (``_deadline``)


def clear_dead_work(work: Path, stale_seconds: float = STALE_WORK_SECONDS, interrupted: bool = False) -> None:
    """Remove the work folders of grading workers that died (``<student>-<pid>``, whose pid is gone from this machine
    and which nothing has changed for ``stale_seconds``), and the logs of kernel factories that died
    (``factory-<pid>.log``): a run interrupted or killed leaves them, and no later run of the same pid would clear
    them. A live worker's folder (of a run of another assignment; the age keeps one on another machine of a Dask
    cluster too) and the cache run's (``warmup-*``) stay. An interrupted run on this machine alone clears its
    own at once (``interrupted``, ``stale_seconds`` 0): its workers are gone when it says so, and a notebook this
    process ran itself (a ``--jobs 1`` run's) has stopped too."""
    try:
        entries = list(work.iterdir())
    except OSError:
        return
    for entry in entries:
        m = re.fullmatch(r"factory-(\d+)\.log|(?!warmup-).+-(\d+)", entry.name)
        try:
            if not m or entry.is_symlink() or entry.is_dir() != (m.group(2) is not None) \
                    or time.time() - entry.stat().st_mtime < stale_seconds \
                    or (_alive(pid := int(m.group(1) or m.group(2))) and not (interrupted and pid == os.getpid())):
                continue
        except OSError:
            continue
        if entry.is_dir():
            remove_tree(entry)
        else:
            entry.unlink(missing_ok=True)


def check(course_dir: Path, name: str) -> list[Path]:
    """The assignment's source notebook (a list of one), or a CourseError saying what to fix."""
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
    return notebooks


def prepare(course_dir: Path, name: str, late: LatePolicy | None = None) -> Assignment:
    """Check the course directory and register the assignment in the gradebook (creating it). ``late``: the course's
    late policy where the caller has loaded it already."""
    course_dir, name = course_dir.resolve(), assignment_name(name)
    notebooks = check(course_dir, name)
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
    _agree_with_records(name, points)
    plan, answers = _released_plan(course_dir, name), results.answers_key(course_dir, name, notebooks[0])
    try:
        release_check.check(course_dir, name, answers)
    except release_check.ReleaseDiffers as e:
        raise CourseError(str(e)) from None
    return Assignment(course_dir, name, notebooks[0].stem, notebooks[0], release_stubs(release_nb), points, plan,
                      answers=answers, late=late or LatePolicy(course_dir), locked=release_locked(release_nb))


def _released_plan(course_dir: Path, name: str) -> dict[str, Any] | None:
    """The variant plan the students were shown (the released self-check data), checked against the one
    ``nbgrader_config.py`` asks for now: after a change there, the release must be made again first."""
    from ..course_config import ConfigError, variant_plan
    from ..release import released

    data = released(name)
    if data is None:
        return None
    try:
        plan = variant_plan(course_dir, name).to_json()
    except ConfigError as e:
        raise CourseError(str(e)) from None
    shown = {k: v for k, v in (data.get("variants") or {}).items() if k not in ("settings", "order")}
    if shown != plan:
        raise CourseError(f"the variant settings of nbgrader_config.py ({plan}) differ from those {name} was last "
                          f"released with ({shown}), which the installed package keeps (course/fingerprints/"
                          f"{name}.json, shared by every course folder on this installation): run `scaling-course "
                          f"release {name}` here, give students the package built after it (`scaling-course dist "
                          "student`: their self-check deals values from that plan), then grade")
    return {"chapter": data["chapter"], "variants": data.get("variants")}


def _agree_with_records(name: str, points: dict[str, float]) -> None:
    """A chapter's points are its records' (``solutions/``): the self-check counts them, and
    ``scaling-course release`` refuses a notebook that differs. A notebook edited since (a test cell's
    points changed in nbgrader's toolbar, say) would grade out of other points than the students were
    shown: refuse it. The records' points are read from the chapter's self-check data, which the release
    writes from them (importing the chapter would import JAX here). Not a chapter: nothing to compare."""
    from ..release import released_questions

    released = released_questions(name)
    if released is None:
        return
    records = {q: float(e["points"]) for q, e in released.items()}
    differ = [f"{q}: {points.get(q, 'no test cell')} points in the notebook, {records.get(q, 'no record')} in the "
              "released self-check data" for q in sorted(set(points) | set(records)) if points.get(q) != records.get(q)]
    if differ:
        raise CourseError(f"source/{name} disagrees with the released self-check data (course/fingerprints/"
                          f"{name}.json, which `scaling-course release` writes from solutions/{name}.py), so it is not "
                          "graded:\n  " + "\n  ".join(differ) + "\nPoints are set in the records: fix the record "
                          "(or undo the notebook's edit), then run `scaling-course release`.")


def grade_submission(a: Assignment, student: str, folder: Path, limits: Limits) -> dict[str, Any]:
    """Run the stages (stages.py) on one submission, in a worker."""
    return stages.grade(Job(a, student, folder, limits))


def _size(folder: Path) -> int:
    """Bytes of the files directly in a submission's folder (links not followed)."""
    try:
        return sum(p.lstat().st_size for p in folder.iterdir() if p.is_file() and not p.is_symlink())
    except OSError:
        return 0


def _worker(args: tuple[Assignment, str, Path, Limits]) -> dict[str, Any]:
    a, student, folder, limits = args
    try:
        return grade_submission(a, student, folder, limits)
    except stages.GraderFailure as e:
        return _failed(a, student, str(e))
    except Exception as e:  # one broken submission must never stop the class
        return _failed(a, student, f"{type(e).__name__}: {e}")


def _crashed(args: tuple[Assignment, str, Path, Limits]) -> dict[str, Any]:
    a, student, _, _ = args
    return _failed(a, student, "the grading process died twice on this submission")


def _deadline(limits: Limits) -> float:
    """Seconds one submission may take in a worker: every bound it can meet, one after the other."""
    return limits.submission_seconds or (factory.START_SECONDS + limits.startup_seconds + limits.notebook_seconds
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


def _storable(student: str) -> bool:
    """Whether the gradebook (sqlite, UTF-8) can hold ``student``: a folder name that is not UTF-8 cannot."""
    try:
        student.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def keep(a: Assignment, result: dict[str, Any], summary: Summary) -> dict[str, Any]:
    """Store ``result`` and add it to ``summary``: the result kept. Where the gradebook or the results folder
    refuses it (something in the submission no check foresaw), a result flagged for the course staff is
    stored in its place, and where even that fails, it is kept in the summary unstored, with the reason:
    one student's submission never stops the class."""
    try:
        results.store(a, result)
    except Exception as e:
        reason = f"its result could not be stored ({type(e).__name__}: {printable(str(e))[:200]})"
        result = _failed(a, result["student"], reason)
        try:
            results.store(a, result)
        except Exception as again:
            result["problems"].append(f"not stored either: {type(again).__name__}: {printable(str(again))[:200]}")
    summary.results.append(result)
    if said := said_of(result):
        summary.problems[result["student"]] = said
    return result


DEFAULT_LIMITS = Limits()


def grade(course_dir: Path, name: str, jobs: int | None = None, force: bool = False,
          limits: Limits = DEFAULT_LIMITS, progress: Progress | None = None,
          scheduler: str | None = None, students: Iterable[str] | None = None) -> Summary:
    """Grade the assignment ``name`` for every submitted student, or for ``students`` only (``force``: regrade
    them even if unchanged); see the module docstring. grades.csv lists every stored result either way."""
    started = time.monotonic()
    progress = progress or Progress(bar=False)
    name = assignment_name(name)
    check(course_dir, name)
    late = LatePolicy(course_dir.resolve())
    try:
        late.check()  # a late policy nbgrader could not apply: before anything is written
    except ValueError as e:
        raise CourseError(str(e)) from None
    work = course_dir.resolve() / STATE / "work"
    with grading_lock(course_dir.resolve(), name):
        clear_dead_work(work)
        # The factory imports its modules (seconds) while the gradebook is prepared.
        with factory.shared(work), CtrlC() as ctrl_c:
            return _grade(course_dir, name, jobs, force, limits, progress, scheduler, started,
                          None if students is None else list(students), late, ctrl_c)


def chosen(a: Assignment, students: list[str] | None) -> tuple[list[tuple[str, Path]], dict[str, str]]:
    """The submissions to look at, and a note for each place the grader does not look (``misplaced``): the whole
    class, or the ``students`` named, where a name with no ``submitted/<id>/<assignment>/`` is a note too (a
    mistyped id is said, never a run that grades nobody in silence). A name typed in another Unicode form than
    the folder's (``José`` composed, the folder decomposed by a macOS zip) is that folder, where it is the only
    one; a folder whose id differs from the name in case (or that is one of several) is named in the note."""
    everyone, notes = submissions(a), misplaced(a)
    if students is None:
        return everyone, notes
    named = set(students)
    found = [(student, folder) for student, folder in everyone if student in named]
    notes = {where: note for where, note in notes.items() if where in named}
    for student in sorted(named - {s for s, _ in found} - set(notes)):
        nfc = unicodedata.normalize("NFC", student)
        same = [(s, f) for s, f in everyone if unicodedata.normalize("NFC", s) == nfc]
        if len(same) == 1:
            if same[0] not in found:
                found.append(same[0])
            continue
        near = [s for s, _ in everyone if same_id(s) == same_id(student)]
        hint = (f"; {', '.join(f'submitted/{spelled(s)}/{a.name}/' for s in near)} differ"
                f"{'s' if len(near) == 1 else ''} from it only in Unicode form or letter case") if near else ""
        notes[student] = f"not graded: there is no submitted/{printable(student)}/{a.name}/ (is the id right?{hint})"
    return sorted(found), notes


def unreleasable(a: Assignment) -> tuple[list[str], int]:
    """The students whose report of ``a`` in feedback/ lacks a receipt that ``nbgrader release_feedback`` reads
    (stages.RECEIPTS: work put in submitted/ by hand, not through nbgrader submit and collect), and how many
    students have a report. nbgrader opens both receipts of every report it finds, and stops at the first that
    is missing, for the whole class."""
    reported, missing = set(), set()
    for html in (a.course_dir / "feedback").glob(f"*/{glob.escape(a.name)}/*.html"):
        student = html.parent.parent.name
        reported.add(student)
        if not all((html.parent / r).is_file() and not (html.parent / r).is_symlink() for r in stages.RECEIPTS):
            missing.add(student)
    return sorted(missing), len(reported)


def release_warning(a: Assignment) -> list[str]:
    """What to tell the staff of ``unreleasable`` (once a run): the students, and how to release the others."""
    missing, reported = unreleasable(a)
    if not missing:
        return []
    receipts, where = " and ".join(stages.RECEIPTS), f"feedback/<student>/{a.name}/"
    if len(missing) == reported:
        return [f"No report of {a.name} can be released with `nbgrader release_feedback`: none has the receipts "
                f"it reads ({receipts}), which only work handed in with `nbgrader submit` and collected with "
                f"`nbgrader collect` has. Give the students their reports from {where} another way."]

    # The command is pasted into a shell, and ids are the students' text: each argument is quoted. nbgrader splits
    # the exclude list at commas, and an id printable() escapes cannot be typed as it is: neither can be excluded,
    # so their reports are moved aside and given by hand.
    names = [printable(s) for s in missing]
    typed = [s for s in missing if "," not in s and printable(s) == s]
    command = ["nbgrader", "release_feedback", a.name]
    command += [f"--CourseDirectory.student_id_exclude={','.join(typed)}"] if typed else []
    aside = [f"feedback/{printable(s)}/{a.name}/" for s in missing if s not in typed]
    first = (f"; {' and '.join(aside)} cannot be named in its exclude list (nbgrader splits the list at commas, "
             f"and an id with control characters cannot be typed): move {'it' if len(aside) == 1 else 'them'} out "
             f"of feedback/ before the command, and give {'that student' if len(aside) == 1 else 'those students'} "
             f"the report by hand") if aside else ""
    return [f"`nbgrader release_feedback {shlex.quote(a.name)}` would stop with an error for the whole class: the "
            f"reports of {', '.join(names)} lack the receipts it reads ({receipts}), since that work was not handed "
            f"in with `nbgrader submit` and `nbgrader collect` (copied into submitted/ by hand, say). Release the "
            f"others with `{shlex.join(command)}`{first}; have these students submit with nbgrader (then collect "
            f"and grade again), or give them their reports from {where} another way."]


SHOWN = 10  # students named in a warning, at most


def hand_grade_warning(a: Assignment, graded_now: list[dict[str, Any]] | None = None) -> list[str]:
    """Where the gradebook holds a score given by hand (formgrader) that differs from the automatic one, which this
    run's table and grades.csv show: said once a run, with the students and questions, and how the reports follow.
    And the reports this run wrote anew (``graded_now``) over ones that showed scores given by hand. Never stops
    the class."""
    if not (a.course_dir / "gradebook.db").is_file():
        return []
    try:
        found = hand_grades(a.db_url, a.name)
    except Exception:  # a note for the staff: no gradebook error it meets may stop what was graded
        return []
    rewritten = _rewritten_over_hand(a, graded_now or [])
    if not found:
        return rewritten
    said = []
    for student, grades in sorted(found.items())[:SHOWN]:
        each = ", ".join(f"{qid} {manual:g} by hand ({'not graded' if auto is None else f'{auto:g}'} automatic)"
                         for qid, manual, auto in grades[:3])
        said.append(f"{printable(student)}: {each}" + (f" and {len(grades) - 3} more" if len(grades) > 3 else ""))
    more = f"; and {len(found) - SHOWN} more students" if len(found) > SHOWN else ""
    return [f"The gradebook holds scores given by hand that differ from the automatic ones in grades.csv "
            f"({'; '.join(said)}{more}). `nbgrader export` uses the scores given by hand, and so do the "
            f"reports in feedback/, marked \"graded by hand\": each run writes every report's scores from the "
            f"gradebook, regrading nothing unchanged, so after grading by hand run `scaling-course grade {a.name}` "
            "again before `nbgrader release_feedback`. A grade is flagged for review again where the answer graded "
            "for it changed (or its automatic score)."] + rewritten


def gone_warning(gone: dict[str, list[str]]) -> list[str]:
    """A line per assignment whose stored results have no submission folder now, left out of grades.csv: a trial
    or a dropped student no longer has a row, and a folder removed by mistake is never a silent zero."""
    said = []
    for name, students in sorted(gone.items()):
        listed = ", ".join(printable(s) for s in sorted(students)[:SHOWN]) + (
            f" and {len(students) - SHOWN} more" if len(students) > SHOWN else "")
        who = printable(students[0]) if len(students) == 1 else "ID"
        said.append(f"{name}: {listed} graded before, with no submitted/{who}/{name}/ now: left out of grades.csv "
                    "and the copy reports (on the roster, a student is \"not submitted\" there). The results are "
                    "kept: put the folder back and it counts again, or delete "
                    f".scaling-course/results/{name}/{who}.json to forget it.")
    return said


def late_unknown_warning(graded: list[dict[str, Any]], assignment: str) -> list[str]:
    """The students whose lateness is unknown (a ``timestamp.txt`` the gradebook cannot read, where the late policy
    could take points: ``gradebook.settle``), in one line: never taken for "on time" in silence."""
    def named(students: list[str]) -> tuple[str, str]:
        names = ", ".join(printable(s) for s in students[:SHOWN]) + (f" and {len(students) - SHOWN} more"
                                                                      if len(students) > SHOWN else "")
        where = f"submitted/{printable(students[0])}/{assignment}/timestamp.txt" if len(students) == 1 \
            else f"each one's submitted/STUDENT/{assignment}/timestamp.txt"
        return names, where

    said = []
    unknown = sorted(r["student"] for r in graded if (r.get("gradebook") or {}).get("late_unknown"))
    if unknown:
        names, where = named(unknown)
        said.append(f"Lateness unknown for {names}: the timestamp.txt handed in holds no time the gradebook can read, "
                    f"so the gradebook records none and no late penalty was taken. Their grades are flagged for review "
                    f"in formgrader; put the real time in {where} and grade again, or give the scores by hand.")
    missing = sorted(r["student"] for r in graded if (r.get("gradebook") or {}).get("no_time"))
    if missing:
        names, where = named(missing)
        said.append(f"No submission time for {names}: no timestamp.txt came with the hand-in, so no late penalty could "
                    f"be taken though {assignment} has a due date and a late policy (counted on time, as nbgrader "
                    f"counts it). Put the time in {where} and grade again; `nbgrader zip_collect` writes it where "
                    "its file-name pattern has a timestamp group (docs/grading.md).")
    return said


def _rewritten_over_hand(a: Assignment, graded_now: list[dict[str, Any]]) -> list[str]:
    """What to say of the reports this run wrote anew for submissions that have scores given by hand: the reports
    before them showed those scores (ours, or nbgrader's own), and a person must look again where the answer
    changed."""
    hand = [(r["student"], (r.get("gradebook") or {}).get("hand") or {}) for r in graded_now]
    hand = sorted((s, h) for s, h in hand if h)
    if not hand:
        return []
    names = ", ".join(printable(s) for s, _ in hand[:SHOWN]) + (f" and {len(hand) - SHOWN} more" if len(hand) > SHOWN
                                                                 else "")
    review = "; ".join(f"{printable(s)}: {', '.join(q for q, g in sorted(h.items()) if g.get('review'))}"
                       for s, h in hand[:SHOWN] if any(g.get("review") for g in h.values()))
    return [f"This run regraded {names}, whose reports showed scores given by hand: their new reports in feedback/ "
            f"replace those (any that `nbgrader generate_feedback` wrote too) and show the scores given by hand again, "
            f"marked \"graded by hand\"."
            + (f" Flagged for review in formgrader, since the answer graded for them changed: {review}; after "
               f"reviewing, run `scaling-course grade {a.name}` again to write the reports from the gradebook."
               if review else "")]


def _grade(course_dir: Path, name: str, jobs: int | None, force: bool, limits: Limits, progress: Progress,
           scheduler: str | None, started: float, students: list[str] | None, late: LatePolicy,
           ctrl_c: CtrlC) -> Summary:
    """``grade``, with the class's process factory started."""
    a = prepare(course_dir, name, late)
    todo, summary = [], Summary()
    found, notes = chosen(a, students)
    summary.problems.update({where: [note] for where, note in notes.items()})
    # Said before this run's gradebook writes add the submitted ids to the roster (and on every later run too).
    identity = near_ids([s for s, _ in found], roster(a.course_dir / "gradebook.db"))
    regrade: dict[str, int] = {}
    forced = results.ForcedRun(a, students) if force else None
    if forced is not None and forced.continued:
        progress.note("continuing the --force run that was interrupted: what it graded is kept")
    for student, folder in found:
        if not _storable(student):
            summary.problems[student] = [
                "not graded: the folder's name is not UTF-8 text, which the gradebook cannot hold (rename the "
                "folder to the student's id)"]
            continue
        try:
            again = forced is not None and not forced.regraded(student)
            kept, why = (None, "") if again else results.unchanged(a, student, folder)
        except Exception:  # a stored result the gradebook no longer takes (an older grader's): grade it again
            kept, why = None, ""
        if kept:
            summary.results.append(kept)
            summary.skipped += 1
            if said := said_of(kept):  # as the run that graded it listed them, and the gradebook's note on the time
                summary.problems[student] = said
        else:
            regrade[why] = regrade.get(why, 0) + 1
            todo.append((a, student, folder, limits))
    jobs = max(1, jobs or os.cpu_count() or 1)
    total = len(todo)
    # Longest first, so that no worker is left grading a long notebook while the others have finished
    # (an untouched or broken notebook takes a tenth of a full one): the file's size stands for the work.
    todo.sort(key=lambda job: -_size(job[2]))
    if summary.skipped:
        progress.note(f"{summary.skipped} submission(s) unchanged since they were graded: kept")
    for why, said in ((results.ANSWERS, "the chapter's answers changed since the last run"),
                      (results.UNRECORDED, "graded before the grader recorded the chapter's answers"),
                      (results.FLAGGED, "the grader failed on part of them last time"),
                      (results.REWRITTEN,
                       "their autograded notebooks were written or removed since (by nbgrader autograde?)")):
        if regrade.get(why):
            progress.note(f"{said}: regrading {regrade[why]}")
    warming = Warming("")
    if todo:
        a, warming = warm(a, len(todo))
        progress.note(warming.note)
        todo = [(a, *rest) for _, *rest in todo]

    table, graded_now = results.Grades(a), []

    def finish(result: dict[str, Any], done: int) -> None:
        result = keep(a, result, summary)
        graded_now.append(result)  # counted as soon as stored: a Ctrl-C during the table's write keeps it too
        table.write()  # grades.csv kept current as results are stored, at a bounded cost (Grades.write)
        progress.update(done, total, f"{result['student']}: {result['score']:g}/{result['max_score']:g} "
                                     f"({result['seconds']:.1f} s)")

    if scheduler:
        graded = run_dask(_worker, todo, scheduler, _crashed, seconds=_deadline(limits), on_stall=_stalled)
    elif jobs == 1 or total <= 1:
        graded = run_serial(_worker, todo)
    else:
        graded = run_local(_worker, todo, jobs, _crashed, seconds=_deadline(limits), on_stall=_stalled)
    try:
        for i, (_, result) in enumerate(graded, 1):
            ctrl_c.check()
            finish(result, i)
        ctrl_c.check()  # pressed during the last result, where Python could only report it
    except KeyboardInterrupt:
        # Ctrl-C: the runner stops its workers (closing it), what was stored stays, and grades.csv shows it.
        if (close := getattr(graded, "close", None)) is not None:
            close()
        if not scheduler:
            clear_dead_work(a.course_dir / STATE / "work", stale_seconds=0, interrupted=True)
        table.write(final=True)
        raise Interrupted(sum(1 for r in graded_now if r.get("sha256"))) from None
    if warming.thread is not None:
        progress.note(warming.finish())
    table.write(final=True)
    if forced is not None:
        forced.done()
    summary.warnings = (identity + release_warning(a) + hand_grade_warning(a, graded_now)
                        + late_unknown_warning(summary.results, a.name) + gone_warning(table.gone))
    # From every stored result of the assignment, this run's or earlier ones: cells written alike, numbers right at
    # a classmate's values.
    summary.copies = copies.report(a) + copied_values.report(a)
    if students is None and (missing := table.missing()) is not None:
        summary.not_submitted = [s for s in missing.get(a.name, []) if s not in summary.problems]
    summary.seconds = time.monotonic() - started
    return summary
