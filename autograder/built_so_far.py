"""The "What you have built so far" cell: the programs a student has written, chapter by chapter.

Every chapter notebook has a markdown cell, just before its "## Summary", that lists for each chapter up to
and including this one the programs the student wrote there. The release writes it: which questions are
programs comes from the records, and each is named by the heading of the notebook section its test cell
sits in, so a program added to any chapter appears in every later chapter's list without anyone editing
prose. The cell is found by its metadata (``MARK``), rewritten on each release and inserted where missing;
an author never edits it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from .questions import Chapter, chapter_names, load_chapter

MARK = {"scaling_course": {"cell": "built-so-far"}}  # the cell's metadata, by which the release finds it
CELL_ID = "built-so-far"
HEADING = re.compile(r"^#{1,6}\s+(?P<text>.*?)\s*$")  # a markdown (ATX) heading line
SUMMARY = re.compile(r"^##\s+Summary\s*$", re.M)
NOTE = ("<!-- Written by `scaling-course release` from the records and the headings above the programs' test "
        "cells: edit those, never this cell. -->")


def is_built_cell(cell: Any) -> bool:
    return cell.get("metadata", {}).get("scaling_course") == MARK["scaling_course"]


def headings(markdown: str) -> list[str]:
    """The heading lines of a markdown cell, without their #s; fenced code is not markdown."""
    found, fenced = [], False
    for line in markdown.splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        elif not fenced and (m := HEADING.match(line)) and m["text"]:
            found.append(m["text"])
    return found


def program_headings(chapter: Chapter, nb: Any) -> list[str]:
    """The headings of the sections holding ``chapter``'s program test cells (found by grade id, as the
    release writes them), in the notebook's order, each once; a test cell above every heading is named by
    its question id."""
    programs = {q.qid for q in chapter.questions if q.kind == "program"}
    section, found = None, []
    for cell in nb.cells:
        if cell.get("cell_type") == "markdown" and not is_built_cell(cell):
            section = (headings(cell.source) or [section])[-1]
        graded = cell.get("metadata", {}).get("nbgrader", {})
        qid = graded.get("grade_id") if graded.get("grade") and not graded.get("solution") else None
        if qid in programs and (name := section or f"`{qid}`") not in found:
            found.append(name)
    return found


def chapter_line(chapter: Chapter, names: list[str], this: bool) -> str:
    return (f"- **Chapter {int(chapter.name[2:4])} — {chapter.title}{' (this chapter)' if this else ''}:** "
            + "; ".join(names))


def built_so_far(course_dir: Path, chapter: Chapter, nb: Any) -> tuple[str, list[str]]:
    """The cell's text for ``chapter``, whose notebook is ``nb`` (as it stands in memory), from the records
    and the source notebooks of ``course_dir`` of the chapters before it; and what stood in the way."""
    import nbformat

    lines, problems = [], []
    for name in [n for n in chapter_names() if n < chapter.name] + [chapter.name]:
        path = course_dir / "source" / name / f"{name}.ipynb"
        if name != chapter.name and not path.exists():
            continue  # not a chapter of this course
        try:
            records = chapter if name == chapter.name else load_chapter(name)
            notebook = nb if name == chapter.name else nbformat.read(path, as_version=4)
        except Exception as e:  # a records module or notebook being edited: say which, never a traceback
            problems.append(f"the list of what was built needs chapter {name}, which does not load: "
                            f"{type(e).__name__}: {e}")
            continue
        names = program_headings(records, notebook)
        lines += [chapter_line(records, names, name == chapter.name)] if names else []
    body = ("The programs you have written in this course, chapter by chapter, each named by its section:\n\n"
            + "\n".join(lines)) if lines else "You have not written a graded program yet."
    return f"## What you have built so far\n\n{NOTE}\n{body}", problems


def complete_built_cell(course_dir: Path, chapter: Chapter, nb: Any) -> list[str]:
    """Write the cell, in place, just before the first "## Summary" (at the end where there is none): the
    marked cell is rewritten and moved there, or inserted; a second copy is dropped. Returns the problems."""
    from nbformat.v4 import new_markdown_cell

    text, problems = built_so_far(course_dir, chapter, nb)
    marked = [c for c in nb.cells if is_built_cell(c)]
    fresh = {} if any(c.get("id") == CELL_ID for c in nb.cells) else {"id": CELL_ID}
    cell = marked[0] if marked else new_markdown_cell(metadata={k: dict(v) for k, v in MARK.items()}, **fresh)
    if nb.get("nbformat_minor", 5) < 5:
        cell.pop("id", None)  # cell ids came with nbformat 4.5
    cell.source = text
    nb.cells = [c for c in nb.cells if not is_built_cell(c)]
    at = next((i for i, c in enumerate(nb.cells) if c.get("cell_type") == "markdown" and SUMMARY.search(c.source)),
              len(nb.cells))
    nb.cells.insert(at, cell)
    return problems
