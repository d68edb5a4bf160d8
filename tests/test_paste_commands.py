"""Commands printed for a person to paste, and the examples of the help and README: each one, pasted as written,
runs what it says, whatever the student ids, and each path follows from the step before it."""

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from autograder import cli
from autograder.grading import stages
from autograder.grading.pipeline import Assignment, release_warning
from tests.paths import ROOT

# A space, a comma (nbgrader splits its exclude list at commas), shell syntax, and a variable the shell expands.
HOSTILE = ("Zoë Q", "a,b", "x;rm -rf ~", "$HOME")


def _reports(tmp_path: Path, receipts: dict[str, bool]) -> Assignment:
    """feedback/<student>/hw/hw.html for each student, with nbgrader's receipts beside it where ``receipts`` says."""
    for student, has in receipts.items():
        folder = tmp_path / "feedback" / student / "hw"
        folder.mkdir(parents=True)
        (folder / "hw.html").write_text("<html></html>")
        for name in stages.RECEIPTS if has else ():
            (folder / name).write_text("x")
    return Assignment(tmp_path, "hw", "hw", tmp_path / "hw.ipynb", {}, {})


def _pasted(warning: str) -> list[str]:
    """The release_feedback command of a warning, split as a POSIX shell splits it when pasted."""
    [command] = [c for c in re.findall(r"`([^`]*)`", warning) if c.startswith("nbgrader release_feedback")
                 and "--CourseDirectory" in c]
    return shlex.split(command)


def test_the_release_feedback_command_survives_every_id_it_is_given(tmp_path):
    [warning] = release_warning(_reports(tmp_path, {"ada": True, **dict.fromkeys(HOSTILE, False)}))
    # nbgrader cannot exclude "a,b" (it would read "a" and "b"): the others, in the order nbgrader gets them.
    assert _pasted(warning) == ["nbgrader", "release_feedback", "hw",
                                "--CourseDirectory.student_id_exclude=$HOME,Zoë Q,x;rm -rf ~"], warning
    assert "a,b" in warning.split("--CourseDirectory")[-1] and "cannot be named" in warning, warning


def test_an_id_nbgrader_cannot_exclude_is_given_its_report_by_hand(tmp_path):
    [warning] = release_warning(_reports(tmp_path, {"ada": True, "a,b": False}))
    commands = [shlex.split(c) for c in re.findall(r"`([^`]*)`", warning) if c.startswith("nbgrader release_feedback")]
    assert ["nbgrader", "release_feedback", "hw"] in commands, warning  # nothing left to exclude: the plain command
    assert not any("a,b" in arg for c in commands for arg in c), warning
    assert "feedback/a,b/hw/" in warning and "cannot be named" in warning and "by hand" in warning, warning


def test_plain_ids_still_give_the_plain_command(tmp_path):
    [warning] = release_warning(_reports(tmp_path, {"ada": True, "dave": False, "eve": False}))
    assert "`nbgrader release_feedback hw --CourseDirectory.student_id_exclude=dave,eve`" in warning, warning
    assert "cannot be named" not in warning


# --- ids that look like options --------------------------------------------------------------------------------

def _help(*command: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "autograder.cli", *command, "--help"], capture_output=True,
                          text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return " ".join(proc.stdout.split())


@pytest.mark.parametrize("command", ["grade", "variant"])
def test_student_help_gives_the_form_for_an_id_that_starts_with_a_dash(command):
    assert "--student=ID" in _help(command) and '"-"' in _help(command)


def test_an_id_that_starts_with_a_dash_is_taken_in_the_equals_form(capsys):
    assert cli.main(["variant", "ch01_rooflines", "--student=-dash", "--json", "--course-dir", str(ROOT)]) == 0
    assert '"student": "-dash"' in capsys.readouterr().out


def test_the_grading_docs_give_the_equals_form_once():
    assert (ROOT / "docs" / "grading.md").read_text().count("--student=") == 1


def test_grade_help_lists_its_exit_codes_and_course_dir():
    text = _help("grade")
    for status in (0, 2, 3, cli.INTERRUPTED):
        assert re.search(rf"\b{status}\b:? ", text.split("exit status")[-1]), (status, text)
    assert re.search(r"--course-dir DIR \w", text), text  # the option has its help


@pytest.mark.parametrize("command", ["release", "grade", "gradescope", "variant", "dist student"])
def test_every_course_dir_option_says_what_it_is(command):
    assert re.search(r"--course-dir DIR \w", _help(*command.split())), command


# --- the learner's install and first self-check -----------------------------------------------------------------

def test_the_learners_install_leaves_out_the_developers_tools():
    dry = subprocess.run(["make", "-n", "-B", "install-student"], capture_output=True, text=True, cwd=ROOT,
                         timeout=60)
    assert dry.returncode == 0, dry.stderr
    assert "pip install" in dry.stdout and "-e ." in dry.stdout and "[test]" not in dry.stdout, dry.stdout
    dev = subprocess.run(["make", "-n", "-B", "install"], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert '-e ".[test]"' in dev.stdout, dev.stdout  # make install stays the developers' (and .ci/run's)


def test_the_readme_installs_learners_with_the_learners_target():
    readme = (ROOT / "README.md").read_text()
    learners = readme.split("## Students")[1].split("## Instructors")[0]
    assert "make install-student" in learners and not re.search(r"make install(?!-)", learners), learners


def test_the_selfcheck_example_follows_from_the_copy_step():
    """README says to copy release/ (cp -r release my-work): the example's notebook is where that copy puts it."""
    readme = (ROOT / "README.md").read_text()
    [(src, dest)] = re.findall(r"`cp -r (\S+?)/? (\S+?)/?`", readme)
    copied = {str(Path(dest) / p.relative_to(ROOT / src)) for p in (ROOT / src).glob("*/*.ipynb")}
    for text in (readme, cli.EXAMPLES):
        shown = re.findall(r"scaling-course selfcheck (\S+)", text)
        assert shown and set(shown) <= copied, (shown, sorted(copied)[:3])
