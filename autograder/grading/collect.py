"""Collect: read each test cell's answer record back out of the executed notebook.

Only the cell whose nbgrader grade_id is the question's id is read, and only records for that id;
the last one counts. A missing record is explained from the cell's own error, if it has one
("name 'q1_bytes' is not defined"), so the student learns why nothing was recorded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from nbformat import NotebookNode

from ..record import read, why_no_record

NO_ANSWER = object()


@dataclass(frozen=True)
class Collected:
    answer: Any  # the recorded answer, or NO_ANSWER
    reason: str = ""  # why there is no answer
    kind: str = ""  # the question kind the record claims (feedback shows programs differently)
    setting: Any = None  # the record's {"name", "values"}: the values the kernel computed with (varied questions)


def collect(nb: NotebookNode, qids: list[str]) -> dict[str, Collected]:
    cells, answers = {}, {}  # the test cell of each question, and the answer cell before it
    answer = None
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("solution") and cell.cell_type == "code":
            answer = cell
        gid = meta.get("grade_id")
        if gid in qids and cell.cell_type == "code" and gid not in cells:
            cells[gid], answers[gid] = cell, answer
    out = {}
    for qid in qids:
        cell = cells.get(qid)
        if cell is None:
            out[qid] = Collected(NO_ANSWER, "the test cell is missing")
            continue
        rec = read(cell.get("outputs", []), qid)
        out[qid] = Collected(rec["answer"], kind=str(rec.get("kind")), setting=rec.get("setting")) if rec \
            else Collected(NO_ANSWER, why_no_record(cell, answers[qid]))
    return out


def other_settings(recorded: dict[str, Collected], assigned: dict[str, dict[str, Any]]) -> list[str]:
    """A note for the staff per exercise setting whose records say the kernel computed with other values than
    the student's own (``assigned``, by setting): the grade stands, judged against the student's values, but
    a notebook that changed its own setting (or claimed another student) deserves a look. Records without
    values (an older course version) and settings not assigned say nothing."""
    found: dict[str, list[str]] = {}
    for qid, c in recorded.items():
        s = c.setting if isinstance(c.setting, dict) else {}
        name = s.get("name")
        if isinstance(name, str) and name in assigned and _same(s.get("values")) != _same(assigned[name]):
            found.setdefault(name, []).append(qid)
    return [f"{name}: the notebook computed with another exercise setting than its own ({', '.join(qids[:5])}); it "
            "was graded with its own values" for name, qids in found.items()]


def worked_with_other_values(shown: dict[str, Any], assigned: dict[str, dict[str, Any]]) -> list[str]:
    """A note per exercise setting whose values the saved notebook last showed (``sanitize.shown_settings``) are
    not those it is graded with: numbers typed from the old values are judged at the graded ones, and the student
    and the staff should know why (the variant plan changed after the notebooks went out, or the notebook ran
    without the student's id, or in practice mode)."""
    from ..variants import describe

    notes = []
    for name, values in shown.items():
        if name in assigned and _same(values) != _same(assigned[name]):
            try:
                was, now = describe(values), describe(assigned[name])
            except Exception:  # values the student's file made up: named without them
                was, now = "other values", describe(assigned[name])
            notes.append(f"{name}: the notebook was last run with {was[:200]}, and is graded with {now} (the "
                         "student's values): numbers typed from the old values are judged at these. Was the "
                         "variant plan changed after the notebooks went out, or the notebook run without the "
                         "student's id?")
    return notes


def _same(values: Any) -> str:
    import json

    return json.dumps(values, sort_keys=True, default=str)
