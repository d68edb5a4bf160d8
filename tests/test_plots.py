"""The course's plots draw, including under the grader, where timings are skipped (NaN)."""

from __future__ import annotations

import io

import numpy as np
import pytest

BATCHES = np.array([1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024])
# float32 x[B, 2048] @ w[2048, 2048]: FLOPs over the bytes of three arrays read or written once (the
# notebook takes this from the student's Chapter 1 formula; course.measure does not compute it).
INTENSITY = 2 * BATCHES * 2048 * 2048 / (4 * (BATCHES * 2048 + 2048 * 2048 + BATCHES * 2048))


@pytest.fixture
def plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    yield plt
    plt.close("all")


def _png(ax) -> bytes:
    buf = io.BytesIO()
    ax.figure.savefig(buf, format="png", bbox_inches="tight")  # as the notebook's inline backend does
    return buf.getvalue()


def test_measured_roofline_draws_real_timings(plt):
    from course import plots

    rng = np.random.default_rng(7)
    rates = 1e11 * np.minimum(1.0, BATCHES / 64) * rng.uniform(0.8, 1.0, len(BATCHES))
    ax = plots.measured(BATCHES, rates, rates.max(), np.median(rates[:3] / INTENSITY[:3]), INTENSITY)
    assert len(ax.lines) == 2 and ax.get_xscale() == "log" and _png(ax).startswith(b"\x89PNG")


@pytest.mark.parametrize("execution", ["autograde", "validate"])
def test_measured_roofline_without_timings_says_so(plt, monkeypatch, execution):
    from course import measure, plots

    monkeypatch.setenv("NBGRADER_EXECUTION", execution)
    rates = measure.matmul_throughput(BATCHES)
    assert np.isnan(rates).all()
    ax = plots.measured(BATCHES, rates, np.nan, np.nan, INTENSITY)
    assert not ax.lines and "not measured" in ax.texts[0].get_text()
    assert _png(ax).startswith(b"\x89PNG")  # a log scale of NaNs raised here, inside the notebook's display


def test_the_roofline_shows_each_knee_without_placing_it(plt):
    """A chip's knee is its critical intensity, the answer of Chapter 1's Q1 and Q5 (and later chapters'):
    the roofline draws each chip's two roofs across the whole axis, so that the knee shows where they
    cross, names the chip alone, and holds no coordinate at the knee (tests/test_plot_data.py)."""
    from course import hardware as hw
    from course import plots

    chips = [hw.TPU_V5E, hw.H100]
    ax = plots.roofline(chips, points={"B = 64": 60.0})
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["TPU v5e", "H100"]
    xs = {float(x) for line in ax.lines for x in line.get_xdata()}
    assert xs == {*plots.INTENSITY_AXIS, 0.0, 1.0, 60.0}  # the axis' ends, axhline's (0, 1), the point
    for c in chips:
        knee = c.bf16_flops_per_s / c.hbm_bytes_per_s
        assert all(abs(x / knee - 1) > 0.1 for x in xs)
        assert any(line.get_ydata()[0] == c.bf16_flops_per_s for line in ax.lines)  # the flat roof
