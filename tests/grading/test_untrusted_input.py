"""What the grader reads from places it does not control, taken apart from a graded class (that is
tests/hostile): files a kernel leaves in its folders, files a student hands in, names a student chooses.

Nothing read back may follow a planted link, block on a FIFO, run without a bound on its bytes, raise in
the parent's class loop, or reach the instructor's terminal with control characters in it.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from autograder.grading import execute, pipeline
from autograder.grading.console import printable
from autograder.grading.files import NotPlain, read_plain
from autograder.grading.pipeline import Assignment, Summary
from autograder.grading.submissions import fingerprint, timestamp

QID = "hw-q1"


def _run(fn, seconds: float):
    """``fn()`` in a thread that may not take more than ``seconds`` (a read that never ends fails the test
    instead of hanging it)."""
    out: dict = {}

    def call() -> None:
        try:
            out["value"] = fn()
        except BaseException as e:  # raised again in the test's thread
            out["error"] = e

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still running after {seconds} s"
    if "error" in out:
        raise out["error"]
    return out.get("value")


def test_files_read_back_are_plain_files_never_links_and_bounded(tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("the grading secret")
    plain = tmp_path / "kernel.log"
    plain.write_bytes(b"x" * 5000)
    assert read_plain(plain, 10_000) == (b"x" * 5000, False)
    assert read_plain(plain, 100) == (b"x" * 100, True)
    (tmp_path / "to-secret").symlink_to(secret)
    (tmp_path / "to-zero").symlink_to("/dev/zero")
    os.mkfifo(tmp_path / "fifo")
    os.link(secret, tmp_path / "hard")
    for name in ("to-secret", "to-zero", "fifo"):
        with pytest.raises(NotPlain):
            _run(lambda name=name: read_plain(tmp_path / name, 1 << 20), 5)
    with pytest.raises(NotPlain):  # a second name of a file the kernel could not read
        read_plain(tmp_path / "hard", 1 << 20, one_link=True)
    assert read_plain(tmp_path / "hard", 1 << 20) == (b"the grading secret", False)  # a submission's own file


def test_the_kernels_log_is_kept_only_as_a_plain_file_and_bounded(tmp_path):
    """The kernel may replace its ``kernel.log`` with a link to a file it cannot read (the grader would copy
    it into the course's logs) or to /dev/zero (the grader would copy zeros until the disk is full)."""
    secret = tmp_path / "secret"
    secret.write_text("the grading secret")
    work, logs = tmp_path / "work", tmp_path / "logs"
    work.mkdir()
    for target in (secret, Path("/dev/zero")):
        (work / "kernel.log").unlink(missing_ok=True)
        (work / "kernel.log").symlink_to(target)
        _run(lambda: execute.keep_log(work / "kernel.log", logs / "a.log"), 10)
        kept = (logs / "a.log").read_bytes()
        assert b"grading secret" not in kept and len(kept) < 1000 and b"not kept" in kept, kept
    (work / "kernel.log").unlink()
    (work / "kernel.log").write_bytes(b"Traceback\n" + b"y" * (3 * execute.LOG_BYTES))
    execute.keep_log(work / "kernel.log", logs / "a.log")
    kept = (logs / "a.log").read_bytes()
    assert kept.startswith(b"Traceback\n") and execute.LOG_BYTES <= len(kept) < execute.LOG_BYTES + 1000


def test_a_work_folder_is_measured_without_following_links(tmp_path):
    """What the quota watchdog counts: every file under the kernel's folders, links not followed, and it stops
    counting once past the limit on entries (a million empty files cannot make the count slow)."""
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "blob").write_bytes(b"z" * 100_000)
    (tmp_path / "link").symlink_to("/usr")
    (tmp_path / "big-link").symlink_to(tmp_path / "a" / "b" / "blob")
    used, entries, hidden = execute.folder_usage([tmp_path], max_entries=1000)
    assert 100_000 <= used < 200_000 and entries == 5 and hidden is None
    for i in range(50):
        (tmp_path / f"f{i}").touch()
    assert execute.folder_usage([tmp_path], max_entries=10)[1] == 11


@pytest.mark.parametrize(("text", "kept"), [
    ("2026-12-02 10:00:00.000000 UTC", True), ("2026-12-02 10:00:00", True), ("2026-12-02T10:00:00+01:00", True),
    ("garbage", False), ("2024-02-30 10:00:00", False), ("9999-99-99", False),
    ("9999-12-31 23:59:59 -1400", False), ("2026-12-02 10:00:00 ../../../../etc/passwd", False),
    (b"\xff\xfe\x00garbage", False), ("", False),
])
def test_an_unreadable_timestamp_is_dropped_with_a_note(tmp_path, text, kept):
    """nbgrader parses the submission time in the parent, for the gradebook: one it cannot parse stopped the
    whole class, on every rerun. The worker lets through only real dates and times; a zone the gradebook
    still cannot read is dropped in the parent, each with a note."""
    from autograder.grading.gradebook import _storable_time

    path = tmp_path / "timestamp.txt"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    value, problem = timestamp(tmp_path)
    result = {"timestamp": value, "problems": []}
    storable = _storable_time(result)
    if kept:
        assert value == text and problem is None and storable and not result["problems"]
    else:
        assert not storable and result["timestamp"] is None
        notes = [problem] if problem else result["problems"]
        assert len(notes) == (text != "") and all("timestamp.txt" in n for n in notes), (problem, result)


def test_a_timestamp_that_is_a_link_or_a_flood_is_not_read(tmp_path):
    (tmp_path / "timestamp.txt").symlink_to("/dev/zero")
    value, problem = _run(lambda: timestamp(tmp_path), 5)
    assert value is None and "timestamp.txt" in problem
    (tmp_path / "timestamp.txt").unlink()
    (tmp_path / "timestamp.txt").write_text("2026-12-02 10:00:00 UTC" + " " * (1 << 24))
    value, problem = timestamp(tmp_path)
    assert value is None and "timestamp.txt" in problem


def test_the_fingerprint_takes_any_file_name_and_any_file(tmp_path):
    """Computed by the parent (has this submission changed?): a name that is not UTF-8, a file it cannot read,
    a FIFO or a link must not raise there."""
    (tmp_path / "sub").mkdir()
    (tmp_path / os.fsdecode(b"notes-\xff.txt")).write_text("hello")
    (tmp_path / "sub" / "locked.txt").write_text("x")
    (tmp_path / "sub" / "locked.txt").chmod(0)
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "zero").symlink_to("/dev/zero")
    try:
        first = _run(lambda: fingerprint(tmp_path, "hw"), 10)
        assert len(first) == 64 and fingerprint(tmp_path, "hw") == first
        (tmp_path / os.fsdecode(b"notes-\xff.txt")).write_text("changed")
        assert fingerprint(tmp_path, "hw") != first
    finally:
        (tmp_path / "sub" / "locked.txt").chmod(0o600)


def test_student_text_is_made_safe_for_the_console():
    spoof = "\r\x1b[2K  zz-fake-student: 44 of 44, no problems\x1b[8m.ipynb"
    shown = printable(spoof)
    assert "\x1b" not in shown and "\r" not in shown and "zz-fake-student" in shown
    assert shown.startswith("\\r\\x1b[2K")
    for text in ("a\nb", "a\u202eb", "a\x9bb", "a\x00b", os.fsdecode(b"bad-\xff"), "a\u2028b", "a\x7fb"):
        shown = printable(text)
        assert shown.isprintable() and shown.encode("utf-8"), (text, shown)
    assert printable("José 学生 ok-1.ipynb") == "José 学生 ok-1.ipynb"


def _course(tmp_path: Path) -> Assignment:
    course = tmp_path.resolve()
    master = course / "source" / "hw" / "hw.ipynb"
    master.parent.mkdir(parents=True)
    nbformat.write(new_notebook(cells=[new_code_cell("", metadata={"nbgrader": {"grade_id": QID, "grade": True,
                                                                                   "points": 2}})]), master)
    return Assignment(course, "hw", "hw", master, {}, {QID: 2.0})


def _result(student: str, **changes) -> dict:
    return {"student": student, "assignment": "hw", "notebook": "hw", "grader": "2", "sha256": "abc",
            "timestamp": None, "questions": {QID: {"points": 2.0, "score": 2.0, "status": "correct",
                                                   "diagnosis": "correct", "message": "Correct.",
                                                   "answer_text": "16"}},
            "score": 2.0, "max_score": 2.0, "problems": [], "isolation": "", "seconds": 1.0} | changes


def test_a_result_the_gradebook_refuses_is_that_students_problem_not_the_class(tmp_path, monkeypatch):
    """Whatever a submission makes the gradebook raise (a name sqlite cannot store, anything no check
    foresaw), the parent stores a result flagged for the staff in its place, or leaves it unstored with the
    reason, and goes on with the class; a submission time the gradebook cannot read is dropped with a note."""
    from nbgrader.api import Gradebook

    from autograder.grading import results

    a = _course(tmp_path)
    with Gradebook(a.db_url) as gb:
        gb.add_assignment("hw")
        gb.add_notebook("hw", "hw")
        gb.add_grade_cell(QID, "hw", "hw", max_score=2, cell_type="code")
    summary = Summary()
    kept = pipeline.keep(a, _result("eve", timestamp="9999-12-31 23:59:59 -1400"), summary)
    assert kept["score"] == 2.0 and kept["timestamp"] is None and "timestamp.txt" in " ".join(kept["problems"])
    write = results.write_result

    def refuses_ada(db_url: str, result: dict) -> None:
        if result["student"] == "ada" and result["score"]:
            raise ValueError("refused")
        write(db_url, result)

    monkeypatch.setattr(results, "write_result", refuses_ada)
    kept = pipeline.keep(a, _result("ada"), summary)
    assert kept["score"] == 0 and "could not be stored" in " ".join(kept["problems"])
    stored = json.loads((tmp_path / ".scaling-course" / "results" / "hw" / "ada.json").read_text())
    assert stored["questions"][QID]["diagnosis"] == "grader_error" and "ada" in summary.problems
    with Gradebook(a.db_url) as gb:
        assert gb.find_grade(QID, "hw", "hw", "ada").needs_manual_grade
    unstorable = os.fsdecode(b"bad-\xff")  # sqlite takes no lone surrogate: not even the flagged result goes in
    kept = pipeline.keep(a, _result(unstorable), summary)
    assert "could not be stored" in " ".join(kept["problems"]) and unstorable in summary.problems
    bob = pipeline.keep(a, _result("bob"), summary)
    assert bob["score"] == 2.0, bob["problems"]  # and the class goes on


def test_a_feedback_stage_over_its_budget_keeps_within_it():
    """The same bound as the report's own (test_feedback.py), measured here on the reviewer's notebook shape:
    three markdown cells of 80,000 characters of ``\\begin{x}`` and two code cells of 200,000 characters of
    hidden-test markers took 95 s; the bound is seconds."""
    from autograder.grading.feedback import annotate, render_html

    cells = [nbformat.v4.new_markdown_cell(("\\begin{x}" * 9000)[:80_000] + f"\n{i}") for i in range(3)]
    cells += [new_code_cell(("### BEGIN HIDDEN TESTS\n" * 9000)[:199_000] + f"# {i}") for i in range(2)]
    nb = new_notebook(cells=cells)
    started = time.monotonic()
    render_html(annotate(nb, {}), "hw", {}, [])
    assert time.monotonic() - started < 5


def test_a_hand_given_score_stays_flagged_when_the_automatic_one_is_written_again(tmp_path):
    """A person's score in formgrader outlives a regrade (nbgrader keeps manual over automatic): the grade
    is flagged for the staff again, as nbgrader's autograde does, so a changed automatic score is seen."""
    from nbgrader.api import Gradebook

    from autograder.grading import results

    a = _course(tmp_path)
    with Gradebook(a.db_url) as gb:
        gb.add_assignment("hw")
        gb.add_notebook("hw", "hw")
        gb.add_grade_cell(QID, "hw", "hw", max_score=2, cell_type="code")
    results.write_result(a.db_url, _result("ada"))
    results.write_result(a.db_url, _result("bob"))
    with Gradebook(a.db_url) as gb:
        gb.find_grade(QID, "hw", "hw", "ada").manual_score = 0.5
        gb.db.commit()
    zero = {QID: _result("ada")["questions"][QID] | {"score": 0.0, "status": "incorrect"}}
    results.write_result(a.db_url, _result("ada", questions=zero, score=0.0))
    results.write_result(a.db_url, _result("bob"))
    with Gradebook(a.db_url) as gb:
        ada, bob = (gb.find_grade(QID, "hw", "hw", s) for s in ("ada", "bob"))
        assert ada.auto_score == 0.0 and ada.manual_score == 0.5 and ada.needs_manual_grade
        assert not bob.needs_manual_grade
