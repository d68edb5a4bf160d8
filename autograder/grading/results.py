"""Results: each graded submission stored under ``.scaling-course/results/``, and the resume they allow.

The parent stores a result only after the gradebook has it (``store``). On a rerun, a submission whose
fingerprint (submissions.py) matches its stored result, judged against the same answers (``answers_key``:
the references and the source notebook), is not graded again (``unchanged``), and its stored result goes
to the gradebook again, which is idempotent. So a kill at any moment loses no grade and duplicates none,
and a fixed reference regrades the class. ``grades.csv`` is written from every stored result, of every
assignment, after each result is stored (``Grades``).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..model_traffic import FILE_NAME as TRAFFIC_FILE
from ..variants import dealt
from . import STATE
from .feedback import write_atomic
from .gradebook import write_csv, write_result
from .submissions import fingerprint

if TYPE_CHECKING:
    from .pipeline import Assignment


def _folder(a: Assignment) -> Path:
    return a.course_dir / STATE / "results" / a.name


def _load(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def stored(a: Assignment, student: str) -> dict[str, Any] | None:
    """The result stored for ``student``, if any and readable."""
    return _load(_folder(a) / f"{student}.json")


# Why a submission with a stored result is graded again (``unchanged``).
RESUBMITTED, ANSWERS, UNRECORDED, SETTING = "resubmitted", "answers", "unrecorded", "setting"


def unchanged(a: Assignment, student: str, folder: Path) -> tuple[dict[str, Any] | None, str]:
    """(the stored result, "") for a submission whose files are as they were and whose answers have not changed
    since, written to the gradebook again (idempotent: it repairs a gradebook that missed it); else (None, why it
    must be graded): "" (never graded), or one of the reasons above."""
    kept = stored(a, student)
    if not kept:
        return None, ""
    if kept.get("sha256") != fingerprint(folder, a.notebook):
        return None, RESUBMITTED
    if kept.get("answers") != a.answers:
        return None, ANSWERS if kept.get("answers") else UNRECORDED
    if kept.get("setting", {}) != (dealt(a.variants, student) if a.variants else {}):
        return None, SETTING  # graded with other values (variants turned on or off since): grade again
    write_result(a.db_url, kept)
    return kept, ""


def answers_key(course_dir: Path, name: str, master: Path) -> str:
    """A hash of what the assignment's answers are judged against: its source notebook (test cells, points) and
    the references in use, as the judge finds them (the course's own ``solutions/`` where it has one, else the
    installed package's): the chapter's own files and every shared one (``_derived/``, ``_kit.py``), never
    another chapter's, and of the table of what program models move (shared by every chapter), this chapter's
    entries only. Its bytes, not its import: importing a chapter would import JAX in the parent."""
    h = hashlib.sha256(master.read_bytes())
    own = course_dir / "solutions"
    spec = importlib.util.find_spec("solutions") if not (own / "__init__.py").is_file() else None
    root = own if spec is None else Path(next(iter(spec.submodule_search_locations or []), own))
    chapter = re.match(r"(ch\d\d)_", name)
    for path in sorted(root.rglob("*")) if root.is_dir() else []:
        rel = path.relative_to(root)
        if not path.is_file() or "__pycache__" in rel.parts or any(p.startswith(".") for p in rel.parts):
            continue
        of = re.match(r"(ch\d\d)_", rel.name) if len(rel.parts) == 1 else None
        if of and chapter and of.group(1) != chapter.group(1):
            continue  # another chapter's references
        data = path.read_bytes()
        if rel == Path(TRAFFIC_FILE) and chapter:
            data = _chapter_entries(data, chapter.group(1))
        h.update(os.fsencode(rel) + b"\0" + hashlib.sha256(data).digest())
    return h.hexdigest()


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
    write_result(a.db_url, result)
    write_atomic(_folder(a) / f"{result['student']}.json", json.dumps(result, indent=1))


class Grades:
    """``grades.csv`` kept in step with the stored results: a run writes it again after every result it stores
    (atomically), so a run killed at any moment leaves a table that agrees with the results and the gradebook
    (but for the result being stored at that instant, which the next run repairs). Each write reads again only
    the result files that changed since the last (a class is thousands of them, of every assignment): those of
    another assignment graded at the same time are taken as they are."""

    def __init__(self, a: Assignment):
        self.a = a
        self._seen: dict[Path, tuple[tuple[int, int, int], dict[str, Any]]] = {}

    def write(self) -> None:
        """``grades.csv`` from every stored result: the questions in chapter order, each chapter's in notebook
        order (columns that do not move with whichever assignment was graded last)."""
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
        everything = [r for _, r in seen.values()]
        write_csv(self.a.course_dir / "grades.csv", _ordered_qids(everything, self.a), everything)


def _ordered_qids(results: list[dict[str, Any]], a: Assignment) -> list[str]:
    qids = list(a.questions)
    for r in sorted(results, key=lambda r: r["assignment"]):
        qids += [q for q in r["questions"] if q not in qids]
    return sorted(qids, key=lambda q: (q.split("-", 1)[0], qids.index(q)))
