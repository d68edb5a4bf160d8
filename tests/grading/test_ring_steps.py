"""A ring step is the permutes a program sends to the same neighbours at once: ``ppermute`` of a tuple lowers to
one permute per array, and a step that sends its block in two halves, as one call or two calls side by side,
is still one step of the ring. Before, such an honest ring counted 14 permutes for 7 steps and earned half.
Two permutes in a row where the second sends what the first received are two steps (two hops), and a ring whose
steps cross past a neighbour is still refused."""

import jax
import jax.numpy as jnp
import pytest
from jax.sharding import PartitionSpec as P

import course
from autograder.collectives import census, inspect_text
from autograder.questions import load_chapter
from tests.chapter_checks import both_judges

RING = load_chapter("ch10_jax")["ch10-cx1-ring-all-gather"]
N = 8
RIGHT = [(j, (j + 1) % N) for j in range(N)]


def _ring(send):
    """An all-gather over X whose step sends the travelling block with ``send`` (two halves at a time)."""
    def block(b):
        i, rows = jax.lax.axis_index("X"), b.shape[0]
        out = jax.lax.dynamic_update_slice_in_dim(jnp.zeros((N * rows, b.shape[1]), b.dtype), b, i * rows, 0)
        top, bottom = b[: rows // 2], b[rows // 2:]
        for k in range(1, N):
            top, bottom = send(top, bottom)
            out = jax.lax.dynamic_update_slice_in_dim(out, jnp.concatenate([top, bottom]), (i - k) % N * rows, 0)
        return out

    return lambda x: jax.shard_map(block, mesh=course.mesh(X=N), in_specs=P("X", None), out_specs=P(),
                                   check_vma=False)(x)


def as_tuple(top, bottom):
    return jax.lax.ppermute((top, bottom), "X", RIGHT)


def side_by_side(top, bottom):
    return jax.lax.ppermute(top, "X", RIGHT), jax.lax.ppermute(bottom, "X", RIGHT)



@pytest.mark.parametrize("send", [as_tuple, side_by_side], ids=lambda f: f.__name__)
def test_a_step_sent_in_two_halves_is_one_step(send):
    grade, check = both_judges(RING, _ring(send))
    assert grade.score == 1.0, (grade.diagnosis, grade.message)
    assert check.score == 1.0, (check.diagnosis, check.message)


def _stated(fn) -> list:
    x = jax.device_put(jnp.ones((64, 8), jnp.float32), jax.NamedSharding(course.mesh(X=N), P("X", None)))
    return inspect_text(jax.jit(fn).lower(x).as_text(), [("X", N)])


def test_the_census_counts_steps_and_the_traffic_counts_every_array():
    found = _stated(_ring(as_tuple))
    assert census(found) == {"collective-permute": N - 1}
    assert census(found, launches=False) == {"collective-permute": 2 * (N - 1)}
    assert sum(c.bytes_per_device * c.count for c in found) == (N - 1) * 8 * 8 * 4  # every row of every block


def test_a_permute_of_what_was_just_received_is_a_second_step():
    """Two hops in a row: the second permute sends the first one's result, so the two cannot run at once."""
    def twice(top, bottom):
        return jax.lax.ppermute(jax.lax.ppermute(top, "X", RIGHT), "X", RIGHT), bottom

    assert census(_stated(_ring(twice))) == {"collective-permute": 2 * (N - 1)}


def test_a_half_written_into_the_result_before_the_other_is_sent_is_the_same_step():
    """Each half placed in the result as it arrives, then the other half sent: no permute sends what another
    received, so they are one step, with work between them."""
    ring = load_chapter("ch03_sharding")["ch03-cx4-ring-allgather"]

    def block(b):
        i, rows = jax.lax.axis_index("X"), b.shape[0]
        out = jax.lax.dynamic_update_slice_in_dim(jnp.zeros((N * rows, b.shape[1]), b.dtype), b, i * rows, 0)
        top, bottom = b[: rows // 2], b[rows // 2:]
        for k in range(1, N):
            top = jax.lax.ppermute(top, "X", RIGHT)
            out = jax.lax.dynamic_update_slice_in_dim(out, top, (i - k) % N * rows, 0)
            bottom = jax.lax.ppermute(bottom, "X", RIGHT)
            out = jax.lax.dynamic_update_slice_in_dim(out, bottom, (i - k) % N * rows + rows // 2, 0)
        return out

    def halves(x):
        return jax.shard_map(block, mesh=course.mesh(X=N), in_specs=P("X", None), out_specs=P(), check_vma=False)(x)

    assert census(_stated(halves)) == {"collective-permute": N - 1}
    for verdict in both_judges(ring, halves):
        assert verdict.score == 1.0, (verdict.diagnosis, verdict.message)


def test_a_dummy_between_two_hops_does_not_join_them():
    """A tiny permute sent after each hop made the next hop look like a companion of the permute before it: seven
    hops in a row read as one step. A permute of anything a step received starts the next step, whatever lies
    between."""
    def hops_with_dummies(x):
        def block(b):
            cur, dummies = b, []
            for _ in range(N - 1):
                cur = jax.lax.ppermute(cur, "X", RIGHT)
                dummies.append(jax.lax.ppermute(b[:1, :1], "X", RIGHT))
            return cur + 0 * sum(d.sum() for d in dummies)

        return jax.shard_map(block, mesh=course.mesh(X=N), in_specs=P("X", None), out_specs=P("X", None))(x)

    assert census(_stated(hops_with_dummies)) == {"collective-permute": N - 1}
