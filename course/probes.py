"""Builders that turn a test case (a "probe": a public one, or one the grader drew for the submission)
into the arguments a student's function is called with in the notebook, e.g. a jitted matmul and random
arrays of the probe's shapes.

The grader never calls these: it judges recorded outputs against ``reference(**probe)``.
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
    import jax
    import jax.numpy as jnp

    spec, dtype, out = probe["einsum"], probe["dtype"], probe.get("out_dtype")
    kx, ky = jax.random.split(jax.random.key(probe.get("seed", 0)))
    shapes = [tuple(s) for s in probe["shapes"]]
    if dtype == "int8":
        x, y = (jax.random.randint(k, s, -100, 100, dtype=jnp.int32).astype(jnp.int8)
                for k, s in zip((kx, ky), shapes, strict=True))
    else:
        x, y = (jax.random.normal(k, s, dtype=dtype) for k, s in zip((kx, ky), shapes, strict=True))

    def f(a, b):
        return jnp.einsum(spec, a, b, preferred_element_type=out)
    return (f, x, y), {}
