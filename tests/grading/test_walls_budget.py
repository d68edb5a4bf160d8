"""Bounds that must not cost an honest student: answer records have a budget of their own beside the output
budget (and a bounded one), a submission's files are hashed to a cap, a chapter's answer key covers that
chapter only, and a notebook in an older format is read, not graded as empty."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from autograder.grading import execute, results, sanitize
from autograder.grading.execute import LimitedClient, Limits
from autograder.record import MIME, make
from tests.paths import ROOT

CHAPTER = "ch01_rooflines"
NAME = f"{CHAPTER}.ipynb"
QID = "ch00-q1-bytes"


def _test_cell(gid: str) -> nbformat.NotebookNode:
    return new_code_cell(f"grade({gid!r}, x)", metadata={"nbgrader": {"grade_id": gid, "grade": True,
                                                                          "solution": False, "points": 1}})


def _client(limits: Limits, n_test_cells: int = 2) -> LimitedClient:
    """A client over a notebook of one cell of the student's own, then ``n_test_cells`` test cells."""
    cells = [new_code_cell("print('mine')")] + [_test_cell(f"ch00-q{i}") for i in range(n_test_cells)]
    client = LimitedClient(new_notebook(cells=cells), limits=limits)
    client.reset_execution_trackers()
    client.clear_before_next_output = False  # set as a cell starts
    return client


def _display(data: dict) -> dict:
    return {"msg_type": "display_data", "header": {"msg_type": "display_data"}, "parent_header": {},
            "content": {"data": data, "metadata": {}, "transient": {}}}


def _record(qid: str, answer: object = 16.0) -> dict:
    return _display({MIME: make(qid, "number", answer), "text/plain": f"[answer to {qid} recorded]"})


SMALL = Limits(output_bytes_per_cell=2_000, output_bytes_total=3_000)
FULL = Limits(output_bytes_per_cell=3_000, output_bytes_total=3_000)  # one cell can spend the notebook's budget


def test_records_do_not_compete_with_the_students_own_output():
    """Once the student's own output filled the notebook's budget (and a test cell's own), a record in a test
    cell is still kept; the rest of the output is dropped as before."""
    client = _client(FULL)
    mine = []
    while client.output(mine, _display({"text/plain": "x" * 100}), None, 0) is not None:
        pass
    assert client.truncated == {0}
    outs: list = []
    assert client.output(outs, _display({"text/plain": "y" * 3000}), None, 1) is None  # the cell's own output
    assert client.output(outs, _record("ch00-q0"), None, 1) is not None
    assert [o["output_type"] for o in outs] == ["display_data"] and MIME in outs[0]["data"]
    assert client.output(outs, _display({"text/plain": "y" * 200}), None, 1) is None  # still charged


def test_records_are_bounded_per_cell_per_notebook_and_in_size(monkeypatch):
    """A kernel that forges records cannot use their budget to flood the grader: past a few records a test cell,
    past the notebook's record budget, a record larger than the grader reads, or a record outside a test cell,
    a record is output like any other, charged to the output budget (and dropped once that is spent)."""
    client = _client(SMALL, n_test_cells=3)
    outs: list = []
    kept = 0
    while client.output(outs, _record("ch00-q0"), None, 1) is not None:
        kept += 1
        assert kept < 1000
    assert kept >= execute.RECORDS_PER_CELL
    assert client.record_count[1] == execute.RECORDS_PER_CELL  # the others went to the output budget
    assert client.output([], _record("ch00-q1"), None, 2) is not None  # the next test cell has its own
    # In the student's own cell a record is output like any other, and so is a record over the size the grader reads.
    fresh = _client(SMALL)
    assert fresh.output([], _record("ch00-q0", "z" * 4000), None, 0) is None
    assert fresh.output([], _record("ch00-q0", "z" * (execute.RECORD_BYTES + 10)), None, 1) is None
    assert fresh.record_bytes == 0
    # The notebook's record budget: once spent, records go to the output budget.
    tight = _client(Limits(output_bytes_per_cell=2_000, output_bytes_total=3_000, record_bytes_total=1_500), 5)
    taken = [tight.output([], _record(f"ch00-q{i}", "z" * 500), None, i + 1) is not None for i in range(5)]
    assert taken[:2] == [True, True] and tight.record_bytes <= 1_500
    assert tight.total_bytes + tight.record_bytes <= 1_500 + 3_000


def test_a_record_dropped_over_the_limit_is_named_in_the_note():
    """Where a record is dropped after all (a kernel that displays records beyond their bounds), the note says which
    question's: its "recorded nothing" has a cause the student can see."""
    client = _client(FULL)
    while client.output([], _display({"text/plain": "x" * 100}), None, 0) is not None:
        pass
    assert execute.dropped_note(client) == "output over the limit was dropped in 1 cells"
    for _ in range(execute.RECORDS_PER_CELL + 1):
        client.output([], _record("ch00-q1"), None, 2)
    assert client.records_dropped == {2}
    assert execute.dropped_note(client) == ("output over the limit was dropped in 2 cells; the answer recorded in "
                                            "the test cell of ch00-q1 was dropped with it")


# A cell of the student's own that shows many small outputs: with the budget below, six of them fill the notebook's
# output budget before any test cell runs (as 150 small plots fill the default one).
CHATTY = ("from IPython.display import display\n"
          "for k in range(400):\n    display({'text/plain': 'sweep %d ' % k * 20}, raw=True)")
CHATTY_LIMITS = Limits(cell_seconds=60, notebook_seconds=300, output_bytes_per_cell=100_000,
                       output_bytes_total=400_000)


@pytest.mark.slow
def test_an_honest_student_who_shows_much_output_keeps_every_answer(tmp_path):
    """The reference answers, and six cells of small outputs after the setup cell: full marks, and the dropped
    output is reported."""
    from autograder.demo import copy_course, filled_notebook, submit
    from autograder.grading.console import Progress
    from autograder.grading.pipeline import grade

    release = nbformat.read(ROOT / "release" / CHAPTER / NAME, as_version=4)
    nb = filled_notebook(release, nbformat.read(ROOT / "source" / CHAPTER / NAME, as_version=4))
    at = next(i for i, c in enumerate(nb.cells) if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "setup")
    nb.cells[at + 1:at + 1] = [new_code_cell(CHATTY) for _ in range(6)]
    course = copy_course(ROOT, tmp_path / "course", [CHAPTER])
    submit(course, "chatty", CHAPTER, nb)
    summary = grade(course, CHAPTER, jobs=1, limits=CHATTY_LIMITS, progress=Progress(stream=io.StringIO(), bar=False))
    (r,) = summary.results
    lost = {q: v["message"] for q, v in r["questions"].items() if v["score"] < v["points"]}
    assert r["score"] == r["max_score"], (lost, r["problems"])
    assert any("output over the limit" in p for p in r["problems"]), r["problems"]


# Hashing a submission's files: to a cap.

@contextlib.contextmanager
def _counted_reads(monkeypatch):
    """Bytes read through ``sanitize.opened`` (how the hashing opens a submitted file)."""
    read = {"bytes": 0}
    real = sanitize.opened

    @contextlib.contextmanager
    def counting(path, one_link=False):
        with real(path, one_link) as f:
            class Reader:
                def read(self, n=-1):
                    data = f.read(n)
                    read["bytes"] += len(data)
                    return data

                def seek(self, *a):
                    return f.seek(*a)

                def fileno(self):
                    return f.fileno()

            yield Reader()

    monkeypatch.setattr(sanitize, "opened", counting)
    yield read


def _digest(folder: Path) -> str:
    h = hashlib.sha256()
    sanitize.hash_files(h, folder)
    return h.hexdigest()


def test_a_large_file_beside_the_notebook_is_hashed_to_a_cap(tmp_path, monkeypatch):
    folder = tmp_path / "ada" / "hw"
    folder.mkdir(parents=True)
    (folder / "hw.ipynb").write_text("{}")
    big = folder / "data.bin"
    big.touch()
    os.truncate(big, 4 * 2**30)  # sparse: no disk, but a whole read takes tens of seconds
    with _counted_reads(monkeypatch) as read:
        first = _digest(folder)
    assert read["bytes"] <= 2 * sanitize.HASH_EDGE_BYTES + 2, read
    # Still a change is seen: its size, its first or last bytes, or its time of change.
    with big.open("r+b") as f:
        f.seek(4 * 2**30 - 10)
        f.write(b"the end")
    second = _digest(folder)
    assert second != first
    os.utime(big, ns=(1, 1))
    assert _digest(folder) != second
    os.truncate(big, 4 * 2**30 + 1)
    assert _digest(folder) not in (first, second)


def test_the_files_hashed_in_all_are_capped(tmp_path, monkeypatch):
    """Many files each under the per-file cap: once the cap on the whole submission is read, the rest are known by
    their size and time of change."""
    monkeypatch.setattr(sanitize, "HASH_TOTAL_BYTES", 10_000)
    folder = tmp_path / "many"
    folder.mkdir()
    for i in range(20):
        (folder / f"f{i:02d}.bin").write_bytes(bytes([i]) * 1000)
    with _counted_reads(monkeypatch) as read:
        before = _digest(folder)
    assert read["bytes"] <= 10_000 + 1000, read
    (folder / "f19.bin").write_bytes(b"x" * 1001)
    assert _digest(folder) != before


def test_a_small_submission_hashes_as_before(tmp_path):
    """Under the caps every file is hashed whole, as the fingerprints stored so far were (no class regrades)."""
    folder = tmp_path / "sub"
    (folder / "deep").mkdir(parents=True)
    (folder / "hw.ipynb").write_text('{"cells": []}')
    (folder / "deep" / "notes.txt").write_text("mine")
    (folder / "link").symlink_to(folder / "hw.ipynb")
    h = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()):
        h.update(os.fsencode(path.relative_to(folder)) + b"\0" + path.read_bytes())
    assert _digest(folder) == h.hexdigest()


# The answer key: this chapter's references only.

def _key_course(tmp_path: Path, traffic: dict) -> tuple[Path, Path]:
    course = tmp_path / "course"
    (course / "solutions").mkdir(parents=True)
    (course / "solutions" / "__init__.py").write_text("")
    (course / "solutions" / "ch01_rooflines.py").write_text("# ch01\n")
    (course / "solutions" / "ch02_tpus.py").write_text("# ch02\n")
    (course / "solutions" / "program_traffic.json").write_text(json.dumps(traffic))
    master = course / "source" / CHAPTER / NAME
    master.parent.mkdir(parents=True)
    master.write_text("{}")
    return course, master


def test_the_answer_key_covers_this_chapters_program_traffic_only(tmp_path):
    traffic = {"ch01-cx4-split-matmul": {"aa": {"all-reduce": 1.0}},
               "ch02-cx3-ring-allgather": {"bb": {"all-gather": 2.0}}}
    course, master = _key_course(tmp_path, traffic)
    key = results.answers_key(course, CHAPTER, master)
    path = course / "solutions" / "program_traffic.json"
    path.write_text(json.dumps(traffic | {"ch02-cx3-ring-allgather": {"bb": {"all-gather": 3.0}},
                                          "ch05-cx1-new": {"cc": {"all-to-all": 4.0}}}, indent=2))
    assert results.answers_key(course, CHAPTER, master) == key  # another chapter released or changed
    path.write_text(json.dumps(traffic | {"ch01-cx4-split-matmul": {"aa": {"all-reduce": 2.0}}}))
    assert results.answers_key(course, CHAPTER, master) != key
    (course / "solutions" / "ch02_tpus.py").write_text("# ch02, fixed\n")
    path.write_text(json.dumps(traffic))
    assert results.answers_key(course, CHAPTER, master) == key
    (course / "solutions" / "_kit.py").write_text("# shared\n")
    assert results.answers_key(course, CHAPTER, master) != key


def test_an_unreadable_traffic_table_still_counts_in_the_key(tmp_path):
    course, master = _key_course(tmp_path, {})
    path = course / "solutions" / "program_traffic.json"
    path.write_text("not json")
    key = results.answers_key(course, CHAPTER, master)
    path.write_text("not json either")
    assert results.answers_key(course, CHAPTER, master) != key


# An nbformat-3 notebook: read, upgraded, graded.

def test_a_notebook_in_nbformat_3_is_upgraded_not_graded_as_empty(tmp_path):
    master = new_notebook(cells=[
        new_code_cell("x = ...", metadata={"nbgrader": {"grade_id": "q1-answer", "solution": True}}),
        _test_cell(QID)])
    theirs = new_notebook(cells=[
        new_code_cell("x = 16", metadata={"nbgrader": {"grade_id": "q1-answer", "solution": True}}),
        new_code_cell("scratch = 1"), _test_cell(QID)])
    path = tmp_path / "hw.ipynb"
    nbformat.write(theirs, path, version=3)
    assert "worksheets" in json.loads(path.read_text())
    clean = sanitize.sanitize(master, {"q1-answer": "x = ..."}, path)
    assert [c.source for c in clean.notebook.cells] == ["x = 16", "scratch = 1", f"grade({QID!r}, x)"]
    assert not any("no list of cells" in p for p in clean.problems), clean.problems
    assert any("nbformat 3" in p for p in clean.problems), clean.problems


@pytest.mark.parametrize("text", [
    '{"nbformat": 3, "worksheets": 5}', '{"nbformat": 3, "worksheets": [{"cells": [1, "x", {"cell_type": 7}]}]}',
    '{"nbformat": 2, "worksheets": []}', '{"nbformat": 3}'])
def test_a_broken_old_notebook_is_graded_as_empty_with_a_note(tmp_path, text):
    path = tmp_path / "hw.ipynb"
    path.write_text(text)
    cells, problems = sanitize.read_submission(path)
    assert isinstance(cells, list) and problems, (cells, problems)


def test_a_rerun_reads_a_huge_submitted_file_to_the_cap_only(tmp_path, monkeypatch):
    """``submissions.fingerprint`` (is this submission unchanged since it was graded?) runs in the grader's
    parent, one student at a time, before anyone is graded: it reads a 4 GiB file to the caps, never whole."""
    from autograder.grading import sanitize, submissions

    folder = tmp_path / "alice" / "ch01_rooflines"
    folder.mkdir(parents=True)
    (folder / "ch01_rooflines.ipynb").write_text("{}")
    with open(folder / "big.bin", "wb") as f:
        f.truncate(4 * 2**30)  # sparse: costs no disk
    read = [0]
    real = sanitize.opened

    class Counting:
        def __init__(self, f):
            self.f = f

        def read(self, n=-1):
            block = self.f.read(n)
            read[0] += len(block)
            return block

        def __getattr__(self, name):
            return getattr(self.f, name)

    import contextlib

    @contextlib.contextmanager
    def counting(path):
        with real(path) as f:
            yield Counting(f)

    monkeypatch.setattr(sanitize, "opened", counting)
    monkeypatch.setattr(submissions, "opened", counting, raising=False)
    first = submissions.fingerprint(folder, "ch01_rooflines.ipynb")
    assert read[0] <= sanitize.HASH_TOTAL_BYTES, read[0]
    assert submissions.fingerprint(folder, "ch01_rooflines.ipynb") == first
    (folder / "ch01_rooflines.ipynb").write_text('{"cells": []}')
    assert submissions.fingerprint(folder, "ch01_rooflines.ipynb") != first


@pytest.mark.slow
def test_an_answer_dropped_over_the_budget_is_told_as_dropped(tmp_path):
    """A notebook whose answers spend the room kept for them: the later answers were recorded, then dropped. Each
    such question said "the test cell ran but recorded nothing", which is false; it says the answer was dropped."""
    from autograder.demo import copy_course, reference_notebook, submit
    from autograder.grading.console import Progress
    from autograder.grading.pipeline import grade
    from autograder.release import generate

    course = copy_course(ROOT, tmp_path / "course", [CHAPTER])
    generate(course, CHAPTER)
    submit(course, "big", CHAPTER, reference_notebook(course, CHAPTER))
    tight = Limits(cell_seconds=60, notebook_seconds=300, output_bytes_per_cell=100_000, output_bytes_total=4_000,
                   record_bytes_total=4_000)
    summary = grade(course, CHAPTER, jobs=1, limits=tight, progress=Progress(stream=io.StringIO(), bar=False))
    (r,) = summary.results
    dropped = [q for q, v in r["questions"].items() if "recorded an answer, but the grader dropped it" in v["message"]]
    assert dropped, r["questions"]
    assert not [q for q, v in r["questions"].items() if "ran but recorded nothing" in v["message"]]
    assert any("was dropped with it" in p for p in r["problems"]), r["problems"]
