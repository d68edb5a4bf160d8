"""One collective that does the work of several of its kind: the same plan with fewer launches.

Gathering two weights in one all_gather (stacked), or reduce-scattering two gradients together, moves the same
bytes over the same axes as the model's two collectives, and XLA's own combiners do the same. Such a program
earns full marks, in the grader and the self-check alike, where it runs fewer collectives of a kind than the
model, every one of them over axes the model runs that kind over, and its bytes of the kind within the model's
(``programs.judge_report``). A fused program that moves more bytes, one whose collective runs over other axes, and
one that runs more collectives than the model are judged as before: half marks, with the counts; and a sentence
about counts never calls a program wasteful. The judges draw random float inputs themselves, from their seeds."""

import dataclasses
import math

import jax
import jax.numpy as jnp
import pytest
from jax.sharding import PartitionSpec as P

import course
from autograder import kinds, model_traffic
from autograder.collectives import Collective, traffic
from autograder.kinds import program
from autograder.meshes import mesh
from autograder.programs import judge_report, run
from autograder.questions import load_chapter
from tests.chapter_checks import both_judges, printed, recorded

CH04, CH05, CH06, CH10, CH11 = (load_chapter(n) for n in ("ch04_transformers", "ch05_training",
                                                          "ch06_applied_training", "ch10_jax", "ch11_capstone"))
FSDP_MLP, FSDP_FWD = CH04["ch04-cx8-fsdp-mlp"], CH05["ch05-cx2-fsdp-forward"]
MIX_FWD, MIX_STEP = CH05["ch05-cx4-fsdp-tp-forward"], CH05["ch05-cx4-fsdp-tp-step"]
TP_MLP, PODS, BUDGET = CH06["ch06-cx3-fsdp-tp-mlp"], CH06["ch06-cx4-multipod-grad"], CH06["ch06-cx7-budget-step"]
STACK = CH06["ch06-cx6-fsdp-layers-step"]
MOE, C4 = CH10["ch10-q2-moe-all-gather"], CH11["ch11-c4-fsdp-tp-mlp"]


def _gather(blocks, axis_name):
    """Several blocks of one shape stacked, gathered in one tiled all_gather along their first axis: [n, ...]."""
    return jax.lax.all_gather(jnp.stack(blocks), axis_name, axis=1, tiled=True)


# --- honest fused programs: the model's bytes, fewer collectives ----------------------------------------------

def fsdp_mlp_fused(x, w_in, w_out):
    """W_in[D, F_X] and W_out[F_X, D] gathered together: one all_gather of [2, F/X, D] over X."""
    def block(x_block, w_in_block, w_out_block):  # f32[B/X, D], f32[D, F/X], f32[F/X, D]
        both = _gather([w_in_block.T, w_out_block], "X")  # f32[2, F, D]
        return jnp.maximum(x_block @ both[0].T, 0.0) @ both[1]  # f32[B/X, D]
    return jax.shard_map(block, mesh=course.mesh(X=8), in_specs=(P("X", None), P(None, "X"), P("X", None)),
                         out_specs=P("X", None))(x, w_in, w_out)


def fsdp_forward_fused(x, w_in, w_out):
    """W_in[D_X, F] and W_out[F, D_X] gathered together: one all_gather of [2, D/X, F] over X."""
    def block(x_block, w_in_block, w_out_block):  # f32[B/X, D], f32[D/X, F], f32[F, D/X]
        both = _gather([w_in_block, w_out_block.T], "X")  # f32[2, D, F]
        return (x_block @ both[0]) @ both[1].T
    return jax.shard_map(block, mesh=course.mesh(X=8), in_specs=(P("X", None), P("X", None), P(None, "X")),
                         out_specs=P("X", None))(x, w_in, w_out)


def fsdp_tp_forward_fused(x, w_in, w_out):
    """In gathered over Y, both weights over X in one all_gather, Out's partial sums reduce-scattered over Y."""
    def block(x_block, w_in_block, w_out_block):  # f32[B/X, D/Y], f32[D/X, F/Y], f32[F/Y, D/X]
        x_rows = jax.lax.all_gather(x_block, "Y", axis=1, tiled=True)  # f32[B/X, D]
        both = _gather([w_in_block, w_out_block.T], "X")  # f32[2, D, F/Y]
        partial = (x_rows @ both[0]) @ both[1].T  # f32[B/X, D]{U_Y}
        return jax.lax.psum_scatter(partial, "Y", scatter_dimension=1, tiled=True)
    return jax.shard_map(block, mesh=course.mesh(X=4, Y=2), in_specs=(P("X", "Y"), P("X", "Y"), P("Y", "X")),
                         out_specs=P("X", "Y"))(x, w_in, w_out)


def fsdp_tp_step_fused(x, w_in, w_out):
    """The step with both weights gathered in one all_gather: autodiff makes their gradients one reduce-scatter."""
    def block(x_block, w_in_block, w_out_block):
        def loss(wi, wo):
            x_rows = jax.lax.all_gather(x_block, "Y", axis=1, tiled=True)
            both = _gather([wi, wo.T], "X")
            partial = jnp.maximum(x_rows @ both[0], 0.0) @ both[1].T
            out = jax.lax.psum_scatter(partial, "Y", scatter_dimension=1, tiled=True)
            return jax.lax.psum(jnp.sum(out**2), ("X", "Y")) / (2 * x.shape[0])
        value, (d_in, d_out) = jax.value_and_grad(loss, argnums=(0, 1))(w_in_block, w_out_block)
        return value, d_in, d_out
    return jax.shard_map(block, mesh=course.mesh(X=4, Y=2), in_specs=(P("X", "Y"), P("X", "Y"), P("Y", "X")),
                         out_specs=(P(), P("X", "Y"), P("Y", "X")))(x, w_in, w_out)


def fsdp_tp_mlp_fused(x, w_in, w_out):
    """Chapter 6's MLP: both weights gathered over X in one all_gather, the F_Y partial sums psummed over Y."""
    def block(x_block, w_in_block, w_out_block):  # f32[B/X, D], f32[D/X, F/Y], f32[F/Y, D/X]
        both = _gather([w_in_block, w_out_block.T], "X")  # f32[2, D, F/Y]
        hidden = jnp.maximum(x_block @ both[0], 0.0)  # f32[B/X, F/Y]
        return jax.lax.psum(hidden @ both[1].T, "Y")
    return jax.shard_map(block, mesh=course.mesh(X=2, Y=4), in_specs=(P("X", None), P("X", "Y"), P("Y", "X")),
                         out_specs=P("X", None))(x, w_in, w_out)


def multipod_grad_fused(x, g, w_out):
    """In and dOut gathered over Y in one all_gather; W_out over X; dW_in reduce-scattered over X, summed over Z."""
    def block(x_block, g_block, w_out_block):  # f32[B/ZX, D/Y] twice, f32[F/Y, D/X]
        rows = jax.lax.all_gather(jnp.stack([x_block, g_block]), "Y", axis=2, tiled=True)  # f32[2, B/ZX, D]
        w_out_rows = jax.lax.all_gather(w_out_block, "X", axis=1, tiled=True)  # f32[F/Y, D]
        partial = rows[0].T @ (rows[1] @ w_out_rows.T)  # f32[D, F/Y]
        return jax.lax.psum(jax.lax.psum_scatter(partial, "X", scatter_dimension=0, tiled=True), "Z")
    return jax.shard_map(block, mesh=course.mesh(Z=2, X=2, Y=2),
                         in_specs=(P(("Z", "X"), "Y"), P(("Z", "X"), "Y"), P("Y", "X")),
                         out_specs=P("X", "Y"))(x, g, w_out)


def budget_step_fused(x, w_in, w_out, *, X=2, Y=4):
    """The budget step with the weights gathered together, and so their gradients reduce-scattered together."""
    def block(x_block, w_in_block, w_out_block):
        def loss(wi, wo):
            both = _gather([wi, wo.T], "X")  # f32[2, D, F/Y]
            out = jax.lax.psum(jnp.maximum(x_block @ both[0], 0.0) @ both[1].T, "Y")
            return jax.lax.psum(jnp.sum(out**2), "X") / (2 * x.shape[0])
        value, (d_in, d_out) = jax.value_and_grad(loss, argnums=(0, 1))(w_in_block, w_out_block)
        return value, d_in, d_out
    return jax.shard_map(block, mesh=course.mesh(X=X, Y=Y), in_specs=(P("X", None), P("X", "Y"), P("Y", "X")),
                         out_specs=(P(), P("X", "Y"), P("Y", "X")))(x, w_in, w_out)


def moe_fused(x, gates, w):
    """Tokens and their gates side by side in one all_gather, then each device's experts and one reduce-scatter."""
    def block(x_block, g_block, w_block):  # f32[S/X, D], f32[S/X, E], f32[E/X, D, F]
        both = jax.lax.all_gather(jnp.concatenate([x_block, g_block], axis=1), "X", tiled=True)  # f32[S, D + E]
        xs, gs = both[:, :x_block.shape[1]], both[:, x_block.shape[1]:]
        n = w_block.shape[0]
        mine = jax.lax.dynamic_slice_in_dim(gs, jax.lax.axis_index("X") * n, n, 1)  # f32[S, E/X]
        return jax.lax.psum_scatter(jnp.einsum("se,sd,edf->sf", mine, xs, w_block), "X", scatter_dimension=0,
                                    tiled=True)
    return jax.shard_map(block, mesh=course.mesh(X=8), in_specs=(P("X", None), P("X", None), P("X", None, None)),
                         out_specs=P("X", None))(x, gates, w)


HONEST = [(FSDP_MLP, fsdp_mlp_fused), (FSDP_FWD, fsdp_forward_fused), (MIX_FWD, fsdp_tp_forward_fused),
          (MIX_STEP, fsdp_tp_step_fused), (TP_MLP, fsdp_tp_mlp_fused), (PODS, multipod_grad_fused),
          (MOE, moe_fused), (C4, fsdp_tp_forward_fused)]


@pytest.mark.parametrize(("q", "fn"), HONEST, ids=[q.qid for q, _ in HONEST])
def test_a_fused_program_moving_the_models_bytes_earns_full_marks_in_both_judges(q, fn):
    graded, checked = both_judges(q, fn)
    assert (graded.score, graded.diagnosis) == (1.0, "correct"), graded.message
    assert (checked.score, checked.diagnosis) == (1.0, "correct"), checked.message
    assert "waste" not in graded.message.lower()


# --- still refused ------------------------------------------------------------------------------------------

def fsdp_forward_fused_twice(x, w_in, w_out):
    """One all_gather, but of each weight twice over: twice the model's bytes."""
    def block(x_block, w_in_block, w_out_block):
        both = _gather([w_in_block, w_out_block.T, w_in_block, w_out_block.T], "X")  # f32[4, D, F]
        return (x_block @ (both[0] + both[2]) / 2) @ ((both[1] + both[3]) / 2).T
    return jax.shard_map(block, mesh=course.mesh(X=8), in_specs=(P("X", None), P("X", None), P(None, "X")),
                         out_specs=P("X", None))(x, w_in, w_out)


def fsdp_mlp_fused_with_tokens(x, w_in, w_out):
    """The weights in one all_gather, and the whole batch in another: the model's two, and many more bytes."""
    def block(x_block, w_in_block, w_out_block):
        both = _gather([w_in_block.T, w_out_block], "X")
        tokens = jax.lax.all_gather(x_block, "X", tiled=True)  # f32[B, D]: every device's tokens, for nothing
        out = jnp.maximum(tokens @ both[0].T, 0.0) @ both[1]
        return jax.lax.dynamic_slice_in_dim(out, jax.lax.axis_index("X") * x_block.shape[0], x_block.shape[0], 0)
    return jax.shard_map(block, mesh=course.mesh(X=8), in_specs=(P("X", None), P(None, "X"), P("X", None)),
                         out_specs=P("X", None))(x, w_in, w_out)


def fsdp_forward_in_halves(x, w_in, w_out):
    """The model's bytes in three all_gathers (W_in in two halves): more collectives than the model's."""
    def block(x_block, w_in_block, w_out_block):
        half = w_in_block.shape[1] // 2
        left = jax.lax.all_gather(w_in_block[:, :half], "X", axis=0, tiled=True)
        right = jax.lax.all_gather(w_in_block[:, half:], "X", axis=0, tiled=True)
        w_out_full = jax.lax.all_gather(w_out_block, "X", axis=1, tiled=True)
        return (x_block @ jnp.concatenate([left, right], axis=1)) @ w_out_full
    return jax.shard_map(block, mesh=course.mesh(X=8), in_specs=(P("X", None), P("X", None), P(None, "X")),
                         out_specs=P("X", None))(x, w_in, w_out)


REFUSED = [(FSDP_FWD, fsdp_forward_fused_twice, "collectives:all-gather"),
           (FSDP_MLP, fsdp_mlp_fused_with_tokens, "traffic:all-gather"),
           (FSDP_FWD, fsdp_forward_in_halves, "collectives:all-gather")]


@pytest.mark.parametrize(("q", "fn", "diagnosis"), REFUSED, ids=[fn.__name__ for _, fn, _ in REFUSED])
def test_fused_programs_that_move_more_or_run_more_collectives_keep_half_marks(q, fn, diagnosis):
    graded, checked = both_judges(q, fn)
    assert (graded.score, graded.diagnosis) == (0.5, diagnosis), graded.message
    assert (checked.score, checked.diagnosis) == (0.5, diagnosis), checked.message


def test_fewer_gathers_moving_fewer_bytes_are_no_fusion():
    """Chapter 6's layer stack gathering each layer once, not again in the backward pass: half the model's gathers and
    bytes, gathered layers kept alive. Judged by its count, as before (its message adds the memory it holds)."""
    from solutions.ch06_applied_training import fsdp_layers_step_keeps_gathered

    graded, checked = both_judges(STACK, fsdp_layers_step_keeps_gathered)
    for v in (graded, checked):
        assert (v.score, v.diagnosis) == (0.5, "collectives:all-gather,all-reduce,reduce-scatter"), v.message


def test_a_sentence_about_counts_never_calls_the_program_wasteful():
    """Three all_gathers moving exactly the model's bytes: refused for the count, and the sentence says only that,
    with the fewer, fused, gathers that are right too."""
    graded, checked = both_judges(FSDP_FWD, fsdp_forward_in_halves)
    for v in (graded, checked):
        assert "expected 2 all-gather (or fewer of a kind, each carrying several arrays" in v.message, v.message
        assert not any(w in v.message.lower() for w in ("waste", "x the bytes", "more bytes")), v.message


# --- the rule itself, on one fused program's report --------------------------------------------------------------

def _fused_report(q):
    seed = program.input_seed("fused", q.qid)
    return run(q.spec, {FSDP_FWD.qid: fsdp_forward_fused, TP_MLP.qid: fsdp_tp_mlp_fused}[q.qid], seed,
               make_mesh=mesh), seed


def _judged(q, report, seed, traffic="model"):
    model = model_traffic.at(model_traffic.expected(q), q.spec) if traffic == "model" else traffic
    return judge_report(q.spec, report, seed, model)


def test_the_fused_report_is_correct_against_the_models_traffic():
    report, seed = _fused_report(TP_MLP)
    assert report.census == {"all-gather": 1, "all-reduce": 1}
    assert _judged(TP_MLP, report, seed).ok


def test_a_fused_collective_over_an_axis_the_model_does_not_gather_over_is_refused():
    """The same report, its one all_gather moved to Y (where the model only sums): the count decides, as before."""
    report, seed = _fused_report(TP_MLP)
    moved = tuple(dataclasses.replace(c, axes=("Y",)) if c.kind == "all-gather" else c for c in report.collectives)
    v = _judged(TP_MLP, dataclasses.replace(report, collectives=moved), seed)
    assert (v.score, v.diagnosis) == (0.5, "collectives:all-gather,all-reduce"), v.message


def test_a_kind_left_out_altogether_is_no_fusion():
    """Right numbers with no all-reduce where the model runs one (the report's psum left out of its reading)."""
    report, seed = _fused_report(TP_MLP)
    kept = tuple(c for c in report.collectives if c.kind != "all-reduce")
    v = _judged(TP_MLP, dataclasses.replace(report, collectives=kept, census={"all-gather": 1}), seed)
    assert (v.score, v.diagnosis) == (0.5, "collectives:all-gather"), v.message


def test_without_the_models_traffic_the_count_decides():
    report, seed = _fused_report(FSDP_FWD)
    v = _judged(FSDP_FWD, report, seed, traffic=None)
    assert (v.score, v.diagnosis) == (0.5, "collectives:all-gather"), v.message


def test_a_fused_collective_in_a_loop_of_unknown_length_is_not_weighed_as_fused():
    report, seed = _fused_report(FSDP_FWD)
    unknown = tuple(dataclasses.replace(c, count=None) for c in report.collectives)
    v = _judged(FSDP_FWD, dataclasses.replace(report, collectives=unknown), seed)
    assert (v.score, v.diagnosis) == (0.5, "collectives:all-gather"), v.message


def test_the_model_records_the_axes_each_kind_runs_over():
    stored = model_traffic.at(model_traffic.expected(TP_MLP), TP_MLP.spec)
    assert stored["all-gather over X"] == stored["all-gather"] > 0
    assert stored["all-reduce over Y"] == stored["all-reduce"] > 0
    assert not any(k.startswith("all-gather over Y") for k in stored)


def test_a_collective_over_no_axis_is_named_so():
    from autograder.collectives import traffic

    assert traffic([Collective("all-reduce", (), "f32", (4,), 1, 1)]) == {"all-reduce": 0.0,
                                                                          "all-reduce over no axis": 0.0}


def test_the_selfcheck_data_holds_the_same_traffic_as_the_grader():
    assert printed(FSDP_FWD)["traffic"] == model_traffic.expected(FSDP_FWD)
    assert kinds.selfcheck_live(printed(FSDP_FWD), FSDP_FWD.qid, fsdp_forward_fused,
                                recorded(FSDP_FWD, fsdp_forward_fused)).ok


def test_a_fused_step_is_still_held_to_the_memory_bound():
    """Chapter 6's budget step with its weights stacked to be gathered together: the count is forgiven, but the
    stacked copies hold more than the exercise allows at this shape, and the memory check says so."""
    graded, checked = both_judges(BUDGET, budget_step_fused)
    assert (graded.score, graded.diagnosis) == (checked.score, checked.diagnosis) == (0.5, "memory"), graded.message


# --- a fused kind moves the model's bytes: none fewer, and each over the axes the model moves them over ---------

def _stack_kept_for(k):
    """Chapter 6's layer stack with its first ``k`` layers not checkpointed: each of them gathered once and kept alive
    for the backward pass, the rest gathered again there. 2L - k gathers moving (2L - k) / 2L of the model's bytes."""
    from solutions.ch06_applied_training import _stack_layer, _stack_step

    def loss(xb, ws):
        h, _ = jax.lax.scan(_stack_layer, xb, ws[:k])
        h, _ = jax.lax.scan(jax.checkpoint(_stack_layer), h, ws[k:])
        return jax.lax.psum(jnp.sum(h**2), "X") / (2 * 64)
    return _stack_step(loss)


def test_a_few_gathered_layers_kept_alive_are_no_fusion():
    """Three layers kept: 29 of the model's 32 gathers, 29/32 of its bytes, and under the memory bound. Fusing moves
    the same bytes, so the count decides."""
    graded, checked = both_judges(STACK, _stack_kept_for(3))
    for v in (graded, checked):
        assert (v.score, v.diagnosis) == (0.5, "collectives:all-gather,all-reduce,reduce-scatter"), v.message


def test_a_fused_kind_a_hair_short_of_the_models_bytes_is_refused_and_one_at_them_passes():
    """Fusing moves the same bytes: one element fewer than the model's is another plan (the count decides)."""
    report, seed = _fused_report(FSDP_FWD)
    model = model_traffic.at(model_traffic.expected(FSDP_FWD), FSDP_FWD.spec)
    (gather,) = report.collectives
    m = model["all-gather"] / (4 * (gather.group_size - 1))  # f32 elements of the operand that moves exactly those
    assert m == int(m)
    for elements, ok in ((int(m) - 1, False), (int(m), True)):
        flat = dataclasses.replace(gather, dtype="f32", operand_shape=(elements,))
        v = _judged(FSDP_FWD, dataclasses.replace(report, collectives=(flat,)), seed, model)
        assert v.ok is ok, (elements, v.message)


def test_a_fused_kind_may_not_move_bytes_from_one_axis_to_another():
    """Chapter 5's forward pass, fused (x gathered over Y, both weights over X): a tenth of the X gather's bytes moved
    onto the Y gather, the kind's total unchanged. Each axis set keeps the model's own bytes."""
    report, seed = _run_fused(MIX_FWD, fsdp_tp_forward_fused)
    model = model_traffic.at(model_traffic.expected(MIX_FWD), MIX_FWD.spec)
    assert _judged(MIX_FWD, report, seed, model).ok
    shifted = 0.1 * model["all-gather over X"]
    out = []
    for c in report.collectives:
        if c.kind == "all-gather":
            want = model[f"all-gather over {'+'.join(c.axes)}"] + (shifted if c.axes == ("Y",) else -shifted)
            c = dataclasses.replace(c, dtype="f32", operand_shape=(round(want / 4 / (c.group_size - 1)),))
        out.append(c)
    v = _judged(MIX_FWD, dataclasses.replace(report, collectives=tuple(out)), seed, model)
    assert (v.score, v.diagnosis) == (0.5, "collectives:all-gather,reduce-scatter"), v.message


def test_a_fused_collective_over_a_subgroup_of_its_axes_is_refused():
    """One all_gather among groups of 4 of X's 8 devices, labelled "over X" like one of all 8, its operand grown so
    that its bytes are the model's: a subgroup of X is not X."""
    report, seed = _fused_report(FSDP_FWD)
    model = model_traffic.at(model_traffic.expected(FSDP_FWD), FSDP_FWD.spec)
    (gather,) = report.collectives
    sub = dataclasses.replace(gather, dtype="f32", group_size=4, operand_shape=(math.ceil(model["all-gather"] / 12),))
    assert model["all-gather"] <= traffic((sub,))["all-gather"] <= 1.01 * model["all-gather"]
    v = _judged(FSDP_FWD, dataclasses.replace(report, collectives=(sub,)), seed, model)
    assert (v.score, v.diagnosis) == (0.5, "collectives:all-gather"), v.message


def _run_fused(q, fn):
    seed = program.input_seed("fused", q.qid)
    return run(q.spec, fn, seed, make_mesh=mesh), seed
