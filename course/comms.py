"""What a sharded program communicates, and how long that takes on real links.

``inspect(fn, *args)`` lists the collectives of a JAX function, as the grader sees them: kind, mesh
axes, dtype, count (loops included) and bytes per device. ``report`` puts the time those bytes take
on a chip's links beside the time your own formula predicts, e.g. "your formula predicts 11.6 us;
your program moves bytes that take 23.3 us".

Time model (Part 3, bandwidth-bound, one mesh axis with wraparound, links used in both directions):
an all-gather or reduce-scatter of V bytes in total takes V / W_bidi, an all-reduce 2 V / W_bidi, an
all-to-all V / (4 W_bidi), and a collective-permute sends its operand over one link one way. Latency
(about 1 us per hop) is ignored: it matters only for tiny payloads.
"""

from __future__ import annotations

from autograder.collectives import Collective, inspect_text

from . import hardware as hw


def inspect(fn, *args) -> list[Collective]:
    """Collectives of ``fn`` for these (sharded) arguments, read from its lowered program."""
    import jax

    mesh = next((a.sharding.mesh for a in args if hasattr(getattr(a, "sharding", None), "mesh")), None)
    axes = tuple(mesh.shape.items()) if mesh is not None else ()
    return inspect_text(jax.jit(fn).lower(*args).as_text(), axes)


def ring_seconds(c: Collective, one_way_bytes_per_s: float) -> float:
    """Seconds for all executions of one collective under the book's bandwidth model."""
    bidi = 2 * one_way_bytes_per_s
    # V, the bytes of the whole array: gathered from 1/N shards, or reduced from full-size partials.
    sharded_total = c.operand_bytes * c.group_size
    each = {"all-gather": sharded_total / bidi, "reduce-scatter": c.operand_bytes / bidi,
            "all-reduce": 2 * c.operand_bytes / bidi, "all-to-all": sharded_total / (4 * bidi),
            "collective-permute": c.operand_bytes / one_way_bytes_per_s}[c.kind]
    return each * (c.count or 1)


def report(fn, *args, predicted_s: float | None = None,
           one_way_bytes_per_s: float = hw.TPU_V5E.ici_bytes_per_s_per_link) -> str:
    """One line per collective, their total time on these links, and your prediction beside it."""
    found = inspect(fn, *args)
    lines = [f"  {c.describe()}: {ring_seconds(c, one_way_bytes_per_s) * 1e6:.3g} us" for c in found]
    total = sum(ring_seconds(c, one_way_bytes_per_s) for c in found)
    head = f"your program moves bytes that take {total * 1e6:.3g} us"
    if predicted_s is not None:
        head = f"your formula predicts {predicted_s * 1e6:.3g} us; " + head
    return "\n".join([head, *lines]) if lines else head + " (it runs no collectives)"
