"""``scaling-course release``: self-check fingerprints and nbgrader release notebooks from source/.

Two outputs, both committed and both regenerated here: ``course/fingerprints/<chapter>.json`` (from
the records in ``solutions/``) and ``release/<chapter>/`` (nbgrader's generate_assignment on
``source/<chapter>/``). Regenerating on a clean checkout changes no file; a test proves it.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

from .fingerprint import make_chapter
from .grading import STATE
from .questions import AuthoringError, Chapter, load_chapter

CHAPTER_DIR = re.compile(r"^ch\d\d_[a-z0-9_]+$")
# A question's test cell as the author writes it (one line), and as the release completes it: the hidden
# line records the answer for the grader, the visible one self-checks it.
CHECK_LINE = re.compile(r'^check\("(?P<qid>[^"]+)", (?P<var>[A-Za-z_]\w*)\)$')
TEST_CELL = re.compile(r'^### BEGIN HIDDEN TESTS\ngrade\("(?P<qid>[^"]+)", (?P<var>\w+)\)\n### END HIDDEN TESTS\n'
                       r'check\("(?P=qid)", (?P=var)\)$')


def fingerprint_dir() -> Path:
    import course

    return Path(course.__file__).parent / "fingerprints"


def released_questions(chapter: str) -> dict[str, dict[str, Any]] | None:
    """The released self-check data of ``chapter`` by question id (kind, points, ...: written from its
    records), or None where there is none (an assignment that is not a chapter)."""
    try:
        data = json.loads((fingerprint_dir() / f"{chapter}.json").read_text())
    except (OSError, ValueError):
        return None
    questions = data.get("questions") if isinstance(data, dict) else None
    return questions if isinstance(questions, dict) else None


def source_chapters(course_dir: Path) -> list[str]:
    source = course_dir / "source"
    return sorted(d.name for d in source.iterdir() if d.is_dir() and CHAPTER_DIR.match(d.name))


def fingerprint_text(chapter: str) -> str:
    return json.dumps(make_chapter(load_chapter(chapter)), indent=1, sort_keys=True) + "\n"


def test_cell_source(qid: str, variable: str) -> str:
    return f'### BEGIN HIDDEN TESTS\ngrade("{qid}", {variable})\n### END HIDDEN TESTS\ncheck("{qid}", {variable})'


def test_cell_metadata(qid: str, points: float) -> dict[str, Any]:
    """What nbgrader needs to grade, lock and never delete a question's test cell; the points are the record's."""
    return {"deletable": False, "editable": False,
            "nbgrader": {"grade": True, "grade_id": qid, "locked": True, "points": points, "schema_version": 3,
                         "solution": False, "task": False}}


def _question_of(cell: Any) -> tuple[str, str] | None:
    """(question id, answer variable) of a test cell, complete or as the author wrote it; None otherwise."""
    if cell.get("cell_type") != "code" or cell.get("metadata", {}).get("nbgrader", {}).get("solution"):
        return None
    m = TEST_CELL.match(cell.source) or CHECK_LINE.match(cell.source.strip())
    return (m["qid"], m["var"]) if m else None


def complete_test_cells(chapter: Chapter, nb: Any) -> list[str]:
    """Write every question's test cell from its record, in place, and name what cannot be written.

    The author writes one line per question, ``check("<qid>", <variable>)``, in a cell of its own where
    the self-check belongs; the variable is the notebook's, the rest is the record's: the hidden
    ``grade`` line, the grade id, the points and the lock. What stays for the author to fix: a graded
    cell not in that form, an id with no record, a question tested twice or not at all."""
    records = {q.qid: q for q in chapter.questions}
    seen: set[str] = set()
    problems = []
    for cell in nb.cells:
        graded = cell.get("metadata", {}).get("nbgrader", {})
        question = _question_of(cell)
        if question is None:
            if graded.get("grade") and not graded.get("solution"):
                problems.append(f"test cell {graded.get('grade_id', '?')} is not one "
                                f'check("<question id>", <answer>) line')
            continue
        qid, variable = question
        if qid not in records:
            problems.append(f"test cell {qid} has no record in solutions/")
        elif qid in seen:
            problems.append(f"{qid} has two test cells")
        else:
            cell.source = test_cell_source(qid, variable)
            cell.metadata.update(test_cell_metadata(qid, records[qid].points))
        seen.add(qid)
    problems += [f"{q} has a record but no test cell" for q in records if q not in seen]
    return problems


def complete_notebook(course_dir: Path, chapter: str) -> None:
    """Write the source notebook's test cells from the records (the file changes only where they were
    incomplete or stale); refuse, naming every problem, a notebook whose questions do not match."""
    import nbformat

    path = course_dir / "source" / chapter / f"{chapter}.ipynb"
    text = path.read_text()
    nb = nbformat.reads(text, as_version=4)
    problems = complete_test_cells(load_chapter(chapter), nb)
    if problems:
        raise AuthoringError(f"source/{chapter} disagrees with solutions/{chapter}.py:\n  " + "\n  ".join(problems))
    completed = nbformat.writes(nb) + "\n"
    if completed != text:
        path.write_text(completed)


def write_fingerprints(chapter: str) -> Path:
    path = fingerprint_dir() / f"{chapter}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    text = fingerprint_text(chapter)
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return path


def generate(course_dir: Path, chapter: str, database: bool = False, release_dir: Path | None = None) -> Path:
    """nbgrader generate_assignment for one chapter; with ``database`` it also registers the
    assignment and its grade cells in the gradebook (the grader needs that, the release does not).
    ``release_dir`` writes the student copy elsewhere than release/."""
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config import Config

    # nbgrader runs the `alembic` command when it creates a gradebook: make this environment's
    # scripts findable even when the environment is not activated (.venv/bin/scaling-course ...).
    scripts = str(Path(sys.executable).parent)
    if scripts not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = scripts + os.pathsep + os.environ.get("PATH", "")
    config = Config()
    config.CourseDirectory.root = str(course_dir)
    config.GenerateAssignment.no_database = not database
    config.SaveCells.enabled = database
    config.Exchange.root = str(course_dir / STATE / "exchange")
    _load_course_config(course_dir, config)
    if release_dir is not None:
        config.CourseDirectory.release_directory = str(release_dir)
    api = NbGraderAPI(coursedir=CourseDirectory(config=config), config=config)
    result = api.generate_assignment(chapter, force=True, create=True)
    if not result["success"]:
        raise RuntimeError(f"nbgrader could not generate {chapter}:\n{result['error']}\n{result['log']}")
    return (release_dir or course_dir / "release") / chapter


def _load_course_config(course_dir: Path, config) -> None:
    from traitlets.config.loader import PyFileConfigLoader

    path = course_dir / "nbgrader_config.py"
    if path.exists():
        config.merge(PyFileConfigLoader(path.name, str(course_dir)).load_config())
        config.CourseDirectory.root = str(course_dir)


def release(course_dir: Path, chapters: list[str] | None = None) -> list[Path]:
    """Regenerate fingerprints and release notebooks for ``chapters`` (default: all in source/)."""
    names = chapters or source_chapters(course_dir)
    unknown = sorted(set(names) - set(source_chapters(course_dir)))
    if unknown:
        raise FileNotFoundError(f"no source/{unknown[0]}/ in {course_dir}; chapters there: "
                                f"{', '.join(source_chapters(course_dir)) or 'none'}")
    out = []
    for name in names:
        complete_notebook(course_dir, name)
        write_fingerprints(name)
        out.append(generate(course_dir, name))
    return out
