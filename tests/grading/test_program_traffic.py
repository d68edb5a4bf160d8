"""Programs that compute the right numbers with the collectives the question names, and still do not do what it
asks: they move more bytes than the model (the whole buffer round a ring at every step, permutes that jump over
devices, a "bidirectional" ring that sends everything one way, an all-reduce of the whole array where a block
would do), count their collectives in ways a count alone misses (a loop stepping by two, a loop whose length
depends on the data), or return the input untouched. Each earned full marks (or half) before the grader measured
bytes; each now gets what it is worth, in the grader and the self-check alike, while programs that move the
same bytes in other ways (another spelling, the other way round the ring) keep full marks. And the yardstick:
every model moves exactly what solutions/program_traffic.json says."""

import functools

import jax
import jax.numpy as jnp
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import course
from autograder import kinds, model_traffic
from autograder.collectives import BUSIER, Collective, traffic
from autograder.kinds import program
from autograder.questions import chapter_names, load_chapter
from autograder.release import traffic_entries
from tests.chapter_checks import printed, recorded

CH03, CH10, CH12 = (load_chapter(n) for n in ("ch03_sharding", "ch10_jax", "ch12_gpus"))
N = 8


def _ring(step: int = 1) -> list[tuple[int, int]]:
    return [(i, (i + step) % N) for i in range(N)]


def _on_x(f, in_specs, out_specs):
    return jax.shard_map(f, mesh=course.mesh(X=N), in_specs=in_specs, out_specs=out_specs, check_vma=False)


def _placed(blocks, i):
    """Blocks received in ring order (blocks[s] came from device i - s), put where they belong."""
    st = jnp.stack(blocks)
    return jnp.zeros_like(st).at[(i - jnp.arange(N)) % N].set(st).reshape(-1, st.shape[-1])


def ring_left(x):
    """The all-gather ring the other way round: the same bytes."""
    def block(b):
        i, got, cur = jax.lax.axis_index("X"), [b], b
        for _ in range(N - 1):
            cur = jax.lax.ppermute(cur, "X", _ring(-1))
            got.append(cur)
        st = jnp.stack(got)
        return jnp.zeros_like(st).at[(i + jnp.arange(N)) % N].set(st).reshape(-1, b.shape[-1])
    return _on_x(block, P("X", None), P())(x)


def ring_jumps(x):
    """Seven permutes, each straight to the device s places on: not a ring; its bytes cross s links."""
    def block(b):
        return _placed([b] + [jax.lax.ppermute(b, "X", _ring(s)) for s in range(1, N)], jax.lax.axis_index("X"))
    return _on_x(block, P("X", None), P())(x)


def ring_whole_buffer(x):
    """Seven neighbour permutes, each of the whole buffer gathered so far: 8x the bytes."""
    def block(b):
        i = jax.lax.axis_index("X")
        buf = jnp.zeros((N,) + b.shape, b.dtype).at[i].set(b)
        for _ in range(N - 1):
            got = jax.lax.ppermute(buf, "X", _ring())
            buf = jnp.where(jnp.any(got != 0, axis=(1, 2), keepdims=True), got, buf)
        return buf.reshape(-1, b.shape[-1])
    return _on_x(block, P("X", None), P())(x)


def bidi_one_way(x):
    """The one-way ring, and seven scalar permutes the other way so that the count reads 14."""
    def block(b):
        i, got, cur, dummy = jax.lax.axis_index("X"), [b], b, jnp.zeros((), b.dtype)
        for _ in range(N - 1):
            cur = jax.lax.ppermute(cur, "X", _ring())
            dummy = jax.lax.ppermute(dummy, "X", _ring(-1))
            got.append(cur)
        return _placed(got, i) + 0 * dummy
    return _on_x(block, P("X", None), P())(x)


def ring_in_while(test, start, step, slot):
    """The all-gather ring in a while_loop: ``test`` of its counter (from ``start`` by ``step``), the block that
    arrives at a step put at ``slot(counter)`` steps back."""
    def fn(x):
        def block(b):
            i = jax.lax.axis_index("X")

            def body(carry):
                s, cur, buf = carry
                cur = jax.lax.ppermute(cur, "X", _ring())
                return s + step, cur, buf.at[(i - slot(s)) % N].set(cur)
            buf = jnp.zeros((N,) + b.shape, b.dtype).at[i].set(b)
            return jax.lax.while_loop(lambda c: test(c[0]), body, (start, b, buf))[2].reshape(-1, b.shape[-1])
        return _on_x(block, P("X", None), P())(x)
    return fn


def allreduce_rings_one_way(a, w):
    """Q3.1's all-reduce matmul with its reduce-scatter ring and its all-gather ring both to the right (the
    model runs them in opposite directions): one after the other, they take the same links and time."""
    def block(ab, wb):
        ny, idx = jax.lax.axis_size("Y"), jax.lax.axis_index("Y")
        width = wb.shape[1] // ny
        right = [(j, (j + 1) % ny) for j in range(ny)]

        def share(j):
            return ab @ jax.lax.dynamic_slice_in_dim(wb, j % ny * width, width, 1)
        acc = share(idx + 1)
        for step in range(1, ny):
            acc = jax.lax.ppermute(acc, "Y", right) + share(idx + 1 - step)
        mine = (idx + 2 - ny) % ny
        out = jax.lax.dynamic_update_slice_in_dim(jnp.zeros((ab.shape[0], wb.shape[1]), ab.dtype), acc, mine * width, 1)
        cur, where = acc, mine
        for _ in range(1, ny):
            cur, where = jax.lax.ppermute(cur, "Y", right), (where - 1) % ny
            out = jax.lax.dynamic_update_slice_in_dim(out, cur, where * width, 1)
        return out
    return jax.shard_map(block, mesh=course.mesh(X=2, Y=4), in_specs=(P("X", "Y"), P("Y", None)),
                         out_specs=P("X", None), check_vma=False)(a, w)


def gather_in_data_loop(a, b):
    """Case 2's all-gather, five times, in a loop whose bound reads the data."""
    def block(a_blk, b_full):
        n = 5 + (a_blk[0, 0] != a_blk[0, 0]).astype(jnp.int32)

        def body(c):
            k, acc = c
            return k + 1, acc + jax.lax.all_gather(a_blk, "X", axis=1, tiled=True) / 5
        gathered = jax.lax.while_loop(lambda c: c[0] < n, body, (0, jnp.zeros((a_blk.shape[0], N * a_blk.shape[1]))))[1]
        return gathered @ b_full
    return _on_x(block, (P(None, "X"), P()), P())(a, b)


def case3_by_jit(a, b):
    """Case 3 left to the compiler: XLA on CPU compiles its reduce-scatter to an all-reduce and a slice."""
    return jax.lax.with_sharding_constraint(a @ b, NamedSharding(course.mesh(X=N), P("X", None)))


def hierarchical_whole_array(b):
    """The hierarchical all-reduce with the cross-node step over the whole array: Y times the bytes."""
    def block(v):
        whole = jax.lax.psum(v[0, 0], "X")
        part = jax.lax.psum_scatter(whole, "Y", scatter_dimension=0, tiled=True)
        return jax.lax.all_gather(part, "Y", axis=0, tiled=True)
    return jax.shard_map(block, mesh=course.mesh(X=2, Y=4), in_specs=P("X", "Y"), out_specs=P(), check_vma=False)(b)


def case2_wasted_as(dtype):
    """Case 2's all-gather of ten times the bytes it needs, in ``dtype`` (complex64 was once weighed as 4 bytes
    whatever its size, so the waste earned full marks where float32's earned half)."""
    def f(x, y):
        def block(xb, yf):
            big = jnp.tile(xb, (1, 10)).astype(dtype)
            g = jax.lax.all_gather(big, "X", axis=1, tiled=True)
            xf = jnp.real(g).astype(jnp.float32).reshape(64, 8, 10, 32)[:, :, 0, :].reshape(64, 256)
            return xf @ yf
        return _on_x(block, (P(None, "X"), P()), P())(x, y)
    return f


def case2_with_an_empty_permute(x, y):
    """Case 2 right, and a permute of no pairs (a comprehension over an empty range): it moves nothing, and it
    once made the grader blame itself (``dense<>`` read as a number)."""
    def block(xb, yf):
        out = jax.lax.all_gather(xb, "X", axis=1, tiled=True) @ yf
        return out + 0 * jax.lax.ppermute(xb, "X", perm=[]).sum()
    return _on_x(block, (P(None, "X"), P()), P())(x, y)


CASES = [
    # (question, program, score, diagnosis, words of its message)
    pytest.param(CH03["ch03-cx4-ring-allgather"], ring_left, 1.0, "correct", "Correct", id="ring the other way"),
    pytest.param(CH03["ch03-cx4-ring-allgather"], ring_jumps, 0.5, "traffic:collective-permute",
                 "links in one direction on average", id="permutes that jump"),
    pytest.param(CH03["ch03-cx4-ring-allgather"], ring_whole_buffer, 0.5, "traffic:collective-permute",
                 "8.0x the bytes", id="the whole buffer each step"),
    pytest.param(CH03["ch03-cx4-ring-allgather"], lambda x: x, 0.0, "unchanged", "nothing moved",
                 id="the input returned"),
    pytest.param(CH03["ch03-cx4-bidi-allgather"], bidi_one_way, 0.5, "traffic:collective-permute:one_way",
                 "one direction of the links 2.0x", id="bidirectional in name only"),
    pytest.param(CH03["ch03-cx4-bidi-allgather"], ring_in_while(lambda s: s < 2 * (N - 1), 0, 2, lambda s: s // 2 + 1),
                 0.5, "collectives:collective-permute", "runs 7 x collective-permute",
                 id="a one-way loop stepping by two to fourteen"),
    pytest.param(CH03["ch03-cx4-ring-allgather"], ring_in_while(lambda s: s <= 6, 0, 1, lambda s: s + 1), 1.0,
                 "correct", "Correct", id="a loop to s <= 6"),
    pytest.param(CH03["ch03-cx4-ring-allgather"], ring_in_while(lambda s: s > 0, 7, -1, lambda s: 8 - s), 1.0,
                 "correct", "Correct", id="a loop counting down"),
    pytest.param(CH03["ch03-cx4-ring-allgather"],
                 ring_in_while(lambda s: (s < N - 1) | (s < 63), 0, 1, lambda s: s + 1), 0.5,
                 "collectives:collective-permute", "once per step of a loop of unknown length",
                 id="a loop of a condition in two parts (63 permutes)"),
    pytest.param(CH10["ch10-cx6-allreduce-matmul"], allreduce_rings_one_way, 1.0, "correct", "Correct",
                 id="two rings the same way round"),
    pytest.param(CH03["ch03-cx2-case2-allgather"], gather_in_data_loop, 0.5, "collectives:unknown_count",
                 "whose length it cannot read", id="a loop the data bounds"),
    pytest.param(CH03["ch03-cx2-case3-reducescatter"], case3_by_jit, 0.5, "collectives:placed",
                 "placed 1 reduce-scatter", id="jit on a reduce-scatter question"),
    pytest.param(CH12["ch12-cx2-hierarchical-allreduce"], hierarchical_whole_array, 0.5, "traffic:all-reduce",
                 "4.0x the bytes", id="the whole array across nodes"),
    pytest.param(CH03["ch03-cx2-case2-allgather"], case2_wasted_as(jnp.float32), 0.5, "traffic:all-gather",
                 "10.0x the bytes", id="ten times the bytes as float32"),
    pytest.param(CH03["ch03-cx2-case2-allgather"], case2_wasted_as(jnp.complex64), 0.5, "traffic:all-gather",
                 "20.0x the bytes", id="ten times the bytes as complex64"),
    pytest.param(CH03["ch03-cx2-case2-allgather"], case2_with_an_empty_permute, 1.0, "correct", "Correct",
                 id="a permute of no pairs"),
]


@pytest.mark.parametrize(("q", "fn", "score", "diagnosis", "words"), CASES)
def test_each_program_earns_what_it_is_worth_in_both_judges(q, fn, score, diagnosis, words):
    v = program.judge(q, recorded(q, fn))
    assert (v.score, v.diagnosis) == (score, diagnosis), v.message
    assert words in v.message or words in str(v.data), v.message
    s = kinds.selfcheck_live(printed(q), q.qid, fn, recorded(q, fn))
    assert (s.score, s.diagnosis) == (score, diagnosis), s.message


def test_a_permute_counts_the_links_it_crosses_the_shorter_way_round():
    hop = functools.partial(Collective, "collective-permute", ("X",), "f32", (256,), 2, 1)  # 1 KiB a device

    def moved(*hops):
        t = traffic([hop(h) for h in hops])
        return t["collective-permute"], t[BUSIER]
    assert moved((1.0, 0.0)) == (1024.0, 1024.0)
    assert moved((3.0, 0.0)) == (3072.0, 3072.0)  # three links for a jump of three
    assert moved((1.0, 0.0), (0.0, 1.0)) == (2048.0, 1024.0)  # both ways at once: the busier carries half
    assert moved((1.0, 0.0), (1.0, 0.0)) == (2048.0, 2048.0)  # one way, twice
    assert moved((0.5, 0.5)) == (1024.0, 512.0)  # a swap of neighbours: each device sends once
    unknown = Collective("all-gather", ("X",), "f32", (256,), 8, None)
    assert traffic([unknown]) == {}  # a loop of unknown length is judged by its count, not measured


def test_the_table_holds_every_models_traffic_and_nothing_else():
    """Every program a student may be dealt (every variant, every mesh choice) has its model's numbers, and the
    table keeps no entry that no record asks for: ``scaling-course release`` was run after the records changed."""
    entries, todo = traffic_entries()
    assert not todo, f"{len(todo)} program specs not measured, e.g. {todo[0][0].qid}: run scaling-course release"
    assert entries == model_traffic.table()
    assert all(q.qid in entries for name in chapter_names() for q in model_traffic.programs_of(load_chapter(name)))


def weight_stationary_summed_an_axis_at_a_time(x, w_in, w_out):
    """Chapter 8's weight-stationary MLP with its partial outputs summed over Y, then over X: 1.43x the bytes of
    one psum over both axes (2 x 3/4 + 2 x 1/2 of the array, where one ring over all 8 moves 2 x 7/8)."""
    def block(xb, wi, wo):
        return jax.lax.psum(jax.lax.psum(jnp.maximum(xb @ wi, 0.0) @ wo, "Y"), "X")

    return jax.shard_map(block, mesh=course.mesh(X=2, Y=4), in_specs=(P(), P(None, ("X", "Y")), P(("X", "Y"), None)),
                         out_specs=P())(x, w_in, w_out)


def test_a_sum_done_an_axis_at_a_time_is_told_so():
    """Half marks for the bytes, as before; but the sentence asked whether a collective was applied to a whole array
    where a block would do, which sent the student looking for a mistake they had not made."""
    from tests.chapter_checks import both_judges

    q = load_chapter("ch08_applied_inference")["ch08-cx6-weight-stationary-mlp"]
    for v in both_judges(q, weight_stationary_summed_an_axis_at_a_time):
        assert (v.score, v.diagnosis) == (0.5, "traffic:all-reduce"), v.message
        assert "1.4x" in v.message and "a mesh axis at a time" in v.message and "whole array where" not in v.message
