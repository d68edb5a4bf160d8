"""The two wheels of a release (autograder/distribution.py): the grader's holds the whole course; the
student's leaves out the references and the grader, yet every chapter's self-check works from it alone."""

import json
import os
import re
import subprocess
import venv
import zipfile
from pathlib import Path

import pytest

from autograder.distribution import EDITION_FILE, GRADER_ONLY, build_wheel, package_files
from autograder.questions import Formula, Number, Program, chapter_names, load_chapter
from tests.paths import ROOT

CHAPTERS = chapter_names()


@pytest.fixture(scope="module")
def wheels(tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("wheels")
    return {kind: build_wheel(kind, out / kind) for kind in ("student", "grader")}


def _names(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as z:
        return z.namelist()


def test_the_student_wheel_holds_the_self_check_and_nothing_of_the_grader(wheels):
    names = _names(wheels["student"])
    assert not [n for n in names if n.startswith(("solutions/", "source/", "release/", "autograder/grading/"))]
    assert not [n for n in names if any(n == p or n.startswith(p) for p in GRADER_ONLY)]
    assert {f"course/fingerprints/{c}.json" for c in CHAPTERS} <= set(names)
    kept = {str(p.relative_to(ROOT)) for p in (ROOT / "course" / "fingerprints" / "programs").glob("*/*.npys")}
    assert len(kept) >= 20 and kept <= set(names)  # what the self-check needs of the references left out
    assert {"course/answers.py", "autograder/cli.py", "autograder/kinds/program.py", EDITION_FILE} <= set(names)
    info = next(n for n in names if n.endswith(".dist-info/entry_points.txt")).rsplit("/", 1)[0]
    with zipfile.ZipFile(wheels["student"]) as z:
        assert "scaling-course = autograder.cli:main" in z.read(f"{info}/entry_points.txt").decode()
        metadata = z.read(f"{info}/METADATA").decode()
    assert "Name: scaling-course\n" in metadata and "Requires-Dist: jax[cpu]==0.10.2\n" in metadata
    assert "Project-URL: Repository, https://" in metadata


def test_the_grader_wheel_is_the_whole_package(wheels):
    names = set(_names(wheels["grader"]))
    assert {f"solutions/{c}.py" for c in CHAPTERS} <= names
    assert {"autograder/grading/pipeline.py", "autograder/release.py", "solutions/_derived/__init__.py",
            "solutions/ch09_programs.json", "solutions/ch09_listings.hlo"} <= names  # chapter 9's data files
    assert EDITION_FILE not in names
    # The student's is the grader's less what the grader alone needs, file for file and byte for byte.
    shared = {n for n in _names(wheels["student"]) if ".dist-info/" not in n and n != EDITION_FILE}
    assert shared == set(package_files("student")) and shared < names
    with zipfile.ZipFile(wheels["grader"]) as g, zipfile.ZipFile(wheels["student"]) as s:
        assert all(g.read(n) == s.read(n) for n in shared)


def test_wheels_are_reproducible_and_unknown_kinds_refused(wheels, tmp_path):
    assert build_wheel("student", tmp_path).read_bytes() == wheels["student"].read_bytes()
    with pytest.raises(ValueError, match="unknown wheel kind 'teacher'"):
        build_wheel("teacher", tmp_path)
    with pytest.raises(ValueError, match="no pyproject.toml of scaling-course"):
        build_wheel("student", tmp_path, root=tmp_path)


def _significant(v: float) -> int:
    return len(re.sub(r"[^0-9]", "", f"{v:.15g}".split("e")[0]).strip("0"))


def test_no_reference_answer_is_written_in_the_student_package(wheels):
    """No formula reference appears in any file, and no number reference that is not an input in its own
    right (5 significant figures or more, not a power of two) appears in the code. The self-check data
    holds public probe inputs, which can coincide with another question's answer; it is the same in
    both wheels, since the student wheel only leaves files out (the test above)."""
    with zipfile.ZipFile(wheels["student"]) as z:
        files = {n: z.read(n).decode() for n in z.namelist() if n.endswith((".py", ".json"))}
    everything = "\n".join(files.values())
    code = "\n".join(t for n, t in files.items() if n.endswith(".py"))
    tokens = {float(t) for t in re.findall(r"(?<![\w./])\d+(?:\.\d+)?(?:e[+-]?\d+)?(?![\w./])", code)}
    formulas, numbers = [], []
    for chapter in CHAPTERS:
        for q in load_chapter(chapter).questions:
            if isinstance(q, Formula) and len(str(q.reference)) >= 12:
                formulas.append((q.qid, str(q.reference)))
            elif isinstance(q, Number):
                v = float(q.reference)
                if _significant(v) >= 5 and not (v.is_integer() and (int(v) & (int(v) - 1)) == 0):
                    numbers.append((q.qid, v))
    assert len(formulas) > 30 and len(numbers) > 100  # the check covers the course, not a few questions
    assert [q for q, text in formulas if text in everything] == []
    assert [q for q, v in numbers if any(abs(t - v) <= 1e-6 * abs(v) for t in tokens)] == []


REFERENCE_PROGRAMS = {q.qid for name in CHAPTERS for q in load_chapter(name).questions
                      if isinstance(q, Program) and q.spec.reference}
# One wrong answer of each kind per chapter, as a learner might give them.
WRONG_PROGRAM = "lambda *xs: xs[0] * 3"
WRONG_FUNCTION = "lambda *args, **kwargs: 1.2345e-7"


def _wrong_answers() -> list[tuple[str, str]]:
    """(question id, Python text of a wrong answer): the first number, formula, program and function
    question of every release notebook, as its check lines name them."""
    answers = []
    for chapter in CHAPTERS:
        text = (ROOT / "release" / chapter / f"{chapter}.ipynb").read_text()
        entries = json.loads((ROOT / "course" / "fingerprints" / f"{chapter}.json").read_text())["questions"]
        asked = list(dict.fromkeys(re.findall(r'check\(\\"([\w-]+)\\"', text)))
        for kind in ("number", "formula", "program", "function", "reference"):  # a program judged by a reference's
            qid = next((q for q in asked if entries[q]["kind"] == kind  # results, which the wheel keeps as data
                        or kind == "reference" and entries[q].get("program", {}).get("reference")), None)
            if qid is None or (qid, WRONG_PROGRAM) in answers:
                continue
            formula = "formula" if kind != "formula" else repr("7*" + "*".join(entries[qid]["symbols"]) + "**3")
            answers.append((qid, {"number": "1.2345e-7", "program": WRONG_PROGRAM, "function": WRONG_FUNCTION,
                                  "formula": formula, "reference": WRONG_PROGRAM}[kind]))
    return answers


# Run in the learner's environment after the notebook's first cell: every check, the package's files.
PROBE = """
import importlib.metadata, importlib.util, json, sys
import course.answers
results = {{}}
for qid, answer in {answers}:
    try:
        check(qid, eval(answer))
        results[qid] = "accepted"
    except course.AnswerError as e:
        results[qid] = str(e)
    except Exception as e:
        results[qid] = f"crash: {{type(e).__name__}}: {{e}}"
files = [str(f) for f in importlib.metadata.files("scaling-course")]
print(json.dumps({{"results": results, "files": files, "where": course.answers.__file__, "prefix": sys.prefix,
                  "solutions": importlib.util.find_spec("solutions") is not None}}))
"""


@pytest.mark.slow
def test_the_student_wheel_installs_from_the_first_cell_and_checks_every_chapter(wheels, tmp_path):
    """Only the notebook's own first cell installs the course (SCALING_COURSE_PACKAGE: the student wheel),
    in a virtual environment with nothing installed; then each chapter's checks run from it."""
    answers = _wrong_answers()
    env_dir = tmp_path / "env"
    venv.create(env_dir, with_pip=True)
    python, bin_dir = env_dir / "bin" / "python", env_dir / "bin"
    cells = json.loads((ROOT / "release" / CHAPTERS[0] / f"{CHAPTERS[0]}.ipynb").read_text())["cells"]
    first_cell = "".join(next(c for c in cells if c["cell_type"] == "code")["source"])
    assert first_cell.startswith("try:\n    import course")
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env.update(SCALING_COURSE_PACKAGE=str(wheels["student"]), PIP_DISABLE_PIP_VERSION_CHECK="1",
               SCALING_COURSE_PROGRESS=str(tmp_path / "progress.json"))
    run = subprocess.run([str(python), "-c", first_cell + PROBE.format(answers=answers)], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-4000:]
    assert "8 simulated CPU device(s)" in run.stdout
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["where"].startswith(out["prefix"])  # the installed copy, not this checkout
    wrong = {q: m for q, m in out["results"].items() if not m.startswith(f"{q}: not right yet. ")}
    assert not wrong, wrong
    assert len(out["results"]) >= 3 * len(CHAPTERS)
    assert not out["solutions"]
    assert not [f for f in out["files"] if f.startswith(("solutions/", "source/", "autograder/grading/",
                                                         "autograder/program_references/"))]
    assert len([q for q, _ in answers if q in REFERENCE_PROGRAMS]) >= 8  # every chapter that has one
    # The command works where it can, and says what it is where it cannot.
    cli = str(bin_dir / "scaling-course")
    progress = subprocess.run([cli, "progress"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert progress.returncode == 0 and "ch01" in progress.stdout, progress.stdout + progress.stderr
    grade = subprocess.run([cli, "grade", CHAPTERS[0]], cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=300)
    assert grade.returncode == 2 and "this is the student package" in grade.stderr, grade.stderr
