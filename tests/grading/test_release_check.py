"""An erratum typed into solutions/ is graded only once it is released (grading/release_check.py): a grade that
took the records' references and the release's points, judged otherwise than the students' self-check."""

import re
import shutil
import subprocess

import nbformat
import pytest

from autograder.demo import copy_course
from autograder.grading.pipeline import CourseError, prepare
from tests.paths import ROOT

CHAPTER = "ch01_rooflines"
pytestmark = pytest.mark.slow


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "scaling-course" / "released"


def _course(tmp_path, edit=None):
    """A course folder with its own records (the judge reads them), ``edit`` applied to the chapter's module."""
    course = copy_course(ROOT, tmp_path / "course", [CHAPTER])
    shutil.copytree(ROOT / "solutions", course / "solutions", ignore=shutil.ignore_patterns("__pycache__"))
    (course / "submitted").mkdir()
    if edit:
        module = course / "solutions" / f"{CHAPTER}.py"
        text = module.read_text()
        changed = edit(text)
        assert changed != text
        module.write_text(changed)
    return course


def _points(text):
    """ch01-e1-h100-time's point doubled."""
    return re.sub(r'(Number\(qid="ch01-e1-h100-time", points=)1', r"\g<1>2", text, count=1)


def _reference(text):
    """ch01-e1-v6e-time's reference twice the book's, its points kept."""
    return text.replace("reference=v6e, unit=", "reference=2 * v6e, unit=", 1)


@pytest.mark.parametrize(("edit", "said"), [
    (_points, "ch01-e1-h100-time: 2 points in the records, 1 released"),
    (_reference, "ch01-e1-v6e-time: its reference or checks changed"),
])
def test_an_erratum_not_yet_released_is_refused(tmp_path, cache, edit, said):
    course = _course(tmp_path, edit)
    with pytest.raises(CourseError, match="changed since its last release") as e:
        prepare(course, CHAPTER)
    assert said in str(e.value) and f"Run `scaling-course release {CHAPTER}`" in str(e.value)
    assert not cache.exists() or not any(cache.iterdir()), "a refusal is not kept"


def test_records_that_agree_are_checked_once_per_answers_key(tmp_path, cache, monkeypatch):
    course = _course(tmp_path)
    first = prepare(course, CHAPTER)
    assert [p.name for p in cache.iterdir()] == [first.answers]

    def no_process(*args, **kwargs):
        raise AssertionError("checked again")
    monkeypatch.setattr(subprocess, "run", no_process)
    assert prepare(course, CHAPTER).answers == first.answers


def test_a_refused_release_leaves_the_notebook_as_it_was(tmp_path, monkeypatch):
    """The release writes the notebook's test cells from the records, then refuses records the grader reads
    otherwise than they say: the notebook it had written is put back, so nothing half-released is graded."""
    from autograder import release as releasing
    from autograder.questions import AuthoringError

    course = copy_course(ROOT, tmp_path / "course", [CHAPTER])
    path = course / "source" / CHAPTER / f"{CHAPTER}.ipynb"
    nb = nbformat.read(path, as_version=4)
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "ch01-e1-h100-time")
    cell.metadata["nbgrader"]["points"] = 3  # the release writes the record's 1 back
    nbformat.write(nb, path)
    before = path.read_bytes()

    def refused(*args, **kwargs):
        assert path.read_bytes() != before, "the release had written the notebook"
        raise AuthoringError("solutions/ch01_rooflines.py:\n  a slip the grader reads otherwise")
    monkeypatch.setattr(releasing, "write_fingerprints", refused)
    with pytest.raises(AuthoringError):
        releasing.release(course, [CHAPTER], say=lambda _: None)
    assert path.read_bytes() == before
