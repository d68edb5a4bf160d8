"""When the grader itself fails, no student pays for it. A kernel that cannot start, a program runner that cannot
start, a failure in the grader's own reading of a compiled program: each is the grader's fault, reported as such
(flagged for the course staff, never stored as a graded 0, graded again on the next run), while a student's
program that hangs or raises stays the student's."""

import io
import os
from pathlib import Path

import jax.numpy as jnp
import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from autograder import compiled_hlo, programs
from autograder.grading import judge, results
from autograder.grading.execute import Limits
from autograder.kinds.program import judge as judge_here
from autograder.questions import load_chapter
from autograder.verdict import Status
from tests.chapter_checks import recorded

CH = load_chapter("ch03_sharding")
Q = CH["ch03-cx2-case1-local"]  # x[64, 256] split on X, y[256, 128] on every device
STARVED = 64 * 2**20  # an address space no kernel or runner can start in: a grader's configuration fault


def _judged(fn, course_dir, each=20):
    answer = recorded(Q, fn)
    return judge.judge_programs(CH, [{"qid": Q.qid, "answer": answer}], course_dir, "ada", seconds=40,
                                each=each)[Q.qid]


def test_a_runner_that_cannot_start_is_the_graders_fault(tmp_path, runner_request):
    runner_request["memory"] = STARVED
    v = _judged(Q.solution, tmp_path)
    assert (v.status, v.diagnosis) == (Status.INVALID, "grader_error"), v.message
    assert "course staff" in v.message


def test_a_program_that_never_ends_is_still_its_own_fault(tmp_path, runner_request):
    def forever(x, y):
        import jax

        return jax.lax.while_loop(lambda c: c.sum() < jnp.inf, lambda c: c + 1.0, Q.solution(x, y))

    v = _judged(forever, tmp_path, each=3)
    assert (v.status, v.diagnosis) == (Status.INCORRECT, "program_failed"), v.message
    assert _judged(Q.solution, tmp_path).score == 1  # and the runner serves the next program


def test_a_failure_in_reading_a_compiled_program_is_the_graders(monkeypatch):
    """The grader's reading of what a program compiled to (its census, its collectives, its memory) is the
    grader's code: an exception there is no 'your program raised'."""
    def broken(*_):
        raise ValueError("an HLO form the census does not parse")

    monkeypatch.setattr(compiled_hlo, "compiled_census", broken)
    v = judge_here(Q, recorded(Q, Q.solution))
    assert (v.status, v.diagnosis) == (Status.INVALID, "grader_error"), v.message
    assert "Your program" not in v.message


@pytest.fixture(autouse=True)
def _fresh_reference_checks():
    """The two-way rule remembers, per question, whether the grader reads its reference; a test that breaks a
    reader must not find what another test remembered."""
    from autograder.kinds import program as program_kind

    program_kind.REFERENCE_CHECKS.clear()
    yield
    program_kind.REFERENCE_CHECKS.clear()


def _with_cosine(x, y):
    """The right answer with a marker the reference lacks (a cosine that adds nothing)."""
    return Q.solution(x, y) + 0 * jnp.cos(x).sum()


def test_a_reader_that_fails_on_the_students_program_alone_refuses_it_as_the_students(monkeypatch):
    """Whose fault is decided by which input made the reading fail: the grader's readers parse text the student's
    program decides, so where the question's reference reads fine, the program is refused as the student's (no
    flag, no endless regrade); where the reference fails too, the grader is broken."""
    real = compiled_hlo.placed_permutes

    def picky(stated_text, compiled_text, mesh):
        if "stablehlo.cosine" in stated_text:
            raise ValueError("a form of the student's that the reader does not parse")
        return real(stated_text, compiled_text, mesh)

    monkeypatch.setattr(compiled_hlo, "placed_permutes", picky)
    v = judge_here(Q, recorded(Q, _with_cosine))
    assert (v.status, v.diagnosis, v.score) == (Status.INCORRECT, "bad_program", 0), v.message
    assert "cannot read" in v.message and "ValueError" in v.message and "course staff" not in v.message
    assert judge_here(Q, recorded(Q, Q.solution)).score == 1  # the reference itself reads fine


def test_a_reader_that_fails_on_every_program_is_the_graders(monkeypatch):
    def broken(*_):
        raise ValueError("the grader's own bug")

    monkeypatch.setattr(compiled_hlo, "placed_permutes", broken)
    v = judge_here(Q, recorded(Q, _with_cosine))
    assert (v.status, v.diagnosis) == (Status.INVALID, "grader_error"), v.message


def _psum_too(x, y):
    """The right answer with a collective the reference lacks (a psum that adds nothing)."""
    import jax
    from jax.sharding import PartitionSpec as P

    import course

    extra = jax.shard_map(lambda b: jax.lax.psum(b, "X"), mesh=course.mesh(X=8), in_specs=P(None, "X"),
                          out_specs=P(None, "X"))(x)
    return Q.solution(x, y) + 0 * extra.sum()


def test_judging_that_fails_on_the_students_report_alone_is_still_the_graders(monkeypatch):
    """Judging a well-formed report is the grader's own logic, not a reading of text the program decides: where it
    raises, even on the student's report alone (a branch of a diagnosis only a wrong program reaches), the grader is
    at fault: flagged for a person, never a kept 0."""
    from autograder.grading.judge import _TRANSIENT

    real = programs.judge_report

    def picky(q, report, seed, traffic=None):
        if report.census:  # the student's program runs a collective; case 1's reference none
            raise ZeroDivisionError("a value of the student's program")
        return real(q, report, seed, traffic)

    monkeypatch.setattr(programs, "judge_report", picky)
    v = judge_here(Q, recorded(Q, _psum_too))
    assert (v.status, v.diagnosis, v.score) == (Status.INVALID, "grader_error", 0), v.message
    assert "ZeroDivisionError" in v.message and "course staff" in v.message
    assert v.diagnosis in _TRANSIENT  # graded again on the next run
    monkeypatch.setattr(programs, "judge_report", lambda *a, **k: 1 / 0)
    v = judge_here(Q, recorded(Q, _psum_too))
    assert (v.status, v.diagnosis) == (Status.INVALID, "grader_error"), v.message


def test_an_unreadable_report_holds_the_exception_name_and_the_judge_phrases_it(monkeypatch):
    """The runner's report of a reading that raised stores the exception's name alone (as a grader error's does),
    and ``judge_report`` phrases it: nothing reads a name back out of a sentence."""
    from autograder.meshes import mesh

    def broken(*_):
        raise KeyError("a form the reader does not parse")

    monkeypatch.setattr(compiled_hlo, "placed_permutes", broken)
    report = programs.run(Q.spec, Q.solution, 0, make_mesh=mesh)
    assert (report.error_code, report.error) == (programs.UNREADABLE, "KeyError"), report
    v = programs.judge_report(Q.spec, report, 0)
    assert (v.diagnosis, v.score) == ("bad_program", 0) and "cannot read" in v.message and "KeyError" in v.message
    v = judge_here(Q, recorded(Q, _with_cosine))  # the reference cannot be read either: the grader's, by that name
    assert v.diagnosis == "grader_error" and "(KeyError; the reference: KeyError" in v.message, v.message


def test_a_reference_that_cannot_be_made_is_flagged_with_why():
    """Where the reference cannot be made (the judging process's JAX started with other devices), nothing is
    swallowed: the flagged verdict names why, and it is asked once per question."""
    from autograder.kinds.program import judge_all
    from course.errors import SetupError

    made = []

    def no_devices(q, spec):
        made.append(q.qid)
        raise SetupError("JAX already started with 1 device(s)")

    def unreadable(items):
        return {i["qid"]: {"error": "ValueError", "error_code": programs.UNREADABLE} for i in items}

    for _ in range(2):
        v = judge_all({Q.qid: Q}, {Q.qid: recorded(Q, Q.solution)}, None, unreadable, no_devices)[Q.qid]
        assert (v.status, v.diagnosis) == (Status.INVALID, "grader_error"), v.message
        assert "SetupError" in v.message and "ValueError" in v.message, v.message
    assert made == [Q.qid]


def test_the_reference_is_read_once_per_question(monkeypatch):
    """The reference is exported and run only where a student's program could not be read, and once per question."""
    from autograder.kinds import program as program_kind

    real, exported = compiled_hlo.placed_permutes, []
    monkeypatch.setattr(compiled_hlo, "placed_permutes", lambda s, c, m: (_ for _ in ()).throw(ValueError())
                        if "stablehlo.cosine" in s else real(s, c, m))
    made = program_kind._reference_blob
    monkeypatch.setattr(program_kind, "_reference_blob", lambda q, spec: exported.append(q.qid) or made(q, spec))
    assert judge_here(Q, recorded(Q, Q.solution)).score == 1 and exported == []
    for _ in range(2):
        assert judge_here(Q, recorded(Q, _with_cosine)).diagnosis == "bad_program"
    assert exported == [Q.qid]


def _stored_as(monkeypatch, kept):
    """An assignment whose stored result for every student is ``kept``, made from the same files and answers."""
    class A:
        answers, variants, db_url, notebook, late = "k", None, "", "n", None
        course_dir, name = Path("no-such-course"), "hw"

    monkeypatch.setattr(results, "stored", lambda a, s: kept)
    monkeypatch.setattr(results, "fingerprint", lambda folder, nb: "x")
    monkeypatch.setattr(results, "write_result", lambda url, r: None)
    return A


def test_a_refused_program_is_kept_on_the_next_run(tmp_path, monkeypatch):
    """A program refused as the student's is a grade: not flagged, so not graded again on every run."""
    kept = {"sha256": "x", "answers": "k", "setting": {},
            "questions": {"q": {"diagnosis": "bad_program", "score": 0.0, "points": 1.0}}}

    A = _stored_as(monkeypatch, kept)
    assert results.unchanged(A(), "ada", tmp_path) == (kept, "")


def test_a_notebook_another_tool_wrote_after_the_grade_is_graded_again(tmp_path, monkeypatch):
    """A plain ``nbgrader autograde`` rewrites autograded/ with its own notebook: a rerun that kept the result would
    leave formgrader, generate_feedback and the copy check reading a notebook the grade did not come from."""
    kept = {"sha256": "x", "answers": "k", "setting": {},
            "questions": {"q": {"diagnosis": "correct", "score": 1.0, "points": 1.0}}}
    A = _stored_as(monkeypatch, kept)
    A.course_dir = tmp_path
    notebook = tmp_path / "autograded" / "ada" / "hw" / "n.ipynb"
    result = tmp_path / ".scaling-course" / "results" / "hw" / "ada.json"
    for path in (notebook, result):
        path.parent.mkdir(parents=True)
    notebook.write_text("ours")
    result.write_text("{}")
    os.utime(notebook, ns=(10**18, 10**18))
    os.utime(result, ns=(10**18 + 1, 10**18 + 1))
    assert results.unchanged(A(), "ada", tmp_path) == (kept, "")
    os.utime(notebook, ns=(10**18 + 2, 10**18 + 2))  # nbgrader's, written after the grade
    assert results.unchanged(A(), "ada", tmp_path) == (None, results.REWRITTEN)
    notebook.unlink()  # nbgrader's autograde removed it, and failed on the submission: nothing for formgrader
    assert results.unchanged(A(), "ada", tmp_path) == (None, results.REWRITTEN)


def test_a_program_that_raises_is_still_its_own_fault():
    def raises(x, y):
        raise ZeroDivisionError("the student's own")

    v = judge_here(Q, recorded(Q, raises))
    assert v.status is not Status.INVALID and v.diagnosis != "grader_error", v.message


def test_a_kernel_that_cannot_start_is_flagged_not_graded(tmp_path):
    """A memory limit no kernel starts in (an instructor's setting): every submission is flagged as the grader's
    failure, nothing is stored as graded, and the next run grades it again."""
    from autograder.demo import copy_course, submit
    from autograder.grading.console import Progress
    from autograder.grading.pipeline import grade, prepare

    chapter = "ch01_rooflines"
    root = Path(__file__).resolve().parents[2]
    course = copy_course(root, tmp_path / "course", [chapter])
    release = nbformat.read(root / "release" / chapter / f"{chapter}.ipynb", as_version=4)
    submit(course, "ada", chapter, release)
    summary = grade(course, chapter, jobs=1, limits=Limits(memory_bytes=STARVED, startup_seconds=20),
                    progress=Progress(stream=io.StringIO(), bar=False))
    (r,) = summary.results
    assert {q["diagnosis"] for q in r["questions"].values()} == {"grader_error"}, r["problems"]
    assert any("kernel could not be started" in p for p in r["problems"]), r["problems"]
    kept, why = results.unchanged(prepare(course, chapter), "ada", course / "submitted" / "ada" / chapter)
    assert kept is None and why, why


def test_a_stored_result_the_grader_failed_on_is_graded_again(tmp_path, monkeypatch):
    kept = {"sha256": "x", "answers": "k", "setting": {},
            "questions": {"q": {"diagnosis": "grader_error", "score": 0.0, "points": 1.0}}}

    A = _stored_as(monkeypatch, kept)
    assert results.unchanged(A(), "ada", tmp_path) == (None, results.FLAGGED)
    kept["questions"]["q"]["diagnosis"] = "ratio:2"
    assert results.unchanged(A(), "ada", tmp_path) == (kept, "")


def test_a_kernel_start_failure_is_told_apart_from_a_first_cell_that_kills_it(tmp_path, monkeypatch):
    """A notebook whose first cell ends the kernel ran the student's code: that is the student's."""
    from autograder.grading import factory
    from autograder.grading.execute import execute
    from autograder.grading.jail import isolation_paths

    work = tmp_path / "work"
    made = factory.Factory(work)
    monkeypatch.setenv(factory.ENV, made.socket)
    deny, allow = isolation_paths(Path(__file__).resolve().parents[2])
    try:
        nb = new_notebook(cells=[new_code_cell("import os\nos._exit(3)"), new_code_cell("x = 1")])
        run = execute(nb, work / "ada", deny, allow, Limits(startup_seconds=30), tmp_path / "a.log")
        assert run.started and "the kernel died" in run.problems[0], run.problems
        nb = new_notebook(cells=[new_code_cell("x = 1")])
        run = execute(nb, work / "bob", deny, allow, Limits(memory_bytes=STARVED, startup_seconds=20),
                      tmp_path / "b.log")
        assert not run.started and "could not be started" in run.problems[0], run.problems
    finally:
        made.close()


# --- scalar answers: the student's text goes into sympy, so a raise there is fault to be decided ---------------

E1 = load_chapter("ch04_transformers")["ch04-e1-matvec-flops"]
# Texts whose judging raised (sympy cannot order a power of numbers the evaluator had made opaque, inside Min/Max):
# each was a grader_error, flagged for a person and judged again on every run.
RAISED = ["Min(2*N*P, 3**(1/log(4)))", "Min(sqrt(exp(log2(3))), P)", "Max(N*P, 2**(1/log(3)))*2"]


@pytest.mark.parametrize("text", RAISED)
def test_a_formula_that_made_judging_raise_gets_a_verdict_of_its_own(text, tmp_path):
    from autograder import fingerprint, kinds

    request = {"chapter": "ch04_transformers", "course_dir": str(tmp_path), "items": [{"qid": E1.qid, "answer": text}]}
    v = judge.handle(request)[E1.qid]
    assert v["diagnosis"] not in ("grader_error", "unjudgeable"), v
    mine = kinds.selfcheck(fingerprint.make(E1), E1.qid, text)
    assert (mine.status.value, mine.diagnosis) == (v["status"], v["diagnosis"])


def test_judging_that_raises_on_an_answer_but_not_on_the_reference_is_the_answer_s_fault(monkeypatch):
    """A student must not send every answer to a person by writing it so that judging raises: where the reference,
    judged the same way, is right, the answer is told to be written plainly (not flagged, not judged again); where
    the reference fails too, the grader is at fault as before."""
    import time

    from autograder import fingerprint, kinds
    from autograder.grading.judge import _TRANSIENT, _judge_one

    hostile = "2*N*P + 0*Min(N, P)"

    def fragile(q, a):
        if "Min" in a:
            raise ValueError("not comparable")
        return kinds.judge(q, a, "s")

    v = _judge_one(fragile, E1, hostile, time.monotonic() + 20)
    assert (v.status, v.diagnosis, v.score) == (Status.INVALID, "unjudgeable", 0), v.message
    assert "ValueError" in v.message and "course staff" not in v.message
    assert v.diagnosis not in _TRANSIENT
    v = _judge_one(lambda q, a: 1 / 0, E1, hostile, time.monotonic() + 20)
    assert (v.status, v.diagnosis) == (Status.INVALID, "grader_error"), v.message

    formula = kinds.KINDS["formula"]
    real = formula.selfcheck
    monkeypatch.setattr(formula, "selfcheck", lambda fp, qid, a: fragile(E1, a) if "Min" in a else real(fp, qid, a))
    mine = kinds.selfcheck(fingerprint.make(E1), E1.qid, hostile)  # the self-check: a verdict, never a traceback
    assert (mine.status, mine.diagnosis) == (Status.INVALID, "unjudgeable"), mine.message
