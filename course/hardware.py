"""Chip specifications: the one place the course's hardware constants live.

Every number here is the course's pinned value (see the syllabus README, "Course-wide constants"):
the newest hardware tables of the book win where chapters disagree, and each disagreement is an
erratum the chapter's notebook explains. Units are in the field names; bytes and bytes/s are
decimal SI (1 GB = 1e9 B); FLOP/s are dense, without structured sparsity.

Sources:
- TPUs: Part 2 "How to Think About TPUs", hardware table (jax-ml.github.io/scaling-book/tpus).
- GPUs: Part 12 "How to Think About GPUs", hardware table (jax-ml.github.io/scaling-book/gpus).
"""

from __future__ import annotations

from dataclasses import dataclass

TPU_BOOK = "https://jax-ml.github.io/scaling-book/tpus/"
GPU_BOOK = "https://jax-ml.github.io/scaling-book/gpus/"


@dataclass(frozen=True)
class Chip:
    """One accelerator chip. A missing capability is ``None``, never zero."""

    name: str
    hbm_bytes: float
    hbm_bytes_per_s: float
    bf16_flops_per_s: float
    int8_ops_per_s: float | None
    source: str

    @property
    def critical_intensity(self) -> float:
        """C / W_hbm: FLOPs per HBM byte above which a bf16 kernel is compute-bound (Part 1)."""
        return self.bf16_flops_per_s / self.hbm_bytes_per_s


@dataclass(frozen=True)
class TPU(Chip):
    # ICI: bandwidth of one link in one direction; the book's "bidirectional" is twice this.
    ici_bytes_per_s_per_link: float
    full_pod: tuple[int, ...]
    host: tuple[int, ...]

    @property
    def ici_bidirectional_bytes_per_s(self) -> float:
        return 2 * self.ici_bytes_per_s_per_link


@dataclass(frozen=True)
class GPU(Chip):
    sms: int


TPU_V3 = TPU("TPU v3", 32e9, 9.0e11, 1.4e14, 1.4e14, TPU_BOOK, 1e11, (32, 32), (4, 2))
TPU_V4P = TPU("TPU v4p", 32e9, 1.2e12, 2.75e14, 2.75e14, TPU_BOOK, 4.5e10, (16, 16, 16), (2, 2, 1))
TPU_V5P = TPU("TPU v5p", 96e9, 2.8e12, 4.59e14, 9.18e14, TPU_BOOK, 9e10, (16, 20, 28), (2, 2, 1))
TPU_V5E = TPU("TPU v5e", 16e9, 8.2e11, 1.97e14, 3.94e14, TPU_BOOK, 4.5e10, (16, 16), (4, 2))
TPU_V6E = TPU("TPU v6e", 32e9, 1.6e12, 9.20e14, 1.84e15, TPU_BOOK, 9e10, (16, 16), (4, 2))
TPU7X = TPU("TPU7x", 192e9, 7.4e12, 2.30e15, 4.61e15, TPU_BOOK, 9e10, (4, 4, 576), (2, 2, 1))

A100 = GPU("A100", 80e9, 2.0e12, 3.1e14, 6.2e14, GPU_BOOK, 108)
H100 = GPU("H100", 80e9, 3.4e12, 9.9e14, 2.0e15, GPU_BOOK, 132)
H200 = GPU("H200", 141e9, 4.8e12, 9.9e14, 2.0e15, GPU_BOOK, 132)
B200 = GPU("B200", 192e9, 8.0e12, 2.3e15, 4.5e15, GPU_BOOK, 148)

TPUS = (TPU_V3, TPU_V4P, TPU_V5P, TPU_V5E, TPU_V6E, TPU7X)
GPUS = (A100, H100, H200, B200)

# Part 1 uses these beyond the tables above.
# H100 SXM datasheet bf16 figure, which assumes 2:4 structured sparsity (twice the dense rate).
H100_SPARSE_BF16_FLOPS_PER_S = 1.979e15
# TPU v5p vector unit (VPU) throughput per TensorCore (Part 1, "vector work" aside).
TPU_V5P_VPU_FLOPS_PER_S = 7e12

BYTES_PER_ELEMENT = {"fp32": 4, "bf16": 2, "int8": 1, "fp8": 1}
