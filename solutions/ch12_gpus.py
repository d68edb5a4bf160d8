"""Chapter 12, GPUs: every graded question of the chapter, as records with references.

Book: Part 12 "How to Think About GPUs", https://jax-ml.github.io/scaling-book/gpus/
Numbers are computed from ``course.hardware`` with ``solutions._derived`` (never typed in); where the book
prints a rounded or differently-based value, the tolerance admits it and ``BOOK`` records it for the
tests. Labels follow the syllabus with the dot of "Quiz 1, Question 1" dropped (Q1.1 -> q11, grade ids
allow no dots); PQ1-PQ3 are the pop quizzes, E1-E13 worked examples, CX1-CX4 coding exercises.
"""

from __future__ import annotations

import math
import random

import sympy as sp

import course
from autograder.numbers import Tolerance
from autograder.questions import Chapter, Choice, Formula, Function, Operand, Output, Program, ProgramSpec, Slip
from course import hardware as hw
from course.symbols import B, D, F, M, N, V, W, Y
from solutions._derived import topology as topo
from solutions._derived.hardware import critical_intensity, cuda_cores
from solutions._kit import ONE_PERCENT, THREE_FIGURES, TWO_PERCENT, P, jax, number, smap

H100, H200, B200, A100, H800, V5P = hw.H100, hw.H200, hw.B200, hw.A100, hw.H800, hw.TPU_V5P
NODE = hw.DGX_H100
W_GPU, W_NODE = NODE.nvlink_bytes_per_s_per_gpu, NODE.egress_bytes_per_s  # 4.5e11, 4e11 B/s
C_H100 = H100.bf16_flops_per_s
POD = topo.superpod()  # the 1024-GPU H100 SuperPod: node, leaf, spine levels
SU = topo.superpod(sus=1)  # one scalable unit (256 GPUs)

SECTION = "gpus/"
S = {k: SECTION + "#" + v for k, v in {
    "gpu": "what-is-a-gpu", "memory": "memory", "specs": "summary-of-gpu-specs",
    "quiz1": "quiz-1-gpu-hardware", "node": "at-the-node-level", "quiz2": "quiz-2-gpu-nodes",
    "beyond": "beyond-the-node-level", "quiz3": "quiz-3-beyond-the-node-level",
    "intra": "intra-node-collectives", "cross": "cross-node-collectives", "quiz4": "quiz-4-collectives",
    "dp": "data-parallelism", "tp": "tensor-parallelism", "examples": "examples",
    "quiz5": "quiz-5-llm-rooflines", "gb200": "appendix-a-how-does-this-change-with-gb200",
    "appendix_b": "appendix-b-more-networking-details"}.items()}
BF16 = hw.BYTES_PER_ELEMENT["bf16"]


# --- Quiz 1: the chip ------------------------------------------------------------------------------
V5P_ALUS = V5P.tensorcores_per_chip * hw.VPU_ALUS_PER_LANE_V5 * hw.VPU_SUBLANES * hw.VPU_LANES
VECTOR_FLOPS = cuda_cores(H100) * hw.H100_BASE_CLOCK_HZ  # one fp32 op per CUDA core per cycle, no FMA
VECTOR_FLOPS_BOOST = cuda_cores(H100) * hw.H100_BOOST_CLOCK_HZ
TENSOR_OVER_VECTOR = C_H100 / VECTOR_FLOPS_BOOST


def matmul_time(chip: hw.GPU, b: int, d: int, f: int, bytes_per_element: int = 2) -> tuple[float, float]:
    """(T_math, T_comms) of X[b, d] @ Y[d, f] -> Z[b, f] at dense peak and HBM bandwidth."""
    flops = 2 * b * d * f
    moved = bytes_per_element * (b * d + d * f + b * f)
    return flops / chip.bf16_flops_per_s, moved / chip.hbm_bytes_per_s


Q14_SMALL = matmul_time(B200, 64, 4096, 8192)
Q14_LARGE = matmul_time(B200, 512, 4096, 8192)
SMEM_BYTES = H100.sms * H100.smem_bytes_per_sm
REGISTER_BYTES = H100.sms * H100.register_bytes_per_sm
ON_CHIP_OVER_VMEM = (SMEM_BYTES + REGISTER_BYTES) / V5P.vmem_bytes
B200_CLOCK_HZ = hw.B200_FP32_VECTOR_FLOPS_PER_S_FMA / (cuda_cores(B200) * 2)
VADD_BYTES_PER_ELEMENT = 3 * hw.BYTES_PER_ELEMENT["fp32"]  # read x and y, write x + y


def vadd_time(n: int) -> float:
    """fp32[n] + fp32[n] on an H100: memory-bound, 12 bytes per element over HBM."""
    return VADD_BYTES_PER_ELEMENT * n / H100.hbm_bytes_per_s


# --- Quizzes 2 and 3: the network ----------------------------------------------------------------------
NODE_SWITCH_BYTES_PER_S = NODE.nvswitches * NODE.nvswitch_bytes_per_s  # 6.4e12
NODE_GPU_BYTES_PER_S = NODE.gpus * W_GPU  # 3.6e12
Q23_BYTES = BF16 * 4096 * 65536
SU_BYTES_PER_S = topo.su_bytes_per_s()  # 1.28e13
SPINE_BYTES_PER_S = topo.spine_bytes_per_s()  # 5.12e13
POD_NODES = hw.SU_NODES * hw.SUPERPOD_SUS

# --- collectives -----------------------------------------------------------------------------------------
PQ1_BYTES = BF16 * 1024 * 16384
PQ3_BYTES = BF16 * 8192 * 32768


def pq3_time(y: int) -> float:
    """AllGather_X(bf16[D_X, F_Y]) over one SU, Y the inner axis: with Y <= 8 the leaf level bounds it;
    beyond, each of the Y-way shards' groups spans Y/8 nodes, so the leaf bandwidth grows by Y/8."""
    if y <= NODE.gpus:
        return PQ3_BYTES * (hw.SU_NODES - 1) / (hw.SU_NODES * W_NODE)
    return PQ3_BYTES * SU.gpus / (y * SU_BYTES_PER_S)


TWO_NODES = topo.superpod(nodes_per_su=2, sus=1)
Q45_CROSS = TWO_NODES.levels[1].collective_bytes_per_s  # 2 * 4e11 / (2 - 1)
E5_SLOWDOWN = (NODE.gpus * W_GPU) / (2 * W_NODE)  # B / (2 W_node) over B / (8 W_gpu)

# --- Quiz 5 and the LLM rooflines ------------------------------------------------------------------------
DGX_B200 = hw.DGX_B200
Q52_PARAMS, Q52_TOKENS, Q52_GPUS, Q52_MFU, Q52_BATCH, Q52_F = 70e9, 15e12, 4096, 0.45, 4e6, 28_672
Q52_BYTES_PER_PARAM = 2 + 8  # bf16 weights, fp32 Adam moments (two of them)
Q52_DAYS = 6 * Q52_PARAMS * Q52_TOKENS / (Q52_GPUS * C_H100 * Q52_MFU) / 86400
Q52_TP = Q52_F * W_GPU / C_H100
Q52_PP_THRESHOLD = C_H100 / (8 * W_NODE)  # 8-way pipelining: each DP group spans 8 nodes' egress
DP_NODE, DP_SCALEOUT = C_H100 / W_GPU, C_H100 / W_NODE
SEQ = 4096
Q53 = {"16b": (192, 192, 8), "70b": (384, 768, 16), "314b": (1536, 3072, 64)}  # sequences, GPUs, model-parallel ways


def megatron_threshold(model_parallel: int) -> float:
    """Per-GPU token batch for compute-bound DP when model parallelism spans model_parallel/8 nodes."""
    return DP_SCALEOUT / (model_parallel / NODE.gpus)


# --- inline examples -------------------------------------------------------------------------------------
TC_FLOPS_PER_CYCLE = {g.name: g.bf16_flops_per_s / (g.sms * g.tensor_cores_per_sm * g.tensor_clock_hz)
                      for g in (H100, B200)}
REGISTERS_PER_THREAD = 256
RESIDENT_WARPS = H100.register_bytes_per_sm / (4 * 32 * REGISTERS_PER_THREAD)  # 32-bit registers, 32 threads
E6_SHARD_BYTES = BF16 * 8192 * (28_672 // 8)
E7_SHARP = hw.NVLINK_ALLREDUCE_MEASURED_BYTES_PER_S * (1 + hw.SHARP_MEASURED_GAIN)
E10_TOKENS = 4096 * 15360
E11_PER_GPU = 16e6 / 16384
E12_GAIN = (hw.GB200_NVL72.egress_bytes_per_s / B200.bf16_flops_per_s) / (W_NODE / C_H100)
E13_PER_GPU = SPINE_BYTES_PER_S / POD.gpus

# --- CX1: one AllGather, three networks --------------------------------------------------------------
CX1_BYTES = 1e9
CX1_TORUS = topo.Torus.slice(V5P, (4, 4, 4))  # 64 v5p chips, wraparound on every axis
CX1_TIMES = {
    "torus": CX1_TORUS.allgather_s(CX1_BYTES),
    "nvlink": topo.nvlink_domain(NODE).allgather_s(CX1_BYTES),
    "infiniband": topo.superpod(nodes_per_su=8, sus=1).allgather_s(CX1_BYTES),  # 64 H100s in 8 nodes
}


def level_list(tree: topo.FatTree) -> list[list[float]]:
    return [[lv.children, lv.child_bytes_per_s] for lv in tree.levels]


CX1_PROBES = (
    dict(nbytes=float(Q23_BYTES), levels=level_list(topo.nvlink_domain(NODE))),
    dict(nbytes=float(PQ1_BYTES), levels=level_list(topo.nvlink_domain(NODE))),
    dict(nbytes=1e9, levels=level_list(POD)),
    dict(nbytes=1e9, levels=level_list(TWO_NODES)),
    dict(nbytes=float(PQ3_BYTES), levels=[[hw.SU_NODES, W_NODE]]),
    dict(nbytes=1e9, levels=level_list(topo.nvlink_domain(hw.GB200_NVL72))),
)


def tree_allgather(nbytes: float, levels: list[list[float]]) -> float:
    """CX1's reference, from the course's fat-tree model: bytes * max over levels of (D - 1) / (D * W)."""
    tree = topo.FatTree(tuple(topo.Level(str(i), int(d), float(w)) for i, (d, w) in enumerate(levels)))
    return tree.allgather_s(nbytes)


def t_allgather(nbytes, levels):
    """Every level runs its own ring at once, so the slowest level sets the time: each of its D children
    receives the (D - 1) / D of the array it lacks at W bytes/s."""
    return nbytes * max((d - 1) / (d * w) for d, w in levels)


def cx1_without_ring_factor(nbytes, levels):
    return nbytes / min(w for _, w in levels)


# --- CX2: hierarchical AllReduce on a (node, gpu) mesh -------------------------------------------------------
CX2_SHAPE = (2, 4, 32, 16)  # one partial f32[32, 16] per device of the X=2 (nodes) x Y=4 (GPUs) mesh
CX2_MESH = (("X", 2), ("Y", 4))
RING_STEPS, RING_BYTES = topo.ring_allreduce_steps(8)
TREE_STEPS, TREE_BYTES = topo.tree_allreduce_steps(8)
NODE_FRACTION = 1 / CX2_SHAPE[1]  # after the ReduceScatter over Y each device holds 1/Y of the array


def hierarchical_allreduce(x):
    """ReduceScatter inside each node (Y), AllReduce of the 1/Y shards across nodes (X), AllGather
    inside the node. x: f32[2, 4, 32, 16] @ P('X', 'Y') -> f32[32, 16] replicated."""
    def block(x_block):  # f32[1, 1, 32, 16]: this device's partial sum
        partial = x_block[0, 0]  # f32[32, 16]
        shard = jax.lax.psum_scatter(partial, "Y", scatter_dimension=0, tiled=True)  # f32[8, 16], summed in-node
        shard = jax.lax.psum(shard, "X")  # f32[8, 16]: only these bytes cross nodes
        return jax.lax.all_gather(shard, "Y", axis=0, tiled=True, to="invarying")  # f32[32, 16]

    return jax.shard_map(block, mesh=course.mesh(X=2, Y=4), in_specs=P("X", "Y"), out_specs=P())(x)


def cx2_flat_psum(x):
    return smap(lambda b: jax.lax.psum(b[0, 0], ("X", "Y")), CX2_MESH, (P("X", "Y"),), P())(x)


def cx2_forgets_nodes(x):
    def block(b):
        shard = jax.lax.psum_scatter(b[0, 0], "Y", scatter_dimension=0, tiled=True)
        return jax.lax.all_gather(shard, "Y", axis=0, tiled=True, to="invarying")
    return smap(block, CX2_MESH, (P("X", "Y"),), P(), check_vma=False)(x)


# --- CX4: critical batches of every GPU ------------------------------------------------------------------------
CX4_PROBES = tuple([dict(chip=g.name, channel="hbm") for g in (A100, H100, H200, B200)]
                   + [dict(chip=g.name, channel="nvlink") for g in (A100, H100, B200, H800)]
                   + [dict(chip=g.name, channel="scaleout") for g in (H100, B200)])


def gpu_intensity(chip, channel):
    """C / W of a GPU on "hbm", "nvlink" (its own NVLink bandwidth, one direction) or "scaleout"
    (the InfiniBand egress of an 8-GPU node: the bandwidth a cross-node collective gets)."""
    g = hw.by_name(chip)
    bandwidth = {"hbm": g.hbm_bytes_per_s, "nvlink": g.nvlink_bytes_per_s, "scaleout": 8 * hw.NIC_BYTES_PER_S}
    return g.bf16_flops_per_s / bandwidth[channel]


# Every GPU and channel; the grade draws among those not public.
CX4_UNSEEN = [dict(chip=g.name, channel=ch) for g in (A100, H100, H200, B200, H800)
              for ch in ("hbm", "nvlink", "scaleout") if dict(chip=g.name, channel=ch) not in CX4_PROBES]


def draw_cx4(rng: random.Random, probe: dict) -> dict:
    return dict(rng.choice(CX4_UNSEEN))


def cx4_per_gpu_nic(chip: str, channel: str) -> float:
    return gpu_intensity(chip, channel) * (8 if channel == "scaleout" else 1)


# The book's printed answers (syllabus, pinned V2), for the tests that compare them with ours.
BOOK = {
    "ch12-q11-h100-cuda-cores": 16896, "ch12-q11-b200-cuda-cores": 18944, "ch12-q11-v5p-alus": 8192,
    "ch12-q12-vector-flops": 26.9e12, "ch12-q12-vector-flops-boost": 33.5e12, "ch12-q12-tensor-ratio": 30,
    "ch12-q13-h100-intensity": 295, "ch12-q13-b200-intensity": 281, "ch12-q13-h100-fp8-intensity": 590,
    "ch12-q13-b200-fp8-intensity": 562, "ch12-q14-small-time": 8.6e-6, "ch12-q14-large-time": 15e-6,
    "ch12-q15-smem-bytes": 33e6, "ch12-q15-register-bytes": 33e6, "ch12-q15-vmem-ratio": 0.55,
    "ch12-q16-b200-clock": 2.1e9, "ch12-q17-intensity": 1 / 12, "ch12-q17-chip-intensity": 10,
    "ch12-q17-time-64k": 0.23e-6, "ch12-q17-time-1g": 3.84e-3,
    "ch12-q21-node-bandwidth": 3.6e12, "ch12-q22-bisection": 3.6e12, "ch12-q23-allgather-time": 1.04e-3,
    "ch12-q31-node-egress": 400e9, "ch12-q31-su-bandwidth": 12.8e12, "ch12-q31-spine-bandwidth": 51.2e12,
    "ch12-q31-per-node": 400e9, "ch12-q32-spines-2048": 32,
    "ch12-pq1-approx": 75e-6, "ch12-pq1-exact": 65e-6, "ch12-q45-cross-node-bandwidth": 800e9,
    "ch12-q51-flops-ratio": 2.25, "ch12-q51-tp-intensity": 2500, "ch12-q51-dp-threshold": 5625,
    "ch12-q52-min-gpus": 9, "ch12-q52-days": 40, "ch12-q52-tp-limit": 14.372, "ch12-q52-memory-per-gpu": 87.5e9,
    "ch12-q52-batch-per-gpu": 976, "ch12-q52-pp-threshold": 309,
    "ch12-q53-tokens-16b": 4096, "ch12-q53-tokens-70b": 2048, "ch12-q53-tokens-314b": 2048,
    "ch12-q53-threshold-314b": 300,
    "ch12-e1-h100-tc-flops": 1024, "ch12-e1-b200-tc-flops": 2048, "ch12-e2-warps": 8,
    "ch12-e3-gpu-egress": 450e9, "ch12-e3-switch-capacity": 6.4e12,
    "ch12-e4-node-level": 514e9, "ch12-e4-leaf-level": 413e9, "ch12-e4-spine-level": 17.1e12, "ch12-e5-slowdown": 4.5,
    "ch12-e7-sharp-bandwidth": 480e9, "ch12-e8-dp-node": 2200, "ch12-e8-dp-scaleout": 2475,
    "ch12-e8-llama-batch": 40e6, "ch12-e8-deepseek-batch": 6.7e6, "ch12-e8-moe": 79_200, "ch12-e8-two-nodes": 1237,
    "ch12-e9-tp-max": 11, "ch12-e9-two-node-tp": 19, "ch12-e10-tokens": 62_914_560, "ch12-e10-per-gpu": 30_000,
    "ch12-e10-model-parallel": 1024, "ch12-e11-per-gpu": 1000, "ch12-e12-egress": 3.6e12, "ch12-e12-ratio": 9,
    "ch12-e12-roofline-gain": 4, "ch12-e13-per-gpu-spine": 50e9,
}
# Values the syllabus derives (the book prints none), checked by the tests the same way.
DERIVED = {"ch12-q17-time-1k": 3.6e-9, "ch12-pq3-small-y": 1.300e-3, "ch12-pq3-y16": 0.671e-3,
           "ch12-q53-threshold-70b": 1237.5}


CHAPTER = Chapter("ch12_gpus", "GPUs", (
    # Q1.1: CUDA cores.
    number("ch12-q11-h100-cuda-cores", section=S["quiz1"], prompt="How many fp32 CUDA cores does an H100 have?",
           reference=cuda_cores(H100), exact=True,
           slips=(Slip(H100.sms * 32, "ratio:1/4", "an SM has 4 subpartitions of 32 cores."),)),
    number("ch12-q11-b200-cuda-cores", section=S["quiz1"], prompt="How many fp32 CUDA cores does a B200 have?",
           reference=cuda_cores(B200), exact=True,
           slips=(Slip(cuda_cores(B200) * 2, "ratio:2", "count cores, not FLOPs per cycle."),)),
    number("ch12-q11-v5p-alus", section=S["quiz1"], prompt="How many independent vector ALUs does a TPU v5p chip have?",
           reference=V5P_ALUS, exact=True, slips=(Slip(V5P_ALUS / 2, "ratio:1/2", "a v5p chip has two TensorCores."),)),
    # Q1.2: vector FLOP/s.
    number("ch12-q12-vector-flops", section=S["quiz1"],
           prompt="fp32 vector FLOP/s of an H100 at 1.59 GHz (no FMA doubling).", reference=VECTOR_FLOPS, unit="FLOP/s",
           tolerance=ONE_PERCENT,
           slips=(Slip(2 * VECTOR_FLOPS, "ratio:2", "count one operation per core per cycle, not an FMA."),)),
    number("ch12-q12-vector-flops-boost", section=S["quiz1"], prompt="The same at the 1.98 GHz boost clock.",
           reference=VECTOR_FLOPS_BOOST, unit="FLOP/s", tolerance=ONE_PERCENT,
           slips=(Slip(2 * VECTOR_FLOPS_BOOST, "ratio:2"),)),
    number("ch12-q12-tensor-ratio", section=S["quiz1"], prompt="Tensor-core bf16 FLOP/s over boosted vector FLOP/s.",
           reference=TENSOR_OVER_VECTOR,
           tolerance=Tolerance(low=29, high=30),  # the book: "around 30x"
           slips=(Slip(TENSOR_OVER_VECTOR / 2, "ratio:1/2", "the vector rate here has no FMA doubling."),)),
    # Q1.3: critical intensities.
    number("ch12-q13-h100-intensity", section=S["quiz1"], prompt="Critical bf16 matmul intensity of an H100.",
           reference=critical_intensity(H100),
           tolerance=Tolerance(rtol=0.03),  # the book's 295 uses 3.35e12 B/s
           slips=(Slip(hw.H100_SPARSE_BF16_FLOPS_PER_S / H100.hbm_bytes_per_s, "ratio:2",
                       "use the dense peak, not the 2:4-sparse datasheet figure."),)),
    number("ch12-q13-b200-intensity", section=S["quiz1"], prompt="Critical bf16 matmul intensity of a B200.",
           reference=critical_intensity(B200),
           tolerance=Tolerance(rtol=0.03),  # the book's 281 uses 2.25e15 FLOP/s
           slips=(Slip(B200.bf16_flops_per_s / 9e12, "close", "use the table's HBM bandwidth."),)),
    number("ch12-q13-h100-fp8-intensity", section=S["quiz1"], prompt="Critical fp8 matmul intensity of an H100.",
           reference=H100.fp8_flops_per_s / H100.hbm_bytes_per_s, tolerance=Tolerance(rtol=0.03),
           slips=(Slip(critical_intensity(H100), "ratio:1/2", "fp8 doubles the FLOP rate."),)),
    number("ch12-q13-b200-fp8-intensity", section=S["quiz1"], prompt="Critical fp8 matmul intensity of a B200.",
           reference=B200.fp8_flops_per_s / B200.hbm_bytes_per_s, tolerance=Tolerance(rtol=0.03),
           slips=(Slip(critical_intensity(B200), "ratio:1/2", "fp8 doubles the FLOP rate."),)),
    # Q1.4: two matmuls on a B200.
    number("ch12-q14-small-time", section=S["quiz1"], prompt="Seconds for fp16[64,4096] x fp16[4096,8192] on a B200.",
           reference=max(Q14_SMALL), unit="s",
           slips=(Slip(Q14_SMALL[0], "magnitude:-1", "that is the compute time; which one is larger?"),
                  Slip(2 * max(Q14_SMALL), "ratio:2", "fp16 is 2 bytes per element."))),
    Choice(qid="ch12-q14-small-bound", points=1, section=S["quiz1"],
           prompt="Is the B = 64 matmul compute- or memory-bound?",
           reference="memory", options=("compute", "memory"),
           slips=(Slip("compute", "wrong_option", "compare 64 with the B200's critical intensity."),)),
    number("ch12-q14-large-time", section=S["quiz1"], prompt="Seconds for fp16[512,4096] x fp16[4096,8192] on a B200.",
           reference=max(Q14_LARGE), unit="s",
           slips=(Slip(Q14_LARGE[1], "ratio:2/3", "that is the memory time; which one is larger?"),)),
    Choice(qid="ch12-q14-large-bound", points=1, section=S["quiz1"],
           prompt="Is the B = 512 matmul compute- or memory-bound?",
           reference="compute", options=("compute", "memory"),
           slips=(Slip("memory", "wrong_option", "compare 512 with the B200's critical intensity."),)),
    # Q1.5: on-chip memory.
    number("ch12-q15-smem-bytes", section=S["quiz1"], prompt="Bytes of SMEM (L1) on an H100, all SMs together.",
           reference=SMEM_BYTES, unit="B",
           tolerance=Tolerance(low=33e6, high=35e6),  # the book: "about 33MB" of each
           slips=(Slip(SMEM_BYTES / 1e3, "unit:1/1000", "256 kB is 256e3 bytes."),)),
    number("ch12-q15-register-bytes", section=S["quiz1"], prompt="Bytes of registers on an H100, all SMs together.",
           reference=REGISTER_BYTES, unit="B", tolerance=Tolerance(low=33e6, high=35e6),
           slips=(Slip(REGISTER_BYTES / 4, "ratio:1/4", "each register holds 32 bits: 4 bytes."),)),
    number("ch12-q15-vmem-ratio", section=S["quiz1"], prompt="(SMEM + registers) of an H100 over a TPU v5p's VMEM.",
           reference=ON_CHIP_OVER_VMEM,
           tolerance=Tolerance(rtol=0.1),  # the book compares 66 MB with "120MB"
           slips=(Slip(SMEM_BYTES / V5P.vmem_bytes, "ratio:1/2", "add the registers to the SMEM."),)),
    # Q1.6: B200 clock.
    number("ch12-q16-b200-clock", section=S["quiz1"],
           prompt="Clock (Hz) implied by 8e13 fp32 vector FLOP/s (FMA counted as 2).", reference=B200_CLOCK_HZ,
           tolerance=ONE_PERCENT,
           slips=(Slip(2 * B200_CLOCK_HZ, "ratio:2", "an FMA is 2 FLOPs per core per cycle."),)),
    # Q1.7: vector add.
    Formula(qid="ch12-q17-bytes", points=1, section=S["quiz1"], prompt="HBM bytes of fp32[N] + fp32[N].",
            reference=VADD_BYTES_PER_ELEMENT * N, symbols="N",
            slips=(Slip(8 * N, "ratio:2/3", "the sum is written back too."),
                   Slip(6 * N, "ratio:1/2", "fp32 is 4 bytes per element."))),
    number("ch12-q17-intensity", section=S["quiz1"], prompt="FLOPs per byte of that vector add.",
           reference=1 / VADD_BYTES_PER_ELEMENT, tolerance=ONE_PERCENT,
           slips=(Slip(VADD_BYTES_PER_ELEMENT, "magnitude:+2", "FLOPs divided by bytes."),)),
    number("ch12-q17-chip-intensity", section=S["quiz1"],
           prompt="The H100's vector critical intensity (boost vector FLOP/s over HBM).",
           reference=VECTOR_FLOPS_BOOST / H100.hbm_bytes_per_s, tolerance=TWO_PERCENT,
           slips=(Slip(2 * VECTOR_FLOPS_BOOST / H100.hbm_bytes_per_s, "ratio:2"),)),
    number("ch12-q17-time-64k", section=S["quiz1"], prompt="Seconds for the add with N = 65,536.",
           reference=vadd_time(65536), unit="s",
           slips=(Slip(65536 / VECTOR_FLOPS_BOOST, "magnitude:-2", "the add is memory-bound."),
                  Slip(vadd_time(65536) * 1e6, "unit:1000000"))),
    number("ch12-q17-time-1k", section=S["quiz1"], prompt="Seconds for N = 1024.", reference=vadd_time(1024), unit="s",
           slips=(Slip(vadd_time(1024) / 3, "ratio:1/3", "3 arrays of 4-byte elements move."),)),
    number("ch12-q17-time-1g", section=S["quiz1"], prompt="Seconds for N = 1024**3.", reference=vadd_time(1024**3),
           unit="s", slips=(Slip(vadd_time(1024**3) / 2, "ratio:1/2", "fp32 is 4 bytes per element."),)),
    # Quiz 2: nodes.
    number("ch12-q21-node-bandwidth", section=S["quiz2"],
           prompt="Total GPU-to-GPU bandwidth of an 8 x H100 node with 4 NVSwitches (B/s).",
           reference=min(NODE_SWITCH_BYTES_PER_S, NODE_GPU_BYTES_PER_S), unit="B/s", tolerance=THREE_FIGURES,
           slips=(Slip(NODE_SWITCH_BYTES_PER_S, "not_equal",
                       "the switches have spare ports; what can the GPUs send?"),)),
    number("ch12-q22-bisection", section=S["quiz2"], prompt="Bisection bandwidth of the node, both directions (B/s).",
           reference=NODE_GPU_BYTES_PER_S, unit="B/s", tolerance=THREE_FIGURES,
           slips=(Slip(NODE_GPU_BYTES_PER_S / 2, "ratio:1/2", "count the flow in both directions."),)),
    Formula(qid="ch12-q23-allgather-formula", points=1, section=S["quiz2"],
            prompt="Throughput-bound AllGather of B bytes over N GPUs of W bytes/s each way.",
            reference=B * (N - 1) / (N * W), symbols="B N W", counts="N",
            slips=(Slip(B / W, "missing_symbol:N", "each GPU already holds its own 1/N."),
                   Slip(2 * B * (N - 1) / (N * W), "ratio:2", "that is an AllReduce."))),
    number("ch12-q23-allgather-time", section=S["quiz2"],
           prompt="Seconds to AllGather bf16[D_X, F], D = 4096, F = 65,536, on 8 x H100.",
           reference=topo.node_allgather_s(Q23_BYTES, NODE.gpus, W_GPU), unit="s",
           slips=(Slip(Q23_BYTES / W_GPU, "close", "keep the exact (N - 1)/N factor."),
                  Slip(2 * topo.node_allgather_s(Q23_BYTES, NODE.gpus, W_GPU), "ratio:2", "bf16 is 2 bytes."))),
    # Quiz 3: the SuperPod.
    number("ch12-q31-node-egress", section=S["quiz3"],
           prompt="Scale-out bandwidth of one H100 node (8 x 400 Gb/s), B/s.", reference=W_NODE, unit="B/s",
           tolerance=THREE_FIGURES, slips=(Slip(8 * 400e9, "ratio:8", "400 Gb/s is 50 GB/s."),)),
    number("ch12-q31-su-bandwidth", section=S["quiz3"],
           prompt="Bandwidth from one SU's 32 nodes into its 8 leaf switches, B/s.", reference=SU_BYTES_PER_S,
           unit="B/s", tolerance=THREE_FIGURES,
           slips=(Slip(2 * SU_BYTES_PER_S, "ratio:2", "half of each leaf's ports face the spines."),)),
    number("ch12-q31-spine-bandwidth", section=S["quiz3"], prompt="Bandwidth of the 16 spine switches together, B/s.",
           reference=SPINE_BYTES_PER_S, unit="B/s", tolerance=THREE_FIGURES,
           slips=(Slip(SPINE_BYTES_PER_S / 2, "ratio:1/2", "every spine port faces a leaf."),)),
    number("ch12-q31-per-node", section=S["quiz3"], prompt="Spine bandwidth per node of the 1024-GPU pod, B/s.",
           reference=SPINE_BYTES_PER_S / POD_NODES, unit="B/s", tolerance=THREE_FIGURES,
           slips=(Slip(E13_PER_GPU, "ratio:1/8", "per node (8 GPUs), not per GPU."),)),
    number("ch12-q32-spines-2048", section=S["quiz3"],
           prompt="How many spine switches does a 2048-GPU two-level tree with full bisection need?",
           reference=topo.spine_switches_needed(2048), exact=True,
           slips=(Slip(hw.SUPERPOD_SPINE_SWITCHES, "ratio:1/2", "twice the GPUs need twice the uplinks."),)),
    number("ch12-q32-two-level-max", section=S["quiz3"],
           prompt="How many GPUs, at most, can a two-level tree of 64-port switches reach at full "
                  "bisection?", reference=topo.two_level_max_gpus(), exact=True,
           slips=(Slip(2 * topo.two_level_max_gpus(), "ratio:2", "a leaf uses half its ports to go up."),)),
    Choice(qid="ch12-q32-beyond", points=1, section=S["quiz3"],
           prompt="How does the reference design reach 4096 GPUs: 'more-spines', 'core-layer' or 'bigger-nodes'?",
           reference="core-layer", options=("more-spines", "core-layer", "bigger-nodes"),
           slips=(Slip("more-spines", "wrong_option", "count the leaf switches a 64-port spine can reach."),)),
    # Collectives in a node.
    number("ch12-pq1-approx", section=S["intra"],
           prompt="AllGather bf16[B_X, F], B = 1024, F = 16,384, on 8 x H100, as bytes / W (s).",
           reference=PQ1_BYTES / W_GPU, unit="s", slips=(Slip(2 * PQ1_BYTES / W_GPU, "ratio:2", "bf16 is 2 bytes."),)),
    number("ch12-pq1-exact", section=S["intra"], prompt="The same with the exact (N - 1)/N factor (s).",
           reference=topo.node_allgather_s(PQ1_BYTES, NODE.gpus, W_GPU), unit="s",
           slips=(Slip(PQ1_BYTES / W_GPU, "close", "keep the (N - 1)/N factor."),)),
    Formula(qid="ch12-pq2-dense", points=1, section=S["intra"],
            prompt="AllToAll of V bytes over N GPUs of W bytes/s each way (exact).",
            reference=V * (N - 1) / (W * N**2), symbols="V N W", counts="N",
            slips=(Slip(V / (W * N), "lower_terms", "each GPU keeps the 1/N of its shard that stays home."),
                   Slip(V / (4 * W), "missing_symbol:N", "that is the TPU ring's cost, not a switch's."))),
    Formula(qid="ch12-pq2-half", points=1, section=S["intra"],
            prompt="The same when only half of each GPU's destination shards are non-zero.",
            reference=V * (N - 1) / (2 * W * N**2), symbols="V N W", counts="N",
            slips=(Slip(V * (N - 1) / (W * N**2), "ratio:2", "zero shards need not be sent."),)),
    number("ch12-pq3-small-y", section=S["cross"],
           prompt="AllGather_X(bf16[D_X, F_Y]) over one SU, D = 8192, F = 32,768, Y <= 8 (s).", reference=pq3_time(8),
           unit="s", slips=(Slip(PQ3_BYTES / W_GPU, "close", "the leaf level is the bottleneck."),)),
    number("ch12-pq3-y16", section=S["cross"], prompt="The same with Y = 16 (s).", reference=pq3_time(16), unit="s",
           slips=(Slip(pq3_time(8), "not_equal", "a 16-way inner axis spans 2 nodes, doubling the leaf bandwidth."),)),
    Formula(qid="ch12-pq3-formula", points=1, section=S["cross"],
            prompt="That time for Y > 8 in D, F, Y and the per-GPU scale-out bandwidth W.",
            reference=2 * D * F / (Y * W), symbols="D F Y W",
            slips=(Slip(2 * D * F / W, "missing_symbol:Y"),)),
    # Quiz 4: collectives through switches.
    Formula(qid="ch12-q41-node-egress-bytes", points=1, section=S["quiz4"],
            prompt="Bytes a node-level switch egresses during an AllGather of B bytes (M nodes of N GPUs).",
            reference=B * N, symbols="B N M", counts="N M",
            slips=(Slip(B, "missing_symbol:N", "every GPU of the node needs the whole array."),)),
    Formula(qid="ch12-q41-spine-time", points=1, section=S["quiz4"],
            prompt="Time the spine level needs for that AllGather (W: node egress bandwidth).",
            reference=B * (M - 1) / (M * W), symbols="B M W", counts="M",
            slips=(Slip(B / W, "missing_symbol:M", "each node already holds its own 1/M."),)),
    Formula(qid="ch12-q42-sharp-bytes", points=1, section=S["quiz4"],
            prompt="Bytes into (and out of) the switch in a SHARP AllReduce of B bytes over N GPUs.",
            reference=B * N, symbols="B N", counts="N",
            slips=(Slip(B * (N - 1), "lower_terms", "count the B/N shards that come back up too."),)),
    Formula(qid="ch12-q42-sharp-time", points=1, section=S["quiz4"],
            prompt="Time of that SHARP AllReduce with W bytes/s per GPU each way.",
            reference=B / W, symbols="B N W", counts="N",
            slips=(Slip(2 * B * (N - 1) / (N * W), "extra_symbol:N", "that is the ring AllReduce."),)),
    Formula(qid="ch12-q43-sharp-tp", points=1, section=S["quiz4"],
            prompt="SHARP AllReduce of bf16[D, F_Y]{U_X} inside one node (W per GPU).",
            reference=BF16 * D * F / (Y * W), symbols="D F Y W",
            slips=(Slip(BF16 * D * F / W, "missing_symbol:Y", "each GPU only holds F/Y of the columns."),)),
    Formula(qid="ch12-q44-spine-ar", points=1, section=S["quiz4"],
            prompt="The same AllReduce with Y = 256 at the spine level of the SuperPod, in D and F.",
            reference=BF16 * D * F / sp.nsimplify(SU_BYTES_PER_S), symbols="D F",
            slips=(Slip(BF16 * D * F / sp.nsimplify(SU_BYTES_PER_S / 2), "ratio:2",
                        "the current text's spine has 51.2 TB/s over 4 SUs."),)),
    number("ch12-q45-cross-node-bandwidth", section=S["quiz4"],
           prompt="AllGather bandwidth across exactly 2 H100 nodes, B/s (B over the time).", reference=Q45_CROSS,
           unit="B/s", tolerance=ONE_PERCENT,
           slips=(Slip(W_NODE, "ratio:1/2", "(M - 1)/M with M = 2 is 1/2."),)),
    Choice(qid="ch12-q45-bound", points=1, section=S["quiz4"],
           prompt="Which level bounds an AllGather over exactly 2 nodes: 'node' or 'cross-node'?",
           reference="node", options=("node", "cross-node"),
           slips=(Slip("cross-node", "wrong_option", "compare B * 7/(8 * 450e9) with B/(2 * 400e9)."),)),
    # Quiz 5: rooflines.
    number("ch12-q51-flops-ratio", section=S["quiz5"], prompt="B200 bf16 FLOP/s over H100's.",
           reference=B200.bf16_flops_per_s / C_H100,
           tolerance=Tolerance(rtol=0.035),  # the book's 2.25 uses 2.25e15
           slips=(Slip(2.0, "close", "compare FLOP/s, not NVLink bandwidth."),)),
    number("ch12-q51-tp-intensity", section=S["quiz5"], prompt="B200 tensor-parallel critical intensity, C / W_NVLink.",
           reference=B200.bf16_flops_per_s / DGX_B200.nvlink_bytes_per_s_per_gpu, tolerance=Tolerance(rtol=0.035),
           slips=(Slip(B200.bf16_flops_per_s / W_GPU, "ratio:2", "NVLink 5 doubles the per-GPU bandwidth."),)),
    number("ch12-q51-dp-threshold", section=S["quiz5"],
           prompt="B200 DGX data-parallel per-GPU batch threshold, C / W_node.",
           reference=B200.bf16_flops_per_s / DGX_B200.egress_bytes_per_s, tolerance=Tolerance(rtol=0.035),
           slips=(Slip(B200.bf16_flops_per_s / DGX_B200.nvlink_bytes_per_s_per_gpu, "not_equal",
                       "data parallelism across nodes uses the node's scale-out egress."),)),
    Choice(qid="ch12-q51-dp-change", points=1, section=S["quiz5"],
           prompt="Compared with H100, is cross-node data parallelism on B200 DGX 'easier', 'same' or 'harder'?",
           reference="harder", options=("easier", "same", "harder"),
           slips=(Slip("easier", "wrong_option", "more FLOPs per GPU, same scale-out bandwidth."),)),
    number("ch12-q52-min-gpus", section=S["quiz5"],
           prompt="How many H100s, at fewest, hold LLaMA 3-70B's bf16 weights and fp32 Adam state?",
           reference=math.ceil(Q52_PARAMS * Q52_BYTES_PER_PARAM / H100.hbm_bytes), exact=True,
           slips=(Slip(Q52_PARAMS * Q52_BYTES_PER_PARAM / H100.hbm_bytes, "close", "a GPU is indivisible."),)),
    number("ch12-q52-days", section=S["quiz5"], prompt="Days to train it on 15e12 tokens with 4096 H100s at 45% MFU.",
           reference=Q52_DAYS, unit="days",
           slips=(Slip(Q52_DAYS * Q52_MFU, "not_equal", "divide by the utilisation: only 45% of peak is achieved."),)),
    number("ch12-q52-tp-limit", section=S["quiz5"],
           prompt="Largest tensor parallelism inside a node before comms dominate (F = 28,672).", reference=Q52_TP,
           tolerance=Tolerance(low=Q52_TP * 0.99, high=14.4),  # the book divides by "1995": 14.37
           slips=(Slip(Q52_F * W_NODE / C_H100, "close", "inside a node, NVLink is the link."),)),
    number("ch12-q52-memory-per-gpu", section=S["quiz5"],
           prompt="Bytes of weights and optimizer state per GPU with only 8-way TP.",
           reference=Q52_PARAMS * Q52_BYTES_PER_PARAM / 8, unit="B", tolerance=ONE_PERCENT,
           slips=(Slip(Q52_PARAMS * 2 / 8, "magnitude:-1", "Adam's two fp32 moments are 8 bytes per parameter."),)),
    number("ch12-q52-batch-per-gpu", section=S["quiz5"], prompt="Tokens per GPU of a 4e6-token batch on 4096 GPUs.",
           reference=Q52_BATCH / Q52_GPUS, tolerance=ONE_PERCENT,
           slips=(Slip(Q52_BATCH / Q52_GPUS * 8, "ratio:8", "per GPU, not per node."),)),
    number("ch12-q52-pp-threshold", section=S["quiz5"],
           prompt="Per-GPU batch threshold with 8-way pipelining (DP groups spanning 8 nodes).",
           reference=Q52_PP_THRESHOLD, slips=(Slip(DP_SCALEOUT, "ratio:8", "8 nodes' egress serves each group."),)),
    Choice(qid="ch12-q52-config", points=1, section=S["quiz5"],
           prompt="Which is compute-bound and fits: 'tp8-dp512', 'tp8-zero3' or 'tp8-pp8-zero'?",
           reference="tp8-pp8-zero", options=("tp8-dp512", "tp8-zero3", "tp8-pp8-zero"),
           slips=(Slip("tp8-dp512", "wrong_option", "check the memory per GPU."),
                  Slip("tp8-zero3", "wrong_option", "compare the batch per GPU with the DP threshold."))),
    *[number(f"ch12-q53-tokens-{name}", section=S["quiz5"],
             prompt=f"Tokens per GPU of Megatron-LM's {name.upper()} run.", reference=seqs * SEQ / gpus,
             tolerance=THREE_FIGURES, slips=(Slip(seqs / gpus, "magnitude:-4", "count tokens: sequences times 4096."),))
      for name, (seqs, gpus, _) in Q53.items()],
    number("ch12-q53-threshold-70b", section=S["quiz5"],
           prompt="Per-GPU DP threshold of the 70B run (16-way model parallelism).",
           reference=megatron_threshold(Q53["70b"][2]), tolerance=Tolerance(rtol=0.05),
           slips=(Slip(DP_SCALEOUT, "ratio:2", "model parallelism over 2 nodes doubles the bandwidth."),)),
    number("ch12-q53-threshold-314b", section=S["quiz5"],
           prompt="Per-GPU DP threshold of the 314B run (64-way model parallelism).",
           reference=megatron_threshold(Q53["314b"][2]), tolerance=Tolerance(rtol=0.05),
           slips=(Slip(DP_SCALEOUT, "ratio:8", "model parallelism over 8 nodes."),)),
    # E1-E13.
    number("ch12-e1-h100-tc-flops", section=S["gpu"], prompt="bf16 FLOPs per cycle of one H100 tensor core (1.76 GHz).",
           reference=TC_FLOPS_PER_CYCLE["H100"],
           tolerance=Tolerance(rtol=0.05),  # the book rounds to 1024
           slips=(Slip(4 * TC_FLOPS_PER_CYCLE["H100"], "ratio:4", "4 per SM."),)),
    number("ch12-e1-b200-tc-flops", section=S["gpu"], prompt="bf16 FLOPs per cycle of one B200 tensor core (1.86 GHz).",
           reference=TC_FLOPS_PER_CYCLE["B200"], tolerance=Tolerance(rtol=0.05),
           slips=(Slip(4 * TC_FLOPS_PER_CYCLE["B200"], "ratio:4", "4 per SM."),)),
    number("ch12-e2-warps", section=S["memory"],
           prompt="How many warps are resident per SM when each thread uses 256 registers?", reference=RESIDENT_WARPS,
           exact=True, slips=(Slip(64, "ratio:8", "64 is the scheduler's limit; registers run out first."),)),
    number("ch12-e3-gpu-egress", section=S["node"], prompt="NVLink bandwidth of one H100, each direction (B/s).",
           reference=hw.H100_NVLINK_LINKS * hw.NVLINK4_LINK_BYTES_PER_S, unit="B/s", tolerance=THREE_FIGURES,
           slips=(Slip(2 * W_GPU, "ratio:2", "each direction, not both."),)),
    number("ch12-e3-switch-capacity", section=S["node"],
           prompt="Port bandwidth of a node's 4 NVSwitches together (B/s).", reference=NODE_SWITCH_BYTES_PER_S,
           unit="B/s", tolerance=THREE_FIGURES,
           slips=(Slip(NODE_SWITCH_BYTES_PER_S / 4, "ratio:1/4", "there are 4 switches."),)),
    *[number(f"ch12-e4-{lv.name}-level", section=S["cross"],
             prompt=f"AllGather bandwidth at the {lv.name} level of the SuperPod, B/s.",
             reference=lv.collective_bytes_per_s, unit="B/s", tolerance=ONE_PERCENT,
             slips=(Slip(lv.child_bytes_per_s * (lv.children - 1) / lv.children,
                         "close" if lv.children > 4 else "not_equal", "D * W / (D - 1)."),)) for lv in POD.levels],
    Choice(qid="ch12-e4-bottleneck", points=1, section=S["cross"],
           prompt="Which level bounds the SuperPod's AllGather?",
           reference=POD.bottleneck.name, options=tuple(lv.name for lv in POD.levels),
           slips=(Slip("node", "wrong_option", "compare the three bandwidths."),)),
    number("ch12-e5-slowdown", section=S["cross"],
           prompt="AllToAll slowdown from 8 GPUs in a node to 2 nodes (rough forms).", reference=E5_SLOWDOWN,
           tolerance=ONE_PERCENT,
           slips=(Slip(E5_SLOWDOWN / 2, "ratio:1/2", "B/(2 W_node) over B/(8 W_gpu)."),)),
    number("ch12-e6-shard-bytes", section=S["intra"], prompt="Bytes of the bf16[8192, 3584] MLP shard.",
           reference=E6_SHARD_BYTES, unit="B", tolerance=THREE_FIGURES,
           slips=(Slip(E6_SHARD_BYTES / 2, "ratio:1/2", "bf16 is 2 bytes."),)),
    Choice(qid="ch12-e6-shard-bandwidth", points=1, section=S["intra"],
           prompt="Measured AllReduce bus bandwidth for that shard in one H100 node: '450', '370' or '150' GB/s?",
           reference="150", options=("450", "370", "150"),
           slips=(Slip("370", "wrong_option", "that needs messages of about 10 GB."),)),
    number("ch12-e7-sharp-bandwidth", section=S["intra"],
           prompt="Effective AllReduce bandwidth with SHARP's measured 30% gain, B/s.", reference=E7_SHARP, unit="B/s",
           slips=(Slip(W_GPU * (1 + hw.SHARP_MEASURED_GAIN), "close", "start from the measured 370 GB/s."),)),
    number("ch12-e8-dp-node", section=S["dp"], prompt="Per-GPU token batch for compute-bound DP inside an H100 node.",
           reference=DP_NODE,
           slips=(Slip(DP_SCALEOUT, "close", "inside the node the GPU's NVLink bandwidth applies."),)),
    number("ch12-e8-dp-scaleout", section=S["dp"], prompt="The same across nodes.", reference=DP_SCALEOUT,
           slips=(Slip(DP_SCALEOUT * 8, "ratio:8", "a collective across nodes gets the whole node's egress."),)),
    number("ch12-e8-llama-batch", section=S["dp"],
           prompt="Global token batch LLaMA-3's 16,000 H100s would need for pure DP.", reference=16000 * DP_SCALEOUT,
           slips=(Slip(16e6, "not_equal", "that is the batch they used."),)),
    number("ch12-e8-deepseek-batch", section=S["dp"],
           prompt="Global batch DeepSeek's 2048 H800s (300 GB/s NVLink) would need.",
           reference=2048 * H800.bf16_flops_per_s / H800.nvlink_bytes_per_s,
           slips=(Slip(4e6, "not_equal", "that is the batch they used."),)),
    number("ch12-e8-moe", section=S["dp"], prompt="Cross-node DP threshold of an MoE with E/k = 32.",
           reference=32 * DP_SCALEOUT,
           slips=(Slip(DP_SCALEOUT, "ratio:1/32", "an MoE moves E/k times more weights per FLOP."),)),
    number("ch12-e8-two-nodes", section=S["dp"], prompt="Per-GPU DP threshold with data parallelism over only 2 nodes.",
           reference=DP_SCALEOUT * (2 - 1) / 2,
           slips=(Slip(DP_SCALEOUT, "ratio:2", "the (X - 1)/X factor with X = 2."),)),
    number("ch12-e9-tp-max", section=S["tp"], prompt="Largest TP beyond a node for F = 28,000.",
           reference=28000 / DP_SCALEOUT, tolerance=Tolerance(rtol=0.03),
           slips=(Slip(28000 / DP_NODE, "close", "beyond the node the node egress applies."),)),
    number("ch12-e9-two-node-tp", section=S["tp"],
           prompt="Largest TP spanning 2 nodes, the ways beyond 8 using node egress.",
           reference=28000 / DP_SCALEOUT + NODE.gpus, tolerance=Tolerance(rtol=0.03),
           slips=(Slip(28000 / DP_SCALEOUT, "not_equal", "add the 8 in-node ways."),)),
    number("ch12-e10-tokens", section=S["examples"], prompt="Tokens in DeepSeek-V3's batch (4096 sequences of 15,360).",
           reference=E10_TOKENS, tolerance=THREE_FIGURES,
           slips=(Slip(4096, "magnitude:-4", "count tokens, not sequences."),)),
    number("ch12-e10-per-gpu", section=S["examples"], prompt="Tokens per GPU over 2048 GPUs.",
           reference=E10_TOKENS / 2048, tolerance=Tolerance(rtol=0.03), slips=(Slip(E10_TOKENS / 1024, "ratio:2"),)),
    number("ch12-e10-model-parallel", section=S["examples"],
           prompt="How many ways of model parallelism (64-way EP x 16-way PP)?", reference=64 * 16, exact=True,
           slips=(Slip(64 * 16 * 2, "ratio:2", "the 2-way DP is not model parallelism."),)),
    number("ch12-e11-per-gpu", section=S["examples"],
           prompt="Tokens per GPU of LLaMA-3's 16e6-token batch on 16,384 GPUs.", reference=E11_PER_GPU,
           tolerance=Tolerance(rtol=0.03),
           slips=(Slip(16e6 / 128, "magnitude:+2", "divide by all GPUs, not the DP ways."),)),
    number("ch12-e12-egress", section=S["gb200"], prompt="Scale-out egress of a GB200 NVL72 node, B/s.",
           reference=hw.GB200_NVL72.egress_bytes_per_s, unit="B/s", tolerance=ONE_PERCENT,
           slips=(Slip(hw.GB200_NVL72.egress_bytes_per_s * 8, "ratio:8", "400 Gb/s is 50 GB/s."),)),
    number("ch12-e12-ratio", section=S["gb200"], prompt="That egress over an H100 node's.",
           reference=hw.GB200_NVL72.egress_bytes_per_s / W_NODE, tolerance=ONE_PERCENT,
           slips=(Slip(hw.GB200_NVL72.egress_bytes_per_s / W_NODE / 2, "ratio:1/2"),)),
    number("ch12-e12-roofline-gain", section=S["gb200"],
           prompt="Improvement of the cross-node roofline (egress per FLOP) over H100.", reference=E12_GAIN,
           tolerance=Tolerance(rtol=0.05),  # the book: "about 4x"
           slips=(Slip(hw.GB200_NVL72.egress_bytes_per_s / W_NODE, "not_equal",
                       "the B200 also does more FLOPs per GPU."),)),
    number("ch12-e13-per-gpu-spine", section=S["appendix_b"],
           prompt="Spine bandwidth per GPU of the 1024-GPU pod, B/s.", reference=E13_PER_GPU, unit="B/s",
           tolerance=ONE_PERCENT,
           slips=(Slip(E13_PER_GPU / 2, "ratio:1/2", "the current text's spine has 51.2 TB/s."),)),
    # CX1: collective costs on three networks.
    Function(qid="ch12-cx1-allgather", points=3, section=S["cross"],
             prompt="t_allgather(nbytes, levels): AllGather time on a tree given [children, bytes/s] per level.",
             reference=tree_allgather, model=t_allgather, probes=CX1_PROBES,
             output=Output("number", tolerance=Tolerance(rtol=0.005)),
             slips=(Slip(cx1_without_ring_factor, "close"),)),
    number("ch12-cx1-torus-time", section=S["beyond"],
           prompt="Seconds to AllGather 1e9 bytes over a TPU v5p 4x4x4 cube.", reference=CX1_TIMES["torus"], unit="s",
           slips=(Slip(CX1_TIMES["torus"] * 2, "ratio:2", "a full cube wraps: both directions of each link."),)),
    number("ch12-cx1-nvlink-time", section=S["intra"], prompt="Seconds to AllGather 1e9 bytes over one 8 x H100 node.",
           reference=CX1_TIMES["nvlink"], unit="s",
           slips=(Slip(CX1_TIMES["nvlink"] * 2, "ratio:2", "an AllGather is half an AllReduce."),)),
    number("ch12-cx1-ib-time", section=S["cross"], prompt="Seconds to AllGather 1e9 bytes over 64 H100s in 8 nodes.",
           reference=CX1_TIMES["infiniband"], unit="s",
           slips=(Slip(CX1_TIMES["infiniband"] * 8, "ratio:8", "the node's 8 NICs work together."),)),
    # CX2: AllReduce algorithms.
    number("ch12-cx2-ring-steps", section=S["intra"],
           prompt="How many neighbour steps does a ring AllReduce on 8 devices take?", reference=RING_STEPS, exact=True,
           slips=(Slip(RING_STEPS / 2, "ratio:1/2", "a ReduceScatter, then an AllGather."),)),
    number("ch12-cx2-ring-bytes", section=S["intra"],
           prompt="Bytes each device sends in that ring AllReduce, as a multiple of the array.", reference=RING_BYTES,
           tolerance=ONE_PERCENT, slips=(Slip(2.0, "close", "a device never sends its own final shard."),)),
    number("ch12-cx2-tree-steps", section=S["intra"],
           prompt="How many steps does a recursive-doubling AllReduce on 8 devices take?", reference=TREE_STEPS,
           exact=True, slips=(Slip(RING_STEPS, "magnitude:+1", "pairs, then fours, then eights."),)),
    number("ch12-cx2-tree-bytes", section=S["intra"],
           prompt="Bytes each device sends in it, as a multiple of the array.", reference=TREE_BYTES,
           tolerance=ONE_PERCENT,
           slips=(Slip(RING_BYTES, "not_equal", "every step exchanges the whole array."),)),
    number("ch12-cx2-node-fraction", section=S["cross"],
           prompt="Bytes crossing nodes in the hierarchical AllReduce over a flat one's.", reference=NODE_FRACTION,
           tolerance=ONE_PERCENT,
           slips=(Slip(1.0, "ratio:4", "the in-node ReduceScatter leaves each GPU 1/4."),)),
    Program(qid="ch12-cx2-hierarchical-allreduce", points=3, section=S["cross"],
            prompt="Sum f32[2,4,32,16] @ P('X','Y') over both axes: ReduceScatter(Y), AllReduce(X), AllGather(Y).",
            spec=ProgramSpec(mesh=CX2_MESH, einsum="xyab->ab",
                             operands=(Operand(CX2_SHAPE, ("X", "Y")),), out_spec=(),
                             collectives={"reduce-scatter": 1, "all-reduce": 1, "all-gather": 1}),
            model=hierarchical_allreduce,
            slips=(Slip(cx2_flat_psum, "collectives:all-reduce"), Slip(cx2_forgets_nodes, "partial_sum:X"))),
    # CX4: every GPU's critical batches.
    Function(qid="ch12-cx4-critical-batch", points=3, section=S["dp"],
             prompt="gpu_intensity(chip, channel): C / W for 'hbm', 'nvlink' or 'scaleout' (8-GPU node egress).",
             reference=gpu_intensity, probes=CX4_PROBES, draw=draw_cx4,
             output=Output("number", tolerance=Tolerance(rtol=0.005)),
             slips=(Slip(cx4_per_gpu_nic, "ratio:8"),)),
))
