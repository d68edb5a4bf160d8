"""Programs with several results (a training step's loss and gradients) and programs judged on the memory
they hold per device: each result is diagnosed by name, the gradients before the loss, a layout that holds
more than the exercise allows earns partial credit, and reports survive the trip from the jailed runner."""

import jax
import jax.numpy as jnp
import pytest
from jax.sharding import PartitionSpec as P

from autograder.messages import _PROGRAM
from autograder.programs import (
    export,
    judge_report,
    report_from_json,
    report_to_json,
    run,
    run_exported,
    wrong_numbers,
)
from autograder.questions import AuthoringError, Operand, ProgramSpec
from autograder.verdict import Status
from course.devices import mesh

B, D, F = 64, 16, 32
# The loss mean_b sum(mlp(x)^2) / 2 and its two gradients, data parallel over 8 devices.
STEP = ProgramSpec(mesh=(("X", 8),), einsum="a training step of the MLP", reference="mlp_train_step",
                   outputs=("loss", "dW_in", "dW_out"),
                   operands=(Operand((B, D), ("X", None)), Operand((D, F), (None, None)),
                             Operand((F, D), (None, None))),
                   out_spec=((), (), ()), collectives={"all-reduce": (1, 3)}, rtol=1e-3, atol=1e-3)


def step_with(mean_over: int | None = None, returns: str = "all"):
    """A data-parallel step; ``mean_over`` divides each device's loss by its own token count (the slip)."""
    def block(x, w_in, w_out):
        def loss(a, b):
            local = jnp.sum((jnp.maximum(x @ a, 0.0) @ b) ** 2) / (2 * (mean_over or B))
            return jax.lax.psum(local, "X")
        value, (d_in, d_out) = jax.value_and_grad(loss, argnums=(0, 1))(w_in, w_out)
        return {"all": (value, d_in, d_out), "two": (value, d_in), "one": d_in}[returns]

    out_specs = {"all": (P(), P(), P()), "two": (P(), P()), "one": P()}[returns]
    return lambda x, w_in, w_out: jax.shard_map(block, mesh=mesh(X=8), in_specs=(P("X", None), P(), P()),
                                                out_specs=out_specs)(x, w_in, w_out)


def test_a_right_step_passes_live_and_exported():
    assert judge_report(STEP, run(STEP, step_with(), 3, make_mesh=mesh), 3).status is Status.CORRECT
    report = run_exported(STEP, export(STEP, step_with(), make_mesh=mesh), 3, make_mesh=mesh)
    assert judge_report(STEP, report_from_json(report_to_json(report)), 3).status is Status.CORRECT


def test_a_per_device_mean_is_named_on_the_gradients():
    """Averaging over a device's 8 tokens and then summing makes everything 8x too large; the diagnosis is
    read on a gradient (many entries), not on the one number of the loss."""
    v = judge_report(STEP, run(STEP, step_with(mean_over=B // 8), 3, make_mesh=mesh), 3)
    assert v.status is Status.INCORRECT and v.diagnosis == "scaled:8@dW_in"
    assert v.message.startswith("dW_in: ") and "8x" in v.message and "X" in v.message
    assert wrong_numbers(v.diagnosis)


@pytest.mark.parametrize("returns", ["two", "one"])
def test_the_wrong_number_of_results_is_named(returns):
    v = judge_report(STEP, run(STEP, step_with(returns=returns), 3, make_mesh=mesh), 3)
    assert v.status is Status.INCORRECT and v.diagnosis == "wrong_type"
    assert "expected a tuple of 3 arrays: loss, dW_in, dW_out" in v.message


def test_a_result_sharded_otherwise_is_named():
    want = ProgramSpec(**{**STEP.__dict__, "out_spec": ((), ("X", None), ())})
    v = judge_report(want, run(want, step_with(), 3, make_mesh=mesh), 3)
    assert v.status is Status.PARTIAL and v.diagnosis == "wrong_sharding" and v.message.startswith("dW_in: ")


def test_named_outputs_need_a_reference_and_one_spec_each():
    with pytest.raises(AuthoringError):
        ProgramSpec(**{**STEP.__dict__, "out_spec": ((), ())})
    with pytest.raises(AuthoringError):
        ProgramSpec(**{**STEP.__dict__, "reference": ""})


def test_spec_round_trip_keeps_outputs_and_memory_bound():
    spec = ProgramSpec(**{**STEP.__dict__, "max_bytes": 4096, "over_memory": "Is the cache replicated?",
                          "collectives_note": "A tick is a permute."})
    assert ProgramSpec.from_json(spec.to_json()) == spec
    assert "outputs" not in ProgramSpec(mesh=(("X", 8),), einsum="ab->ab", operands=(Operand((8, 4), ("X", None)),),
                                        out_spec=(), collectives={}).to_json()


# A cache of 8 x 64 x 32 f32 split over X by batch: each device's share is 8 KiB; kept sharded, a step that
# adds 1 to it holds one share; one that gathers the cache first holds all eight.
CACHE = ProgramSpec(mesh=(("X", 8),), einsum="ab->ab", operands=(Operand((64, 256), ("X", None)),),
                    out_spec=("X", None), collectives={"all-gather": (0, 1)},
                    max_bytes=2 * 64 * 256 * 4 // 8, over_memory="Is the cache replicated?")


def cache_kept(c):
    return jax.shard_map(lambda b: b * 1.0, mesh=mesh(X=8), in_specs=P("X", None), out_specs=P("X", None))(c)


def cache_gathered(c):
    def block(b):
        full = jax.lax.all_gather(b, "X", axis=0, tiled=True) * 1.0  # the whole cache on every device
        n = b.shape[0]
        return jax.lax.dynamic_slice_in_dim(full, jax.lax.axis_index("X") * n, n, 0)
    return jax.shard_map(block, mesh=mesh(X=8), in_specs=P("X", None), out_specs=P("X", None))(c)


def test_memory_bound_passes_a_sharded_cache_and_names_a_replicated_one():
    kept = run(CACHE, cache_kept, 1, make_mesh=mesh)
    assert kept.memory is not None and kept.memory["outputs"] == 64 * 256 * 4 // 8
    assert judge_report(CACHE, kept, 1).status is Status.CORRECT
    report = report_from_json(report_to_json(run(CACHE, cache_gathered, 1, make_mesh=mesh)))
    v = judge_report(CACHE, report, 1)
    assert v.status is Status.PARTIAL and v.diagnosis == "memory", v.message
    assert "Is the cache replicated?" in v.message and f"{CACHE.max_bytes:,}" in v.message
    assert v.data["memory"]["temporaries"] >= 64 * 256 * 4  # the whole cache, measured


def test_memory_is_measured_only_where_a_question_bounds_it():
    plain = ProgramSpec(**{**CACHE.__dict__, "max_bytes": None, "over_memory": ""})
    assert run(plain, cache_kept, 1, make_mesh=mesh).memory is None


def test_forged_reports_are_read_with_their_types_checked():
    forged = {"outputs": [], "out_specs": [], "census": {"all-reduce": "1"}, "memory": {"outputs": "7"}}
    r = report_from_json(forged)
    assert r.census == {"all-reduce": 1} and r.memory == {"outputs": 7} and r.outputs == ()
    v = judge_report(STEP, r, 3)
    assert v.status is Status.INCORRECT and v.diagnosis == "wrong_shape"


def test_every_new_sentence_is_in_the_table():
    for code in ("output", "memory", "error:not_the_outputs"):
        assert code in _PROGRAM


def test_collectives_are_counted_in_a_lambda_program_and_in_combined_compiled_ones():
    """A function whose exported name needs quoting (a lambda: ``@"call_exported_<lambda>"``) once lost its
    collectives in the grader; and XLA's combined all-reduce of a tuple was not counted at all."""
    from autograder.compiled_hlo import compiled_census

    report = run_exported(STEP, export(STEP, step_with(), make_mesh=mesh), 3, make_mesh=mesh)
    assert report.census == {"all-reduce": 3}
    combined = "  ROOT %all-reduce = (f32[], f32[16,32]{1,0}) all-reduce(%a, %b), channel_id=1"
    assert compiled_census(combined) == {"all-reduce": 1}


# Rows right but missing or moved: a result of 32 tokens whose rows are x's rows times 2 ("ab->ab" scaled).
ROWS = ProgramSpec(mesh=(("X", 8),), einsum="ab->ab", operands=(Operand((32, 16), ("X", None)),),
                   out_spec=("X", None), collectives={})


def _rows_program(transform):
    return lambda x: jax.shard_map(lambda b: b, mesh=mesh(X=8), in_specs=P("X", None),
                                   out_specs=P("X", None))(transform(x))


@pytest.mark.parametrize("transform, code, words", [
    (lambda x: x.at[5].set(0.0).at[17].set(0.0), "zero_rows", "2 of 32 rows"),
    (lambda x: x[jnp.array([1, 0] + list(range(2, 32)))], "permuted_rows", "row 0 holds what belongs at row 1"),
])
def test_rows_dropped_or_moved_are_named(transform, code, words):
    v = judge_report(ROWS, run(ROWS, _rows_program(transform), 5, make_mesh=mesh), 5)
    assert (v.status, v.diagnosis) == (Status.INCORRECT, code) and words in v.message, v.message
    assert wrong_numbers(v.diagnosis)


def test_rows_that_are_wrong_are_not_called_moved():
    v = judge_report(ROWS, run(ROWS, _rows_program(lambda x: x.at[3, 2].add(1.0)), 5, make_mesh=mesh), 5)
    assert v.diagnosis == "wrong_values", v.message
