"""What a sharded program communicates: the collectives it runs and the bytes they move.

``inspect(fn, *args)`` lists the collectives of a JAX function, as the grader sees them: kind, mesh
axes, dtype, count (loops included) and bytes per device. ``report`` prints that list with the total
your program moves, beside the time your own formula predicts for it ("your formula predicts ... us;
your program runs 1 collective, ... bytes moved per device in all").

What a program moves is measured here; how long that takes on a chip's links is what the chapters ask
you to derive, so nothing here prices a collective (docs/architecture.md, "What a student imports
answers no question").
"""

from __future__ import annotations

from autograder.collectives import Collective, inspect_text


def inspect(fn, *args) -> list[Collective]:
    """Collectives of ``fn`` for these (sharded) arguments, read from its lowered program."""
    import jax

    mesh = next((a.sharding.mesh for a in args if hasattr(getattr(a, "sharding", None), "mesh")), None)
    axes = tuple(mesh.shape.items()) if mesh is not None else ()
    return inspect_text(jax.jit(fn).lower(*args).as_text(), axes)


def report(fn, *args, predicted_s: float | None = None, one_way_bytes_per_s: float | None = None) -> str:
    """One line per collective of ``fn`` with the bytes it moves, their total, and your prediction
    beside them. ``one_way_bytes_per_s``: the links you priced them on, restated beside your prediction."""
    found = inspect(fn, *args)
    moved = sum(c.bytes_per_device * (c.count or 1) for c in found)
    runs = f"{len(found)} collective{'' if len(found) == 1 else 's'}"
    head = f"your program runs {runs}, {moved:,.0f} bytes moved per device in all" if found else \
        "your program runs no collectives"
    if predicted_s is not None:
        links = f" on links of {one_way_bytes_per_s:.3g} B/s each way" if one_way_bytes_per_s else ""
        head = f"your formula predicts {predicted_s * 1e6:.3g} us{links}; " + head
    return "\n".join([head, *(f"  {c.describe()}" for c in found)])
