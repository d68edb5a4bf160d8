"""Attacks on a program question whose mesh shape the student chooses (ch06 CX7): records forged in the kernel,
functions whose defaults lie about the shape they run at, programs that would fit the memory budget only by
cheating, and answers that break the grader. Each earns what its program is worth with a sentence that says why;
the self-check says what the grader says of the same function; one bad answer costs no other answer of the
notebook; and nothing of the grader's (paths, tracebacks, its own objects) reaches a message."""

import base64
import functools
import inspect
import time
from pathlib import Path
from types import SimpleNamespace

import jax
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import course
from autograder import kinds
from autograder.kinds.program import judge_all
from autograder.meshes import mesh
from autograder.programs import run_items
from autograder.questions import load_chapter
from autograder.verdict import Status
from tests.chapter_checks import printed, recorded
from tests.grading.program_answers import forged, judged

CH06 = load_chapter("ch06_applied_training")
CX7 = CH06["ch06-cx7-budget-step"]  # (loss, dW_in, dW_out) at X x Y = 8; exactly 2 x 4 and 1 x 8 fit the budget
CX6 = CH06["ch06-cx6-fsdp-layers-step"]  # a program question of the same notebook, with a fixed mesh
STEP = CX7.model
OUT_SPECS = (P(), P("X", "Y"), P("Y", "X"))
REPO = str(Path(__file__).resolve().parents[2])


def clean(message: str) -> bool:
    """Nothing of the grader's in a student's message: no paths, tracebacks or objects of its own, and no flood."""
    return len(message) < 5000 and not any(s in message for s in ("Traceback", 'File "', "site-packages", REPO,
                                                                   "solutions/", "ArrayImpl", "object at 0x"))


def graded(record, q=CX7, run=None):
    """The grader's verdict on what a kernel recorded, the artefact run in this process."""
    return judge_all({q.qid: q}, {q.qid: record}, None, run or functools.partial(run_items, make_mesh=mesh))[q.qid]


def both(fn):
    """The grader's verdict on what ``grade`` records for ``fn``, and the self-check's on ``fn`` itself."""
    return kinds.judge(CX7, recorded(CX7, fn)), kinds.selfcheck_live(printed(CX7), CX7.qid, fn)


@functools.cache
def exported_at(x: int, y: int) -> str:
    """The model's step as an honest kernel exports it at the X x Y mesh."""
    return recorded(CX7, functools.partial(STEP, X=x, Y=y))["program"]


def at(x: int, y: int) -> SimpleNamespace:
    """The question at one shape, as ``forged`` takes a question."""
    return SimpleNamespace(spec=CX7.spec.at((("X", x), ("Y", y))))


# --- records forged in the kernel: read as data, and the program judged at the shape the record names ----------

def _replicated_inputs():
    """The right step exported at 2 x 4, but for whole (replicated) operands."""
    m = mesh(X=2, Y=4)
    args = [jax.ShapeDtypeStruct(o.shape, o.dtype, sharding=NamedSharding(m, P())) for o in CX7.spec.operands]
    return base64.b64encode(jax.export.export(jax.jit(STEP))(*args).serialize()).decode()


OTHER_SHAPE = [
    ((2, 4), lambda: exported_at(4, 2), "builds a 4 x 2 mesh (X x Y)"),
    ((2, 4), lambda: exported_at(1, 8), "builds a 1 x 8 mesh (X x Y)"),
    ((1, 8), lambda: exported_at(2, 4), "builds a 2 x 4 mesh (X x Y)"),
    ((2, 4), _replicated_inputs, "operand 0"),
]


@pytest.mark.parametrize(("shape", "blob", "words"), OTHER_SHAPE, ids=["2x4-as-4x2", "2x4-as-1x8", "1x8-as-2x4",
                                                                       "2x4-whole-inputs"])
def test_a_program_exported_at_another_shape_than_recorded_is_refused(shape, blob, words):
    v = graded({"mesh": dict(zip("XY", shape, strict=True)), "program": blob()})
    assert (v.score, v.diagnosis) == (0, "bad_program") and words in v.message, v.message
    assert clean(v.message), v.message


MESHES = [
    ({"X": "2", "Y": 4}, "not_whole", "default for it is 2"),
    ({"X": 2.0, "Y": 4.0}, "not_whole", "default for it is 2.0"),
    ({"X": True, "Y": 4}, "not_whole", "default for it is True"),
    ({"X": None, "Y": 4}, "not_whole", "default for it is None"),
    ({"X": {"X": 2}, "Y": [4]}, "not_whole", "default for it is {'X': 2}"),
    ({"X": 10**4000, "Y": 4}, "not_whole", "a whole number of about 4001 digits"),
    ({"X": -2, "Y": -4}, "not_allowed", "a -2 x -4 mesh"),
    ({"X": 0, "Y": 8}, "not_allowed", "a 0 x 8 mesh"),
    ({"X": 16, "Y": 1}, "not_allowed", "a 16 x 1 mesh"),
    ({"Y": 4}, "missing", "Missing: X"),
    ({}, "missing", "Missing: X and Y"),
    ([2, 4], "not_a_function", "keyword parameters X and Y"),
    ("2x4", "not_a_function", "keyword parameters X and Y"),
    (None, "not_a_function", "keyword parameters X and Y"),
]


@pytest.mark.parametrize(("chosen", "code", "words"), MESHES, ids=[f"{c}-{i}" for i, (_, c, _) in enumerate(MESHES)])
def test_a_forged_shape_is_a_sentence_and_nothing_runs(chosen, code, words):
    v = graded({"mesh": chosen, "program": "not even base64"})
    assert (v.status, v.diagnosis) == (Status.INVALID, f"mesh_choice:{code}") and words in v.message, v.message
    assert clean(v.message), v.message


def test_extra_axes_and_a_million_keys_are_ignored():
    """The question's axes are read from the record; whatever else it holds is not looked at."""
    blob = exported_at(2, 4)
    start = time.monotonic()
    many = {"X": 2, "Y": 4, **{f"Z{i}": i for i in range(10**6)}}
    assert graded({"mesh": many, "program": blob}).ok
    assert time.monotonic() - start < 10
    assert graded({"mesh": {"X": 2, "Y": 4, "Z": 1}, "program": blob}).ok


RECORDS = [
    ({"mesh": {"X": 2, "Y": 4}}, Status.INVALID, "wrong_type", "no program was recorded"),
    ({"mesh": {"X": 2, "Y": 4}, "program": 12}, Status.INVALID, "wrong_type", "no program was recorded"),
    ({"mesh": {"X": 2, "Y": 4}, "program": ["AAAA"]}, Status.INVALID, "wrong_type", "no program was recorded"),
    ({"mesh": {"X": 2, "Y": 4}, "program": "AAAA"}, Status.INCORRECT, "bad_program", "cannot be read"),
    ({"mesh": {"X": 2, "Y": 4}, "program": {"error": "x" * 10**6}}, Status.INCORRECT, "raised", "[...]"),
    (42, Status.INVALID, "mesh_choice:not_a_function", "Expected your step function"),
]


@pytest.mark.parametrize(("record", "status", "code", "words"), RECORDS,
                         ids=["no-program", "a-number", "a-list", "junk", "a-huge-error", "a-number-for-all"])
def test_a_record_without_a_program_is_a_sentence(record, status, code, words):
    v = graded(record)
    assert (v.status, v.score, v.diagnosis) == (status, 0, code) and words in v.message, v.message
    assert clean(v.message), v.message


def test_the_record_of_another_question_pasted_in():
    """CX6's record (a bare program) as CX7's answer names no shape; CX7's as CX6's answer holds no program."""
    v = graded(recorded(CX6, CX6.model))
    assert v.diagnosis == "mesh_choice:not_a_function" and clean(v.message), v.message
    v = graded({"mesh": {"X": 2, "Y": 4}, "program": exported_at(2, 4)}, q=CX6)
    assert (v.score, v.diagnosis) == (0, "wrong_type"), v.message


# --- functions whose defaults lie: judged on what they run, and the self-check says what the grader says -------

def _body_at(x: int, y: int, *, X: int = 2, Y: int = 4):
    """A step whose defaults say 2 x 4 (or what the caller sets) but whose body builds an x by y mesh."""
    def step(a, w_in, w_out, *, X=X, Y=Y):
        return STEP(a, w_in, w_out, X=x, Y=y)
    return step


class _ForgedSignature:
    """A callable object whose ``__signature__`` claims 2 x 4 while it runs at 4 x 2."""

    __signature__ = inspect.signature(STEP)

    def __call__(self, a, w_in, w_out, **_):
        return STEP(a, w_in, w_out, X=4, Y=2)


class _SignatureRaises:
    @property
    def __signature__(self):
        raise RuntimeError("no signature for you")

    def __call__(self, *args, **kwargs):
        return STEP(*args, **kwargs)


class _IndexRaises(int):
    def __index__(self):
        raise RuntimeError("no index")

    __int__ = __index__


class _ReprRaises:
    def __repr__(self):
        raise RuntimeError("no repr")


def _with_defaults(**defaults):
    """The model's step with other keyword defaults."""
    def step(a, w_in, w_out, *, X=2, Y=4):
        return STEP(a, w_in, w_out, X=X, Y=Y)
    step.__kwdefaults__ = defaults
    return step


LIARS = [
    ("body 4x2, says 2x4", _body_at(4, 2), Status.INCORRECT, "bad_program", "builds a 4 x 2 mesh"),
    ("body 1x8, says 2x4", _body_at(1, 8), Status.INCORRECT, "bad_program", "builds a 1 x 8 mesh"),
    ("body 2x4, says 8x1", _body_at(2, 4, X=8, Y=1), Status.INCORRECT, "bad_program", "builds a 2 x 4 mesh"),
    ("forged __signature__", _ForgedSignature(), Status.INCORRECT, "bad_program", "builds a 4 x 2 mesh"),
    ("__signature__ raises", _SignatureRaises(), Status.INVALID, "mesh_choice:missing", "Missing: X and Y"),
    ("an int whose __index__ raises", _with_defaults(X=_IndexRaises(2), Y=4), Status.INCORRECT, "raised",
     "could not be lowered"),
    ("repr raises", _with_defaults(X=_ReprRaises(), Y=4), Status.INVALID, "mesh_choice:not_whole",
     "default for it is a _ReprRaises"),
    ("10**5000", _with_defaults(X=10**5000, Y=4), Status.INVALID, "mesh_choice:not_whole", "about 5001 digits"),
    ("the shape computed in the body", lambda a, w_in, w_out, X=None, Y=None: STEP(a, w_in, w_out, X=X or 2, Y=Y or 4),
     Status.INVALID, "mesh_choice:not_whole", "default for it is None"),
    ("numpy integers", _with_defaults(X=np.int64(2), Y=np.int32(4)), Status.CORRECT, "correct", "Correct."),
    ("numpy bool", _with_defaults(X=np.True_, Y=8), Status.INVALID, "mesh_choice:not_whole", "np.True_"),
    ("a lambda", lambda a, w_in, w_out, X=2, Y=4: STEP(a, w_in, w_out, X=X, Y=Y), Status.CORRECT, "correct", ""),
    ("a lambda at 1 x 8", lambda a, w_in, w_out, X=1, Y=8: STEP(a, w_in, w_out, X=X, Y=Y), Status.PARTIAL,
     "mesh_choice:earns_half", "least tensor parallelism"),
    ("jax.jit of the step", jax.jit(STEP), Status.CORRECT, "correct", ""),
    ("partials stacked", functools.partial(functools.partial(STEP, X=4), Y=2), Status.PARTIAL, "memory",
     "1,441,820 bytes per device"),
    ("partials overridden", functools.partial(functools.partial(STEP, X=4), X=1, Y=2), Status.INVALID,
     "mesh_choice:not_allowed", "a 1 x 2 mesh"),
]


@pytest.mark.parametrize(("fn", "status", "code", "words"), [case[1:] for case in LIARS],
                         ids=[case[0] for case in LIARS])
def test_a_function_is_judged_on_what_it_runs_by_both(fn, status, code, words):
    graded_, checked = both(fn)
    assert (graded_.status, graded_.diagnosis) == (status, code) and words in graded_.message, graded_.message
    assert (checked.status, checked.score, checked.diagnosis) == (graded_.status, graded_.score, graded_.diagnosis)
    assert checked.message == graded_.message and clean(graded_.message), (checked.message, graded_.message)


def test_a_function_that_rewrites_its_defaults_is_graded_as_it_is_then():
    """The shape is read, and the program exported, from the function as it is when ``grade`` runs: one that
    rewrites its own defaults when called is judged at the shape it then names, by both judges alike."""
    def step(a, w_in, w_out, *, X=2, Y=4):
        step.__kwdefaults__ = {"X": 4, "Y": 2}
        return STEP(a, w_in, w_out, X=X, Y=Y)

    first = kinds.selfcheck_live(printed(CX7), CX7.qid, step)
    assert first.ok  # checked as it was: 2 x 4
    record = recorded(CX7, step)
    assert record["mesh"] == {"X": 4, "Y": 2}
    graded_, checked = kinds.judge(CX7, record), kinds.selfcheck_live(printed(CX7), CX7.qid, step)
    assert (graded_.diagnosis, checked.diagnosis) == ("memory", "memory"), graded_


# --- programs that would fit the budget only by cheating ------------------------------------------------------

def _host_callback(a, w_in, w_out, *, X=2, Y=4):
    """The step's results handed through Python on the host (code that would run at grading time)."""
    outs = STEP(a, w_in, w_out, X=X, Y=Y)
    return jax.pure_callback(lambda *r: r, tuple(jax.ShapeDtypeStruct(o.shape, o.dtype) for o in outs), *outs)


def _offloaded(a, w_in, w_out, *, X=4, Y=2):
    """The step at 4 x 2 (over the budget), its results moved to pinned host memory."""
    m = course.mesh(X=X, Y=Y)
    return tuple(jax.device_put(o, NamedSharding(m, s, memory_kind="pinned_host"))
                 for o, s in zip(STEP(a, w_in, w_out, X=X, Y=Y), OUT_SPECS, strict=True))


def _calls_home(a, w_in, w_out):
    outs = STEP(a, w_in, w_out)
    return tuple(jax.ffi.ffi_call("student_helper", jax.ShapeDtypeStruct(o.shape, o.dtype))(o) for o in outs)


def test_a_host_callback_is_refused_by_both():
    graded_, checked = both(_host_callback)
    assert (graded_.score, graded_.diagnosis) == (0, "raised") and "could not be lowered" in graded_.message
    assert (checked.diagnosis, checked.message) == (graded_.diagnosis, graded_.message)
    v = graded({"mesh": {"X": 2, "Y": 4}, "program": forged(CX7, _calls_home, "student_helper")})
    assert (v.score, v.diagnosis) == (0, "bad_program") and "calls 'student_helper'" in v.message, v.message


def test_memory_is_measured_however_the_results_are_placed_or_donated():
    """Results moved to host memory, or inputs donated to results, hold as many bytes per device as the plain
    step at 4 x 2: over the budget."""
    plain = graded({"mesh": {"X": 4, "Y": 2}, "program": exported_at(4, 2)})
    assert plain.diagnosis == "memory"
    donated = graded({"mesh": {"X": 4, "Y": 2},
                      "program": forged(at(4, 2), functools.partial(STEP, X=4, Y=2), donate_argnums=(0, 1, 2))})
    offloaded, checked = both(_offloaded)
    for v in (donated, offloaded, checked):
        assert (v.score, v.diagnosis, v.data["memory"]) == (0.5, "memory", plain.data["memory"]), v.message


def test_another_shapes_layout_is_judged_as_what_it_is():
    """A step at 2 x 4 that lays its results out as 4 x 2 would, under a sharding constraint: it names a 4 x 2
    mesh, and both judges say so."""
    def step(a, w_in, w_out, *, X=2, Y=4):
        m = course.mesh(X=4, Y=2)
        return tuple(jax.lax.with_sharding_constraint(o, NamedSharding(m, s))
                     for o, s in zip(STEP(a, w_in, w_out, X=X, Y=Y), OUT_SPECS, strict=True))

    graded_, checked = both(step)
    assert (graded_.score, graded_.diagnosis) == (0, "bad_program") and "builds a 4 x 2 mesh" in graded_.message
    assert (checked.diagnosis, checked.message) == (graded_.diagnosis, graded_.message)


# --- one bad answer costs only itself ------------------------------------------------------------------------

def test_a_report_the_judge_cannot_read_costs_only_its_own_question():
    """A runner's report that cannot be read (a broken runner) is a grader error for that question alone, flagged
    for a person; the notebook's other program is judged as usual."""
    def run(items):
        reports = run_items(items, make_mesh=mesh)
        return {**reports, CX7.qid: {"outputs": ["not an array"], "census": {"all-gather": "many"}}}

    answers = {CX7.qid: recorded(CX7, STEP), CX6.qid: recorded(CX6, CX6.model)}
    verdicts = judge_all(CH06, answers, None, run)
    assert verdicts[CX6.qid].ok
    assert (verdicts[CX7.qid].status, verdicts[CX7.qid].diagnosis) == (Status.INVALID, "grader_error")
    assert clean(verdicts[CX7.qid].message)


def test_a_notebook_of_bad_records_in_the_jailed_runner(tmp_path):
    """As ``scaling-course grade`` judges a notebook: a record at another shape than it names beside a right one."""
    answers = {CX7.qid: {"mesh": {"X": 2, "Y": 4}, "program": exported_at(4, 2)}, CX6.qid: recorded(CX6, CX6.model)}
    verdicts = judged(CH06, answers, tmp_path)
    assert (verdicts[CX7.qid].score, verdicts[CX7.qid].diagnosis) == (0, "bad_program")
    assert verdicts[CX6.qid].ok
    assert not any(str(tmp_path) in v.message or not clean(v.message) for v in verdicts.values())
