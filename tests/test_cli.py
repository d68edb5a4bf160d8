"""The command line contract: demo, equiv, release and grade as the README and instructors use them."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


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
