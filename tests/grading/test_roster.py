"""Who the class is: student ids that differ only by Unicode form or case, hidden student folders, roster students
who handed in nothing, and what the answers of a rerun are keyed on.

A run here is ``pipeline.grade`` with the stages replaced by a stub (``Run`` of test_class_runs.py); the roster is
nbgrader's gradebook, as ``nbgrader db student add`` leaves it."""

import csv
import json
import unicodedata
from pathlib import Path

import pytest

from autograder import cli, variants
from autograder.grading import results
from tests.grading.test_class_runs import Run
from tests.grading.test_stages import QID

NFC = unicodedata.normalize("NFC", "José")
NFD = unicodedata.normalize("NFD", "José")
assert NFC != NFD


def _roster(a, *students: str) -> None:
    """What ``nbgrader db student add`` leaves: students in the gradebook, nothing graded."""
    from nbgrader.api import Gradebook

    with Gradebook(a.db_url) as gb:
        for student in students:
            gb.add_student(student)


def _rows(a) -> dict[str, dict[str, str]]:
    with (a.course_dir / "grades.csv").open(newline="") as f:
        return {row["student"]: row for row in csv.DictReader(f)}


# --- ids equal but for their Unicode form -------------------------------------------------------------------

def test_the_deal_is_the_same_for_either_unicode_form_of_an_id():
    """A macOS zip writes José decomposed (NFD); the student typed it composed (NFC): one student, one setting."""
    for count in (2, 3, 5, 7, 11, 13, 1000):
        for setting in ("ch01-e3", "ch01-e4", "ch02-e1"):
            assert variants.deal("c", "ch01_rooflines", NFD, setting, count) == \
                variants.deal("c", "ch01_rooflines", NFC, setting, count), (count, setting)
    assert variants.deal("c", "ch01_rooflines", "x", "ch01-e3", 1000) != \
        variants.deal("c", "ch01_rooflines", "y", "ch01-e3", 1000)


@pytest.mark.parametrize("one, other", [(NFC, NFD), ("Alice", "alice")])
def test_two_folders_of_one_id_are_both_graded_and_named_in_a_warning(tmp_path, monkeypatch, one, other):
    run = Run(tmp_path, monkeypatch)
    run.submit(one)
    run.submit(other)
    summary = run.grade()
    assert sorted(run.graded) == sorted([one, other])  # never merged
    [said] = [w for w in summary.warnings if "differ only" in w]
    assert ascii(one)[1:-1] in said or one in said, said
    assert ascii(other)[1:-1] in said or other in said, said
    if one == NFC:
        assert "Jos\\xe9" in said and "Jose\\u0301" in said, said  # which is which, though they look the same


def test_a_submitted_id_near_a_roster_id_is_named_in_a_warning(tmp_path, monkeypatch):
    run = Run(tmp_path, monkeypatch)
    _roster(run.a, NFC, "bob")
    run.submit(NFD)
    run.submit("bob")
    summary = run.grade()
    [said] = [w for w in summary.warnings if "differ only" in w]
    assert "Jose\\u0301" in said and "Jos\\xe9" in said and "roster" in said, said
    assert "bob" not in said
    _roster(run.a, NFD)  # as the first run's gradebook write leaves it: still said
    again = run.grade()
    assert [w for w in again.warnings if "differ only" in w], again.warnings


def test_student_typed_composed_finds_a_decomposed_folder(tmp_path, monkeypatch):
    run = Run(tmp_path, monkeypatch)
    run.submit(NFD)
    summary = run.grade(students=[NFC])
    assert run.graded == [NFD] and [r["student"] for r in summary.results] == [NFD], summary.problems


def test_student_in_another_case_names_the_near_match(tmp_path, monkeypatch):
    run = Run(tmp_path, monkeypatch)
    run.submit("Alice")
    summary = run.grade(students=["alice"])
    assert run.graded == []
    [note] = summary.problems["alice"]
    assert note.startswith("not graded: there is no submitted/alice/hw/") and "submitted/Alice/" in note, note


# --- a hidden student folder ----------------------------------------------------------------------------------

def test_a_hidden_student_folder_is_listed_as_not_graded(tmp_path, monkeypatch):
    run = Run(tmp_path, monkeypatch)
    run.submit(".dot")
    run.submit("ada")
    (run.a.course_dir / "submitted" / ".ipynb_checkpoints").mkdir()  # Jupyter's, no student: says nothing
    summary = run.grade()
    assert run.graded == ["ada"]
    [note] = summary.problems[".dot"]
    assert note.startswith("not graded") and "hidden" in note and "rename" in note, note
    assert ".ipynb_checkpoints" not in summary.problems
    named = run.grade(students=[".dot"])
    assert named.problems[".dot"] == [note], named.problems  # never "there is no submitted/.dot/hw/"


# --- roster students who handed in nothing --------------------------------------------------------------------

def test_a_roster_student_with_no_submission_has_a_row_and_a_summary_line(tmp_path, monkeypatch, capsys):
    run = Run(tmp_path, monkeypatch)
    _roster(run.a, "ada", "bob", "carol")
    run.submit("ada")
    run.submit("bob")
    summary = run.grade()
    assert summary.not_submitted == ["carol"]
    rows = _rows(run.a)
    assert set(rows) == {"ada", "bob", "carol"}
    assert rows["carol"][QID] == "" and rows["carol"]["score"] == "0" and rows["carol"]["max_score"] == "2"
    assert rows["carol"]["status"] == "not submitted" and rows["ada"]["status"] == "graded"
    with (run.a.course_dir / "grades.csv").open() as f:
        header = next(csv.reader(f))
    assert header[:5] == ["student", "assignment", QID, "score", "max_score"]  # the columns readers know stay
    cli.print_summary(tmp_path, "hw", summary)
    out = capsys.readouterr().out
    assert "not submitted: carol" in out, out
    run.submit("carol")  # she hands in late: graded, a row like the others
    later = run.grade()
    assert later.not_submitted == [] and _rows(run.a)["carol"]["status"] == "graded"


def test_nobody_submitted_yet_still_names_the_roster(tmp_path, monkeypatch, capsys):
    run = Run(tmp_path, monkeypatch)
    _roster(run.a, "ada")
    (run.a.course_dir / "submitted").mkdir()
    summary = run.grade()
    assert summary.not_submitted == ["ada"]
    cli.print_summary(tmp_path, "hw", summary)
    assert "not submitted: ada" in capsys.readouterr().out


# --- what a rerun's answers are keyed on ----------------------------------------------------------------------

def _package(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_the_answer_key_covers_the_course_and_grader_packages(tmp_path, monkeypatch):
    """References are built from course/ (hardware constants, fingerprints) and judged by the autograder package:
    a change to either grades the class again; another chapter's fingerprints and byte code do not."""
    course = _package(tmp_path / "pkgs" / "course", {"__init__.py": "", "hardware.py": "PEAK = 9.9e14\n",
                                                     "fingerprints/ch01_rooflines.json": "{}",
                                                     "fingerprints/ch02_tpus.json": "{}"})
    grader = _package(tmp_path / "pkgs" / "autograder", {"__init__.py": "", "kinds/number.py": "TOL = 0.01\n"})
    monkeypatch.setattr(results, "_package_dir", lambda name: {"course": course, "autograder": grader}[name])
    (tmp_path / "solutions").mkdir()
    (tmp_path / "solutions" / "__init__.py").write_text("")
    master = tmp_path / "source" / "ch01_rooflines" / "ch01_rooflines.ipynb"
    master.parent.mkdir(parents=True)
    master.write_text("{}")

    def key() -> str:
        return results.answers_key(tmp_path, "ch01_rooflines", master)

    first = key()
    (course / "hardware.py").write_text("PEAK = 5.0e14\n")
    assert key() != first
    first = key()
    (grader / "kinds" / "number.py").write_text("TOL = 0.02\n")
    assert key() != first
    first = key()
    (course / "fingerprints" / "ch01_rooflines.json").write_text('{"a": 1}')
    assert key() != first
    first = key()
    (course / "fingerprints" / "ch02_tpus.json").write_text('{"b": 2}')  # another chapter's release
    (grader / "__pycache__").mkdir()
    (grader / "__pycache__" / "x.pyc").write_bytes(b"\0")
    assert key() == first


def test_the_answer_key_reads_the_installed_packages():
    import autograder
    import course

    assert results._package_dir("course") == Path(course.__file__).resolve().parent
    assert results._package_dir("autograder") == Path(autograder.__file__).resolve().parent


def test_a_result_whose_submission_folder_is_gone_leaves_the_table_and_is_named(tmp_path, monkeypatch, capsys):
    """A trial graded as "ta-check" and its folder removed, as docs/grading.md says to do, kept a "graded" row in
    grades.csv (the file uploaded where grades go), and a dropped student's row stayed. A stored result counts
    while its submitted/ folder is there; one without is named in the summary and comes back with its folder."""
    import shutil

    run = Run(tmp_path, monkeypatch)
    _roster(run.a, "ada")
    for student in ("ada", "ta-check"):
        run.submit(student)
    run.grade()
    assert set(_rows(run.a)) == {"ada", "ta-check"}
    for student in ("ada", "ta-check"):
        shutil.rmtree(run.a.course_dir / "submitted" / student)
    summary = run.grade()
    rows = _rows(run.a)
    assert set(rows) == {"ada"} and rows["ada"]["status"] == "not submitted", rows  # on the roster: a row still
    said = " ".join(summary.warnings)
    assert "ada, ta-check graded before, with no submitted/ID/hw/ now: left out of grades.csv" in said, said
    cli.print_summary(tmp_path, "hw", summary)
    assert "left out of grades.csv" in capsys.readouterr().out
    assert results.stored(run.a, "ta-check") is not None, "the result is kept"
    run.submit("ada")
    assert "ta-check graded before" in " ".join(run.grade().warnings)
    assert _rows(run.a)["ada"]["status"] == "graded"


def test_a_result_graded_against_answers_since_changed_is_stale_in_the_table(tmp_path, monkeypatch):
    """A regrade after an erratum, interrupted: the rows it had not reached were marked "graded" beside new ones,
    with the old references and maximum. They say "stale" until the run that regrades them."""
    import dataclasses

    run = Run(tmp_path, monkeypatch)
    run.a = dataclasses.replace(run.a, answers="before")
    run.submit("ada")
    run.grade()
    stored = results.stored(run.a, "ada")
    stored["answers"] = "before"
    (run.a.course_dir / ".scaling-course" / "results" / "hw" / "ada.json").write_text(json.dumps(stored))
    results.Grades(run.a).write(final=True)
    assert _rows(run.a)["ada"]["status"] == "graded"
    results.Grades(dataclasses.replace(run.a, answers="after")).write(final=True)
    assert _rows(run.a)["ada"]["status"] == "stale"
