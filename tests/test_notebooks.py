"""Every chapter notebook matches its records, passes nbgrader validate, and its release fails it."""

import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from autograder.questions import load_chapter
from autograder.release import source_chapters

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = source_chapters(ROOT)
TEST_CELL = re.compile(r'^### BEGIN HIDDEN TESTS\ngrade\("(?P<qid>[^"]+)", (?P<var>\w+)\)\n### END HIDDEN TESTS\n'
                       r'check\("(?P=qid)", (?P=var)\)$')


def _nb(chapter: str, folder: str = "source"):
    return nbformat.read(ROOT / folder / chapter / f"{chapter}.ipynb", as_version=4)


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_test_cells_match_records(chapter):
    records = {q.qid: q for q in load_chapter(chapter).questions}
    seen = {}
    for cell in _nb(chapter).cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("grade") and not meta.get("solution"):
            m = TEST_CELL.match(cell.source)
            assert m, f"test cell {meta['grade_id']} is not the one-line check/grade form:\n{cell.source}"
            assert m["qid"] == meta["grade_id"], f"{meta['grade_id']}: the cell checks {m['qid']}"
            assert meta["grade_id"] in records, f"{meta['grade_id']}: no record in solutions/"
            assert meta["points"] == records[meta["grade_id"]].points, f"{meta['grade_id']}: points differ"
            assert meta.get("locked"), f"{meta['grade_id']}: test cells must be locked"
            assert meta["grade_id"] not in seen, f"{meta['grade_id']}: two test cells"
            seen[meta["grade_id"]] = cell
    assert set(seen) == set(records), f"records without a test cell: {sorted(set(records) - set(seen))}"


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
