"""Grading a class: broken submissions of every kind, parallel = sequential = Dask, kill -9 and resume,
nbgrader's own export on our gradebook.

Submissions start from the release notebook with Exercise E1 answered (2 points), so each kernel
run is short; the damage is then applied on top.
"""

import csv
import io
import json
import os
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import nbformat
import psutil
import pytest

from autograder.demo import copy_course, submit
from autograder.grading.execute import Limits
from autograder.grading.jail import landlock_abi
from autograder.grading.pipeline import grade
from tests.paths import ROOT

CHAPTER = "ch01_rooflines"
NAME = f"{CHAPTER}.ipynb"
LIMITS = Limits(cell_seconds=20, notebook_seconds=240, output_bytes_per_cell=200_000, output_bytes_total=1_000_000)
pytestmark = pytest.mark.slow


def _release():
    return nbformat.read(ROOT / "release" / CHAPTER / NAME, as_version=4)


def _gid(cell):
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


def _cell(nb, gid):
    return next(c for c in nb.cells if _gid(c) == gid)


def answered():
    """The release notebook with E1 (2 points) answered, for the student's own number of FLOPs."""
    nb = _release()
    _cell(nb, "ch01-e1-answer").source = ("t_h100 = e1.flops / hw.H100.bf16_flops_per_s\n"
                                          "t_v6e = e1.flops / hw.TPU_V6E.bf16_flops_per_s")
    return nb


def _after(nb, gid, source):
    i = next(i for i, c in enumerate(nb.cells) if _gid(c) == gid)
    nb.cells.insert(i + 1, nbformat.v4.new_code_cell(source))
    return nb


def damaged():
    """student -> (notebook or a callable that writes the submission folder, expected score)."""
    deleted = answered()
    deleted.cells = [c for c in deleted.cells if _gid(c) not in ("ch01-e1-h100-time", "ch01-e2-answer")]
    duplicated = answered()
    second = nbformat.from_dict(json.loads(json.dumps(_cell(duplicated, "ch01-e1-answer"))))
    second.source = "t_h100 = 12345.0"
    second["id"] = "duplicate-of-e1"
    duplicated.cells.insert(duplicated.cells.index(_cell(duplicated, "ch01-e1-answer")) + 1, second)
    retyped = answered()
    _cell(retyped, "ch01-e1-answer").cell_type = "markdown"
    _cell(retyped, "ch01-e1-answer").pop("outputs", None)
    _cell(retyped, "ch01-e1-answer").pop("execution_count", None)
    metadata = answered()
    _cell(metadata, "ch01-e1-h100-time").metadata["nbgrader"]["points"] = 100
    _cell(metadata, "ch01-e1-v6e-time").source = "print('all good')"
    reordered = answered()
    tests = [c for c in reordered.cells if _gid(c) in ("ch01-e1-h100-time", "ch01-e1-v6e-time")]
    reordered.cells = [c for c in reordered.cells if c not in tests]
    reordered.cells.insert(1, tests[0])  # before its answer, even before the setup cell's successor
    return {
        "intact": (answered(), 2),
        "renamed": (lambda folder: nbformat.write(answered(), folder / "my_work.ipynb"), 2),
        "zipped": (lambda folder: _zip(answered(), folder / "download.zip"), 2),
        "cells-deleted": (deleted, 2),
        "cell-duplicated": (duplicated, 1),  # the last copy (t_h100 wrong) counts, as in the kernel and nbgrader
        "cell-retyped": (retyped, 2),
        "metadata-edited": (metadata, 2),
        "reordered": (reordered, 2),
        "kernel-death": (_after(answered(), "ch01-e1-answer", "import os\nos._exit(1)"), 0),
        "endless-loop": (_after(answered(), "ch01-e1-v6e-time", "while True:\n    pass"), 2),
        "huge-output": (_after(answered(), "ch01-e1-v6e-time", "for i in range(10**6):\n    print('x' * 100)"), 2),
        "missing": (lambda folder: (folder / "notes.txt").write_text("forgot the notebook"), 0),
    }


def _zip(nb, path):
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"student/{NAME}", nbformat.writes(nb))
        z.writestr("__MACOSX/._x.ipynb", "junk")


def make_course(path: Path, students) -> Path:
    copy_course(ROOT, path)
    for student, (nb, _) in students.items():
        if callable(nb):
            folder = path / "submitted" / student / CHAPTER
            folder.mkdir(parents=True)
            nb(folder)
        else:
            submit(path, student, CHAPTER, nb)
    return path


@pytest.fixture(scope="module")
def broken(tmp_path_factory):
    students = damaged()
    course = make_course(tmp_path_factory.mktemp("broken"), students)
    summary = grade(course, CHAPTER, jobs=2, limits=LIMITS)
    return course, students, {r["student"]: r for r in summary.results}, summary


def test_every_broken_submission_is_graded_as_far_as_it_can_be(broken):
    _, students, results, _ = broken
    assert set(results) == set(students)
    for student, (_, expected) in students.items():
        assert results[student]["score"] == expected, (student, results[student]["problems"])


@pytest.mark.parametrize(("student", "reason"), [
    ("renamed", "renamed"), ("zipped", "inside download.zip"), ("cells-deleted", "restored"),
    ("cell-duplicated", "duplicated"), ("cell-retyped", "original type"), ("kernel-death", "kernel died"),
    ("endless-loop", "Timeout"), ("huge-output", "output over the limit"), ("missing", "no ch01_rooflines.ipynb"),
    ("reordered", "another order than the assignment's: ch01-e1-h100-time graded"),
])
def test_the_summary_says_what_was_wrong(broken, student, reason):
    _, _, results, summary = broken
    text = " ".join(results[student]["problems"])
    assert reason.lower() in text.lower() or any(reason.lower() in q["message"].lower()
                                                 for q in results[student]["questions"].values()), text
    assert student in summary.problems


def test_a_deleted_answer_cell_is_told_as_deleted_not_as_a_placeholder_left(broken):
    """The answer cell put back from the assignment stops at its placeholder: "still holds its placeholder" told a
    student who had deleted the cell that they had left it unanswered."""
    _, _, results, _ = broken
    told = [q["message"] for qid, q in results["cells-deleted"]["questions"].items() if qid.startswith("ch01-e2")]
    assert told and all("no answer cell here (deleted?)" in m for m in told), told


def test_parallel_sequential_and_dask_agree(tmp_path):
    students = {s: v for s, v in damaged().items() if s in ("intact", "cells-deleted", "missing")}
    course = make_course(tmp_path, students)
    parallel = {r["student"]: r["questions"] for r in grade(course, CHAPTER, jobs=2, limits=LIMITS).results}
    serial = {r["student"]: r["questions"] for r in grade(course, CHAPTER, jobs=1, force=True, limits=LIMITS).results}
    from dask.distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        dask = {r["student"]: r["questions"] for r in grade(course, CHAPTER, force=True, limits=LIMITS,
                                                            scheduler=cluster.scheduler_address).results}
    scores = [{s: {q: v["score"] for q, v in qs.items()} for s, qs in run.items()} for run in (parallel, serial, dask)]
    assert scores[0] == scores[1] == scores[2]
    assert scores[0]["intact"]["ch01-e1-h100-time"] == 1


def test_kill_nine_then_resume_loses_and_duplicates_nothing(tmp_path):
    from nbgrader.api import Gradebook

    students = {f"s{i}": (answered(), 2) for i in range(3)}
    course = make_course(tmp_path, students)
    cmd = [sys.executable, "-m", "autograder.cli", "grade", CHAPTER, "--course-dir", str(course), "--jobs", "2"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    results, table = course / ".scaling-course" / "results" / CHAPTER, course / "grades.csv"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not (any(results.glob("*.json")) and table.exists()):
        time.sleep(0.2)
    assert any(results.glob("*.json")), "the first submission never finished"
    assert table.exists(), "grades.csv is written as results are stored, not at the end only"
    helpers = psutil.Process(proc.pid).children(recursive=True)  # workers, kernel factories, kernels, judges
    os.kill(proc.pid, signal.SIGKILL)  # kill -9 of the grader alone: nothing it started may linger
    proc.wait()
    _, alive = psutil.wait_procs(helpers, timeout=20)
    assert not alive, [" ".join(p.cmdline()[-3:]) for p in alive]
    done_before = {p.stem for p in results.glob("*.json")}
    assert 1 <= len(done_before) < 3
    # grades.csv agrees with what was stored (but for a result stored at the instant of the kill)
    rows = {r["student"]: r["score"] for r in csv.DictReader(table.open())}
    stored = {p.stem: f"{json.loads(p.read_text())['score']:g}" for p in results.glob("*.json")}
    assert rows.items() <= stored.items() and len(set(stored) - set(rows)) <= 1, (rows, stored)
    summary = grade(course, CHAPTER, jobs=2, limits=LIMITS)
    assert summary.skipped == len(done_before)
    assert {r["student"]: r["score"] for r in summary.results} == {s: 2 for s in students}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        subs = gb.assignment_submissions(CHAPTER)
        assert sorted(s.student.id for s in subs) == sorted(students)  # one each: no duplicates
        assert all(s.score == 2 for s in subs)
    again = grade(course, CHAPTER, jobs=2, limits=LIMITS)
    assert again.skipped == 3


def test_nbgrader_export_reads_our_gradebook(broken):
    course, _, results, _ = broken
    out = subprocess.run([sys.executable, "-m", "nbgrader", "export", "--to", str(course / "export.csv")],
                         cwd=course, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    text = (course / "export.csv").read_text()
    assert "intact" in text and CHAPTER in text


@pytest.mark.skipif(landlock_abi() == 0, reason="no Landlock: the grader uses no compilation cache here")
def test_the_compilation_cache_fills_while_the_class_is_graded(tmp_path, monkeypatch):
    from autograder.grading import warmup
    from autograder.grading.console import Progress

    monkeypatch.setattr(warmup, "MIN_NOTEBOOKS", 2)  # a real blank run, for a class small enough to test
    monkeypatch.setattr(warmup, "MIN_PROGRAMS", 0)  # and a chapter with too few programs to repay one
    students = {f"s{i}": (answered(), 2) for i in range(4)}
    course = make_course(tmp_path, students)
    log = io.StringIO()
    first = grade(course, CHAPTER, jobs=2, limits=LIMITS, progress=Progress(stream=log, bar=False))
    assert {r["student"]: r["score"] for r in first.results} == {s: 2 for s in students}
    assert "fills it while" in log.getvalue() and "filled by a blank notebook" in log.getvalue()
    assert (course / ".scaling-course" / "jax-cache" / CHAPTER / "READY").is_file()
    again = grade(course, CHAPTER, jobs=2, limits=LIMITS, force=True)
    assert all(r["compilation_cache"] for r in again.results)
    assert {r["student"]: r["score"] for r in again.results} == {s: 2 for s in students}
