"""The collectives the compiler places in a ``jit`` program are weighed as well as counted, and the census is a
closed world.

A ``jit`` program states no collective: XLA places them. Counting their kinds alone gave full marks to any program
that made XLA place the expected number of all-gathers, whatever they gathered (the whole batch with the weights,
and the weights sixteen times over: ten times the model's bytes). Now the compiled program's collectives are read
with their result shapes and groups, and weighed against the model's traffic like stated ones (a compiled f32
collective of a bf16 question at the question's width; an all-reduce standing in for a reduce-scatter as the
reduce-scatter it stands for). An honest ``jit`` answer is not wasteful: it earns half for leaving the collectives
to the compiler where the question asks for them written in ``shard_map`` (``collectives:placed``,
``tests/grading/test_placed_by_compiler.py``), and full marks where the question asks for the compiler's.

And a program whose communication the census does not know (``collective_broadcast``, ``send``, ``recv``) is
refused, by the grader and the self-check alike (both read it in ``programs.run``), instead of counting as moving
nothing."""

import jax
import jax.numpy as jnp
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import course
from autograder import kinds
from autograder.collectives import UnknownCollective, inspect_text, traffic
from autograder.compiled_hlo import compiled_census, compiled_collectives
from autograder.kinds import program
from autograder.programs import run_exported
from autograder.questions import load_chapter
from tests.chapter_checks import printed, recorded

CH03, CH04, CH05, CH10 = (load_chapter(n) for n in ("ch03_sharding", "ch04_transformers", "ch05_training", "ch10_jax"))
FSDP_MLP = CH04["ch04-cx8-fsdp-mlp"]  # 2 all-gathers of weights; the activations never move
FSDP_FWD = CH05["ch05-cx2-fsdp-forward"]  # the same, without the nonlinearity
FSDP_BWD = CH05["ch05-cx2-fsdp-backward"]  # an all-gather and a reduce-scatter
MOE_LOCAL = CH10["ch10-cx7-moe-local"]  # one all-reduce of the experts' [S, F] shares
M = course.mesh(X=8)
WHOLE, ROWS = NamedSharding(M, P()), NamedSharding(M, P("X", None))


def _wsc(x, s):
    return jax.lax.with_sharding_constraint(x, s)


# --- honest jit answers: the compiler's collectives move what the model's do ------------------------------------

def mlp_by_jit(x, w_in, w_out):
    """FSDP left to the compiler: each weight made whole where it is used, the tokens stay where they are."""
    return _wsc(jnp.maximum(x @ _wsc(w_in, WHOLE), 0) @ _wsc(w_out, WHOLE), ROWS)


def forward_by_jit(x, w_in, w_out):
    return _wsc((x @ _wsc(w_in, WHOLE)) @ _wsc(w_out, WHOLE), ROWS)


def backward_by_jit(x, g, w_out):
    """The backward pass left to the compiler: on CPU XLA makes its reduce-scatter an all-reduce and a slice."""
    return _wsc(x.T @ (g @ _wsc(w_out, WHOLE).T), ROWS)


# --- wasteful ones: the expected number of all-gathers, of the wrong things -------------------------------------

def mlp_wasteful(x, w_in, w_out):
    """The whole batch and all weights on every device, and w_in sixteen more times: two all-gathers, ~10x."""
    a = _wsc(jnp.concatenate([x.reshape(128, 64), w_out, w_in.T], axis=1), WHOLE)
    junk = _wsc(jnp.tile(w_in.T, (1, 16)), WHOLE)
    xf, w2f, w1f = a[:, :64].reshape(256, 32), a[:, 64:96], a[:, 96:].T
    return _wsc(jnp.maximum(xf @ w1f, 0) @ w2f + 0 * junk.sum(), ROWS)


def mlp_replicated_batch(x, w_in, w_out):
    """The activations gathered with w_out in one piece, then w_in: every device runs all 256 tokens."""
    both = _wsc(jnp.concatenate([x.reshape(128, 64), w_out], axis=1), WHOLE)
    xf, w2f = both[:, :64].reshape(256, 32), both[:, 64:]
    return _wsc(jnp.maximum(xf @ _wsc(w_in, WHOLE), 0) @ w2f, ROWS)


def forward_replicated_everything(x, w_in, w_out):
    """Not FSDP: the whole batch gathered with w_in, and w_out; every device computes all 64 tokens."""
    xw = _wsc(jnp.concatenate([x, w_in], axis=1), WHOLE)
    return _wsc((xw[:, :64] @ xw[:, 64:]) @ _wsc(w_out, WHOLE), ROWS)


def forward_replicated_everything_stated(x, w_in, w_out):
    """Its shard_map twin: the same two all-gathers, stated."""
    def block(xb, wib, wob):
        xw = jax.lax.all_gather(jnp.concatenate([xb, wib], axis=1), "X", axis=0, tiled=True)
        full = (xw[:, :64] @ xw[:, 64:]) @ jax.lax.all_gather(wob, "X", axis=1, tiled=True)
        return full.reshape(8, -1, full.shape[-1])[jax.lax.axis_index("X")]
    return jax.shard_map(block, mesh=M, in_specs=(P("X", None), P("X", None), P(None, "X")),
                         out_specs=P("X", None), check_vma=False)(x, w_in, w_out)


def case3_by_jit(a, b):
    """Case 3 (a reduce-scatter) left to the compiler."""
    return _wsc(a @ b, NamedSharding(M, P("X", None)))


def moe_by_jit(x, gates, w):
    """The experts' shares summed by the compiler: one all-reduce of [S, F]."""
    return _wsc(jnp.einsum("sd,se,edf->sf", x, gates, w), WHOLE)


def moe_by_jit_eight_times(x, gates, w):
    """The same all-reduce eight times, in a loop of eight steps: right numbers, 8x the bytes. The compiled program
    prints the loop's body once, with its trip count beside it."""
    def step(i, out):  # a share that depends on the step (1/36 to 8/36): the compiler cannot move it out
        return out + _wsc(jnp.einsum("sd,se,edf->sf", x * ((i + 1) / 36), gates, w), WHOLE)
    return jax.lax.fori_loop(0, 8, step, jnp.zeros((x.shape[0], w.shape[2]), x.dtype))


def moe_by_jit_loop_of_unknown_length(x, gates, w):
    """Eight steps again, in a loop whose length is read from the data (always 8): nobody can say how often the
    all-reduce runs before it does."""
    n = 7 + (jnp.abs(x).sum() > 0).astype(jnp.int32)

    def step(c):
        i, out = c
        return i + 1, out + _wsc(jnp.einsum("sd,se,edf->sf", x * ((i + 1) / 36), gates, w), WHOLE)
    return jax.lax.while_loop(lambda c: c[0] < n, step, (0, jnp.zeros((x.shape[0], w.shape[2]), x.dtype)))[1]


def block_with_a_ring_of_unknown_length(x, w_in, w_out):
    """Q3's block: its first ring a while_loop that starts from a count read off the data, its second one counted.
    The first ring's permutes were hidden behind the second's count and read as one the compiler added."""
    from solutions.ch10_jax import reduce_scatter_matmul

    def block(a_block, w_block):
        ny, idx = jax.lax.axis_size("Y"), jax.lax.axis_index("Y")
        chunk, left = a_block.shape[1], [(j, (j - 1) % 4) for j in range(4)]

        def rows(i):
            return jax.lax.dynamic_slice_in_dim(w_block, (idx + i) % ny * chunk, chunk, 0)

        def step(c):
            i, acc, a_chunk = c
            return i + 1, acc + a_chunk @ rows(i), jax.lax.ppermute(a_chunk, "Y", left)
        acc = jax.lax.pcast(jnp.zeros((a_block.shape[0], w_block.shape[1]), a_block.dtype), ("X", "Y"), to="varying")
        start = jnp.where(jnp.isnan(a_block[0, 0]), 1, 0).astype(jnp.int32)
        _, acc, a_chunk = jax.lax.while_loop(lambda c: c[0] < ny - 1, step, (start, acc, a_block))
        return acc + a_chunk @ rows(ny - 1)
    mesh = course.mesh(X=2, Y=4)
    gathered = jax.shard_map(block, mesh=mesh, in_specs=(P("X", "Y"), P(None, "Y")), out_specs=P("X", "Y"))(x, w_in)
    return reduce_scatter_matmul(gathered, w_out)


RIGHT = [(j, (j + 1) % 8) for j in range(8)]


def _ring_gather(x, send, loop):
    """An honest ring all-gather over 8 devices: ``send(i, block)`` passes the travelling block one device on at step
    i, and ``loop(step, carry)`` runs the 7 steps ``step(i, carry)``."""
    def block(xb):
        rows, idx = xb.shape[0], jax.lax.axis_index("X")
        out = jax.lax.dynamic_update_slice_in_dim(jnp.zeros((8 * rows, xb.shape[1]), xb.dtype), xb, idx * rows, 0)

        def step(i, carry):
            out, moving = carry
            moving = send(i, moving)
            return jax.lax.dynamic_update_slice_in_dim(out, moving, (idx - i - 1) % 8 * rows, 0), moving
        return loop(step, (out, xb))[0]
    return jax.shard_map(block, mesh=M, in_specs=P("X", None), out_specs=P(), check_vma=False)(x)


def ring_gather_in_two_branches(x):
    """Each step a cond with the permute in both branches (7 permutes run, one per step): the compiled program
    prints both, and the branch not counted runs none (it was counted once, as code nothing called, and read as a
    permute the compiler added)."""
    def send(i, m):
        return jax.lax.cond(i % 2 == 0, lambda m: jax.lax.ppermute(m, "X", RIGHT),
                            lambda m: jax.lax.ppermute(m * 1.0, "X", RIGHT), m)
    return _ring_gather(x, send, lambda step, carry: jax.lax.fori_loop(0, 7, step, carry))


def ring_gather_from_the_data(x):
    """The loop starts from a count read off the data (always 0 for finite inputs): nobody can say how often its
    permute runs before it does. Half, for the loop's length alone: never also "a permute the compiler added"."""
    def loop(step, carry):
        def counted(c):
            return (c[0] + 1, *step(c[0], c[1:]))
        start = jnp.where(jnp.isnan(carry[1][0, 0]), 1, 0)  # the device's own block
        return jax.lax.while_loop(lambda c: c[0] < 7, counted, (start, *carry))[1:]
    return _ring_gather(x, lambda i, m: jax.lax.ppermute(m, "X", RIGHT), loop)


def ring_gather_unrolled(x):
    """The loop unrolled (as a jit-wrapped step called seven times is too): StableHLO states the step's permute once,
    in a function called seven times, and the compiled program runs seven. Six of them were read as placed by the
    compiler, and the ring as moving 1.7x its bytes."""
    return _ring_gather(x, lambda i, m: jax.lax.ppermute(m, "X", RIGHT),
                        lambda step, carry: jax.lax.fori_loop(0, 7, step, carry, unroll=True))


def case1_detour(x, y):
    """Case 1 asks for no collective: x sent to column blocks and back first, two 8-way all-to-alls (XLA prints each
    as a tuple of eight arrays, its sixth with an /*index=5*/ comment inside the type), with right numbers."""
    w = lambda a, *s: _wsc(a, NamedSharding(M, P(*s)))  # noqa: E731
    return _wsc(w(w(x * 2.0, None, "X") * 0.5, "X", None) @ y, ROWS)


def _dead_decoy(x, kind, n=1):
    """``n`` stated collectives of one element each, in the branch of a ``cond`` that never runs: StableHLO states
    them, XLA folds the branch away, and nothing of them is left in the compiled program."""
    def block(xb):
        c = xb.reshape(-1)[:1].reshape(1, 1)

        def live(c):
            for _ in range(n):
                c = jax.lax.all_gather(c, "X", axis=0, tiled=True)[:1] if kind == "ag" else jax.lax.psum(c, "X")
            return c
        return jax.lax.cond(jnp.array(False), live, lambda c: c, c)
    return jax.shard_map(block, mesh=M, in_specs=P("X", None), out_specs=P(), check_vma=False)(x)[0, 0]


def mlp_wasteful_behind_dead_decoys(x, w_in, w_out):
    """The 10x program above, with two dead all-gathers stated beside it: the stated count (2) matched the compiled
    one (2), so the compiler's gathers passed as the stated ones' and were never weighed."""
    return mlp_wasteful(x, w_in, w_out) + 0 * _dead_decoy(x, "ag", 2)


def moe_everything(x, gates, w):
    """No expert parallelism at all: every device's experts written into a zero buffer of all of them, summed by the
    compiler (an all-reduce of every expert's weights), then the whole layer on each device."""
    def block(wb):
        return jnp.zeros((8, *wb.shape), wb.dtype).at[jax.lax.axis_index("X")].set(wb)[None]
    parts = jax.shard_map(block, mesh=M, in_specs=P("X"), out_specs=P("X"))(w)
    experts = _wsc(parts.sum(0), WHOLE).reshape(w.shape)
    return _wsc(jnp.einsum("sd,se,edf->sf", x, gates, experts), WHOLE)


def moe_everything_behind_a_dead_decoy(x, gates, w):
    return moe_everything(x, gates, w) + 0 * _dead_decoy(x, "ar")


def _never(x, negate=False):
    """A predicate read from one device's own block, with no communication: never true for finite inputs (or, with
    ``negate``, always), which XLA cannot fold as it folds a constant."""
    return jax.shard_map(lambda xb: jnp.isnan(xb[0, 0]) != negate, mesh=M, in_specs=P("X", None), out_specs=P(),
                         check_vma=False)(x)


def mlp_one_heavy_gather(x, w_in, w_out):
    """One all-gather of the batch, both weights and sixteen copies of w_in: ten times the model's bytes."""
    a = _wsc(jnp.concatenate([x.reshape(128, 64), w_out, w_in.T, jnp.tile(w_in.T, (1, 16))], axis=1), WHOLE)
    xf, w2f, w1f = a[:, :64].reshape(256, 32), a[:, 64:96], a[:, 96:128].T
    return _wsc(jnp.maximum(xf @ w1f, 0) @ w2f + 0 * a[:, 128:].sum(), ROWS)


def mlp_heavy_beside_a_branch_of_more_gathers(x, w_in, w_out):
    """The branch that never runs gathers twice (the model's plan); the one that runs once, ten times the bytes. A
    compiled conditional was read as its branch of the most collectives: the one that never runs."""
    return jax.lax.cond(_never(x), mlp_by_jit, mlp_one_heavy_gather, x, w_in, w_out)


def moe_heavy_beside_a_branch_of_as_many(x, gates, w):
    """One all-reduce in each branch: the model's, never run, listed first; every expert's weights, run."""
    return jax.lax.cond(_never(x, negate=True), moe_everything, moe_by_jit, x, gates, w)


def mlp_heavy_beside_the_stated_model(x, w_in, w_out):
    """The model itself, stated, in the branch that never runs: its two all-gathers are counted by the stated census,
    and stood in for the compiled branch of the most gathers (its own)."""
    return jax.lax.cond(_never(x, negate=True), mlp_one_heavy_gather, FSDP_MLP.model, x, w_in, w_out)


def ring_by_roll_behind_a_dead_ring(x):
    """An honest ring stated in a branch XLA removes, and the gather done by seven compiler-placed rolls of the block
    four times as wide: the placed permutes have the stated ring's pairs, so they passed as its own, unweighed."""
    rows = x.shape[0] // 8
    dead = jax.lax.cond(jnp.array(False), ring_gather_unrolled, jnp.zeros_like, x)
    wide = _wsc(jnp.concatenate([x, 2 * x, 3 * x, 4 * x], axis=1), ROWS)
    parts = [wide]
    for _ in range(7):
        parts.append(_wsc(jnp.roll(parts[-1], rows, axis=0), ROWS))
    stacked = _wsc(jnp.stack(parts, axis=1), NamedSharding(M, P("X", None, None)))

    def local(zb):
        idx, out = jax.lax.axis_index("X"), jnp.zeros(x.shape, zb.dtype)
        for k in range(8):
            out = jax.lax.dynamic_update_slice_in_dim(out, zb[:, k, :x.shape[1]], (idx - k) % 8 * rows, 0)
        return out
    return jax.shard_map(local, mesh=M, in_specs=P("X", None, None), out_specs=P(), check_vma=False)(stacked) + dead


def moe_twice_beside_a_branch_of_more_result_bits(x, gates, w):
    """The branch that never runs: a psum over pairs of devices of a result a little larger than the other's; the
    one that runs: an all-reduce over all eight of twice the model's. Ranked by result size the first looked
    costlier; by the bytes each moves (its group's size counts), the second is."""
    def live(x, gates, w):
        out = _wsc(jnp.einsum("sd,se,edf->sf", x, gates, jnp.concatenate([w, 2 * w], axis=2)), WHOLE)
        return out[:, :w.shape[2]] + 0 * out[:, w.shape[2]:].sum()

    def decoy(x, gates, w):
        def block(wb):
            big = wb.reshape(-1)[:1].sum() * jnp.ones((x.shape[0], 2 * w.shape[2] + 9), wb.dtype)
            return jax.lax.psum(big, "X", axis_index_groups=[[0, 1], [2, 3], [4, 5], [6, 7]])
        return jax.shard_map(block, mesh=M, in_specs=P("X", None, None), out_specs=P(), check_vma=False)(w)[
            :, :w.shape[2]]
    return jax.lax.cond(_never(w.reshape(w.shape[0], -1)), decoy, live, x, gates, w)


def mlp_gathering_in_float64(x, w_in, w_out):
    """The model's plan by jit, its weights gathered in float64: twice the bytes. A compiled float wider than the
    question's was counted at the question's width, as CPU's bf16-in-f32 is."""
    jax.config.update("jax_enable_x64", True)
    try:
        big = jnp.float64(1 + 2**-40)  # keeps XLA from folding the casts away
        w_in64 = (_wsc(w_in.astype(jnp.float64) * big, WHOLE) * big).astype(jnp.float32)
        w_out64 = (_wsc(w_out.astype(jnp.float64) * big, WHOLE) * big).astype(jnp.float32)
        return _wsc(jnp.maximum(x @ w_in64, 0) @ w_out64, ROWS)
    finally:
        jax.config.update("jax_enable_x64", False)


def _forged_loop(trip: str):
    """A loop whose XLA attributes carry text the program chose (``set_xla_metadata``): here, a trip count."""
    from jax.experimental.xla_metadata import set_xla_metadata

    return set_xla_metadata(**{f'"known_trip_count":{{"n":"{trip}"}},"x': "y"})


def moe_eight_times_behind_a_forged_trip_count(x, gates, w):
    """The all-reduce run 8 times, in a loop that tells XLA's text reader it runs once."""
    with _forged_loop("1"):
        return moe_by_jit_eight_times(x, gates, w)


def case1_gathering_in_a_loop_said_to_run_never(x, y):
    """Case 1 asks for no collective: x gathered whole, twice, in a loop that says it runs 0 times."""
    with _forged_loop("0"):
        xf = jax.lax.fori_loop(0, 2, lambda i, c: _wsc(c, WHOLE) * (1 + 0 * i), x)
    return _wsc(xf @ y, ROWS)


def mlp_beside_rolls_in_a_scope_that_names_no_pairs(x, w_in, w_out):
    """Seven compiler-placed rolls of sixteen copies of the batch, in a scope whose name is the text of a permute of
    no pairs, which the compiled census skipped: the program's metadata is no part of what it runs."""
    parts = [_wsc(jnp.tile(x, (1, 16)), ROWS)]
    for _ in range(7):
        with jax.named_scope("source_target_pairs={}"):
            parts.append(_wsc(jnp.roll(parts[-1], 32, axis=0), ROWS))
    return mlp_by_jit(x, w_in, w_out) + 0 * sum(p.sum(axis=1, keepdims=True) for p in parts)


CASES = [
    pytest.param(FSDP_MLP, mlp_by_jit, 0.5, "collectives:placed", "the compiler placed", id="fsdp mlp by jit"),
    pytest.param(FSDP_FWD, forward_by_jit, 0.5, "collectives:placed", "the compiler placed", id="fsdp forward by jit"),
    pytest.param(FSDP_BWD, backward_by_jit, 0.5, "collectives:placed", "the compiler placed",
                 id="fsdp backward by jit (all-reduce for rs)"),
    pytest.param(CH03["ch03-cx2-case3-reducescatter"], case3_by_jit, 0.5, "collectives:placed", "the compiler placed",
                 id="case 3 by jit"),
    pytest.param(FSDP_MLP, mlp_wasteful, 0.5, "traffic:all-gather", "the bytes", id="batch, weights and junk"),
    pytest.param(FSDP_MLP, mlp_replicated_batch, 0.5, "traffic:all-gather", "the bytes", id="mlp batch gathered"),
    # The batch (16 KiB) gathered with weights of 128 KiB: 1.125x the model's bytes, within the question's slack
    # (1.25x) and the floor (an eighth): its bytes pass, written with jit or with shard_map.
    pytest.param(FSDP_FWD, forward_replicated_everything, 0.5, "collectives:placed", "the compiler placed",
                 id="forward batch gathered"),
    # Every device multiplies the whole batch to keep an eighth of it: 8x the model's FLOPs.
    pytest.param(FSDP_FWD, forward_replicated_everything_stated, 0.5, "compute", "8.0x the FLOPs",
                 id="forward batch gathered, stated"),
    pytest.param(CH03["ch03-cx2-case1-local"], case1_detour, 0.5, "collectives:all-to-all", "all-to-all",
                 id="case 1 with two all-to-alls"),
    # A loop's body is printed once in the compiled program: its collectives are counted once per step.
    pytest.param(MOE_LOCAL, moe_by_jit, 0.5, "collectives:placed", "the compiler placed", id="moe by jit"),
    pytest.param(MOE_LOCAL, moe_by_jit_eight_times, 0.5, "collectives:placed", "placed 8 all-reduce",
                 id="moe all-reduce in a loop of 8"),
    pytest.param(MOE_LOCAL, moe_by_jit_loop_of_unknown_length, 0.5, "collectives:unknown_count", "unknown length",
                 id="moe all-reduce in a loop of unknown length"),
    # The compiled program's collectives are weighed however many the program states: a stated one XLA removed
    # (a branch that never runs) stands in for none of the compiler's.
    pytest.param(FSDP_MLP, mlp_wasteful_behind_dead_decoys, 0.5, "traffic:all-gather", "the bytes",
                 id="10x behind two dead all-gathers"),
    pytest.param(MOE_LOCAL, moe_everything_behind_a_dead_decoy, 0.5, "traffic:all-reduce", "the bytes",
                 id="every expert everywhere behind a dead psum"),
    # A compiled conditional is read, kind by kind, as the branch whose collectives of that kind move the most bytes.
    pytest.param(FSDP_MLP, mlp_heavy_beside_a_branch_of_more_gathers, 0.5, "collectives:placed", "placed 1 all-gather",
                 id="10x in the branch that runs, two gathers in the other"),
    pytest.param(MOE_LOCAL, moe_heavy_beside_a_branch_of_as_many, 0.5, "traffic:all-reduce", "the bytes",
                 id="every expert in the branch that runs, the model in the other"),
    pytest.param(FSDP_MLP, mlp_heavy_beside_the_stated_model, 0.5, "traffic:all-gather", "costliest branch",
                 id="10x in the branch that runs, the stated model in the other"),
    pytest.param(CH10["ch10-cx1-ring-all-gather"], ring_by_roll_behind_a_dead_ring, 0.5,
                 "traffic:collective-permute", "the bytes", id="4x-wide rolls behind a dead stated ring"),
    pytest.param(MOE_LOCAL, moe_twice_beside_a_branch_of_more_result_bits, 0.5, "traffic:all-reduce", "the bytes",
                 id="2x over 8 devices beside a larger psum over pairs"),
    pytest.param(FSDP_MLP, mlp_gathering_in_float64, 0.5, "traffic:all-gather", "2.0x",
                 id="weights gathered in float64"),
    # Text a program writes into its compiled program (attributes, scope names) is never read as XLA's.
    pytest.param(MOE_LOCAL, moe_eight_times_behind_a_forged_trip_count, 0.0, "bad_program", "frontend attributes",
                 id="a loop's trip count forged in its attributes"),
    pytest.param(CH03["ch03-cx2-case1-local"], case1_gathering_in_a_loop_said_to_run_never, 0.0, "bad_program",
                 "frontend attributes", id="a loop said to run never"),
    pytest.param(FSDP_MLP, mlp_beside_rolls_in_a_scope_that_names_no_pairs, 0.5, "collectives:placed",
                 "7 collective-permute", id="permutes in a scope named as no pairs"),
    pytest.param(CH10["ch10-cx1-ring-all-gather"], ring_gather_in_two_branches, 1.0, "correct", "Correct",
                 id="ring step in two branches"),
    pytest.param(CH10["ch10-cx1-ring-all-gather"], ring_gather_unrolled, 1.0, "correct", "Correct",
                 id="ring loop unrolled"),
    pytest.param(CH10["ch10-cx1-ring-all-gather"], ring_gather_from_the_data, 0.5, "collectives:collective-permute",
                 "once per step of a loop of unknown length); expected 7", id="ring loop of unknown length"),
    pytest.param(CH10["ch10-q3-mlp-block"], block_with_a_ring_of_unknown_length, 0.5, "collectives:collective-permute",
                 "once per step of a loop of unknown length); expected 6", id="uncounted ring beside another"),
]


@pytest.mark.parametrize(("q", "fn", "score", "diagnosis", "words"), CASES)
def test_compiler_placed_collectives_are_weighed_in_both_judges(q, fn, score, diagnosis, words):
    rec = recorded(q, fn)
    for seed in ("s1", "s2"):
        v = program.judge(q, rec, seed=seed)
        assert (v.score, v.diagnosis) == (score, diagnosis), v.message
        assert words in v.message, v.message
    s = kinds.selfcheck_live(printed(q), q.qid, fn, rec)
    assert (s.score, s.diagnosis) == (score, diagnosis), s.message


def test_the_report_holds_what_the_compiler_placed_and_travels_as_json():
    from autograder.programs import report_from_json, report_to_json

    r = run_exported(FSDP_MLP.spec, recorded(FSDP_MLP, mlp_wasteful), 1, make_mesh=course.mesh)
    assert not r.collectives and r.census == {"all-gather": 2}
    assert sorted(c.kind for c in r.compiled) == ["all-gather", "all-gather"]
    assert traffic(r.compiled)["all-gather"] == 10 * 28672  # the model moves 28,672 bytes per device
    assert report_from_json(report_to_json(r)).compiled == r.compiled


# --- reading compiled HLO text ------------------------------------------------------------------------------

MESH8 = (("X", 8),)
MESH24 = (("X", 2), ("Y", 4))


def test_compiled_collectives_read_result_shapes_and_every_form_of_groups():
    text = "\n".join([
        # Shardy's mesh form of the groups: over axis_1 of a 1x8 mesh, gathered along dimension 1
        "%all-gather.1 = f32[1,128,16,32]{3,2,0,1} all-gather(%f), channel_id=2, "
        "replica_groups=mesh['axis_0'=1,'axis_1'=8,'axis_2'=1,'axis_3'=1] {'axis_1'}, dimensions={1}, "
        "use_global_device_ids=true",
        # explicit groups of two (over X of the 2x4 mesh), a combined all-reduce of two arrays
        "%all-reduce = (f32[16,4]{1,0}, f32[8]{0}) all-reduce(%a, %b), channel_id=3, "
        "replica_groups={{0,4},{1,5},{2,6},{3,7}}, use_global_device_ids=true, to_apply=%add",
        # iota groups of four (over Y), a reduce-scatter along dimension 0
        "ROOT %reduce-scatter = bf16[2,64]{1,0} reduce-scatter(%c), channel_id=4, replica_groups=[2,4]<=[8], "
        "dimensions={0}, use_global_device_ids=true, to_apply=%add",
        "%cp = f32[8]{0} collective-permute(%d), channel_id=5, source_target_pairs={{0,1},{1,2}}",  # not here
    ])
    got = {c.kind: c for c in compiled_collectives(text, MESH24)}
    gather = compiled_collectives(text.splitlines()[0], MESH8)[0]
    assert (gather.operand_shape, gather.group_size, gather.axes) == ((1, 16, 16, 32), 8, ("X",))
    assert gather.bytes_per_device == 7 * 16 * 16 * 32 * 4
    reduces = [c for c in compiled_collectives(text, MESH24) if c.kind == "all-reduce"]
    assert sorted(c.operand_shape for c in reduces) == [(8,), (16, 4)]
    assert {(c.group_size, c.axes) for c in reduces} == {(2, ("X",))}
    rs = got["reduce-scatter"]
    assert (rs.operand_shape, rs.group_size, rs.axes, rs.dtype) == ((8, 64), 4, ("Y",), "bf16")
    assert "collective-permute" not in got  # weighed as placed permutes, on the questions that ask for a ring


def test_a_collective_of_six_or_more_arrays_is_counted_and_weighed():
    """XLA prints a tuple type of six or more arrays with comments inside it (``/*index=5*/``): an 8-way all-to-all
    on CPU, a combined all-reduce of many gradients. Each is one collective of the census, each array weighed."""
    arrays = ", ".join(("/*index=5*/" if i == 5 else "") + "f32[8,1,32]{2,1,0}" for i in range(8))
    line = (f"%all-to-all.2 = ({arrays}) all-to-all(%a, %b, %c, %d, %e, %f, %g, %h), channel_id=1, "
            "replica_groups={{0,1,2,3,4,5,6,7}}, dimensions={0}")
    assert compiled_census(line) == {"all-to-all": 1}
    moved = compiled_collectives(line, MESH8)
    assert len(moved) == 8 and {c.kind for c in moved} == {"all-to-all"}
    reduce = line.replace("all-to-all", "all-reduce").replace("dimensions={0}", "to_apply=%add")
    assert compiled_census(reduce) == {"all-reduce": 1}
    assert len(compiled_collectives(reduce, MESH8)) == 8


def test_a_bf16_question_counts_a_compiled_f32_collective_at_its_own_width():
    line = ("%all-gather = f32[128,128]{1,0} all-gather(%c), channel_id=1, replica_groups={{0,1,2,3,4,5,6,7}}, "
            "dimensions={0}, use_global_device_ids=true")
    wide, narrow = compiled_collectives(line, MESH8)[0], compiled_collectives(line, MESH8, width="bf16")[0]
    assert (wide.dtype, narrow.dtype) == ("f32", "bf16")
    assert narrow.bytes_per_device * 2 == wide.bytes_per_device


# --- a closed world: what communicates and is not known is refused --------------------------------------------

BROADCAST = """module @jit_f {
  func.func public @main(%arg0: tensor<8xf32>) -> tensor<8xf32> {
    %0 = "stablehlo.collective_broadcast"(%arg0) {replica_groups = dense<[[0, 1, 2, 3, 4, 5, 6, 7]]> :
      tensor<1x8xi64>, channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>} :
      (tensor<8xf32>) -> tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}
"""


def test_the_stated_census_refuses_a_collective_it_cannot_weigh():
    with pytest.raises(UnknownCollective, match="collective_broadcast"):
        inspect_text(BROADCAST, MESH8)


@pytest.mark.parametrize("line", [
    "%cb = f32[8]{0} collective-broadcast(%p), channel_id=9, replica_groups={{0,1,2,3,4,5,6,7}}",
    "%send = (f32[8]{0}, u32[], token[]) send(%p, %tok), channel_id=2, is_host_transfer=false",
    "%recv-done = (f32[8]{0}, token[]) recv-done(%recv), channel_id=3",
    "%r = f32[8]{0} ragged-all-to-all(%a, %b, %c, %d, %e, %f), channel_id=4, replica_groups={{0,1}}",
], ids=["collective-broadcast", "send", "recv-done", "ragged-all-to-all"])
def test_the_compiled_census_refuses_a_collective_it_cannot_weigh(line):
    with pytest.raises(UnknownCollective):
        compiled_census("%p = f32[8]{0} parameter(0)\n" + line)


def test_run_refuses_an_unknown_collective_in_either_text_for_both_judges(monkeypatch):
    """A GPU host runs a program with a collective_broadcast; this CPU cannot, so the texts ``run`` reads are
    replaced: it refuses the program with a sentence, whichever text shows the op."""
    q = FSDP_MLP
    blob = recorded(q, q.model)
    lowered, compiled = jax.stages.Lowered.as_text, jax.stages.Compiled.as_text
    monkeypatch.setattr(jax.stages.Lowered, "as_text", lambda self, *a, **k: BROADCAST)
    r = run_exported(q.spec, blob, 1, make_mesh=course.mesh)
    assert r.error_code == "bad_program" and "collective_broadcast" in r.error and "cannot weigh" in r.error, r
    v = program.judge(q, blob, seed="s1")
    assert v.score == 0 and "cannot weigh" in v.message, v.message
    monkeypatch.setattr(jax.stages.Lowered, "as_text", lowered)
    extra = "\n%cb = f32[8]{0} collective-broadcast(%p), channel_id=9, replica_groups={{0,1,2,3,4,5,6,7}}\n"
    monkeypatch.setattr(jax.stages.Compiled, "as_text", lambda self, *a, **k: compiled(self) + extra)
    r = run_exported(q.spec, blob, 1, make_mesh=course.mesh)
    assert r.error_code == "bad_program" and "collective-broadcast" in r.error and "cannot weigh" in r.error, r
    s = kinds.selfcheck_live(printed(q), q.qid, q.model, blob)
    assert s.score == 0 and "cannot weigh" in s.message, s.message


# --- element types: a closed world, read in full at their true widths ------------------------------------------

def _gather_module(element: str, groups: str = "dense<[[0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>") -> str:
    return f"""module @jit_f {{
  func.func public @main(%arg0: tensor<8x4x{element}>) -> tensor<64x4x{element}> {{
    %0 = "stablehlo.all_gather"(%arg0) {{all_gather_dim = 0 : i64, replica_groups = {groups},
      channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, use_global_device_ids}} :
      (tensor<8x4x{element}>) -> tensor<64x4x{element}>
    return %0 : tensor<64x4x{element}>
  }}
}}
"""


# (StableHLO's name, HLO's name, bytes of an 8x4 operand): sub-byte integers as XLA packs them, two to a byte.
WIDTHS = [("complex<f32>", "c64", 256), ("complex<f64>", "c128", 512), ("i4", "s4", 16), ("ui4", "u4", 16),
          ("ui16", "u16", 64), ("i16", "s16", 64), ("f8E4M3FN", "f8e4m3fn", 32), ("f8E5M2", "f8e5m2", 32),
          ("bf16", "bf16", 64), ("f32", "f32", 128), ("ui64", "u64", 256), ("i1", "pred", 32)]


@pytest.mark.parametrize(("stated", "hlo", "size"), WIDTHS, ids=[w[0] for w in WIDTHS])
def test_every_element_type_is_weighed_at_its_true_width_in_both_readers(stated, hlo, size):
    (c,) = inspect_text(_gather_module(stated), MESH8)
    assert (c.dtype, c.operand_shape, c.operand_bytes) == (stated, (8, 4), size)
    assert c.bytes_per_device == 7 * size
    line = (f"%all-gather = {hlo}[64,4]{{1,0}} all-gather(%c), channel_id=1, replica_groups={{{{0,1,2,3,4,5,6,7}}}}, "
            "dimensions={0}, use_global_device_ids=true")
    (d,) = compiled_collectives(line, MESH8, width="f32")
    assert (d.dtype, d.operand_shape, d.operand_bytes) == (stated, (8, 4), size)


@pytest.mark.parametrize("element", ["f4E2M1FN", "f6E2M3FN", "i2", "ui2"])
def test_an_element_type_the_census_cannot_weigh_refuses_the_program(element):
    from autograder.collectives import UnreadableCollective

    text = _gather_module(element)
    try:
        from jax._src.interpreters import mlir as jmlir
        from jax._src.lib.mlir import ir
        with jmlir.make_ir_context():
            ir.Module.parse(text)
    except Exception:
        pytest.skip(f"this MLIR cannot parse {element}")
    with pytest.raises(UnreadableCollective, match="element type"):
        inspect_text(text, MESH8)
    line = ("%all-gather = f4e2m1fn[64,4]{1,0} all-gather(%c), channel_id=1, replica_groups={{0,1,2,3,4,5,6,7}}, "
            "dimensions={0}")
    with pytest.raises(UnreadableCollective, match="element type"):
        compiled_collectives(line, MESH8)


@pytest.mark.parametrize("dtype", [jnp.complex64, jnp.uint16, jnp.int4, jnp.float8_e4m3fn])
def test_a_stated_collective_of_an_odd_dtype_is_weighed_at_its_bytes(dtype):
    """Plain JAX on CPU: a psum of complex64, uint16, int4 or float8, read from the program's StableHLO."""
    def block(b):
        return jnp.real(jax.lax.psum(b.astype(dtype), "X")).astype(jnp.float32)

    f = jax.jit(jax.shard_map(block, mesh=M, in_specs=P("X"), out_specs=P("X"), check_vma=False))
    (c,) = inspect_text(f.lower(jax.ShapeDtypeStruct((64, 4), jnp.float32, sharding=ROWS)).as_text(), MESH8)
    bits = {jnp.complex64: 64, jnp.uint16: 16, jnp.int4: 4, jnp.float8_e4m3fn: 8}[dtype]
    assert (c.kind, c.operand_shape, c.operand_bytes) == ("all-reduce", (8, 4), 32 * bits // 8), c


@pytest.mark.parametrize(("text", "read"), [
    ("tensor<64x320xcomplex<f32>>", ((64, 320), "complex<f32>")), ("tensor<f32>", ((), "f32")),
    ("tensor<8x4xf8E4M3FN>", ((8, 4), "f8E4M3FN")), ("tensor<8xf32, #stablehlo.bounds<?>>", ((8,), "f32")),
    ("tensor<?x4xf32>", "not fixed"), ("!stablehlo.token", "not fixed"), ("tuple<tensor<f32>>", "not fixed")])
def test_an_operand_is_read_from_its_type_object_not_its_text(text, read):
    """The shape and element type come from MLIR's type (static dims, element type), so an encoding after a comma
    is no part of the element type; any other type (dynamic dims, a token, a tuple) is refused."""
    from jax._src.interpreters import mlir as jmlir
    from jax._src.lib.mlir import ir

    from autograder.collectives import UnreadableCollective, _shape_dtype

    with jmlir.make_ir_context():
        t = ir.Type.parse(text)
        if isinstance(read, str):
            with pytest.raises(UnreadableCollective, match=read):
                _shape_dtype(t)
        else:
            assert _shape_dtype(t) == read


def test_an_hlo_element_type_outside_the_table_is_refused_in_the_stated_readers_words():
    from autograder.collectives import UnreadableCollective, _checked
    from autograder.compiled_hlo import _hlo_array

    with pytest.raises(UnreadableCollective) as stated:
        _checked((8, 4), "f4e2m1fn")
    with pytest.raises(UnreadableCollective) as compiled:
        _hlo_array("f4e2m1fn", "8,4")
    assert str(compiled.value) == str(stated.value)


# --- the readers take whatever a program states --------------------------------------------------------------

def test_a_permute_of_no_pairs_moves_nothing():
    from autograder.collectives import _dense_list

    assert _dense_list("dense<> : tensor<0x2xi64>") == []
    text = _gather_module("f32").replace(
        '"stablehlo.all_gather"(%arg0) {all_gather_dim = 0 : i64, replica_groups = '
        'dense<[[0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>,',
        '"stablehlo.collective_permute"(%arg0) {source_target_pairs = dense<> : tensor<0x2xi64>,').replace(
        ", use_global_device_ids}", "}").replace("-> tensor<64x4xf32>", "-> tensor<8x4xf32>").replace(
        "return %0 : tensor<64x4xf32>", "return %0 : tensor<8x4xf32>")
    assert "collective_permute" in text
    assert inspect_text(text, MESH8) == []


SIXTEEN = "dense<[[" + ", ".join(map(str, range(16))) + "]]> : tensor<1x16xi64>"  # devices 8 to 15: none of the mesh


@pytest.mark.parametrize("groups", [SIXTEEN])
def test_a_collective_of_no_devices_is_refused(groups):
    """Groups of devices the mesh lacks: refused, never a ZeroDivisionError in the grader."""
    from autograder.collectives import Collective, UnreadableCollective

    with pytest.raises(UnreadableCollective):
        inspect_text(_gather_module("f32", groups).replace(", use_global_device_ids}", "}"), MESH8)
    assert Collective("all-reduce", (), "f32", (8,), 0, 1).bytes_per_device == 0  # never a ZeroDivisionError


def test_a_collective_nested_past_the_readers_depth_refuses_the_program():
    """A call chain 70 deep (the reader walked 64 levels and counted nothing below them, silently)."""
    from autograder.collectives import UnreadableCollective

    funcs = [_gather_module("f32").split("\n", 1)[1].rsplit("}", 1)[0].replace("@main", "@f70")]
    for i in range(70):
        funcs.append(f"""  func.func private @f{i}(%arg0: tensor<8x4xf32>) -> tensor<64x4xf32> {{
    %0 = func.call @f{i + 1}(%arg0) : (tensor<8x4xf32>) -> tensor<64x4xf32>
    return %0 : tensor<64x4xf32>
  }}""")
    main = """  func.func public @main(%arg0: tensor<8x4xf32>) -> tensor<64x4xf32> {
    %0 = func.call @F(%arg0) : (tensor<8x4xf32>) -> tensor<64x4xf32>
    return %0 : tensor<64x4xf32>
  }"""

    def module(first):
        return "module @jit_f {\n" + main.replace("@F", first) + "\n" + "\n".join(funcs) + "\n}\n"

    with pytest.raises(UnreadableCollective, match="deep"):
        inspect_text(module("@f0"), MESH8)
    assert [c.count for c in inspect_text(module("@f60"), MESH8)] == [1]  # ten calls deep: read


def test_a_count_past_any_float_does_not_overflow():
    """Loops of 100,000 steps nested in a branch that never runs: the count is capped (62 levels of them made an
    OverflowError in the reader's floats; JAX itself cannot lower so many, so four show the cap here), and so is a
    report's count in ``traffic``."""
    from autograder.collectives import MAX_COUNT, Collective

    def block(b):
        def nest(depth):
            if depth == 0:
                return lambda c: jax.lax.psum(c, "X")
            inner = nest(depth - 1)
            return lambda c: jax.lax.fori_loop(0, 100_000, lambda i, d: inner(d), c)
        return jax.lax.cond(b.sum() > 1e30, nest(4), lambda c: c, b)

    f = jax.jit(jax.shard_map(block, mesh=M, in_specs=P("X"), out_specs=P("X"), check_vma=False))
    found = inspect_text(f.lower(jax.ShapeDtypeStruct((64, 4), jnp.float32, sharding=ROWS)).as_text(), MESH8)
    assert [c.count for c in found] == [MAX_COUNT]
    assert traffic(found)["all-reduce"] > 0
    assert traffic([Collective("all-reduce", ("X",), "f32", (8,), 8, 10**400)])["all-reduce"] > 0


@pytest.mark.parametrize("line", [
    "%ag = f32[64]{0} all-gather(%c), channel_id=1, replica_groups=[3,4]<=[8], dimensions={0}",
    "%ag = f32[64]{0} all-gather(%c), channel_id=1, replica_groups=[2,4]<=[4,2]T(1,1), dimensions={0}",
    "%ag = f32[64]{0} all-gather(%c), channel_id=1, replica_groups=[8,0]<=[0], dimensions={0}",
    "%ag = f32[64]{0} all-gather(%c), channel_id=1, replica_groups=mesh['a'=8] {'a','a'}, dimensions={0}",
], ids=["shape", "transpose", "empty", "mesh"])
def test_odd_forms_of_compiled_groups_are_read_or_left_unread_never_raise(line):
    (c,) = compiled_collectives(line, MESH8)
    assert c.group_size > 0 and c.bytes_per_device >= 0


def test_groups_of_unequal_sizes_are_weighed_at_the_largest():
    """StableHLO pads uneven ``axis_index_groups`` with -1: the padding is no device, and the busiest device is in the
    largest group (the first group's size, 1 here, weighed nothing)."""
    def block(b):
        return jax.lax.psum(b, "X", axis_index_groups=[[0], [1, 2, 3, 4, 5, 6, 7]])

    f = jax.jit(jax.shard_map(block, mesh=M, in_specs=P("X"), out_specs=P("X"), check_vma=False))
    (c,) = inspect_text(f.lower(jax.ShapeDtypeStruct((64, 4), jnp.float32, sharding=ROWS)).as_text(), MESH8)
    assert (c.group_size, c.axes) == (7, ("X",)), c


def test_a_compiled_collective_of_unequal_groups_is_weighed_at_the_largest_as_a_stated_one():
    """Both readers weigh the busiest device, in the largest group: a compiled ``{{0},{1,...,7}}`` is 7 devices, as
    the stated census reads the same groups (the first group's size, 1, weighed nothing)."""
    line = ("%all-reduce = f32[8,4]{1,0} all-reduce(%c), channel_id=1, replica_groups={{0},{1,2,3,4,5,6,7}}, "
            "use_global_device_ids=true, to_apply=%add")
    (c,) = compiled_collectives(line, MESH8)
    assert c.group_size == 7 and c.bytes_per_device == 2 * 6 / 7 * 128, c


@pytest.mark.parametrize("groups", ["dense<> : tensor<1x0xi64>", "dense<> : tensor<0x0xi64>"])
def test_a_collective_that_names_no_devices_means_all_of_them_in_both_readers(groups):
    """HLO's meaning of groups that name no device (``replica_groups={}``): every device in one group. The stated
    reader reads a ``dense<>`` the same way as the compiled one reads ``{}`` and ``{{}}``, so a legal program is never
    refused on one side alone, and the grader never divides by a group of no devices."""
    (c,) = inspect_text(_gather_module("f32", groups).replace(", use_global_device_ids}", "}"), MESH8)
    for compiled in ("{}", "{{}}"):
        line = (f"%all-gather = f32[64,4]{{1,0}} all-gather(%c), channel_id=1, replica_groups={compiled}, "
                "dimensions={0}")
        (d,) = compiled_collectives(line, MESH8)
        assert (c.group_size, c.axes, c.operand_shape) == (d.group_size, d.axes, d.operand_shape) == (8, ("X",), (8, 4))
