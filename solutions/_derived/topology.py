"""Network topologies the hardware chapters reason with: a TPU torus and a GPU fat tree.

TPU (Part 2, "TPU Networking"): chips sit on a 2D or 3D torus and talk only to their nearest
neighbours over ICI. An axis has a wraparound link only on a full axis (2D chips: the pod's 16-wide
axis) or, on 3D chips, when the slice is built from whole 4x4x4 cubes; without it the worst-case
distance along that axis doubles and a ring can use only one direction of each link.

GPU (Part 12, "Networking"): GPUs in a node (an NVLink domain) are all one hop apart through
NVSwitches; nodes hang off an InfiniBand fat tree (leaf switches per scalable unit, then spines).
A level of the tree with D children of W bytes/s each supports AllGather/ReduceScatter bandwidth
D*W/(D-1); the slowest level bounds the whole collective.

Every time here is bandwidth-bound (latency ignored) unless the function says otherwise; byte
counts are the total size of the array being gathered or reduced, as in the book.

Here, beside the references, and not in ``course``: hop counts, bisection bandwidths and collective
times on these networks are what Chapters 2 and 12 ask students to work out.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from course import hardware as hw

from .hardware import torus_axes

# --- the TPU torus ---------------------------------------------------------------------------------


def axis_hops(a: int, b: int, length: int, wrap: bool) -> int:
    """Hops between coordinates a and b on one axis: |a-b|, or the shorter way round with wraparound."""
    d = abs(a - b)
    return min(d, length - d) if wrap else d


def hops(src: Sequence[int], dst: Sequence[int], shape: Sequence[int], wrap: Sequence[bool]) -> int:
    """Hops between two chips of a torus: the sum over axes (one hop moves along one axis)."""
    return sum(axis_hops(a, b, n, w) for a, b, n, w in zip(src, dst, shape, wrap, strict=True))


def hops_many(src: np.ndarray, dst: np.ndarray, shape: Sequence[int], wrap: Sequence[bool]) -> np.ndarray:
    """``hops`` for arrays of pairs: src, dst int[n_pairs, n_axes] -> int[n_pairs]."""
    d = np.abs(np.asarray(src) - np.asarray(dst))
    n = np.asarray(shape)
    d = np.where(np.asarray(wrap), np.minimum(d, n - d), d)
    return d.sum(axis=-1).astype(np.int32)


def bfs_hops(src: Sequence[int], dst: Sequence[int], shape: Sequence[int], wrap: Sequence[bool]) -> int:
    """Brute force: breadth-first search over the torus's links (a check on ``hops``)."""
    seen = {tuple(src): 0}
    queue = deque([tuple(src)])
    while queue:
        here = queue.popleft()
        if here == tuple(dst):
            return seen[here]
        for nxt in _neighbours(here, shape, wrap):
            if nxt not in seen:
                seen[nxt] = seen[here] + 1
                queue.append(nxt)
    raise ValueError("unreachable")


def _neighbours(coord: Sequence[int], shape: Sequence[int], wrap: Sequence[bool]) -> set[tuple[int, ...]]:
    out = set()
    for axis, (c, n, w) in enumerate(zip(coord, shape, wrap, strict=True)):
        for step in (-1, 1):
            x = c + step
            if w:
                x %= n
            if 0 <= x < n and x != c:
                out.add(tuple(coord[:axis]) + (x,) + tuple(coord[axis + 1:]))
    return out


def wraparound(chip: hw.TPU, shape: Sequence[int]) -> tuple[bool, ...]:
    """Which axes of a slice of ``chip`` have wraparound links (Part 2, "TPU Networking").

    3D-torus chips (v4p, v5p, TPU7x) get wraparound from optical switches only when the slice is
    made of whole 4x4x4 cubes; then every axis wraps. 2D-torus chips (v5e, v6e, v3) wrap an axis
    only when it spans the pod's full width (16 on v5e/v6e)."""
    if len(shape) != torus_axes(chip):
        raise ValueError(f"{chip.name} slices have {torus_axes(chip)} axes, not {len(shape)}")
    if torus_axes(chip) == 3:
        cubes = all(n % 4 == 0 for n in shape)
        return (cubes,) * 3
    return tuple(n == full for n, full in zip(shape, chip.full_pod, strict=True))


@dataclass(frozen=True)
class Torus:
    """A slice of TPU chips: axis lengths, wraparound per axis, one link's one-way bandwidth."""

    shape: tuple[int, ...]
    wrap: tuple[bool, ...]
    link_bytes_per_s: float  # one ICI link, one direction
    hop_latency_s: float = hw.ICI_HOP_LATENCY_S

    @classmethod
    def slice(cls, chip: hw.TPU, shape: Sequence[int]) -> Torus:
        """A slice of ``chip`` with the wraparound rule of its generation."""
        return cls(tuple(shape), wraparound(chip, shape), chip.ici_bytes_per_s_per_link)

    @property
    def chips(self) -> int:
        return math.prod(self.shape)

    def hops(self, src: Sequence[int], dst: Sequence[int]) -> int:
        return hops(src, dst, self.shape, self.wrap)

    @property
    def diameter(self) -> int:
        """The largest hop count between two chips."""
        return sum(n // 2 if w else n - 1 for n, w in zip(self.shape, self.wrap, strict=True))

    def links(self, coord: Sequence[int]) -> int:
        """ICI links the chip at ``coord`` can use (to distinct neighbours)."""
        return len(_neighbours(tuple(coord), self.shape, self.wrap))

    @property
    def links_per_chip(self) -> int:
        """The most links any chip of the slice uses (2 per axis longer than 2, with wraparound)."""
        return max(self.links(c) for c in np.ndindex(*self.shape))

    def transfer_s(self, nbytes: float, src: Sequence[int], dst: Sequence[int], ports: int | None = None) -> float:
        """Point-to-point time: hops * latency + bytes / (ports * one-way link bandwidth), where by
        default the ports are the links both endpoints can use in parallel (Part 2, Q5)."""
        ports = ports or min(self.links(src), self.links(dst))
        return self.hops(src, dst) * self.hop_latency_s + nbytes / (ports * self.link_bytes_per_s)

    def bisection_links(self) -> int:
        """Links cut when the slice is split into two equal halves, the cheapest such cut: across an
        even axis, cutting each of its rings once, or twice where the axis wraps around."""
        cuts = [self.chips // n * (2 if w and n > 2 else 1)
                for n, w in zip(self.shape, self.wrap, strict=True) if n % 2 == 0]
        if not cuts:
            raise ValueError(f"a {self.shape} slice has no axis of even length to cut in half")
        return min(cuts)

    @property
    def bisection_bytes_per_s(self) -> float:
        """Bytes/s across that cut, counting both directions of every cut link."""
        return self.bisection_links() * 2 * self.link_bytes_per_s

    def ring_bytes_per_s(self, axes: Sequence[int] | None = None) -> float:
        """Bandwidth into each chip for a ring collective over ``axes`` (default: all): both
        directions of the two links of each axis with wraparound, one direction without."""
        axes = range(len(self.shape)) if axes is None else axes
        return sum((2 if self.wrap[a] else 1) * self.link_bytes_per_s for a in axes if self.shape[a] > 1)

    def allgather_s(self, nbytes: float, axes: Sequence[int] | None = None) -> float:
        """AllGather of an array of ``nbytes`` (total) over ``axes``: each chip receives the
        (N-1)/N it lacks at ``ring_bytes_per_s`` (Part 3's V / W_ici with the exact factor)."""
        axes = list(range(len(self.shape))) if axes is None else list(axes)
        n = math.prod(self.shape[a] for a in axes)
        return nbytes * (n - 1) / n / self.ring_bytes_per_s(axes)

    def allreduce_s(self, nbytes: float, axes: Sequence[int] | None = None) -> float:
        """AllReduce = ReduceScatter + AllGather: twice the AllGather."""
        return 2 * self.allgather_s(nbytes, axes)


def ring_schedule_hops(length: int, wrap: bool) -> list[int]:
    """Hops of each transfer of one step of a ring shift (i -> i+1 mod length) along one axis:
    without wraparound the closing transfer crosses the whole axis."""
    return [axis_hops(i, (i + 1) % length, length, wrap) for i in range(length)]


# --- GPU nodes and fat trees ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Level:
    """One level of a switched tree: ``children`` units below each switch group, each connected
    with ``child_bytes_per_s`` (one direction)."""

    name: str
    children: int
    child_bytes_per_s: float

    @property
    def collective_bytes_per_s(self) -> float:
        """AllGather/ReduceScatter bandwidth at this level: D * W / (D - 1) (Part 12)."""
        return self.children * self.child_bytes_per_s / (self.children - 1)


@dataclass(frozen=True)
class FatTree:
    """A tree of switch levels, from the GPUs up; full bisection bandwidth at every level."""

    levels: tuple[Level, ...]

    @property
    def gpus(self) -> int:
        return math.prod(level.children for level in self.levels)

    @property
    def bottleneck(self) -> Level:
        return min(self.levels, key=lambda level: level.collective_bytes_per_s)

    @property
    def allgather_bytes_per_s(self) -> float:
        return self.bottleneck.collective_bytes_per_s

    def allgather_s(self, nbytes: float) -> float:
        """bytes * max_i (D_i - 1) / (D_i * W_i): one ring per level, the levels overlapped."""
        return nbytes / self.allgather_bytes_per_s

    def allreduce_s(self, nbytes: float, sharp: bool = False) -> float:
        """Twice the AllGather; with in-network reduction (SHARP) bytes / W at the slowest level."""
        if sharp:
            return nbytes / min(level.child_bytes_per_s for level in self.levels)
        return 2 * self.allgather_s(nbytes)


def nvlink_domain(node: hw.GPUNode) -> FatTree:
    """One node: its GPUs, each with its NVLink bandwidth into the switches."""
    return FatTree((Level("node", node.gpus, node.nvlink_bytes_per_s_per_gpu),))


def su_bytes_per_s(node: hw.GPUNode = hw.DGX_H100) -> float:
    """Uplink bandwidth of one scalable unit: its leaf switches' ports facing the spines (half of
    each switch's ports; the other half face the SU's nodes). 8 x 32 x 5e10 = 1.28e13 B/s."""
    return hw.SU_LEAF_SWITCHES * (hw.IB_SWITCH_PORTS // 2) * hw.NIC_BYTES_PER_S


def superpod(node: hw.GPUNode = hw.DGX_H100, nodes_per_su: int = hw.SU_NODES, sus: int = hw.SUPERPOD_SUS) -> FatTree:
    """The reference DGX SuperPod: nodes -> leaf switches (one SU) -> spine switches."""
    levels = [Level("node", node.gpus, node.nvlink_bytes_per_s_per_gpu),
              Level("leaf", nodes_per_su, node.egress_bytes_per_s)]
    if sus > 1:
        levels.append(Level("spine", sus, su_bytes_per_s(node)))
    return FatTree(tuple(levels))


def ib_switch_bytes_per_s(ports: int = hw.IB_SWITCH_PORTS) -> float:
    """One InfiniBand NDR switch: all ports at 400 Gb/s."""
    return ports * hw.NIC_BYTES_PER_S


def spine_bytes_per_s(switches: int = hw.SUPERPOD_SPINE_SWITCHES) -> float:
    """All spine switches together (every port faces down to the leaves)."""
    return switches * ib_switch_bytes_per_s()


def oversubscription(down_bytes_per_s: float, up_bytes_per_s: float) -> float:
    """Traffic a switch layer can take in from below over what it can send up: 1.0 is full
    bisection bandwidth, 2.0 means half the hosts can talk across the top at full speed."""
    return down_bytes_per_s / up_bytes_per_s


def spine_switches_needed(gpus: int, ports: int = hw.IB_SWITCH_PORTS) -> int:
    """Spine switches for a two-level rail-optimised tree with full bisection: one NIC per GPU goes
    to a leaf, each leaf sends as many ports up as down, and every spine port faces a leaf."""
    return math.ceil(gpus / ports)  # one leaf uplink per GPU NIC, ``ports`` of them per spine


def two_level_max_gpus(ports: int = hw.IB_SWITCH_PORTS) -> int:
    """The largest two-level tree: each spine port reaches a different leaf (``ports`` leaves),
    each leaf has ports/2 GPUs below it."""
    return ports * ports // 2


# Collectives inside one NVLink domain of N GPUs, each with W bytes/s each way (Part 12).
def node_allgather_s(nbytes: float, n: int, w: float) -> float:
    """Ring AllGather or ReduceScatter: bytes * (N-1) / (N * W)."""
    return nbytes * (n - 1) / (n * w)


def node_allreduce_s(nbytes: float, n: int, w: float, sharp: bool = False) -> float:
    """ReduceScatter + AllGather, or bytes / W with in-network (SHARP) reduction."""
    return nbytes / w if sharp else 2 * node_allgather_s(nbytes, n, w)


def node_alltoall_s(nbytes: float, n: int, w: float) -> float:
    """Every GPU sends bytes/N^2 straight to each of the N-1 others: bytes * (N-1) / (W * N^2)."""
    return nbytes * (n - 1) / (w * n * n)


def scaleout_alltoall_s(nbytes: float, m: int, w_node: float) -> float:
    """AllToAll across M nodes: it cannot use the node's fast links, bytes * (M-1) / (M^2 W_node)."""
    return nbytes * (m - 1) / (m * m * w_node)


def ring_allreduce_steps(n: int) -> tuple[int, float]:
    """Ring AllReduce on N devices: 2(N-1) neighbour steps; each device sends 2(N-1)/N of the array."""
    return 2 * (n - 1), 2 * (n - 1) / n


def tree_allreduce_steps(n: int) -> tuple[int, float]:
    """Recursive doubling (pairs, then 4s, then 8s, ...): log2(N) steps, each device sending the
    whole array every step: fewer hops (latency), more bytes."""
    steps = int(math.log2(n))
    if 2**steps != n:
        raise ValueError("recursive doubling needs a power-of-two device count")
    return steps, float(steps)
