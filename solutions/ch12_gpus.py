"""Chapter 12, GPUs: every graded question of the chapter, as records with references.

Book: Part 12 "How to Think About GPUs", https://jax-ml.github.io/scaling-book/gpus/
Numbers are computed from ``course.hardware`` with ``solutions._derived`` (never typed in); where the book
prints a rounded or differently-based value, the tolerance admits it and ``BOOK`` records it for the
tests. Labels follow the syllabus with the dot of "Quiz 1, Question 1" dropped (Q1.1 -> q11, grade ids
allow no dots); PQ1-PQ3 are the pop quizzes, E1-E13 worked examples, CX1-CX4 coding exercises.

Most exercises plug a GPU, a node or a few sizes into a formula, so each student is dealt their own
(``autograder/variants.py``): the build functions below take those values, the book's first, and a
question id keeps the book's name (``q13-h100-intensity``) whatever GPU it is built for.
"""

from __future__ import annotations

import math
import random
from fractions import Fraction

import sympy as sp

import course
from course.symbols import B, D, F, M, N, V, W, Y
from solutions._derived import topology as topo
from solutions._derived.hardware import critical_intensity, cuda_cores
from solutions._kit import *  # noqa: F403 (the authoring vocabulary: solutions/_kit.py)
from solutions._kit import P

H100, H200, B200, A100, H800, V5P = hw.H100, hw.H200, hw.B200, hw.A100, hw.H800, hw.TPU_V5P
NODE = hw.DGX_H100
W_GPU, W_NODE = NODE.nvlink_bytes_per_s_per_gpu, NODE.egress_bytes_per_s  # 4.5e11, 4e11 B/s
C_H100 = H100.bf16_flops_per_s
POD = topo.superpod()  # the 1024-GPU H100 SuperPod: node, leaf, spine levels

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

# GPU nodes whose NVLink and egress differ (an H200 node would repeat the H100's numbers).
NODES = (NODE, hw.DGX_B200, hw.H800_NODE)


# --- Quiz 1: the chip ------------------------------------------------------------------------------
VECTOR_FLOPS_BOOST = cuda_cores(H100) * hw.H100_BOOST_CLOCK_HZ
VECTOR_FLOPS_BASE = cuda_cores(H100) * hw.H100_BASE_CLOCK_HZ  # Q1.2's clock: a slip where the boosted rate is asked
TENSOR_OVER_VECTOR = C_H100 / VECTOR_FLOPS_BOOST


def q11(gpu1: hw.GPU, gpu2: hw.GPU, tpu: hw.TPU) -> tuple[Number, ...]:
    """Q1.1: the fp32 CUDA cores of two GPUs (the book's H100 and B200) and the vector ALUs of a v5 TPU chip
    (the book's v5p): 8 x 128 cells of 4 ALUs in each TensorCore's VPU."""
    alus = tpu.tensorcores_per_chip * hw.VPU_ALUS_PER_LANE_V5 * hw.VPU_SUBLANES * hw.VPU_LANES
    cores = tpu.tensorcores_per_chip
    tpu_slips = (Slip(alus / hw.VPU_ALUS_PER_LANE_V5, f"ratio:1/{hw.VPU_ALUS_PER_LANE_V5}",
                      "each of the VPU's 8 x 128 cells has 4 independent ALUs."),)
    if cores > 1:
        tpu_slips = (Slip(alus / cores, f"ratio:1/{cores}", f"a {tpu.name} chip has {cores} TensorCores."), *tpu_slips)
    return (
        number("ch12-q11-h100-cuda-cores", section=S["quiz1"],
               prompt=f"How many fp32 CUDA cores does one {gpu1.name} have?", reference=cuda_cores(gpu1), exact=True,
               slips=(Slip(cuda_cores(gpu1) / 4, "ratio:1/4", "an SM has 4 subpartitions, each with its own cores."),)),
        number("ch12-q11-b200-cuda-cores", section=S["quiz1"],
               prompt=f"How many fp32 CUDA cores does one {gpu2.name} have?", reference=cuda_cores(gpu2), exact=True,
               slips=(Slip(cuda_cores(gpu2) * 2, "ratio:2", "count cores, not FLOPs per cycle."),)),
        number("ch12-q11-v5p-alus", section=S["quiz1"],
               prompt=f"How many independent vector ALUs does one {tpu.name} chip have?", reference=alus, exact=True,
               slips=tpu_slips))


def q11_valid(gpu1: hw.GPU, gpu2: hw.GPU, tpu: hw.TPU) -> bool:
    """Two GPUs of different core counts (an H200's SMs are an H100's)."""
    return gpu1.sms != gpu2.sms


# (GPU, clock): the H100 at its base clock (the book's) and at the clock of Part 12's tensor-core estimate, and the
# A100 and B200 at theirs (``tensor_clock_hz``: the A100's 1.41 GHz boost from its whitepaper, the book's 1.86 GHz).
Q12_CLOCKS = ((H100, hw.H100_BASE_CLOCK_HZ), (H100, H100.tensor_clock_hz), (A100, A100.tensor_clock_hz),
              (B200, B200.tensor_clock_hz))


def q12(gpu: hw.GPU, clock: float) -> tuple[Number, ...]:
    """Q1.2: a GPU's fp32 vector FLOP/s at one of its clocks (the book's: an H100 at its 1.59 GHz base clock), one
    operation per CUDA core per cycle, no FMA doubling."""
    flops = cuda_cores(gpu) * clock
    slips = [Slip(2 * flops, "ratio:2", "count one operation per core per cycle, not an FMA.")]
    if gpu is H100 and not ONE_PERCENT.accepts(flops, VECTOR_FLOPS_BOOST):  # the boost clock the next question asks
        slips.append(Slip(VECTOR_FLOPS_BOOST, slip_code(VECTOR_FLOPS_BOOST, flops, ONE_PERCENT, "FLOP/s"),
                          f"use the {clock / 1e9:.2f} GHz clock the question gives, not the boost clock."))
    return (number("ch12-q12-vector-flops", section=S["quiz1"],
                   prompt=f"fp32 vector FLOP/s of an {gpu.name} at {clock / 1e9:.2f} GHz (no FMA doubling).",
                   reference=flops,
                   unit="FLOP/s", tolerance=ONE_PERCENT, slips=tuple(slips)),)


def q12_valid(gpu: hw.GPU, clock: float) -> bool:
    """One of the GPU's own clocks."""
    return (gpu, clock) in Q12_CLOCKS


def matmul_time(chip: hw.GPU, b: int, d: int, f: int, bytes_per_element: int = 2) -> tuple[float, float]:
    """(T_math, T_comms) of X[b, d] @ Y[d, f] -> Z[b, f] at dense peak and HBM bandwidth."""
    flops = 2 * b * d * f
    moved = bytes_per_element * (b * d + d * f + b * f)
    return flops / chip.bf16_flops_per_s, moved / chip.hbm_bytes_per_s


def q13(gpu1: hw.GPU, gpu2: hw.GPU) -> tuple[Number, ...]:
    """Q1.3: the bf16 and fp8 critical intensities of two GPUs (the book's H100 and B200). The tolerance admits
    the book's own rounded constants of the chip (3.35e12 B/s for the H100, 2.25e15 FLOP/s for the B200)."""
    bf16, fp8 = [], []
    for slot, gpu in (("h100", gpu1), ("b200", gpu2)):
        crit = critical_intensity(gpu)
        slips = (Slip(2 * crit, "ratio:2", "use the dense peak, not the 2:4-sparse datasheet figure."),)
        if gpu is B200:  # the book's prose quotes 9 TB/s for the B200's HBM
            slips += (Slip(B200.bf16_flops_per_s / 9e12, "close", "use the table's HBM bandwidth."),)
        bf16.append(number(f"ch12-q13-{slot}-intensity", section=S["quiz1"],
                           prompt=f"Critical bf16 matmul intensity of one {gpu.name}.", reference=crit,
                           tolerance=rate_tolerance(gpu, of=critical_intensity), slips=slips))
        fp8_crit = gpu.fp8_flops_per_s / gpu.hbm_bytes_per_s
        fp8_tol = rate_tolerance(gpu, of=lambda g: g.fp8_flops_per_s / g.hbm_bytes_per_s)
        fp8.append(number(f"ch12-q13-{slot}-fp8-intensity", section=S["quiz1"],
                          prompt=f"Critical fp8 matmul intensity of one {gpu.name}.", reference=fp8_crit,
                          tolerance=fp8_tol,  # the B200's fp8 peak is a little less than twice its bf16 one
                          slips=(Slip(crit, slip_code(crit, fp8_crit, fp8_tol), "fp8 doubles the FLOP rate."),)))
    return (*bf16, *fp8)


def q13_valid(gpu1: hw.GPU, gpu2: hw.GPU) -> bool:
    """Two different GPUs."""
    return gpu1 is not gpu2


Q14_BATCHES, Q14_D = (64, 512), 4096


def q14(gpu: hw.GPU, F: int) -> tuple[Question, ...]:
    """Q1.4: a small-batch and a large-batch fp16 matmul on one GPU, and which limit binds each."""
    (small_math, small_mem), (large_math, large_mem) = (matmul_time(gpu, b, Q14_D, F) for b in Q14_BATCHES)
    small, large = max(small_math, small_mem), max(large_math, large_mem)
    b_small, b_large = Q14_BATCHES
    return (
        number("ch12-q14-small-time", section=S["quiz1"],
               prompt=f"Seconds for fp16[{b_small},{Q14_D}] x fp16[{Q14_D},{F}] on one {gpu.name}.", reference=small,
               unit="s", slips=(Slip(small_math, slip_code(small_math, small),
                                     "that is the compute time; which one is larger?"),
                                Slip(2 * small, "ratio:2", "fp16 is 2 bytes per element."))),
        Choice(qid="ch12-q14-small-bound", points=1, section=S["quiz1"],
               prompt=f"Is the B = {b_small} matmul compute- or memory-bound?",
               reference="compute" if small_math > small_mem else "memory", options=("compute", "memory"),
               slips=(Slip("compute", "wrong_option",
                           f"compare {b_small} with the {gpu.name}'s critical intensity."),)),
        number("ch12-q14-large-time", section=S["quiz1"],
               prompt=f"Seconds for fp16[{b_large},{Q14_D}] x fp16[{Q14_D},{F}] on one {gpu.name}.", reference=large,
               unit="s", tolerance=rate_tolerance(gpu), slips=(Slip(large_mem, slip_code(large_mem, large),
                                     "that is the memory time; which one is larger?"),)),
        Choice(qid="ch12-q14-large-bound", points=1, section=S["quiz1"],
               prompt=f"Is the B = {b_large} matmul compute- or memory-bound?",
               reference="compute" if large_math > large_mem else "memory", options=("compute", "memory"),
               slips=(Slip("memory", "wrong_option",
                           f"compare {b_large} with the {gpu.name}'s critical intensity."),)))


def q14_valid(gpu: hw.GPU, F: int) -> bool:
    """The book's regimes: the small batch memory-bound, the large one compute-bound."""
    (small_math, small_mem), (large_math, large_mem) = (matmul_time(gpu, b, Q14_D, F) for b in Q14_BATCHES)
    return small_mem > small_math and large_math > large_mem


def q15(gpu: hw.GPU) -> tuple[Number, ...]:
    """Q1.5: a GPU's SMEM and registers over all its SMs, against a TPU v5p's VMEM. For the H100 the
    book says "about 33MB" of each; the ratio's 8% admits its comparison with "120MB" of VMEM (for the H100)."""
    smem, regs = gpu.sms * gpu.smem_bytes_per_sm, gpu.sms * gpu.register_bytes_per_sm
    ratio = (smem + regs) / V5P.vmem_bytes
    size = Tolerance(low=33e6, high=35e6) if gpu is H100 else TWO_PERCENT
    per_vmem = Tolerance(rtol=0.08) if gpu is H100 else TWO_PERCENT
    return (
        number("ch12-q15-smem-bytes", section=S["quiz1"],
               prompt=f"Bytes of SMEM (L1) on one {gpu.name}, all SMs together.", reference=smem, unit="B",
               tolerance=size, slips=(Slip(smem / 1e3, "unit:1/1000", "1 kB is 1000 bytes."),)),
        number("ch12-q15-register-bytes", section=S["quiz1"],
               prompt=f"Bytes of registers on one {gpu.name}, all SMs together.", reference=regs, unit="B",
               tolerance=size,
               slips=(Slip(regs / 4, "ratio:1/4", "each register holds 32 bits: 4 bytes."),)),
        number("ch12-q15-vmem-ratio", section=S["quiz1"],
               prompt=f"(SMEM + registers) of one {gpu.name} over a TPU v5p's VMEM.", reference=ratio,
               tolerance=per_vmem,
               slips=(Slip(smem / V5P.vmem_bytes, slip_code(smem / V5P.vmem_bytes, ratio, per_vmem),
                           "add the registers to the SMEM."),)))


B200_CLOCK_HZ = hw.B200_FP32_VECTOR_FLOPS_PER_S_FMA / (cuda_cores(B200) * 2)
VADD_BYTES_PER_ELEMENT = 3 * hw.BYTES_PER_ELEMENT["fp32"]  # read x and y, write x + y
Q17_SIZES = {"64k": 65536, "1k": 1024, "1g": 1024**3}


def q17(gpu: hw.GPU) -> tuple[Number, ...]:
    """Q1.7: fp32[N] + fp32[N] on one GPU is memory-bound: 12 bytes per element over HBM."""
    t = {k: VADD_BYTES_PER_ELEMENT * n / gpu.hbm_bytes_per_s for k, n in Q17_SIZES.items()}
    compute = (Slip(Q17_SIZES["64k"] / VECTOR_FLOPS_BOOST, slip_code(Q17_SIZES["64k"] / VECTOR_FLOPS_BOOST, t["64k"]),
                    "the add is memory-bound."),) if gpu is H100 else ()
    return (
        number("ch12-q17-time-64k", section=S["quiz1"],
               prompt=f"Seconds for the add with N = 65,536 on one {gpu.name}.",
               reference=t["64k"], unit="s", slips=(*compute, Slip(t["64k"] * 1e6, "unit:1000000"))),
        number("ch12-q17-time-1k", section=S["quiz1"], prompt=f"Seconds for N = 1024 on one {gpu.name}.",
               reference=t["1k"], unit="s",
               slips=(Slip(t["1k"] / 3, "ratio:1/3", "3 arrays of 4-byte elements move."),)),
        number("ch12-q17-time-1g", section=S["quiz1"], prompt=f"Seconds for N = 1024**3 on one {gpu.name}.",
               reference=t["1g"], unit="s", slips=(Slip(t["1g"] / 2, "ratio:1/2", "fp32 is 4 bytes per element."),)))


# --- Quizzes 2 and 3: the network ----------------------------------------------------------------------
NODE_SWITCH_BYTES_PER_S = NODE.nvswitches * NODE.nvswitch_bytes_per_s  # 6.4e12
NODE_GPU_BYTES_PER_S = NODE.gpus * W_GPU  # 3.6e12
Q23_F = 65536
Q23_BYTES = BF16 * 4096 * Q23_F
SU_BYTES_PER_S = topo.su_bytes_per_s()  # 1.28e13
SPINE_BYTES_PER_S = topo.spine_bytes_per_s()  # 5.12e13
POD_NODES = hw.SU_NODES * hw.SUPERPOD_SUS
# InfiniBand generations a SuperPod's NICs and 64-port switches may run at, Gb/s per port: NDR (the book's) and XDR
# (HDR's 200 Gb/s would make a node's egress a TPU v3's ICI bandwidth, a number the course library states).
Q31_GBPS = (400, 800)
Q32_GPUS = (2048, 1536, 1792, 1280)  # two-level pods of 8 (the book's), 6, 7 and 5 SUs of 256 GPUs


def q31(gbps: int) -> tuple[Number, ...]:
    """Q3.1 and E13: the bandwidth at every level of the 1024-GPU SuperPod when its NICs and switch ports run at
    ``gbps``; full bisection gives every node its whole egress at the spine."""
    nic = gbps * 1e9 / 8
    egress = NODE.gpus * nic
    su = hw.SU_LEAF_SWITCHES * (hw.IB_SWITCH_PORTS // 2) * nic
    spine = hw.SUPERPOD_SPINE_SWITCHES * hw.IB_SWITCH_PORTS * nic
    per_gpu = spine / POD.gpus
    return (
        number("ch12-q31-node-egress", section=S["quiz3"],
               prompt=f"Scale-out bandwidth of one H100 node (8 x {gbps} Gb/s), B/s.", reference=egress, unit="B/s",
               tolerance=THREE_FIGURES, slips=(Slip(8 * gbps * 1e9, "ratio:8", "Gb/s counts bits, 8 to a byte."),)),
        number("ch12-q31-su-bandwidth", section=S["quiz3"],
               prompt=f"Bandwidth from one SU's 32 nodes into its 8 leaf switches ({gbps} Gb/s ports), B/s.",
               reference=su, unit="B/s", tolerance=THREE_FIGURES,
               slips=(Slip(2 * su, "ratio:2", "half of each leaf's ports face the spines.", maybe=True),
                      Slip(su / hw.SU_LEAF_SWITCHES, f"ratio:1/{hw.SU_LEAF_SWITCHES}",
                           f"that is one leaf switch's node-facing ports; the SU has {hw.SU_LEAF_SWITCHES}."))),
        number("ch12-q31-spine-bandwidth", section=S["quiz3"],
               prompt=f"Bandwidth of the 16 spine switches together ({gbps} Gb/s ports), B/s.", reference=spine,
               unit="B/s", tolerance=THREE_FIGURES,
               slips=(Slip(spine / 2, "ratio:1/2", "every spine port faces a leaf.", maybe=True),)),
        number("ch12-q31-per-node", section=S["quiz3"], prompt="Spine bandwidth per node of the 1024-GPU pod, B/s.",
               reference=spine / POD_NODES, unit="B/s", tolerance=THREE_FIGURES,
               slips=(Slip(per_gpu, "ratio:1/8", "per node (8 GPUs), not per GPU."),)),
        number("ch12-e13-per-gpu-spine", section=S["appendix_b"],
               prompt="Spine bandwidth per GPU of the 1024-GPU pod, B/s.", reference=per_gpu, unit="B/s",
               tolerance=ONE_PERCENT,
               slips=(Slip(per_gpu / 2, "ratio:1/2",
                           "use the current text's spine bandwidth (Q3.1), twice the older one.", maybe=True),)))


def q32(gpus: int) -> tuple[Number, ...]:
    """Q3.2: spine switches of a two-level full-bisection pod of ``gpus`` GPUs: one leaf uplink per GPU's NIC,
    64 of them per spine."""
    spines = topo.spine_switches_needed(gpus)
    pod_spines = hw.SUPERPOD_SPINE_SWITCHES
    return (number("ch12-q32-spines-2048", section=S["quiz3"],
                   prompt=f"How many spine switches does a {gpus}-GPU two-level tree with full bisection need?",
                   reference=spines, exact=True,
                   slips=(Slip(pod_spines, slip_code(pod_spines, spines, Tolerance.exact_count()),
                               "that is the 1024-GPU pod's count: one spine port per GPU's uplink."),)),)


def q32_valid(gpus: int) -> bool:
    """Whole SUs, within what two levels of 64-port switches reach."""
    return gpus % (hw.SU_NODES * NODE.gpus) == 0 and gpus <= topo.two_level_max_gpus()


def q23(node: hw.GPUNode, D: int) -> tuple[Number, ...]:
    """Q2.3: the ring AllGather of bf16[D_X, F] inside one node, (N - 1)/N of it at each GPU's NVLink."""
    nbytes, w = BF16 * D * Q23_F, node.nvlink_bytes_per_s_per_gpu
    t = topo.node_allgather_s(nbytes, node.gpus, w)
    return (number("ch12-q23-allgather-time", section=S["quiz2"],
                   prompt=f"Seconds to AllGather bf16[D_X, F], D = {D}, F = 65,536, on one {node.name}.",
                   reference=t, unit="s",
                   slips=(Slip(nbytes / w, "close", "keep the exact (N - 1)/N factor."),
                          Slip(2 * t, "ratio:2", "bf16 is 2 bytes."),
                          Slip(t / 2, "ratio:1/2", "bf16 is 2 bytes per element."))),)


# --- collectives -----------------------------------------------------------------------------------------
PQ1_F = 16384
PQ1_BYTES = BF16 * 1024 * PQ1_F
PQ3_F = 32768
PQ3_BYTES = BF16 * 8192 * PQ3_F
PQ3_Y = 16


def pq1(node: hw.GPUNode, B: int) -> tuple[Number, ...]:
    """PQ1: AllGather of bf16[B_X, F] in one node, roughly (bytes / W) and with the (N - 1)/N factor."""
    nbytes, w = BF16 * B * PQ1_F, node.nvlink_bytes_per_s_per_gpu
    approx = nbytes / w
    return (
        number("ch12-pq1-approx", section=S["intra"],
               prompt=f"AllGather bf16[B_X, F], B = {B}, F = 16,384, on one {node.name}, as bytes / W (s).",
               reference=approx, unit="s", slips=(Slip(2 * approx, "ratio:2", "bf16 is 2 bytes.", maybe=True),)),
        number("ch12-pq1-exact", section=S["intra"], prompt="The same with the exact (N - 1)/N factor (s).",
               reference=topo.node_allgather_s(nbytes, node.gpus, w), unit="s",
               slips=(Slip(approx, "close", "keep the (N - 1)/N factor."),)))


def pq3(D: int) -> tuple[Number, ...]:
    """PQ3: AllGather_X(bf16[D_X, F_Y]) over one SU of 32 H100 nodes. With Y <= 8 the leaf level bounds
    it; with Y = 16 each F shard's group spans two nodes, so it gets Y NICs of bandwidth."""
    nbytes = BF16 * D * PQ3_F
    small = nbytes * (hw.SU_NODES - 1) / (hw.SU_NODES * W_NODE)
    y16 = nbytes / (PQ3_Y * hw.NIC_BYTES_PER_S)
    return (
        number("ch12-pq3-small-y", section=S["cross"],
               prompt=f"AllGather_X(bf16[D_X, F_Y]) over one SU, D = {D}, F = 32,768, Y <= 8 (s).", reference=small,
               unit="s", slips=(Slip(nbytes / W_GPU, "close", "the leaf level is the bottleneck."),)),
        number("ch12-pq3-y16", section=S["cross"], prompt=f"The same with Y = {PQ3_Y} (s).", reference=y16, unit="s",
               slips=(Slip(small, slip_code(small, y16),
                           "a 16-way inner axis spans 2 nodes, doubling the leaf bandwidth."),)))


def q45(nodes: int) -> tuple[Question, ...]:
    """Q4.5: an AllGather over exactly M H100 nodes: the cross-node level gives M W_node / (M - 1), more
    than the node level's 8 W_gpu / 7 for small M, so NVLink bounds it."""
    cross = topo.superpod(nodes_per_su=nodes, sus=1).levels[1].collective_bytes_per_s
    node_level = POD.levels[0].collective_bytes_per_s
    return (
        number("ch12-q45-cross-node-bandwidth", section=S["quiz4"],
               prompt=f"AllGather bandwidth across exactly {nodes} H100 nodes, B/s (B over the time).", reference=cross,
               unit="B/s", tolerance=ONE_PERCENT,
               slips=(Slip(W_NODE, f"ratio:{Fraction(nodes - 1, nodes)}",
                           "over so few nodes the ring's exact factor is far from 1: keep it.", maybe=True),)),
        Choice(qid="ch12-q45-bound", points=1, section=S["quiz4"],
               prompt=f"Which level bounds an AllGather over exactly {nodes} nodes: 'node' or 'cross-node'?",
               reference="node" if node_level < cross else "cross-node", options=("node", "cross-node"),
               slips=(Slip("cross-node", "wrong_option",
                           f"compare B * 7/8 over a GPU's NVLink egress (E3) with B * {nodes - 1}/{nodes} over a "
                           "node's scale-out egress (Q3.1)."),)))


def q45_valid(nodes: int) -> bool:
    """The book's regime: the node level, not the cross-node one, bounds it."""
    cross = topo.superpod(nodes_per_su=nodes, sus=1).levels[1].collective_bytes_per_s
    return POD.levels[0].collective_bytes_per_s < cross


# --- Quiz 5 and the LLM rooflines ------------------------------------------------------------------------
DGX_B200 = hw.DGX_B200
Q52_TOKENS, Q52_GPUS, Q52_MFU = 15e12, 4096, 0.45
Q52_BYTES_PER_PARAM = 2 + 8  # bf16 weights, fp32 Adam moments (two of them)
Q52_TP_WAYS, Q52_PP_WAYS = 8, 8
# Dense models of the size of LLaMA 3-70B (the book's, with F = 28,672) and two larger ones; each still
# overflows an 80 GB GPU under 8-way TP alone, so the book's choice of plan stands.
Q52_MODELS = ((70e9, 28_672), (90e9, 32_768), (110e9, 36_864))
Q52_PP_THRESHOLD = C_H100 / (Q52_PP_WAYS * W_NODE)  # 8-way pipelining: each DP group spans 8 nodes' egress
DP_NODE, DP_SCALEOUT = C_H100 / W_GPU, C_H100 / W_NODE
# (newer node, older node): the book's B200 DGX against an H100 node, and an H100 node and an H800 node (Hopper with
# NVLink cut to 300 GB/s) against an A100 node.
Q51_PAIRS = ((DGX_B200, NODE), (NODE, hw.DGX_A100), (hw.H800_NODE, hw.DGX_A100))


def q51(new: hw.GPUNode, old: hw.GPUNode) -> tuple[Question, ...]:
    """Q5.1: a newer node's FLOP/s over an older one's, its tensor-parallel (NVLink) and cross-node
    data-parallel (egress) critical intensities, and whether cross-node DP got harder."""
    c_new, c_old = new.gpu.bf16_flops_per_s, old.gpu.bf16_flops_per_s
    ratio, tp, dp = c_new / c_old, c_new / new.nvlink_bytes_per_s_per_gpu, c_new / new.egress_bytes_per_s
    # the book's 2.25, 2500 and 5625 use 2.25e15 for the B200; elsewhere the newer chip's rate tolerance
    tol = Tolerance(rtol=0.035) if new.gpu is B200 else rate_tolerance(new.gpu)
    links = new.nvlink_bytes_per_s_per_gpu / old.nvlink_bytes_per_s_per_gpu
    old_link, old_tp = c_new / old.nvlink_bytes_per_s_per_gpu, c_old / new.nvlink_bytes_per_s_per_gpu
    g_new, g_old = new.gpu.name, old.gpu.name
    return (
        number("ch12-q51-flops-ratio", section=S["quiz5"], prompt=f"{g_new} bf16 FLOP/s over {g_old}'s.",
               reference=ratio, tolerance=tol,
               slips=(Slip(links, slip_code(links, ratio, tol), "compare FLOP/s, not NVLink bandwidth."),)),
        number("ch12-q51-tp-intensity", section=S["quiz5"],
               prompt=f"{g_new} tensor-parallel critical intensity, C / W_NVLink.", reference=tp, tolerance=tol,
               slips=(Slip(old_link, slip_code(old_link, tp, tol), f"use the {g_new}'s own NVLink bandwidth."),)
               if not tol.accepts(tp, old_link) else  # an H800's NVLink is an A100's: the slip is the older FLOP/s
               (Slip(old_tp, slip_code(old_tp, tp, tol), f"use the {g_new}'s own FLOP/s."),)),
        number("ch12-q51-dp-threshold", section=S["quiz5"],
               prompt=f"{new.name} data-parallel per-GPU batch threshold across nodes, C / W_node.", reference=dp,
               tolerance=tol,
               slips=(Slip(tp, slip_code(tp, dp, tol),
                           "data parallelism across nodes uses the node's scale-out egress."),)),
        Choice(qid="ch12-q51-dp-change", points=1, section=S["quiz5"],
               prompt=f"Compared with {g_old} nodes, is cross-node data parallelism on {g_new} nodes 'easier', 'same' "
                      "or 'harder'?",
               reference="harder", options=("easier", "same", "harder"),
               slips=(Slip("easier", "wrong_option",
                           "more FLOPs per GPU: did the node's scale-out egress grow as much?"),)))


def q51_valid(new: hw.GPUNode, old: hw.GPUNode) -> bool:
    """A listed pair, and the book's answer stands: the threshold C / W_node rises (DP gets harder)."""
    return ((new, old) in Q51_PAIRS
            and new.gpu.bf16_flops_per_s / new.egress_bytes_per_s > old.gpu.bf16_flops_per_s / old.egress_bytes_per_s)


def q52(params: float, F: int, batch: float) -> tuple[Number, ...]:
    """Q5.2: memory, training time, TP limit and batch per GPU of a dense model trained on 4096 H100s."""
    state = params * Q52_BYTES_PER_PARAM
    days = 6 * params * Q52_TOKENS / (Q52_GPUS * C_H100 * Q52_MFU) / 86400
    tp = F * W_GPU / C_H100
    # the book divides F by 1995, not the in-node C/W of 2200 (14.37 for its model): that reading passes for every
    # model, to a 1% rounding of it (as ch11-c1-h100-tp-limit takes it). Not the chip's 2% rate tolerance on top:
    # F / 1995 is 10% above F / 2200 and the models' F are 12.5-14% apart, so 2% more (and the 3-figure rounding
    # of the end) reached the next model's reference, a classmate's answer (16.76 passed at F = 32,768).
    rate = rate_tolerance(H100)
    tp_tolerance = Tolerance(low=tp * (1 - rate.rtol), high=F / BOOK_H100_TP_DIVISOR * 1.01)
    return (
        number("ch12-q52-min-gpus", section=S["quiz5"],
               prompt=f"How many H100s, at fewest, hold the bf16 weights and fp32 Adam state of {params:.3g} "
                      "parameters?",
               reference=math.ceil(state / H100.hbm_bytes), exact=True,
               slips=(Slip(state / H100.hbm_bytes, "close", "a GPU is indivisible."),
                      *slips(math.ceil(state / H100.hbm_bytes), Tolerance.exact_count(),
                             (math.ceil(2 * params / H100.hbm_bytes), "Adam's two fp32 moments are 8 bytes per "
                                                                      "parameter, held beside the weights."),
                             (math.ceil((Q52_BYTES_PER_PARAM - 2) * params / H100.hbm_bytes),
                              "the bf16 weights are held too: 2 bytes per parameter beside Adam's 8.")))),
        number("ch12-q52-days", section=S["quiz5"],
               prompt=f"Days to train {params:.3g} parameters on 15e12 tokens with 4096 H100s at 45% MFU.",
               reference=days, unit="days",
               slips=(Slip(days * Q52_MFU, "not_equal", "divide by the utilisation: only 45% of peak is achieved."),)),
        number("ch12-q52-tp-limit", section=S["quiz5"],
               prompt=f"Largest tensor parallelism inside a node before comms dominate (F = {F:,}).", reference=tp,
               tolerance=largest_degree(tp, tp_tolerance),
               slips=(Slip(F * W_NODE / C_H100, "close", "inside a node, NVLink is the link."),)),
        number("ch12-q52-memory-per-gpu", section=S["quiz5"],
               prompt="Bytes of weights and optimizer state per GPU with only 8-way TP.",
               reference=state / Q52_TP_WAYS, unit="B", tolerance=ONE_PERCENT,
               slips=slips(state / Q52_TP_WAYS, ONE_PERCENT,
                           (params * 2 / Q52_TP_WAYS, "Adam's two fp32 moments are 8 bytes per parameter."),
                           ((state - 2 * params) / Q52_TP_WAYS,
                            "the bf16 weights are held too: 2 bytes per parameter beside Adam's 8."))),
        number("ch12-q52-batch-per-gpu", section=S["quiz5"],
               prompt=f"Tokens per GPU of a {batch:.3g}-token batch on 4096 GPUs.",
               reference=batch / Q52_GPUS, tolerance=ONE_PERCENT,
               slips=(Slip(batch / Q52_GPUS * 8, "ratio:8", "per GPU, not per node."),)))


def q52_valid(params: float, F: int, batch: float) -> bool:
    """A listed model, and the book's plan stays the one that fits and is compute-bound: 8-way TP alone
    overflows 80 GB, and the batch per GPU lies between the pipelined and the plain DP thresholds."""
    per_gpu = batch / Q52_GPUS
    return ((params, F) in Q52_MODELS and params * Q52_BYTES_PER_PARAM / Q52_TP_WAYS > H100.hbm_bytes
            and Q52_PP_THRESHOLD < per_gpu < DP_SCALEOUT)


SEQ = 4096
Q53 = {"16b": (192, 192, 8), "70b": (384, 768, 16), "314b": (1536, 3072, 64)}  # sequences, GPUs, model-parallel ways


def q53(seq_len: int, node: hw.GPUNode) -> tuple[Number, ...]:
    """Q5.3: Megatron-LM's three runs: tokens per GPU, and the cross-node DP threshold once model
    parallelism spans mp/8 nodes (their egress adds up)."""
    scaleout = node.gpu.bf16_flops_per_s / node.egress_bytes_per_s
    sequences_only = slip_code(1, seq_len, THREE_FIGURES)  # about 10^-d only where seq_len is near 10^d
    # the book's 300 for 309 on its H100 nodes (the threshold does not depend on the sequences); elsewhere the rate's
    q53_tol = Tolerance(rtol=0.05) if node is NODE else rate_tolerance(node.gpu)
    return (
        *[number(f"ch12-q53-tokens-{name}", section=S["quiz5"],
                 prompt=f"Tokens per GPU of Megatron-LM's {name.upper()} run with {seq_len}-token sequences.",
                 reference=seqs * seq_len / gpus, tolerance=THREE_FIGURES,
                 slips=(Slip(seqs / gpus, sequences_only, f"count tokens: sequences times {seq_len}."),))
          for name, (seqs, gpus, _) in Q53.items()],
        *[number(f"ch12-q53-threshold-{name}", section=S["quiz5"],
                 prompt=f"Per-GPU DP threshold of the {name.upper()} run ({ways}-way model parallelism) "
                        f"on {node.name}s.",
                 reference=scaleout / (ways / node.gpus), tolerance=q53_tol,
                 slips=(Slip(scaleout, f"ratio:{ways // node.gpus}",
                             f"model parallelism over {ways // node.gpus} nodes."),))
          for name, (_, _, ways) in Q53.items() if name != "16b"])


# --- inline examples -------------------------------------------------------------------------------------
E6_SHARD_BYTES = BF16 * 8192 * (28_672 // 8)
E7_SHARP = hw.NVLINK_ALLREDUCE_MEASURED_BYTES_PER_S * (1 + hw.SHARP_MEASURED_GAIN)
E13_PER_GPU = SPINE_BYTES_PER_S / POD.gpus
# Two GPUs of different generations, the book's H100 and B200 first: the consecutive A100 and H100, and the B200
# beside each older one, so that a student's pair need not hold either of the book's two GPUs in its place.
E1_PAIRS = ((H100, B200), (A100, H100), (B200, A100), (B200, H100))


def e1(gpu1: hw.GPU, gpu2: hw.GPU) -> tuple[Number, ...]:
    """E1: bf16 FLOPs per cycle of one tensor core of two generations (the book's H100 and B200), at the clock
    each estimate uses (``tensor_clock_hz``)."""
    out, book = [], dict(zip(("h100", "b200"), E1_PAIRS[0], strict=True))
    for slot, g in (("h100", gpu1), ("b200", gpu2)):
        per_cycle = g.bf16_flops_per_s / (g.sms * g.tensor_cores_per_sm * g.tensor_clock_hz)
        out.append(number(f"ch12-e1-{slot}-tc-flops", section=S["gpu"],
                          prompt=f"bf16 FLOPs per cycle of one {g.name} tensor core "
                                 f"({g.tensor_clock_hz / 1e9:.2f} GHz).",
                          reference=per_cycle, unit="FLOP",  # the book's 1024 and 2048 at its own GPUs
                          tolerance=Tolerance(rtol=0.05) if g is book[slot] else rate_tolerance(g),
                          slips=(Slip(4 * per_cycle, "ratio:4", "4 per SM."),)))
    return tuple(out)


def e1_valid(gpu1: hw.GPU, gpu2: hw.GPU) -> bool:
    """A listed pair of two generations."""
    return (gpu1, gpu2) in E1_PAIRS


def e3(node: hw.GPUNode) -> tuple[Number, ...]:
    """E3, Q2.1, Q2.2: a GPU's NVLink bandwidth, the node's NVSwitch ports, what the node can carry (the
    smaller of the two sides) and its bisection, both directions (the book's: an H100 node)."""
    w, n = node.nvlink_bytes_per_s_per_gpu, node.nvswitches
    switches, gpus = n * node.nvswitch_bytes_per_s, node.gpus * w
    carried = min(switches, gpus)
    spare = (Slip(switches, slip_code(switches, carried, THREE_FIGURES),
                  "the switches have spare ports; what can the GPUs send?"),) if switches > gpus else ()
    return (
        number("ch12-e3-gpu-egress", section=S["node"],
               prompt=f"NVLink bandwidth of one {node.gpu.name}, each direction (B/s).", reference=w, unit="B/s",
               tolerance=THREE_FIGURES, slips=(Slip(2 * w, "ratio:2", "each direction, not both.", maybe=True),)),
        number("ch12-e3-switch-capacity", section=S["node"],
               prompt=f"Port bandwidth of the {n} NVSwitches of one {node.name} together (B/s).", reference=switches,
               unit="B/s", tolerance=THREE_FIGURES,
               slips=(Slip(switches / n, slip_code(switches / n, switches, THREE_FIGURES),
                           f"there are {n} switches."),)),
        number("ch12-q21-node-bandwidth", section=S["quiz2"],
               prompt=f"Total GPU-to-GPU bandwidth of one {node.name} with {n} NVSwitches (B/s).", reference=carried,
               unit="B/s", tolerance=THREE_FIGURES,
               slips=(*spare, Slip(w, slip_code(w, carried, THREE_FIGURES), "all the node's GPUs together."))),
        number("ch12-q22-bisection", section=S["quiz2"],
               prompt="Bisection bandwidth of the node, both directions (B/s).", reference=gpus, unit="B/s",
               tolerance=THREE_FIGURES,
               slips=(Slip(gpus / 2, "ratio:1/2", "count the flow in both directions.", maybe=True),)))


# GB200 racks, (compute trays of 4 GPUs, NIC Gb/s): the NVL72 (the book's), the NVL36, and an NVL72 with 800 Gb/s
# NICs (ConnectX-8, as GB300 racks have).
E12_RACKS = ((hw.GB200_TRAYS, 400), (hw.GB200_TRAYS // 2, 400), (hw.GB200_TRAYS, 800))


def e12(trays: int, nic_gbps: int) -> tuple[Number, ...]:
    """E12: a GB200 rack's scale-out egress (one NIC per GPU), over an H100 node's, and the cross-node roofline
    (egress per bf16 FLOP of a GPU) over the H100 node's."""
    gpus = trays * hw.GB200_GPUS_PER_TRAY
    egress = gpus * nic_gbps * 1e9 / 8
    ratio = egress / W_NODE
    gain = (egress / B200.bf16_flops_per_s) / (W_NODE / C_H100)
    # the book's "about 4x" at its rack; elsewhere the B200's rate tolerance (its rounded 2.25e15 FLOP/s)
    gain_tol = Tolerance(rtol=0.05) if trays * nic_gbps == hw.GB200_TRAYS * 400 else \
        rate_tolerance(B200, of=lambda g: (egress / g.bf16_flops_per_s) / (W_NODE / C_H100))
    return (
        number("ch12-e12-egress", section=S["gb200"],
               prompt=f"Scale-out egress of a GB200 NVL{gpus} ({trays} trays of 4 GPUs, one {nic_gbps} Gb/s NIC each), "
                      "B/s.", reference=egress, unit="B/s", tolerance=ONE_PERCENT,
               slips=(Slip(egress * 8, "ratio:8", "Gb/s counts bits, 8 to a byte."),)),
        number("ch12-e12-ratio", section=S["gb200"], prompt="That egress over the book's H100 node's (8 x 400 Gb/s).",
               reference=ratio,
               tolerance=ONE_PERCENT, slips=(Slip(ratio / 2, "ratio:1/2"),)),
        number("ch12-e12-roofline-gain", section=S["gb200"],
               prompt="Improvement of the cross-node roofline (egress per FLOP) over that H100 node.", reference=gain,
               tolerance=gain_tol,
               slips=(Slip(ratio, slip_code(ratio, gain, gain_tol), "the B200 also does more FLOPs per GPU."),)))


def e12_valid(trays: int, nic_gbps: int) -> bool:
    """A listed rack."""
    return (trays, nic_gbps) in E12_RACKS
WARP_LIMIT = 64  # warps an SM's schedulers can keep resident


def e2(registers: int) -> tuple[Number, ...]:
    """E2: registers per thread limit how many warps fit in an SM's register file."""
    warps = H100.register_bytes_per_sm / (4 * 32 * registers)  # 32-bit registers, 32 threads a warp
    return (number("ch12-e2-warps", section=S["memory"],
                   prompt=f"How many warps are resident per SM when each thread uses {registers} registers?",
                   reference=warps, exact=True,
                   slips=(Slip(WARP_LIMIT, f"ratio:{Fraction(WARP_LIMIT, round(warps))}",
                               f"{WARP_LIMIT} is the scheduler's limit; registers run out first."),)),)


def e2_valid(registers: int) -> bool:
    """Registers, not the scheduler, must be what limits residency."""
    return H100.register_bytes_per_sm / (4 * 32 * registers) < WARP_LIMIT


# Pods of SUs of H100 or B200 nodes: (nodes per SU, SUs), the book's first.
E4_PODS = ((hw.SU_NODES, hw.SUPERPOD_SUS), (16, 2), (8, 8))


def pod(node: hw.GPUNode, nodes_per_su: int, sus: int) -> topo.FatTree:
    """A full-bisection fat tree: each SU's uplink carries all its nodes' egress (32 x 4e11 = 1.28e13 B/s in
    the book's SuperPod)."""
    return topo.FatTree((topo.Level("node", node.gpus, node.nvlink_bytes_per_s_per_gpu),
                         topo.Level("leaf", nodes_per_su, node.egress_bytes_per_s),
                         topo.Level("spine", sus, nodes_per_su * node.egress_bytes_per_s)))


def e4(node: hw.GPUNode, nodes_per_su: int, sus: int) -> tuple[Number, ...]:
    """E4: the AllGather bandwidth D W / (D - 1) of each level of a pod."""
    return tuple(number(f"ch12-e4-{lv.name}-level", section=S["cross"],
                        prompt=f"AllGather bandwidth at the {lv.name} level of a pod of {sus} SUs, each of "
                               f"{nodes_per_su} nodes ({node.name}), B/s.",
                        reference=lv.collective_bytes_per_s, unit="B/s", tolerance=ONE_PERCENT,
                        slips=(Slip(lv.child_bytes_per_s * (lv.children - 1) / lv.children,
                                    slip_code(lv.child_bytes_per_s * (lv.children - 1) / lv.children,
                                              lv.collective_bytes_per_s, ONE_PERCENT),
                                    "the ring's share is inverted: a level's AllGather bandwidth comes out above its "
                                    "links' bandwidth, not below."),))
                 for lv in pod(node, nodes_per_su, sus).levels)


def e4_valid(node: hw.GPUNode, nodes_per_su: int, sus: int) -> bool:
    """A listed pod, and the leaf level stays the bottleneck (the Choice that follows)."""
    return (nodes_per_su, sus) in E4_PODS and pod(node, nodes_per_su, sus).bottleneck.name == "leaf"


def e5(nodes: int) -> tuple[Number, ...]:
    """E5: the rough AllToAll cost B/(8 W_gpu) inside a node against B/(M W_node) across M nodes."""
    slowdown = (NODE.gpus * W_GPU) / (nodes * W_NODE)
    return (number("ch12-e5-slowdown", section=S["cross"],
                   prompt=f"AllToAll slowdown from 8 GPUs in a node to {nodes} nodes (rough forms).",
                   reference=slowdown, tolerance=ONE_PERCENT,
                   slips=(Slip(slowdown / 2, "ratio:1/2", f"B/({nodes} W_node) over B/(8 W_gpu)."),)),)


# Dealt together: an MoE's E/k, a cluster of H800s and a fleet of GPUs (the book's: 32, DeepSeek's 2048 and
# LLaMA-3's 16,000).
E8_DEALS = ((32, 2048, 16000), (16, 1024, 8000), (64, 4096, 24000))


def e8(node: hw.GPUNode, moe: int, h800s: int, fleet: int) -> tuple[Number, ...]:
    """E8: data-parallel thresholds C / W inside a node (NVLink) and across nodes (the node's egress),
    and the global batches they imply."""
    c, rate = node.gpu.bf16_flops_per_s, rate_tolerance(node.gpu)
    dp_node, dp_out = c / node.nvlink_bytes_per_s_per_gpu, c / node.egress_bytes_per_s
    deepseek = h800s * H800.bf16_flops_per_s / H800.nvlink_bytes_per_s
    llama = fleet * dp_out
    deepseek_slips = (Slip(h800s * H800.bf16_flops_per_s / hw.H800_NODE.egress_bytes_per_s, "ratio:3/4",
                           "inside the node the H800's NVLink applies, not the node egress."),)
    if h800s == 2048:
        deepseek_slips += (Slip(4e6, slip_code(4e6, deepseek), "that is the batch DeepSeek used."),)
    llama_slips = (Slip(16e6, slip_code(16e6, llama), "that is the batch LLaMA-3 used."),) if fleet == 16000 else ()
    gpu = node.gpu.name
    return (
        number("ch12-e8-dp-node", section=S["dp"],
               prompt=f"Per-GPU token batch for compute-bound DP inside an {node.name}.", reference=dp_node,
               tolerance=rate, slips=(Slip(dp_out, slip_code(dp_out, dp_node),
                           "inside the node the GPU's NVLink bandwidth applies."),)),
        number("ch12-e8-dp-scaleout", section=S["dp"], prompt="The same across nodes.", reference=dp_out,
               tolerance=rate,
               slips=(Slip(dp_out * 8, "ratio:8", "a collective across nodes gets the whole node's egress."),)),
        number("ch12-e8-llama-batch", section=S["dp"],
               prompt=f"Global token batch {fleet:,} {gpu}s would need for pure DP.", reference=llama,
               tolerance=rate, slips=(*llama_slips, Slip(fleet * dp_node, slip_code(fleet * dp_node, llama),
                                         "across nodes the node egress applies, not NVLink."))),
        number("ch12-e8-deepseek-batch", section=S["dp"],
               prompt=f"Global batch {h800s:,} H800s (300 GB/s NVLink) would need.", reference=deepseek,
               slips=deepseek_slips),
        number("ch12-e8-moe", section=S["dp"], prompt=f"Cross-node DP threshold of an MoE with E/k = {moe}.",
               reference=moe * dp_out, tolerance=rate,
               slips=(Slip(dp_out, f"ratio:{Fraction(1, moe)}", "an MoE moves E/k times more weights per FLOP."),)),
        number("ch12-e8-two-nodes", section=S["dp"],
               prompt="Per-GPU DP threshold with data parallelism over only 2 nodes.", reference=dp_out * (2 - 1) / 2,
               tolerance=rate, slips=(Slip(dp_out, "ratio:2", "the (X - 1)/X factor with X = 2."),)))


def e8_valid(node: hw.GPUNode, moe: int, h800s: int, fleet: int) -> bool:
    """One of the dealt triples."""
    return (moe, h800s, fleet) in E8_DEALS


def e9(F: int) -> tuple[Number, ...]:
    """E9: TP beyond a node pays the node egress: Y < F / (C / W_node), plus 8 free ways inside it."""
    tp = F / DP_SCALEOUT
    tol = rate_tolerance(H100)  # C / W_node: the book's rounded H100 peak passes too
    return (
        number("ch12-e9-tp-max", section=S["tp"], prompt=f"Largest TP beyond a node for F = {F:,}.", reference=tp,
               tolerance=largest_degree(tp, tol),
               slips=(Slip(F / DP_NODE, "close", "beyond the node the node egress applies."),)),
        number("ch12-e9-two-node-tp", section=S["tp"],
               prompt=f"Largest TP spanning 2 nodes (F = {F:,}), the ways beyond 8 using node egress.",
               reference=tp + NODE.gpus, tolerance=largest_degree(tp + NODE.gpus, tol),
               slips=(Slip(tp, slip_code(tp, tp + NODE.gpus, tol), "add the 8 in-node ways."),)))


def e9_valid(F: int) -> bool:
    """TP beyond the node pays: more than the 8 in-node ways stay compute-bound."""
    tp = F / DP_SCALEOUT
    return tp > NODE.gpus


E10_SEQ_LEN, E10_PP = 15_360, 16
E10_RUNS = ((4096, 2048), (3072, 4096), (5120, 1024))  # (sequences per batch, GPUs), the book's first


def e10(sequences: int, gpus: int, ep: int) -> tuple[Number, ...]:
    """E10: DeepSeek-V3's batch, per GPU, and its model parallelism (EP x PP, without the DP ways)."""
    tokens, mp = sequences * E10_SEQ_LEN, ep * E10_PP
    dp = gpus // mp
    return (
        number("ch12-e10-tokens", section=S["examples"],
               prompt=f"Tokens in a batch of {sequences} sequences of 15,360.", reference=tokens,
               tolerance=THREE_FIGURES,
               slips=(Slip(sequences, slip_code(sequences, tokens, THREE_FIGURES), "count tokens, not sequences."),)),
        number("ch12-e10-per-gpu", section=S["examples"], prompt=f"Tokens per GPU over {gpus} GPUs.",
               reference=tokens / gpus, tolerance=Tolerance(rtol=0.03) if gpus == E10_RUNS[0][1] else TWO_PERCENT,
               slips=(Slip(tokens / (gpus / 2), "ratio:2"),)),  # the book's 30,000 at its 2048 GPUs
        number("ch12-e10-model-parallel", section=S["examples"],
               prompt=f"How many ways of model parallelism ({ep}-way EP x {E10_PP}-way PP on {gpus} GPUs)?",
               reference=mp, exact=True,
               slips=(Slip(mp * dp, f"ratio:{dp}", f"the {dp}-way DP is not model parallelism."),)))


def e10_valid(sequences: int, gpus: int, ep: int) -> bool:
    """A listed run whose GPUs hold a whole number of model-parallel groups, at least 2 of them."""
    return (sequences, gpus) in E10_RUNS and gpus % (ep * E10_PP) == 0 and gpus // (ep * E10_PP) >= 2


E11_BATCH = 16e6


def e11(gpus: int) -> tuple[Number, ...]:
    """E11: LLaMA-3's batch per GPU: divide by every GPU, not by the data-parallel ways."""
    dp = gpus // (8 * 16)  # 8-way TP, 16-way PP
    return (number("ch12-e11-per-gpu", section=S["examples"],
                   prompt=f"Tokens per GPU of a 16e6-token batch on {gpus:,} GPUs (8-way TP, 16-way PP).",
                   reference=E11_BATCH / gpus,  # the book's 1000 at its 16,384 GPUs
                   tolerance=Tolerance(rtol=0.03) if gpus == 16384 else TWO_PERCENT,
                   slips=(Slip(E11_BATCH / dp, "magnitude:+2", "divide by all GPUs, not the DP ways."),)),)


# --- CX1: one AllGather, three networks --------------------------------------------------------------
CX1_TORUS = topo.Torus.slice(V5P, (4, 4, 4))  # 64 v5p chips, wraparound on every axis
CX1_IB_NODES = 8  # 64 GPUs in 8 nodes, under one leaf level
TWO_NODES = topo.superpod(nodes_per_su=2, sus=1)


def level_list(tree: topo.FatTree) -> list[list[float]]:
    return [[lv.children, lv.child_bytes_per_s] for lv in tree.levels]


CX1_PROBES = (
    dict(nbytes=float(Q23_BYTES), levels=level_list(topo.nvlink_domain(NODE))),
    dict(nbytes=float(PQ1_BYTES), levels=level_list(topo.nvlink_domain(NODE))),
    # a SuperPod whose SUs have half the uplinks: the real one's levels are Q3.1's answers
    dict(nbytes=1e9, levels=[*level_list(POD)[:-1], [POD.levels[-1].children, POD.levels[-1].child_bytes_per_s / 2]]),
    dict(nbytes=1e9, levels=level_list(TWO_NODES)),
    dict(nbytes=float(PQ3_BYTES), levels=[[hw.SU_NODES, W_NODE]]),
    dict(nbytes=1e9, levels=level_list(topo.nvlink_domain(hw.GB200_NVL72))),
    # the level of least bandwidth is not the slowest ring where it has few children: two trees where it is not
    dict(nbytes=2e9, levels=[[8, 4.5e11], [2, 4e11]]),
    dict(nbytes=5e8, levels=[[4, 9e11], [16, 6e10], [2, 5e10]]),
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


def cx1_least_bandwidth_level(nbytes, levels):
    """The ring of the level with the least bandwidth, read as the slowest: wrong where it has few children."""
    d, w = min(levels, key=lambda level: level[1])
    return nbytes * (d - 1) / (d * w)


def cx1_levels_one_after_another(nbytes, levels):
    """Each level's ring in turn, none overlapping: the sum where the levels run at once."""
    return nbytes * sum((d - 1) / (d * w) for d, w in levels)


def draw_tree(rng: random.Random, probe: dict) -> dict:
    """CX1's grading-time cases: a fresh array size and, but for a quarter of the one-level probes (a level alone at
    a fresh width and bandwidth), a tree of two or three levels whose least bandwidth is a level of two children,
    beside a level of more children a little faster: the slower ring, so that reading the least bandwidth as the
    slowest level is wrong, as are the sum of the levels and a time without the ring's (D - 1) / D."""
    nbytes = float(f"{probe['nbytes'] * 2 ** rng.uniform(-2, 2):.4g}")
    if len(probe["levels"]) == 1 and rng.random() < 0.25:
        return dict(nbytes=nbytes, levels=[[rng.choice((4, 8, 16, 72)), float(f"{10 ** rng.uniform(10, 12):.4g}")]])
    w = 10 ** rng.uniform(10, 11.5)
    few, many = [2, w], [rng.choice((8, 16, 18, 32, 72)), w * rng.uniform(1.1, 1.6)]
    levels = [many, few] if rng.random() < 0.5 else [few, many]
    if rng.random() < 0.5:  # a fast level above or below them
        levels.insert(rng.randint(0, 2), [rng.choice((2, 4, 8)), w * rng.uniform(4, 10)])
    return dict(nbytes=nbytes, levels=[[d, float(f"{b:.4g}")] for d, b in levels])


def cx1(nbytes: float, node: hw.GPUNode) -> tuple[Number, ...]:
    """CX1: one AllGather of ``nbytes`` on a v5p cube, inside one node, and over 8 nodes of InfiniBand
    (the slower of NVLink and the leaf level bounds it)."""
    torus = CX1_TORUS.allgather_s(nbytes)
    nvlink = topo.nvlink_domain(node).allgather_s(nbytes)
    tree = topo.superpod(node, nodes_per_su=CX1_IB_NODES, sus=1)
    ib = tree.allgather_s(nbytes)
    if tree.bottleneck.name == "leaf":
        ib_slip = Slip(ib * 8, "ratio:8", "the node's 8 NICs work together.")
    else:
        leaf_only = nbytes / tree.levels[1].collective_bytes_per_s
        ib_slip = Slip(leaf_only, slip_code(leaf_only, ib),
                       "the slowest level bounds it: compare NVLink with the leaf.")
    gpus = CX1_IB_NODES * node.gpus
    # bytes / W, the rough form (PQ1 asks for it too): without each level's (N - 1)/N, or at the node's egress
    # where NVLink is the slower level
    ring = "the rough bytes / W; this question wants the exact time, with each level's (N - 1)/N."
    nvlink_rough = nbytes / node.nvlink_bytes_per_s_per_gpu
    ib_rough = nbytes / min(node.nvlink_bytes_per_s_per_gpu, node.egress_bytes_per_s)
    ib_slips = [ib_slip, Slip(ib_rough, slip_code(ib_rough, ib), "that is " + ring)]
    if node.egress_bytes_per_s != min(node.nvlink_bytes_per_s_per_gpu, node.egress_bytes_per_s):
        egress_rough = nbytes / node.egress_bytes_per_s
        ib_slips.append(Slip(egress_rough, slip_code(egress_rough, ib),
                             "the slowest level bounds it: compare NVLink with the leaf, each with its (N - 1)/N."))
    exact = " (exact: each ring level's (N - 1)/N included)"
    return (
        number("ch12-cx1-torus-time", section=S["beyond"],
               prompt=f"Seconds to AllGather {nbytes:.3g} bytes over a TPU v5p 4x4x4 cube.", reference=torus, unit="s",
               slips=(Slip(torus * 2, "ratio:2", "a full cube wraps: both directions of each link.", maybe=True),)),
        number("ch12-cx1-nvlink-time", section=S["intra"],
               prompt=f"Seconds to AllGather {nbytes:.3g} bytes over one {node.name}{exact}.", reference=nvlink,
               unit="s", slips=(Slip(nvlink * 2, "ratio:2", "an AllGather is half an AllReduce.", maybe=True),
                                Slip(nvlink_rough, slip_code(nvlink_rough, nvlink), "that is " + ring))),
        number("ch12-cx1-ib-time", section=S["cross"],
               prompt=f"Seconds to AllGather {nbytes:.3g} bytes over {gpus} {node.gpu.name}s in {CX1_IB_NODES} "
                      f"nodes{exact}.", reference=ib, unit="s", slips=tuple(ib_slips)))


# --- CX2: hierarchical AllReduce on a (node, gpu) mesh -------------------------------------------------------
CX2_BLOCK = (32, 16)  # each device's partial sum, f32


def hierarchical_allreduce(x):
    """ReduceScatter inside each node (Y), AllReduce of the 1/Y shards across nodes (X), AllGather
    inside the node. x: f32[X, Y, 32, 16] @ P('X', 'Y'), X nodes of Y GPUs -> f32[32, 16] replicated."""
    def block(x_block):  # f32[1, 1, 32, 16]: this device's partial sum
        partial = x_block[0, 0]  # f32[32, 16]
        shard = jax.lax.psum_scatter(partial, "Y", scatter_dimension=0, tiled=True)  # f32[32/Y, 16], summed in-node
        shard = jax.lax.psum(shard, "X")  # f32[32/Y, 16]: only these bytes cross nodes
        return jax.lax.all_gather(shard, "Y", axis=0, tiled=True, to="invarying")  # f32[32, 16]

    nodes, gpus = x.shape[:2]
    return jax.shard_map(block, mesh=course.mesh(X=nodes, Y=gpus), in_specs=P("X", "Y"), out_specs=P())(x)


def _mesh_of(x) -> tuple[tuple[str, int], ...]:
    return (("X", x.shape[0]), ("Y", x.shape[1]))


def cx2_flat_psum(x):
    return smap(lambda b: jax.lax.psum(b[0, 0], ("X", "Y")), _mesh_of(x), (P("X", "Y"),), P())(x)


def cx2_forgets_nodes(x):
    def block(b):
        shard = jax.lax.psum_scatter(b[0, 0], "Y", scatter_dimension=0, tiled=True)
        return jax.lax.all_gather(shard, "Y", axis=0, tiled=True, to="invarying")
    return smap(block, _mesh_of(x), (P("X", "Y"),), P(), check_vma=False)(x)


def cx2(n: int, mesh: tuple[int, int]) -> tuple[Question, ...]:
    """CX2: ring against recursive-doubling AllReduce on ``n`` devices, then the hierarchical AllReduce on a
    mesh of X nodes of Y GPUs, where only 1/Y of the bytes cross nodes."""
    ring_steps, ring_bytes = topo.ring_allreduce_steps(n)
    tree_steps, tree_bytes = topo.tree_allreduce_steps(n)
    nodes, gpus = mesh
    shape = (nodes, gpus, *CX2_BLOCK)
    exact = Tolerance.exact_count()
    return (
        number("ch12-cx2-ring-steps", section=S["intra"],
               prompt=f"How many neighbour steps does a ring AllReduce on {n} devices take?", reference=ring_steps,
               exact=True, slips=(Slip(ring_steps / 2, "ratio:1/2", "a ReduceScatter, then an AllGather."),)),
        number("ch12-cx2-ring-bytes", section=S["intra"],
               prompt="Bytes each device sends in that ring AllReduce, as a multiple of the array.",
               reference=ring_bytes, tolerance=ONE_PERCENT,
               slips=(Slip(2.0, slip_code(2.0, ring_bytes, ONE_PERCENT),
                           "a device never sends its own final shard."),
                      Slip(ring_bytes / 2, slip_code(ring_bytes / 2, ring_bytes, ONE_PERCENT),
                           "that is the ReduceScatter alone: the AllGather that follows sends as much again."))),
        number("ch12-cx2-tree-steps", section=S["intra"],
               prompt=f"How many steps does a recursive-doubling AllReduce on {n} devices take?", reference=tree_steps,
               exact=True, slips=(Slip(ring_steps, slip_code(ring_steps, tree_steps, exact),
                                       "one exchange per doubling: log2(N) of them."),)),
        number("ch12-cx2-tree-bytes", section=S["intra"],
               prompt="Bytes each device sends in it, as a multiple of the array.", reference=tree_bytes,
               tolerance=ONE_PERCENT,
               slips=(Slip(ring_bytes, slip_code(ring_bytes, tree_bytes, ONE_PERCENT),
                           "every step exchanges the whole array."),
                      Slip(1.0, slip_code(1.0, tree_bytes, ONE_PERCENT),
                           "the whole array goes out at every step, not once: count the steps.", maybe=True))),
        number("ch12-cx2-node-fraction", section=S["cross"],
               prompt=f"Bytes crossing nodes in the hierarchical AllReduce over a flat one's ({gpus} GPUs per node).",
               reference=1 / gpus, tolerance=ONE_PERCENT,
               slips=(Slip(1.0, f"ratio:{gpus}",
                           "the in-node ReduceScatter leaves each GPU only its own shard to send across nodes."),)),
        Program(qid="ch12-cx2-hierarchical-allreduce", points=3, section=S["cross"],
                prompt=f"Sum f32[{nodes},{gpus},32,16] @ P('X','Y') over both axes: ReduceScatter(Y), AllReduce(X), "
                       "AllGather(Y).",
                spec=ProgramSpec(mesh=(("X", nodes), ("Y", gpus)), einsum="xyab->ab",
                                 operands=(Operand(shape, ("X", "Y")),), out_spec=(),
                                 collectives={"reduce-scatter": 1, "all-reduce": 1, "all-gather": 1}),
                model=hierarchical_allreduce,
                slips=(Slip(cx2_flat_psum, "collectives:all-reduce"), Slip(cx2_forgets_nodes, "partial_sum:X"))))


# --- CX4: critical batches of every GPU ------------------------------------------------------------------------
CX4_PROBES = tuple([dict(chip=g.name, channel="hbm") for g in (A100, H100, H200, B200)]
                   + [dict(chip=g.name, channel="nvlink") for g in (A100, H100, B200, H800)]
                   + [dict(chip=g.name, channel="scaleout") for g in (H100, B200, A100, H200)])

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
    vary("ch12-q11", q11, gpu1=chips(H100, A100, B200), gpu2=chips(B200, A100, H100), tpu=chips(V5P, hw.TPU_V5E),
         valid=q11_valid),
    # Q1.2: vector FLOP/s.
    vary("ch12-q12", q12, gpu=chips(H100, A100, B200), clock=values(*dict.fromkeys(c for _, c in Q12_CLOCKS)),
         valid=q12_valid),
    number("ch12-q12-vector-flops-boost", section=S["quiz1"], prompt="The same at the 1.98 GHz boost clock.",
           reference=VECTOR_FLOPS_BOOST, unit="FLOP/s", tolerance=ONE_PERCENT,
           slips=(Slip(2 * VECTOR_FLOPS_BOOST, "ratio:2"),)),
    number("ch12-q12-tensor-ratio", section=S["quiz1"], prompt="Tensor-core bf16 FLOP/s over boosted vector FLOP/s.",
           reference=TENSOR_OVER_VECTOR,
           tolerance=Tolerance(low=29, high=30),  # the book: "around 30x"
           slips=(Slip(TENSOR_OVER_VECTOR / 2, "ratio:1/2", "the vector rate here has no FMA doubling."),
                  Slip(C_H100 / VECTOR_FLOPS_BASE, slip_code(C_H100 / VECTOR_FLOPS_BASE, TENSOR_OVER_VECTOR,
                                                             Tolerance(low=29, high=30)),
                       "the vector rate asked for is the boosted one, not the base clock's."))),
    # Q1.3: critical intensities of two GPUs.
    vary("ch12-q13", q13, gpu1=chips(H100, A100, H200), gpu2=chips(B200, A100, H200), valid=q13_valid),
    # Q1.4: two matmuls on one GPU.
    vary("ch12-q14", q14, gpu=chips(B200, H100, A100), F=values(8192, 16384), valid=q14_valid),
    # Q1.5: on-chip memory.
    vary("ch12-q15", q15, gpu=chips(H100, A100, B200)),
    # Q1.6: B200 clock.
    number("ch12-q16-b200-clock", section=S["quiz1"],
           prompt="Clock (Hz) implied by 8e13 fp32 vector FLOP/s (FMA counted as 2).", reference=B200_CLOCK_HZ,
           unit="Hz", tolerance=ONE_PERCENT,
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
           slips=(Slip(2 * VECTOR_FLOPS_BOOST / H100.hbm_bytes_per_s, "ratio:2"),
                  Slip(VECTOR_FLOPS_BASE / H100.hbm_bytes_per_s,
                       slip_code(VECTOR_FLOPS_BASE / H100.hbm_bytes_per_s, VECTOR_FLOPS_BOOST / H100.hbm_bytes_per_s),
                       "the vector rate asked for is the boosted one, not the base clock's."))),
    vary("ch12-q17", q17, gpu=chips(H100, A100, H200, B200)),
    # Quiz 2: nodes.
    vary("ch12-e3", e3, node=chips(NODE, DGX_B200, hw.GB200_NVL72)),
    Formula(qid="ch12-q23-allgather-formula", points=1, section=S["quiz2"],
            prompt="Throughput-bound AllGather of B bytes over N GPUs of W bytes/s each way.",
            reference=B * (N - 1) / (N * W), symbols="B N W", counts="N",
            slips=(Slip(B / W, "missing_symbol:N", "each GPU already holds its own 1/N."),
                   Slip(2 * B * (N - 1) / (N * W), "ratio:2", "that is an AllReduce."))),
    vary("ch12-q23", q23, node=chips(*NODES), D=values(4096, 5120)),
    # Quiz 3: the SuperPod.
    vary("ch12-q31", q31, gbps=values(*Q31_GBPS)),
    vary("ch12-q32", q32, gpus=values(*Q32_GPUS), valid=q32_valid),
    number("ch12-q32-two-level-max", section=S["quiz3"],
           prompt="How many GPUs, at most, can a two-level tree of 64-port switches reach at full "
                  "bisection?", reference=topo.two_level_max_gpus(), exact=True,
           slips=(Slip(2 * topo.two_level_max_gpus(), "ratio:2", "a leaf uses half its ports to go up."),)),
    Choice(qid="ch12-q32-beyond", points=1, section=S["quiz3"],
           prompt="How does the reference design reach 4096 GPUs: 'more-spines', 'core-layer' or 'bigger-nodes'?",
           reference="core-layer", options=("more-spines", "core-layer", "bigger-nodes"),
           slips=(Slip("more-spines", "wrong_option", "count the leaf switches a 64-port spine can reach."),)),
    # Collectives in a node.
    vary("ch12-pq1", pq1, node=chips(*NODES), B=values(1024, 2560)),
    Formula(qid="ch12-pq2-dense", points=1, section=S["intra"],
            prompt="AllToAll of V bytes over N GPUs of W bytes/s each way (exact).",
            reference=V * (N - 1) / (W * N**2), symbols="V N W", counts="N",
            slips=(Slip(V / (W * N), "lower_terms", "each GPU keeps the 1/N of its shard that stays home."),
                   Slip(V / (4 * W), "missing_symbol:N", "that is the TPU ring's cost, not a switch's."))),
    Formula(qid="ch12-pq2-half", points=1, section=S["intra"],
            prompt="The same when only half of each GPU's destination shards are non-zero.",
            reference=V * (N - 1) / (2 * W * N**2), symbols="V N W", counts="N",
            slips=(Slip(V * (N - 1) / (W * N**2), "ratio:2", "zero shards need not be sent."),)),
    vary("ch12-pq3", pq3, D=values(8192, 4096, 16384, 12288)),
    Formula(qid="ch12-pq3-formula", points=1, section=S["cross"],
            prompt="That time for Y > 8 in D, F, Y and the per-GPU scale-out bandwidth W.",
            reference=2 * D * F / (Y * W), symbols="D F Y W",
            slips=(Slip(2 * D * F / W, "missing_symbol:Y"),)),
    # Quiz 4: collectives through switches.
    Formula(qid="ch12-q41-node-egress-bytes", points=1, section=S["quiz4"],
            prompt="Bytes a node-level switch egresses during an AllGather of B bytes (M nodes of N GPUs; the book's "
                   "count for many GPUs, B to each, or the exact one, less what each GPU holds already).",
            reference=B * N, symbols="B N M", counts="N M", limit="N M", exact_form=B * N - B / M,
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
                        "use the current text's spine bandwidth (Q3.1), twice the older one, over 4 SUs."),)),
    vary("ch12-q45", q45, nodes=values(2, 3, 4), valid=q45_valid),
    # Quiz 5: rooflines.
    vary("ch12-q51", q51, new=chips(DGX_B200, NODE, hw.H800_NODE), old=chips(NODE, hw.DGX_A100), valid=q51_valid),
    vary("ch12-q52", q52, params=values(*(p for p, _ in Q52_MODELS)), F=values(*(f for _, f in Q52_MODELS)),
         batch=values(4e6, 2e6, 6e6), valid=q52_valid),
    number("ch12-q52-pp-threshold", section=S["quiz5"],
           prompt="Per-GPU batch threshold with 8-way pipelining (DP groups spanning 8 nodes).",
           reference=Q52_PP_THRESHOLD, slips=(Slip(DP_SCALEOUT, "ratio:8", "8 nodes' egress serves each group."),)),
    Choice(qid="ch12-q52-config", points=1, section=S["quiz5"],
           prompt="Which is compute-bound and fits: 'tp8-dp512', 'tp8-zero3' or 'tp8-pp8-zero'?",
           reference="tp8-pp8-zero", options=("tp8-dp512", "tp8-zero3", "tp8-pp8-zero"),
           slips=(Slip("tp8-dp512", "wrong_option", "check the memory per GPU."),
                  Slip("tp8-zero3", "wrong_option", "compare the batch per GPU with the DP threshold."))),
    vary("ch12-q53", q53, seq_len=values(SEQ, 2048, 8192), node=chips(NODE, DGX_B200, hw.DGX_A100)),
    # E1-E13.
    vary("ch12-e1", e1, gpu1=chips(H100, A100, B200), gpu2=chips(B200, H100, A100), valid=e1_valid),
    vary("ch12-e2", e2, registers=values(256, 128, 64), valid=e2_valid),
    vary("ch12-e4", e4, node=chips(NODE, DGX_B200, hw.DGX_A100), nodes_per_su=values(*(n for n, _ in E4_PODS)),
         sus=values(*(s for _, s in E4_PODS)), valid=e4_valid),
    Choice(qid="ch12-e4-bottleneck", points=1, section=S["cross"],
           prompt="Which level bounds the pod's AllGather?",
           reference=POD.bottleneck.name, options=tuple(lv.name for lv in POD.levels),
           slips=(Slip("node", "wrong_option", "compare the three bandwidths."),)),
    vary("ch12-e5", e5, nodes=values(2, 3, 4)),
    number("ch12-e6-shard-bytes", section=S["intra"], prompt="Bytes of the bf16[8192, 3584] MLP shard.",
           reference=E6_SHARD_BYTES, unit="B", tolerance=THREE_FIGURES,
           slips=(Slip(E6_SHARD_BYTES / 2, "ratio:1/2", "bf16 is 2 bytes.", maybe=True),)),
    Choice(qid="ch12-e6-shard-bandwidth", points=1, section=S["intra"],
           prompt="Measured AllReduce bus bandwidth for that shard in one H100 node: '450', '370' or '150' GB/s?",
           reference="150", options=("450", "370", "150"), unit="GB/s",
           slips=(Slip("370", "wrong_option", "that needs messages of about 10 GB."),)),
    number("ch12-e7-sharp-bandwidth", section=S["intra"],
           prompt="Effective AllReduce bandwidth with SHARP's measured 30% gain, B/s.", reference=E7_SHARP, unit="B/s",
           slips=(Slip(W_GPU * (1 + hw.SHARP_MEASURED_GAIN), "close", "start from the measured 370 GB/s."),)),
    vary("ch12-e8", e8, node=chips(NODE, DGX_B200, hw.DGX_A100), moe=values(*(m for m, _, _ in E8_DEALS)),
         h800s=values(*(h for _, h, _ in E8_DEALS)), fleet=values(*(f for _, _, f in E8_DEALS)), valid=e8_valid),
    vary("ch12-e9", e9, F=values(28000, 24000, 36000, 48000), valid=e9_valid),
    vary("ch12-e10", e10, sequences=values(*(s for s, _ in E10_RUNS)), gpus=values(*(g for _, g in E10_RUNS)),
         ep=values(64, 32, 128), valid=e10_valid),
    vary("ch12-e11", e11, gpus=values(16384, 12288, 24576)),
    vary("ch12-e12", e12, trays=values(hw.GB200_TRAYS, hw.GB200_TRAYS // 2), nic_gbps=values(400, 800),
         valid=e12_valid),
    # CX1: collective costs on three networks.
    Function(qid="ch12-cx1-allgather", points=3, section=S["cross"],
             prompt="t_allgather(nbytes, levels): AllGather time on a tree given [children, bytes/s] per level.",
             reference=tree_allgather, model=t_allgather, probes=CX1_PROBES, draw=draw_tree,
             output=Output("number", tolerance=Tolerance(rtol=0.005)),
             slips=(Slip(cx1_without_ring_factor, "close"), Slip(cx1_least_bandwidth_level, "not_equal"),
                    Slip(cx1_levels_one_after_another, "not_equal",
                         "every level runs its own ring at the same time: the slowest sets the time."))),
    vary("ch12-cx1", cx1, nbytes=values(1e9, 2.5e9, 6e8), node=chips(NODE, hw.H800_NODE)),
    # CX2: AllReduce algorithms, and the hierarchical AllReduce.
    vary("ch12-cx2", cx2, n=values(8, 16, 4), mesh=values((2, 4), (4, 2))),
    # CX4: every GPU's critical batches.
    Function(qid="ch12-cx4-critical-batch", points=3, section=S["dp"],
             prompt="gpu_intensity(chip, channel): C / W for 'hbm', 'nvlink' or 'scaleout' (8-GPU node egress).",
             reference=gpu_intensity, probes=CX4_PROBES, draw=draw_cx4,
             output=Output("number", tolerance=Tolerance(rtol=0.005)),
             slips=(Slip(cx4_per_gpu_nic, "ratio:8"),)),
))
