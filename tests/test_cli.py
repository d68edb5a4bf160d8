"""The command line contract: demo, equiv, release and grade as the README and instructors use them."""

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.paths import ROOT


def run(*args: str, cwd: Path = ROOT, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "autograder.cli", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=timeout)


@pytest.mark.parametrize(("ref", "cand", "symbols", "verdict", "diagnosis"), [
    ("B*D*F/(B*D+D*F+B*F)", "1/(1/B+1/D+1/F)", "B D F", "equivalent", "correct"),
    ("2*B*F/W", "B*F/W", "B F W", "not_equivalent", "ratio:1/2"),
    ("2*B*F/W", "2*B*D/W", "B D F W", "not_equivalent", "extra_symbol:D"),
    ("2*N-1", "2*N", "N:count", "not_equivalent", "lower_terms"),
    ("2*B", "2B", "B", "invalid", "implicit_multiplication"),
    ("2*B", "__import__('os').system('true')", "B", "invalid", "forbidden"),
    ("2*B", "__import__('os')", "B", "invalid", "unknown_function"),
    ("2*B", "9**9**9", "B", "invalid", "too_large"),
])
def test_equiv_json(ref, cand, symbols, verdict, diagnosis):
    proc = run("equiv", ref, cand, "--symbols", symbols, "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["verdict"] == verdict and out["diagnosis"] == diagnosis, out
    assert out["message"]


def test_equiv_rejects_a_bad_reference():
    proc = run("equiv", "2*", "B", "--symbols", "B")
    assert proc.returncode == 2 and "reference" in proc.stderr


def test_grade_explains_a_broken_course_directory(tmp_path):
    proc = run("grade", "ch01_rooflines", "--course-dir", str(tmp_path))
    assert proc.returncode != 0 and "nbgrader_config.py" in proc.stderr


def test_release_unknown_chapter(tmp_path):
    (tmp_path / "source").mkdir()
    proc = run("release", "ch99_nothing", "--course-dir", str(tmp_path))
    assert proc.returncode == 2 and "ch99_nothing" in proc.stderr


def test_help_has_examples():
    proc = run("--help")
    assert proc.returncode == 0 and "scaling-course grade ch01_rooflines" in proc.stdout


@pytest.mark.slow
def test_demo_prints_the_grade_table(tmp_path):
    proc = run("demo", "ch01_rooflines", "--keep", str(tmp_path / "course"), timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    total = [line for line in proc.stdout.splitlines() if line.startswith("total")]
    assert total, proc.stdout
    assert "(100%)" in total[0] and "(  0%)" in total[0], total[0]
    assert (tmp_path / "course" / "grades.csv").exists()
    assert "Feedback:" in proc.stdout


@pytest.mark.parametrize(("ref", "cand", "code", "words"), [
    ("2*D", "2*B", "unknown_name", "'D' is not one of this question's symbols"),
    ("2B", "2*B", "implicit_multiplication", "Write the multiplication out"),
])
def test_equiv_says_what_is_wrong_with_a_reference_in_words(ref, cand, code, words):
    proc = run("equiv", ref, cand, "--symbols", "B")
    assert proc.returncode == 2 and words in proc.stderr and code not in proc.stderr, proc.stderr


def test_equiv_shows_the_message_not_the_diagnosis_code():
    proc = run("equiv", "2*B", "2B", "--symbols", "B")
    assert "Write the multiplication out" in proc.stdout and "implicit_multiplication" not in proc.stdout, proc.stdout


def test_selfcheck_on_a_json_file_that_is_no_notebook_is_one_line(tmp_path):
    (tmp_path / "bad.ipynb").write_text("{}")
    proc = run("selfcheck", str(tmp_path / "bad.ipynb"), cwd=tmp_path)
    shown = (proc.stdout + proc.stderr).strip()
    assert proc.returncode != 0 and "Traceback" not in shown and len(shown.splitlines()) == 1, shown
    assert "bad.ipynb" in shown and "notebook" in shown, shown


def test_progress_on_an_unreadable_file_says_so_and_keeps_it(tmp_path):
    store = tmp_path / "progress.json"
    store.write_text('{"format": 1, "questions": {"ch01-e1-h100-time": {"solved": "x"}},}')
    before = store.read_bytes()
    proc = subprocess.run([sys.executable, "-m", "autograder.cli", "progress"], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120, env={**os.environ, "SCALING_COURSE_PROGRESS": str(store)})
    shown = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "cannot be read" in shown and "Traceback" not in shown, shown
    assert store.read_bytes() == before


def test_sample_writes_a_known_submission_where_grade_reads_it(tmp_path):
    """An instructor tries a grading setup on a submission whose score is known before the class's own."""
    import shutil

    import nbformat

    from autograder.demo import reference_notebook

    chapter = "ch01_rooflines"
    for folder in ("source", "release"):
        shutil.copytree(ROOT / folder / chapter, tmp_path / folder / chapter)
    shutil.copy(ROOT / "nbgrader_config.py", tmp_path)
    course = ("--course-dir", str(tmp_path))
    written = tmp_path / "submitted" / "ta-check" / chapter / f"{chapter}.ipynb"

    proc = run("sample", chapter, "--student", "ta-check", *course)
    assert proc.returncode == 0, proc.stderr
    assert f"scaling-course grade {chapter} --student=ta-check --force" in proc.stdout
    assert nbformat.read(written, as_version=4) == reference_notebook(tmp_path, chapter)

    again = run("sample", chapter, "--student", "ta-check", "--kind", "untouched", *course)
    assert again.returncode == 2 and "--force replaces it" in again.stderr  # a hand-in is never overwritten unasked
    assert run("sample", chapter, "--student", "ta-check", "--kind", "untouched", "--force", *course).returncode == 0
    handed_out = nbformat.read(tmp_path / "release" / chapter / f"{chapter}.ipynb", as_version=4)
    assert nbformat.read(written, as_version=4) == handed_out

    elsewhere = tmp_path / "elsewhere" / "x"
    nbformat.write(nbformat.v4.new_notebook(), elsewhere.parent.mkdir() or elsewhere.with_suffix(".ipynb"))
    before = elsewhere.with_suffix(".ipynb").read_bytes()
    for args in ([chapter, "--student=../outside"], [chapter, "--student= "], [chapter, "--student=a\nb"],
                 [chapter, "--student=" + "x" * 300], [str(elsewhere), "--student=s", "--kind=untouched", "--force"]):
        bad = run("sample", *args, *course)
        assert bad.returncode == 2 and " is no " in bad.stderr and "Traceback" not in bad.stderr, bad.stderr
    assert not (tmp_path / "outside").exists() and not (tmp_path / "submitted" / "s").exists()
    assert elsewhere.with_suffix(".ipynb").read_bytes() == before  # an assignment that is a path writes nothing
    missing = run("sample", "ch99_nothing", "--student", "ta-check", *course)
    assert missing.returncode == 2 and "release/ch99_nothing" in missing.stderr
    # The command it prints is pasted into a shell: an id with a space or a quote stays one argument.
    for student in ("Dana Lee", "O'Brien"):
        said = run("sample", chapter, "--student", student, "--kind", "untouched", *course).stdout
        pasted = shlex.split(said.partition("grade it with: ")[2])
        assert pasted == ["scaling-course", "grade", chapter, f"--student={student}", "--force"], said
