"""The step timeline: lanes run their ops in order, dependencies delay them, exposure is measured."""

import matplotlib
import pytest

from course.timeline import Op, Span, busy_seconds, exposed_comms, plot, schedule, step_seconds

matplotlib.use("Agg")


def _by_name(spans):
    return {s.name: s for s in spans}


def test_one_lane_runs_in_order():
    spans = schedule([Op("a", "compute", 1.0), Op("b", "compute", 2.0), Op("c", "compute", 0.5)])
    assert [(s.start, s.end) for s in spans] == [(0.0, 1.0), (1.0, 3.0), (3.0, 3.5)]
    assert step_seconds(spans) == 3.5 and exposed_comms(spans) == 0.0


def test_independent_lanes_overlap():
    """A prefetched weight gather hides behind the previous layer's matmul."""
    ops = [Op("mm0", "compute", 3.0), Op("gather1", "comms", 2.0), Op("mm1", "compute", 3.0, after=("gather1",))]
    s = _by_name(schedule(ops))
    assert (s["gather1"].start, s["mm1"].start) == (0.0, 3.0)
    assert step_seconds(list(s.values())) == 6.0
    assert exposed_comms(list(s.values())) == 0.0


def test_dependent_collective_is_exposed():
    """A reduction of a matmul's output cannot start before it and delays what consumes it."""
    ops = [Op("mm", "compute", 1.0), Op("all-reduce", "comms", 2.0, after=("mm",)),
           Op("next", "compute", 1.0, after=("all-reduce",))]
    spans = schedule(ops)
    assert [(s.start, s.end) for s in spans] == [(0.0, 1.0), (1.0, 3.0), (3.0, 4.0)]
    assert exposed_comms(spans) == pytest.approx(2.0)
    assert busy_seconds(spans, "compute") == pytest.approx(2.0)


def test_partial_overlap_counts_only_the_uncovered_part():
    spans = [Span("mm", "compute", 0.0, 2.0), Span("ag", "comms", 1.0, 4.0), Span("rs", "comms", 3.5, 5.0)]
    assert exposed_comms(spans) == pytest.approx(3.0)  # 2..5, while compute is idle
    assert busy_seconds(spans, "comms") == pytest.approx(4.0)


def test_lane_order_is_respected_even_when_a_later_op_is_ready():
    ops = [Op("late", "comms", 1.0, after=("mm",)), Op("early", "comms", 1.0), Op("mm", "compute", 5.0)]
    s = _by_name(schedule(ops))
    assert s["late"].start == 5.0 and s["early"].start == 6.0


@pytest.mark.parametrize("ops, words", [
    ([Op("a", "compute", 1.0), Op("a", "comms", 1.0)], "unique"),
    ([Op("a", "compute", 1.0, after=("z",))], "unknown"),
    ([Op("a", "compute", -1.0)], "negative"),
    ([Op("a", "compute", 1.0, after=("b",)), Op("b", "comms", 1.0, after=("a",))], "never start"),
    ([Op("a", "compute", 1.0, after=("b",)), Op("b", "compute", 1.0)], "never start"),
])
def test_bad_schedules_say_why(ops, words):
    with pytest.raises(ValueError, match=words):
        schedule(ops)


def test_plot_draws_one_bar_per_op():
    ops = [Op("mm", "compute", 1e-3), Op("ar", "comms", 2e-3, after=("mm",))]
    ax = plot(ops, unit="ms")
    assert len(ax.patches) == 2
    assert [t.get_text() for t in ax.get_yticklabels()] == ["compute", "comms"]
    assert "3 ms" in ax.get_title()
