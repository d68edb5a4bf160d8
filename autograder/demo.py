"""``scaling-course demo``: the whole course cycle in a temporary course directory.

Builds the release, makes three sample submissions per chapter from the records alone (the
reference solution; a partly wrong one, where every other question gets one of its listed slips;
an untouched release copy), grades them, and prints the grade table and the values each sample
student was dealt for the varied exercises (variants.py): each is graded with their own.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import nbformat

from .grading.pipeline import grade
from .questions import CHECK_LINE, Choice, Formula, Number, load_chapter
from .release import release, released, source_chapters
from .variants import dealt, describe

STUDENTS = ("reference", "partly-wrong", "untouched")


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


def with_answers(nb: nbformat.NotebookNode, answers: dict[str, Any], note: str) -> nbformat.NotebookNode:
    """The notebook with each question of ``answers`` (qid -> a formula, number or option) answered so,
    assigned at the end of the solution cell that precedes its test cell, with the comment ``note``."""
    nb = nbformat.from_dict(json.loads(json.dumps(nb)))
    solution = None
    for c in nb.cells:
        if c.get("metadata", {}).get("nbgrader", {}).get("solution"):
            solution = c
        m = CHECK_LINE.search(c.source) if c.cell_type == "code" else None
        if m and m["qid"] in answers and solution is not None:
            answer = answers[m["qid"]]
            # an expression as a student would have it, from its text: later cells compute with it
            value = repr(answer) if isinstance(answer, str | float | int) else expression_line(answer)
            solution.source += f"\n{m['var']} = {value}  # {note}"
    return nb


def expression_line(answer: Any) -> str:
    """Python that makes ``answer`` in a notebook from its text, with the course's symbols: read with sympy's own
    names, N, S, E, I and O are a function and constants, and 2*N raised (18 slips of eight chapters never took
    effect in a sample notebook)."""
    return f"__import__('sympy').sympify({str(answer)!r}, locals=vars(__import__('course.symbols').symbols))"


def with_slips(nb: nbformat.NotebookNode, chapter: str, every: int = 2,
               setting: dict[str, dict] | None = None) -> nbformat.NotebookNode:
    """Every ``every``-th formula, number or choice question answered with its first listed slip;
    ``setting``: the student's values (variants.py), whose records' slips these are."""
    ch = load_chapter(chapter).variant(setting or {})
    scalar = [q for q in ch.questions if isinstance(q, Formula | Number | Choice)]
    return with_answers(nb, {q.qid: q.slips[0].answer for q in scalar[::every]}, "a typical slip")


def copy_course(repo: Path, course: Path, chapters: Iterable[str] | None = None) -> Path:
    """A course directory apart from the repository (its nbgrader config and the source notebooks of every
    chapter, or of those named): the demo and the tests release and grade there, never in the checkout."""
    course.mkdir(parents=True, exist_ok=True)
    shutil.copy(repo / "nbgrader_config.py", course / "nbgrader_config.py")
    for chapter in source_chapters(repo) if chapters is None else chapters:
        shutil.copytree(repo / "source" / chapter, course / "source" / chapter, dirs_exist_ok=True)
    return course


def reference_notebook(course: Path, chapter: str) -> nbformat.NotebookNode:
    """The released notebook answered with the source's solutions: what a student who gets all right hands in."""
    name = f"{chapter}.ipynb"
    return filled_notebook(nbformat.read(course / "release" / chapter / name, as_version=4),
                           nbformat.read(course / "source" / chapter / name, as_version=4))


def submit(course: Path, student: str, chapter: str, nb: nbformat.NotebookNode | bytes) -> Path:
    """Put ``nb`` where ``nbgrader collect`` would: submitted/<student>/<chapter>/<chapter>.ipynb."""
    folder = course / "submitted" / student / chapter
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{chapter}.ipynb"
    if isinstance(nb, bytes):
        path.write_bytes(nb)
    else:
        nbformat.write(nb, path)
    return path


def sample_notebook(course: Path, chapter: str, kind: str, student: str) -> nbformat.NotebookNode:
    """One of the demo's ``STUDENTS`` as ``student`` would hand it in: the reference's cells compute with the
    values dealt at run time, and a partly wrong one's slips are those of the values ``student`` is dealt."""
    if kind == "untouched":
        return nbformat.read(course / "release" / chapter / f"{chapter}.ipynb", as_version=4)
    reference = reference_notebook(course, chapter)
    return reference if kind == "reference" else with_slips(reference, chapter,
                                                            setting=settings_of(chapter, student))


def make_submissions(course: Path, chapter: str) -> None:
    for student in STUDENTS:
        submit(course, student, chapter, sample_notebook(course, chapter, student, student))


def settings_of(chapter: str, student: str) -> dict[str, dict]:
    """The values ``student`` is dealt in ``chapter`` (the released plan: on, unless the config says off)."""
    data = released(chapter)
    return dealt(data, student) if data else {}


def run_demo(repo: Path, keep: Path | None = None, jobs: int | None = None,
             chapters: list[str] | None = None) -> int:
    course = copy_course(repo, keep or Path(tempfile.mkdtemp(prefix="scaling-course-demo-")))
    chapters = chapters or source_chapters(course)
    print(f"Course directory: {course}\nReleasing {', '.join(chapters)} ...")
    release(course, chapters)
    for chapter in chapters:
        make_submissions(course, chapter)
        print(f"\nGrading {chapter} for {', '.join(STUDENTS)} ...")
        summary = grade(course, chapter, jobs=jobs, force=True)
        print_table(chapter, summary.results)
        print_settings(summary.results)
        for student, problems in sorted(summary.problems.items()):
            print(f"  notes for {student}: {'; '.join(problems)}")
    print(f"\nFeedback: {course / 'feedback'}/<student>/<chapter>/<chapter>.html")
    print(f"Grades:   {course / 'grades.csv'} (and nbgrader's gradebook {course / 'gradebook.db'})")
    return 0


def print_settings(results: list[dict]) -> None:
    """Each sample student's values of the varied exercises: their grades were judged with them."""
    for r in sorted(results, key=lambda r: STUDENTS.index(r["student"]) if r["student"] in STUDENTS else 99):
        if r.get("setting"):
            print(f"  {r['student']}'s setting: " + "; ".join(f"{name} {describe(labels)}"
                                                          for name, labels in r["setting"].items()))


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
