"""The first cell of every notebook: installs the course where it is missing (Colab, a bare Python),
pinned to the notebook's version, then sets up the devices."""

import json
import os
import shutil
import subprocess
import tomllib
import venv
from importlib.metadata import version
from pathlib import Path

import pytest

from autograder.authoring import REPOSITORY, bootstrap

ROOT = Path(__file__).resolve().parent.parent
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
NOTEBOOKS = sorted(ROOT.glob("source/*/*.ipynb")) + sorted(ROOT.glob("release/*/*.ipynb"))


def first_cell(path: Path) -> str:
    cells = json.loads(path.read_text())["cells"]
    return "".join(next(c for c in cells if c["cell_type"] == "code")["source"])


def test_installed_package_is_the_pyproject_version():
    assert version("scaling-course") == VERSION


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_setup_cell_starts_with_the_bootstrap_of_this_version(path):
    cell = first_cell(path)
    assert cell.startswith(bootstrap(VERSION) + "\n"), "run the notebook's setup cell through NotebookBuilder"
    assert f"{REPOSITORY}@v{VERSION}" in cell


def test_setup_notes_a_different_installed_version():
    import course

    assert "Note:" not in course.setup("cpu", version=VERSION)
    note = course.setup("cpu", version="0.0.1")
    assert "released with scaling-course 0.0.1" in note and VERSION in note


@pytest.mark.slow
def test_first_cell_installs_the_course_into_a_fresh_environment(tmp_path):
    """Only the notebook's own first cell, in a virtual environment with nothing installed; the
    package comes from this checkout instead of the repository (SCALING_COURSE_PACKAGE)."""
    package = tmp_path / "package"
    for name in ("course", "autograder", "solutions"):
        shutil.copytree(ROOT / name, package / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, package / name)
    env_dir = tmp_path / "env"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    script = first_cell(ROOT / "release" / "ch01_rooflines" / "ch01_rooflines.ipynb") + (
        "\nimport sys\nimport course.answers\n"
        "assert course.answers.__file__.startswith(sys.prefix), course.answers.__file__\n"
        "try:\n    check('ch01-e1-h100-time', 1.0)\nexcept course.AnswerError as e:\n    print(e)\n")
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env.update(SCALING_COURSE_PACKAGE=str(package), PIP_DISABLE_PIP_VERSION_CHECK="1")
    run = subprocess.run([str(python), "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=900)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-4000:]
    assert "8 simulated CPU device(s)" in run.stdout
    assert "ch01-e1-h100-time: not right yet" in run.stdout  # the self-check data came with the package
