"""Each grading stage alone, on a tiny notebook: what it reads from the job and what it leaves there."""

import json
import zipfile

import nbformat
from nbformat.v4 import new_code_cell, new_notebook, new_output

from autograder.grading import stages
from autograder.grading.collect import NO_ANSWER
from autograder.grading.pipeline import Assignment
from autograder.record import MIME, make

QID = "ch00-q1-bytes"


def _graded(gid: str, source: str, **meta) -> nbformat.NotebookNode:
    return new_code_cell(source, metadata={"nbgrader": {"grade_id": gid, **meta}})


def _course(tmp_path):
    """A course of one assignment ``hw``: a solution cell and a test cell worth 2 points."""
    course = tmp_path.resolve()
    master = course / "source" / "hw" / "hw.ipynb"
    master.parent.mkdir(parents=True)
    nbformat.write(new_notebook(cells=[_graded("q1-answer", "q1_bytes = 2 * 8", solution=True),
                                       _graded(QID, f"grade({QID!r}, q1_bytes)", grade=True, points=2)]), master)
    (master.parent / "data.csv").write_text("a,b\n")
    return Assignment(course, "hw", "hw", master, {"q1-answer": "q1_bytes = ..."}, {QID: 2.0})


def _submit(a, student="ada"):
    folder = a.course_dir / "submitted" / student / a.name
    folder.mkdir(parents=True)
    theirs = new_notebook(cells=[_graded("q1-answer", "q1_bytes = 16"),
                                 _graded(QID, "forged", outputs=[])])
    theirs.cells[1].outputs = [new_output("display_data", data={MIME: make(QID, "number", "16")})]
    return folder, theirs


def test_sanitize_takes_the_students_cells_and_the_masters_tests(tmp_path):
    a = _course(tmp_path)
    folder, theirs = _submit(a)
    nbformat.write(theirs, folder / "hw.ipynb")
    job = stages.Job(a, "ada", folder)
    stages.sanitize(job)
    assert [c.source for c in job.notebook.cells] == ["q1_bytes = 16", f"grade({QID!r}, q1_bytes)"]
    assert job.notebook.cells[1].outputs == []  # a pre-filled record is gone
    assert job.problems == [] and len(job.sha) == 64
    assert (job.work / "data.csv").exists()


def test_sanitize_finds_a_zipped_notebook_and_never_follows_a_link(tmp_path):
    a = _course(tmp_path)
    folder, theirs = _submit(a)
    with zipfile.ZipFile(folder / "download.zip", "w") as z:
        z.writestr("ada/hw.ipynb", nbformat.writes(theirs))
    job = stages.Job(a, "ada", folder)
    stages.sanitize(job)
    assert job.problems == ["graded the notebook inside download.zip"]
    assert job.notebook.cells[0].source == "q1_bytes = 16"

    (a.course_dir / "submitted" / "bob").mkdir()
    (a.course_dir / "submitted" / "bob" / "hw").symlink_to(folder)
    job = stages.Job(a, "bob", a.course_dir / "submitted" / "bob" / "hw")
    stages.sanitize(job)
    assert job.problems[0] == "the submission folder is a symbolic link, which the grader does not follow"
    assert job.notebook.cells[0].source == "q1_bytes = ..."  # the release stub, never the student's


def test_collect_reads_the_record_of_the_test_cell_only(tmp_path):
    a = _course(tmp_path)
    _, theirs = _submit(a)
    job = stages.Job(a, "ada", tmp_path, notebook=theirs)
    stages.collect(job)
    assert job.recorded[QID].answer == "16" and job.recorded[QID].kind == "number"
    theirs.cells[1].outputs = [new_output("error", ename="NameError", evalue="name 'q1_bytes' is not defined",
                                          traceback=[])]
    stages.collect(job)
    assert job.recorded[QID].answer is NO_ANSWER and "NameError" in job.recorded[QID].reason


def test_annotate_puts_each_verdict_in_its_test_cell(tmp_path):
    a = _course(tmp_path)
    _, theirs = _submit(a)
    graded = {"points": 2.0, "score": 1.0, "status": "partial", "diagnosis": "ratio:2",
              "message": "Off by a factor of 2.", "answer_text": "16"}
    job = stages.Job(a, "ada", tmp_path, notebook=theirs, questions={QID: graded})
    stages.annotate(job)
    [out] = job.notebook.cells[1].outputs
    assert out.text == "[1 / 2] partial: Off by a factor of 2.\nYour answer: 16\n"
    assert json.loads(nbformat.writes(job.notebook))  # still a notebook


def test_store_leaves_nbgraders_receipts_beside_the_report(tmp_path):
    """``nbgrader release_feedback`` names each report after the submission's timestamp and secret, read from
    the feedback folder: the report must have them, copied as plain small files, links never followed."""
    a = _course(tmp_path)
    folder, theirs = _submit(a)
    (folder / "timestamp.txt").write_text("2026-12-02 10:00:00.000000 UTC")
    (tmp_path / "elsewhere.txt").write_text("not the student's")
    (folder / "submission_secret.txt").symlink_to(tmp_path / "elsewhere.txt")
    job = stages.Job(a, "ada", folder, notebook=theirs, questions={})
    stages.store(job)
    feedback = a.course_dir / "feedback" / "ada" / "hw"
    assert (feedback / "hw.html").exists()
    assert (feedback / "timestamp.txt").read_text() == "2026-12-02 10:00:00.000000 UTC"
    assert not (feedback / "submission_secret.txt").exists()  # a link is not a receipt
    (folder / "submission_secret.txt").unlink()
    (folder / "submission_secret.txt").write_text("x" * 10_000)  # far longer than nbgrader's 32 hex digits
    stages.store(job)
    assert not (feedback / "submission_secret.txt").exists()
    (folder / "submission_secret.txt").write_text("0123456789abcdef0123456789abcdef")
    stages.store(job)
    assert (feedback / "submission_secret.txt").read_text() == "0123456789abcdef0123456789abcdef"


def test_feedback_shows_a_program_as_a_program_never_its_bytes():
    """A recorded program is base64 of a compiled module; one whose mesh the student chose comes with it."""
    from autograder.grading.collect import Collected

    blob = "QUJD" * 500
    assert stages._answer_text(Collected(blob, kind="program")) == "(your compiled program)"
    chosen = stages._answer_text(Collected({"mesh": {"X": 2, "Y": 4}, "program": blob}, kind="program"))
    assert chosen == '(your compiled program, on the mesh {"X": 2, "Y": 4})' and "QUJD" not in chosen
    # one that stopped before it compiled: the verdict quotes the error, the feedback no raw record cut short
    failed = {"error": "AttributeError: 'ShapedArray' object has no attribute 'sharding'", "at": "mesh = x.sharding"}
    assert stages._answer_text(Collected(failed, kind="program")) == "(your function, which stopped before it compiled)"


def test_feedback_shows_a_function_as_a_function_never_its_raw_results():
    """A function's record is its results on the public and the drawn cases: JSON no student can read. Its verdict
    says which cases fail; the answer column says what was judged."""
    from autograder.grading.collect import Collected

    text = stages._answer_text(Collected({"drawn": [[10.0], [56.0]], "public": [[1.0]]}, kind="function"))
    assert text == "(your function, called on the test cases)"


def test_graded_cells_moved_or_given_each_others_ids_are_graded_in_the_assignments_order_and_named(tmp_path):
    """The graded notebook runs the graded cells in the assignment's order, whatever order the student's file has
    them in (cells dragged around, or grade ids swapped in the metadata). Its outputs were made in the student's
    order, so a changed order can change what runs: the student and the staff are told which cells moved."""
    a = _course(tmp_path)
    folder, theirs = _submit(a)
    theirs.cells.reverse()  # the test cell above the answer it checks
    nbformat.write(theirs, folder / "hw.ipynb")
    job = stages.Job(a, "ada", folder)
    stages.sanitize(job)
    assert [c.source for c in job.notebook.cells] == ["q1_bytes = 16", f"grade({QID!r}, q1_bytes)"]
    [note] = [p for p in job.problems if "order" in p]
    assert "assignment's order" in note and ("q1-answer" in note or QID in note), note

    _, theirs = folder, _submit(a, "bob")[1]
    nbformat.write(theirs, a.course_dir / "submitted" / "bob" / "hw" / "hw.ipynb")
    job = stages.Job(a, "bob", a.course_dir / "submitted" / "bob" / "hw")
    stages.sanitize(job)
    assert not [p for p in job.problems if "order" in p], job.problems  # in order: nothing said

    _, theirs = folder, _submit(a, "cy")[1]
    theirs.cells.append(nbformat.from_dict({**json.loads(json.dumps(theirs.cells[0])), "id": "copy"}))  # again, last
    nbformat.write(theirs, a.course_dir / "submitted" / "cy" / "hw" / "hw.ipynb")
    job = stages.Job(a, "cy", a.course_dir / "submitted" / "cy" / "hw")
    stages.sanitize(job)
    assert [p for p in job.problems if "duplicated" in p] and not [p for p in job.problems if "order" in p], \
        job.problems  # one note for the one thing the student did: the duplicated note says which copy counts


def test_a_cell_over_the_limit_is_cut_and_the_cut_is_reported(tmp_path):
    """A solution cell (or a cell of the student's own) past ``MAX_CELL_CHARS`` is cut: the student is told
    which one, and that what followed the cut was not run."""
    from autograder.grading.sanitize import MAX_CELL_CHARS

    a = _course(tmp_path)
    folder, theirs = _submit(a)
    theirs.cells[0].source = "# " + "x" * MAX_CELL_CHARS + "\nq1_bytes = 16"
    theirs.cells.append(new_code_cell("y = 1  # " + "z" * MAX_CELL_CHARS))
    nbformat.write(theirs, folder / "hw.ipynb")
    job = stages.Job(a, "ada", folder)
    stages.sanitize(job)
    assert len(job.notebook.cells[0].source) == MAX_CELL_CHARS
    cut = sorted(p for p in job.problems if "cut" in p)
    assert len(cut) == 2, job.problems
    assert cut[0].startswith("cell q1-answer") and f"{MAX_CELL_CHARS:,}" in cut[0] and "not run" in cut[0]
    assert cut[1].startswith(f"your code cell after {QID}")


def test_sanitize_tells_when_the_notebook_was_worked_with_other_values_than_it_is_graded_with(tmp_path, monkeypatch):
    """The grader deals a student's values when it grades. A notebook last run with other values (the variant plan
    changed after the notebooks went out, or it was run without the student's id) has numbers typed from those:
    they are judged at the graded values, and both the student and the staff are told why."""
    from autograder.record import SETTING_MIME

    a = _course(tmp_path)
    folder, theirs = _submit(a)
    shown = {"name": "ch00-e1", "values": {"chip": "TPU v6e"}}
    theirs.cells[0].outputs = [new_output("display_data", data={SETTING_MIME: shown, "text/plain": "Your setting"})]
    nbformat.write(theirs, folder / "hw.ipynb")
    monkeypatch.setattr(stages, "dealt", lambda variants, student: {"ch00-e1": {"chip": "TPU v5e"}})
    job = stages.Job(Assignment(**{**a.__dict__, "variants": {"chapter": "hw"}}), "ada", folder)
    stages.sanitize(job)
    [note] = [p for p in job.problems if "ch00-e1" in p]
    assert "chip = TPU v6e" in note and "chip = TPU v5e" in note, note
    monkeypatch.setattr(stages, "dealt", lambda variants, student: {"ch00-e1": {"chip": "TPU v6e"}})
    job = stages.Job(Assignment(**{**a.__dict__, "variants": {"chapter": "hw"}}), "ada", folder)
    stages.sanitize(job)
    assert not [p for p in job.problems if "ch00-e1" in p], job.problems


def test_a_tick_in_the_saved_notebook_that_the_graded_run_refuses_is_explained(tmp_path):
    """"The self-check ticked it and the grader refused it": the saved notebook's ✓ (from the last time the student ran
    the cell) is read back, and where the graded run scores the question less, the note says why that can be."""
    a = _course(tmp_path)
    folder, theirs = _submit(a)
    from autograder.record import TICK, tick

    assert TICK.fullmatch(tick(QID))  # what the self-check prints is what the grader reads back
    theirs.cells[1].outputs = [new_output("stream", name="stdout", text=f"✓ {QID}: correct.\n")]
    nbformat.write(theirs, folder / "hw.ipynb")
    job = stages.Job(a, "ada", folder)
    stages.sanitize(job)
    assert job.ticked == {QID}
    wrong = {QID: {"points": 2.0, "score": 0.0, "status": "incorrect", "kind": "number"}}
    [note] = stages.ticked_then_refused(job.ticked, wrong)
    assert note.startswith(f"{QID}: the saved notebook shows ✓") and "run all" in note, note
    right = {QID: {"points": 2.0, "score": 2.0, "status": "correct"}}
    assert stages.ticked_then_refused(job.ticked, right) == []


def test_a_notebook_whose_every_tick_is_refused_is_one_note():
    """Outputs forged or pasted from another notebook (a ✓ under every question, no answer filled in): one note that
    names the questions, not a page of 36 alike."""
    graded = {f"q{i:02}": {"points": 1.0, "score": 0.0, "status": "invalid", "kind": "number"} for i in range(36)}
    [note] = stages.ticked_then_refused(set(graded), graded)
    assert note.startswith("The saved notebook shows ✓ for 36 questions") and "q00 (0/1)" in note, note
    assert "and 26 more" in note and "another notebook" in note and "run all" in note, note
    few = {q: graded[q] for q in ("q00", "q01")}
    assert [n.split(":")[0] for n in stages.ticked_then_refused(set(few), few)] == ["q00", "q01"]


def test_a_question_whose_answer_cell_is_untouched_says_so():
    """A blank answer: the answer cell's placeholder raised NotImplementedError, so the check's variable was never
    set. The feedback says the answer cell was not filled in, not only that a name is undefined."""
    from autograder.grading.collect import collect

    answer = _graded("q1-answer", "# YOUR ANSWER HERE\nraise NotImplementedError()", solution=True)
    answer.outputs = [new_output("error", ename="NotImplementedError", evalue="", traceback=[])]
    test = _graded(QID, f"check({QID!r}, q1_bytes)", grade=True)
    test.outputs = [new_output("error", ename="NameError", evalue="name 'q1_bytes' is not defined", traceback=[])]
    reason = collect(new_notebook(cells=[answer, test]), [QID])[QID].reason
    assert "answer cell above" in reason and "YOUR ANSWER HERE" in reason, reason
    answer.outputs = [new_output("error", ename="ZeroDivisionError", evalue="division by zero", traceback=[])]
    reason = collect(new_notebook(cells=[answer, test]), [QID])[QID].reason
    assert reason.startswith("the answer cell above stopped with ZeroDivisionError: division by zero"), reason


def test_a_folder_nested_past_the_recursion_limit_is_searched_and_fingerprinted(tmp_path):
    """``nbgrader submit`` sends the whole folder: one nested 1,500 folders deep made the search for the notebook
    and the submission's fingerprint raise RecursionError (a path walked by recursion), so the student got a grader
    error and 0 on every run. The notebook beside it is graded, the deep folder walked to a bound."""
    import os
    import sys

    a = _course(tmp_path)
    folder, theirs = _submit(a)
    nbformat.write(theirs, folder / "hw.ipynb")
    depth = 1500
    assert sys.getrecursionlimit() < depth
    fds = [os.open(folder, os.O_RDONLY)]
    for _ in range(depth):  # by descriptors: the whole path is longer than a path may be
        os.mkdir("d", dir_fd=fds[-1])
        fds.append(os.open("d", os.O_RDONLY, dir_fd=fds[-1]))
    try:
        job = stages.Job(a, "ada", folder)
        stages.sanitize(job)
        assert job.notebook.cells[0].source == "q1_bytes = 16" and len(job.sha) == 64
    finally:
        for parent in reversed(fds[:-1]):  # undone the same way, deepest first
            os.close(fds.pop())
            os.rmdir("d", dir_fd=parent)
        os.close(fds.pop())


def test_a_lone_surrogate_in_the_notebook_is_replaced_and_the_rest_graded(tmp_path):
    """JSON may escape half a UTF-16 pair (``\\ud800``), which no UTF-8 file or kernel message can carry: the grader
    failed to write the sanitized notebook, a grader error and 0 on every run. It becomes U+FFFD, with a note."""
    a = _course(tmp_path)
    folder, theirs = _submit(a)
    theirs.cells[0].source = "q1_bytes = 16  # SURROGATE"
    theirs.cells.insert(0, nbformat.v4.new_markdown_cell("notes SURROGATE"))
    theirs.metadata["x"] = "SURROGATE"
    (folder / "hw.ipynb").write_text(nbformat.writes(theirs).replace("SURROGATE", "\\ud800 and \\udfff"))
    job = stages.Job(a, "ada", folder)
    stages.sanitize(job)
    [code] = [c.source for c in job.notebook.cells if c.cell_type == "code" and "q1_bytes =" in c.source]
    assert code == "q1_bytes = 16  # \ufffd and \ufffd"
    nbformat.writes(job.notebook).encode("utf-8")  # what the kernel is sent
    assert any("replaced" in p for p in job.problems), job.problems
