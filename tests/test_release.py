"""release/ and the self-check data are exactly what regeneration produces, and hold no answers."""

import re
from pathlib import Path

import nbformat
import pytest

from autograder.demo import copy_course
from autograder.release import fingerprint_dir, fingerprint_text, release, source_chapters

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = source_chapters(ROOT)


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_fingerprints_in_sync(chapter):
    committed = (fingerprint_dir() / f"{chapter}.json").read_text()
    assert committed == fingerprint_text(chapter), "run 'scaling-course release' and commit the result"


@pytest.mark.slow
def test_release_in_sync(tmp_path):
    release(copy_course(ROOT, tmp_path))
    for chapter in CHAPTERS:
        for made in sorted((tmp_path / "release" / chapter).iterdir()):
            committed = ROOT / "release" / chapter / made.name
            assert committed.exists(), f"{committed} is missing: run 'scaling-course release'"
            assert committed.read_bytes() == made.read_bytes(), f"{committed} is stale: run 'scaling-course release'"


def _solution_lines(nb):
    for cell in nb.cells:
        if cell.get("metadata", {}).get("nbgrader", {}).get("solution"):
            body = re.search(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", cell.source, re.S)
            for line in (body.group(1) if body else "").splitlines():
                if len(line.strip()) > 12 and not line.strip().startswith(("#", "def ", "return")):
                    yield line.strip()


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_release_has_no_solutions_or_hidden_tests(chapter):
    source = nbformat.read(ROOT / "source" / chapter / f"{chapter}.ipynb", as_version=4)
    text = (ROOT / "release" / chapter / f"{chapter}.ipynb").read_text()
    lines = list(_solution_lines(source))
    assert lines, "the source notebook should have solution lines to look for"
    for line in lines:
        assert line not in text, f"solution line leaked into the release: {line!r}"
    assert "HIDDEN TESTS" not in text and "grade(" not in text
