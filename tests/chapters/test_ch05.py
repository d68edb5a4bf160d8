"""Chapter 5 (Parallel training): the syllabus's formulas, and the program questions' models
as the collective inspector sees them
(test_every_chapter.py runs the records, the book's answers and the syllabus's)."""

import re

import jax
import numpy as np
import pytest
import sympy as sp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import course
import solutions.ch05_training as ch05
from autograder.questions import load_chapter
from autograder.verdict import Status
from course import comms
from tests.chapter_checks import assert_size, both_judges, program_inputs

pytestmark = pytest.mark.ch05
CHAPTER = load_chapter("ch05_training")


def test_chapter_size():
    assert_size(CHAPTER, 50, programs=(4, 8))


# --- the formulas are the syllabus's ---------------------------------------------------------------

def test_formulas_are_the_syllabus_formulas():
    C, W, F, B, N = (sp.Symbol(n, positive=True) for n in "CWFBN")
    assert sp.simplify(ch05.DP_BOUND - C / W) == 0
    assert sp.simplify(ch05.FSDP_BOUND - C / (ch05.M_X * W)) == 0
    assert sp.simplify(ch05.TP_MAX_Y - ch05.M_Y * F * W / C) == 0
    assert sp.simplify(ch05.X_OPT - sp.sqrt(B * N * ch05.M_X / (F * ch05.M_Y))) == 0
    assert sp.simplify(ch05.MIX_BOUND - (C / W) ** 2 / (ch05.M_X * ch05.M_Y * F)) == 0


@pytest.mark.parametrize("probe", ch05.MESH_PROBES[:3], ids=["e9", "q3", "part6"])
def test_choose_mesh_reproduces_the_book(probe):
    assert ch05.choose_mesh(**probe) == {0: (16, 4), 1: (1024, 4), 2: (2048, 4)}[ch05.MESH_PROBES.index(probe)]


def test_forward_time_thresholds():
    """At the per-chip bound of each scheme, compute and communication take equally long."""
    f, D, F = ch05.forward_time, 8192.0, 32_768.0
    args = dict(D=D, F=F, C=ch05.PEAK, W=ch05.ICI)
    b = ch05.value(ch05.FSDP_BOUND, M_X=3)
    assert f(b, X=4096, Y=1, M_X=3, M_Y=1, **args) == pytest.approx(4 * b * D * F / ch05.PEAK)
    assert f(0.9 * b, X=4096, Y=1, M_X=3, M_Y=1, **args) > 4 * 0.9 * b * D * F / ch05.PEAK
    b = ch05.value(ch05.MIX_BOUND, F=F, M_X=2, M_Y=1)
    x = ch05.value(ch05.X_OPT, B=b * 4096, N=4096, F=F, M_X=2, M_Y=1)
    t = f(b, X=x, Y=4096 / x, M_X=2, M_Y=1, **args)
    assert t == pytest.approx(4 * b * D * F / ch05.PEAK)


# --- the programs' models, as the collective inspector sees them ----------------------------------

# (What the inspector reports of each model: tests/chapters/inspected.json.)


def test_extra_psum_is_exactly_the_axis_size():
    """The trap, measured: a psum after autodiff multiplies the replicated gradient by 8."""
    args = program_inputs(CHAPTER["ch05-cx1-dp-grad"])
    right, doubled = np.asarray(ch05.dp_grad(*args)), np.asarray(ch05.dp_grad_extra_psum(*args))
    assert np.allclose(doubled, 8 * right, rtol=1e-5, atol=1e-3)


def test_gathering_the_batch_moves_more_bytes_than_the_allreduce():
    """Why the batch-gathering data-parallel program is the wasteful one at these shapes."""
    args = program_inputs(CHAPTER["ch05-cx1-dp-grad"])
    (reduce,) = comms.inspect(ch05.dp_grad, *args)
    gathers = comms.inspect(ch05.dp_grad_gathers_batch, *args)
    assert sum(c.bytes_per_device * c.count for c in gathers) >= 4 * reduce.bytes_per_device


def test_tp_backward_needs_only_the_forward_allreduce():
    """The backward pass of the tensor-parallel step adds no collective: dOut is the same on every device
    after the forward's AllReduce, and each device's columns of dW_in are local matmuls."""
    q = CHAPTER["ch05-cx3-tp-backward"]
    args = program_inputs(q)
    (reduce,) = comms.inspect(ch05.tp_backward, *args)
    assert (reduce.kind, reduce.count, reduce.operand_shape) == ("all-reduce", 1, (64, 64))


def test_gpipe_sends_one_handoff_per_tick():
    """8 stages, 8 microbatches: 15 ticks, a hand-off after all but the last (14) and 7 moves of finished
    microbatches down to their devices."""
    (permutes,) = comms.inspect(ch05.gpipe_forward, *program_inputs(CHAPTER["ch05-cx5-gpipe"]))
    stages = micro = 8
    ticks = micro + stages - 1
    assert (permutes.kind, permutes.count) == ("collective-permute", (ticks - 1) + (stages - 1))


# --- E1: what counts per parameter, and the honest other readings --------------------------------------


def test_e1_says_what_counts_and_hints_the_other_readings():
    """E1 counts 2 + 4 + 4 bytes per parameter, gradients not kept (the syllabus: 10 B/param), and the prompt says
    so. Counting bf16 gradients too (12 bytes) or the chip's GB as GiB is refused with a hint at every chip."""
    setting = CHAPTER.setting_of("ch05-e1-dp-max-params")
    for combo in setting.combos():
        (q,) = [q for q in setting.build(**combo) if q.qid == "ch05-e1-dp-max-params"]
        assert "gradients not kept" in q.prompt and "2 + 4 + 4 bytes" in q.prompt, q.prompt
        hbm = combo["chip"].hbm_bytes
        for answer, words in ((hbm / 12, "gradients"), (hbm / 1e9 * 2**30 / 10, "GB")):
            for v in both_judges(q, answer):
                assert not v.ok and "Hint:" in v.message and words in v.message.split("Hint:")[1], (combo, v.message)


# --- each formula takes the symbols its prompt works in ------------------------------------------------

MESH_SYMBOLS = ("N", "X", "Y", "M_X", "M_Y")  # the notation's N = X*Y chips and the axes they span


@pytest.mark.parametrize("q", [q for q in CHAPTER.questions if q.kind == "formula" and q.qid.startswith("ch05-e")],
                         ids=lambda q: q.qid)
def test_a_formula_declares_only_the_mesh_symbols_its_prompt_uses(q):
    """Pure data parallelism over X chips has no N: a student who writes the chip count as the notation's N must be
    told that this question does not take N, not that the answer "should not depend on N", which is false."""
    used = {s.name for s in sp.sympify(q.reference).free_symbols}
    stray = [n for n in MESH_SYMBOLS if n in q.names and n not in used
             and not re.search(rf"(?<![\w]){re.escape(n)}(?![\w])", q.prompt)]
    assert not stray, f"{q.qid} declares {stray}, which its prompt never uses"


def test_the_chip_count_written_as_n_is_named_an_unknown_symbol():
    q = CHAPTER["ch05-e2-dp-t-math"]
    for v in both_judges(q, "8*B*D*F/(C*N)"):
        assert v.status is Status.INVALID and v.diagnosis == "unknown_name", v
        assert "'N'" in v.message and "X" in v.message.split("use only")[1], v.message


# --- a bound derived from the exact ring time is right, as the time it comes from is ------------------------------

B, C, D, F, W, X, Y, M_X, M_Y = ch05.B, ch05.C, ch05.D, ch05.F, ch05.W, ch05.X, ch05.Y, ch05.M_X, ch05.M_Y
# (time question, its exact ring form, the question derived from it, the derivation as the notebook's cells do it)
CHAINS = [
    ("ch05-e2-dp-t-comms", 8 * D * F * (X - 1) / (X * W), "ch05-e2-dp-bound",
     lambda t: sp.solve(sp.Eq(8 * B * D * F / (X * C), t), B)[0] / X),
    ("ch05-e3-fsdp-t-comms", 4 * D * F * (X - 1) / (X * W), "ch05-e3-fsdp-bound",
     lambda t: sp.solve(sp.Eq(4 * B * D * F / (X * C), t.subs(W, M_X * W)), B)[0] / X),
    ("ch05-e6-tp-t-comms", 4 * B * D * (Y - 1) / (Y * W), "ch05-e6-tp-max-y",
     lambda t: sp.solve(sp.Eq(4 * B * D * F / (Y * C), t.subs(W, M_Y * W)), Y)[0]),
]


@pytest.mark.parametrize(("time_qid", "exact", "bound_qid", "derive"), CHAINS, ids=[c[2] for c in CHAINS])
def test_a_bound_derived_from_the_exact_time_is_right(time_qid, exact, bound_qid, derive):
    """The time questions accept the exact ring's (X-1)/X; a student who kept it and solved for the bound, as the
    notebook's cells do, scored 0 on the bound ("depends on X, but the answer should not"; for FSDP "'X' is not one
    of this question's symbols"; for E6 "the lower-order terms differ"). A bound derived from a wrong time still
    fails: twice the ring's time, or its factor upside down."""
    assert all(v.ok for v in both_judges(CHAPTER[time_qid], exact))
    bound = CHAPTER[bound_qid]
    for v in both_judges(bound, derive(exact)):
        assert v.ok and v.diagnosis == "correct", (bound_qid, v.message)
    ring = (X - 1) / X if "X" in str(exact) else (Y - 1) / Y
    for wrong in (2 * exact, exact / ring**2):
        for v in both_judges(bound, derive(wrong)):
            assert not v.ok, (bound_qid, wrong, v.message)


def tp_backward_in_halves(x, w_in, w_out):
    """CX3's backward the way sequence parallelism writes it: the partial outputs reduce-scattered over tokens, each
    device squaring its own rows, the scalar losses summed; autodiff gathers in the backward pass."""
    def block(xf, a, b):
        def loss(w):
            mine = jax.lax.psum_scatter(jax.numpy.maximum(xf @ w, 0.0) @ b, "X", scatter_dimension=0, tiled=True)
            return jax.lax.psum(jax.numpy.sum(mine**2), "X") / (2 * xf.shape[0])
        return jax.grad(loss)(a)
    return jax.shard_map(block, mesh=course.mesh(X=8), in_specs=(P(), P(None, "X"), P("X", None)),
                         out_specs=P(None, "X"))(x, w_in, w_out)


def test_an_all_reduce_written_in_halves_is_told_so():
    """The all-reduce CX3's backward asks for, written as a reduce-scatter and an all-gather of the same bytes, keeps
    half (the question teaches that the forward's one all-reduce is all a tensor-parallel step needs); the message
    said only "1 x all-gather ...; 1 x reduce-scatter ...; expected 1 all-reduce", as if the program moved more."""
    for v in both_judges(CHAPTER["ch05-cx3-tp-backward"], tp_backward_in_halves):
        assert v.score == 0.5 and v.diagnosis.startswith("collectives:"), v
        assert "all-reduce in two halves" in v.message and "same bytes" in v.message, v.message
    for v in both_judges(CHAPTER["ch05-cx3-tp-backward"], ch05.tp_backward_gathers_weights):
        assert "two halves" not in v.message, v.message  # two weights gathered: no all-reduce's halves


def fsdp_tp_step_by_jit(x, w_in, w_out):
    """CX4c's step written with jit and sharding constraints alone: XLA places every collective."""
    mesh = course.mesh(X=4, Y=2)

    @jax.jit
    def step(x, a, b):
        loss = lambda a, b: jax.numpy.sum((jax.numpy.maximum(x @ a, 0) @ b) ** 2) / (2 * x.shape[0])  # noqa: E731
        value, (da, db) = jax.value_and_grad(loss, argnums=(0, 1))(a, b)
        return (value, jax.lax.with_sharding_constraint(da, NamedSharding(mesh, P("X", "Y"))),
                jax.lax.with_sharding_constraint(db, NamedSharding(mesh, P("Y", "X"))))
    return step(x, w_in, w_out)


def test_a_step_whose_collectives_the_compiler_placed_is_told_so_whatever_their_count():
    """A jit step that writes no collective was told so where the compiler's counts matched the question's, and was
    given the counts alone ("4 all-gather, 2 all-reduce; expected ...") where they did not: both are told that the
    compiler placed them and that the question asks for them inside shard_map."""
    for v in both_judges(CHAPTER["ch05-cx4-fsdp-tp-step"], fsdp_tp_step_by_jit):
        assert (v.score, v.diagnosis) == (0.5, "collectives:placed"), v
        assert "your program writes no collective" in v.message and "shard_map" in v.message, v.message
