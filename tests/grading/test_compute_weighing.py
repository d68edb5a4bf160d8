"""A program's compute is weighed as its bytes are. A program that multiplied the two weights together before the
input met them (4x the FLOPs of the FSDP forward), or that had every device multiply the whole batch to keep an
eighth of it (8x), earned full marks: its values, sharding and collectives were right. It earns half now, in both
judges, with a sentence that names the factor, also where the product is written as a multiply and a sum. The
FLOPs are read from the compiled program with loops counted at every step (XLA's own cost analysis counts a
``fori_loop``'s body once), so a ring unrolled by hand is weighed as the same ring in a loop, and a training step
that recomputes its forward pass (``jax.checkpoint``) stays within the allowance."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import course
from autograder.compiled_hlo import matmul_flops
from autograder.questions import load_chapter
from tests.chapter_checks import both_judges

CH03, CH05, CH10 = load_chapter("ch03_sharding"), load_chapter("ch05_training"), load_chapter("ch10_jax")
RING = CH03["ch03-cx4-ring-allgather"]  # 7 permutes to the right neighbour: no matrix product at all
FSDP_FWD = CH05["ch05-cx2-fsdp-forward"]  # In[B_X, D] . W_in[D_X, F] . W_out[F, D_X]: two gathers of weights
TP_BWD = CH05["ch05-cx3-tp-backward"]  # dW_in[D, F_X] through one psum of the output
RING_MATMUL = CH10["ch10-cx2-collective-matmul"]  # a ring of Y - 1 products and permutes, in a fori_loop
M = course.mesh(X=8)
FSDP_SPECS = (P("X", None), P("X", None), P(None, "X"))


def _fsdp(block):
    @functools.wraps(block)
    def program(x, w_in, w_out):
        return jax.shard_map(block, mesh=M, in_specs=FSDP_SPECS, out_specs=P("X", None))(x, w_in, w_out)

    return program


def _gathered(wib, wob):
    return jax.lax.all_gather(wib, "X", axis=0, tiled=True), jax.lax.all_gather(wob, "X", axis=1, tiled=True)


@_fsdp
def weights_first(xb, wib, wob):
    """W_in @ W_out formed first: D x F x D multiplies where the tokens need 2 x B/8 x D x F."""
    w_in, w_out = _gathered(wib, wob)
    return xb @ (w_in @ w_out)


@_fsdp
def weights_first_as_multiply_and_sum(xb, wib, wob):
    """The same product written without a matmul: an [D, F, D] array of products, summed over F."""
    w_in, w_out = _gathered(wib, wob)
    return xb @ jnp.sum(w_in[:, :, None] * w_out[None, :, :], axis=1)


@_fsdp
def whole_batch_on_every_device(xb, wib, wob):
    """Every device multiplies all 64 tokens and keeps its own 8: 8x the model's products. The tokens travel in
    one gather with W_in's rows (as many collectives as the model, and 1.125x its bytes: within the allowance)."""
    both = jax.lax.all_gather(jnp.concatenate([xb, wib], axis=1), "X", axis=0, tiled=True)
    x, w_in = both[:, : xb.shape[1]], both[:, xb.shape[1]:]
    out = (x @ w_in) @ jax.lax.all_gather(wob, "X", axis=1, tiled=True)
    return jax.lax.dynamic_slice_in_dim(out, jax.lax.axis_index("X") * xb.shape[0], xb.shape[0], 0)


@_fsdp
def weights_first_in_a_loop_of_unknown_length(xb, wib, wob):
    """W_in @ W_out formed in a while loop whose length the data decides (it runs once): counted once, 4x."""
    w_in, w_out = _gathered(wib, wob)
    start = (0 * xb[0, 0]).astype(jnp.int32)

    def body(carry):
        return carry[0] + 1, w_in @ w_out

    zeros = jnp.zeros((w_in.shape[0], w_out.shape[1])) + 0 * xb[0, 0]  # varying over X, as the products are
    _, both = jax.lax.while_loop(lambda c: c[0] < start + 1, body, (start, zeros))
    return xb @ both


@_fsdp
def tokens_in_two_halves(xb, wib, wob):
    """Honest: the device's tokens in two halves, each through both weights: the model's FLOPs."""
    w_in, w_out = _gathered(wib, wob)
    half = xb.shape[0] // 2
    return jnp.concatenate([(xb[:half] @ w_in) @ w_out, (xb[half:] @ w_in) @ w_out])


def tp_backward_recomputing(x, w_in, w_out):
    """Honest: the model's step with its loss under jax.checkpoint, so the backward pass runs the forward again."""
    def block(x_full, w_in_block, w_out_block):
        @jax.checkpoint
        def loss(w):
            out = jax.lax.psum(jnp.maximum(x_full @ w, 0.0) @ w_out_block, "X")
            return jnp.sum(out**2) / (2 * x_full.shape[0])

        return jax.grad(loss)(w_in_block)

    return jax.shard_map(block, mesh=M, in_specs=(P(), P(None, "X"), P("X", None)), out_specs=P(None, "X"))(
        x, w_in, w_out)


def ring_put_in_order_by_a_permutation_matrix(x):
    """Honest: the blocks received round the ring, put in order by a one-hot matrix product. The model's compiled
    program reduces truth values (the bounds checks of .at[...].set), which once counted as its FLOPs, so this
    program did 683x "the model's" and earned half."""
    def block(xb):
        got, sent = [xb], xb
        for _ in range(7):
            sent = jax.lax.ppermute(sent, "X", [(j, (j + 1) % 8) for j in range(8)])
            got.append(sent)
        order = jax.nn.one_hot((jax.lax.axis_index("X") - jnp.arange(8)) % 8, 8, dtype=xb.dtype)
        return jnp.einsum("sd,src->drc", order, jnp.stack(got)).reshape(-1, xb.shape[1])

    return jax.shard_map(block, mesh=M, in_specs=P("X", None), out_specs=P(), check_vma=False)(x)


def ring_matmul_unrolled(a, w):
    """Honest: the collective matmul's ring as a Python loop, where the model has a fori_loop."""
    mesh = jax.typeof(a).sharding.mesh

    def block(a_block, w_block):
        ny, idx, chunk = mesh.shape["Y"], jax.lax.axis_index("Y"), a_block.shape[1]
        left = [(j, (j - 1) % ny) for j in range(ny)]
        acc, a_chunk = None, a_block
        for i in range(ny):
            part = a_chunk @ jax.lax.dynamic_slice_in_dim(w_block, (idx + i) % ny * chunk, chunk, 0)
            acc = part if acc is None else acc + part
            if i < ny - 1:
                a_chunk = jax.lax.ppermute(a_chunk, "Y", left)
        return acc

    return jax.shard_map(block, mesh=mesh, in_specs=(P("X", "Y"), P(None, "Y")), out_specs=P("X", "Y"))(a, w)


# Each wasteful FSDP forward, and the factor its sentence names.
WASTEFUL = {weights_first: "4.1x", weights_first_as_multiply_and_sum: "4.1x", whole_batch_on_every_device: "8.0x",
            weights_first_in_a_loop_of_unknown_length: "4.1x"}
HONEST = [(FSDP_FWD, tokens_in_two_halves), (RING, ring_put_in_order_by_a_permutation_matrix),
          (TP_BWD, tp_backward_recomputing), (RING_MATMUL, ring_matmul_unrolled)]


@pytest.mark.parametrize("fn", WASTEFUL, ids=lambda fn: fn.__name__)
def test_a_program_of_wasted_products_earns_half_in_both_judges(fn):
    for v in both_judges(FSDP_FWD, fn):
        assert (v.score, v.diagnosis) == (0.5, "compute"), v.message
        assert f"{WASTEFUL[fn]} the FLOPs" in v.message


@pytest.mark.parametrize(("q", "fn"), HONEST, ids=[fn.__name__ for _, fn in HONEST])
def test_an_honest_program_keeps_full_marks_in_both_judges(q, fn):
    for v in both_judges(q, fn):
        assert (v.score, v.diagnosis) == (1.0, "correct"), v.message


def _flops(fn, *shapes):
    args = [jnp.asarray(np.random.default_rng(0).standard_normal(s), jnp.float32) for s in shapes]
    flops, known = matmul_flops(jax.jit(fn).lower(*args).compile().as_text())
    assert known
    return flops


def test_flops_count_every_step_of_a_loop_and_the_costliest_branch():
    one = 2 * 32**3
    assert _flops(lambda a, b: a @ b, (32, 32), (32, 32)) == one
    assert _flops(lambda a, b: jax.lax.fori_loop(0, 6, lambda i, c: c @ b, a), (32, 32), (32, 32)) == 6 * one
    assert _flops(lambda a, b: jax.lax.scan(lambda c, _: (c @ b, None), a, None, length=5)[0],
                  (32, 32), (32, 32)) == 5 * one
    branches = _flops(lambda a, b: jax.lax.cond(a[0, 0] > 0, lambda c: c @ b @ b @ b, lambda c: c @ b, a),
                      (32, 32), (32, 32))
    assert branches == 3 * one
    assert _flops(lambda a, b: jnp.einsum("bij,bjk->bik", a, b), (4, 8, 16), (4, 16, 2)) == 2 * 4 * 8 * 16 * 2
    assert _flops(lambda a, b: jnp.sum(a[:, :, None] * b[None], axis=1), (8, 16), (16, 4)) == 2 * 8 * 16 * 4


def test_a_product_in_a_loop_of_unknown_length_counts_once_and_says_so():
    def unknown(a, b):
        return jax.lax.while_loop(lambda c: c[1] < a[0, 0], lambda c: (c[0] @ b, c[1] + 1.0), (a, 0.0))[0]

    a, b = (jnp.asarray(np.random.default_rng(1).standard_normal((16, 16)), jnp.float32) for _ in range(2))
    assert matmul_flops(jax.jit(unknown).lower(a, b).compile().as_text()) == (2 * 16**3, False)


def test_reductions_of_truth_values_and_integers_are_no_products():
    assert _flops(lambda a, b: jnp.any(a > b), (64, 64), (64, 64)) == 0
    assert _flops(lambda a, b: jnp.sum((a > b).astype(jnp.int32)), (64, 64), (64, 64)) == 0
    assert _flops(lambda a, b: jnp.sum(a * b), (64, 64), (64, 64)) == 2 * 64 * 64
