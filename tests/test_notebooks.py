"""Every chapter notebook matches its records, passes nbgrader validate, and its release fails it."""

import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from autograder.questions import AuthoringError, load_chapter
from autograder.release import check_notebook, disagreements, source_chapters

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = source_chapters(ROOT)


def _nb(chapter: str, folder: str = "source"):
    return nbformat.read(ROOT / folder / chapter / f"{chapter}.ipynb", as_version=4)


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_test_cells_match_records(chapter):
    assert disagreements(load_chapter(chapter), _nb(chapter)) == []


def test_the_release_refuses_a_notebook_that_disagrees_with_its_records(tmp_path):
    """What the release checks (autograder.release.disagreements): each kind of disagreement is named."""
    chapter = "ch01_rooflines"
    nb = _nb(chapter)
    graded = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")]
    tests = [c for c in graded if not c.metadata["nbgrader"].get("solution")]
    tests[0].metadata["nbgrader"]["points"] = 7
    tests[1].metadata["nbgrader"]["locked"] = False
    tests[2].source = tests[2].source.replace("check(", "print(")
    nb.cells.remove(tests[3])
    problems = disagreements(load_chapter(chapter), nb)
    gids = [c.metadata["nbgrader"]["grade_id"] for c in tests[:4]]
    assert problems == [f"test cell {gids[0]} gives 7 points, its record "
                        f"{load_chapter(chapter)[gids[0]].points}",
                        f"test cell {gids[1]} is not locked",
                        f"test cell {gids[2]} is not the two-line grade/check form",
                        f"{gids[3]} has a record but no test cell"]
    course = tmp_path / "course"
    shutil.copytree(ROOT / "source" / chapter, course / "source" / chapter)
    nbformat.write(nb, course / "source" / chapter / f"{chapter}.ipynb")
    with pytest.raises(AuthoringError, match="disagrees with solutions"):
        check_notebook(course, chapter)


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_setup_cell_is_first_and_locked(chapter):
    code = [c for c in _nb(chapter).cells if c.cell_type == "code"]
    meta = code[0].metadata.get("nbgrader", {})
    assert meta.get("grade_id") == "setup" and meta.get("locked"), "the first code cell must be the locked setup"
    assert "print(course.setup(version=" in code[0].source  # before anything touches JAX (see test_bootstrap)


def _validate(path: Path, invert: bool) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "nbgrader", "validate", str(path)] + (["--invert"] if invert else [])
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=ROOT)


@pytest.mark.slow
@pytest.mark.parametrize("chapter", CHAPTERS)
def test_source_passes_validate(chapter):
    proc = _validate(ROOT / "source" / chapter / f"{chapter}.ipynb", invert=False)
    assert "Success! Your notebook passes all the tests." in proc.stdout, proc.stdout[-3000:] + proc.stderr[-2000:]


@pytest.mark.slow
@pytest.mark.parametrize("chapter", CHAPTERS)
def test_release_fails_every_test(chapter):
    proc = _validate(ROOT / "release" / chapter / f"{chapter}.ipynb", invert=True)
    assert "Success! The notebook does not pass any tests." in proc.stdout, proc.stdout[-3000:]
