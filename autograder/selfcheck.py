"""``scaling-course selfcheck`` and ``scaling-course progress``: grading for self-study learners.

A learner has no gradebook and no hidden tests, only the release notebook and the self-check data
shipped with the package. ``selfcheck`` runs their own filled notebook top to bottom in a fresh
kernel (their copy is not modified), lets every check cell record its verdict in the progress
file, and prints the verdicts of this run as a table. ``progress`` reads the same file: what is
solved, per chapter, across every session in JupyterLab or on the command line.

An application, not part of the core: it reads the learner's progress and the shipped self-check data
through ``course``, as the learner's notebooks do.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import nbformat

from course import progress

from .kernel import run_notebook
from .questions import QID
from .record import cell_error, why_no_record

_CHECK = re.compile(r'^check\("(?P<qid>[^"]+)"', re.M)


def questions_in(nb: nbformat.NotebookNode) -> list[str]:
    """The question ids of a notebook's test cells, in order (from their check lines, which stay
    visible in a release notebook whatever happened to the metadata)."""
    found: list[str] = []
    for cell in nb.cells:
        if cell.cell_type == "code":
            found += [m["qid"] for m in _CHECK.finditer(cell.source) if QID.match(m["qid"])]
    return list(dict.fromkeys(found))


def execute(path: Path, timeout: int) -> tuple[str, nbformat.NotebookNode]:
    """Run the notebook in a fresh kernel, errors and all; returns the run's id in the progress file and
    the executed notebook (whose outputs say why a check recorded nothing)."""
    run = uuid.uuid4().hex
    # The kernel writes where we read, tagged with this run.
    env = {progress.ENV_RUN: run, progress.ENV_PATH: str(progress.path())}
    nb = nbformat.read(path, as_version=4)
    run_notebook(nb, path.parent, env, timeout)
    return run, nb


def unchecked(nb: nbformat.NotebookNode, qid: str) -> str:
    """The table's words for a question whose check recorded nothing in this run. A check whose variable
    is undefined most often follows an answer cell still raising its placeholder: that is a question not
    answered yet, not a fault to hunt for; an answer cell that stopped on another error is named."""
    cells = [c for c in nb.cells if c.cell_type == "code"]
    at = next((i for i, c in enumerate(cells) if f'check("{qid}"' in c.source), None)
    if at is None:
        return "not checked: its check cell is missing"
    error = cell_error(cells[at])
    if error.get("ename") != "NameError":
        return f"not checked: {why_no_record(cells[at])}"
    answer = next((c for c in reversed(cells[:at]) if not _CHECK.search(c.source)), None)
    before = cell_error(answer) if answer is not None else {}
    if before.get("ename", "NotImplementedError") == "NotImplementedError":
        return f"not answered yet: {error.get('evalue', '')}"
    return f"not checked: the answer cell above stopped with {before['ename']}: {before.get('evalue', '')}"


def selfcheck(path: Path, timeout: int = 600) -> int:
    try:
        nb = nbformat.read(path, as_version=4)
    except (OSError, ValueError) as e:
        print(f"scaling-course selfcheck: cannot read {path}: {e}")
        return 2
    qids = questions_in(nb)
    if not qids:
        print(f"scaling-course selfcheck: {path} has no check cells; is it a course notebook?")
        return 2
    chapter = qids[0].split("-", 1)[0]
    print(f"Running {path.name} in a fresh kernel (your file is not changed) ...")
    run, executed = execute(path, timeout)
    records = progress.load()
    points = _points(chapter)
    rows, earned, total = [], 0.0, 0.0
    for qid in qids:
        pts = points.get(qid, 1.0)
        entry = records.get(qid) or {}
        total += pts
        if entry.get("run") != run:
            rows.append((qid, f"0/{pts:g}", unchecked(executed, qid)))
            continue
        earned += pts * entry["score"]
        mark = {"correct": "✓ correct", "partial": "~ partly right:", "invalid": "? unreadable:"}.get(
            entry["status"], "✗")
        text = mark if entry["status"] == "correct" else f"{mark} {entry.get('message', '')}".strip()
        rows.append((qid, f"{pts * entry['score']:g}/{pts:g}", text))
    width = max(len(q) for q in qids)
    print(f"\n{'question':<{width}}  {'points':>7}  result")
    for qid, pts, text in rows:
        print(f"{qid:<{width}}  {pts:>7}  {_one_line(text)}")
    solved = sum(progress.solved(records, q) for q in qids)
    print(f"\nThis run: {earned:g} of {total:g} points. Solved so far, over all sessions: {solved} of "
          f"{len(qids)} questions. Progress file: {progress.path()}")
    if not any((records.get(q) or {}).get("run") == run for q in qids):
        print("No check recorded its verdict: does the first cell run? Is the progress file writable?")
    return 0


def show_progress() -> int:
    """Solved questions per chapter, from the progress file and the shipped self-check data."""
    from course.answers import chapter_table

    records = progress.load()
    table = chapter_table()
    width = max(len(c) for c in table)
    print(f"{'chapter':<{width}}  {'solved':>10}  {'tried':>5}  title")
    for chapter, (title, qids) in table.items():
        done = sum(progress.solved(records, q) for q in qids)
        tried = sum(q in records for q in qids)
        print(f"{chapter:<{width}}  {done:>3} of {len(qids):<4}  {tried:>5}  {title}")
    print(f"\nProgress file: {progress.path()}")
    return 0


def _points(prefix: str) -> dict[str, float]:
    from course.answers import fingerprints

    try:
        return {q: float(e["points"]) for q, e in fingerprints(prefix).items()}
    except LookupError:
        return {}


def _one_line(text: str, limit: int = 110) -> str:
    text = " ".join(line for line in text.splitlines() if not line.startswith("A hint is unlocked"))
    return text if len(text) <= limit else text[:limit - 1] + "…"
