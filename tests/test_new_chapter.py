"""docs/authoring.md's recipe for a new chapter works as written: its records module and its notebook
script, taken from the page, become a chapter that releases and grades in a copy of this repository."""

import csv
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from autograder.kinds import KINDS
from tests.paths import ROOT

CHAPTER = "ch13_example"
CLI = "import sys; from autograder.cli import main; sys.exit(main(sys.argv[1:]))"


def _block(page: str, heading: str) -> str:
    """The first Python code block under ``heading``."""
    section = page[page.index(heading):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def _run(repo: Path, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    """A command of this repository's copy: its packages first on the path, so the new chapter is seen (and none
    of the outer run's pytest options, whose plugins may live on the path it replaces)."""
    env = {k: v for k, v in __import__("os").environ.items() if k != "PYTEST_ADDOPTS"} | {"PYTHONPATH": str(repo)}
    proc = subprocess.run([sys.executable, *args], cwd=repo, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


@pytest.mark.slow
def test_a_new_chapter_from_the_recipe_releases_and_grades(tmp_path):
    repo = tmp_path / "repo"
    for package in ("autograder", "course", "solutions"):
        shutil.copytree(ROOT / package, repo / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "nbgrader_config.py", repo)
    page = (ROOT / "docs" / "authoring.md").read_text()
    (repo / "solutions" / f"{CHAPTER}.py").write_text(_block(page, "## 1. Records"))

    _run(repo, "-c", _block(page, "## 2. The notebook"))
    source = repo / "source" / CHAPTER / f"{CHAPTER}.ipynb"
    written = source.read_text()
    cells = [c.source for c in nbformat.reads(written, as_version=4).cells]
    assert 'grade("ch13-q1-intensity", q1_intensity)' in "\n".join(cells)  # the builder completes each check
    assert 'jax.lax.psum(x_block @ y_block, "X")' in "\n".join(cells)  # and writes the model into the stub

    released = _run(repo, "-c", CLI, "release", CHAPTER)
    assert f"released release/{CHAPTER}" in released.stdout
    assert source.read_text() == written  # nothing left for the release to write
    data = json.loads((repo / "course" / "fingerprints" / f"{CHAPTER}.json").read_text())
    assert {q["kind"] for q in data["questions"].values()} == set(KINDS), "the recipe shows a record of every kind"
    student_copy = nbformat.read(repo / "release" / CHAPTER / f"{CHAPTER}.ipynb", as_version=4)
    assert "psum" not in str(student_copy) and "grade(" not in str(student_copy)

    # Section 3: the shared checks of every chapter run on this one's records under its marker.
    shutil.copytree(ROOT / "tests", repo / "tests", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", repo)
    checked = _run(repo, "-m", "pytest", "-q", "-m", "ch13", "-p", "no:cacheprovider",
                   "tests/chapters/test_every_chapter.py")
    assert re.search(r"\b\d+ passed", checked.stdout) and " failed" not in checked.stdout, checked.stdout[-2000:]
    # The page's gate, ``pytest -m ch13 tests``, selects the chapter's cases of every file parametrized over chapters
    # (this copy has no other chapter's notebook, which some files read as they collect: these files alone).
    shared = ["tests/test_student_messages.py", "tests/test_variants.py", "tests/test_notebooks.py",
              "tests/test_release.py", "tests/test_built_so_far.py"]
    collected = _run(repo, "-m", "pytest", "--collect-only", "-q", "-m", "ch13", "-p", "no:cacheprovider", *shared)
    assert {line.split("::")[0] for line in collected.stdout.splitlines() if "::" in line} == set(shared)

    course = tmp_path / "class"
    _run(repo, "-c", CLI, "demo", CHAPTER, "--keep", str(course), "--jobs", "2")
    with open(course / "grades.csv") as f:
        rows = {row["student"]: row for row in csv.DictReader(f)}
    scores = {student: (float(row["score"]), float(row["max_score"])) for student, row in rows.items()}
    # The partly wrong student gives the listed slip of every other scalar question, Q1's and Q3's (3 points lost),
    # and everything else right; the untouched notebook's stubs (a function returning None too) earn nothing.
    assert scores == {"reference": (9, 9), "partly-wrong": (6, 9), "untouched": (0, 9)}, scores
