"""``scaling-course demo``: the whole course cycle in a temporary course directory.

Builds the release, makes three sample submissions per chapter from the records alone (the
reference solution; a partly wrong one, where every other question gets one of its listed slips;
an untouched release copy), grades them, and prints the grade table.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from pathlib import Path

import nbformat

from .grading.pipeline import grade
from .questions import Choice, Formula, Number, load_chapter
from .release import release, source_chapters

STUDENTS = ("reference", "partly-wrong", "untouched")
_TEST_LINE = re.compile(r'^check\("(?P<qid>[^"]+)",\s*(?P<var>\w+)\)\s*$', re.M)


def filled_notebook(release_nb: nbformat.NotebookNode, source_nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The release notebook with every solution cell as the instructor wrote it (markers removed)."""
    answers = {c.metadata["nbgrader"]["grade_id"]: c.source for c in source_nb.cells
               if c.get("metadata", {}).get("nbgrader", {}).get("solution")}
    nb = nbformat.from_dict(json.loads(json.dumps(release_nb)))
    for c in nb.cells:
        gid = c.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if gid in answers:
            c.source = re.sub(r"^\s*### (BEGIN|END) SOLUTION\s*$\n?", "", answers[gid], flags=re.M)
    return nb


def with_slips(nb: nbformat.NotebookNode, chapter: str, every: int = 2) -> nbformat.NotebookNode:
    """Every ``every``-th formula, number or choice question answered with its first listed slip,
    assigned at the end of the solution cell that precedes its test cell."""
    ch = load_chapter(chapter)
    nb = nbformat.from_dict(json.loads(json.dumps(nb)))
    scalar = [q for q in ch.questions if isinstance(q, Formula | Number | Choice)]
    chosen = {q.qid: q for q in scalar[::every]}
    solution = None
    for c in nb.cells:
        if c.get("metadata", {}).get("nbgrader", {}).get("solution"):
            solution = c
        m = _TEST_LINE.search(c.source) if c.cell_type == "code" else None
        if m and m["qid"] in chosen and solution is not None:
            q = chosen[m["qid"]]
            slip = q.slips[0].answer
            if isinstance(q, Formula):  # an expression, as a student would have it: later cells compute with it
                value = f"__import__('sympy').sympify({str(slip)!r})"
            else:
                value = repr(slip) if isinstance(slip, str | float | int) else repr(str(slip))
            solution.source += f"\n{m['var']} = {value}  # a typical slip"
    return nb


def make_submissions(course: Path, chapter: str) -> None:
    name = f"{chapter}.ipynb"
    release_nb = nbformat.read(course / "release" / chapter / name, as_version=4)
    source_nb = nbformat.read(course / "source" / chapter / name, as_version=4)
    reference = filled_notebook(release_nb, source_nb)
    notebooks = {"reference": reference, "partly-wrong": with_slips(reference, chapter), "untouched": release_nb}
    for student, nb in notebooks.items():
        folder = course / "submitted" / student / chapter
        folder.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, folder / name)


def run_demo(repo: Path, keep: Path | None = None, jobs: int | None = None,
             chapters: list[str] | None = None) -> int:
    course = keep or Path(tempfile.mkdtemp(prefix="scaling-course-demo-"))
    course.mkdir(parents=True, exist_ok=True)
    shutil.copy(repo / "nbgrader_config.py", course / "nbgrader_config.py")
    shutil.copytree(repo / "source", course / "source", dirs_exist_ok=True)
    chapters = chapters or source_chapters(course)
    print(f"Course directory: {course}\nReleasing {', '.join(chapters)} ...")
    release(course, chapters)
    for chapter in chapters:
        make_submissions(course, chapter)
        print(f"\nGrading {chapter} for {', '.join(STUDENTS)} ...")
        summary = grade(course, chapter, jobs=jobs, force=True)
        print_table(chapter, summary.results)
        for student, problems in sorted(summary.problems.items()):
            print(f"  notes for {student}: {'; '.join(problems)}")
    print(f"\nFeedback: {course / 'feedback'}/<student>/<chapter>/<chapter>.html")
    print(f"Grades:   {course / 'grades.csv'} (and nbgrader's gradebook {course / 'gradebook.db'})")
    return 0


def print_table(chapter: str, results: list[dict]) -> None:
    by_student = {r["student"]: r for r in results}
    students = [s for s in STUDENTS if s in by_student] + sorted(set(by_student) - set(STUDENTS))
    qids = list(next(iter(by_student.values()))["questions"]) if by_student else []
    width = max([len(q) for q in qids] + [10])
    print(f"{'question':<{width}}  {'points':>6}  " + "  ".join(f"{s:>12}" for s in students))
    for qid in qids:
        pts = by_student[students[0]]["questions"][qid]["points"]
        cells = "  ".join(f"{by_student[s]['questions'][qid]['score']:>12g}" for s in students)
        print(f"{qid:<{width}}  {pts:>6g}  {cells}")
    totals = "  ".join(f"{by_student[s]['score']:>5g} ({by_student[s]['score'] / by_student[s]['max_score']:>4.0%})"
                       for s in students)
    print(f"{'total':<{width}}  {by_student[students[0]]['max_score']:>6g}  {totals}")
