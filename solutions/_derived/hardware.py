"""Quantities derived from the chip records of ``course.hardware``, as the references use them.

Each is a question somewhere in the course (a chip's critical intensity in Chapters 1, 4 and 12, a
pod's size in Chapter 2, an H100's CUDA cores in Chapter 12), so the chip records only state their
table's values and these functions derive the rest.
"""

from __future__ import annotations

import math

from course.hardware import GPU, TPU, Chip, GPUNode


def critical_intensity(chip: Chip) -> float:
    """C / W_hbm: FLOPs per HBM byte above which a bf16 kernel is compute-bound (Part 1)."""
    return chip.bf16_flops_per_s / chip.hbm_bytes_per_s


def torus_axes(chip: TPU) -> int:
    """2 for a 2D torus (v3, v5e, v6e), 3 for a 3D torus (v4p, v5p, TPU7x)."""
    return len(chip.full_pod)


def ici_links_per_chip(chip: TPU) -> int:
    """Neighbours of a chip inside a torus with wraparound: two per axis."""
    return 2 * torus_axes(chip)


def pod_chips(chip: TPU) -> int:
    """Chips in the largest ICI-connected slice."""
    return math.prod(chip.full_pod)


def chips_per_host(chip: TPU) -> int:
    """Chips attached to one CPU host."""
    return math.prod(chip.host)


def cuda_cores(gpu: GPU) -> int:
    """fp32 lanes over all SMs: 4 subpartitions of 32 per SM (Part 12)."""
    return gpu.sms * gpu.fp32_lanes_per_sm


def egress_bytes_per_s_per_gpu(node: GPUNode) -> float:
    """A node's scale-out bandwidth shared by its GPUs."""
    return node.egress_bytes_per_s / node.gpus
