"""What a tired learner reads for the slips of a long session: each sentence true, with a next step, the same in
the self-check and the grade.

- a value where a function or a program is asked (the function's result, a number) is refused before anything is
  traced or run, in words, and costs no attempt;
- a sympy formula (or its text) where a number is asked is named by its own symbols: a symbol that divides a number
  (3/C) is no unit, and the e of 3.4e-8 is no symbol;
- a program that builds a mesh over other axes than the question's is told which mesh to build;
- a course object (a setting, a chip, a model) is named for what it is: a chip for an option that is its name is
  that option.
"""

from __future__ import annotations

import json

import jax
import numpy as np
import pytest
import sympy as sp
from jax.sharding import PartitionSpec as P

from autograder import kinds, programs
from autograder.checks import judge
from autograder.kinds import program as program_kind
from autograder.numbers import parse_number
from autograder.questions import chapter_names, load_chapter
from autograder.symbols import B, C, FLOPs, W_link, X
from autograder.verdict import Status
from course import hardware as hw
from course.answers import verdict
from tests.chapter_checks import printed, recorded

INTERNAL = ("of type", "ArrayImpl", "ndarray", "Values", "could not be lowered", "IndivisibleError", "Traceback")


def _both(q, answer):
    """The self-check's verdict and the grader's (on the record, through JSON), which must agree."""
    s = verdict(q.qid, answer)
    g = judge(q, json.loads(json.dumps(recorded(q, answer))))
    assert (s.status, s.diagnosis, s.message) == (g.status, g.diagnosis, g.message), (s, g)
    return s


def _question(qid):
    return load_chapter(next(c for c in chapter_names() if c.startswith(qid[:4])))[qid]


PROGRAMS = [q for c in chapter_names() for q in load_chapter(c).questions if q.kind == "program"]


# --- a value where a program is asked -----------------------------------------------------------------------

@pytest.mark.parametrize("q", [q for q in PROGRAMS if not q.spec.mesh_choices], ids=lambda q: q.qid)
def test_every_program_question_refuses_a_value_in_words(q):
    """The function's result (an array) or a number is no program: the sentence a function question gives, no
    attempt used, in the grade as in the self-check."""
    for answer, got in ((np.ones((128, 128), np.float32), "a NumPy array of shape (128, 128)"), (3, "a number")):
        v = _both(q, answer)
        assert (v.status, v.diagnosis) == (Status.INVALID, "not_a_function"), v
        assert v.message == (f"Expected a function, got {got}: define it with def and pass its name, without "
                             "calling it."), v.message


def test_a_jax_array_and_the_placeholder_where_a_program_is_asked():
    q = _question("ch03-cx2-case1-local")
    v = _both(q, jax.numpy.ones((128, 128)))
    assert v.diagnosis == "not_a_function" and "got a JAX array of shape (128, 128):" in v.message, v.message
    assert _both(q, None).diagnosis == "empty"


@pytest.mark.parametrize("q", PROGRAMS, ids=lambda q: q.qid)
def test_no_value_is_traced_or_run_where_a_program_is_asked(q, monkeypatch):
    """Refused before tracing: nothing that exports, lowers or runs a program is called (where the student chooses
    the mesh, a value names no shape, and is refused so)."""
    def never(*args, **kwargs):
        raise AssertionError("a value was traced or run as a program")

    for name in ("export", "run", "run_exported", "run_items"):
        monkeypatch.setattr(programs, name, never)
    fp = printed(q)
    for answer in (3, np.ones((4, 4)), "def f(x): return x"):
        rec = kinds.encode(fp, answer)
        checked = program_kind.selfcheck_live(fp, q.qid, answer)
        graded = program_kind.judge_all({q.qid: q}, {q.qid: json.loads(json.dumps(rec))}, None, never)[q.qid]
        assert checked.status is graded.status is Status.INVALID, (checked, graded)
        assert checked.message == graded.message and not any(w in graded.message for w in INTERNAL), graded.message


# --- a formula where a number is asked -----------------------------------------------------------------------

TIME = _question("ch10-e4-permute-time")  # a number in s


@pytest.mark.parametrize(("answer", "names"), [
    (1966080 / W_link, "W_link"), (sp.Float(8.7e-5) / X, "X"), (3 / C, "C"), (sp.Float(3.41333333333333e-8) * B, "B"),
    (sp.Float(1e9) / FLOPs, "FLOPs"), (2 * B / (W_link * X), "B, W_link, X"),
    ("1966080/W_link", "W_link"), ("8.7e-5/X", "X"), ("3e-6*X", "X"), ("3.41333333333333e-8*B", "B"),
    ("1.5e3 / (C*X)", "C, X"),
], ids=str)
def test_a_formula_for_a_number_is_named_by_exactly_its_symbols(answer, names):
    v = _both(TIME, answer)
    assert (v.status, v.diagnosis) == (Status.INVALID, "formula_for_number"), v
    assert f"your answer is a formula in {names}: put in the values" in v.message, v.message


@pytest.mark.parametrize(("text", "unit", "value"), [
    ("5 GB/s", "B/s", 5e9), ("2 GHz", "Hz", 2e9), ("3 FLOP/s", "FLOP/s", 3.0), ("1.5e-3 s", "s", 1.5e-3),
    ("100 FLOPs/byte", "", 100.0)])
def test_units_with_a_slash_still_read_as_units(text, unit, value):
    p = parse_number(text, unit)
    assert getattr(p, "value", None) == pytest.approx(value), p


def test_a_misspelt_unit_after_a_slash_is_still_an_unknown_unit():
    assert parse_number("2*31.27e9 GB/ss", "B/s").code == "unknown_unit"


# --- a mesh over other axes ---------------------------------------------------------------------------------

def test_a_program_on_a_mesh_of_other_axes_is_told_the_mesh_to_build():
    import course

    q = _question("ch03-cx2-case1-local")  # judged on course.mesh(X=8)

    def case1(x, y):
        return jax.shard_map(lambda a, b: a @ b, mesh=course.mesh(X=4, Y=2), in_specs=(P("X", None), P()),
                             out_specs=P("X", None))(x, y)

    v = _both(q, case1)
    assert v.status is Status.INCORRECT and not any(w in v.message for w in INTERNAL), v.message
    assert "builds a 4 x 2 mesh (X x Y), but it is judged on course.mesh(X=8)" in v.message, v.message
    assert "build every mesh it uses from that shape" in v.message


# --- course objects -----------------------------------------------------------------------------------------

def test_a_setting_given_for_a_number_is_named_with_the_fix():
    import course

    q = _question("ch03-e2-ways")
    v = _both(q, course.setting("ch03-e2"))
    assert v.status is Status.INVALID and not any(w in v.message for w in INTERNAL), v.message
    assert "got the setting ch03-e2 itself: give the number you computed from it" in v.message, v.message


@pytest.mark.parametrize(("answer", "words"), [(hw.TPU_V5P, "the chip TPU v5p"), (hw.H100, "the chip H100")])
def test_a_chip_given_for_a_number_is_named(answer, words):
    v = _both(TIME, answer)
    assert f"got {words} itself: give the number you computed from it" in v.message, v.message


def test_a_chip_for_the_option_that_is_its_name_is_that_option():
    q = _question("ch11-c1-cheaper")  # options 'TPU v5p', 'H100'
    for chip in (hw.TPU_V5P, hw.H100):
        assert _both(q, chip).diagnosis == _both(q, chip.name).diagnosis != "wrong_type"
    v = _both(q, hw.TPU_V5E)
    assert v.status is Status.INVALID and "got the chip TPU v5e itself: give the option's name" in v.message, v
    assert "Choose one of: 'TPU v5p', 'H100'." in v.message and not any(w in v.message for w in INTERNAL)


def test_a_model_given_for_a_number_is_named():
    from course.models import CONFIGS

    cfg = next(iter(CONFIGS.values()))
    v = _both(TIME, cfg)
    assert f"got the model {cfg.name} itself" in v.message and "of type" not in v.message, v.message


FUNCTIONS = [q for c in chapter_names() for q in load_chapter(c).questions if q.kind == "function"]


@pytest.mark.parametrize("q", [FUNCTIONS[0], FUNCTIONS[-1], PROGRAMS[0]], ids=lambda q: q.qid)
def test_a_course_object_where_a_function_is_asked_is_named(q):
    """A setting, a chip or a model passed where a function or a program is asked is named for what it is."""
    import course
    from course.models import CONFIGS

    cfg = next(iter(CONFIGS.values()))
    for answer, words in ((course.setting("ch03-e2"), "the setting ch03-e2"), (hw.TPU_V5P, "the chip TPU v5p"),
                          (cfg, f"the model {cfg.name}")):
        v = _both(q, answer)
        assert v.diagnosis == "not_a_function" and f"Expected a function, got {words}" in v.message, v.message
        assert not any(w in v.message for w in INTERNAL), v.message


# --- a result claimed the same along an axis where it is not ------------------------------------------------

def test_a_replication_claim_is_said_of_the_spec_without_turning_the_check_off():
    """JAX's error advises check_vma=False, which hides the slip: the sentence names the spec, the axis and the
    collective that makes it true."""
    q = _question("ch03-cx2-case3-allreduce")

    def case3(x, y):  # psum over the wrong axis: the result still differs along Y
        block = lambda a, b: jax.lax.psum(a @ b, "X")  # noqa: E731
        return jax.shard_map(block, mesh=jax.typeof(x).sharding.mesh, in_specs=(P("X", "Y"), P("Y", None)),
                             out_specs=P("X", None))(x, y)

    v = _both(q, case3)
    assert v.status is Status.INCORRECT and "check_vma" not in v.message, v.message
    assert "out_specs P('X', None) says the result is the same on every device along Y" in v.message, v.message
    assert "psum over Y" in v.message and "to='invarying'" in v.message


def test_a_shard_map_on_a_mesh_of_explicit_axes_is_told_why_the_inputs_read_as_unsplit():
    """jax.make_mesh's axes are Explicit in this JAX: on such a mesh, the inputs (split as the question says on the
    course's mesh) read as P(None, None), and JAX's words say the in_specs are wrong, which they are not."""
    q = _question("ch03-cx2-case1-local")

    def case1(x, y):
        m = jax.make_mesh((8,), ("X",))
        return jax.shard_map(lambda a, b: a @ b, mesh=m, in_specs=(P("X", None), P()), out_specs=P("X", None))(x, y)

    v = _both(q, case1)
    assert v.status is Status.INCORRECT and "Explicit axes" in v.message and "course.mesh(" in v.message, v.message


def _concrete_ending(end):
    """Case 1 (a local matmul), right when run eagerly, ended by asking for a concrete value."""
    def case1(x, y):
        out = jax.shard_map(lambda a, b: a @ b, mesh=jax.typeof(x).sharding.mesh, in_specs=(P("X", None), P()),
                            out_specs=P("X", None))(x, y)
        return end(out)
    return case1


@pytest.mark.parametrize("end", [np.asarray, lambda out: out.block_until_ready(),
                                 lambda out: out if float(out[0, 0]) > -1e9 else -out],
                         ids=["np.asarray", "block_until_ready", "float"])
def test_a_function_that_asks_for_a_concrete_value_is_told_the_check_traces_it(end):
    """Each works when the student runs it; the check traces it to export it, and JAX's TracerArrayConversionError,
    AttributeError or ConcretizationTypeError alone did not say why a program that runs scored 0."""
    v = _both(_question("ch03-cx2-case1-local"), _concrete_ending(end))
    assert v.status is Status.INCORRECT and "traces your function" in v.message and "np.asarray" in v.message, v.message


def test_other_lowering_errors_are_still_relayed():
    v = programs.lowering_verdict("ValueError: something else went wrong", None, ["X"])
    assert "ValueError: something else went wrong" in v.message, v.message



# (chapter, setting, question, the int8 peak taken for the bf16 one: the student's answer from the reference)
INT8_PEAK = [("ch02_tpus", "ch02-q2", "ch02-q2-v5p-flops", "chip_3d", lambda ref, chip: ref * chip.int8_ops_per_s
              / chip.bf16_flops_per_s),
             ("ch02_tpus", "ch02-q6", "ch02-q6-flops", "chip", lambda ref, chip: ref * chip.bf16_flops_per_s
              / chip.int8_ops_per_s),
             ("ch04_transformers", "ch04-q8", "ch04-q8-deepseek-batch", "chip", lambda ref, chip: ref
              * chip.int8_ops_per_s / chip.bf16_flops_per_s)]


@pytest.mark.parametrize(("chapter", "setting", "qid", "field", "int8"), INT8_PEAK, ids=[c[2] for c in INT8_PEAK])
def test_a_factor_of_two_that_the_int8_peak_gives_too_is_told_as_one_possible_cause(chapter, setting, qid, field,
                                                                                     int8):
    """On a chip whose int8 rate is twice its bf16 rate, the int8 peak used for a bf16 product lands on a declared
    factor-of-2 slip, whose hint named another cause as the student's ("a multiply-add is 2 FLOPs"). There it is told
    as one possible cause; on a chip whose two rates are equal, the hint stays the cause."""
    s = next(s for s in load_chapter(chapter).settings if s.name == setting)
    told = set()
    for combo in s.combos():
        chip = combo[field]
        q = next(q for q in s.build(**combo) if q.qid == qid)
        answer = int8(q.reference, chip)
        if chip.int8_ops_per_s == chip.bf16_flops_per_s:
            continue  # the int8 peak is the bf16 one: right, and no slip
        v = judge(q, recorded(q, answer))
        assert not v.ok and "one possible cause" in v.message, (chip.name, v.message)
        told.add(chip.name)
    assert told


def test_symbols_a_cell_made_numbers_are_named_by_the_self_check():
    """A program prompt states its sizes in the book's letters ("B = 16, D = 64, F = 256"); copied into a cell, they
    turn the next formula's B, D and F into numbers, and "depends on B and D and F; yours does not" sent a student
    who typed all three looking for another mistake. The self-check names the numbers and the import that mends it;
    a formula that lacks a symbol with the name still a symbol is told nothing more."""
    from course.answers import AnswerError, check
    from course.symbols import D, F

    namespace = {"check": check, "X": X, "D": D, "F": F}
    code = "B, D, F = 16, 64, 256\ncheck('ch04-cx6-flops-per-device', 4 * B * D * F / X)"
    with pytest.raises(AnswerError) as shadowed:
        exec(code, namespace)
    assert "B = 16, D = 64, F = 256" in str(shadowed.value) and "from course.symbols import B, D, F" in str(
        shadowed.value), shadowed.value
    with pytest.raises(AnswerError) as forgotten:
        exec("check('ch04-cx6-flops-per-device', 4 * D * F / X)", {"check": check, "X": X, "D": D, "F": F, "B": B})
    assert "depends on B" in str(forgotten.value) and "In this notebook" not in str(forgotten.value)


def test_a_missing_symbol_no_cell_put_a_number_in_is_told_nothing_of_the_notebook():
    """B = 16 set in a cell, then B left out of a formula for another reason (as text, read with the course's symbols
    whatever the notebook's names hold, or as an expression whose numbers 16 divides none of): the sentence about
    names made numbers would send the student after a cause they do not have."""
    from course.answers import AnswerError, check
    from course.symbols import C, D, F

    for code in ("check('ch05-e2-dp-t-math', '8*D*F/(X*C)')", "check('ch05-e2-dp-t-math', 8*D*F/(X*C))"):
        with pytest.raises(AnswerError) as e:
            exec("B = 16\n" + code, {"check": check, "X": X, "C": C, "D": D, "F": F})
        assert "depends on B" in str(e.value) and "In this notebook" not in str(e.value), e.value
