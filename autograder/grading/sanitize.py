"""Sanitize: rebuild the notebook to execute from the instructor's master and the student's file.

Trust is a stage. Whatever the submission contains, the executed notebook has the master's locked
cells and test cells (hidden tests included), in the master's order, no outputs (a pre-filled
output could pass for an answer record), the master's kernel, and the student's solution cells
(matched by grade_id; a missing one becomes the release stub, never the reference). Ungraded cells
are the student's own (as in nbgrader), each right after the graded cell it followed, so scratch
work an answer depends on still runs. A cell is cut at ``MAX_CELL_CHARS``. Every repair (and every cut)
is reported.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat
from nbformat import NotebookNode

from .files import read_plain

MAX_NOTEBOOK_BYTES = 20 * 2**20
MAX_CELL_CHARS = 200_000


@dataclass
class Sanitized:
    notebook: NotebookNode
    problems: list[str] = field(default_factory=list)


def _grade_id(cell: Any) -> str | None:
    try:
        gid = cell["metadata"]["nbgrader"]["grade_id"]
    except (KeyError, TypeError):
        return None
    return gid if isinstance(gid, str) else None


def _is_solution(cell: NotebookNode) -> bool:
    return bool(cell.metadata.get("nbgrader", {}).get("solution"))


def read_submission(path: Path | None) -> tuple[list[dict[str, Any]], list[str]]:
    """The student's cells as plain dicts, tolerating what JSON and nbformat would reject."""
    if path is None:
        return [], []
    try:
        if path.stat().st_size > MAX_NOTEBOOK_BYTES:
            return [], [f"the notebook is {path.stat().st_size / 2**20:.0f} MiB, over the "
                        f"{MAX_NOTEBOOK_BYTES // 2**20} MiB limit: graded as empty"]
        raw, cut = read_plain(path, MAX_NOTEBOOK_BYTES)  # a plain file, and no more than that however it grew
        if cut:
            return [], [f"the notebook is over the {MAX_NOTEBOOK_BYTES // 2**20} MiB limit: graded as empty"]
        data = json.loads(raw.decode("utf-8", errors="replace"))
    except (OSError, ValueError, RecursionError) as e:
        return [], [f"the notebook cannot be read ({type(e).__name__}): graded as empty"]
    cells = data.get("cells") if isinstance(data, dict) else None
    if not isinstance(cells, list):
        return [], ["the notebook has no list of cells: graded as empty"]
    good = [c for c in cells if isinstance(c, dict) and c.get("cell_type") in ("code", "markdown", "raw")]
    problems = [] if len(good) == len(cells) else [f"{len(cells) - len(good)} malformed cells ignored"]
    return good, problems


def _full_source(cell: dict[str, Any]) -> str:
    src = cell.get("source", "")
    if isinstance(src, list):
        src = "".join(s for s in src if isinstance(s, str))
    return src if isinstance(src, str) else ""


def _source(cell: dict[str, Any], where: str, cut: list[str]) -> str:
    """The cell's text, at most ``MAX_CELL_CHARS`` of it; a cut one is named (``where``) in ``cut``."""
    src = _full_source(cell)
    if len(src) > MAX_CELL_CHARS:
        cut.append(f"{where} was cut to its first {MAX_CELL_CHARS:,} characters (it had {len(src):,}): the rest "
                   "of it was not run")
    return src[:MAX_CELL_CHARS]


def sanitize(master: NotebookNode, stubs: dict[str, str], submission: Path | None) -> Sanitized:
    """``master``: the source notebook (solutions, hidden tests); ``stubs``: the release text of
    each solution cell by grade_id; ``submission``: the student's file."""
    cells, problems = read_submission(submission)
    by_id = {_grade_id(c): c for c in master.cells if _grade_id(c)}
    taken: dict[str, dict[str, Any]] = {}
    extra_after: dict[str | None, list[NotebookNode]] = {}
    anchor: str | None = None
    duplicates = 0
    cut: list[str] = []
    for cell in cells:
        gid = _grade_id(cell)
        if gid in by_id:
            if gid in taken:
                duplicates += 1
                continue
            taken[gid] = cell
            anchor = gid
        elif cell.get("cell_type") in ("code", "markdown") and _full_source(cell).strip():
            # Ungraded cells are the student's, as in nbgrader: their own version runs, where they
            # put it (after the graded cell it followed). Metadata is dropped: it earns nothing.
            make = nbformat.v4.new_code_cell if cell["cell_type"] == "code" else nbformat.v4.new_markdown_cell
            where = f"your {cell['cell_type']} cell " + (f"after {anchor}" if anchor else "before the graded cells")
            extra_after.setdefault(anchor, []).append(make(_source(cell, where, cut)))
    if duplicates:
        problems.append(f"{duplicates} duplicated graded cells ignored (the first copy counts)")
    out = list(extra_after.get(None, []))
    missing, retyped = [], []
    for cell in master.cells:
        gid = _grade_id(cell)
        if not gid:
            continue  # the master's ungraded cells: the student's own copies (above) stand for them
        new = nbformat.from_dict(json.loads(json.dumps(cell)))
        new.pop("outputs", None)
        if new.cell_type == "code":
            new.outputs, new.execution_count = [], None
        if gid and _is_solution(cell):
            theirs = taken.get(gid)
            if theirs is None:
                missing.append(gid)
                new.source = stubs.get(gid, "")
            else:
                if theirs.get("cell_type") != cell.cell_type:
                    retyped.append(gid)
                new.source = _source(theirs, f"cell {gid}", cut)
        elif gid and gid not in taken:
            missing.append(gid)
        out.append(new)
        out.extend(extra_after.get(gid, []))
    if missing:
        problems.append(f"cells restored from the assignment: {', '.join(missing)}")
    if retyped:
        problems.append(f"cells changed back to their original type: {', '.join(retyped)}")
    problems += cut
    nb = nbformat.v4.new_notebook(cells=out, metadata=json.loads(json.dumps(master.metadata)))
    for i, c in enumerate(nb.cells):
        c["id"] = f"graded-{i:03d}"
    return Sanitized(nb, problems)


def release_stubs(release_nb: NotebookNode) -> dict[str, str]:
    return {gid: c.source for c in release_nb.cells if (gid := _grade_id(c)) and _is_solution(c)}
