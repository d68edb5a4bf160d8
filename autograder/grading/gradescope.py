"""Gradescope: an autograder zip that grades one submission with the class grader's own engine.

    scaling-course gradescope ASSIGNMENT  ->  build()   the zip, on the instructor's machine
    run_autograder (on Gradescope)        ->  run()     one submission -> results/results.json

Gradescope unzips the archive into ``$ROOT/source`` (``$ROOT`` is ``/autograder``), runs ``setup.sh``
once when it builds the image, then ``run_autograder`` for each submission, with the student's files in
``$ROOT/submission/`` and who they are in ``$ROOT/submission_metadata.json``. The zip's folder is a
course directory (``nbgrader_config.py``, ``source/<assignment>/``, the grading secret), so the grader
runs exactly as ``scaling-course grade`` does on one folder ``submitted/<student>/<assignment>/``:
the same stages, walls and limits (``pipeline.grade_submission``), and the kernel cannot read the
course directory, which holds the source notebook and the wheel with the solutions.

What the zip holds, and why:
    setup.sh, run_autograder        Gradescope's two entry points
    scaling_course-*.whl            the grader package (solutions included), every dependency pinned
    nbgrader_config.py, source/     the assignment's source notebook and the course's settings
    .scaling-course/secret          one grading secret per zip: a regrade draws the same function inputs
    gradescope.json                 assignment, notebook, questions with points, the id field
    fallback-results.json           every question at 0: in place before grading starts, so a run that
                                    Gradescope stops at its time limit still leaves a valid result
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
import traceback
import zipfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..variants import describe
from . import STATE
from .feedback import verdict_text, write_atomic

CONFIG = "gradescope.json"
FALLBACK = "fallback-results.json"
ID_FIELDS = ("email", "sid")  # what submission_metadata.json's users[0] may name a student by
# Where the configured field's value cannot name a student: the next identifiers, in order ("id": Gradescope's own).
FALLBACK_FIELDS = ("email", "id")
FIELD_WORDS = {"email": "email", "sid": "student ID (sid)", "id": "Gradescope user id"}
ROOT_ENV = "GRADESCOPE_ROOT"  # local trials and tests: a folder laid out as Gradescope's /autograder
PYTHON_ENV = "SCALING_COURSE_PYTHON"  # run_autograder's interpreter; default: the venv setup.sh made
BOOK = ""  # the "student" graded with the book's values (see _student)
MAX_ID = 200  # characters of a student id: it names a folder

SETUP_SH = """#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder image: a Python >= 3.11 (Ubuntu 22.04
# has python3.11 in universe), a virtual environment beside this script, and the course's grader package,
# whose dependencies are pinned.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
python=""
for candidate in python3.13 python3.12 python3.11 python3; do
  if command -v "$candidate" >/dev/null 2>&1 &&
     "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    python="$candidate"; break
  fi
done
export DEBIAN_FRONTEND=noninteractive
apt-get update
if [ -z "$python" ]; then
  python=python3.11
  apt-get install -y python3.11 || {
    echo "setup.sh: no Python >= 3.11 here; choose Ubuntu 22.04 or newer as the autograder's base image" >&2
    exit 1
  }
fi
# venv needs ensurepip, which Ubuntu ships apart ("python3.11-venv", or "python3-venv" for python3).
"$python" -c 'import ensurepip' 2>/dev/null || apt-get install -y "$python-venv"
"$python" -m venv "$here/venv"
"$here/venv/bin/python" -m pip install --no-cache-dir "$here"/*.whl
"$here/venv/bin/python" -c 'import autograder.grading.gradescope'
echo "setup.sh: the grader is installed in $here/venv"
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this for each submission. A zero result for every question is put in place first, so a
# run stopped at Gradescope's time limit, or a grader that cannot start, still leaves a valid results.json;
# the grader replaces it with the real one (atomically) when it is done.
root="${GRADESCOPE_ROOT:-/autograder}"
python="${SCALING_COURSE_PYTHON:-$root/source/venv/bin/python}"
mkdir -p "$root/results"
cp "$root/source/fallback-results.json" "$root/results/results.json"
"$python" -m autograder.grading.gradescope "$root"
status=$?
[ -s "$root/results/results.json" ] || cp "$root/source/fallback-results.json" "$root/results/results.json"
exit $status
"""


class ZipError(Exception):
    """The zip cannot be built from this course directory as it is; the message says what to fix."""


# -- Gradescope's results.json ------------------------------------------------------------------------


def results_json(questions: dict[str, dict[str, Any]], summary: str, extra: dict[str, Any] | None = None,
                 seconds: float | None = None) -> dict[str, Any]:
    """Gradescope's format: one test per question (its output is the verdict the student's feedback shows,
    which never holds a reference answer), the total, and the summary as the top-level output. The grader's
    own log goes to stdout, which Gradescope shows the staff only."""
    tests = [{"name": qid, "score": q["score"], "max_score": q["points"],
              "status": "passed" if q["score"] >= q["points"] else "failed",
              "output": verdict_text(q), "output_format": "text", "visibility": "visible"}
             for qid, q in questions.items()]
    out: dict[str, Any] = {"score": round(sum(q["score"] for q in questions.values()), 6), "output": summary,
                           "output_format": "text", "visibility": "visible", "stdout_visibility": "hidden",
                           "tests": tests}
    if seconds is not None:
        out["execution_time"] = round(seconds)
    if extra:
        out["extra_data"] = extra
    return out


def zero_results(points: dict[str, float], reason: str, seconds: float | None = None) -> dict[str, Any]:
    """Every question at 0, with ``reason`` as each test's and the submission's output."""
    questions = {q: {"points": p, "score": 0.0, "status": "invalid", "message": reason} for q, p in points.items()}
    return results_json(questions, f"Score: 0 / {sum(points.values()):g}\n{reason}", seconds=seconds)


# -- building the zip ---------------------------------------------------------------------------------


def build(course_dir: Path, assignment: str, out: Path | None = None, student_id: str = "email") -> Path:
    """Write the autograder zip of ``assignment`` (see the module docstring); ``student_id``: which field of
    Gradescope's submission metadata the grader deals a student's values from (``ID_FIELDS``)."""
    from .pipeline import CourseError, prepare

    if student_id not in ID_FIELDS:
        raise ZipError(f"--student-id is one of {', '.join(ID_FIELDS)}, not {student_id!r}")
    course_dir = course_dir.resolve()
    out = (out or Path(f"{assignment}-gradescope.zip")).resolve()
    with tempfile.TemporaryDirectory(prefix="sc-gradescope-") as tmp:
        stage = Path(tmp) / "course"
        (stage / "submitted").mkdir(parents=True)
        if (course_dir / "nbgrader_config.py").is_file():
            shutil.copy(course_dir / "nbgrader_config.py", stage)
        if (course_dir / "source").is_dir():  # all of it: a wrong name's error lists the assignments
            shutil.copytree(course_dir / "source", stage / "source", symlinks=True,
                            ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
        try:
            # The checks the grader makes on Gradescope, made here, where they can still be fixed: one source
            # notebook, which agrees with the records, and a variant plan that agrees with the release.
            a = prepare(stage, assignment)
        except CourseError as e:
            raise ZipError(str(e).replace(str(stage.resolve()), str(course_dir))) from None
        wheel = _grader_wheel(Path(tmp) / "wheel", assignment)
        config = {"assignment": assignment, "notebook": a.notebook, "student_id": student_id,
                  "questions": a.questions}
        reason = ("No grade yet: the autograder did not finish (it ran past Gradescope's time limit, or could "
                  "not start). Please tell the course staff.")
        files = {"setup.sh": SETUP_SH, "run_autograder": RUN_AUTOGRADER, CONFIG: json.dumps(config, indent=1),
                 FALLBACK: json.dumps(zero_results(a.questions, reason), indent=1)}
        out.parent.mkdir(parents=True, exist_ok=True)
        draft = out.with_name(f".{out.name}.tmp")
        with zipfile.ZipFile(draft, "w", zipfile.ZIP_DEFLATED) as z:
            for name, text in files.items():
                info = zipfile.ZipInfo(name, date_time=time.localtime()[:6])
                info.external_attr = (0o755 if name in ("setup.sh", "run_autograder") else 0o644) << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                z.writestr(info, text)
            z.write(wheel, wheel.name)
            z.write(stage / "nbgrader_config.py", "nbgrader_config.py")
            z.write(stage / STATE / "secret", f"{STATE}/secret")
            for path in sorted((stage / "source" / assignment).rglob("*")):
                if path.is_file() and not path.is_symlink():
                    z.write(path, str(path.relative_to(stage)))
        draft.replace(out)
    return out


def _grader_wheel(folder: Path, assignment: str) -> Path:
    """The grader package (with ``solutions/``) as a wheel, which must carry the assignment's released
    self-check data: the grader compares the variant plan and points with it."""
    from ..distribution import build_wheel

    folder.mkdir(parents=True, exist_ok=True)
    wheel = build_wheel("grader", folder)
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
    if f"course/fingerprints/{assignment}.json" not in names:
        raise ZipError(f"the grader wheel has no self-check data for {assignment} "
                       f"(course/fingerprints/{assignment}.json): run `scaling-course release {assignment}` first")
    if not any(n.startswith("solutions/") for n in names):
        raise ZipError("the grader wheel has no solutions/: the grader could not judge anything")
    return wheel


def timeout_minutes() -> int:
    """Gradescope's autograder timeout that lets every limit of ``scaling-course grade`` run its course
    (the longest a submission may take in a worker, plus the grader's own start)."""
    from .pipeline import DEFAULT_LIMITS, _deadline

    return -(-int(_deadline(DEFAULT_LIMITS) + 60) // 60)


# -- grading one submission on Gradescope -------------------------------------------------------------


def run(root: Path) -> dict[str, Any]:
    """Grade the notebook in ``root/submission`` and write ``root/results/results.json``, whatever happens:
    a submission that cannot be graded gets every question at 0 and a message saying why."""
    started = time.monotonic()
    source = root / "source"
    try:
        config = json.loads((source / CONFIG).read_text())
    except (OSError, ValueError) as e:
        out = results_json({}, f"The autograder is broken: {source / CONFIG} cannot be read ({type(e).__name__}). "
                               "Please tell the course staff.")
        _write(root, out)
        return out
    try:
        out = _grade(root, config, started)
    except Exception as e:  # a student must get a result, and the staff the cause
        traceback.print_exc(file=sys.stdout)
        out = zero_results(config["questions"], f"The grader failed on this submission ({type(e).__name__}); "
                                                "please tell the course staff.", time.monotonic() - started)
    _write(root, out)
    return out


def _write(root: Path, out: dict[str, Any]) -> None:
    write_atomic(root / "results" / "results.json", json.dumps(out, indent=1))


def _grade(root: Path, config: dict[str, Any], started: float) -> dict[str, Any]:
    from . import factory
    from .pipeline import DEFAULT_LIMITS, grade_submission, prepare

    course, name, points = root / "source", config["assignment"], config["questions"]
    with tempfile.TemporaryDirectory(prefix="sc-gradescope-") as tmp:
        notebook, reason = pick_notebook(root / "submission", config["notebook"], Path(tmp))
        if notebook is None:
            return zero_results(points, reason, time.monotonic() - started)
        student, who, id_note = _student(root / "submission_metadata.json", config.get("student_id", "email"))
        shutil.rmtree(course / "submitted", ignore_errors=True)
        folder = course / "submitted" / student / name
        folder.mkdir(parents=True)
        shutil.copyfile(notebook, folder / f"{config['notebook']}.ipynb")
    with factory.shared(course / STATE / "work"):
        a = prepare(course, name)
        varied = bool(((a.variants or {}).get("variants") or {}).get("enabled"))
        if student == BOOK:
            a = replace(a, variants=None)
        result = grade_submission(a, student, folder, DEFAULT_LIMITS)
    print(f"graded {name} for {student or '(no id: the book values)'}: {result['score']:g} / "
          f"{result['max_score']:g} in {result['seconds']:.1f} s; isolation: {result['isolation']}")
    if id_note:  # the staff's log and the results' own data: whom the values were dealt to, and why
        print(f"student id: {id_note}")
    extra = {"isolation": result["isolation"], "setting": result.get("setting", {})}
    return results_json(result["questions"], _summary(result, who if varied else ""),
                        extra | ({"student_id": {"used": student, "note": id_note}} if id_note else {}),
                        time.monotonic() - started)


def _summary(result: dict[str, Any], who: str) -> str:
    """The top of the student's feedback: score, the values graded with, the grader's notes."""
    lines = [f"Score: {result['score']:g} / {result['max_score']:g}"]
    if who:
        lines.append(who)
    if result.get("setting"):
        lines.append("Your setting (the values your answers were graded with):")
        lines += [f"  {name}: {describe(labels)}" for name, labels in result["setting"].items()]
    if result["problems"]:
        lines.append("Notes from the grader:")
        lines += [f"  - {p}" for p in result["problems"]]
    return "\n".join(lines)


def _student(metadata: Path, field: str) -> tuple[str, str, str]:
    """The student id to deal values from, a sentence for the student, and a note for the staff where the id
    is not the configured ``field``'s. An unusable value of ``field`` (missing, blank, a path) falls back to
    the next identifier Gradescope gives, the email and then its own user id (``FALLBACK_FIELDS``), never to
    the book's values, which a class's answers would be judged against. Only metadata that names no one grades
    with the book's values: the folder is ``submitted/<assignment>/`` (student ``BOOK``, the empty name),
    whose kernel sees an empty SCALING_COURSE_STUDENT, which ``course.variant`` reads as no student, and the
    assignment is judged without variants, so kernel and judge agree on the book's values."""
    try:
        users = json.loads(metadata.read_text()).get("users") or [{}]
        user = users[0] if isinstance(users[0], dict) else {}
    except (OSError, ValueError, AttributeError, TypeError, KeyError):
        user = {}
    for name in dict.fromkeys((field, *FALLBACK_FIELDS)):
        sid = _usable(user.get(name))
        if not sid:
            continue
        words = FIELD_WORDS.get(name, name)
        note = "" if name == field else (f"Gradescope gave no usable {FIELD_WORDS.get(field, field)} for this "
                                         f"submission: its values were dealt from the {words} instead ({sid}).")
        who = (f"Graded with the values dealt to {sid} (your {words} on Gradescope). Your notebook computes with "
               f"the same values after course.setup(student=\"{sid}\") (or SCALING_COURSE_STUDENT={sid}).")
        return sid, f"{note} {who}" if note else who, note
    return BOOK, (f"Gradescope gave no usable student id ({field}) for this submission: it was graded with "
                  "the book's values."), ""


def _usable(value: Any) -> str:
    """A metadata value as a student id that can name a folder, or "" where it cannot."""
    sid = str(value).strip() if isinstance(value, str | int) and not isinstance(value, bool) else ""
    ok = 0 < len(sid) <= MAX_ID and not sid.startswith(".") and not any(c in sid for c in "/\\\0\n")
    return sid if ok else ""


def pick_notebook(submission: Path, notebook: str, work: Path) -> tuple[Path | None, str]:
    """The one notebook of the upload, under any name, or inside a zip (``submissions.find_notebook``);
    among several, the one named as the assignment's. None and the reason when there is no such one."""
    from .files import files_under
    from .submissions import find_notebook, notebooks_under

    if not submission.is_dir():
        return None, "Nothing was submitted (no submission folder): upload your notebook."
    path, notes = find_notebook(submission, notebook, work)
    if path is not None:
        return path, ""
    found = notebooks_under(submission)
    named = [p for p in found if p.name == f"{notebook}.ipynb"]
    if len(named) == 1:
        return named[0], ""
    if found:
        names = ", ".join(str(p.relative_to(submission)) for p in found[:10])
        return None, (f"The submission holds several notebooks ({names}) and not one named {notebook}.ipynb: "
                      f"submit only your {notebook}.ipynb, or name the one to grade so.")
    if notes and any(p.is_file() for p in submission.glob("*.zip")):
        # zips whose notebooks differ, or a zipped notebook that cannot be read: the class grader's reason
        return None, f"{notes[0][0].upper()}{notes[0][1:]}: submit only your {notebook}.ipynb."
    files = [str(p.relative_to(submission)) for p in files_under(submission)][:10]
    return None, (f"No notebook (.ipynb) found in the submission ({', '.join(files) or 'no files'}): "
                  f"upload your {notebook}.ipynb.")


def main(argv: list[str] | None = None) -> int:
    """run_autograder's entry: ``python -m autograder.grading.gradescope [ROOT]``."""
    args = sys.argv[1:] if argv is None else argv
    root = Path(args[0] if args else os.environ.get(ROOT_ENV, "/autograder"))
    out = run(root.resolve())
    print(f"results.json: {out['score']:g} points over {len(out['tests'])} questions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
