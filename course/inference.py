"""Inference: the constants Parts 7 and 8 state, and pictures of the step-time model.

Book: Part 7 "All About Transformer Inference", https://jax-ml.github.io/scaling-book/inference/ and
Part 8 "Serving LLaMA 3-70B on TPUs", https://jax-ml.github.io/scaling-book/applied-inference/

Inputs only, plus plots: the chapters ask students to derive the step-time model (critical batches,
KV-cache sizes, step times, memory and sharding limits), so no function here returns one of those
quantities (docs/architecture.md; ``tests/test_library_rule.py``). The plots draw the model for numbers the
student has already found, and return the Axes. The references' own cost model lives in
``solutions/_derived/inference.py``.

The model the plots draw (Part 7, "A rough model of latency"): a decode step reads every weight once
and each sequence's KV cache once; the weight matmuls take the larger of their FLOP time and the weight
read, attention is bandwidth-bound, and the step is their sum. Prefill is the larger of its FLOP time
(at an MFU) and one read of the weights.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from . import hardware as hw
from .models import BOOK

PART7 = BOOK + "inference/"
PART8 = BOOK + "applied-inference/"

# --- constants the two chapters state beyond course.hardware and course.models ---------------------
# The book's round W_hbm / W_ici ("beta ~ 8", Part 7, "Sharding for generation"); the pinned v5e
# constants give 8.2e11 / 9e10 = 9.1. Questions that reproduce the book's numbers state 8.
BETA_BOOK = 8
# Legal TPU v5e slices, named as the book names them ("4x2" for Cloud's 2x4) with their chip counts;
# Cloud TPU v5e offers 1x1, 2x2, 2x4, 4x4, 4x8, 8x8, 8x16 and 16x16
# (https://cloud.google.com/tpu/docs/v5e, "Supported configurations").
V5E_SLICES: dict[str, int] = {"1x1": 1, "2x2": 4, "4x2": 8, "4x4": 16, "4x8": 32, "8x8": 64, "8x16": 128,
                              "16x16": 256}
PREFILL_MFU = 0.4  # Part 8, "What about prefill?": the utilisation assumed for an 8k prefill
MEDIAN_DECODE_TOKENS = 512  # Part 8: the decode length assumed when turning steps into queries


# --- pictures ------------------------------------------------------------------------------------------

def plot_decode_latency(batches: np.ndarray, kv_bytes_per_seq: float, weight_bytes: float, param_count: float,
                        n_chips: int, chip: hw.Chip = hw.TPU_V5E, label: str = "", ax=None):
    """Decode step time against batch with its three rooflines: weight loading (flat), weight
    matmul FLOPs (rising from zero) and the KV caches (rising from zero); the step is KV + the larger
    of the other two. The critical batch is marked where FLOPs overtake weight loading."""
    ax = _axes(ax)
    b = np.asarray(batches, dtype=float)
    bandwidth = n_chips * chip.hbm_bytes_per_s
    kv, flops = b * kv_bytes_per_seq / bandwidth, 2 * b * param_count / (n_chips * chip.bf16_flops_per_s)
    weights = np.full_like(b, weight_bytes / bandwidth)
    ax.plot(b, 1e3 * (kv + np.maximum(flops, weights)), linewidth=2.5, label=f"decode step {label}".strip())
    ax.plot(b, 1e3 * weights, "--", label="roof: read the weights")
    ax.plot(b, 1e3 * flops, "--", label="roof: weight matmul FLOPs")
    ax.plot(b, 1e3 * kv, ":", label="read the KV caches")
    crossing = b[np.argmax(flops >= weights)] if (flops >= weights).any() else None
    if crossing is not None:
        ax.axvline(crossing, color="gray", linewidth=1, label="FLOPs overtake the weight read")
    ax.set(xlabel="batch B (sequences)", ylabel="ms per step", title="Decode: latency against batch")
    ax.legend(fontsize="small")
    return ax


def plot_prefill_latency(tokens: np.ndarray, weight_bytes: float, param_count: float, n_chips: int,
                         chip: hw.Chip = hw.TPU_V5E, mfu: float = 1.0, ax=None):
    """Prefill time against the number of tokens processed at once, log-log: the FLOP roof
    2 P tokens / (n C mfu) and the floor of reading the weights once; prefill is the larger."""
    ax = _axes(ax)
    t = np.asarray(tokens, dtype=float)
    flops = 2 * param_count * t / (n_chips * chip.bf16_flops_per_s * mfu)
    load = np.full_like(t, weight_bytes / (n_chips * chip.hbm_bytes_per_s))
    ax.plot(t, 1e3 * np.maximum(flops, load), linewidth=2.5, label="prefill")
    ax.plot(t, 1e3 * flops, "--", label="roof: FLOPs")
    ax.plot(t, 1e3 * load, "--", label="floor: read the weights")
    ax.set(xscale="log", yscale="log", xlabel="tokens processed at once (B x T)", ylabel="ms",
           title="Prefill: latency against tokens")
    ax.legend(fontsize="small")
    return ax


def plot_frontier(param_count: float, weight_bytes: float, kv_bytes_per_token: float, contexts: Sequence[int],
                  batches: np.ndarray, n_chips: int, chip: hw.Chip = hw.TPU_V5E, ax=None):
    """Throughput per chip against step latency, one curve per context length (Part 8's Pareto plot),
    each curve stopping where the caches no longer fit beside the weights."""
    ax = _axes(ax)
    b = np.asarray(batches, dtype=float)
    bandwidth = n_chips * chip.hbm_bytes_per_s
    for s in contexts:
        kv = s * kv_bytes_per_token
        step = b * kv / bandwidth + np.maximum(2 * b * param_count / (n_chips * chip.bf16_flops_per_s),
                                               weight_bytes / bandwidth)
        fits = b * kv + weight_bytes <= n_chips * chip.hbm_bytes
        ax.plot(1e3 * step[fits], (b / step / n_chips)[fits] / 1e3, label=f"context {s:,}")
    ax.set(xlabel="ms per decode step", ylabel="tokens / ms / chip", title="Latency against throughput")
    ax.legend(fontsize="small")
    return ax


def _axes(ax=None):
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4.5))
    return ax
