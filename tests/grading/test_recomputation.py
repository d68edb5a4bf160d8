"""A training step whose loss runs under ``jax.checkpoint`` recomputes its forward pass in the backward one, and
states each of the forward's collectives a second time: the FSDP step of the book's ZeRO-3, which gathers each
weight again rather than keep it. Where XLA merges the repeats, the compiled program is the model's, collective for
collective, and the step earned half marks for "7 all-gather, expected 3 to 4". A stated repeat now counts as often
as the compiled program runs it. Where recomputing runs a collective again for real (Chapter 6's budget step sums
its activations a second time), the step keeps half marks, and the message says why."""

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

import course
from autograder.questions import load_chapter
from tests.chapter_checks import both_judges

STEP = load_chapter("ch05_training")["ch05-cx4-fsdp-tp-step"]  # (loss, dW_in, dW_out) on a 4 x 2 mesh
BUDGET = load_chapter("ch06_applied_training")["ch06-cx7-budget-step"]  # the same step, on a mesh of the budget's


def _tokens_gathered(x_block, w_in_shard, w_out_shard):
    """This device's tokens through both weights, gathered just in time: Out[B_X, D], summed over F_Y nowhere yet."""
    rows = jax.lax.all_gather(x_block, "Y", axis=1, tiled=True)
    w_in = jax.lax.all_gather(w_in_shard, "X", axis=0, tiled=True)
    w_out = jax.lax.all_gather(w_out_shard, "X", axis=1, tiled=True)
    return jnp.maximum(rows @ w_in, 0.0) @ w_out


def step_recomputed(x, w_in, w_out):
    """The whole forward pass under jax.checkpoint: its backward pass gathers the weights and the tokens again."""
    batch = x.shape[0]

    def block(x_block, w_in_block, w_out_block):
        @jax.checkpoint
        def loss(w_in_shard, w_out_shard):
            out = jax.lax.psum_scatter(_tokens_gathered(x_block, w_in_shard, w_out_shard), "Y", scatter_dimension=1,
                                       tiled=True)
            return jax.lax.psum(jnp.sum(out * out), ("X", "Y")) / (2 * batch)

        value, grads = jax.value_and_grad(loss, argnums=(0, 1))(w_in_block, w_out_block)
        return (value, *grads)

    return jax.shard_map(block, mesh=course.mesh(X=4, Y=2), in_specs=(P("X", "Y"), P("X", "Y"), P("Y", "X")),
                         out_specs=(P(), P("X", "Y"), P("Y", "X")))(x, w_in, w_out)


def budget_step_recomputed(x, w_in, w_out, *, X=2, Y=4):
    """Chapter 6's step at 2 x 4 under jax.checkpoint: the recomputed forward pass sums its activations over Y again,
    an AllReduce XLA keeps."""
    batch = x.shape[0]

    def block(x_block, w_in_block, w_out_block):
        @jax.checkpoint
        def loss(w_in_shard, w_out_shard):
            w_in = jax.lax.all_gather(w_in_shard, "X", axis=0, tiled=True)
            w_out = jax.lax.all_gather(w_out_shard, "X", axis=1, tiled=True)
            out = jax.lax.psum(jnp.maximum(x_block @ w_in, 0.0) @ w_out, "Y")
            return jax.lax.psum(jnp.sum(out * out), "X") / (2 * batch)

        value, grads = jax.value_and_grad(loss, argnums=(0, 1))(w_in_block, w_out_block)
        return (value, *grads)

    return jax.shard_map(block, mesh=course.mesh(X=X, Y=Y), in_specs=(P("X", None), P("X", "Y"), P("Y", "X")),
                         out_specs=(P(), P("X", "Y"), P("Y", "X")))(x, w_in, w_out)


def test_a_recomputed_step_whose_repeats_xla_merged_earns_full_marks():
    for v in both_judges(STEP, step_recomputed):
        assert (v.score, v.diagnosis) == (1.0, "correct"), v.message


def test_a_recomputation_that_runs_a_collective_again_is_told_so():
    for v in both_judges(BUDGET, budget_step_recomputed):
        assert (v.score, v.diagnosis[:12]) == (0.5, "collectives:"), v.message
        assert "jax.checkpoint" in v.message and "AllReduce of activations again" in v.message
