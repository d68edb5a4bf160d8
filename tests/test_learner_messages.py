"""What a self-study learner sees when the kernel, not the answer, is at fault: fewer devices than a question's
mesh, a function that never returns, an interrupted check, and the course's own errors (one line each, never a
traceback through the course's internals)."""

import json
import signal
import subprocess
import sys
import threading
import time

import pytest

import course
from autograder import record
from autograder.questions import load_chapter
from course import devices, errors, progress
from course.answers import AnswerError, check, hint
from tests.paths import ROOT


def one_line(e: BaseException) -> str:
    """What IPython shows for ``e`` (``_render_traceback_``): its message, no traceback (a message may end with the
    answer's text and a caret under the fault, as the self-check's do)."""
    assert isinstance(e, errors.OneLine), f"{type(e).__name__} is shown with a traceback"
    shown = e._render_traceback_()
    text = "\n".join(shown)
    assert len(shown) == 1 and len(text.splitlines()) <= 3 and 'File "' not in text, text
    return text


# --- F8: the course's own errors are one line -------------------------------------------------------------

def test_an_unknown_devices_mode_is_one_line(monkeypatch):
    monkeypatch.setenv("SCALING_COURSE_DEVICES", "gpu")
    with pytest.raises(ValueError) as e:
        course.setup()
    assert "SCALING_COURSE_DEVICES" in one_line(e.value)


@pytest.mark.parametrize(("kwargs", "words"), [({"student": ""}, "your id"), ({"student": 5}, "your id"),
                                                ({"variant": "mine"}, "variant must be one of")])
def test_a_bad_student_or_variant_is_one_line(kwargs, words):
    with pytest.raises(ValueError) as e:
        course.setup(**kwargs)
    assert words in one_line(e.value)


def test_jax_started_with_another_count_is_one_line(monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "")
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    monkeypatch.delenv("SCALING_COURSE_DEVICES", raising=False)
    with pytest.raises(RuntimeError) as e:  # this process runs 8 simulated devices
        course.setup("cpu", count=4)
    assert "Restart the kernel" in one_line(e.value)
    import jax

    assert jax.device_count() == 8


@pytest.mark.parametrize("call", [lambda: check(5, 1.0), lambda: hint(5), lambda: course.setting(5),
                                  lambda: course.grade(None, 1.0)], ids=["check", "hint", "setting", "grade"])
def test_a_question_id_that_is_not_text_is_one_line(call):
    with pytest.raises(TypeError) as e:
        call()
    assert "e.g." in one_line(e.value)


@pytest.mark.parametrize("call", [lambda: course.as_expr("2*B +", "B"), lambda: course.as_number("3 parsecs", "s"),
                                  lambda: course.as_expr([1, 2], "B")])
def test_an_unreadable_answer_in_a_demo_cell_is_one_line(call):
    with pytest.raises(course.UnreadableAnswer) as e:
        call()
    text = one_line(e.value)
    assert text.startswith("UnreadableAnswer: This answer cannot be read as"), text
    assert isinstance(e.value, ValueError)


def test_answer_errors_keep_their_one_line():
    with pytest.raises(AnswerError) as e:
        check("ch01-e1-h100-tme", 1e-3)
    assert one_line(e.value).startswith("AnswerError: No question")


def test_ipython_shows_one_line_for_a_course_error():
    """The mechanism is IPython's: an exception with ``_render_traceback_`` is shown as what it returns."""
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shown = []
    monkey = shell._showtraceback
    shell._showtraceback = lambda etype, evalue, stb: shown.append(stb)
    try:
        shell.run_cell("import course\ncourse.as_number('3 parsecs', 's')")
    finally:
        shell._showtraceback = monkey
    assert len(shown) == 1 and len(shown[0]) == 1 and "cannot be read as a number in s" in shown[0][0], shown


# --- F1: fewer devices than a question's mesh ---------------------------------------------------------------

def test_setup_on_fewer_real_devices_warns_in_one_line_and_does_not_crash(monkeypatch):
    monkeypatch.delenv("SCALING_COURSE_DEVICES", raising=False)
    monkeypatch.setattr(devices, "_state", dict(devices._state))
    line = course.setup("real", count=16)  # this process has 8: a machine with fewer accelerators than needed
    first, *rest = line.splitlines()
    # SCALING_COURSE_DEVICES=real on a kernel that already has the course's simulated devices: still simulated
    assert first == "8 simulated CPU device(s)", line
    assert len(rest) == 1 and "8 devices" in rest[0] and "need 16" in rest[0], line
    assert "SCALING_COURSE_DEVICES=cpu" in rest[0] and "README" in rest[0], line
    assert "need" not in course.setup("real", count=8)


def test_the_setup_line_names_cpu_devices_once(monkeypatch):
    monkeypatch.delenv("SCALING_COURSE_DEVICES", raising=False)
    monkeypatch.setattr(devices, "_state", dict(devices._state))
    assert course.setup("cpu") == "8 simulated CPU device(s)"  # not "...: cpu" again


def test_auto_counts_only_the_gpus_this_process_may_use(tmp_path, monkeypatch):
    for i in range(8):
        (tmp_path / f"nvidia{i}").touch()
    (tmp_path / "nvidiactl").touch()
    monkeypatch.setattr(devices, "_plugin", lambda name: name == "jax_cuda12_plugin")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert devices.accelerator_count(tmp_path) == 8
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    assert devices.accelerator_count(tmp_path) == 1
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3,5,7")
    assert devices.accelerator_count(tmp_path) == 4
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert devices.accelerator_count(tmp_path) == 0


def _model(chapter: str, qid: str):
    return load_chapter(chapter)[qid].solution


def test_a_program_check_on_fewer_devices_says_so_and_costs_nothing(store, monkeypatch):
    qid = "ch03-cx2-case1-local"
    monkeypatch.setattr(devices, "kernel_devices", lambda: 1)
    monkeypatch.setattr(devices, "chosen", lambda: None)
    with pytest.raises(AnswerError) as e:
        check(qid, _model("ch03_sharding", qid))
    text = one_line(e.value).lower()
    assert "this kernel has 1 device" in text and "mesh needs 8" in text and "setup cell" in text, text
    assert "not right" not in text and "hint" not in text, text
    assert progress.get(qid) == {}  # no attempt, nothing wrong, no hint unlocked
    hint(qid)


def test_after_a_real_setup_the_devices_message_points_at_the_readme(store, monkeypatch):
    qid = "ch10-q1-shard-sums"
    monkeypatch.setattr(devices, "kernel_devices", lambda: 4)
    monkeypatch.setattr(devices, "chosen", lambda: "real")
    with pytest.raises(AnswerError) as e:
        check(qid, lambda x: x)
    text = one_line(e.value).lower()
    assert "this kernel has 4 devices" in text and "needs 8" in text and "readme" in text, text
    assert progress.get(qid) == {}


def test_a_function_that_needs_more_devices_than_the_kernel_has_says_so(store, monkeypatch):
    qid = "ch10-q1-roll-in-shard"

    def builds_a_mesh(x, shift):
        raise ValueError("Number of devices 1 must be >= the product of mesh_shape (2, 4)")

    monkeypatch.setattr(devices, "kernel_devices", lambda: 1)
    monkeypatch.setattr(devices, "chosen", lambda: None)
    with pytest.raises(AnswerError) as e:
        check(qid, builds_a_mesh)
    text = one_line(e.value).lower()
    assert "this kernel has 1 device" in text and "needs 8" in text, text
    assert progress.get(qid) == {}


def test_a_mesh_too_large_for_a_full_kernel_is_still_the_answers_fault(store):
    qid = "ch10-q1-roll-in-shard"

    def too_large(x, shift):
        raise ValueError("Number of devices 8 must be >= the product of mesh_shape (16,)")

    with pytest.raises(AnswerError) as e:
        check(qid, too_large)
    assert "raised an error" in str(e.value) and "this kernel has" not in str(e.value)
    assert progress.get(qid)["wrong"] == 1


def test_a_check_without_the_setup_cell_says_run_it():
    code = ("import course\nfrom course.answers import AnswerError\n"
            "try:\n    course.check('ch10-q1-shard-sums', lambda x: x)\n"
            "except AnswerError as e:\n    print(e._render_traceback_())\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT,
                          env={"PATH": "/usr/bin:/bin", "JAX_PLATFORMS": "cpu", "NBGRADER_EXECUTION": "validate"})
    assert proc.returncode == 0, proc.stderr
    assert "this kernel has 1 device" in proc.stdout.lower() and "setup cell" in proc.stdout, proc.stdout


# --- F6: a function that never returns ----------------------------------------------------------------------

QID = "ch05-cx4-choose-mesh"


def _endless(B, F, N, M_X, M_Y):
    x = 1
    while x != 3:  # never: x is a power of two
        x *= 2
    return float(x), float(N // x)


@pytest.fixture
def short_bounds(monkeypatch):
    monkeypatch.setattr(record, "CALL_SECONDS", 0.5)
    monkeypatch.setattr(record, "CALLS_SECONDS", 1.2)


def _stopped(qid: str, fn, seconds: float) -> str:
    """The one line of a check the bounds stopped within ``seconds``."""
    started = time.monotonic()
    with pytest.raises(AnswerError) as e:
        check(qid, fn)
    assert time.monotonic() - started < seconds
    text = one_line(e.value)
    assert "did not return within 0.5 s" in text and "endless loop" in text, text
    return text


def test_an_endless_loop_ends_the_check_with_one_line_naming_the_case(store, short_bounds):
    text = _stopped(QID, _endless, 5)
    assert "First, with B=49152" in text, text  # the case is named by its arguments
    assert "raised" not in text, text


def test_after_a_call_that_does_not_return_no_more_calls_are_made(store, short_bounds):
    good = _model("ch05_training", QID)
    calls = []

    def loops_on_the_second_case(B, F, N, M_X, M_Y):
        calls.append(B)
        while B == 3_000_000.0:
            pass
        return good(B=B, F=F, N=N, M_X=M_X, M_Y=M_Y)

    with pytest.raises(AnswerError) as e:
        check(QID, loops_on_the_second_case)
    assert calls == [49152.0, 3_000_000.0], calls
    text = str(e.value)
    assert f"{len(load_chapter('ch05_training')[QID].probes) - 1} of " in text, text  # all but the first fail
    assert "test cases fail (" in text and "First, with B=3e+06" in text, text
    assert "did not return within 0.5 s" in text, text


def test_the_calls_of_one_check_share_a_total_bound(store, monkeypatch):
    monkeypatch.setattr(record, "CALL_SECONDS", 0.4)
    monkeypatch.setattr(record, "CALLS_SECONDS", 1.0)
    calls = []
    good = _model("ch05_training", QID)

    def slow(B, F, N, M_X, M_Y):
        calls.append(B)
        time.sleep(0.3)
        return good(B, F, N, M_X, M_Y)

    started = time.monotonic()
    with pytest.raises(AnswerError) as e:
        check(QID, slow)
    assert time.monotonic() - started < 3
    assert len(calls) < 7, calls  # 7 cases: the rest were not called once the total was spent
    assert "not called" in str(e.value) or "did not return" in str(e.value), e.value


def test_a_slow_right_function_under_the_bounds_is_right(store, short_bounds):
    good = _model("ch05_training", QID)

    def slowish(**kwargs):
        time.sleep(0.1)
        return good(**kwargs)

    check(QID, slowish)


def test_the_bound_restores_the_kernels_own_alarm(store, short_bounds):
    def own_alarm(signum, frame):
        raise AssertionError("the kernel's own timer fired")

    previous = signal.signal(signal.SIGALRM, own_alarm)
    signal.setitimer(signal.ITIMER_REAL, 100)
    try:
        with pytest.raises(AnswerError):
            check(QID, _endless)
        assert signal.getsignal(signal.SIGALRM) is own_alarm
        assert 90 < signal.getitimer(signal.ITIMER_REAL)[0] <= 100
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_grading_calls_are_not_bounded(short_bounds):
    """``grade`` (and the grader's kernel) call the function without the self-check's bound: the kernel's
    cell limit is the grading bound, and a slow function is graded as it was."""
    good = _model("ch05_training", QID)

    def slow(**kwargs):
        time.sleep(0.6)
        return good(**kwargs)

    calls = [((), {"B": 49152.0, "F": 32768.0, "N": 64, "M_X": 2, "M_Y": 1})]
    out = record.encode_outputs(slow, calls, ["number", "number"])
    assert "error" not in out[0], out


def test_off_the_main_thread_the_check_runs_unbounded(store, short_bounds):
    good = _model("ch05_training", QID)
    result = []

    def slow(**kwargs):
        time.sleep(0.6)
        return good(**kwargs)

    def run():
        try:
            check(QID, slow)
            result.append("ok")
        except BaseException as e:  # noqa: BLE001
            result.append(e)

    t = threading.Thread(target=run)
    t.start()
    t.join(60)
    assert result == ["ok"], result


def test_an_interrupted_check_is_one_line_and_records_nothing(store):
    def interrupted(B, F, N, M_X, M_Y):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt) as e:
        check(QID, interrupted)
    text = one_line(e.value)
    assert QID in text and "interrupted" in text, text
    assert progress.get(QID) == {}
    assert not store.exists() or QID not in json.loads(store.read_text())["questions"]


# --- F7: a formula answer that is a number (its symbols overwritten by a later cell) -----------------------

@pytest.mark.parametrize("answer", [1.5e-3, 4, "0.25", __import__("sympy").Rational(3, 11)])
def test_a_number_for_a_formula_asks_about_overwritten_symbols_and_lists_no_symbols(store, answer):
    qid = "ch01-e4-t-math"
    with pytest.raises(AnswerError) as e:
        check(qid, answer)
    text = one_line(e.value)
    assert "a number, not a formula" in text and "S = 4" in text and "course.symbols" in text, text
    assert "depends on" not in text, text


def test_the_grader_says_the_same_of_a_number_for_a_formula():
    from autograder.checks import judge

    q = load_chapter("ch01_rooflines")["ch01-e4-t-math"]
    v = judge(q, record.encode_scalar("formula", 1.5e-3))
    assert "a number, not a formula" in v.message and "depends on" not in v.message, v.message


def test_a_formula_missing_a_symbol_still_names_it(store):
    with pytest.raises(AnswerError) as e:
        check("ch01-e4-t-math", "B*D/C")
    assert "depends on F" in str(e.value) and "not a formula" not in str(e.value)


def test_a_program_whose_trace_never_ends_ends_the_check_with_one_line(store, short_bounds):
    """A program answer is traced (exported) by the self-check: an endless Python loop in it must not hang the
    notebook any more than a function answer's does."""
    qid = "ch03-cx2-case1-local"
    model = _model("ch03_sharding", qid)

    def endless(*args):
        x = 1
        while x != 3:  # never: x is a power of two
            x *= 2
        return model(*args)

    assert "traced" in _stopped(qid, endless, 10)


def test_grading_traces_a_program_unbounded(short_bounds):
    qid = "ch03-cx2-case1-local"
    q = load_chapter("ch03_sharding")[qid]
    model = q.solution

    def slow(*args):
        time.sleep(0.6)
        return model(*args)

    from autograder.kinds import program

    blob = program.encode(program.make_print(q), slow)
    assert isinstance(blob, str), blob


def test_selfcheck_keeps_what_to_do_for_questions_this_machine_cannot_check(store, monkeypatch):
    """On a machine with too few devices the table's rows are short and a line under it gives the remedy in
    full (the row's own text is cut at the table's width), with how many questions and points it concerns."""
    from nbformat.v4 import new_code_cell, new_notebook, new_output

    from autograder.selfcheck import report
    from course.answers import fingerprints

    monkeypatch.setattr(devices, "kernel_devices", lambda: 1)
    monkeypatch.setattr(devices, "chosen", lambda: "real")
    qids = ["ch03-cx2-case1-local", "ch03-cx2-case2-allgather"]
    errors_shown = []
    for qid in qids:
        with pytest.raises(AnswerError) as e:
            check(qid, _model("ch03_sharding", qid))
        errors_shown.append(str(e.value))
    cells = [new_code_cell(f'check("{qid}", answer)', execution_count=1, outputs=[
        new_output("error", ename="AnswerError", evalue=text, traceback=[])])
        for qid, text in zip(qids, errors_shown, strict=True)]
    lines = report(new_notebook(cells=cells), "this-run", {})
    rows = [line for line in lines if line.startswith("ch03-")]
    for qid in qids:
        row = next(r for r in rows if r.startswith(qid))
        assert "this machine" in row and not row.endswith("…"), row
    below = "\n".join(lines[lines.index(rows[-1]) + 1:])
    # the command line's remedy: no kernel of the learner's to restart, no cell for %env
    assert "SCALING_COURSE_DEVICES=cpu scaling-course selfcheck" in below and "restart the kernel" not in below, below
    points = sum(fingerprints("ch03")[q]["points"] for q in qids)
    assert f"{len(qids)} questions" in below and f"{points:g} points" in below, below
