"""No number a course picture draws answers a question: not a word of it (``test_library_rule.py`` reads
those), and not a coordinate either.

Why: a Figure is data. ``ax.lines[1].get_xdata()[0]`` reads a dotted line's position exactly, so a knee
drawn at C / W_hbm, a marker at the critical batch, or a step-time curve computed at the batch a student
chose hands over the number a question asks for. A picture may show where things change (a curve the
student wrote, two roofs that cross between the samples of the helper's own grid), never the value.

How: every plotting helper of ``course`` is called as the notebooks call it and as a student may (one
chip at a time, a single batch, the largest batch), and every number of every artist (line data, collection
offsets, patch corners, text positions) is judged against every number question at every dealt value
(``test_library_rule.load_questions``); the call's own inputs and the course's stated values derive nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from course import hardware as hw
from course import inference as inf
from course import plots
from tests.test_library_rule import Finder, discover, load_questions, stated

CHIPS = [c for c in vars(hw).values() if isinstance(c, hw.Chip)]


def artist_numbers(ax: Any) -> Iterator[tuple[str, float]]:
    """("x" or "y", coordinate) for every coordinate a figure's artists hold, of every axes of the figure."""
    def pairs(xy: Any) -> Iterator[tuple[str, float]]:
        for x, y in np.asarray(xy, dtype=float).reshape(-1, 2):
            yield from (("x", x), ("y", y))

    for a in ax.figure.axes:
        for line in a.lines:
            yield from pairs(line.get_xydata())
        for c in a.collections:
            yield from pairs(c.get_offsets())
        for p in a.patches:
            yield from pairs(p.get_verts())
        for t in a.texts:
            yield from pairs(t.get_position())
            if getattr(t, "xy", None) is not None:
                yield from pairs(t.xy)


def student_steps() -> Iterator[tuple[str, Callable[..., Any]]]:
    """A step-time function a student passes, that draws nothing: what the picture holds beside its own
    grid then comes from the library alone. (What a helper computes from the student's own model, such as
    tokens per second from a step time, the student has already derived.)"""
    yield "step = nan", lambda *_: float("nan")


# The unit and scale each axis is drawn in: (unit of x, scale to it), (unit of y, scale to it).
ROOFLINE = (("any", 1.0), ("FLOP/s", 1.0))
PER_BATCH = (("any", 1.0), ("s", 1e-3))  # ms against a batch or a number of tokens
FRONTIER = (("s", 1e-3), ("any", 1e3))  # tokens per ms per chip against ms


def calls() -> Iterator[tuple[str, Callable[[], Any], tuple[float, ...], tuple]]:
    """(what was called, the call, the numbers it was given: its arguments, and the grid a helper draws
    on, which depends on nothing but them; the axes' units)."""
    for chip in CHIPS:
        yield f"roofline([{chip.name}])", lambda chip=chip: plots.roofline([chip]), (), ROOFLINE
        for x in (1.0, 64.0, 240.0, 1e3):
            yield (f"roofline([{chip.name}], points={x})",
                   lambda chip=chip, x=x: plots.roofline([chip], points={"p": x}), (x,), ROOFLINE)
    yield "roofline(all chips)", lambda: plots.roofline(CHIPS), (), ROOFLINE
    for name, step in student_steps():
        for top in (1, 2, 400, 3000):
            yield (f"plot_decode_latency({name}, {top})",
                   lambda step=step, top=top: inf.plot_decode_latency(step, top), (top, *inf._batches(top)), PER_BATCH)
        yield (f"plot_frontier({name})",
               lambda step=step: inf.plot_frontier(lambda b, s: step(b), [2048, 8192], lambda s: 120, 16),
               (2048.0, 8192.0, 120.0, 16.0, *inf._batches(120)), FRONTIER)
        for most in (1, 8192, 1e5):
            yield (f"plot_prefill_latency({name}, {most})",
                   lambda step=step, most=most: inf.plot_prefill_latency(step, most), (most, *inf._tokens(most)),
                   PER_BATCH)


def near(values: np.ndarray, lows: np.ndarray, highs: np.ndarray) -> list[float]:
    """The values (sorted) that fall in some question's accepted range."""
    values = np.sort(values[np.isfinite(values)])
    first, last = np.searchsorted(values, lows, "left"), np.searchsorted(values, highs, "right")
    return sorted({float(v) for i, j in zip(first, last, strict=True) if j > i for v in values[i:j]})


@pytest.fixture(scope="module")
def finder() -> Finder:
    return Finder(load_questions(), {}, stated=stated(discover()))


def test_no_coordinate_of_a_picture_answers_a_question(finder: Finder) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lows = np.array([lo for lo, _, _ in finder.questions.intervals])
    highs = np.array([hi for _, hi, _ in finder.questions.intervals])
    for how, draw, given, units in calls():
        ax = draw()
        drawn = list(artist_numbers(ax))
        plt.close("all")
        for axis, (unit, scale) in zip("xy", units, strict=True):
            values = np.unique([v for a, v in drawn if a == axis])
            values = values[~np.isin(values, np.asarray(given, dtype=float))]  # what the call was given
            for v in near(values * scale, lows, highs):  # a first look, vectorised over the drawn values
                finder.number(v, lambda how=how, v=v, scale=scale: f"{how} draws {v / scale:.6g}",
                              finder.stated | {0.0, 1.0}, unit)
    lines = [f"{qid}: {how}" for qid, how in sorted(finder.hits.items())]
    assert not lines, f"{len(lines)} question(s) answered by a picture's data:\n" + "\n".join(lines)


def test_the_search_sees_a_dotted_line(finder: Finder) -> None:
    """Proof that the reading works: a vertical line at a question's answer is found."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    q = next(iter(finder.questions.intervals))[2][0]
    _, ax = plt.subplots()
    ax.axvline(float(q.reference))
    values = set(artist_numbers(ax))
    plt.close("all")
    planted = Finder(finder.questions, {})
    for v in values:
        planted.number(v, lambda: "planted")
    assert q.qid in planted.hits
