"""Chapter 3, Sharded matrices: every graded question of the chapter, as records with references.

Book: Part 3 "Sharded Matrices and How to Multiply Them", https://jax-ml.github.io/scaling-book/sharding/
Numbers are computed from ``course.hardware`` (never typed in); where the book prints a rounded or
differently-based value, the tolerance admits it and ``BOOK`` records it for the tests. Labels follow
the syllabus: E1-E5 worked examples, PQ0-PQ2 pop quizzes, Q1-Q10 questions, CX1-CX5 coding exercises.

Program questions run on 8 simulated devices. Their collectives are counted in the lowered program
(shard_map states them explicitly), so every model below is a ``jax.shard_map`` and the collective it
uses is the student's choice, not the compiler's.
"""

from __future__ import annotations

import math
import random

import numpy as np
import sympy as sp

import course
from autograder.numbers import Tolerance
from autograder.questions import Chapter, Choice, Formula, Function, Number, Operand, Output, Program, ProgramSpec, Slip
from course import hardware as hw
from course.symbols import B, C, D, F, I, J, K, M, N, V, W, X, Y, Z
from solutions._kit import (
    EXACT,
    ONE_PERCENT,
    THREE_FIGURES,
    TWO_PERCENT,
    X8,
    P,
    jax,
    jnp,
    number,
    own_block,
    reshard_spec,
    ring,
    smap,
)

V4P, V5P, V5E, H100 = hw.TPU_V4P, hw.TPU_V5P, hw.TPU_V5E, hw.H100
HOP_S = hw.ICI_HOP_LATENCY_S  # 1 us per ICI hop (Part 2; Part 3 uses it for the latency-bound regime)
SECTION = "sharding/"
NOTATION = SECTION + "#a-unified-notation-for-sharding"
MATMULS = SECTION + "#computation-with-sharded-arrays"
CASE1, CASE2 = SECTION + "#case-1-neither-multiplicand-has-a-sharded-contracting-dimension", \
    SECTION + "#case-2-one-multiplicand-has-a-sharded-contracting-dimension"
CASE3, CASE4 = SECTION + "#case-3-both-multiplicands-have-sharded-contracting-dimensions", \
    SECTION + "#case-4-both-multiplicands-have-a-non-contracting-dimension-sharded-along-the-same-axis"
ALLGATHER = SECTION + "#a-deeper-dive-into-tpu-communication-primitives"
REDUCESCATTER = SECTION + "#more-about-the-reducescatter"
ALLTOALL = SECTION + "#our-final-communication-primitive-the-alltoall"
PROBLEMS = SECTION + "#some-problems-to-work"
BF16, FP32, INT8 = hw.BYTES_PER_ELEMENT["bf16"], hw.BYTES_PER_ELEMENT["fp32"], hw.BYTES_PER_ELEMENT["int8"]


# --- sharding bookkeeping (CX1, E1-E3, PQ0, PQ1, Q1) --------------------------------------------------
# A spec is one string per array dimension: the mesh axes that shard it, in order ("" = not sharded).
# The book's A[I_XY, J] on {X, Y} is ("XY", ""). Strings, not PartitionSpecs, so a probe is plain JSON.

def local_shape(global_shape, spec, mesh):
    """The block shape on one device: each dimension divided by the sizes of the mesh axes that shard it."""
    return tuple(int(n) // math.prod(mesh[a] for a in axes) for n, axes in zip(global_shape, spec, strict=True))


def total_bytes(global_shape, bytes_per_element, spec, mesh):
    """Bytes over all devices: every device holds one block (a mesh axis the spec leaves out copies it)."""
    devices = math.prod(mesh.values())
    return math.prod(local_shape(global_shape, spec, mesh)) * bytes_per_element * devices


def cx1_forgets_flattening(global_shape, spec, mesh):
    """Uses only the first axis of a flattened subscript (I_XY split |X| ways, not |X||Y|)."""
    return [float(n // (mesh[axes[0]] if axes else 1)) for n, axes in zip(global_shape, spec, strict=True)]


def cx1_one_copy(global_shape, bytes_per_element, spec, mesh):
    """The bytes of one copy of the array: forgets that unmentioned mesh axes replicate it."""
    return float(math.prod(global_shape) * bytes_per_element)


def random_case(rng: random.Random, probe: dict | None = None) -> dict:
    """A random shape, mesh and spec (every dimension divisible), so no formula fits by accident; also
    CX1's grading-time cases (``probe``'s bytes per element drawn afresh where it has one)."""
    names = rng.sample("XYZ", rng.randint(1, 3))
    mesh = {a: rng.choice((2, 4, 8)) for a in sorted(names)}
    dims = rng.randint(1, 3)
    unused = list(mesh)
    rng.shuffle(unused)
    spec = []
    for _ in range(dims):
        take = rng.randint(0, min(2, len(unused)))
        spec.append("".join(unused[:take]))
        unused = unused[take:]
    shape = [math.prod(mesh[a] for a in s) * rng.choice((1, 3, 16, 48)) for s in spec]
    case = dict(global_shape=shape, spec=spec, mesh=mesh)
    return case | {"bytes_per_element": rng.choice((1, 2, 4))} if probe and "bytes_per_element" in probe else case


def _random_cases(seed: int, n: int) -> list[dict]:
    rng = random.Random(seed)
    return [random_case(rng) for _ in range(n)]


E1_MESH = {"X": 4, "Y": 2}
E1_A = dict(global_shape=[8, 2048], spec=["X", "Y"], mesh=E1_MESH)
E1_B = dict(global_shape=[2048, 8192], spec=["", "Y"], mesh=E1_MESH)
E2_MESH = {"X": 4, "Y": 8}
E3 = dict(global_shape=[4, 128], spec=["X", "Y"], mesh={"X": 2, "Y": 2})
PQ0 = dict(global_shape=[1024, 4096], spec=["XY", ""], mesh={"X": 8, "Y": 2})
PQ1 = dict(global_shape=[128, 2048], spec=["XY", ""], mesh={"X": 2, "Y": 8, "Z": 2})
Q1 = dict(global_shape=[64, 32, 16], spec=["X", "", ""], mesh={"X": 4, "Y": 8, "Z": 2})
SHAPE_PROBES = (E1_A, E1_B, E3, PQ0, PQ1, Q1, dict(global_shape=[64, 48], spec=["YX", ""], mesh=E2_MESH),
                *_random_cases(3, 9))
BYTES_PROBES = tuple(dict(p, bytes_per_element=b) for p, b in zip(
    SHAPE_PROBES, (BF16, BF16, FP32, FP32, INT8, BF16) + (FP32, BF16, INT8) * 4, strict=False))

E1_A_BYTES = math.prod(local_shape(**E1_A)) * BF16
E1_B_BYTES = math.prod(local_shape(**E1_B)) * BF16
E2_WAYS = math.prod(E2_MESH.values())
E3_FRACTION = math.prod(local_shape(**E3)) / math.prod(E3["global_shape"])
PQ0_BYTES = math.prod(local_shape(**PQ0)) * FP32
PQ0_SECONDS = PQ0_BYTES / H100.hbm_bytes_per_s
PQ1_BYTES = math.prod(local_shape(**PQ1)) * INT8
PQ1_TOTAL = total_bytes(bytes_per_element=INT8, **PQ1)
Q1_RATIO = total_bytes(bytes_per_element=1, **Q1) / math.prod(Q1["global_shape"])


# --- collective costs (E4, PQ2, Q2, Q3, CX5) ----------------------------------------------------------
# V is the bytes of the whole array the collective produces or reduces (for an AllToAll, the whole
# array); W the bidirectional bandwidth of one link (both directions), N the length of each axis.
FACTOR = {"all-gather": 1.0, "reduce-scatter": 1.0, "all-reduce": 2.0, "all-to-all": 0.25}


def collective_time(op, V, W, N, axes=1, wrap=True, hop_s=hw.ICI_HOP_LATENCY_S):
    """Seconds for one collective over ``axes`` mesh axes of length N each (Part 3's model).

    Bandwidth term: FACTOR[op] * V / (axes * W) on a ring with wraparound (the book drops the factor
    (N-1)/N); without wraparound the ring is a line, each link is used in one direction only and a
    device's N-1 neighbours' shards cross it one after another: 2 (N-1)/N times as long (Part 3, PQ2).
    Latency term: hops per axis (N // 2 with wraparound, N - 1 without) times ``hop_s``, per axis,
    twice for an AllReduce (a ReduceScatter then an AllGather). The collective takes the larger."""
    bandwidth = FACTOR[op] * V / (axes * W) * (1 if wrap else 2 * (N - 1) / N)
    hops = N // 2 if wrap else N - 1
    latency = (2 if op == "all-reduce" else 1) * axes * hops * hop_s
    return max(bandwidth, latency)


def cx5_ignores_latency(op, V, W, N, axes=1, wrap=True, hop_s=HOP_S):
    return FACTOR[op] * V / (axes * W) * (1 if wrap else 2 * (N - 1) / N)


W_V5E, W_V4P = V5E.ici_bidirectional_bytes_per_s, V4P.ici_bidirectional_bytes_per_s

# E4: below this many bytes per hop, the 1 us hop latency dominates a one-way link.
E4_BYTES = V5E.ici_bytes_per_s_per_link * HOP_S

# PQ2: AllGather_Y([E_Y, F]) on a v5e {X: 8, Y: 4}; a 4-long v5e axis has no wraparound.
PQ2_N = 4
PQ2_A_BYTES = BF16 * 2048 * 8192  # the whole gathered array
PQ2_B_BYTES = BF16 * 256 * 256
PQ2_IDEAL = collective_time("all-gather", PQ2_A_BYTES, W_V5E, PQ2_N)
PQ2_NOWRAP = collective_time("all-gather", PQ2_A_BYTES, W_V5E, PQ2_N, wrap=False)
PQ2_HOP = PQ2_B_BYTES / PQ2_N / V5E.ici_bytes_per_s_per_link  # one shard over one link, one way
PQ2_SMALL = collective_time("all-gather", PQ2_B_BYTES, W_V5E, PQ2_N, wrap=False)

# Q2 and Q3: a full v4p 4x4x4 cube (wraparound on every axis), B = 1024, D = 4096, bf16.
Q2_B, Q2_D, Q2_AXIS = 1024, 4096, 4
Q2_FULL = BF16 * Q2_B * Q2_D
Q2_GATHER_X = collective_time("all-gather", Q2_FULL / Q2_AXIS, W_V4P, Q2_AXIS)  # -> [B, D_Y]
Q2_GATHER_XY = collective_time("all-gather", Q2_FULL, W_V4P, Q2_AXIS, axes=2)  # -> [B, D]
Q2_ALLREDUCE_Z = collective_time("all-reduce", Q2_FULL / Q2_AXIS**2, W_V4P, Q2_AXIS)  # [B_X, D_Y]{U_Z}
Q2_RESHARD_X = collective_time("all-gather", Q2_FULL / Q2_AXIS, W_V4P, Q2_AXIS, axes=2)  # [B_XZ, D_Y]
Q2_RESHARD_XY = collective_time("all-gather", Q2_FULL, W_V4P, Q2_AXIS, axes=3)  # [B_XZ, D_Y] -> [B, D]
Q2_V0_ALLREDUCE = 2 * Q2_FULL / W_V4P  # the first edition reduced the whole unsharded array
Q3_BYTES = BF16 * 128
Q3_TIME = collective_time("all-gather", Q3_BYTES, W_V4P, Q2_AXIS)

CX5_PROBES = tuple(dict(op=op, V=float(v), W=w, N=n, axes=k, wrap=wrap, hop_s=HOP_S) for op, v, w, n, k, wrap in (
    ("all-gather", PQ2_A_BYTES, W_V5E, PQ2_N, 1, True),
    ("all-gather", PQ2_A_BYTES, W_V5E, PQ2_N, 1, False),
    ("all-gather", PQ2_B_BYTES, W_V5E, PQ2_N, 1, False),
    ("all-gather", Q2_FULL / Q2_AXIS, W_V4P, Q2_AXIS, 1, True),
    ("all-gather", Q2_FULL, W_V4P, Q2_AXIS, 2, True),
    ("all-reduce", Q2_FULL / Q2_AXIS**2, W_V4P, Q2_AXIS, 1, True),
    ("all-gather", Q2_FULL, W_V4P, Q2_AXIS, 3, True),
    ("all-gather", Q3_BYTES, W_V4P, Q2_AXIS, 1, True),
    ("reduce-scatter", 3e8, V5P.ici_bidirectional_bytes_per_s, 16, 1, True),
    ("all-reduce", 1e7, W_V5E, 8, 1, False),
    ("all-reduce", 2e3, W_V5E, 16, 2, True),
    ("all-to-all", 6.4e8, W_V5E, 16, 1, True),
    ("all-to-all", 6.4e8, W_V5E, 16, 1, False),
    ("all-to-all", 4e4, W_V4P, 8, 3, True),
))

# The collective cost formulas, each once (W bidirectional per link, N the axis length).
T_ALLGATHER = V / W
T_ALLREDUCE = 2 * V / W
T_ALLTOALL = V / (4 * W)
T_LINE = 2 * (N - 1) * V / (N * W)

# --- E5: AllGather and ReduceScatter as matrices --------------------------------------------------------
# State of the system: every device's buffer, stacked device by device. AllGather maps p shards of n
# (p*n numbers) to p full copies (p*p*n); ReduceScatter maps p full-size partials to p reduced shards.


def gather_scatter_reference(n: int, p: int) -> tuple[list[float], list[float]]:
    """E5's reference: (AllGather, ReduceScatter) matrices, flattened; G = kron(ones((p, 1)), I_pn), R = G.T."""
    g = np.kron(np.ones((p, 1)), np.eye(p * n))
    return g.reshape(-1).tolist(), g.T.reshape(-1).tolist()


def gather_scatter_matrices(n, p):
    """The AllGather matrix G [p*p*n, p*n] and the ReduceScatter matrix R [p*n, p*p*n] of p shards of n
    numbers, acting on every device's buffer stacked device by device (the syllabus's Kronecker form)."""
    broadcast = np.kron(np.ones((p, 1)), np.eye(n))  # [p*n, n]: n numbers to p copies
    reduce = np.kron(np.ones((1, p)), np.eye(n))  # [n, p*n]: p copies summed
    return np.kron(broadcast, np.eye(p)), np.kron(reduce, np.eye(p))


def e5_interleaved(n, p):
    """Copies interleaved element by element instead of stacked whole."""
    g = np.kron(np.eye(p * n), np.ones((p, 1)))
    return g, g.T


E5_PROBES = tuple(dict(n=n, p=p) for n, p in ((1, 2), (2, 2), (1, 3), (3, 2), (2, 4)))


def draw_e5(rng: random.Random, probe: dict) -> dict:
    return dict(n=rng.randint(1, 4), p=rng.randint(2, 5))

# --- Q4-Q7, Q9, Q10: strategies -------------------------------------------------------------------------
T_S1 = sp.Max(2 * B * D * F / C, 2 * D * F / W)  # AllGather Y[D_X, F] (bf16), then the full matmul
T_S2 = sp.Max(2 * B * D * F / (X * C), 4 * B * F / W)  # partial matmul, AllReduce of bf16[B, F]
V5P_ICI_INTENSITY = V5P.bf16_flops_per_s / V5P.ici_bidirectional_bytes_per_s  # C / W = 2550
Q4_B_THRESHOLD = V5P_ICI_INTENSITY  # strategy 1 is comms-bound below this batch
Q4_D_THRESHOLD = 2 * V5P_ICI_INTENSITY  # with B above it, strategy 2 wins for D above this

Q5_CHIPS = math.prod((4, 4, 4))  # TPU v4p 4x4x4
Q5_FLOPS = 2 * I * J * K / Q5_CHIPS
Q5_GATHER = BF16 * I * K / (3 * W)  # AllGather of bf16 C[I_XYZ, K] over 3 axes at once
Q5_ALLREDUCE = 2 * BF16 * I * K / (3 * W)  # AllReduce of bf16 C[I, K]{U_XYZ} over 3 axes

Q6_AXIS = 4  # TPU v5e 4x4
Q6_A_J = 2 * Q6_AXIS * V5E.bf16_flops_per_s / W_V5E  # 2IJK/16 / C > IK/W  <=>  J > 8C/W
Q6_B_I = Q6_AXIS * V5E.bf16_flops_per_s / W_V5E  # 2IJK/16 / C > JK/(2W)  <=>  I > 4C/W
COLLECTIVES = ("none", "all-gather", "reduce-scatter", "all-reduce", "all-to-all")

Q7_B, Q7_D, Q7_F, Q7_CHIPS = 128, 8192, 32768, 4  # TPU v5e 2x2
Q7_WEIGHT = BF16 * Q7_D * Q7_F  # one of W_in, W_out
Q7_PER_CHIP = 2 * Q7_WEIGHT / Q7_CHIPS  # tensor parallel: both weights split four ways
Q7_FLOP_TIME = 2 * 2 * Q7_B * Q7_D * Q7_F / Q7_CHIPS / V5E.bf16_flops_per_s
Q7_COMM = collective_time("all-gather", BF16 * Q7_B * Q7_D, W_V5E, 2, axes=2)  # In[B, D_XY] -> [B, D]

Q10_ALLGATHER = N**2 * (1 - 1 / D)  # scalars over one link, unidirectional ring of D devices
Q10_ALLTOALL = N**2 * (1 - 1 / D) / 2

# The book's printed answers (syllabus, pinned V2), for the tests that compare them with ours.
BOOK = {
    "ch03-e1-a-bytes": 4096, "ch03-e2-ways": 32, "ch03-e3-fraction": 0.25, "ch03-e4-latency-bytes": 45_000,
    "ch03-pq0-bytes": 1_048_576, "ch03-pq0-time": 294e-9, "ch03-pq1-bytes-per-device": 16_384,
    "ch03-pq1-total-bytes": 524_288, "ch03-pq2-ideal": 377e-6, "ch03-pq2-nowrap": 560e-6,
    "ch03-pq2-hop-time": 0.7e-6, "ch03-pq2-small": 3e-6, "ch03-q1-ratio": 16,
    "ch03-q2-gather-x": 23e-6, "ch03-q2-gather-xy": 46e-6, "ch03-q2-allreduce-z": 11.6e-6,
    "ch03-q2-reshard-x": 11.5e-6, "ch03-q2-reshard-xy": 31e-6, "ch03-q3-latency": 2e-6,
    "ch03-q4-b-threshold": 2550, "ch03-q4-d-threshold": 5100, "ch03-q7-weight-bytes": 536e6,
    "ch03-q10-ratio-uni": 0.5, "ch03-q10-ratio-bidi": 0.25,
}


# --- programs (CX2-CX5, Q9): models and typical wrong versions --------------------------------------------
# Shapes: x f32[64, 256] (I = 64 rows, J = 256 contraction), y f32[256, 128] (K = 128), 8 devices (X8).

# Case 1: A[I_X, J] . B[J, K] -> C[I_X, K]: nothing to communicate.
def case1(x, y):
    """Case 1: A[I_X, J] . B[J, K] -> C[I_X, K]. B is whole on every device: nothing to communicate."""
    def block(x_block, y_full):  # x_block: f32[8, 256], y_full: f32[256, 128]
        return x_block @ y_full  # f32[8, 128]: this device's rows of C

    return jax.shard_map(block, mesh=course.mesh(X=8), in_specs=(P("X", None), P()), out_specs=P("X", None))(x, y)


def case1_claims_replicated(x, y):
    return smap(lambda a, b: a @ b, X8, (P("X", None), P()), P(), check_vma=False)(x, y)


def case1_gathers_anyway(x, y):
    return smap(lambda a, b: own_block(jax.lax.all_gather(a, "X", axis=0, tiled=True) @ b, "X"), X8,
                (P("X", None), P()), P("X", None))(x, y)


# Case 2: A[I, J_X] . B[J, K] -> C[I, K]: AllGather the sharded contraction first.
CASE2_K = 512  # wide enough that summing [I, K] partials moves 4x the bytes of gathering A


def case2(x, y):
    """Case 2: A[I, J_X] . B[J, K] -> C[I, K]. AllGather A's sharded contraction once, then multiply."""
    def block(x_block, y_full):  # x_block: f32[64, 32], y_full: f32[256, 512]
        x_full = jax.lax.all_gather(x_block, "X", axis=1, tiled=True, to="invarying")  # f32[64, 256]
        return x_full @ y_full  # f32[64, 512], the same on every device

    return jax.shard_map(block, mesh=course.mesh(X=8), in_specs=(P(None, "X"), P()), out_specs=P())(x, y)


def case2_no_sum(x, y):
    """Multiplies its columns of A by the matching rows of B, and stops: a partial sum, not C."""
    return smap(lambda a, b: a @ own_block(b, "X"), X8, (P(None, "X"), P()), P(), check_vma=False)(x, y)


def case2_partial_sums(x, y):
    return smap(lambda a, b: jax.lax.psum(a @ own_block(b, "X"), "X"), X8, (P(None, "X"), P()), P())(x, y)


# Case 3 (replicated result), on a 2 x 4 mesh: A[I_X, J_Y] . B[J_Y, K] -> C[I_X, K] via AllReduce over Y.
MESH_2D = (("X", 2), ("Y", 4))


def case3_allreduce(x, y):
    """Case 3 on a 2 x 4 mesh: A[I_X, J_Y] . B[J_Y, K] -> C[I_X, K]. Multiply the blocks, then AllReduce
    the partial sums over Y."""
    def block(x_block, y_block):  # x_block: f32[32, 64], y_block: f32[64, 128]
        partial = x_block @ y_block  # f32[32, 128]: C[I_X, K]{U_Y}
        return jax.lax.psum(partial, "Y")  # summed over the 4 devices of this Y ring

    mesh = course.mesh(X=2, Y=4)
    return jax.shard_map(block, mesh=mesh, in_specs=(P("X", "Y"), P("Y", None)), out_specs=P("X", None))(x, y)


def case3_forgets_sum(x, y):
    return smap(lambda a, b: a @ b, MESH_2D, (P("X", "Y"), P("Y", None)), P("X", None), check_vma=False)(x, y)


def case3_gathers_both(x, y):
    def block(a, b):
        return (jax.lax.all_gather(a, "Y", axis=1, tiled=True, to="invarying")
                @ jax.lax.all_gather(b, "Y", axis=0, tiled=True, to="invarying"))
    return smap(block, MESH_2D, (P("X", "Y"), P("Y", None)), P("X", None))(x, y)


# Case 3 (sharded result): A[I, J_X] . B[J_X, K] -> C[I_X, K] via ReduceScatter.
def case3_reducescatter(x, y):
    """Case 3, sharded result: A[I, J_X] . B[J_X, K] -> C[I_X, K]. Multiply the blocks, then ReduceScatter
    the partial sums so that each device keeps its rows of C."""
    def block(x_block, y_block):  # f32[64, 32] @ f32[32, 128] -> f32[64, 128] partial sums
        return jax.lax.psum_scatter(x_block @ y_block, "X", scatter_dimension=0, tiled=True)  # f32[8, 128]

    return jax.shard_map(block, mesh=course.mesh(X=8), in_specs=(P(None, "X"), P("X", None)),
                         out_specs=P("X", None))(x, y)


def case3_scatters_columns(x, y):
    return smap(lambda a, b: jax.lax.psum_scatter(a @ b, "X", scatter_dimension=1, tiled=True), X8,
                (P(None, "X"), P("X", None)), P("X", None))(x, y)


def case3_reduces_then_slices(x, y):
    return smap(lambda a, b: own_block(jax.lax.psum(a @ b, "X"), "X"), X8, (P(None, "X"), P("X", None)),
                P("X", None))(x, y)


# Case 4: A[I_X, J] . B[J, K_X] -> C[I_X, K]: gather one operand (here B) first.
def case4(x, y):
    """Case 4: A[I_X, J] . B[J, K_X] -> C[I_X, K]. Both split X over a non-contracting dimension: gather
    one operand (B) and keep A's rows."""
    def block(x_block, y_block):  # x_block: f32[8, 256], y_block: f32[256, 16]
        y_full = jax.lax.all_gather(y_block, "X", axis=1, tiled=True)  # f32[256, 128]
        return x_block @ y_full  # f32[8, 128]

    return jax.shard_map(block, mesh=course.mesh(X=8), in_specs=(P("X", None), P(None, "X")),
                         out_specs=P("X", None))(x, y)


def case4_local_only(x, y):
    return smap(lambda a, b: a @ b, X8, (P("X", None), P(None, "X")), P("X", None))(x, y)


def case4_gathers_both(x, y):
    def block(a, b):
        full = jax.lax.all_gather(a, "X", axis=0, tiled=True) @ jax.lax.all_gather(b, "X", axis=1, tiled=True)
        return own_block(full, "X")
    return smap(block, X8, (P("X", None), P(None, "X")), P("X", None))(x, y)


# Q9: A[N, M_X] . B[M, K] with B replicated: slice B locally, multiply, ReduceScatter to C[N_X, K].
def q9_partial_sums(x, y):
    """Q9: A[N, M_X] . B[M, K] (B replicated) -> C[N_X, K]. Take the rows of B that meet this device's
    columns of A (a local slice), multiply, and ReduceScatter the partial sums."""
    def block(x_block, y_full):  # x_block: f32[64, 32]; y_full: f32[256, 128] on every device
        rows = y_full.shape[0] // jax.lax.axis_size("X")
        y_block = jax.lax.dynamic_slice_in_dim(y_full, jax.lax.axis_index("X") * rows, rows, axis=0)  # f32[32, 128]
        return jax.lax.psum_scatter(x_block @ y_block, "X", scatter_dimension=0, tiled=True)  # f32[8, 128]

    return jax.shard_map(block, mesh=course.mesh(X=8), in_specs=(P(None, "X"), P()), out_specs=P("X", None))(x, y)


def q9_first_block_everywhere(x, y):
    return smap(lambda a, b: jax.lax.psum_scatter(a @ b[:32], "X", scatter_dimension=0, tiled=True), X8,
                (P(None, "X"), P()), P("X", None))(x, y)


def q9_gathers_a(x, y):
    return smap(lambda a, b: own_block(jax.lax.all_gather(a, "X", axis=1, tiled=True) @ b, "X"), X8,
                (P(None, "X"), P()), P("X", None))(x, y)


# CX3: ring collectives from ppermute. x f32[64, 32] @ P('X', None): blocks of [8, 32].
def ring_allgather(x):
    """N-1 steps; at each, every device passes the block it received last to its right neighbour."""
    def block(x_block):  # f32[8, 32]
        n, i = jax.lax.axis_size("X"), jax.lax.axis_index("X")
        blocks = jnp.zeros((n, *x_block.shape), x_block.dtype).at[i].set(x_block)  # f32[8, 8, 32]

        def step(s, carry):
            blocks, passing = carry
            passing = jax.lax.ppermute(passing, "X", ring(n))  # now the block of device i - s - 1
            return blocks.at[(i - s - 1) % n].set(passing), passing

        blocks, _ = jax.lax.fori_loop(0, n - 1, step, (blocks, x_block))
        return blocks.reshape(-1, x_block.shape[1])  # f32[64, 32]

    # The result is the same on every device, but ppermute's output is "varying" to JAX's checker.
    return jax.shard_map(block, mesh=course.mesh(X=8), in_specs=P("X", None), out_specs=P(), check_vma=False)(x)


def ring_allgather_arrival_order(x):
    """Stacks blocks in the order they arrive, not by the device they came from."""
    def block(x_block):
        got = [x_block]
        for _ in range(7):
            got.append(jax.lax.ppermute(got[-1], "X", ring(8)))
        return jnp.concatenate(got)
    return smap(block, X8, (P("X", None),), P(), check_vma=False)(x)


def ring_allgather_library(x):
    return smap(lambda b: jax.lax.all_gather(b, "X", axis=0, tiled=True, to="invarying"), X8, (P("X", None),), P())(x)


# Ring ReduceScatter: partials f32[512, 32] @ P('X', None): each device holds a full-size f32[64, 32]
# partial sum (view (8, 64, 32)); the result f32[64, 32] @ P('X', None) is their sum, one block each.
RS_SHAPE, RS_VIEW = (512, 32), (8, 64, 32)


def scatter_spec(permutes: int) -> ProgramSpec:
    """A ReduceScatter from ``permutes`` collective-permutes and nothing else."""
    return ProgramSpec(mesh=X8, einsum="kab->ab", operands=(Operand(RS_SHAPE, ("X", None), view=RS_VIEW),),
                       out_spec=("X", None), collectives={"collective-permute": permutes})


def ring_reducescatter(partials):
    """N-1 steps; each device adds its own chunk to the running sum it received and passes it on."""
    def block(partial):  # f32[64, 32]: this device's partial sum
        n, i = jax.lax.axis_size("X"), jax.lax.axis_index("X")
        chunks = partial.reshape(n, -1, partial.shape[1])  # f32[8, 8, 32]

        def step(s, running):  # running: the sum so far of chunk (i - s - 1) % n
            running = jax.lax.ppermute(running, "X", ring(n))
            return running + chunks[(i - s - 2) % n]

        return jax.lax.fori_loop(0, n - 1, step, chunks[(i - 1) % n])  # chunk i, complete: f32[8, 32]

    return jax.shard_map(block, mesh=course.mesh(X=8), in_specs=P("X", None), out_specs=P("X", None))(partials)


def ring_reducescatter_no_add(partials):
    """Passes the chunks round but adds only its own at the end."""
    def block(partial):
        n, i = jax.lax.axis_size("X"), jax.lax.axis_index("X")
        chunks = partial.reshape(n, -1, partial.shape[1])
        running = jax.lax.fori_loop(0, n - 1, lambda s, r: jax.lax.ppermute(r, "X", ring(n)), chunks[(i - 1) % n])
        return running + chunks[i]
    return smap(block, X8, (P("X", None),), P("X", None))(partials)


def ring_reducescatter_library(partials):
    return smap(lambda p: jax.lax.psum_scatter(p, "X", scatter_dimension=0, tiled=True), X8, (P("X", None),),
                P("X", None))(partials)


# Bidirectional rings: split every block in two halves and run one ring each way round at once, so
# both directions of every link carry half the data: 2 x (N-1) ppermutes of half-size blocks.
def bidi_allgather(x):
    """The ring AllGather with each block cut in two halves, one ring each way round at once: both
    directions of every link carry half the data, 2 x (N-1) ppermutes of half-size blocks."""
    def block(x_block):  # f32[8, 32]
        n, i = jax.lax.axis_size("X"), jax.lax.axis_index("X")
        halves = x_block.reshape(2, -1, x_block.shape[1])  # f32[2, 4, 32]: [0] goes right, [1] goes left
        blocks = jnp.zeros((n, *halves.shape), x_block.dtype).at[i].set(halves)  # f32[8, 2, 4, 32]

        def step(s, carry):
            blocks, right, left = carry
            right = jax.lax.ppermute(right, "X", ring(n, 1))  # first half of device i - s - 1
            left = jax.lax.ppermute(left, "X", ring(n, -1))  # second half of device i + s + 1
            blocks = blocks.at[(i - s - 1) % n, 0].set(right).at[(i + s + 1) % n, 1].set(left)
            return blocks, right, left

        blocks, _, _ = jax.lax.fori_loop(0, n - 1, step, (blocks, halves[0], halves[1]))
        return blocks.reshape(-1, x_block.shape[1])  # f32[64, 32]

    return jax.shard_map(block, mesh=course.mesh(X=8), in_specs=P("X", None), out_specs=P(), check_vma=False)(x)


def bidi_allgather_swapped(x):
    """The halves that went left are put back where the right-going halves belong."""
    def block(x_block):
        n, i = jax.lax.axis_size("X"), jax.lax.axis_index("X")
        halves = x_block.reshape(2, -1, x_block.shape[1])
        blocks = jnp.zeros((n, *halves.shape), x_block.dtype).at[i].set(halves)

        def step(s, carry):
            blocks, right, left = carry
            right = jax.lax.ppermute(right, "X", ring(n, 1))
            left = jax.lax.ppermute(left, "X", ring(n, -1))
            return blocks.at[(i - s - 1) % n, 1].set(right).at[(i + s + 1) % n, 0].set(left), right, left
        blocks, _, _ = jax.lax.fori_loop(0, n - 1, step, (blocks, halves[0], halves[1]))
        return blocks.reshape(-1, x_block.shape[1])
    return smap(block, X8, (P("X", None),), P(), check_vma=False)(x)


def bidi_reducescatter(partials):
    """The ring ReduceScatter with each chunk cut in two halves, one ring each way round at once."""
    def block(partial):  # f32[64, 32]
        n, i = jax.lax.axis_size("X"), jax.lax.axis_index("X")
        chunks = partial.reshape(n, 2, -1, partial.shape[1])  # f32[8, 2, 4, 32]: chunk, half, rows, columns

        def step(s, carry):  # right: half 0 of chunk (i - s - 1); left: half 1 of chunk (i + s + 1)
            right, left = carry
            right = jax.lax.ppermute(right, "X", ring(n, 1)) + chunks[(i - s - 2) % n, 0]
            left = jax.lax.ppermute(left, "X", ring(n, -1)) + chunks[(i + s + 2) % n, 1]
            return right, left

        right, left = jax.lax.fori_loop(0, n - 1, step, (chunks[(i - 1) % n, 0], chunks[(i + 1) % n, 1]))
        return jnp.concatenate([right, left])  # chunk i, complete: f32[8, 32]

    return jax.shard_map(block, mesh=course.mesh(X=8), in_specs=P("X", None), out_specs=P("X", None))(partials)


def bidi_reducescatter_wrong_chunk(partials):
    """The left-going ring adds the chunk of the device on the wrong side."""
    def block(partial):
        n, i = jax.lax.axis_size("X"), jax.lax.axis_index("X")
        chunks = partial.reshape(n, 2, -1, partial.shape[1])

        def step(s, carry):
            right, left = carry
            right = jax.lax.ppermute(right, "X", ring(n, 1)) + chunks[(i - s - 2) % n, 0]
            left = jax.lax.ppermute(left, "X", ring(n, -1)) + chunks[(i - s - 2) % n, 1]
            return right, left
        right, left = jax.lax.fori_loop(0, n - 1, step, (chunks[(i - 1) % n, 0], chunks[(i + 1) % n, 1]))
        return jnp.concatenate([right, left])
    return smap(block, X8, (P("X", None),), P("X", None))(partials)


# CX4: AllToAll moves the subscript: [I_X, J] -> [I, J_X].
def alltoall(x):
    """Reshard [I_X, J] -> [I, J_X] with one AllToAll: the subscript moves from I to J."""
    def block(x_block):  # f32[8, 32] -> f32[64, 4]: cut the columns in 8, glue the rows
        return jax.lax.all_to_all(x_block, "X", split_axis=1, concat_axis=0, tiled=True)

    return jax.shard_map(block, mesh=course.mesh(X=8), in_specs=P("X", None), out_specs=P(None, "X"))(x)


def alltoall_axes_swapped(x):
    return smap(lambda b: jax.lax.all_to_all(b, "X", split_axis=0, concat_axis=1, tiled=True), X8,
                (P("X", None),), P(None, "X"))(x)


def alltoall_by_gathering(x):
    def block(b):
        full = jax.lax.all_gather(b, "X", axis=0, tiled=True)  # f32[64, 32]
        cols = full.shape[1] // jax.lax.axis_size("X")
        return jax.lax.dynamic_slice_in_dim(full, jax.lax.axis_index("X") * cols, cols, axis=1)
    return smap(block, X8, (P("X", None),), P(None, "X"))(x)


# CX5(a): the gradient of an AllGather is a ReduceScatter. Loss: sum over devices d of
# sum(y_d * gather(x)**2) / 2, with y_d device d's own weights f32[64, 32]; d loss / dx = x * sum_d y_d.
def gather_gradient(x, y):
    """d loss / dx for loss = sum over devices d of sum(y_d * all_gather(x)**2) / 2, which is x * sum_d y_d.
    The backward pass of the all_gather is a ReduceScatter, which JAX writes for us."""
    def share(x_block, y_block):  # x_block: f32[8, 32]; y_block: f32[64, 32], this device's weights
        x_full = jax.lax.all_gather(x_block, "X", axis=0, tiled=True)  # f32[64, 32]
        return (y_block * x_full**2 / 2).sum()[None]  # f32[1]: this device's share of the loss

    shares = jax.shard_map(share, mesh=course.mesh(X=8), in_specs=(P("X", None), P("X", None)), out_specs=P("X"))
    return jax.grad(lambda x: shares(x, y).sum())(x)


def gradient_forgets_other_devices(x, y):
    """Differentiates only this device's own term: x * y_d for the device's own rows."""
    def block(x_block, y_block):
        return x_block * own_block(y_block, "X")
    return smap(block, X8, (P("X", None), P("X", None)), P("X", None))(x, y)


def gradient_by_hand_allreduce(x, y):
    """The right numbers, by summing everyone's weights and keeping one block: an AllReduce."""
    return smap(lambda a, b: a * own_block(jax.lax.psum(b, "X"), "X"), X8, (P("X", None), P("X", None)),
                P("X", None))(x, y)


# --- the questions -------------------------------------------------------------------------------------------

XY_IN, YK_IN = Operand((64, 256), (None, "X")), Operand((256, 128), ("X", None))

CHAPTER = Chapter("ch03_sharding", "Sharded matrices and collectives", (
    # 1. Notation and bookkeeping.
    Number(qid="ch03-e1-a-bytes", points=1, section=NOTATION,
           prompt="Bytes of A = bf16[8, 2048] @ P('X', 'Y') on each device of a (4, 2) mesh.",
           reference=E1_A_BYTES, unit="B", tolerance=THREE_FIGURES,
           slips=(Slip(2 * E1_A_BYTES, "ratio:2", "the mesh is (4, 2): X has 4 devices."),
                  Slip(E1_A_BYTES / 2, "ratio:1/2", "bf16 takes 2 bytes per element."))),
    Number(qid="ch03-e1-b-bytes", points=1, section=NOTATION,
           prompt="Bytes of B = bf16[2048, 8192] @ P(None, 'Y') on each device of the same mesh.",
           reference=E1_B_BYTES, unit="B", tolerance=THREE_FIGURES,
           slips=(Slip(E1_B_BYTES / 4, "ratio:1/4", "B is not split along X: it is replicated there."),)),
    Number(qid="ch03-e2-ways", points=1, section=NOTATION,
           prompt="Into how many pieces is I split in A[I_XY, J] on a mesh {X: 4, Y: 8}?",
           reference=E2_WAYS, exact=True,
           slips=(Slip(E2_MESH["Y"], "ratio:1/4", "I is split over X and then over Y: the sizes multiply."),
                  Slip(E2_MESH["X"], "ratio:1/8"))),
    Number(qid="ch03-e3-fraction", points=1, section=NOTATION,
           prompt="Fraction of A[I_X, J_Y] = [4, 128] held by one device of a 2 x 2 mesh.",
           reference=E3_FRACTION, tolerance=THREE_FIGURES,
           slips=(Slip(2 * E3_FRACTION, "ratio:2", "both dimensions are split."),)),
    Function(qid="ch03-cx1-local-shape", points=2, section=NOTATION,
             prompt="local_shape(global_shape, spec, mesh): the block shape on one device.",
             reference=local_shape, probes=SHAPE_PROBES, draw=random_case, output=Output("number", tolerance=EXACT),
             slips=(Slip(cx1_forgets_flattening, "wrong_elements"),)),
    Function(qid="ch03-cx1-total-bytes", points=2, section=NOTATION,
             prompt="total_bytes(global_shape, bytes_per_element, spec, mesh): bytes summed over all devices.",
             reference=total_bytes, probes=BYTES_PROBES, draw=random_case, output=Output("number", tolerance=EXACT),
             slips=(Slip(cx1_one_copy, "ratio:1/4"),)),
    Number(qid="ch03-pq0-bytes", points=1, section=NOTATION,
           prompt="Bytes per device of fp32[1024, 4096] @ A[I_XY, J] on {X: 8, Y: 2}.",
           reference=PQ0_BYTES, unit="B", tolerance=THREE_FIGURES,
           slips=(Slip(PQ0_BYTES / 2, "ratio:1/2", "fp32 takes 4 bytes per element."),
                  Slip(PQ0_BYTES * 2, "ratio:2", "I is split over both axes: 16 ways."))),
    number("ch03-pq0-time", section=NOTATION, prompt="Seconds to read that block from an H100's HBM.",
           reference=PQ0_SECONDS, unit="s",
           tolerance=Tolerance(rtol=0.055),  # the book divides 1e6 B, not 2**20 B: 294 ns
           slips=(Slip(PQ0_SECONDS * 1e9, "unit:1000000000"), Slip(PQ0_SECONDS / 2, "ratio:1/2"))),
    Number(qid="ch03-pq1-bytes-per-device", points=1, section=NOTATION,
           prompt="Bytes per device of int8[128, 2048] @ A[I_XY, J] on {X: 2, Y: 8, Z: 2}.",
           reference=PQ1_BYTES, unit="B", tolerance=THREE_FIGURES,
           slips=(Slip(PQ1_BYTES / 2, "ratio:1/2", "Z does not split A: it copies it."),)),
    Number(qid="ch03-pq1-total-bytes", points=1, section=NOTATION,
           prompt="Bytes of that array summed over all 32 devices.",
           reference=PQ1_TOTAL, unit="B", tolerance=THREE_FIGURES,
           slips=(Slip(PQ1_TOTAL / 2, "ratio:1/2", "there are two copies, one per Z coordinate."),)),
    Number(qid="ch03-q1-ratio", points=1, section=PROBLEMS,
           prompt="Total bytes over all chips / bytes of one copy, for A[I_X, J, K] on {X: 4, Y: 8, Z: 2}.",
           reference=Q1_RATIO, tolerance=THREE_FIGURES,
           slips=(Slip(Q1_RATIO / 4, "ratio:1/4", "count copies: every device holds a quarter of the array."),)),
    Formula(qid="ch03-q1-ratio-formula", points=1, section=PROBLEMS,
            prompt="The same ratio for A[I_X, J, ...] on a mesh {X, Y, Z}, in X, Y, Z.",
            reference=Y * Z, symbols="X Y Z", counts="X Y Z",
            slips=(Slip(X * Y * Z, "extra_symbol:X", "A is split along X, not copied."),)),
    # 2. The four matmul cases, with shard_map.
    Program(qid="ch03-cx2-case1-local", points=2, section=CASE1,
            prompt="Case 1: A[I_X, J] . B[J, K] -> C[I_X, K] with no communication.",
            spec=ProgramSpec(mesh=X8, einsum="ij,jk->ik", operands=(Operand((64, 256), ("X", None)),
                                                                    Operand((256, 128), (None, None))),
                             out_spec=("X", None), collectives={}),
            model=case1,
            slips=(Slip(case1_claims_replicated, "wrong_shape"), Slip(case1_gathers_anyway, "collectives:all-gather"))),
    Program(qid="ch03-cx2-case2-allgather", points=3, section=CASE2,
            prompt="Case 2: A[I, J_X] . B[J, K] -> C[I, K] (replicated), gathering A once.",
            spec=ProgramSpec(mesh=X8, einsum="ij,jk->ik", operands=(XY_IN, Operand((256, CASE2_K), (None, None))),
                             out_spec=(), collectives={"all-gather": 1}),
            model=case2,
            slips=(Slip(case2_no_sum, "partial_sum:X"), Slip(case2_partial_sums, "collectives:all-reduce"))),
    Program(qid="ch03-cx2-case3-allreduce", points=3, section=CASE3,
            prompt="Case 3 on a 2 x 4 mesh: A[I_X, J_Y] . B[J_Y, K] -> C[I_X, K] with one AllReduce over Y.",
            spec=ProgramSpec(mesh=MESH_2D, einsum="ij,jk->ik",
                             operands=(Operand((64, 256), ("X", "Y")), Operand((256, 128), ("Y", None))),
                             out_spec=("X", None), collectives={"all-reduce": 1}),
            model=case3_allreduce,
            slips=(Slip(case3_forgets_sum, "partial_sum:Y"), Slip(case3_gathers_both, "collectives:all-gather"))),
    Program(qid="ch03-cx2-case3-reducescatter", points=3, section=CASE3,
            prompt="Case 3, sharded result: A[I, J_X] . B[J_X, K] -> C[I_X, K] with one ReduceScatter.",
            spec=ProgramSpec(mesh=X8, einsum="ij,jk->ik", operands=(XY_IN, YK_IN), out_spec=("X", None),
                             collectives={"reduce-scatter": 1}),
            model=case3_reducescatter,
            slips=(Slip(case3_scatters_columns, "wrong_shape"),
                   Slip(case3_reduces_then_slices, "collectives:all-reduce"))),
    Program(qid="ch03-cx2-case4-gather-one", points=3, section=CASE4,
            prompt="Case 4: A[I_X, J] . B[J, K_X] -> C[I_X, K], gathering only B.",
            spec=ProgramSpec(mesh=X8, einsum="ij,jk->ik",
                             operands=(Operand((64, 256), ("X", None)), Operand((256, 128), (None, "X"))),
                             out_spec=("X", None), collectives={"all-gather": 1}),
            model=case4,
            slips=(Slip(case4_local_only, "wrong_shape"), Slip(case4_gathers_both, "collectives:all-gather"))),
    Program(qid="ch03-q9-partial-sums", points=3, section=PROBLEMS,
            prompt="Q9: A[N, M_X] . B[M, K] (B replicated) -> C[N_X, K]: local partial sums, one ReduceScatter.",
            spec=ProgramSpec(mesh=X8, einsum="ij,jk->ik", operands=(XY_IN, Operand((256, 128), (None, None))),
                             out_spec=("X", None), collectives={"reduce-scatter": 1}),
            model=q9_partial_sums,
            slips=(Slip(q9_first_block_everywhere, "wrong_values"), Slip(q9_gathers_a, "collectives:all-gather"))),
    Formula(qid="ch03-q9-ratio", points=1, section=PROBLEMS,
            prompt="Bytes moved by AllGather-A-then-multiply over bytes moved by multiply-then-ReduceScatter.",
            reference=M / K, symbols="N M K",
            slips=(Slip(K / M, "not_equivalent", "A is N x M; the output is N x K."),)),
    # 3. Collectives and what they cost.
    Formula(qid="ch03-cx5-t-allgather", points=1, section=ALLGATHER,
            prompt="Time of a bandwidth-bound AllGather of V bytes (whole array) on a ring with wraparound "
                   "(large N; the exact (N-1)/N form is right too).",
            reference=T_ALLGATHER, symbols="V W N", counts="N", limit="N",
            slips=(Slip(2 * V / W, "ratio:2", "W counts both directions, and the ring uses both."),
                   Slip(V / (N * W), "extra_symbol:N", "each device receives almost the whole array."))),
    Formula(qid="ch03-cx5-t-allreduce", points=1, section=ALLGATHER,
            prompt="Time of a bandwidth-bound AllReduce of V bytes on the same ring (large N; the exact form is "
                   "right too).",
            reference=T_ALLREDUCE, symbols="V W N", counts="N", limit="N",
            slips=(Slip(V / W, "ratio:1/2", "an AllReduce is a ReduceScatter followed by an AllGather."),)),
    Formula(qid="ch03-cx5-t-alltoall", points=1, section=ALLTOALL,
            prompt="Time of a bandwidth-bound AllToAll of V bytes (whole array) on the same ring.",
            reference=T_ALLTOALL, symbols="V W N", counts="N",
            slips=(Slip(V / (2 * W), "ratio:2", "that is the one-direction ring; both directions halve it."),)),
    Formula(qid="ch03-cx5-t-line", points=1, section=ALLGATHER,
            prompt="Time of that AllGather when the axis has no wraparound (a line of N devices).",
            reference=T_LINE, symbols="V W N", counts="N",
            slips=(Slip(2 * V / W, "missing_symbol:N", "count the N-1 shards exactly, as in PQ2."),
                   Slip((N - 1) * V / (N * W), "ratio:1/2", "a line uses each link in one direction only."))),
    Number(qid="ch03-e4-latency-bytes", points=1, section=ALLGATHER,
           prompt="Bytes per hop below which a TPU v5e link is latency-bound (1 us per hop, one direction).",
           reference=E4_BYTES, unit="B", tolerance=ONE_PERCENT,
           slips=(Slip(2 * E4_BYTES, "ratio:2", "one hop sends in one direction: use the one-way rate."),)),
    Function(qid="ch03-cx5-collective-time", points=3, section=ALLGATHER,
             prompt="collective_time(op, V, W, N, axes, wrap, hop_s): Part 3's time for one collective.",
             reference=collective_time, probes=CX5_PROBES, output=Output("number", unit="s",
                                                                         tolerance=Tolerance(rtol=0.001)),
             slips=(Slip(cx5_ignores_latency, "not_equal"),)),
    number("ch03-pq2-ideal", section=ALLGATHER,
           prompt="PQ2(a): AllGather_Y of bf16[2048, 8192] on v5e {X: 8, Y: 4}, ideal ring with wraparound.",
           reference=PQ2_IDEAL, unit="s",
           slips=(Slip(2 * PQ2_IDEAL, "ratio:2"), Slip(PQ2_IDEAL * 1e6, "unit:1000000"))),
    number("ch03-pq2-nowrap", section=ALLGATHER,
           prompt="PQ2(a) again, for the 4-long v5e axis as it is: without wraparound.", reference=PQ2_NOWRAP, unit="s",
           tolerance=Tolerance(rtol=0.03), slips=(Slip(PQ2_IDEAL, "ratio:2/3", "this axis has no wraparound link."),)),
    number("ch03-pq2-hop-time", section=ALLGATHER,
           prompt="PQ2(b): seconds for one shard of bf16[256, 256] / 4 to cross one v5e link one way.",
           reference=PQ2_HOP, unit="s", tolerance=Tolerance(rtol=0.05), slips=(Slip(PQ2_HOP / 2, "ratio:1/2"),)),
    number("ch03-pq2-small", section=ALLGATHER,
           prompt="PQ2(b): the whole AllGather of bf16[256, 256] over the 4-long axis (latency-bound).",
           reference=PQ2_SMALL, unit="s", tolerance=Tolerance(low=2e-6, high=4e-6),
           slips=(Slip(8e-6, "ratio:8/3", "8 us was measured; the model counts hops."),)),
    number("ch03-q2-gather-x", section=PROBLEMS,
           prompt="Q2(1): AllGather_X([B_X, D_Y]) on a v4p 4x4x4, B = 1024, D = 4096, bf16.", reference=Q2_GATHER_X,
           unit="s", slips=(Slip(4 * Q2_GATHER_X, "ratio:4", "only D_Y's share is gathered: divide by |Y|."),)),
    number("ch03-q2-gather-xy", section=PROBLEMS, prompt="Q2(2): AllGather_XY([B_X, D_Y]) on the same cube.",
           reference=Q2_GATHER_XY, unit="s",
           slips=(Slip(2 * Q2_GATHER_XY, "ratio:2", "two axes gather at once, on their own links."),)),
    number("ch03-q2-allreduce-z", section=PROBLEMS, prompt="Q2(3): AllReduce_Z([B_X, D_Y]{U_Z}) on the same cube.",
           reference=Q2_ALLREDUCE_Z, unit="s",
           slips=(Slip(Q2_V0_ALLREDUCE, "ratio:16", "each device holds only a [B/4, D/4] block."),)),
    number("ch03-q2-reshard-x", section=PROBLEMS,
           prompt="Q2(1) after resharding to [B_XZ, D_Y] locally, so Z's links help the gather.",
           reference=Q2_RESHARD_X, unit="s", slips=(Slip(Q2_GATHER_X, "ratio:2"),)),
    number("ch03-q2-reshard-xy", section=PROBLEMS,
           prompt="Q2(2) after the same reshard: gather over X, Y and Z at once.", reference=Q2_RESHARD_XY, unit="s",
           slips=(Slip(Q2_GATHER_XY, "ratio:3/2"),)),
    number("ch03-q3-latency", section=PROBLEMS, prompt="Q3: AllGather_X([B_X]) of bf16[128] on a v4p 4x4x4.",
           reference=Q3_TIME, unit="s", tolerance=Tolerance(low=1.5e-6, high=3e-6),
           slips=(Slip(4 * HOP_S, "ratio:3/2", "with wraparound the farthest of 4 devices is 2 hops away."),)),
    Formula(qid="ch03-q10-allgather-link", points=1, section=PROBLEMS,
            prompt="Q10(1): scalars crossing one link in a one-way ring AllGather of an N x N matrix over D devices.",
            reference=Q10_ALLGATHER, symbols="N D", counts="D",
            slips=(Slip(N**2, "missing_symbol:D", "a link never carries the block of the device it leads to."),)),
    Formula(qid="ch03-q10-alltoall-link", points=1, section=PROBLEMS,
            prompt="Q10(2): scalars crossing one link in a one-way ring AllToAll of the same matrix.",
            reference=Q10_ALLTOALL, symbols="N D", counts="D",
            slips=(Slip(Q10_ALLGATHER, "ratio:2", "a block only travels as far as its destination."),)),
    Number(qid="ch03-q10-ratio-uni", points=1, section=PROBLEMS,
           prompt="Q10(3): AllToAll / AllGather traffic per link with one-way links.",
           reference=float(sp.limit(Q10_ALLTOALL / Q10_ALLGATHER, D, sp.oo)), tolerance=THREE_FIGURES,
           slips=(Slip(0.25, "ratio:1/2", "that is with links used both ways."),)),
    Number(qid="ch03-q10-ratio-bidi", points=1, section=PROBLEMS,
           prompt="Q10(6): the same ratio when links are used in both directions.",
           reference=0.25, tolerance=THREE_FIGURES,
           slips=(Slip(0.5, "ratio:2", "both directions halve the AllGather but quarter the AllToAll."),)),
    Function(qid="ch03-e5-matrices", points=2, section=REDUCESCATTER,
             prompt="gather_scatter_matrices(n, p): the AllGather and ReduceScatter matrices for p shards of n.",
             reference=gather_scatter_reference, model=gather_scatter_matrices, probes=E5_PROBES, draw=draw_e5,
             output=(Output("number", tolerance=EXACT), Output("number", tolerance=EXACT)),
             slips=(Slip(e5_interleaved, "wrong_elements"),)),
    # Ring collectives from ppermute, AllToAll, and the gradient of a gather.
    Program(qid="ch03-cx3-ring-allgather", points=3, section=ALLGATHER,
            prompt="AllGather f32[64, 32] @ P('X', None) on a one-way ring: only ppermute, N-1 steps.",
            spec=reshard_spec((), {"collective-permute": 7}),
            model=ring_allgather,
            slips=(Slip(ring_allgather_arrival_order, "misplaced_blocks:X"),
                   Slip(ring_allgather_library, "collectives:all-gather"))),
    Program(qid="ch03-cx3-ring-reducescatter", points=3, section=ALLGATHER,
            prompt="ReduceScatter 8 partial sums f32[64, 32] to f32[64, 32] @ P('X', None): one-way ring, ppermute.",
            spec=scatter_spec(7),
            model=ring_reducescatter,
            slips=(Slip(ring_reducescatter_no_add, "wrong_values"),
                   Slip(ring_reducescatter_library, "collectives:reduce-scatter"))),
    Program(qid="ch03-cx3-bidi-allgather", points=2, section=ALLGATHER,
            prompt="The ring AllGather with half of each block going each way round (both link directions).",
            spec=reshard_spec((), {"collective-permute": 14}),
            model=bidi_allgather,
            slips=(Slip(bidi_allgather_swapped, "wrong_values"),
                   Slip(ring_allgather, "collectives:collective-permute"))),
    Program(qid="ch03-cx3-bidi-reducescatter", points=2, section=ALLGATHER,
            prompt="The ring ReduceScatter with half of each chunk going each way round.",
            spec=scatter_spec(14),
            model=bidi_reducescatter,
            slips=(Slip(bidi_reducescatter_wrong_chunk, "wrong_values"),
                   Slip(ring_reducescatter, "collectives:collective-permute"))),
    Program(qid="ch03-cx4-alltoall", points=2, section=ALLTOALL,
            prompt="Reshard f32[64, 32] from [I_X, J] to [I, J_X] with one AllToAll.",
            spec=reshard_spec((None, "X"), {"all-to-all": 1}),
            model=alltoall,
            slips=(Slip(alltoall_axes_swapped, "wrong_shape"), Slip(alltoall_by_gathering, "collectives:all-gather"))),
    Program(qid="ch03-cx5-grad-transpose", points=3, section=REDUCESCATTER,
            prompt="jax.grad of a loss built on all_gather: x * sum_d y_d, whose backward pass is a ReduceScatter.",
            spec=ProgramSpec(mesh=X8, einsum="ab,kab->ab",
                             operands=(Operand((64, 32), ("X", None)), Operand(RS_SHAPE, ("X", None), view=RS_VIEW)),
                             out_spec=("X", None), collectives={"all-gather": 1, "reduce-scatter": 1}),
            model=gather_gradient,
            slips=(Slip(gradient_forgets_other_devices, "partial_sum:X"),
                   Slip(gradient_by_hand_allreduce, "collectives:all-reduce"))),
    # 4. Choosing a strategy.
    Formula(qid="ch03-q4-t-s1", points=1, section=PROBLEMS,
            prompt="Q4 strategy 1 (AllGather Y[D_X, F], then multiply): lower bound on its time.",
            reference=T_S1, symbols="B D F X C W", counts="X",
            slips=(Slip(sp.Max(2 * B * D * F / (X * C), 2 * D * F / W), "extra_symbol:X",
                        "after the gather every device does the whole matmul."),)),
    Formula(qid="ch03-q4-t-s2", points=1, section=PROBLEMS,
            prompt="Q4 strategy 2 (local partial matmul, then AllReduce): lower bound on its time.",
            reference=T_S2, symbols="B D F X C W", counts="X",
            slips=(Slip(sp.Max(2 * B * D * F / C, 4 * B * F / W), "missing_symbol:X",
                        "each chip multiplies only its 1/X share of the contraction."),)),
    Number(qid="ch03-q4-b-threshold", points=1, section=PROBLEMS,
           prompt="Q4 on TPU v5p: the batch below which strategy 1 is communication-bound.",
           reference=Q4_B_THRESHOLD, tolerance=ONE_PERCENT,
           slips=(Slip(Q4_B_THRESHOLD / 2, "ratio:1/2", "W is the bidirectional bandwidth."),)),
    Formula(qid="ch03-q4-d-small-batch", points=1, section=PROBLEMS,
            prompt="Q4 when both strategies are communication-bound: strategy 2 wins for D above what?",
            reference=2 * B, symbols="B D F X C W", counts="X",
            slips=(Slip(B, "ratio:1/2", "the AllReduce moves 4BF bytes, the gather 2DF."),)),
    Number(qid="ch03-q4-d-threshold", points=1, section=PROBLEMS,
           prompt="Q4 on TPU v5p with B above that batch: strategy 2 wins for D above what?",
           reference=Q4_D_THRESHOLD, tolerance=ONE_PERCENT,
           slips=(Slip(Q4_B_THRESHOLD, "ratio:1/2", "compare 2BDF/C with 4BF/W."),)),
    Formula(qid="ch03-q5-flops", points=1, section=PROBLEMS,
            prompt="Q5: FLOPs per chip of A[I, J] . B[J, K] on a v4p 4x4x4 with one operand dimension split 64 ways.",
            reference=Q5_FLOPS, symbols="I J K W",
            slips=(Slip(2 * I * J * K / 16, "ratio:4", "all 64 chips share the work, not one 4x4 face."),)),
    Formula(qid="ch03-q5-comm-gather", points=1, section=PROBLEMS,
            prompt="Q5: time to AllGather the bf16 result C[I_XYZ, K] over all three axes at once.",
            reference=Q5_GATHER, symbols="I J K W",
            slips=(Slip(BF16 * I * K / W, "ratio:3", "three axes gather at once, each on its own links."),)),
    Formula(qid="ch03-q5-comm-allreduce", points=1, section=PROBLEMS,
            prompt="Q5: time to AllReduce bf16 partial sums C[I, K]{U_XYZ} over all three axes.",
            reference=Q5_ALLREDUCE, symbols="I J K W",
            slips=(Slip(Q5_GATHER, "ratio:1/2", "an AllReduce costs two gathers' worth."),)),
    Choice(qid="ch03-q5-best", points=1, section=PROBLEMS,
           prompt="Q5: the lowest-latency way for large I, J, K.",
           reference="split-output", options=("split-output", "split-contraction", "replicate"),
           slips=(Slip("split-contraction", "wrong_option", "its AllReduce moves twice the bytes."),)),
    Choice(qid="ch03-q6-a-collective", points=1, section=PROBLEMS,
           prompt="Q6(a): the collective of A[I_X, J_Y] . B[J_Y, K] -> C[I_X, K] on a v5e 4x4.",
           reference="all-reduce", options=COLLECTIVES,
           slips=(Slip("all-gather", "wrong_option", "the contraction is sharded on both sides: partial sums."),)),
    Number(qid="ch03-q6-a-threshold", points=1, section=PROBLEMS,
           prompt="Q6(a): the J above which it is compute-bound (bidirectional ring, wraparound assumed).",
           reference=Q6_A_J, tolerance=TWO_PERCENT,
           slips=(Slip(Q6_A_J / 2, "ratio:1/2", "an AllReduce costs two gathers' worth."),)),
    Choice(qid="ch03-q6-b-collective", points=1, section=PROBLEMS,
           prompt="Q6(b): the collective of A[I_X, J] . B[J_X, K_Y] -> C[I_X, K_Y].",
           reference="all-gather", options=COLLECTIVES,
           slips=(Slip("all-reduce", "wrong_option", "A is not sharded on J: gather B's J first."),)),
    Number(qid="ch03-q6-b-threshold", points=1, section=PROBLEMS,
           prompt="Q6(b): the I above which it is compute-bound.",
           reference=Q6_B_I, tolerance=TWO_PERCENT,
           slips=(Slip(Q6_B_I * 2, "ratio:2", "the gathered B is bf16[J, K_Y]: 2JK/4 bytes."),)),
    Choice(qid="ch03-q6-c-collective", points=1, section=PROBLEMS,
           prompt="Q6(c): the collective of A[I_X, J] . B[J, K_Y] -> C[I_X, K_Y].",
           reference="none", options=COLLECTIVES,
           slips=(Slip("all-gather", "wrong_option", "the contraction is not sharded at all."),)),
    Number(qid="ch03-q7-weight-bytes", points=1, section=PROBLEMS,
           prompt="Q7: bytes of one bf16 weight matrix [8192, 32768].",
           reference=Q7_WEIGHT, unit="B", tolerance=ONE_PERCENT,
           slips=(Slip(Q7_WEIGHT / 2, "ratio:1/2"),)),
    Choice(qid="ch03-q7-strategy", points=1, section=PROBLEMS,
           prompt="Q7: shard for speed within 300 MB per chip: 'fsdp' or 'tensor' parallel.",
           reference="tensor", options=("fsdp", "tensor"),
           slips=(Slip("fsdp", "wrong_option", "FSDP gathers both full weight matrices at every step."),)),
    Number(qid="ch03-q7-bytes-per-chip", points=1, section=PROBLEMS,
           prompt="Q7: weight bytes per chip with tensor parallelism over all 4 chips.",
           reference=Q7_PER_CHIP, unit="B", tolerance=ONE_PERCENT,
           slips=(Slip(Q7_PER_CHIP / 2, "ratio:1/2", "there are two weight matrices."),)),
    number("ch03-q7-flop-time", section=PROBLEMS,
           prompt="Q7: seconds of matmul per chip for the MLP block (tensor parallel, v5e).", reference=Q7_FLOP_TIME,
           unit="s", slips=(Slip(Q7_FLOP_TIME * 4, "ratio:4", "each chip does a quarter."),)),
    number("ch03-q7-comm-time", section=PROBLEMS,
           prompt="Q7: seconds for the AllGather of In[B, D_XY] over both axes (wraparound assumed).",
           reference=Q7_COMM, unit="s", slips=(Slip(Q7_COMM * 2, "ratio:2", "two axes gather at once."),)),
))
