"""Inference: the constants Parts 7 and 8 state, and pictures of the step-time model.

Book: Part 7 "All About Transformer Inference", https://jax-ml.github.io/scaling-book/inference/ and
Part 8 "Serving LLaMA 3-70B on TPUs", https://jax-ml.github.io/scaling-book/applied-inference/

Inputs only, plus plots: the chapters ask students to derive the step-time model (critical batches,
KV-cache sizes, step times, memory and sharding limits), so no function here returns one of those
quantities (docs/architecture.md; ``tests/test_library_rule.py``). The plots draw the student's own
step-time functions, on the helper's own grid of batches, and return the Axes; no coordinate of a picture
is a number a question asks for (``tests/test_plot_data.py``). The references' own cost model lives in
``solutions/_derived/inference.py``.

The model the chapters ask for (Part 7, "A rough model of latency"): a decode step reads every weight once
and each sequence's KV cache once; the weight matmuls take the larger of their FLOP time and the weight
read, attention is bandwidth-bound, and the step is their sum. Prefill is the larger of its FLOP time
(at an MFU) and one read of the weights.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

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

def _batches(largest: float) -> np.ndarray:
    """The helper's own batch grid, 1 to ``largest``: whole batches, at most 300 of them."""
    return np.unique(np.linspace(1, max(1.0, float(largest)), 300).round())


def _tokens(most: float) -> np.ndarray:
    """The helper's own token grid, 1 to ``most`` (at least 10), log-spaced whole numbers."""
    return np.unique(np.logspace(0, np.log10(max(float(most), 10.0)), 200).round())


def _curve(step: Callable[[float], float], batches: np.ndarray) -> np.ndarray:
    return np.array([float(step(b)) for b in batches])


def plot_decode_latency(step: Callable[[float], float], largest_batch: float, label: str = "", ax=None):
    """Decode step time against batch, drawn from the student's own step-time model ``step`` (batch ->
    seconds) on whole batches from 1 to ``largest_batch``: flat while the weights' read dominates, then
    rising. The picture computes no step time of its own, and marks no critical batch: those are the
    chapters' questions (``tests/test_plot_data.py``)."""
    ax = _axes(ax)
    b = _batches(largest_batch)
    ax.plot(b, 1e3 * _curve(step, b), linewidth=2.5, label=f"decode step {label}".strip())
    ax.set(xlabel="batch B (sequences)", ylabel="ms per step", title="Decode: latency against batch")
    ax.legend(fontsize="small")
    return ax


def plot_prefill_latency(prefill: Callable[[float], float], most_tokens: float = 1e5, ax=None):
    """Prefill time against the number of tokens processed at once, log-log, drawn from the student's
    own model ``prefill`` (tokens -> seconds) on the helper's own grid from 1 to ``most_tokens``: flat
    while reading the weights dominates, proportional to the tokens beyond."""
    ax = _axes(ax)
    t = _tokens(most_tokens)
    ax.plot(t, 1e3 * _curve(prefill, t), linewidth=2.5, label="prefill")
    ax.set(xscale="log", yscale="log", xlabel="tokens processed at once (B x T)", ylabel="ms",
           title="Prefill: latency against tokens")
    ax.legend(fontsize="small")
    return ax


def plot_frontier(step: Callable[[float, int], float], contexts: Sequence[int],
                  largest_batch: Callable[[int], float], n_chips: int, ax=None):
    """Throughput per chip against step latency, one curve per context length (Part 8's Pareto plot),
    drawn from the student's own models: ``step(batch, context)`` in seconds, on whole batches up to
    ``largest_batch(context)``, where the caches stop fitting beside the weights."""
    ax = _axes(ax)
    for s in contexts:
        b = _batches(largest_batch(s))
        seconds = _curve(lambda x, s=s: step(x, s), b)
        ax.plot(1e3 * seconds, b / seconds / n_chips / 1e3, label=f"context {s:,}")
    ax.set(xlabel="ms per decode step", ylabel="tokens / ms / chip", title="Latency against throughput")
    ax.legend(fontsize="small")
    return ax


def _axes(ax=None):
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4.5))
    return ax
