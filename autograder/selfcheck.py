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

import json
import re
import shlex
import uuid
from pathlib import Path

import nbformat

from course import progress

from .kernel import run_notebook
from .messages import phrase
from .notebook_json import half_pairs, text_only
from .questions import CHECK_LINE, QID
from .record import cell_error, why_no_record

_UNDEFINED = re.compile(r"name '(?P<name>[^']+)' is not defined")
WIDTH = 110  # of a row of the table: what goes further is cut


def questions_in(nb: nbformat.NotebookNode) -> list[str]:
    """The question ids of a notebook's test cells, in order (from their check lines, which stay
    visible in a release notebook whatever happened to the metadata)."""
    found: list[str] = []
    for cell in nb.cells:
        if cell.cell_type == "code":
            found += [m["qid"] for m in CHECK_LINE.finditer(cell.source) if QID.match(m["qid"])]
    return list(dict.fromkeys(found))


def execute(nb: nbformat.NotebookNode, folder: Path, timeout: int) -> tuple[str, nbformat.NotebookNode]:
    """Run the notebook in a fresh kernel in ``folder``, errors and all; returns the run's id in the progress file
    and the executed notebook (whose outputs say why a check recorded nothing)."""
    run = uuid.uuid4().hex
    # The kernel writes where we read, tagged with this run.
    env = {progress.ENV_RUN: run, progress.ENV_PATH: str(progress.path())}
    run_notebook(nb, folder, env, timeout)
    return run, nb


def unchecked(nb: nbformat.NotebookNode, qid: str) -> str:
    """The table's words for a question whose check recorded nothing in this run. A check whose variable
    is undefined most often follows an answer cell still raising its placeholder: that is a question not
    answered yet, not a fault to hunt for; an answer cell that stopped on another error is named, and one
    that ran through without defining the name (a renamed variable or function) is said to."""
    cells = [c for c in nb.cells if c.cell_type == "code"]
    at = next((i for i, c in enumerate(cells) if f'check("{qid}"' in c.source), None)
    if at is None:
        return phrase("selfcheck:missing")
    error = cell_error(cells[at])
    if _cannot_check_here(qid, error) is not None:
        return phrase("selfcheck:cannot_check")
    if error.get("ename") != "NameError":
        return f"not checked: {why_no_record(cells[at])}"
    answer = next((c for c in reversed(cells[:at]) if not CHECK_LINE.search(c.source)), None)
    before = cell_error(answer) if answer is not None else {}
    undefined = _UNDEFINED.search(str(error.get("evalue", "")))
    if not before and answer is not None and answer.get("execution_count") is not None and undefined:
        return phrase("selfcheck:undefined", name=undefined["name"])
    if before.get("ename", "NotImplementedError") == "NotImplementedError":
        return f"{NOT_ANSWERED}: {error.get('evalue', '')}"
    evalue = _CELL_FILE.sub(r"(line \g<line> of the answer cell)", str(before.get("evalue", "")))
    return f"not checked: the answer cell above stopped with {before['ename']}: {evalue}"


NOT_ANSWERED = "not answered yet"
# IPython's name for a cell's code in a SyntaxError, "(1607251253.py, line 1)": a temporary file no learner has.
_CELL_FILE = re.compile(r"\(\d+\.py, line (?P<line>\d+)\)")


def _cannot_check_here(qid: str, error: dict) -> str | None:
    """What the check said where this machine, not the answer, kept it from checking (too few devices): the
    sentence after its head, which says what to do; else None."""
    from course.answers import CANNOT_CHECK_HERE

    head = f"{qid}: {CANNOT_CHECK_HERE}. "
    evalue = str(error.get("evalue", ""))
    return evalue[len(head):] if error.get("ename") == "AnswerError" and evalue.startswith(head) else None


def read_notebook(path: Path) -> nbformat.NotebookNode | str:
    """The learner's notebook, or in one line why it cannot be one (a file that is no JSON, JSON that is no
    notebook: nbformat raises many kinds of error on those, and a cell list that is no list passes its read)."""
    not_a_notebook = f"cannot read {path}: it is not a Jupyter notebook (no list of cells)"
    try:
        data = json.loads(path.read_bytes())
    except OSError as e:
        return f"cannot read {path}: {e.strerror or type(e).__name__}"
    except ValueError:  # not JSON, or not UTF-8
        return f"cannot read {path}: it is not a Jupyter notebook (not JSON)"
    if not isinstance(data, dict) or not isinstance(data.get("cells", data.get("worksheets")), list):
        return not_a_notebook  # {} or [] (the notebook format 3 had worksheets of cells)
    data, halves = text_only(data)
    if halves:
        print(f"scaling-course selfcheck: {path.name} holds {half_pairs(halves)}: run with \ufffd in its place "
              "(your file is not changed)")
    try:
        nb = nbformat.reads(json.dumps(data), as_version=4, capture_validation_error={})
        cells = nb.get("cells")
        if not isinstance(cells, list) or not all(isinstance(c, dict) and isinstance(c.get("source"), str)
                                                  and c.get("cell_type") for c in cells):
            return not_a_notebook
    except Exception as e:  # whatever else nbformat makes of a broken file: one line, never a traceback
        lines = str(e).strip().splitlines()
        return f"cannot read {path}: {lines[0][:200] if lines else type(e).__name__}"
    return nb


def selfcheck(path: Path, timeout: int = 600) -> int:
    nb = read_notebook(path)
    if isinstance(nb, str):
        print(f"scaling-course selfcheck: {nb}")
        return 2
    qids = questions_in(nb)
    if not qids:
        print(f"scaling-course selfcheck: {path} has no check cells; is it a course notebook?")
        return 2
    if not set_progress_aside():  # the checks must not write over a file they cannot read
        return 2
    print(f"Running {path.name} in a fresh kernel (your file is not changed) ...")
    run, executed = execute(nb, path.parent, timeout)
    for line in report(executed, run, progress.load(), command=f"scaling-course selfcheck {shlex.quote(str(path))}"):
        print(line)
    return 0


def set_progress_aside() -> bool:
    """Before a run: an unreadable progress file is moved aside, and the learner told where (False, and told,
    where it cannot be)."""
    moved = progress.set_aside()
    notice = progress.take_notice()
    if notice:
        print(notice)
    return moved


def report(executed: nbformat.NotebookNode, run: str, records: dict,
           command: str = "scaling-course selfcheck NOTEBOOK") -> list[str]:
    """The table of this run's verdicts, over every question of the chapter (the chapter's records are the
    list: a deleted check cell still counts, in a row that says so), and the totals under it. ``command``: the
    command line that ran it, which the advice for questions this machine cannot check repeats (a command line has
    no kernel to restart, nor a cell for %env)."""
    found = questions_in(executed)
    chapter = found[0].split("-", 1)[0]
    points = _points(chapter)
    qids = list(dict.fromkeys([*found, *points]))  # the notebook's order; a question without a check cell last
    cells = {qid: next((c for c in executed.cells if c.cell_type == "code" and f'check("{qid}"' in c.source), None)
             for qid in qids}
    rows, earned, total, elsewhere = [], 0.0, 0.0, {}
    for qid in qids:
        pts = points.get(qid, 1.0)
        entry = records.get(qid) or {}
        total += pts
        if entry.get("run") != run:
            rows.append((qid, f"0/{pts:g}", unchecked(executed, qid)))
            why = _cannot_check_here(qid, cell_error(cells[qid])) if cells[qid] is not None else None
            if why is not None:
                elsewhere.setdefault(why, []).append(pts)
            continue
        earned += pts * entry["score"]
        mark = {"correct": "✓ correct", "partial": "~ partly right:", "invalid": "? unreadable:"}.get(
            entry["status"], "✗")
        text = mark if entry["status"] == "correct" else f"{mark} {entry.get('message', '')}".strip()
        rows.append((qid, f"{pts * entry['score']:g}/{pts:g}", text))
    width = max(len(q) for q in qids)
    lines = ["", f"{'question':<{width}}  {'points':>7}  result"]
    lines += [f"{qid:<{width}}  {pts:>7}  {_one_line(text)}" for qid, pts, text in rows]
    lines.append("")
    for why, pts in elsewhere.items():
        questions = f"{len(pts)} question{'s' if len(pts) > 1 else ''}"
        lines.append(phrase("selfcheck:cannot_check_below", questions=questions,
                            points=f"{sum(pts):g} point{'s' if sum(pts) != 1 else ''}", why=_on_the_command_line(
                                why, command)))
    solved = sum(progress.solved(records, q) for q in qids)
    unchecked_points = sum(sum(pts) for pts in elsewhere.values())
    this_run = (phrase("selfcheck:total_checked", earned=f"{earned:g}", checked=f"{total - unchecked_points:g}",
                       unchecked=f"{unchecked_points:g}") if unchecked_points else f"{earned:g} of {total:g} points")
    lines.append(f"This run: {this_run}. Solved at least once, over all sessions: {solved} of "
                 f"{len(qids)} questions. Progress file: {progress.path()}")
    if not any((records.get(q) or {}).get("run") == run for q in qids):
        texts = [text for _, _, text in rows]
        first = next((c for c in executed.cells if c.cell_type == "code"), None)
        unanswered = any(t.startswith(NOT_ANSWERED) for t in texts) and all(
            t.startswith(NOT_ANSWERED) or t == phrase("selfcheck:cannot_check") for t in texts)
        ran = first is not None and not cell_error(first)  # the setup cell, which the checks need
        lines.append(phrase("selfcheck:nothing_answered" if unanswered and ran else "selfcheck:no_verdict"))
    return lines


def _on_the_command_line(why: str, command: str) -> str:
    """The advice of a check that this machine kept from checking, for the command line: its notebook steps
    (restart the kernel, %env in a cell above the first) become the command to run again."""
    notebook_steps = phrase("selfcheck:notebook_steps")
    if notebook_steps not in why:
        return why
    return why.replace(notebook_steps, phrase("selfcheck:command_steps", command=command))


def show_progress() -> int:
    """Solved questions per chapter, from the progress file and the shipped self-check data."""
    from course.answers import chapter_table

    why = progress.problem()
    if why is not None:
        print(phrase("progress:unreadable", path=progress.path(), why=why))
        return 1
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


def _one_line(text: str, limit: int = WIDTH) -> str:
    text = " ".join(line for line in text.splitlines() if not line.startswith("A hint is unlocked"))
    return text if len(text) <= limit else text[:limit - 1] + "…"
