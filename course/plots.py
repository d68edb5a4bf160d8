"""Pictures where a picture beats a number: rooflines with the student's own points on them.

A picture states no answer: critical intensities, crossovers and knees are what the chapters ask for,
so they are neither written (``tests/test_library_rule.py`` reads every word each helper draws) nor
drawn as a coordinate (a line at a knee, a marker at a crossing): a picture shows where things change,
two curves crossing, and ``tests/test_plot_data.py`` reads every number of every artist.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from .hardware import Chip

INTENSITY_AXIS = (0.1, 1e4)  # FLOPs/byte: the roofline's x axis, the same for every call


def _axes(ax=None):
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4.5))
    return ax


def roofline(chips: Sequence[Chip], points: Mapping[str, float] | None = None, ax=None):
    """Attainable FLOP/s against arithmetic intensity for each chip (log-log): its two roofs, the sloped
    bandwidth roof and the flat compute roof, each drawn across the whole axis so that the knee shows
    where they cross, and ``points`` (label -> intensity in FLOPs/byte) as dashed verticals.

    The knee is a question (the critical intensity), so no line, marker or vertex is placed at it and no
    point is placed on a roof: every coordinate drawn is the axis' own ends, a chip's stated peak or a
    value the caller gave (``tests/test_plot_data.py`` reads them all)."""
    ax = _axes(ax)
    ends = np.array([INTENSITY_AXIS[0], INTENSITY_AXIS[-1]])
    for chip in chips:
        line, = ax.plot(ends, ends * chip.hbm_bytes_per_s, label=chip.name)
        ax.axhline(chip.bf16_flops_per_s, color=line.get_color())
    for label, x in (points or {}).items():
        ax.axvline(x, color="gray", linestyle="--", linewidth=1)
        ax.annotate(label, (x, 0.03), xycoords=("data", "axes fraction"), textcoords="offset points",
                    xytext=(4, 0))
    peaks = [chip.bf16_flops_per_s for chip in chips]
    ax.set(xscale="log", yscale="log", xlim=INTENSITY_AXIS, ylim=(min(peaks) / 1e4, 3 * max(peaks)),
           xlabel="arithmetic intensity (FLOPs/byte)", ylabel="attainable FLOP/s (below both roofs)",
           title="Roofline (HBM)")
    ax.legend(loc="upper left", fontsize="small")
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
        ax.text(0.5, 0.5, "No timings: they are not measured while nbgrader runs a notebook.", ha="center",
                va="center", transform=ax.transAxes)
        ax.set(xticks=[], yticks=[], title="This machine's matmul roofline")
        return ax
    ax.plot(batches, flops_per_s, "o-", label="measured")
    ax.plot(batches, np.minimum(peak, intensity * bw), "--", label="roofline model")
    ax.set(xscale="log", yscale="log", xlabel="batch B", ylabel="FLOP/s", title="This machine's matmul roofline")
    ax.legend(fontsize="small")
    return ax
