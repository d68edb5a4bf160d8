"""The instructor's flows around a class run, without running a notebook: an upload that holds several candidate
notebooks (zips and folders), hand grades in the gradebook across reruns, two runs of one assignment at once,
grades.csv after a kill, an assignment named with a trailing slash, and what dead runs leave behind.

A run here is ``pipeline.grade`` with the stages replaced by a stub (``Run`` of test_class_runs.py)."""

import csv
import json
import os
import subprocess
import sys
import textwrap
import time
import zipfile
from pathlib import Path

import pytest
from nbformat.v4 import new_code_cell, new_notebook

from autograder.grading import pipeline, stages
from autograder.grading.gradebook import write_result
from autograder.grading.pipeline import CourseError, Interrupted
from autograder.grading.submissions import find_notebook
from tests.grading.test_class_runs import Run, _result, _stored
from tests.grading.test_stages import QID, _course
from tests.paths import ROOT


def _zip(path: Path, members: dict[str, str]) -> None:
    with zipfile.ZipFile(path, "w") as z:
        for name, text in members.items():
            z.writestr(name, text)


# --- several candidates: refused, never a guess ----------------------------------------------------------------

def _upload(tmp_path: Path, files: dict[str, str], zips: dict[str, dict[str, str]]) -> Path:
    folder = tmp_path / "submitted" / "ada" / "hw"
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    for name, members in zips.items():
        _zip(folder / name, members)
    return folder


@pytest.mark.parametrize("files, zips, named", [
    ({}, {"draft.zip": {"hw.ipynb": '{"draft": 1}'}, "final.zip": {"hw.ipynb": '{"final": 1}'}},
     ["hw.ipynb in draft.zip", "hw.ipynb in final.zip"]),
    ({}, {"upload.zip": {"attempt1/hw.ipynb": '{"a": 1}', "attempt2/hw.ipynb": '{"a": 2}'}},
     ["attempt1/hw.ipynb in upload.zip", "attempt2/hw.ipynb in upload.zip"]),
    ({}, {"a.zip": {"mine.ipynb": '{"a": 1}'}, "b.zip": {"other.ipynb": '{"b": 1}'}},
     ["mine.ipynb in a.zip", "other.ipynb in b.zip"]),
    ({"renamed.ipynb": '{"loose": 1}'}, {"download.zip": {"ada/hw.ipynb": '{"zipped": 1}'}},
     ["renamed.ipynb", "ada/hw.ipynb in download.zip"]),
    ({"sub/hw.ipynb": '{"loose": 1}'}, {"download.zip": {"hw.ipynb": '{"zipped": 1}'}},
     ["sub/hw.ipynb", "hw.ipynb in download.zip"]),
])
def test_several_candidates_in_zips_and_folders_are_refused_and_named(tmp_path, files, zips, named):
    """Two renamed notebooks are refused ("found A, B: which one?"); so is any other mix of candidates: several
    zips, one zip with the notebook twice, a renamed notebook beside a zip. A guess (the first zip by name) would
    grade a draft where the final sorts after it."""
    folder = _upload(tmp_path, files, zips)
    path, notes = find_notebook(folder, "hw", tmp_path / "work")
    assert path is None, (path.read_text(), notes)
    [note] = notes
    assert note.startswith("no hw.ipynb in the submission") and "which one?" in note, note
    for name in named:
        assert name in note, note


def test_copies_of_one_notebook_are_one_candidate(tmp_path):
    """An upload and its unzipped copy (an LMS that keeps both) are the same work: graded, the copy named."""
    text = json.dumps({"cells": [], "mine": 1})
    folder = _upload(tmp_path, {"ada/hw.ipynb": text}, {"download.zip": {"ada/hw.ipynb": text}})
    path, notes = find_notebook(folder, "hw", tmp_path / "work")
    assert path is not None and path.read_text() == text
    assert len(notes) == 1 and "download.zip" in notes[0] and "ada/hw.ipynb" in notes[0], notes


def test_one_zip_is_graded_and_the_others_are_named(tmp_path):
    folder = _upload(tmp_path, {}, {"upload.zip": {"hw.ipynb": '{"mine": 1}', "scratch.ipynb": "{}"},
                                    "data.zip": {"table.csv": "a,b\n"}})
    path, notes = find_notebook(folder, "hw", tmp_path / "work")
    assert path is not None and path.read_text() == '{"mine": 1}'  # the assignment's name decides inside a zip
    [note] = notes
    assert note.startswith("graded the notebook inside upload.zip") and "data.zip" in note, note
    assert "scratch.ipynb" in note, note


def test_a_single_zip_of_one_notebook_says_only_where_it_came_from(tmp_path):
    folder = _upload(tmp_path, {}, {"download.zip": {"ada/hw.ipynb": '{"mine": 1}'}})
    path, notes = find_notebook(folder, "hw", tmp_path / "work")
    assert path.read_text() == '{"mine": 1}' and notes == ["graded the notebook inside download.zip"]


# --- hand grades ------------------------------------------------------------------------------------------------

def _gradebook(a) -> None:
    from nbgrader.api import Gradebook

    with Gradebook(a.db_url) as gb:
        gb.add_assignment("hw")
        gb.add_notebook("hw", "hw")
        gb.add_grade_cell(QID, "hw", "hw", max_score=2, cell_type="code")


def _hand_grade(a, student: str, score: float) -> None:
    """What formgrader does when a person gives a score and approves it."""
    from nbgrader.api import Gradebook

    with Gradebook(a.db_url) as gb:
        grade = gb.find_grade(QID, "hw", "hw", student)
        grade.manual_score, grade.needs_manual_grade = score, False
        gb.db.commit()


def _flagged(a, student: str) -> bool:
    from nbgrader.api import Gradebook

    with Gradebook(a.db_url) as gb:
        return gb.find_grade(QID, "hw", "hw", student).needs_manual_grade


def test_an_approved_hand_grade_is_flagged_again_only_when_its_automatic_score_changes(tmp_path):
    a = _course(tmp_path)
    _gradebook(a)
    write_result(a.db_url, _result("ada"))
    _hand_grade(a, "ada", 1.5)
    write_result(a.db_url, _result("ada"))  # a rerun keeps the unchanged result and writes it again
    assert not _flagged(a, "ada")
    write_result(a.db_url, _result("ada", scores={QID: 0.0}))  # the automatic score moved under the hand grade
    assert _flagged(a, "ada")
    write_result(a.db_url, _result("ada", scores={QID: 0.0}))  # unchanged again: the flag stays for a person
    assert _flagged(a, "ada")


def test_a_run_names_hand_grades_that_differ_from_the_automatic_scores(tmp_path, monkeypatch):
    """The table and grades.csv hold automatic scores; a run says where the gradebook holds another by hand."""
    run = Run(tmp_path, monkeypatch)
    for student in ("ada", "bob"):
        run.submit(student)
    run.grade()
    _gradebook(run.a)
    for student in ("ada", "bob"):
        write_result(run.a.db_url, _result(student))
    _hand_grade(run.a, "ada", 1.5)
    _hand_grade(run.a, "bob", 2.0)  # the same as the automatic score: nothing to say
    summary = run.grade()
    said = [w for w in summary.warnings if "by hand" in w]
    assert len(said) == 1 and "ada" in said[0] and "bob" not in said[0], summary.warnings
    assert QID in said[0] and "1.5" in said[0] and "nbgrader export" in said[0], said


# --- two runs of one assignment -----------------------------------------------------------------------------------

def test_a_second_run_of_the_same_assignment_refuses_to_start(tmp_path, monkeypatch):
    run = Run(tmp_path, monkeypatch)
    run.submit("ada")
    with pipeline.grading_lock(run.a.course_dir, "hw"):
        with pytest.raises(CourseError, match=rf"grading of hw is already running \(pid {os.getpid()}\)"):
            run.grade()
        assert run.graded == []
    run.grade()  # released when the first run ends
    assert run.graded == ["ada"]


def test_the_lock_of_a_killed_run_is_free(tmp_path):
    """An OS lock, not a pid file: ``kill -9`` of the run releases it."""
    course = tmp_path.resolve()
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import sys, time
            from pathlib import Path
            from autograder.grading.pipeline import grading_lock
            with grading_lock(Path({str(course)!r}), "hw"):
                print("held", flush=True)
                time.sleep(60)
            """)], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(CourseError, match=rf"pid {holder.pid}"), pipeline.grading_lock(course, "hw"):
            pass
        with pipeline.grading_lock(course, "other"):  # another assignment is not held up
            pass
    finally:
        holder.kill()
        holder.wait()
    with pipeline.grading_lock(course, "hw"):
        pass


# --- grades.csv after a kill -------------------------------------------------------------------------------------

def test_grades_csv_follows_each_stored_result(tmp_path, monkeypatch):
    """A run killed midway leaves grades.csv agreeing with the stored results: it is rewritten at each store."""
    run = Run(tmp_path, monkeypatch)
    for student in ("ada", "bob"):
        run.submit(student)
        _stored(run.a, _result(student, scores={QID: 0.0}))  # an earlier grade, now stale
    seen = {}
    grade = run._grade

    def grade_and_look(a, student, folder, limits):
        table = a.course_dir / "grades.csv"
        seen[student] = {r["student"]: r["score"] for r in csv.DictReader(table.open())} if table.exists() else {}
        return grade(a, student, folder, limits)

    monkeypatch.setattr(pipeline, "grade_submission", grade_and_look)
    run.grade(force=True)
    assert seen["bob"]["ada"] == "2", seen  # ada's new grade was in grades.csv before bob's grading began


# --- the assignment's name ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("typed", ["hw/", "hw//"])
def test_a_trailing_slash_is_dropped_before_the_name_is_used(tmp_path, monkeypatch, typed):
    run = Run(tmp_path, monkeypatch)
    run.submit("ada")
    asked = []
    monkeypatch.setattr(pipeline, "prepare", lambda course_dir, name, late=None: asked.append(name) or run.a)
    summary = pipeline.grade(run.a.course_dir, typed, jobs=1)
    assert asked == ["hw"] and [r["student"] for r in summary.results] == ["ada"]


@pytest.mark.parametrize("typed", ["", "/", ".", "..", "source/hw", " "])
def test_a_name_that_is_no_assignment_is_refused(tmp_path, typed):
    (tmp_path / "nbgrader_config.py").write_text("")
    with pytest.raises(CourseError, match="not an assignment's name"):
        pipeline.grade(tmp_path, typed)
    assert not (tmp_path / ".scaling-course" / "results").exists()


def test_the_gradebook_never_gets_a_nameless_assignment(tmp_path):
    a = _course(tmp_path)
    with pytest.raises(ValueError):
        write_result(a.db_url, _result("ada", assignment=""))


# --- what dead runs leave -----------------------------------------------------------------------------------------

def _dead_pid() -> int:
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    done.wait()
    return done.pid


def test_work_folders_of_dead_runs_are_removed_and_live_ones_kept(tmp_path, monkeypatch):
    run = Run(tmp_path, monkeypatch)
    run.submit("ada")
    work = run.a.course_dir / ".scaling-course" / "work"
    pid = _dead_pid()
    dead, alive, recent = work / f"bob-{pid}", work / f"cy-{os.getppid()}", work / f"dee-{pid}"
    for folder in (dead, alive, recent, work / "warmup-hw"):
        folder.mkdir(parents=True)
        (folder / ".drawn-cases.json").write_text("[]")
        if folder != recent:  # one that changed lately may be a live worker's on another machine (Dask)
            hours_ago = time.time() - 2 * pipeline.STALE_WORK_SECONDS
            os.utime(folder, (hours_ago, hours_ago))
    dead_log, live_log = work / f"factory-{pid}.log", work / f"factory-{os.getppid()}.log"
    for log in (dead_log, live_log):
        log.write_text("a kernel factory's log")
        os.utime(log, (hours_ago, hours_ago))
    run.grade()
    assert not dead.exists() and alive.exists() and recent.exists() and (work / "warmup-hw").exists()
    assert not dead_log.exists() and live_log.exists()  # a killed run's factory log went with its folders


def test_an_interrupted_run_removes_its_workers_folders_at_once(tmp_path, monkeypatch):
    """Not an hour later: a kernel may have written hundreds of MiB there. Folders of live processes stay."""
    run = Run(tmp_path, monkeypatch)
    run.submit("ada")
    work = run.a.course_dir / ".scaling-course" / "work"
    mine, theirs = work / f"ada-{_dead_pid()}", work / f"bob-{os.getppid()}"

    def interrupted(a, student, folder, limits):
        for f in (mine, theirs):
            f.mkdir(parents=True)
        raise KeyboardInterrupt

    monkeypatch.setattr(pipeline, "grade_submission", interrupted)
    with pytest.raises(Interrupted):
        run.grade()
    assert not mine.exists() and theirs.exists()


def test_an_interrupted_run_counts_only_what_it_graded(tmp_path, monkeypatch):
    run = Run(tmp_path, monkeypatch)
    for student in ("ada", "bob", "cy"):
        run.submit(student)
    _stored(run.a, _result("ada"))  # graded before: kept
    grade = run._grade

    def stopped_at_cy(a, student, folder, limits):
        if student == "cy":
            raise KeyboardInterrupt
        return grade(a, student, folder, limits)

    monkeypatch.setattr(pipeline, "grade_submission", stopped_at_cy)
    with pytest.raises(Interrupted) as stopped:
        run.grade()
    assert stopped.value.kept == 1 and str(stopped.value).startswith("interrupted: 1 graded and kept"), stopped.value


def test_the_same_command_continues_an_interrupted_forced_run(tmp_path, monkeypatch):
    """"rerun the same command to continue" holds for --force too: the rerun keeps what the interrupted forced run
    regraded and regrades only the rest (before, it regraded everyone again; and without --force, those it had not
    reached kept their old results). A forced run that ends leaves nothing behind: the next one regrades all."""
    run = Run(tmp_path, monkeypatch)
    for student in ("ada", "bob", "cy"):
        run.submit(student)
        _stored(run.a, _result(student))  # graded before, long ago
        old = time.time() - 3600
        os.utime(run.a.course_dir / ".scaling-course" / "results" / "hw" / f"{student}.json", (old, old))
    grade, done = run._grade, []

    def stopped_at_the_third(a, student, folder, limits):
        if len(done) == 2:
            raise KeyboardInterrupt
        done.append(student)
        return grade(a, student, folder, limits)

    monkeypatch.setattr(pipeline, "grade_submission", stopped_at_the_third)
    with pytest.raises(Interrupted):
        run.grade(force=True)
    monkeypatch.setattr(pipeline, "grade_submission", grade)
    again = run.grade(force=True)
    assert run.graded == sorted({"ada", "bob", "cy"} - set(done)) and again.skipped == 2, (run.graded, done)
    run.grade(force=True)
    assert sorted(run.graded) == ["ada", "bob", "cy"]


# --- notes on unreadable notebooks ----------------------------------------------------------------------------------

@pytest.mark.parametrize("data, encoding", [
    (b"not json at all", None),
    (b"\xef\xbb\xbf{not json", "byte-order mark"),
])
def test_an_unreadable_notebook_gets_one_short_note(tmp_path, data, encoding):
    """Not a list of every restored cell after "graded as empty"; a file saved in another encoding than the
    UTF-8 Jupyter writes is told how to save it."""
    a = _course(tmp_path)
    folder = a.course_dir / "submitted" / "ada" / "hw"
    folder.mkdir(parents=True)
    (folder / "hw.ipynb").write_bytes(data)
    job = stages.Job(a, "ada", folder)
    stages.sanitize(job)
    assert len(job.problems) == 1 and "graded as empty" in job.problems[0], job.problems
    assert QID not in job.problems[0] and "restored" not in job.problems[0]
    if encoding:
        assert encoding in job.problems[0] and "save it as UTF-8" in job.problems[0], job.problems


@pytest.mark.parametrize("encode, said", [
    (lambda text: b"\xef\xbb\xbf" + text.encode(), "byte-order mark"),
    (lambda text: text.encode("utf-16"), "UTF-16"),
    (lambda text: text.replace("ANSWER", "caf\u00e9").encode("utf-8").replace(b"\xc3\xa9", b"\xe9"), "not UTF-8"),
], ids=["bom", "utf-16", "latin-1 byte"])
def test_a_notebook_in_another_encoding_is_graded_with_a_note(tmp_path, encode, said):
    """A byte-order mark or UTF-16 was graded as empty (0 points for a file whose cells are all there) while a byte
    that is no UTF-8 was graded with no word: Jupyter opens none of them, so each is graded, with a note on how to
    save it."""
    import nbformat

    a = _course(tmp_path)
    folder = a.course_dir / "submitted" / "ada" / "hw"
    folder.mkdir(parents=True)
    release = nbformat.read(a.master, as_version=4)
    release.cells.append(nbformat.v4.new_markdown_cell("ANSWER"))
    (folder / "hw.ipynb").write_bytes(encode(nbformat.writes(release)))
    job = stages.Job(a, "ada", folder)
    stages.sanitize(job)
    assert not [p for p in job.problems if "graded as empty" in p or "restored" in p], job.problems
    assert [p for p in job.problems if said in p and "save it as UTF-8" in p], job.problems


def test_a_notebook_with_none_of_the_assignments_cells_says_so_in_one_line(tmp_path):
    import nbformat

    a = _course(tmp_path)
    folder = a.course_dir / "submitted" / "ada" / "hw"
    folder.mkdir(parents=True)
    nbformat.write(new_notebook(cells=[new_code_cell("q1_bytes = 16")]), folder / "hw.ipynb")
    job = stages.Job(a, "ada", folder)
    stages.sanitize(job)
    [note] = [p for p in job.problems if "restored" in p]
    assert QID not in note and "none of the assignment's 2 cells" in note, note


def test_a_zip_of_many_members_is_read_once_and_one_past_the_cap_is_not_opened(tmp_path, monkeypatch):
    """A zip of 100,000 empty notebooks held one submission for 160 s (its members compared with a list of them,
    a square of the count): they are named as candidates once, and a zip of more members than a folder's walk takes
    is not opened, said so."""
    from autograder.grading import submissions

    folder = _upload(tmp_path, {}, {"many.zip": {f"{i}.ipynb": "" for i in range(3000)}})
    path, [note] = find_notebook(folder, "hw", tmp_path / "work")
    assert path is None and "which one?" in note and "2995 more" in note, note
    monkeypatch.setattr(submissions, "WALKED_ENTRIES", 1000)
    path, [note] = find_notebook(folder, "hw", tmp_path / "work")
    assert path is None and note == "no hw.ipynb in the submission; many.zip (over 1,000 files: not opened)", note
