"""The first cell of every notebook: installs the course where it is missing (Colab, a bare Python),
pinned to the notebook's version, from the one repository pyproject.toml names, then sets up the
devices. Installing it into a fresh environment is tests/test_distribution.py's slow test."""

import json
import os
import subprocess
import sys
import tomllib
from importlib.metadata import version
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from autograder import distribution
from autograder.distribution import bootstrap
from autograder.release import complete_setup_cell, nbgrader_meta, write_readme_links
from tests.paths import ROOT

PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
VERSION, REPOSITORY = PROJECT["version"], PROJECT["urls"]["Repository"]
NOTEBOOKS = sorted(ROOT.glob("source/*/*.ipynb")) + sorted(ROOT.glob("release/*/*.ipynb"))


def first_cell(path: Path) -> str:
    cells = json.loads(path.read_text())["cells"]
    return "".join(next(c for c in cells if c["cell_type"] == "code")["source"])


def test_installed_package_is_the_pyproject_version():
    assert version("scaling-course") == VERSION


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_setup_cell_starts_with_the_bootstrap_of_this_version(path):
    cell = first_cell(path)
    assert cell.startswith(bootstrap(VERSION) + "\n"), "run scaling-course release"
    assert f"{REPOSITORY}@v{VERSION}" in cell


def test_setup_notes_a_different_installed_version(monkeypatch):
    import course
    from course import devices

    monkeypatch.setattr(devices, "_state", dict(devices._state))  # the version it keeps: this test's alone
    assert "Note:" not in course.setup("cpu", version=VERSION)
    note = course.setup("cpu", version="0.0.1")
    assert "released with scaling-course 0.0.1" in note and VERSION in note


def test_the_repository_is_read_from_the_installed_metadata_outside_a_checkout(monkeypatch):
    assert distribution.repository_url() == REPOSITORY
    monkeypatch.setattr(distribution, "_pyproject", lambda root=None: None)  # as in an installed package
    assert distribution.repository_url() == REPOSITORY  # reinstall (make install) after changing pyproject.toml
    assert distribution.project_version() == VERSION


def _setup_cell(source: str) -> nbformat.NotebookNode:
    cell = new_code_cell(source)
    cell.metadata.update(nbgrader=nbgrader_meta("setup", grade=False, solution=False, locked=True))
    return new_notebook(cells=[cell])


def test_the_release_writes_the_bootstrap_of_pyproject_over_an_old_one(monkeypatch):
    old = first_cell(NOTEBOOKS[0]).replace(REPOSITORY, "https://github.com/someone/old").replace(VERSION, "0.0.9")
    nb = _setup_cell(old)
    assert complete_setup_cell(nb) == []
    assert nb.cells[0].source == first_cell(NOTEBOOKS[0]) != old
    nb = _setup_cell("from course import check")  # a new notebook's imports alone
    monkeypatch.setattr(distribution, "repository_url", lambda: "https://github.com/fork/course")
    assert complete_setup_cell(nb) == [] and nb.cells[0].source.endswith('here\nfrom course import check')
    assert "git+https://github.com/fork/course@v" in nb.cells[0].source
    nb.cells[0].metadata = {}
    assert complete_setup_cell(nb) == ['the first code cell is not the locked setup cell (nbgrader grade id '
                                       '"setup"): write it with NotebookBuilder.setup']


def test_the_release_points_the_readme_colab_links_at_the_repository(monkeypatch, tmp_path):
    link = "https://colab.research.google.com/github/{}/blob/main/release/ch01_rooflines/ch01_rooflines.ipynb"
    (tmp_path / "README.md").write_text(f"| [Open in Colab]({link.format('old/place')}) |\n")
    monkeypatch.setattr(distribution, "repository_url", lambda: "https://github.com/fork/course")
    assert write_readme_links(tmp_path)
    assert (tmp_path / "README.md").read_text() == f"| [Open in Colab]({link.format('fork/course')}) |\n"
    assert not write_readme_links(tmp_path)
    monkeypatch.setattr(distribution, "repository_url", lambda: "https://gitlab.com/fork/course")
    with pytest.raises(distribution.DistributionError, match="Colab opens notebooks from GitHub only"):
        write_readme_links(tmp_path)


def test_a_first_cell_that_cannot_install_says_so_in_one_sentence(tmp_path):
    """No course and nothing to install from: one sentence naming what failed and what to do, no traceback."""
    missing = tmp_path / "scaling_course-0.1.0-py3-none-any.whl"
    env = {**os.environ, "SCALING_COURSE_PACKAGE": str(missing), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    # -I -S: a Python that cannot import the course (nor anything else installed), like a bare Colab runtime.
    run = subprocess.run([sys.executable, "-I", "-S", "-c", bootstrap()], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 1, run.stdout + run.stderr
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith(f"Could not install {missing} (pip says why above): the course may not be published "
                           "there. Run %env SCALING_COURSE_PACKAGE="), run.stderr
    assert "ask your instructor" in last and "Traceback" not in run.stderr
