"""Pictures where a picture beats a number: rooflines with the student's own points on them.

A picture states no answer: critical intensities, crossovers and knees are what the chapters ask for,
so they are drawn (a dotted line, a marker) and never written in a title, a label or a legend
(``tests/test_library_rule.py`` reads every word each helper draws).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from .hardware import Chip


def _axes(ax=None):
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4.5))
    return ax


def roofline(chips: Sequence[Chip], points: Mapping[str, float] | None = None, ax=None):
    """Attainable FLOP/s against arithmetic intensity for each chip (log-log), with the knee of each
    roofline marked by a dotted line (its value is a question, so it is not written) and ``points``
    (label -> intensity in FLOPs/byte) drawn on the first chip's roof."""
    ax = _axes(ax)
    intensity = np.logspace(-1, 4, 400)
    for chip in chips:
        peak, bw = chip.bf16_flops_per_s, chip.hbm_bytes_per_s
        line, = ax.plot(intensity, np.minimum(peak, intensity * bw), label=chip.name)
        ax.axvline(peak / bw, color=line.get_color(), linestyle=":", linewidth=1)
    for label, x in (points or {}).items():
        chip = chips[0]
        y = min(chip.bf16_flops_per_s, x * chip.hbm_bytes_per_s)
        ax.plot([x], [y], "o", markersize=8)
        ax.annotate(label, (x, y), textcoords="offset points", xytext=(6, -14))
    ax.set(xscale="log", yscale="log", xlabel="arithmetic intensity (FLOPs/byte)",
           ylabel="attainable FLOP/s", title="Roofline (HBM)")
    ax.legend(loc="lower right", fontsize="small")
    return ax


def batch_curves(batches: np.ndarray, curves: Mapping[str, np.ndarray], peak: float,
                 crossovers: Mapping[str, float] | None = None, ax=None):
    """Throughput against batch size, one curve per label, with the peak and each crossover marked."""
    ax = _axes(ax)
    for label, y in curves.items():
        line, = ax.plot(batches, y, label=label)
        if crossovers and label in crossovers:
            ax.axvline(crossovers[label], color=line.get_color(), linestyle=":", linewidth=1)
    ax.axhline(peak, color="gray", linestyle="--", linewidth=1, label="peak")
    ax.set(xlabel="batch B (tokens)", ylabel="attainable FLOP/s")
    ax.legend(fontsize="small")
    return ax


def measured(batches: np.ndarray, flops_per_s: np.ndarray, peak: float, bw: float, intensity: np.ndarray, ax=None):
    """A measured throughput curve beside the roofline model fitted to it. Without measurements (the
    grader skips timing) the axes say so: a log scale of nothing would fail to draw."""
    ax = _axes(ax)
    if not np.isfinite(np.asarray(flops_per_s, dtype=float)).any():
        ax.text(0.5, 0.5, "No timings: they are not measured while a notebook is graded.", ha="center",
                va="center", transform=ax.transAxes)
        ax.set(xticks=[], yticks=[], title="This machine's matmul roofline")
        return ax
    ax.plot(batches, flops_per_s, "o-", label="measured")
    ax.plot(batches, np.minimum(peak, intensity * bw), "--", label="roofline model")
    ax.set(xscale="log", yscale="log", xlabel="batch B", ylabel="FLOP/s", title="This machine's matmul roofline")
    ax.legend(fontsize="small")
    return ax
