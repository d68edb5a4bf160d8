"""release/ and the self-check data are exactly what regeneration produces, and hold no answers."""

import re

import nbformat
import pytest

from autograder.demo import copy_course
from autograder.release import fingerprint_dir, fingerprint_text, release
from tests.paths import CHAPTERS, ROOT


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


def test_the_release_names_a_slip_the_grader_credits_or_reads_otherwise():
    """The record mistakes the chapter's tests find (a slip equal to the reference, a slip whose diagnosis the grader
    does not give, a reference it refuses) are named at the release, where the author makes them."""
    from autograder.questions import Chapter, Number, Slip
    from autograder.release import record_problems

    def number(reference, *slips):
        return Number(qid="ch01-zz-q", prompt="p", points=1, section="roofline", reference=reference, slips=slips)

    assert record_problems(Chapter("ch01_rooflines", "t", (number(8.37, Slip(16.74, "ratio:2")),))) == []
    assert record_problems(Chapter("ch01_rooflines", "t", (number(8.37, Slip(8.37, "ratio:2")),))) == [
        "ch01-zz-q: the slip 8.37 gets full marks from the grader"]
    assert record_problems(Chapter("ch01_rooflines", "t", (number(8.37, Slip(16.74, "ratio:3")),))) == [
        "ch01-zz-q: the slip 16.74 is diagnosed ratio:2 by the grader, not ratio:3 as its record says"]
    # 8 is a simple answer: its factors are withheld (kinds/number.py), and a withheld code stands for any factor
    assert record_problems(Chapter("ch01_rooflines", "t", (number(8.0, Slip(16.0, "ratio:2")),))) == []


def test_a_release_that_changes_the_shared_plan_from_another_folder_says_so(tmp_path):
    """The installed package keeps one variant plan per chapter for every course folder on the installation: a
    release from another folder that changes it is told what that means (the file is not written here: other
    tests read it)."""
    from autograder.release import COURSE_ROOT, _plan_note, released

    on = released("ch01_rooflines")
    off = {**on, "variants": {**on["variants"], "enabled": False}}
    note = _plan_note("ch01_rooflines", on, off, tmp_path)
    assert "course/fingerprints/ch01_rooflines.json" in note and "release again" in note, note
    assert _plan_note("ch01_rooflines", on, on, tmp_path) == ""  # the same plan: nothing to say
    assert _plan_note("ch01_rooflines", on, off, COURSE_ROOT) == ""  # the package's own checkout: its own plan


@pytest.mark.slow
def test_a_release_says_where_the_readme_has_no_row_for_the_chapter(tmp_path):
    """A maintainer adding a chapter heard of the README's table only from a five-minute test run."""
    course = copy_course(ROOT, tmp_path, ["ch01_rooflines"])
    (course / "README.md").write_text("| chapter | book part |\n|---|---|\n")
    said: list[str] = []
    release(course, ["ch01_rooflines"], say=said.append)
    assert any("README.md has no row for ch01_rooflines" in s for s in said), said
    (course / "README.md").write_text("| `ch01_rooflines` | Rooflines |\n")
    said.clear()
    release(course, ["ch01_rooflines"], say=said.append)
    assert not any("README.md has no row" in s for s in said), said
