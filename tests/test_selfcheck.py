"""Self-study: hints that unlock after a wrong attempt, progress kept across sessions, and
``scaling-course selfcheck`` on a learner's own notebook."""

import json
import os
import subprocess
import sys

import nbformat
import pytest

from autograder.demo import filled_notebook, with_slips
from autograder.kinds import hint as hint_for
from autograder.questions import Choice, Formula, Number, Program, load_chapter
from course import progress
from course.answers import AnswerError, check, fingerprints, hint
from tests.paths import ROOT

QID = "ch01-e1-h100-time"


def wrong_answer() -> float:
    return 2 * load_chapter("ch01_rooflines")[QID].reference


def test_hint_is_locked_until_a_wrong_attempt(store, capsys):
    hint(QID)
    assert "unlock after a first wrong attempt" in capsys.readouterr().out
    with pytest.raises(AnswerError) as e:
        check(QID, wrong_answer())
    assert f'course.hint("{QID}")' in str(e.value)
    hint(QID)
    assert capsys.readouterr().out.strip() == f"{QID}: {fingerprints('ch01')[QID]['hint']}"


def test_unreadable_answers_cost_no_attempt_but_wrong_ones_do(store):
    with pytest.raises(AnswerError):
        check(QID, "3 parsecs")
    assert progress.get(QID)["attempts"] == 0
    with pytest.raises(AnswerError):
        check(QID, wrong_answer())
    check(QID, load_chapter("ch01_rooflines")[QID].reference)
    entry = json.loads(store.read_text())["questions"][QID]
    assert (entry["attempts"], entry["wrong"], entry["status"]) == (2, 1, "correct")
    assert entry["solved"]


def test_grading_kernels_write_no_progress(store, monkeypatch):
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    with pytest.raises(AnswerError) as e:
        check(QID, wrong_answer())
    assert not store.exists()
    assert "hint" not in str(e.value)  # grading output stays as it was


def test_grade_fails_a_wrong_answer_for_plain_nbgrader_but_only_records_it_for_ours(store, monkeypatch, capsys):
    from autograder.record import GRADER_ENV
    from course.answers import grade

    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    monkeypatch.delenv(GRADER_ENV, raising=False)
    answer = wrong_answer()
    with pytest.raises(AnswerError, match="factor of 2"):  # nbgrader scores the cell by this
        grade(QID, answer)
    with pytest.raises(AnswerError, match="factor of 2"):  # and the visible check agrees
        check(QID, answer)
    monkeypatch.setenv(GRADER_ENV, "1")
    grade(QID, answer)  # records it; scaling-course grade judges the record outside the kernel
    check(QID, answer)
    assert f"[answer to {QID} recorded]" in capsys.readouterr().out
    with pytest.raises(AnswerError):  # a check of another answer still runs
        check(QID, answer * 3)


def test_the_self_check_says_too_expensive_past_the_graders_bound(store, monkeypatch):
    """Judging in the kernel runs under the grader's bound on one answer, even where the judging code
    swallows every Exception; the timer and handler the kernel had before are put back."""
    import signal
    import time

    import autograder.kinds.formula as formula_kind
    from autograder import bounds

    real = formula_kind.diagnose

    def slow(e, p):
        end = time.monotonic() + 20
        while time.monotonic() < end:
            try:
                sum(i * i for i in range(10_000))
            except Exception:  # a TimeoutError would end here, and the loop go on
                continue
        return real(e, p)

    def own_alarm(signum, frame):
        raise AssertionError("the kernel's own timer fired")

    monkeypatch.setattr(formula_kind, "diagnose", slow)
    monkeypatch.setattr(bounds, "ANSWER_CPU_SECONDS", 1.0)  # to wait less
    monkeypatch.setattr(bounds, "ANSWER_WALL_SECONDS", 3.0)  # what stops it where a loaded machine gives little CPU
    previous = signal.signal(signal.SIGALRM, own_alarm)
    signal.setitimer(signal.ITIMER_REAL, 100)
    try:
        started = time.monotonic()
        with pytest.raises(AnswerError, match="too expensive to check") as e:
            check("ch01-e4-t-math", "B*D*F/C")
        elapsed = time.monotonic() - started
        assert elapsed < bounds.ANSWER_WALL_SECONDS + 4.0  # the judging would run 20 s: a bound stopped it
        assert "1 s of computing" in str(e.value)
        assert signal.getsignal(signal.SIGALRM) is own_alarm
        assert 100 - elapsed - 1 < signal.getitimer(signal.ITIMER_REAL)[0] <= 100 - elapsed + 0.1
        assert signal.getitimer(signal.ITIMER_PROF) == (0.0, 0.0)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert progress.get("ch01-e4-t-math")["attempts"] == 0  # invalid, as an unreadable answer: no attempt


@pytest.mark.parametrize("chapter", ["ch01_rooflines", "ch03_sharding", "ch05_training", "ch12_gpus"])
def test_derived_hints_never_print_the_answer(chapter):
    for q in load_chapter(chapter).questions:
        text = hint_for(q)
        assert text and len(text) < 400, q.qid
        if isinstance(q, Number):
            assert f"{float(q.reference):g}" not in text, q.qid
        if isinstance(q, Formula):
            assert str(q.reference) not in text or len(str(q.reference)) == 1, q.qid
        if isinstance(q, Choice):
            assert q.reference not in text.split(), q.qid
        if isinstance(q, Program):
            needed = [k for k, v in q.spec.collectives.items() if v]
            assert all(k in text for k in needed) and (needed or "no collective" in text), q.qid


@pytest.mark.slow
def test_selfcheck_runs_a_learners_notebook_and_keeps_progress(tmp_path):
    chapter = "ch01_rooflines"
    release = nbformat.read(ROOT / "release" / chapter / f"{chapter}.ipynb", as_version=4)
    source = nbformat.read(ROOT / "source" / chapter / f"{chapter}.ipynb", as_version=4)
    mine = with_slips(filled_notebook(release, source), chapter, every=5)
    mine.cells[-2].source += "\n"  # the learner's file must come back unchanged
    path = tmp_path / "work" / f"{chapter}.ipynb"
    path.parent.mkdir()
    nbformat.write(mine, path)
    before = path.read_bytes()
    env = {**os.environ, "SCALING_COURSE_PROGRESS": str(tmp_path / "progress.json")}
    run = subprocess.run([sys.executable, "-m", "autograder.cli", "selfcheck", str(path)], env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert path.read_bytes() == before

    ch = load_chapter(chapter)
    slipped = {q.qid for q in [q for q in ch.questions if isinstance(q, Formula | Number | Choice)][::5]}
    rows = {line.split()[0]: line for line in run.stdout.splitlines() if line.startswith("ch01-")}
    assert set(rows) == {q.qid for q in ch.questions}
    for qid, line in rows.items():
        assert ("✓ correct" in line) == (qid not in slipped), line
    assert "Off by a factor of 2" in rows["ch01-q5-critical-batch"]
    earned = ch.total_points - sum(ch[q].points for q in slipped)
    assert f"This run: {earned:g} of {ch.total_points:g} points" in run.stdout
    assert f"{len(ch.questions) - len(slipped)} of {len(ch.questions)} questions" in run.stdout

    later = subprocess.run([sys.executable, "-m", "autograder.cli", "progress"], env=env, capture_output=True,
                           text=True, timeout=60)
    line = next(x for x in later.stdout.splitlines() if x.startswith(chapter))
    assert line.split()[1:4] == [str(len(ch.questions) - len(slipped)), "of", str(len(ch.questions))]


def test_selfcheck_refuses_what_is_not_a_course_notebook(tmp_path, capsys):
    from autograder.selfcheck import selfcheck

    (tmp_path / "x.ipynb").write_text("{broken")
    assert selfcheck(tmp_path / "x.ipynb") == 2
    nbformat.write(nbformat.v4.new_notebook(), tmp_path / "y.ipynb")
    assert selfcheck(tmp_path / "y.ipynb") == 2
    out = capsys.readouterr().out
    assert "cannot read" in out and "no check cells" in out


def test_selfcheck_tells_an_unanswered_question_from_a_broken_cell():
    """A blank notebook's checks fail on the undefined answer: the table says "not answered yet", and
    names the error of an answer cell that stopped on something else, or of the check cell itself."""
    from nbformat.v4 import new_code_cell, new_notebook, new_output

    from autograder.selfcheck import unchecked

    def cell(source, ename=None, evalue=""):
        outputs = [new_output("error", ename=ename, evalue=evalue, traceback=[])] if ename else []
        return new_code_cell(source, outputs=outputs, execution_count=1)

    undefined = ("NameError", "name 'q1' is not defined")
    nb = new_notebook(cells=[
        cell("raise NotImplementedError()", "NotImplementedError"), cell('check("ch01-a", q1)', *undefined),
        cell("q2 = 1/0", "ZeroDivisionError", "division by zero"), cell('check("ch01-b", q2)', *undefined),
        cell("q3 = 3"), cell('check("ch01-c", q3)\nraise ValueError("mine")', "ValueError", "mine"),
        cell("q4 = 4"), cell('check("ch01-d", q4)')])
    nb.cells[-1].execution_count = None
    assert unchecked(nb, "ch01-a") == "not answered yet: name 'q1' is not defined"
    assert unchecked(nb, "ch01-b") == ("not checked: the answer cell above stopped with ZeroDivisionError: "
                                       "division by zero")
    assert unchecked(nb, "ch01-c") == "not checked: the test cell stopped with ValueError: mine"
    assert "did not run" in unchecked(nb, "ch01-d")
    assert unchecked(nb, "ch01-e") == "not checked: its check cell is missing"


def _cell(source, ename=None, evalue="", ran=True):
    from nbformat.v4 import new_code_cell, new_output

    outputs = [new_output("error", ename=ename, evalue=evalue, traceback=[])] if ename else []
    return new_code_cell(source, outputs=outputs, execution_count=1 if ran else None)


def test_a_renamed_answer_is_not_called_unanswered():
    """The answer cell ran without error but defined another name (t_H100 for t_h100): the table says so."""
    from nbformat.v4 import new_notebook

    from autograder.selfcheck import unchecked

    nb = new_notebook(cells=[
        _cell("t_H100 = 2 * 6e23 / 989e12"),
        _cell('check("ch01-a", t_h100)', "NameError", "name 't_h100' is not defined"),
        _cell("def roll_in_shards(x, s):\n    return x"),
        _cell('check("ch01-b", roll_in_shard)', "NameError", "name 'roll_in_shard' is not defined"),
        _cell("raise NotImplementedError()", "NotImplementedError"),
        _cell('check("ch01-c", q3)', "NameError", "name 'q3' is not defined")])
    assert unchecked(nb, "ch01-a") == "not checked: the answer cell ran but did not define t_h100"
    assert unchecked(nb, "ch01-b") == "not checked: the answer cell ran but did not define roll_in_shard"
    assert unchecked(nb, "ch01-c") == "not answered yet: name 'q3' is not defined"


def _executed_chapter(chapter: str, run: str, drop: set[str] = frozenset()):
    """A chapter's check cells, executed, each question's verdict recorded as correct in run ``run``; the
    check cells of ``drop`` deleted (and their questions unrecorded)."""
    from nbformat.v4 import new_notebook

    qids = [q.qid for q in load_chapter(chapter).questions]
    nb = new_notebook(cells=[_cell(f'check("{q}", answer)') for q in qids if q not in drop])
    records = {q: {"status": "correct", "score": 1.0, "run": run, "solved": "then"} for q in qids if q not in drop}
    return nb, records


def test_a_deleted_check_cell_still_counts_in_the_total():
    """The chapter's records are the list, not the notebook's check cells: a question whose check cell is gone
    has a row saying so, and its points and its count stay in the totals."""
    from autograder.selfcheck import report

    chapter = load_chapter("ch01_rooflines")
    gone = {"ch01-e2-bound", "ch01-e3-intensity"}
    nb, records = _executed_chapter("ch01_rooflines", "r1", gone)
    lines = report(nb, "r1", records)
    rows = {line.split()[0]: line for line in lines if line.startswith("ch01-")}
    assert set(rows) == {q.qid for q in chapter.questions}
    for qid in gone:
        assert "its check cell is missing" in rows[qid] and f"0/{chapter[qid].points:g}" in rows[qid], rows[qid]
    lost = sum(chapter[q].points for q in gone)
    n = len(chapter.questions)
    text = "\n".join(lines)
    assert f"This run: {chapter.total_points - lost:g} of {chapter.total_points:g} points" in text, text
    assert f"{n - len(gone)} of {n} questions" in text, text


def test_a_corrupt_progress_file_is_moved_aside_never_overwritten(store, capsys):
    """One trailing comma must not cost a learner every record: the check says the file cannot be read, keeps
    its bytes beside it under another name, and starts a new one."""
    store.write_text('{"format": 1, "questions": {"ch01-x": {"solved": "then"}},}')
    before = store.read_bytes()
    check(QID, load_chapter("ch01_rooflines")[QID].reference)
    out = capsys.readouterr().out
    kept = [p for p in store.parent.iterdir() if p.name != store.name and not p.name.startswith(".")]
    assert len(kept) == 1 and kept[0].read_bytes() == before, kept
    assert "could not be read" in out and str(kept[0]) in out, out
    assert progress.solved(progress.load(), QID)


def test_a_corrupt_progress_file_that_cannot_be_moved_is_not_written(store, monkeypatch, capsys):
    store.write_text("{not json")

    def refuse(*args):
        raise PermissionError("read-only folder")
    monkeypatch.setattr(progress.os, "rename", refuse)
    monkeypatch.setattr(progress.os, "replace", refuse)
    with pytest.raises(AnswerError):
        check(QID, wrong_answer())
    assert store.read_text() == "{not json"
    assert "could not be read" in capsys.readouterr().out
    assert progress.get(QID)["wrong"] == 1  # this kernel still unlocks the hint


def test_progress_says_an_unreadable_file_cannot_be_read_and_leaves_it(store, capsys):
    from autograder.selfcheck import show_progress

    store.write_text('{"format": 1, "questions": {},}')
    before = store.read_bytes()
    assert show_progress() != 0
    out = capsys.readouterr().out
    assert "cannot be read" in out and str(store) in out and "Traceback" not in out, out
    assert store.read_bytes() == before


def test_selfcheck_sets_an_unreadable_progress_file_aside_before_running(store, capsys):
    from autograder.selfcheck import set_progress_aside

    store.write_text("[1, 2")
    assert set_progress_aside() is True
    out = capsys.readouterr().out
    kept = [p for p in store.parent.iterdir() if p.name != store.name and not p.name.startswith(".")]
    assert len(kept) == 1 and kept[0].read_text() == "[1, 2" and str(kept[0]) in out, out
    assert not store.exists() or progress.problem() is None
    assert set_progress_aside() is True and capsys.readouterr().out == ""  # nothing more to do


@pytest.mark.parametrize("data", [b"{}", b"[]", b'{"cells": 5, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}',
                                  b'{"cells": [1], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}', b"\xff\xfe"])
def test_selfcheck_refuses_a_file_that_is_no_notebook_in_one_line(tmp_path, capsys, data):
    from autograder.selfcheck import selfcheck

    (tmp_path / "x.ipynb").write_bytes(data)
    assert selfcheck(tmp_path / "x.ipynb") == 2
    out = capsys.readouterr().out.strip()
    assert len(out.splitlines()) == 1 and "cannot read" in out and "x.ipynb" in out, out


def test_selfcheck_runs_a_notebook_holding_half_a_utf16_pair_with_a_note(tmp_path, capsys):
    """``\\ud800`` with no partner is valid JSON that no kernel message can carry: the run died in a traceback.
    It runs with U+FFFD in its place, the learner told so in one line."""
    import nbformat

    from autograder.selfcheck import read_notebook

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1  # HALF")])
    (tmp_path / "x.ipynb").write_text(nbformat.writes(nb).replace("HALF", "\\ud800"))
    read = read_notebook(tmp_path / "x.ipynb")
    assert read.cells[0].source == "x = 1  # \ufffd"
    nbformat.writes(read).encode("utf-8")
    out = capsys.readouterr().out
    assert "x.ipynb holds 1 half of a UTF-16 pair" in out and "not changed" in out, out


# --- a learner's own machine: nothing answered yet, too few devices, a cell that does not parse ----------------

def _unanswered(qid: str) -> list:
    return [_cell("raise NotImplementedError()", "NotImplementedError"),
            _cell(f'check("{qid}", answer)', "NameError", "name 'answer' is not defined")]


def test_selfcheck_on_an_unanswered_notebook_says_nothing_is_answered_yet():
    """Every row "not answered yet": the line under the table says so, not that the first cell or the progress
    file may be at fault."""
    from nbformat.v4 import new_notebook

    from autograder.selfcheck import report

    qids = [q.qid for q in load_chapter("ch01_rooflines").questions]
    nb = new_notebook(cells=[_cell("import course\nprint(course.setup())"), *(c for q in qids for c in _unanswered(q))])
    text = "\n".join(report(nb, "r1", {}))
    assert "No check recorded its verdict" not in text and "first cell" not in text, text
    assert "Nothing is answered yet" in text, text
    nb.cells[0] = _cell("import course\nprint(course.setup())", "ModuleNotFoundError", "No module named 'course'")
    assert "does the first cell run?" in "\n".join(report(nb, "r1", {}))  # where the first cell failed: as before


def test_selfcheck_on_too_few_devices_gives_command_line_advice_and_counts_checked_points():
    """SCALING_COURSE_DEVICES=real on a 4-device host: the advice under the table is a command line (no %env, no
    kernel to restart), and the total counts the points it could check, the others apart."""
    from nbformat.v4 import new_notebook

    from autograder.messages import phrase
    from autograder.selfcheck import report
    from course.answers import CANNOT_CHECK_HERE

    chapter = load_chapter("ch01_rooflines")
    far = [q.qid for q in chapter.questions][:2]
    refused = f"{CANNOT_CHECK_HERE}. " + phrase("devices:real", have="4 devices", need=8)
    cells = [_cell(f'check("{q}", answer)', "AnswerError", f"{q}: {refused}") if q in far
             else _cell(f'check("{q}", answer)') for q in (x.qid for x in chapter.questions)]
    records = {q.qid: {"status": "correct", "score": 1.0, "run": "r1", "solved": "then"}
               for q in chapter.questions if q.qid not in far}
    lines = report(new_notebook(cells=cells), "r1", records, command="scaling-course selfcheck my/ch01.ipynb")
    text = "\n".join(lines)
    below = next(line for line in lines if "could not be checked on this machine" in line)
    assert "SCALING_COURSE_DEVICES=cpu scaling-course selfcheck my/ch01.ipynb" in below, below
    assert "%env" not in below and "restart the kernel" not in below, below
    lost = sum(chapter[q].points for q in far)
    checked = chapter.total_points - lost
    assert (f"This run: {checked:g} of {checked:g} checked points ({lost:g} not checkable on this machine)"
            in text), text


def test_a_row_for_an_answer_cell_that_does_not_parse_names_its_line_not_a_temporary_file():
    from nbformat.v4 import new_notebook

    from autograder.selfcheck import unchecked

    nb = new_notebook(cells=[_cell("e1 = 3 +", "SyntaxError", "invalid syntax (1607251253.py, line 1)"),
                             _cell('check("ch01-a", e1)', "NameError", "name 'e1' is not defined")])
    row = unchecked(nb, "ch01-a")
    assert row == "not checked: the answer cell above stopped with SyntaxError: invalid syntax (line 1 of the " \
                  "answer cell)", row


def test_every_slip_a_sample_notebook_writes_is_that_slip():
    """A sample notebook's slips are written as text and read back in the kernel: each reads back as the slip, with
    the course's symbols (sympy's own N is a function, and 2*N raised in the kernel, so the sample's known grade
    was not what its slips implied)."""
    import sympy as sp

    from autograder.demo import expression_line
    from autograder.questions import Formula, chapter_names, load_chapter

    wrong = []
    for name in chapter_names():
        for q in load_chapter(name).questions:
            for slip in q.slips if isinstance(q, Formula) else ():
                if isinstance(slip.answer, sp.Expr):
                    try:
                        back = eval(expression_line(slip.answer))
                    except Exception as e:
                        wrong.append(f"{q.qid}: {type(e).__name__}")
                        continue
                    if str(back) != str(slip.answer):  # a symbol of its own in a record reads back by name
                        wrong.append(f"{q.qid}: {back} for {slip.answer}")
    assert wrong == []
