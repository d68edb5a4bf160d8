"""A step timeline: compute and communication on separate lanes, as a profiler's trace viewer shows them.

A TPU or GPU runs its matmuls on one stream and its collectives on another (asynchronous
``-start``/``-done`` pairs in the compiled program), so a collective can hide behind compute when
nothing waits for it. ``schedule`` places a list of ops on their lanes: each lane runs its ops one
at a time, in the order given, and an op starts when its lane is free and every op it depends on
(``after``) has finished. The durations are estimates (FLOPs over FLOP/s, bytes over bytes/s); the
point is the shape of the step: what overlaps, and what the step waits for.

    ops = [Op("W_in gather", "comms", t_gather), Op("up-projection", "compute", t_matmul, after=("W_in gather",))]
    spans = schedule(ops)
    step_seconds(spans), exposed_comms(spans)   # t_gather + t_matmul; t_gather, since nothing hid the gather
    plot(spans)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

COMPUTE, COMMS = "compute", "comms"
LANE_COLOURS = {COMPUTE: "tab:blue", COMMS: "tab:orange"}


@dataclass(frozen=True)
class Op:
    """One operation of a step: its lane ("compute", "comms" or any name), its estimated duration in
    seconds, and the names of the ops that must finish before it starts."""

    name: str
    lane: str
    seconds: float
    after: tuple[str, ...] = ()


@dataclass(frozen=True)
class Span:
    """Where ``schedule`` put an op: its lane and its start and end times in seconds."""

    name: str
    lane: str
    start: float
    end: float

    @property
    def seconds(self) -> float:
        return self.end - self.start


def schedule(ops: Sequence[Op]) -> list[Span]:
    """Start and end of every op: a lane runs its ops in the order listed, each starting once its lane
    is free and all its ``after`` ops have ended. Raises ValueError on a duplicate or unknown name, a
    negative duration, or dependencies that can never be met (a cycle, or waiting on a later op of
    the same lane)."""
    names = [op.name for op in ops]
    if len(set(names)) != len(names):
        raise ValueError(f"op names must be unique; repeated: {sorted({n for n in names if names.count(n) > 1})}")
    for op in ops:
        if op.seconds < 0:
            raise ValueError(f"{op.name}: a duration cannot be negative ({op.seconds})")
        unknown = set(op.after) - set(names)
        if unknown:
            raise ValueError(f"{op.name} waits for unknown op(s) {sorted(unknown)}")
    lanes: dict[str, list[Op]] = {}
    for op in ops:
        lanes.setdefault(op.lane, []).append(op)
    end: dict[str, float] = {}
    free = dict.fromkeys(lanes, 0.0)
    head = dict.fromkeys(lanes, 0)
    placed: dict[str, Span] = {}
    while len(placed) < len(ops):
        progress = False
        for lane, queue in lanes.items():
            while head[lane] < len(queue) and all(d in end for d in queue[head[lane]].after):
                op = queue[head[lane]]
                start = max([free[lane], *(end[d] for d in op.after)])
                placed[op.name] = Span(op.name, lane, start, start + op.seconds)
                end[op.name] = free[lane] = start + op.seconds
                head[lane] += 1
                progress = True
        if not progress:
            stuck = sorted(q[head[lane]].name for lane, q in lanes.items() if head[lane] < len(q))
            raise ValueError(f"these ops wait for each other and can never start: {stuck}")
    return [placed[n] for n in names]


def step_seconds(spans: Sequence[Span]) -> float:
    """The step's length: from its first start to its last end."""
    return max(s.end for s in spans) - min(s.start for s in spans) if spans else 0.0


def busy_seconds(spans: Sequence[Span], lane: str) -> float:
    """Seconds during which ``lane`` is running something."""
    return _length(_union((s.start, s.end) for s in spans if s.lane == lane))


def exposed_comms(spans: Sequence[Span], compute: str = COMPUTE) -> float:
    """Seconds during which some non-compute lane runs while the compute lane is idle: the
    communication no computation hid, which a profile shows as gaps in the compute row."""
    work = _union((s.start, s.end) for s in spans if s.lane == compute)
    other = _union((s.start, s.end) for s in spans if s.lane != compute)
    return _length(other) - _length(_intersect(other, work))


def _union(intervals) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for a, b in sorted(i for i in intervals if i[1] > i[0]):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _intersect(xs: list[tuple[float, float]], ys: list[tuple[float, float]]) -> list[tuple[float, float]]:
    return [(max(a, c), min(b, d)) for a, b in xs for c, d in ys if min(b, d) > max(a, c)]


def _length(intervals: list[tuple[float, float]]) -> float:
    return sum(b - a for a, b in intervals)


def plot(spans: Sequence[Span | Op], unit: str = "us", title: str = "", ax=None):
    """Draw the timeline: one row per lane (compute on top), one labelled bar per op. Ops are
    scheduled first if given as ``Op``. ``unit`` is "s", "ms" or "us"."""
    import matplotlib.pyplot as plt

    if spans and isinstance(spans[0], Op):
        spans = schedule(spans)  # type: ignore[arg-type]
    scale = {"s": 1.0, "ms": 1e3, "us": 1e6}[unit]
    lanes = sorted({s.lane for s in spans}, key=lambda lane: (lane != COMPUTE, lane != COMMS, lane))
    if ax is None:
        _, ax = plt.subplots(figsize=(9, 1.2 + 0.9 * len(lanes)))
    span = step_seconds(spans) or 1.0  # type: ignore[arg-type]
    for row, lane in enumerate(lanes):
        colour = LANE_COLOURS.get(lane, f"C{row + 2}")
        narrow = 0
        for s in (s for s in spans if s.lane == lane):
            ax.barh(row, s.seconds * scale, left=s.start * scale, height=0.5, color=colour, edgecolor="white")
            middle = (s.start + s.seconds / 2) * scale
            if s.seconds >= 0.12 * span:  # room for the name inside the bar
                ax.text(middle, row, s.name, ha="center", va="center", fontsize=7, clip_on=True)
            else:  # below the bar, staggered so that neighbours do not overprint
                ax.annotate(s.name, (middle, row + 0.25), xytext=(0, -3 - 8 * (narrow % 3)), textcoords="offset points",
                            ha="center", va="top", fontsize=6, arrowprops={"arrowstyle": "-", "lw": 0.5})
                narrow += 1
    ax.set_yticks(range(len(lanes)), lanes)
    ax.set_ylim(len(lanes) - 0.2, -0.5)  # first lane on top, room below each lane for small labels
    ax.set_xlabel(f"time ({unit})")
    total = step_seconds(spans) * scale  # type: ignore[arg-type]
    hidden = exposed_comms(spans) * scale  # type: ignore[arg-type]
    ax.set_title(title or f"step {total:.3g} {unit}; communication not hidden by compute: {hidden:.3g} {unit}")
    return ax
