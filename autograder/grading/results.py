"""Results: each graded submission stored under ``.scaling-course/results/``, and the resume they allow.

The parent stores a result only after the gradebook has it (``store``). On a rerun, a submission whose
fingerprint (submissions.py) matches its stored result, judged against the same answers (``answers_key``:
the source notebook, the references, and the source of the course and autograder packages), is not graded
again (``unchanged``), and its stored result goes to the gradebook again, which is idempotent. So a kill at
any moment loses no grade and duplicates none, and a fixed reference (or a changed course constant, or a new
grader) regrades the class. ``grades.csv`` is written from every stored result, of every assignment, after
each result is stored (``Grades``), with a row for each roster student who handed in nothing.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..model_traffic import FILE_NAME as TRAFFIC_FILE
from ..variants import dealt
from . import STATE
from .feedback import report_path, rewrite_summary, write_atomic
from .gradebook import grader_failed, roster, settle, write_csv, write_result
from .submissions import fingerprint, handed_in

if TYPE_CHECKING:
    from .pipeline import Assignment


def _folder(a: Assignment) -> Path:
    return a.course_dir / STATE / "results" / a.name


def _load(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def handed_in_results(a: Assignment) -> list[dict[str, Any]]:
    """Every readable stored result of ``a`` with a student whose submission is still there
    (``submissions.handed_in``): what grades.csv and the copy reports count."""
    out = []
    for path in sorted(_folder(a).glob("*.json")):
        result = _load(path)
        if isinstance(result, dict) and isinstance(result.get("student"), str) \
                and handed_in(a.course_dir, result["student"], a.name):
            out.append(result)
    return out


def stored(a: Assignment, student: str) -> dict[str, Any] | None:
    """The result stored for ``student``, if any and readable."""
    return _load(_folder(a) / f"{student}.json")


# Why a submission with a stored result is graded again (``unchanged``).
RESUBMITTED, ANSWERS, UNRECORDED, SETTING, FLAGGED = "resubmitted", "answers", "unrecorded", "setting", "flagged"
REWRITTEN = "rewritten"  # the autograded notebook was written after the result (a plain ``nbgrader autograde``)


def unchanged(a: Assignment, student: str, folder: Path) -> tuple[dict[str, Any] | None, str]:
    """(the stored result, "") for a submission whose files are as they were and whose answers have not changed
    since, written to the gradebook again (idempotent: it repairs a gradebook that missed it); else (None, why it
    must be graded): "" (never graded), or one of the reasons above."""
    kept = stored(a, student)
    if not kept:
        return None, ""
    if grader_failed(kept):
        return None, FLAGGED  # the grader failed on part of it last time: a fixed grader grades it in full
    if kept.get("sha256") != fingerprint(folder, a.notebook):
        return None, RESUBMITTED
    if kept.get("answers") != a.answers:
        return None, ANSWERS if kept.get("answers") else UNRECORDED
    if kept.get("setting", {}) != (dealt(a.variants, student) if a.variants else {}):
        return None, SETTING  # graded with other values (variants turned on or off since): grade again
    if _rewritten(a, student):
        return None, REWRITTEN
    write_result(a.db_url, kept)
    if a.late is not None and _settle(a, kept, kept):  # hand scores or a penalty new since: the report follows
        write_atomic(_folder(a) / f"{student}.json", json.dumps(kept, indent=1))
    return kept, ""


def _rewritten(a: Assignment, student: str) -> bool:
    """Whether the autograded notebook is newer than the stored result, or gone: each run writes the notebook before
    the result, so another tool wrote it since (a plain ``nbgrader autograde``, whose notebook formgrader,
    ``generate_feedback`` and the copy check would read beside our grade), or removed it (nbgrader's autograde
    removes a student's folder before it grades, and leaves none where it fails: formgrader, ``generate_feedback``
    and the copy check then had nothing, and said so in no words)."""
    try:
        result = (_folder(a) / f"{student}.json").stat().st_mtime_ns
    except OSError:
        return False
    try:
        return (a.course_dir / "autograded" / student / a.name / f"{a.notebook}.ipynb").stat().st_mtime_ns > result
    except FileNotFoundError:
        return True
    except OSError:  # there, but not to be read: nothing this run can mend by grading again
        return False


class ForcedRun:
    """A ``--force`` run that an interruption (Ctrl-C, a kill) stopped is continued by the same command: the results
    it stored are kept as any unchanged result is, and only the rest is graded again. Without this, rerunning the
    command regraded the whole class again, and dropping ``--force`` kept the old results of those it had not reached.
    Kept in ``.scaling-course/forced/<assignment>.json`` (the start and the students asked for) until the run ends."""

    def __init__(self, a: Assignment, students: list[str] | None):
        self.path = a.course_dir / STATE / "forced" / f"{a.name}.json"
        self.a, self.students = a, sorted(students) if students is not None else None
        earlier = _load(self.path)
        if isinstance(earlier, dict) and earlier.get("students") == self.students and isinstance(
                earlier.get("since"), int | float):
            self.since, self.continued = float(earlier["since"]), True
        else:
            self.since, self.continued = time.time(), False
            write_atomic(self.path, json.dumps({"since": self.since, "students": self.students}))

    def regraded(self, student: str) -> bool:
        """Whether this forced run (or the interrupted one it continues) stored ``student``'s result already."""
        try:
            return (_folder(self.a) / f"{student}.json").stat().st_mtime >= self.since
        except OSError:
            return False

    def done(self) -> None:
        self.path.unlink(missing_ok=True)


def answers_key(course_dir: Path, name: str, master: Path) -> str:
    """A hash of what the assignment's answers are judged against: its source notebook (test cells, points), the
    references in use, as the judge finds them (the course's own ``solutions/`` where it has one, else the
    installed package's), and the source of every module the references and the verdicts are built from: the
    installed ``course`` package (``course/hardware.py``'s constants, its data files: the released fingerprints)
    and the ``autograder`` package (its ``.py`` files: the judges). Of ``solutions/``, the chapter's own files
    and every shared one (``_derived/``, ``_kit.py``), never another chapter's, and of the table of what program
    models move (shared by every chapter), this chapter's entries only; of ``course/``'s data, another
    chapter's fingerprints neither. Its bytes, not its import: importing a chapter would import JAX in the
    parent. Computed once a run (``pipeline.prepare``): a few megabytes read."""
    h = hashlib.sha256(master.read_bytes())
    own = course_dir / "solutions"
    spec = importlib.util.find_spec("solutions") if not (own / "__init__.py").is_file() else None
    root = own if spec is None else Path(next(iter(spec.submodule_search_locations or []), own))
    chapter = re.match(r"(ch\d\d)_", name)
    of_chapter = chapter.group(1) if chapter else None
    _hash_tree(h, root, of_chapter, "", data=True)
    for package, data in (("course", True), ("autograder", False)):
        if (where := _package_dir(package)) is not None:
            _hash_tree(h, where, of_chapter, package, data=data)
    return h.hexdigest()


def _package_dir(name: str) -> Path | None:
    """The folder of the installed package ``name`` (the one the grader's processes import), or None."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations))).resolve()
    return Path(spec.origin).resolve().parent if spec.origin else None


def _hash_tree(h: Any, root: Path, chapter: str | None, label: str, data: bool) -> None:
    """Into ``h``, every file under ``root`` (its ``.py`` files only, unless ``data``) by its path under ``label``,
    but byte code, hidden files and another chapter's files (``chNN_*`` by name, at any depth)."""
    for path in sorted(root.rglob("*")) if root.is_dir() else []:
        rel = path.relative_to(root)
        if not path.is_file() or "__pycache__" in rel.parts or any(p.startswith(".") for p in rel.parts):
            continue
        if not data and path.suffix != ".py":
            continue
        of = re.match(r"(ch\d\d)_", rel.name) if len(rel.parts) == 1 or label else None
        if of and chapter and of.group(1) != chapter:
            continue  # another chapter's references, or its released fingerprints
        content = path.read_bytes()
        if not label and rel == Path(TRAFFIC_FILE) and chapter:
            content = _chapter_entries(content, chapter)
        h.update(os.fsencode(Path(label) / rel) + b"\0" + hashlib.sha256(content).digest())


def _chapter_entries(table: bytes, chapter: str) -> bytes:
    """The entries of the program traffic table (question id -> ...) of ``chapter``'s questions, as canonical JSON:
    releasing or measuring another chapter changes nothing here. A table that is no such JSON counts whole."""
    try:
        entries = json.loads(table)
    except ValueError:
        return table
    if not isinstance(entries, dict):
        return table
    own = {q: v for q, v in entries.items() if q.split("-", 1)[0] == chapter}
    return json.dumps(own, sort_keys=True, separators=(",", ":")).encode()


def store(a: Assignment, result: dict[str, Any]) -> None:
    """Into the gradebook first, then the results folder: a result on file is always in the gradebook."""
    before = stored(a, result["student"]) if a.late is not None else None
    write_result(a.db_url, result)
    if a.late is not None:
        _settle(a, result, before)
    write_atomic(_folder(a) / f"{result['student']}.json", json.dumps(result, indent=1))


def _settle(a: Assignment, result: dict[str, Any], before: dict[str, Any] | None) -> bool:
    """The gradebook's part of ``result`` (``gradebook.settle``: hand grades flagged again where the answer graded for
    them changed since ``before``, the late penalty) into ``result["gradebook"]``, and into the summary of its report
    where that is not what the report shows (the worker wrote it from the automatic scores alone; a kept result's
    report shows what it records). The gradebook is the one source: every run writes each report's summary from it,
    regrading nothing. Whether ``result`` changed."""
    book = settle(a.db_url, result, a.late, before)
    shown = result.get("gradebook") or {"hand": {}, "late_penalty": None, "seconds_late": None, "time": None,
                                        "late_unknown": False}
    result["gradebook"] = book
    if book == shown:
        return False
    if result.get("sha256"):  # a graded submission's report (a grader failure leaves the report there alone)
        rewrite_summary(report_path(a.course_dir, result), result, book)
    return True


class Grades:
    """``grades.csv`` kept in step with the stored results: a run writes it again as it stores results
    (atomically; after every one, where the table is cheap to write, see ``write``), so a run killed at any
    moment leaves a table that agrees with the results and the gradebook but for the last few, which the next run
    repairs. Each write reads again only the result files that changed since the last (a class is thousands of
    them, of every assignment): those of another assignment graded at the same time are taken as they are. A
    student of the gradebook's roster with no result of an assignment in the table has a row too, "not submitted"
    (``gradebook.write_csv``): the roster is read once, at the first write (a run adds to it only students it
    grades, who have results)."""

    def __init__(self, a: Assignment):
        self.a = a
        self._due = 0.0  # time.monotonic() from which the next write is made (see ``write``)
        self._seen: dict[Path, tuple[tuple[int, int, int], dict[str, Any]]] = {}
        self._roster: list[str] | None = None
        self._read_roster = False
        self.gone: dict[str, list[str]] = {}  # by assignment, students whose stored result has no submission now

    @property
    def roster(self) -> list[str] | None:
        """The gradebook's students (None: no gradebook), as the run found them."""
        if not self._read_roster:
            self._roster, self._read_roster = roster(self.a.course_dir / "gradebook.db"), True
        return self._roster

    def results(self) -> list[dict[str, Any]]:
        """Every stored result, of every assignment (read again where its file changed)."""
        seen = {}
        for path in sorted((self.a.course_dir / STATE / "results").glob("*/*.json")):
            try:
                info = path.stat()
            except OSError:
                continue
            key = (info.st_ino, info.st_mtime_ns, info.st_size)  # a result is replaced by a rename: a new inode
            if (known := self._seen.get(path)) is not None and known[0] == key:
                seen[path] = known
            elif (r := _load(path)) is not None:
                seen[path] = (key, r)
        self._seen = seen
        return self._handed_in([r for _, r in seen.values()])

    def _handed_in(self, stored: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The results whose submission folder is still there: a folder removed (a trial run's, a dropped student's,
        one graded under a misspelt id) takes its row out of the table; its result stays stored, and counts again
        once the folder is back. ``gone`` names those left out, for the run's summary."""
        kept, self.gone = [], {}
        for r in stored:
            student, name = r.get("student"), r.get("assignment")
            if not isinstance(student, str) or not isinstance(name, str):
                continue
            if handed_in(self.a.course_dir, student, name):
                kept.append(r)
            else:
                self.gone.setdefault(name, []).append(student)
        return kept

    def missing(self, everything: list[dict[str, Any]] | None = None) -> dict[str, list[str]] | None:
        """By assignment in the table (this one always), the roster's students with no result of it; None where
        the roster is not known."""
        if self.roster is None:
            return None
        everything = self.results() if everything is None else everything
        have: dict[str, set[str]] = {self.a.name: set()}
        for r in everything:
            have.setdefault(r["assignment"], set()).add(r["student"])
        return {name: [s for s in self.roster if s not in students] for name, students in have.items()}

    def write(self, final: bool = False) -> None:
        """``grades.csv`` from every stored result: the questions in chapter order, each chapter's in notebook
        order (columns that do not move with whichever assignment was graded last). The table is written whole
        (a column per question of every assignment), which late in a term takes a second: a write waits until the
        run has spent ``WRITE_SPACING`` times the last one's cost on other work, so keeping the table current costs
        a bounded share of any run (a small table is still written after every result). ``final``: now, whatever
        the wait (a run's end, or its interruption); a table a killed run left behind is brought up to date by the
        next run, even one with nothing to grade."""
        start = time.monotonic()
        if not final and start < self._due:
            return
        everything = self.results()
        missing = self.missing(everything)
        rows = None
        if missing is not None:
            out_of = {self.a.name: sum(self.a.questions.values())}
            for r in everything:
                out_of.setdefault(r["assignment"], r.get("max_score", 0))
            rows = [{"student": s, "assignment": name, "questions": {}, "score": 0, "max_score": out_of[name]}
                    for name, students in missing.items() for s in students]
        write_csv(self.a.course_dir / "grades.csv", _ordered_qids(everything, self.a), everything, rows,
                  stale=lambda r: bool(r["assignment"] == self.a.name and r.get("answers") and self.a.answers
                                       and r["answers"] != self.a.answers))
        end = time.monotonic()
        self._due = end + WRITE_SPACING * (end - start)


WRITE_SPACING = 20  # a write of grades.csv waits this many times its last cost: at most 1/20 of a run writes it


def _ordered_qids(results: list[dict[str, Any]], a: Assignment) -> list[str]:
    first = dict.fromkeys(a.questions)  # the order each question was first seen in: this assignment's, then others'
    for r in sorted(results, key=lambda r: r["assignment"]):
        first.update((q, None) for q in r["questions"] if q not in first)
    order = {q: i for i, q in enumerate(first)}
    return sorted(order, key=lambda q: (q.split("-", 1)[0], order[q]))
