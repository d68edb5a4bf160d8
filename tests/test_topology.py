"""solutions._derived.topology: torus hops and links against brute force, fat-tree levels against Part 12's numbers."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course import hardware as hw
from solutions._derived import topology as topo
from solutions._derived.hardware import ici_links_per_chip


@st.composite
def torus_pairs(draw):
    shape = tuple(draw(st.lists(st.integers(1, 9), min_size=1, max_size=3)))
    wrap = tuple(draw(st.lists(st.booleans(), min_size=len(shape), max_size=len(shape))))
    src = tuple(draw(st.integers(0, n - 1)) for n in shape)
    dst = tuple(draw(st.integers(0, n - 1)) for n in shape)
    return src, dst, shape, wrap


@settings(max_examples=200, deadline=None)
@given(torus_pairs())
def test_hops_equal_breadth_first_search(case):
    src, dst, shape, wrap = case
    assert topo.hops(src, dst, shape, wrap) == topo.bfs_hops(src, dst, shape, wrap)


def test_hops_many_matches_hops():
    rng = np.random.default_rng(0)
    shape, wrap = (8, 16), (False, True)
    src = np.stack([rng.integers(0, n, 300) for n in shape], 1)
    dst = np.stack([rng.integers(0, n, 300) for n in shape], 1)
    got = topo.hops_many(src, dst, shape, wrap)
    assert got.dtype == np.int32 and got.shape == (300,)
    assert got.tolist() == [topo.hops(s, d, shape, wrap) for s, d in zip(src, dst, strict=True)]


@pytest.mark.parametrize(("chip", "shape", "wrap"), [
    (hw.TPU_V5E, (4, 4), (False, False)), (hw.TPU_V5E, (16, 16), (True, True)), (hw.TPU_V5E, (8, 16), (False, True)),
    (hw.TPU_V6E, (16, 8), (True, False)), (hw.TPU_V4P, (4, 4, 4), (True, True, True)),
    (hw.TPU_V5P, (2, 2, 4), (False, False, False)), (hw.TPU_V5P, (4, 4, 8), (True, True, True)),
    (hw.TPU_V5P, (16, 20, 28), (True, True, True))])
def test_wraparound_rules_of_part_2(chip, shape, wrap):
    assert topo.wraparound(chip, shape) == wrap


def test_wraparound_rejects_the_wrong_dimension():
    with pytest.raises(ValueError, match="axes"):
        topo.wraparound(hw.TPU_V5E, (4, 4, 4))


def test_torus_distances_and_links():
    slice_, pod, cube = (topo.Torus.slice(hw.TPU_V5E, (4, 4)), topo.Torus.slice(hw.TPU_V5E, (16, 16)),
                         topo.Torus.slice(hw.TPU_V4P, (4, 4, 4)))
    assert (slice_.hops((0, 0), (3, 3)), pod.hops((0, 0), (15, 15)), cube.hops((0, 0, 0), (3, 3, 3))) == (6, 2, 3)
    assert (slice_.diameter, pod.diameter, cube.diameter) == (6, 16, 6)
    assert (slice_.links((0, 0)), slice_.links((1, 1)), pod.links((0, 0))) == (2, 4, 4)
    assert (pod.links_per_chip, cube.links_per_chip) == (ici_links_per_chip(hw.TPU_V5E), ici_links_per_chip(hw.TPU_V4P))
    assert topo.Torus((2, 2), (True, True), 1.0).links((0, 0)) == 2  # a 2-ring has one neighbour per axis


def test_point_to_point_time_of_part_2_q5():
    t = topo.Torus.slice(hw.TPU_V5E, (4, 4)).transfer_s(2 * 8 * 128 * 8192, (0, 0), (3, 3))
    assert t == pytest.approx(6e-6 + 16_777_216 / 9e10)  # 192.4 us


def test_bisection_is_the_cheapest_even_cut():
    link = hw.TPU_V5E.ici_bytes_per_s_per_link
    assert topo.Torus.slice(hw.TPU_V5E, (16, 16)).bisection_links() == 32
    assert topo.Torus.slice(hw.TPU_V5E, (4, 4)).bisection_links() == 4
    assert topo.Torus.slice(hw.TPU_V5E, (8, 16)).bisection_bytes_per_s == 16 * 2 * link
    assert topo.Torus.slice(hw.TPU_V4P, (4, 4, 8)).bisection_links() == 2 * 16
    with pytest.raises(ValueError, match="even"):
        topo.Torus((3, 5), (False, False), 1.0).bisection_links()


def test_ring_collectives_on_a_torus():
    wrapped = topo.Torus.slice(hw.TPU_V5E, (16, 16))
    open_ = topo.Torus.slice(hw.TPU_V5E, (8, 8))
    v = 1e9
    assert wrapped.allgather_s(v, [0]) == pytest.approx(v * 15 / 16 / (2 * 4.5e10))
    assert open_.allgather_s(v, [0]) == pytest.approx(v * 7 / 8 / 4.5e10)  # one direction without wraparound
    assert wrapped.allreduce_s(v) == pytest.approx(2 * wrapped.allgather_s(v))
    assert wrapped.allgather_s(v) < wrapped.allgather_s(v, [0])  # two axes: twice the links
    assert topo.ring_schedule_hops(4, wrap=False) == [1, 1, 1, 3]
    assert topo.ring_schedule_hops(4, wrap=True) == [1, 1, 1, 1]


def test_superpod_levels_of_part_12():
    """E4: 514.3e9 (node), 412.9e9 (leaf), 17.07e12 (spine) B/s; the leaf bounds the AllGather."""
    pod = topo.superpod()
    assert pod.gpus == 1024 and [lv.name for lv in pod.levels] == ["node", "leaf", "spine"]
    got = [lv.collective_bytes_per_s for lv in pod.levels]
    assert got == pytest.approx([514.29e9, 412.90e9, 17.067e12], rel=1e-4)
    assert pod.bottleneck.name == "leaf"
    assert pod.allgather_s(1e9) == pytest.approx(1e9 * 31 / (32 * 4e11))
    assert pod.allreduce_s(1e9) == pytest.approx(2 * pod.allgather_s(1e9))
    assert pod.allreduce_s(1e9, sharp=True) == pytest.approx(1e9 / 4e11)


def test_fat_tree_bandwidths_and_growth():
    assert topo.su_bytes_per_s() == 12.8e12 and topo.spine_bytes_per_s() == 51.2e12
    assert topo.ib_switch_bytes_per_s() == 3.2e12
    leaf_down = leaf_up = hw.IB_SWITCH_PORTS // 2 * hw.NIC_BYTES_PER_S
    assert topo.oversubscription(leaf_down, leaf_up) == 1.0  # full bisection
    assert topo.oversubscription(2 * leaf_down, leaf_up) == 2.0
    assert (topo.spine_switches_needed(1024), topo.spine_switches_needed(2048)) == (16, 32)
    assert topo.two_level_max_gpus() == 2048


def test_nvlink_domain_collectives():
    node = topo.nvlink_domain(hw.DGX_H100)
    b = 2 * 4096 * 65536
    assert node.gpus == 8
    assert node.allgather_s(b) == pytest.approx(topo.node_allgather_s(b, 8, 4.5e11))
    assert node.allgather_s(b) == pytest.approx(1.0439e-3, rel=1e-4)
    assert topo.node_allreduce_s(b, 8, 4.5e11) == pytest.approx(2 * topo.node_allgather_s(b, 8, 4.5e11))
    assert topo.node_allreduce_s(b, 8, 4.5e11, sharp=True) == pytest.approx(b / 4.5e11)
    assert topo.node_alltoall_s(b, 8, 4.5e11) == pytest.approx(b * 7 / (64 * 4.5e11))
    assert topo.scaleout_alltoall_s(b, 2, 4e11) == pytest.approx(b / (4 * 4e11))
    assert topo.nvlink_domain(hw.GB200_NVL72).gpus == 72


def test_allreduce_algorithms():
    assert topo.ring_allreduce_steps(8) == (14, 1.75)
    assert topo.tree_allreduce_steps(8) == (3, 3.0)
    with pytest.raises(ValueError, match="power-of-two"):
        topo.tree_allreduce_steps(6)
    assert math.log2(8) == topo.tree_allreduce_steps(8)[0]
