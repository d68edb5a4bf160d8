"""Results: each graded submission stored under ``.scaling-course/results/``, and the resume they allow.

The parent stores a result only after the gradebook has it (``store``). On a rerun, a submission whose
fingerprint (submissions.py) matches its stored result is not graded again (``unchanged``), and its
stored result goes to the gradebook again, which is idempotent. So a kill at any moment loses no
grade and duplicates none. ``grades.csv`` is written from every stored result, of every assignment.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

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


def unchanged(a: Assignment, student: str, folder: Path) -> dict[str, Any] | None:
    """The stored result of a submission whose files are as they were, written to the gradebook again
    (idempotent: it repairs a gradebook that missed it); None when it must be graded."""
    kept = stored(a, student)
    if not kept or kept.get("sha256") != fingerprint(folder, a.notebook):
        return None
    if kept.get("setting", {}) != (dealt(a.variants, student) if a.variants else {}):
        return None  # graded with other values (variants turned on or off since): grade again
    write_result(a.db_url, kept)
    return kept


def store(a: Assignment, result: dict[str, Any]) -> None:
    """Into the gradebook first, then the results folder: a result on file is always in the gradebook."""
    write_result(a.db_url, result)
    write_atomic(_folder(a) / f"{result['student']}.json", json.dumps(result, indent=1))


def write_grades(a: Assignment) -> None:
    """``grades.csv`` from every stored result: this assignment's questions first, in notebook order."""
    everything = [r for p in (a.course_dir / STATE / "results").glob("*/*.json") if (r := _load(p)) is not None]
    write_csv(a.course_dir / "grades.csv", _ordered_qids(everything, a), everything)


def _ordered_qids(results: list[dict[str, Any]], a: Assignment) -> list[str]:
    qids = list(a.questions)
    for r in sorted(results, key=lambda r: r["assignment"]):
        qids += [q for q in r["questions"] if q not in qids]
    return sorted(qids, key=lambda q: (q.split("-", 1)[0], qids.index(q)))
