"""An all_to_all whose operand is one block repeated once per device sends every device the same block: it is an
all-gather, whatever its op is called, and the census weighs it as one (``collectives.inspect_text``). So a program
that gathers the experts, or sends every token to every device, through all_to_all is judged as gathering, never
as the routing the question asks for, however close its bytes come to the model's."""

import functools

import jax
import jax.numpy as jnp
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import course
from autograder.questions import load_chapter
from course import comms
from tests.chapter_checks import both_judges

CH10 = load_chapter("ch10_jax")
RAGGED, A2A = CH10["ch10-q2-moe-ragged"], CH10["ch10-cx5-moe-all-to-all"]
MESH = course.mesh(X=8)


def _gather_by_a2a(a):
    """An all_gather written as one all_to_all: the block repeated once per device, so each peer receives all of it."""
    n = jax.lax.axis_size("X")
    return jax.lax.all_to_all(jnp.tile(a, (n,) + (1,) * (a.ndim - 1)), "X", 0, 0, tiled=True)


def _ragged(block):
    """The ragged question's program around one device's ``block``."""
    @functools.wraps(block)
    def program(x, logits, w):
        return jax.shard_map(block, mesh=course.mesh(X=8), in_specs=(P("X", None), P("X", None), P("X", None, None)),
                             out_specs=P("X", None))(x, logits, w)
    return program


@_ragged
def experts_by_one_a2a(xb, lb, wb):  # f32[S/X, D], f32[S/X, E], f32[E/X, D, F]
    """Every expert on every device through one all_to_all; no token moves."""
    w_all = _gather_by_a2a(wb)  # f32[E, D, F]
    return jnp.einsum("sd,sdf->sf", xb, w_all[jnp.argmax(lb, axis=1)])


@_ragged
def experts_by_two_a2a(xb, lb, wb):
    """The same, the experts' rows in two halves: two all_to_alls, the count the question asks for."""
    h = wb.shape[1] // 2
    w_all = jnp.concatenate([_gather_by_a2a(wb[:, :h]), _gather_by_a2a(wb[:, h:])], axis=1)
    return jnp.einsum("sd,sdf->sf", xb, w_all[jnp.argmax(lb, axis=1)])


@_ragged
def tokens_to_everyone(xb, lb, wb):
    """Every token and its logits to every device through one all_to_all; each device runs its experts' tokens of the
    whole batch, and a second all_to_all sends the rows home."""
    n, local = jax.lax.axis_size("X"), wb.shape[0]
    both = _gather_by_a2a(jnp.concatenate([xb, lb], axis=1))  # f32[S, D + E]: every token, on every device
    xs, ls = both[:, :xb.shape[1]], both[:, xb.shape[1]:]
    e = jnp.argmax(ls, axis=1) - jax.lax.axis_index("X") * local  # a local expert, or outside
    mine = (e >= 0) & (e < local)
    y = jnp.einsum("sd,sdf->sf", xs, wb[jnp.clip(e, 0, local - 1)]) * mine[:, None]  # f32[S, F]
    back = jax.lax.all_to_all(y, "X", 0, 0, tiled=True)  # f32[X * S/X, F]
    return back.reshape(n, xb.shape[0], -1).sum(axis=0)


@_ragged
def tokens_to_everyone_stacked(xb, lb, wb):
    """The token broadcast with its copies stacked (``jnp.stack``) rather than tiled."""
    n, local = jax.lax.axis_size("X"), wb.shape[0]
    row = jnp.concatenate([xb, lb], axis=1)
    both = jax.lax.all_to_all(jnp.stack([row] * n), "X", 0, 0, tiled=True).reshape(-1, row.shape[1])
    xs, ls = both[:, :xb.shape[1]], both[:, xb.shape[1]:]
    e = jnp.argmax(ls, axis=1) - jax.lax.axis_index("X") * local
    y = jnp.einsum("sd,sdf->sf", xs, wb[jnp.clip(e, 0, local - 1)]) * ((e >= 0) & (e < local))[:, None]
    back = jax.lax.all_to_all(y, "X", 0, 0, tiled=True)
    return back.reshape(n, xb.shape[0], -1).sum(axis=0)


def experts_by_one_a2a_cx5(x, w):
    def block(xb, wb):  # f32[G/X, E, C, D], f32[E/X, D, F]
        return jnp.einsum("gecd,edf->gecf", xb, _gather_by_a2a(wb))
    return jax.shard_map(block, mesh=course.mesh(X=8), in_specs=(P("X", None, None, None), P("X", None, None)),
                         out_specs=P("X", None, None, None))(x, w)


REFUSED = [(RAGGED, experts_by_one_a2a, "collectives:all-gather"),
           (RAGGED, experts_by_two_a2a, "collectives:all-gather"),
           (RAGGED, tokens_to_everyone, "collectives:all-gather,all-to-all"),
           (RAGGED, tokens_to_everyone_stacked, "collectives:all-gather,all-to-all"),
           (A2A, experts_by_one_a2a_cx5, "collectives:all-gather")]


@pytest.mark.parametrize(("q", "fn", "diagnosis"), REFUSED, ids=[fn.__name__ for _, fn, _ in REFUSED])
def test_an_all_to_all_of_copies_is_judged_as_the_gather_it_is(q, fn, diagnosis):
    graded, checked = both_judges(q, fn)
    for v in (graded, checked):
        assert (v.score, v.diagnosis) == (0.5, diagnosis), v.message


def _arg(shape, spec):
    return jax.device_put(jax.random.normal(jax.random.key(1), shape), NamedSharding(MESH, spec))


def _one(fn, *args):
    found = comms.inspect(jax.shard_map(fn, mesh=MESH, in_specs=tuple(P("X") for _ in args), out_specs=P("X")),
                          *args)
    assert len(found) == 1, [c.describe() for c in found]
    return found[0]


@pytest.mark.parametrize("copies", [
    lambda a: jnp.tile(a, (8, 1)),
    lambda a: jnp.concatenate([a] * 8),
    lambda a: jnp.stack([a] * 8).reshape(-1, a.shape[1]),
    lambda a: jnp.broadcast_to(a[None], (8, *a.shape)).reshape(-1, a.shape[1]).astype(jnp.float32),
    lambda a: jnp.tile(a.T, (1, 8)).T,
], ids=["tile", "concatenate", "stack", "broadcast", "transposed"])
def test_the_census_weighs_an_all_to_all_of_copies_as_an_all_gather_of_one(copies):
    c = _one(lambda a: jax.lax.all_to_all(copies(a), "X", 0, 0, tiled=True), _arg((128, 32), P("X")))
    assert (c.kind, c.axes, c.operand_shape, c.group_size) == ("all-gather", ("X",), (16, 32), 8)
    assert c.bytes_per_device == 7 * 16 * 32 * 4  # what the all_to_all moves: 7/8 of its f32[128, 32]


@pytest.mark.parametrize("operand", [
    lambda a: a,  # sixteen rows of its own: a real exchange
    lambda a: jnp.tile(a[:8], (2, 1)),  # two copies, one per half: each device still sends 8 different blocks
    lambda a: jnp.tile(a[:, :4], (1, 8)),  # copies along the other axis, not the one split among the devices
    lambda a: jnp.zeros_like(a).at[jnp.argsort(a[:, 0])].set(a),  # buckets of tokens, as the ragged model fills
], ids=["own", "halves", "other-axis", "scatter"])
def test_an_all_to_all_of_distinct_blocks_stays_one(operand):
    c = _one(lambda a: jax.lax.all_to_all(operand(a), "X", 0, 0, tiled=True), _arg((128, 32), P("X")))
    assert c.kind == "all-to-all"
