"""Chip and network specifications: the one place the course's hardware constants live.

Every number here is the course's pinned value (see the syllabus README, "Course-wide constants"):
the newest hardware tables of the book win where chapters disagree, and each disagreement is an
erratum the chapter's notebook explains. Units are in the names; bytes and bytes/s are decimal SI
(1 GB = 1e9 B) unless a name says ``mib``/``kib``; FLOP/s are dense, without structured sparsity.
Link bandwidths are one direction unless the name says ``bidirectional``. The symbols follow one
convention in every chapter: W_ici, the book's ICI bandwidth, is one link counted in both directions, as
the book's tables state it (``ici_bidirectional_bytes_per_s``); one link in one direction is W_link
(``ici_bytes_per_s_per_link``), so W_ici = 2 W_link.

Inputs only: the chapters ask students to derive critical intensities, pod and host sizes, link
counts and core counts from these records, so the records do not compute them (docs/architecture.md,
``tests/test_library_rule.py``); ``solutions/_derived/hardware.py`` does, for the references.

Sources (``source_of(record, field)`` names the section each value comes from):
- TPUs: Part 2 "How to Think About TPUs" (jax-ml.github.io/scaling-book/tpus): the spec tables,
  the prose below them (PCIe, DCN), "What Is a TPU?" (MXU, VMEM, cores) and Appendix A (VPU).
- GPUs: Part 12 "How to Think About GPUs" (jax-ml.github.io/scaling-book/gpus): the GPU spec table,
  "Networking" (NVLink, NVSwitch, InfiniBand, SuperPod, GB200 NVL72) and the quizzes' stated numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import ClassVar

TPU_BOOK = "https://jax-ml.github.io/scaling-book/tpus/"
GPU_BOOK = "https://jax-ml.github.io/scaling-book/gpus/"
TPU_TABLE = TPU_BOOK + "#tpu-specs"
GPU_TABLE = GPU_BOOK + "#summary-of-gpu-specs"
GPU_NET = GPU_BOOK + "#at-the-node-level"
GPU_SCALE_OUT = GPU_BOOK + "#beyond-the-node-level"
CLOUD_TPU_DOCS = "https://cloud.google.com/tpu/docs/system-architecture-tpu-vm"

MIB = 2**20
KIB = 2**10


@dataclass(frozen=True)
class Chip:
    """One accelerator chip. A missing capability is ``None``, never zero."""

    name: str
    hbm_bytes: float
    hbm_bytes_per_s: float
    bf16_flops_per_s: float
    int8_ops_per_s: float | None  # on GPUs: the fp8/int8 tensor-core rate
    source: str  # the table the first five values come from

    SOURCES: ClassVar[dict[str, str]] = {}  # field -> section, where it differs from ``source``


@dataclass(frozen=True)
class TPU(Chip):
    # ICI: bandwidth of one link in one direction; the book's "bidirectional" is twice this.
    ici_bytes_per_s_per_link: float
    full_pod: tuple[int, ...]  # the largest ICI-connected slice, chips per axis
    host: tuple[int, ...]  # chips attached to one CPU host
    tensorcores_per_chip: int = 1
    mxus_per_tensorcore: int | None = 4  # the book gives 2 (v3) and 4 (v4, v5) only
    mxu_size: int = 128  # the systolic array is mxu_size x mxu_size
    pcie_bytes_per_s: float | None = None  # host <-> one chip, each way
    dcn_bytes_per_s: float | None = None  # data-centre network egress per chip
    vmem_bytes: float | None = None  # on-chip scratchpad per TensorCore

    SOURCES: ClassVar[dict[str, str]] = {
        "ici_bytes_per_s_per_link": TPU_TABLE, "full_pod": TPU_TABLE, "host": TPU_TABLE,
        "tensorcores_per_chip": TPU_BOOK + "#what-is-a-tpu",
        "mxus_per_tensorcore": TPU_BOOK + "#appendix-b-how-does-a-systolic-array-work",
        "mxu_size": TPU_BOOK + "#appendix-b-how-does-a-systolic-array-work",
        "pcie_bytes_per_s": TPU_TABLE + " (prose below the table)",
        "dcn_bytes_per_s": TPU_BOOK + "#tpu-networking and the prose below the spec table",
        "vmem_bytes": TPU_BOOK + "#what-is-a-tpu (v5e); Part 12's comparison table (v5p)",
    }

    @property
    def ici_bidirectional_bytes_per_s(self) -> float:
        """The book's W_ici: one link counted in both directions, as its tables state it."""
        return 2 * self.ici_bytes_per_s_per_link


@dataclass(frozen=True)
class GPU(Chip):
    sms: int
    fp4_flops_per_s: float | None = None
    nvlink_bytes_per_s: float | None = None  # per GPU, each direction (all its NVLink links)
    smem_bytes_per_sm: float | None = None  # shared memory / L1 per SM
    register_bytes_per_sm: float | None = None
    l2_bytes: float | None = None
    tensor_clock_hz: float | None = None  # the clock Part 12 uses for tensor-core FLOPs per cycle
    fp32_lanes_per_sm: int = 4 * 32  # fp32 CUDA cores per SM: 32 per subpartition since Hopper (16 on the A100)

    SOURCES: ClassVar[dict[str, str]] = {
        "sms": GPU_TABLE, "fp4_flops_per_s": GPU_TABLE, "nvlink_bytes_per_s": GPU_NET,
        "smem_bytes_per_sm": GPU_BOOK + "#memory", "register_bytes_per_sm": GPU_BOOK + "#memory",
        "l2_bytes": GPU_BOOK + "#memory", "tensor_clock_hz": GPU_BOOK + "#what-is-a-gpu",
        "fp32_lanes_per_sm": GPU_BOOK + "#what-is-a-gpu",
    }

    tensor_cores_per_sm: ClassVar[int] = 4  # one per SM subpartition

    @property
    def fp8_flops_per_s(self) -> float | None:
        """The table's fp8 column, which ``int8_ops_per_s`` holds for GPUs."""
        return self.int8_ops_per_s


# Values of one chip that come from elsewhere than its field's usual section.
SOURCE_OVERRIDES = {
    ("TPU v6e", "tensorcores_per_chip"): CLOUD_TPU_DOCS + " (Part 2 names no count for v6e)",
    ("TPU7x", "tensorcores_per_chip"): CLOUD_TPU_DOCS,
    ("TPU7x", "mxu_size"): CLOUD_TPU_DOCS,
    ("H800", "hbm_bytes"): GPU_BOOK + "#examples (no figure given: the H100's is used)",
    ("H800", "hbm_bytes_per_s"): GPU_BOOK + "#examples (no figure given: the H100's is used)",
    ("H800", "sms"): GPU_BOOK + "#examples (no figure given: the H100's is used)",
    # the A100's 1410 MHz boost clock (NVIDIA A100 Tensor Core GPU Architecture whitepaper, its spec table)
    ("A100", "tensor_clock_hz"): "https://images.nvidia.com/aem-dam/en-zz/Solutions/data-center/"
                                 "nvidia-ampere-architecture-whitepaper.pdf",
    # 64 fp32 CUDA cores per SM, 6912 in all (the same whitepaper's comparison table): the book gives Hopper's 128
    ("A100", "fp32_lanes_per_sm"): "https://images.nvidia.com/aem-dam/en-zz/Solutions/data-center/"
                                   "nvidia-ampere-architecture-whitepaper.pdf",
}


def source_of(record: object, field: str) -> str:
    """The book section (or other reference) a field of a chip or network record comes from."""
    names = {f.name for f in fields(record)}  # type: ignore[arg-type]
    if field not in names:
        raise AttributeError(f"{type(record).__name__} has no field {field!r}")
    override = SOURCE_OVERRIDES.get((record.name, field))  # type: ignore[attr-defined]
    return override or type(record).SOURCES.get(field) or record.source  # type: ignore[attr-defined]


# --- TPUs (Part 2's table; pod and host in chips per axis) ---------------------------------------
# PCIe is "typically 1.6e10 B/s per chip (3.2e10 for v6e)"; DCN egress per chip is 6.25e9 (v5p),
# 3.125e9 (v5e), 1.25e10 (v6e, TPU7x). VMEM: 128 MiB per TensorCore on v5e (and v5p, Part 12).
TPU_V3 = TPU("TPU v3", 32e9, 9.0e11, 1.4e14, 1.4e14, TPU_TABLE, 1e11, (32, 32), (4, 2),
             tensorcores_per_chip=2, mxus_per_tensorcore=2, pcie_bytes_per_s=1.6e10)
TPU_V4P = TPU("TPU v4p", 32e9, 1.2e12, 2.75e14, 2.75e14, TPU_TABLE, 4.5e10, (16, 16, 16), (2, 2, 1),
              tensorcores_per_chip=2, pcie_bytes_per_s=1.6e10)
TPU_V5P = TPU("TPU v5p", 96e9, 2.8e12, 4.59e14, 9.18e14, TPU_TABLE, 9e10, (16, 20, 28), (2, 2, 1),
              tensorcores_per_chip=2, pcie_bytes_per_s=1.6e10, dcn_bytes_per_s=6.25e9, vmem_bytes=128 * MIB)
TPU_V5E = TPU("TPU v5e", 16e9, 8.2e11, 1.97e14, 3.94e14, TPU_TABLE, 4.5e10, (16, 16), (4, 2),
              tensorcores_per_chip=1, pcie_bytes_per_s=1.6e10, dcn_bytes_per_s=3.125e9, vmem_bytes=128 * MIB)
# v6e: one TensorCore per chip (Cloud TPU documentation; Part 2 names no count for it), 256x256 MXU.
TPU_V6E = TPU("TPU v6e", 32e9, 1.6e12, 9.20e14, 1.84e15, TPU_TABLE, 9e10, (16, 16), (4, 2),
              tensorcores_per_chip=1, mxus_per_tensorcore=None, mxu_size=256, pcie_bytes_per_s=3.2e10,
              dcn_bytes_per_s=1.25e10)
TPU7X = TPU("TPU7x", 192e9, 7.4e12, 2.30e15, 4.61e15, TPU_TABLE, 9e10, (4, 4, 576), (2, 2, 1),
            tensorcores_per_chip=2, mxus_per_tensorcore=None, mxu_size=256, dcn_bytes_per_s=1.25e10)

TPUS = (TPU_V3, TPU_V4P, TPU_V5P, TPU_V5E, TPU_V6E, TPU7X)

# Other TPU constants (Part 2 unless noted).
ICI_HOP_LATENCY_S = 1e-6  # per hop, Q5
VMEM_OVER_HBM_BANDWIDTH = 22  # VMEM <-> MXU bandwidth is about 22x HBM's ("What Is a TPU?")
MXU_ROWS_PER_PASS = 8  # one bf16[8, 128] @ bf16[128, 128] product per MXU ...
MXU_CYCLES_PER_PASS = 8  # ... every 8 cycles
TPU_V5E_MXU_CLOCK_HZ = 1.5e9  # the clock of the MXU throughput example
TPU_V5P_CLOCK_HZ = 1.75e9  # Appendix A's VPU pop quiz
VPU_SUBLANES, VPU_LANES = 8, 128  # the VPU is an 8 x 128 grid of lanes (Appendix A)
VPU_ALUS_PER_LANE_V5 = 4  # independent fp32 ALUs per (sublane, lane) cell on v5
TPU_V2_BF16_FLOPS_PER_S_PER_CORE = 2.3e13  # Part 9 (profiling) only
TPU_V2_ICI_BIDIRECTIONAL_BYTES_PER_S = 1.2e11  # Part 9 (profiling) only, per hop

# Part 1 uses these beyond the tables above.
# H100 SXM datasheet bf16 figure, which assumes 2:4 structured sparsity (twice the dense rate).
H100_SPARSE_BF16_FLOPS_PER_S = 1.979e15
# TPU v5p vector unit (VPU) throughput per TensorCore (Part 1, "vector work" aside; Part 2's pop quiz
# computes 8*128*4*1.75e9 = 7.168e12 from the VPU's shape).
TPU_V5P_VPU_FLOPS_PER_S = 7e12

# --- GPUs (Part 12's table) ------------------------------------------------------------------------
A100 = GPU("A100", 80e9, 2.0e12, 3.1e14, 6.2e14, GPU_TABLE, 108, nvlink_bytes_per_s=3e11,
           smem_bytes_per_sm=192e3, register_bytes_per_sm=256 * KIB, l2_bytes=40e6, tensor_clock_hz=1.41e9,
           fp32_lanes_per_sm=64)
H100 = GPU("H100", 80e9, 3.4e12, 9.9e14, 2.0e15, GPU_TABLE, 132, nvlink_bytes_per_s=4.5e11,
           smem_bytes_per_sm=256e3, register_bytes_per_sm=256 * KIB, l2_bytes=50e6, tensor_clock_hz=1.76e9)
# H200: the H100's SM and NVLink with more, faster HBM.
H200 = GPU("H200", 141e9, 4.8e12, 9.9e14, 2.0e15, GPU_TABLE, 132, nvlink_bytes_per_s=4.5e11,
           smem_bytes_per_sm=256e3, register_bytes_per_sm=256 * KIB, l2_bytes=50e6)
B200 = GPU("B200", 192e9, 8.0e12, 2.3e15, 4.5e15, GPU_TABLE, 148, fp4_flops_per_s=9.0e15, nvlink_bytes_per_s=9e11,
           smem_bytes_per_sm=256e3, register_bytes_per_sm=256 * KIB, l2_bytes=126e6, tensor_clock_hz=1.86e9)
# H800 (the export variant DeepSeek trained on): H100 compute and memory, NVLink cut to 3e11 B/s;
# Part 12 quotes 1.513e15 dense fp8 FLOP/s for it (DeepSeek-V3 discussion).
H800 = GPU("H800", 80e9, 3.4e12, 9.9e14, 1.513e15, GPU_BOOK + "#examples", 132, nvlink_bytes_per_s=3e11)

GPUS = (A100, H100, H200, B200)
CHIPS = TPUS + GPUS + (H800,)
# The book's own rounded values of a constant where its text or answers use another than the tables above (the
# syllabus README's "Known disagreements" and each chapter's errata), by (chip, field): the H100 at 1e15 FLOP/s
# (Part 12's first version and its worked answers) and 9.89e14 (Part 1) for 9.9e14, and 3.35e12 B/s (the text and
# answers of Parts 1 and 12) for 3.4e12; the B200 at 2.25e15 (Part 12 Q1.3, Q5.1) for 2.3e15; the v5e at 2e14
# (Part 2's answers) for 1.97e14; the v5p at 4.6e14 (Part 5 Q3) for 4.59e14; the v6e at 9.1e14 (Part 1) for 9.20e14.
# A student may honestly compute with them, so every number that depends on one admits it, in every chapter
# (solutions/_kit.py, rate_tolerance). Left out, as other figures rather than roundings: the v5p's 2.5e12 B/s and
# the B200's "9 TB/s" of the prose (over 10% away: a question that meets one names it), and the older editions'
# v5e 8.1e11 B/s and v5p 4.5e14 FLOP/s.
BOOK_VALUES: dict[tuple[str, str], tuple[float, ...]] = {
    ("H100", "bf16_flops_per_s"): (1e15, 9.89e14), ("H100", "hbm_bytes_per_s"): (3.35e12,),
    ("B200", "bf16_flops_per_s"): (2.25e15,), ("TPU v5e", "bf16_flops_per_s"): (2e14,),
    ("TPU v5p", "bf16_flops_per_s"): (4.6e14,), ("TPU v6e", "bf16_flops_per_s"): (9.1e14,),
}

H100_BASE_CLOCK_HZ = 1.59e9
H100_BOOST_CLOCK_HZ = 1.98e9
B200_FP32_VECTOR_FLOPS_PER_S_FMA = 8e13  # counting a fused multiply-add as 2 FLOPs (Quiz 1)

# --- GPU networks (Part 12, "Networking") ------------------------------------------------------------
NVLINK4_LINK_BYTES_PER_S = 2.5e10  # one NVLink 4 link (Hopper), each direction
NVLINK5_LINK_BYTES_PER_S = 5e10  # one NVLink 5 link (Blackwell), each direction
H100_NVLINK_LINKS = 18  # links per H100 (and B200): 18 x 2.5e10 = 4.5e11 each way
NVSWITCH_PORTS = 64  # NVSwitch (Hopper generation): 64 NVLink ports of 2.5e10 B/s
NVSWITCH_PORT_BYTES_PER_S = 2.5e10
# NVLink 5 switch chip (Blackwell): 72 ports of 5e10 B/s each way; a DGX B200's 2 of them take its 8 x 18 links
# (DGX B200 datasheet: 2 NVLink switches, 14.4 TB/s aggregate, https://www.nvidia.com/en-us/data-center/dgx-b200/)
NVLINK5_SWITCH_PORTS = 72
NIC_BYTES_PER_S = 400e9 / 8  # one 400 Gb/s InfiniBand NDR NIC (or switch port) = 5e10 B/s
HDR_NIC_BYTES_PER_S = 200e9 / 8  # one 200 Gb/s InfiniBand HDR NIC (a DGX A100's compute NICs) = 2.5e10 B/s
IB_SWITCH_PORTS = 64  # InfiniBand NDR switch: 64 ports of 400 Gb/s = 3.2e12 B/s
SU_NODES = 32  # a scalable unit (SU): 32 nodes = 256 GPUs ...
SU_LEAF_SWITCHES = 8  # ... under 8 leaf switches (one per NIC rail)
SUPERPOD_SUS = 4  # the 1024-GPU H100 SuperPod: 4 SUs ...
SUPERPOD_SPINE_SWITCHES = 16  # ... and 16 spine switches
GB200_TRAYS, GB200_GPUS_PER_TRAY = 18, 4  # GB200 NVL72: 72 GPUs in one NVLink domain

# Measurements Part 12 quotes (NCCL in one H100 node), and the SHARP gain.
NVLINK_ALLREDUCE_MEASURED_BYTES_PER_S = 3.7e11  # bus bandwidth with ~10 GB messages
NVLINK_ALLREDUCE_MEASURED_SMALL_BYTES_PER_S = 1.5e11  # at a 58.7 MB message
SHARP_THEORETICAL_GAIN = 0.75  # in-network reduction could add ~75% AllReduce bandwidth ...
SHARP_MEASURED_GAIN = 0.30  # ... measured: ~30%


@dataclass(frozen=True)
class GPUNode:
    """One NVLink domain: GPUs all-to-all connected through NVSwitches, plus its scale-out NICs."""

    name: str
    gpu: GPU
    gpus: int
    nvlink_bytes_per_s_per_gpu: float  # each direction
    egress_bytes_per_s: float  # scale-out (InfiniBand) bandwidth of the whole node, each direction
    source: str
    nvswitches: int | None = None
    nvswitch_bytes_per_s: float | None = None  # all ports of one switch, each direction

    SOURCES: ClassVar[dict[str, str]] = {}


DGX_H100 = GPUNode("8 x H100 node", H100, 8, H100.nvlink_bytes_per_s, 8 * NIC_BYTES_PER_S, GPU_NET,
                   nvswitches=4, nvswitch_bytes_per_s=NVSWITCH_PORTS * NVSWITCH_PORT_BYTES_PER_S)
DGX_H200 = GPUNode("8 x H200 node", H200, 8, H200.nvlink_bytes_per_s, 8 * NIC_BYTES_PER_S, GPU_NET,
                   nvswitches=4, nvswitch_bytes_per_s=NVSWITCH_PORTS * NVSWITCH_PORT_BYTES_PER_S)
DGX_B200 = GPUNode("8 x B200 node", B200, 8, B200.nvlink_bytes_per_s, 8 * NIC_BYTES_PER_S, GPU_NET, nvswitches=2,
                   nvswitch_bytes_per_s=NVLINK5_SWITCH_PORTS * NVLINK5_LINK_BYTES_PER_S)
# Node egress: one 400 Gb/s NIC per GPU, 72 GPUs: 4 * 18 * 400e9 / 8 = 3.6e12 B/s (Appendix A). Its 18 NVLink 5
# switch chips (9 switch trays of 2, the DGX B200's chip) of 72 ports each: 18 * 72 * 5e10 = 6.48e13 B/s each way,
# the 130 TB/s both ways NVIDIA gives (https://www.nvidia.com/en-us/data-center/gb200-nvl72/).
GB200_NVL72 = GPUNode("GB200 NVL72", B200, GB200_TRAYS * GB200_GPUS_PER_TRAY, B200.nvlink_bytes_per_s,
                      GB200_TRAYS * GB200_GPUS_PER_TRAY * NIC_BYTES_PER_S,
                      GPU_BOOK + "#appendix-a-how-does-this-change-with-gb200", nvswitches=18,
                      nvswitch_bytes_per_s=NVLINK5_SWITCH_PORTS * NVLINK5_LINK_BYTES_PER_S)
H800_NODE = GPUNode("8 x H800 node", H800, 8, H800.nvlink_bytes_per_s, 8 * NIC_BYTES_PER_S, GPU_BOOK + "#examples")
# DGX A100: 8 A100s and 8 single-port 200 Gb/s HDR InfiniBand NICs for the compute fabric (DGX A100 User Guide).
DGX_A100 = GPUNode("8 x A100 node", A100, 8, A100.nvlink_bytes_per_s, 8 * HDR_NIC_BYTES_PER_S,
                   "https://docs.nvidia.com/dgx/dgxa100-user-guide/introduction-to-dgxa100.html")
NODES = (DGX_H100, DGX_H200, DGX_B200, GB200_NVL72, H800_NODE, DGX_A100)

# Google Cloud on-demand prices per chip-hour, February 2025 (Part 8).
PRICE_USD_PER_CHIP_HOUR = {"H100": 10.8, "TPU v5p": 4.2, "TPU v5e": 1.2}

BYTES_PER_ELEMENT = {"fp32": 4, "bf16": 2, "int8": 1, "fp8": 1}


def by_name(name: str) -> Chip:
    """The chip called ``name`` ("TPU v5e", "H100", ...), case and spaces ignored."""
    key = name.replace(" ", "").lower()
    for chip in CHIPS:
        if chip.name.replace(" ", "").lower() == key:
            return chip
    raise KeyError(f"unknown chip {name!r}; known: {', '.join(c.name for c in CHIPS)}")


def table(chips: tuple[Chip, ...] = TPUS) -> list[dict[str, object]]:
    """Rows for a notebook table: every field of each chip (None where the book gives none)."""
    return [{f.name: getattr(c, f.name) for f in fields(c) if f.name != "source"} for c in chips]
