"""Builders that turn a test case (a "probe": a public one, or one the grader drew for the submission)
into the arguments a student's function is called with in the notebook, e.g. a jitted matmul and random
arrays of the probe's shapes. A record names its builder (``Function.builder``).

The kernel calls them to record a function answer; the grader judges recorded outputs against
``reference(**probe)`` and calls a builder only to run a record's slips, for their hints. Both sides
must build the same arguments from a probe, so the builders live in the core.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

_BUILDERS: dict[str, Callable[[dict[str, Any]], tuple[tuple, dict]]] = {}


def builder(fn: Callable[[dict[str, Any]], tuple[tuple, dict]]) -> Callable:
    _BUILDERS[fn.__name__] = fn
    return fn


def build(name: str, probe: dict[str, Any]) -> tuple[tuple, dict]:
    """Positional and keyword arguments for one call: without a builder, the probe's values as
    ``argument`` hands them over."""
    if not name:
        return (), {k: argument(v) for k, v in probe.items()}
    return _BUILDERS[name](probe)


def argument(v: Any) -> Any:
    """One probe value as the student's function receives it, the rule every question's prose states:
    a list of numbers all of one type (all ints or all floats), flat or nested with rows of equal length,
    is a numpy array (int64 or float64) of that shape; anything else arrives as it is, so a list of flags
    or names, or of mixed rows such as [children, bytes/s] pairs, stays a list."""
    shape = array_shape(v)
    return np.asarray(v) if shape else v


def array_shape(v: Any) -> tuple[int, ...] | None:
    """The shape of ``v`` when ``argument`` makes it an array, else None."""
    if not isinstance(v, list) or not v:
        return None
    kinds = set()

    def walk(x: Any) -> tuple[int, ...] | None:
        if isinstance(x, list):
            rows = [walk(y) for y in x]
            if not x or any(r is None or r != rows[0] for r in rows):
                return None
            return (len(x), *rows[0])
        if isinstance(x, bool) or not isinstance(x, int | float):
            return None
        kinds.add(type(x))
        return ()

    shape = walk(v)
    return shape if shape is not None and len(kinds) == 1 else None


@builder
def contraction(probe: dict[str, Any]) -> tuple[tuple, dict]:
    """``(f, x, y)``: ``f`` contracts x and y with the probe's einsum (x and y random, never arange,
    which can hide indexing bugs); int8 inputs when the probe says so."""
    import jax.numpy as jnp

    spec, dtype, out = probe["einsum"], probe["dtype"], probe.get("out_dtype")
    # numpy draws the data: JAX's own random functions compile once per new shape, and each submission
    # is graded on shapes of its own.
    rng = np.random.default_rng(probe.get("seed", 0))
    shapes = [tuple(s) for s in probe["shapes"]]
    if dtype == "int8":
        x, y = (jnp.asarray(rng.integers(-100, 100, s, dtype=np.int8)) for s in shapes)
    else:
        x, y = (jnp.asarray(rng.standard_normal(s, dtype=np.float32)).astype(dtype) for s in shapes)

    def f(a, b):
        return jnp.einsum(spec, a, b, preferred_element_type=out)
    return (f, x, y), {}
