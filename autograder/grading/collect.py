"""Collect: read each test cell's answer record back out of the executed notebook.

Only the cell whose nbgrader grade_id is the question's id is read, and only records for that id;
the last one counts. A missing record is explained from the cell's own error, if it has one
("name 'q1_bytes' is not defined"), so the student learns why nothing was recorded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from nbformat import NotebookNode

from ..record import read

NO_ANSWER = object()


@dataclass(frozen=True)
class Collected:
    answer: Any  # the recorded answer, or NO_ANSWER
    reason: str = ""  # why there is no answer
    kind: str = ""  # the question kind the record claims (feedback shows programs differently)


def collect(nb: NotebookNode, qids: list[str]) -> dict[str, Collected]:
    cells = {}
    for cell in nb.cells:
        gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if gid in qids and cell.cell_type == "code" and gid not in cells:
            cells[gid] = cell
    out = {}
    for qid in qids:
        cell = cells.get(qid)
        if cell is None:
            out[qid] = Collected(NO_ANSWER, "the test cell is missing")
            continue
        rec = read(cell.get("outputs", []), qid)
        out[qid] = Collected(rec["answer"], kind=str(rec.get("kind"))) if rec else Collected(NO_ANSWER, _why(cell))
    return out


def _why(cell: NotebookNode) -> str:
    for out in cell.get("outputs", []):
        if out.get("output_type") == "error":
            return f"the test cell stopped with {out.get('ename', 'an error')}: {str(out.get('evalue', ''))[:200]}"
    if cell.get("execution_count") is None:
        return "the test cell did not run (an earlier cell hung, crashed the kernel or hit a limit)"
    return "the test cell ran but recorded nothing"
