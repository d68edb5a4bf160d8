"""Measure the roofline of the machine the notebook runs on: matmul throughput against batch size.

Timings are for the student's own exploration and are never graded: CPU timings vary from run to
run and machine to machine. The same code runs on a laptop CPU and on a GPU. The matmul's intensity,
which the plot needs beside the timings, is Chapter 1's question: the notebook takes the student's own
formula for it, so this module does not compute it.
"""

from __future__ import annotations

import os
import time

import numpy as np


def matmul_throughput(batches, D: int = 2048, F: int = 2048, dtype: str = "float32", repeats: int = 5):
    """FLOP/s achieved by x[B, D] @ w[D, F] on the default device, for each B (best of ``repeats``).

    While nbgrader runs the notebook (autograde, or the Validate button's fresh kernel, whose outputs
    nobody sees) this returns NaN at once: timings never count towards a grade, and measuring would only
    slow grading and validation down and make them noisy."""
    if os.environ.get("NBGRADER_EXECUTION"):
        return np.full(len(batches), np.nan)
    import jax

    f = jax.jit(lambda x, w: x @ w)
    key = jax.random.key(0)
    w = jax.random.normal(key, (D, F), dtype=dtype)
    device = jax.devices()[0]
    w = jax.device_put(w, device)
    rates = []
    for b in batches:
        x = jax.device_put(jax.random.normal(jax.random.fold_in(key, int(b)), (int(b), D), dtype=dtype), device)
        f(x, w).block_until_ready()  # compile and warm up outside the timing
        best = float("inf")
        for _ in range(repeats):
            t0 = time.perf_counter()
            f(x, w).block_until_ready()
            best = min(best, time.perf_counter() - t0)
        rates.append(2 * int(b) * D * F / best)
    return np.asarray(rates)

