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
    """Positional and keyword arguments for one call; lists of numbers become numpy arrays."""
    if not name:
        return (), {k: np.asarray(v) if _numbers(v) else v for k, v in probe.items()}
    return _BUILDERS[name](probe)


def _numbers(v: Any) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(x, int | float) and not isinstance(x, bool) for x in v)


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
