"""Chapter 3, Sharded matrices: every graded question of the chapter, as records with references.

Book: Part 3 "Sharded Matrices and How to Multiply Them", https://jax-ml.github.io/scaling-book/sharding/
Numbers are computed from ``course.hardware`` (never typed in); where the book prints a rounded or
differently-based value, the tolerance admits it and ``BOOK`` records it for the tests. Labels follow
the syllabus: E1-E5 worked examples, PQ0-PQ2 pop quizzes, Q1-Q10 questions; the coding exercises are
CX1-CX7 in the notebook's order (the syllabus's CX3 is CX4 here, its CX4 is CX6, and the parts of its
CX5 are CX3, the cost formulas, CX5, the calculator, and CX7, the gradient of a gather).

Most exercises are settings (``vary`` below): each student is dealt a mesh, a chip or sizes, the book's
first, and the records are built from them.

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
from course.symbols import B, C, D, F, I, J, K, M, N, V, W, X, Y, Z
from solutions._kit import *  # noqa: F403 (the authoring vocabulary: solutions/_kit.py)
from solutions._kit import P

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


def draw_shape(rng: random.Random, probe: dict) -> dict:
    """CX1's grading-time cases: ``random_case``'s, three in four with a dimension split over several mesh axes at
    once (a flattened subscript, I_XY), since reading only its first axis is right wherever there is none (it
    failed 1 to 8 of a student's 16 cases); the others without one."""
    flattened = rng.random() < 0.75
    while True:
        case = random_case(rng, probe)
        if any(len(axes) > 1 for axes in case["spec"]) == flattened:
            return case


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



# --- collective costs (CX3, E4, CX5, PQ2, Q2, Q3) -----------------------------------------------------
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


def cx5_exact_ring(op, V, W, N, axes=1, wrap=True, hop_s=HOP_S):
    """Keeps the ring's (N-1)/N factor of CX3's exact forms, where the question uses the large-N forms."""
    exact = 1 if op == "all-to-all" else (N - 1) / N
    return max(collective_time(op, V, W, N, axes, wrap, 0.0) * exact,
               collective_time(op, 0.0, W, N, axes, wrap, hop_s))


W_V5E, W_V4P = V5E.ici_bidirectional_bytes_per_s, V4P.ici_bidirectional_bytes_per_s

# The problems' ring times (PQ2, Q2, Q6, Q7) use CX3's large-N forms, as CX5 does; CX3 calls the exact
# (N-1)/N form right too, so each prompt says which one it asks for, and the exact form gets CX5's hint.
LARGE_N = "large-N form, without (N-1)/N"
EXACT_RING_HINT = "the question uses the large-N form of the ring time: drop the (N-1)/N factor."


def wrong_axis(value: float, reference: float, tolerance: Tolerance, hint: str) -> tuple[Slip, ...]:
    """The slip of a 2-D mesh's other axis read for the one a collective runs over, where the two differ."""
    return () if tolerance.accepts(reference, value) else (Slip(value, slip_code(value, reference, tolerance), hint),)


def exact_ring_slips(reference: float, *rings: int, tolerance: Tolerance = TWO_PERCENT) -> tuple[Slip, ...]:
    """The exact form of a large-N ring time (or of a threshold that scales with one): ``reference`` times
    (N-1)/N for each ring length N a student may read it with (one axis, or every device the collective
    spans), where ``tolerance`` refuses it, each with its code at this variant's N."""
    slips = []
    for n in sorted(set(rings)):
        exact = reference * (n - 1) / n
        if not tolerance.accepts(reference, exact):
            slips.append(Slip(exact, slip_code(exact, reference, tolerance), EXACT_RING_HINT))
    return tuple(slips)


# The book's PQ2 (a v5e axis of 4, no wraparound) and Q2/Q3 (a full v4p 4x4x4 cube), as CX5's probes.
PQ2_N = 4
PQ2_A_BYTES = BF16 * 2048 * 8192  # the whole gathered array of PQ2(a)
PQ2_B_BYTES = BF16 * 256 * 256  # and of PQ2(b)
Q2_AXIS = 4
Q2_FULL = BF16 * 1024 * 4096  # bf16[B, D] of Q2
Q3_BYTES = BF16 * 128

# Latency bounds 9 of the 17 (the book's PQ2(b) and Q3 among them), bandwidth the others: ignoring the latency is
# wrong in most cases, and each drawn case is in its probe's regime (``like_probes``). Every op, a line and a ring,
# one axis and several, are checked in each regime; the AllToAll's bandwidth on a ring once, where the ring's (N-1)/N
# kept (the exact form, right for an AllToAll on an even ring) is right too. The book's hop of 1 us
# (hw.ICI_HOP_LATENCY_S) in the book's cases and some others; twice and half of it in 3 latency-bound cases each,
# as the grading draws rescale it, so that an answer that writes in the book's 1 us fails a public case.
CX5_PROBES = tuple(dict(op=op, V=float(v), W=w, N=n, axes=k, wrap=wrap, hop_s=HOP_S * hop)
                   for op, v, w, n, k, wrap, hop in (
    ("all-gather", PQ2_A_BYTES, W_V5E, PQ2_N, 1, True, 1),
    ("all-gather", PQ2_A_BYTES, W_V5E, PQ2_N, 1, False, 1),
    ("all-gather", PQ2_B_BYTES, W_V5E, PQ2_N, 1, False, 1),
    ("all-gather", Q2_FULL / Q2_AXIS, W_V4P, Q2_AXIS, 1, True, 1),
    ("all-gather", Q2_FULL, W_V4P, Q2_AXIS, 2, True, 1),
    ("all-reduce", Q2_FULL / Q2_AXIS**2, W_V4P, Q2_AXIS, 1, True, 1),
    ("all-gather", Q2_FULL, W_V4P, Q2_AXIS, 3, True, 1),
    ("all-gather", Q3_BYTES, W_V4P, Q2_AXIS, 1, True, 1),
    ("reduce-scatter", 3e8, V5P.ici_bidirectional_bytes_per_s, 16, 1, True, 1),
    ("all-reduce", 1e5, W_V5E, 8, 1, False, 2),
    ("all-reduce", 2e3, W_V5E, 16, 2, True, 0.5),
    ("all-to-all", 6.4e8, W_V5E, 16, 1, True, 1),
    ("all-to-all", 8e5, W_V5E, 16, 1, False, 2),
    ("all-to-all", 4e4, W_V4P, 8, 3, True, 0.5),
    ("reduce-scatter", 2e5, W_V5E, 8, 2, False, 1),
    ("all-gather", 2e5, V5P.ici_bidirectional_bytes_per_s, 16, 1, True, 2),
    ("all-reduce", 3e5, W_V4P, Q2_AXIS, 3, True, 0.5),
))

# The collective cost formulas, each once (W bidirectional per link, N the axis length).
T_ALLGATHER = V / W
T_ALLREDUCE = 2 * V / W
T_ALLTOALL = V / (4 * W)
# Exactly: each of the N devices sends V/N^2 to each other device by the shorter way round, floor(N^2/4) shard-hops
# of V/N^2 per device, over the N links' 2 directions (W/2 each). V/(4W) on an even ring, V(N^2-1)/(4N^2 W) on an
# odd one.
T_ALLTOALL_EXACT = V * sp.floor(N**2 / 4) / (N**2 * W)
T_LINE = 2 * (N - 1) * V / (N * W)

# --- E5: AllGather and ReduceScatter as matrices --------------------------------------------------------
# State of the system: every device's buffer, stacked device by device. AllGather maps p shards of n
# (p*n numbers) to p full copies (p*p*n); ReduceScatter maps p full-size partials to p reduced shards.


def gather_scatter_reference(n: int, p: int) -> tuple[list[list[float]], list[list[float]]]:
    """E5's reference: the (AllGather, ReduceScatter) matrices in their shapes, [p*p*n, p*n] and [p*n, p*p*n];
    G = kron(ones((p, 1)), I_pn), R = G.T."""
    g = np.kron(np.ones((p, 1)), np.eye(p * n))
    return g.tolist(), g.T.tolist()


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
# The same with the ring's (X-1)/X on the communication terms: the exact times, right too (the prompts ask for the
# times, the book writes their large-X forms).
Q4_EXACT_S1 = sp.Max(2 * B * D * F / C, 2 * D * F / W * (X - 1) / X)
Q4_EXACT_S2 = sp.Max(2 * B * D * F / (X * C), 4 * B * F / W * (X - 1) / X)
RING_SHARE = "the ring's factor is the share of the array a chip receives: it scales the bytes, not the matmul."
Q5_CHIPS = math.prod((4, 4, 4))  # TPU v4p 4x4x4
Q5_FLOPS = 2 * I * J * K / Q5_CHIPS
Q5_GATHER = BF16 * I * K / (3 * W)  # AllGather of bf16 C[I_XYZ, K] over 3 axes at once
Q5_ALLREDUCE = 2 * BF16 * I * K / (3 * W)  # AllReduce of bf16 C[I, K]{U_XYZ} over 3 axes
RING_64 = sp.Rational(Q5_CHIPS - 1, Q5_CHIPS)  # the share of C a chip receives: the exact forms of Q5's times

COLLECTIVES = ("none", "all-gather", "reduce-scatter", "all-reduce", "all-to-all")

Q7_CHIPS, Q7_FREE = 4, 300e6  # TPU v5e 2x2, with 300 MB of HBM free on each chip

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


# --- programs (CX2, CX4, CX6, CX7, Q9): models and typical wrong versions --------------------------------
# Shapes: x f32[I, J] (I rows, J the contraction), y f32[J, K]; 8 devices (X8), or a 2-D mesh of 8 for
# case 3. The book's are I = 64, J = 256, K = 128, on a 2 x 4 mesh; each student is dealt others
# (``cx2`` below), so every model reads its shapes (and case 3 its mesh) from its inputs.

# Case 1: A[I_X, J] . B[J, K] -> C[I_X, K]: nothing to communicate.
def case1(x, y):
    """Case 1: A[I_X, J] . B[J, K] -> C[I_X, K]. B is whole on every device: nothing to communicate."""
    def block(x_block, y_full):  # x_block: f32[I/8, J], y_full: f32[J, K]
        return x_block @ y_full  # f32[I/8, K]: this device's rows of C

    return jax.shard_map(block, mesh=course.mesh(X=8), in_specs=(P("X", None), P()), out_specs=P("X", None))(x, y)


def case1_claims_replicated(x, y):
    return smap(lambda a, b: a @ b, X8, (P("X", None), P()), P(), check_vma=False)(x, y)


def case1_gathers_anyway(x, y):
    return smap(lambda a, b: own_block(jax.lax.all_gather(a, "X", axis=0, tiled=True) @ b, "X"), X8,
                (P("X", None), P()), P("X", None))(x, y)


# Case 2: A[I, J_X] . B[J, K] -> C[I, K]: AllGather the sharded contraction first. K = 2J: wide enough
# that summing [I, K] partial sums moves 4x the bytes of gathering A.
CASE2_WIDEN = 2


def case2(x, y):
    """Case 2: A[I, J_X] . B[J, K] -> C[I, K]. AllGather A's sharded contraction once, then multiply."""
    def block(x_block, y_full):  # x_block: f32[I, J/8], y_full: f32[J, K]
        x_full = jax.lax.all_gather(x_block, "X", axis=1, tiled=True, to="invarying")  # f32[I, J]
        return x_full @ y_full  # f32[I, K], the same on every device

    return jax.shard_map(block, mesh=course.mesh(X=8), in_specs=(P(None, "X"), P()), out_specs=P())(x, y)


def case2_no_sum(x, y):
    """Multiplies its columns of A by the matching rows of B, and stops: a partial sum, not C."""
    return smap(lambda a, b: a @ own_block(b, "X"), X8, (P(None, "X"), P()), P(), check_vma=False)(x, y)


def case2_partial_sums(x, y):
    return smap(lambda a, b: jax.lax.psum(a @ own_block(b, "X"), "X"), X8, (P(None, "X"), P()), P())(x, y)


# Case 3 (replicated result), on a 2-D mesh of 8 ({X: 2, Y: 4} in the book, or {X: 4, Y: 2}):
# A[I_X, J_Y] . B[J_Y, K] -> C[I_X, K] via AllReduce over Y.
def case3_allreduce(x, y):
    """Case 3 on a 2-D mesh: A[I_X, J_Y] . B[J_Y, K] -> C[I_X, K]. Multiply the blocks, then AllReduce
    the partial sums over Y. The mesh is the one the inputs live on, whichever shape it has."""
    def block(x_block, y_block):  # x_block: f32[I/|X|, J/|Y|], y_block: f32[J/|Y|, K]
        partial = x_block @ y_block  # f32[I/|X|, K]: C[I_X, K]{U_Y}
        return jax.lax.psum(partial, "Y")  # summed over the |Y| devices of this Y ring

    mesh = jax.typeof(x).sharding.mesh  # the inputs' mesh: {X: 2, Y: 4} or {X: 4, Y: 2}
    return jax.shard_map(block, mesh=mesh, in_specs=(P("X", "Y"), P("Y", None)), out_specs=P("X", None))(x, y)


def case3_forgets_sum(x, y):
    return jax.shard_map(lambda a, b: a @ b, mesh=jax.typeof(x).sharding.mesh, in_specs=(P("X", "Y"), P("Y", None)),
                         out_specs=P("X", None), check_vma=False)(x, y)


def case3_gathers_both(x, y):
    def block(a, b):
        return (jax.lax.all_gather(a, "Y", axis=1, tiled=True, to="invarying")
                @ jax.lax.all_gather(b, "Y", axis=0, tiled=True, to="invarying"))
    return jax.shard_map(block, mesh=jax.typeof(x).sharding.mesh, in_specs=(P("X", "Y"), P("Y", None)),
                         out_specs=P("X", None))(x, y)


# Case 3 (sharded result): A[I, J_X] . B[J_X, K] -> C[I_X, K] via ReduceScatter.
def case3_reducescatter(x, y):
    """Case 3, sharded result: A[I, J_X] . B[J_X, K] -> C[I_X, K]. Multiply the blocks, then ReduceScatter
    the partial sums so that each device keeps its rows of C."""
    def block(x_block, y_block):  # f32[I, J/8] @ f32[J/8, K] -> f32[I, K] partial sums
        return jax.lax.psum_scatter(x_block @ y_block, "X", scatter_dimension=0, tiled=True)  # f32[I/8, K]

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
    def block(x_block, y_block):  # x_block: f32[I/8, J], y_block: f32[J, K/8]
        y_full = jax.lax.all_gather(y_block, "X", axis=1, tiled=True)  # f32[J, K]
        return x_block @ y_full  # f32[I/8, K]

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
    def block(x_block, y_full):  # x_block: f32[N, M/8]; y_full: f32[M, K] on every device
        rows = y_full.shape[0] // jax.lax.axis_size("X")
        y_block = jax.lax.dynamic_slice_in_dim(y_full, jax.lax.axis_index("X") * rows, rows, axis=0)  # f32[M/8, K]
        return jax.lax.psum_scatter(x_block @ y_block, "X", scatter_dimension=0, tiled=True)  # f32[N/8, K]

    return jax.shard_map(block, mesh=course.mesh(X=8), in_specs=(P(None, "X"), P()), out_specs=P("X", None))(x, y)


def q9_first_block_everywhere(x, y):
    """Every device multiplies by the first rows of B, not by the rows that meet its columns of A."""
    def block(a, b):
        return jax.lax.psum_scatter(a @ b[:a.shape[1]], "X", scatter_dimension=0, tiled=True)
    return smap(block, X8, (P(None, "X"), P()), P("X", None))(x, y)


def q9_gathers_a(x, y):
    return smap(lambda a, b: own_block(jax.lax.all_gather(a, "X", axis=1, tiled=True) @ b, "X"), X8,
                (P(None, "X"), P()), P("X", None))(x, y)


# CX4: ring collectives from ppermute. x f32[64, 32] @ P('X', None): blocks of [8, 32].
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


def ring_allgather_whole_buffer(x):
    """Passes everything gathered so far at every step: 8x the bytes of the ring."""
    def block(x_block):
        n, i = jax.lax.axis_size("X"), jax.lax.axis_index("X")
        blocks = jnp.zeros((n, *x_block.shape), x_block.dtype).at[i].set(x_block)
        for _ in range(n - 1):
            got = jax.lax.ppermute(blocks, "X", ring(n))
            blocks = jnp.where(jnp.arange(n)[:, None, None] == i, blocks, blocks + got * (blocks == 0))
        return blocks.reshape(-1, x_block.shape[1])
    return smap(block, X8, (P("X", None),), P(), check_vma=False)(x)


def ring_allgather_library(x):
    return smap(lambda b: jax.lax.all_gather(b, "X", axis=0, tiled=True, to="invarying"), X8, (P("X", None),), P())(x)


# Ring ReduceScatter: partials f32[512, 32] @ P('X', None): each device holds a full-size f32[64, 32]
# partial sum (view (8, 64, 32)); the result f32[64, 32] @ P('X', None) is their sum, one block each.
RS_SHAPE, RS_VIEW = (512, 32), (8, 64, 32)


def scatter_spec(permutes: int, both_ways: bool = False) -> ProgramSpec:
    """A ReduceScatter from ``permutes`` collective-permutes and nothing else (``both_ways``: half each way)."""
    return ProgramSpec(mesh=X8, einsum="kab->ab", operands=(Operand(RS_SHAPE, ("X", None), view=RS_VIEW),),
                       out_spec=("X", None), collectives={"collective-permute": permutes}, both_ways=both_ways)


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


# CX6: AllToAll moves the subscript: [I_X, J] -> [I, J_X].
def alltoall(x):
    """Reshard [I_X, J] -> [I, J_X] with one AllToAll: the subscript moves from I to J."""
    def block(x_block):  # f32[I/8, J] -> f32[I, J/8]: cut the columns in 8, glue the rows
        return jax.lax.all_to_all(x_block, "X", split_axis=1, concat_axis=0, tiled=True)

    return jax.shard_map(block, mesh=course.mesh(X=8), in_specs=P("X", None), out_specs=P(None, "X"))(x)


def alltoall_axes_swapped(x):
    return smap(lambda b: jax.lax.all_to_all(b, "X", split_axis=0, concat_axis=1, tiled=True), X8,
                (P("X", None),), P(None, "X"))(x)


def alltoall_by_gathering(x):
    def block(b):
        full = jax.lax.all_gather(b, "X", axis=0, tiled=True)  # f32[I, J]
        cols = full.shape[1] // jax.lax.axis_size("X")
        return jax.lax.dynamic_slice_in_dim(full, jax.lax.axis_index("X") * cols, cols, axis=1)
    return smap(block, X8, (P("X", None),), P(None, "X"))(x)


# CX7: the gradient of an AllGather is a ReduceScatter. Loss: sum over devices d of
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


# --- the exercises whose values each student is dealt (autograder/variants.py); the book's values first ----------
# A mesh is a tuple of axis sizes, X first: (4, 2) is {X: 4, Y: 2}.

def _axes(mesh: tuple[int, ...]) -> dict[str, int]:
    """A dealt mesh shape as the axis-size dict that ``local_shape`` and ``total_bytes`` take."""
    return dict(zip("XYZ", mesh, strict=False))


def e1(mesh: tuple[int, int], dtype: str) -> tuple[Number, ...]:
    """E1: the bytes one device holds of the JAX example's arrays, for a student's mesh and dtype; the
    two mesh shapes of 8 devices split B's columns differently, the dtype scales both. A's bytes depend on the
    dtype alone (8 devices either way), so two dtypes besides the book's bf16 keep two choices off its answers."""
    m, bpe = _axes(mesh), hw.BYTES_PER_ELEMENT[dtype]
    a = math.prod(local_shape([8, 2048], ["X", "Y"], m)) * bpe
    b = math.prod(local_shape([2048, 8192], ["", "Y"], m)) * bpe
    return (
        Number(qid="ch03-e1-a-bytes", points=1, section=NOTATION,
               prompt=f"Bytes of A = {dtype}[8, 2048] @ P('X', 'Y') on each device of a {mesh} mesh.",
               reference=a, unit="B", tolerance=THREE_FIGURES,
               slips=(Slip(a * m["Y"], f"ratio:{m['Y']}", "A's columns are split along Y as well.", maybe=True),
                      *((Slip(a / bpe, f"ratio:1/{bpe}", f"{dtype} takes {bpe} bytes per element.", maybe=True),)
                        if bpe > 1 else ()))),
        Number(qid="ch03-e1-b-bytes", points=1, section=NOTATION,
               prompt=f"Bytes of B = {dtype}[2048, 8192] @ P(None, 'Y') on each device of the same mesh.",
               reference=b, unit="B", tolerance=THREE_FIGURES,
               slips=(Slip(b / m["X"], f"ratio:1/{m['X']}", "B is not split along X: it is replicated there."),)))


def e2(mesh: tuple[int, int]) -> tuple[Number, ...]:
    """E2: a flattened subscript splits a dimension by the product of its axes' sizes."""
    nx, ny = mesh
    return (Number(qid="ch03-e2-ways", points=1, section=NOTATION,
                   prompt=f"Into how many pieces is I split in A[I_XY, J] on a mesh {{X: {nx}, Y: {ny}}}?",
                   reference=nx * ny, exact=True,
                   slips=(Slip(ny, f"ratio:1/{nx}", "I is split over X and then over Y: the sizes multiply."),
                          Slip(nx, f"ratio:1/{ny}"))),)


def e3(mesh: tuple[int, int]) -> tuple[Number, ...]:
    """E3: the share of a [4, 128] array that one device of a 2-D mesh holds."""
    m = _axes(mesh)
    fraction = math.prod(local_shape([4, 128], ["X", "Y"], m)) / (4 * 128)
    return (Number(qid="ch03-e3-fraction", points=1, section=NOTATION,
                   prompt=f"Fraction of A[I_X, J_Y] = [4, 128] held by one device of a {mesh[0]} x {mesh[1]} mesh.",
                   reference=fraction, tolerance=THREE_FIGURES,
                   slips=(Slip(fraction * m["Y"], f"ratio:{m['Y']}", "both dimensions are split."),)),)


def pq0(gpu: hw.GPU, mesh: tuple[int, int]) -> tuple[Number, ...]:
    """PQ0: the block of fp32[1024, 4096] @ A[I_XY, J] and the time to read it from a GPU's HBM."""
    m = _axes(mesh)
    block = math.prod(local_shape([1024, 4096], ["XY", ""], m)) * FP32
    seconds = block / gpu.hbm_bytes_per_s
    return (
        Number(qid="ch03-pq0-bytes", points=1, section=NOTATION,
               prompt=f"Bytes per device of fp32[1024, 4096] @ A[I_XY, J] on {{X: {m['X']}, Y: {m['Y']}}}.",
               reference=block, unit="B", tolerance=THREE_FIGURES,
               slips=(Slip(block / 2, "ratio:1/2", "fp32 takes 4 bytes per element.", maybe=True),
                      Slip(block * m["Y"], f"ratio:{m['Y']}", "I is split over both axes, X and Y.", maybe=True))),
        number("ch03-pq0-time", section=NOTATION, prompt=f"Seconds to read that block from the HBM of one {gpu.name}.",
               reference=seconds, unit="s",
               # the book divides 1e6 B, not 2**20 B: 294 ns on its H100 and mesh; elsewhere HBM's rate tolerance
               tolerance=Tolerance(rtol=0.055) if (gpu, mesh) == (H100, (8, 2)) else
               rate_tolerance(gpu, of=lambda g: 1 / g.hbm_bytes_per_s),
               slips=(Slip(seconds * 1e9, "unit:1000000000"), Slip(seconds / 2, "ratio:1/2"))))


def pq1(mesh: tuple[int, int, int]) -> tuple[Number, ...]:
    """PQ1: bytes per device and over all devices of int8[128, 2048] @ A[I_XY, J]; Z copies it."""
    m = _axes(mesh)
    per_device = math.prod(local_shape([128, 2048], ["XY", ""], m)) * INT8
    total = total_bytes([128, 2048], INT8, ["XY", ""], m)
    return (
        Number(qid="ch03-pq1-bytes-per-device", points=1, section=NOTATION,
               prompt=f"Bytes per device of int8[128, 2048] @ A[I_XY, J] on {{X: {m['X']}, Y: {m['Y']}, Z: {m['Z']}}}.",
               reference=per_device, unit="B", tolerance=THREE_FIGURES,
               slips=(Slip(per_device / m["Z"], f"ratio:1/{m['Z']}", "Z does not split A: it copies it.",
                           maybe=True),)),
        Number(qid="ch03-pq1-total-bytes", points=1, section=NOTATION,
               prompt=f"Bytes of that array summed over all {math.prod(mesh)} devices.",
               reference=total, unit="B", tolerance=THREE_FIGURES,
               slips=(Slip(total / m["Z"], f"ratio:1/{m['Z']}", "there is one copy per Z coordinate.", maybe=True),)))


def q1(mesh: tuple[int, int, int]) -> tuple[Number, ...]:
    """Q1: bytes over all chips per copy of A[I_X, J, K]: the axes that do not split it copy it."""
    m = _axes(mesh)
    ratio = total_bytes([64, 32, 16], 1, ["X", "", ""], m) / (64 * 32 * 16)
    return (Number(qid="ch03-q1-ratio", points=1, section=PROBLEMS,
                   prompt=f"Total bytes over all chips / bytes of one copy, for A[I_X, J, K] on "
                          f"{{X: {m['X']}, Y: {m['Y']}, Z: {m['Z']}}}.",
                   reference=ratio, tolerance=THREE_FIGURES,
                   slips=(Slip(ratio / m["X"], f"ratio:1/{m['X']}",
                               "count copies: every device holds only its block of the array."),)),)


def e4(chip: hw.TPU) -> tuple[Number, ...]:
    """E4: the payload per hop below which a chip's link is latency-bound (one direction, 1 us a hop)."""
    latency_bytes = chip.ici_bytes_per_s_per_link * HOP_S
    return (Number(qid="ch03-e4-latency-bytes", points=1, section=ALLGATHER,
                   prompt=f"Bytes per hop below which a {chip.name} link is latency-bound (1 us per hop, one "
                          "direction).",
                   reference=latency_bytes, unit="B", tolerance=ONE_PERCENT,
                   slips=(Slip(2 * latency_bytes, "ratio:2",
                               "one hop sends in one direction: use the one-way rate.", maybe=True),)),)


def pq2(N: int, E: int) -> tuple[Number, ...]:
    """PQ2: AllGather_Y([E_Y, 8192]) on a v5e axis of N chips, which has no wraparound (v5e has it only
    on axes of 16); part (b), bf16[256, 256], stays latency-bound: hops, not bytes."""
    big, small_bytes = BF16 * E * 8192, BF16 * 256 * 256
    ideal = collective_time("all-gather", big, W_V5E, N)
    nowrap = collective_time("all-gather", big, W_V5E, N, wrap=False)
    hop = small_bytes / N / V5E.ici_bytes_per_s_per_link  # one shard over one link, one way
    small = collective_time("all-gather", small_bytes, W_V5E, N, wrap=False)
    hops = N - 1
    slice_ = f"v5e {{X: {32 // N}, Y: {N}}}"
    # The ideal ring over the line's time is N / (2 (N - 1)): 2/3 on the book's axis of 4.
    nowrap_code = "ratio:2/3" if N == 4 else "not_equal"
    # The book's 8 us were measured; on a longer axis, assuming wraparound (N/2 hops) is the slip to name.
    small_tolerance = Tolerance(low=2 * hops / 3 * HOP_S, high=4 * hops / 3 * HOP_S)  # the book: 2-4 us
    small_slip = (Slip(8e-6, slip_code(8e-6, small, small_tolerance), "8 us was measured; the model counts hops.")
                  if N == 4 else Slip(N // 2 * HOP_S, slip_code(N // 2 * HOP_S, small, small_tolerance),
                                      "this axis has no wraparound link."))
    return (
        number("ch03-pq2-ideal", section=ALLGATHER,
               prompt=f"PQ2(a): AllGather_Y of bf16[{E}, 8192] on {slice_}, ideal ring with wraparound ({LARGE_N}).",
               reference=ideal, unit="s",
               slips=(Slip(2 * ideal, "ratio:2"), Slip(ideal * 1e6, "unit:1000000"), *exact_ring_slips(ideal, N))),
        number("ch03-pq2-nowrap", section=ALLGATHER,
               prompt=f"PQ2(a) again, for the {N}-long v5e axis as it is: without wraparound.", reference=nowrap,
               unit="s", slips=(Slip(ideal, nowrap_code, "this axis has no wraparound link."),)),
        number("ch03-pq2-hop-time", section=ALLGATHER,
               prompt=f"PQ2(b): seconds for one shard of bf16[256, 256] / {N} to cross one v5e link one way.",
               reference=hop, unit="s", tolerance=Tolerance(rtol=0.05) if N == 4 else TWO_PERCENT,  # the book's 0.7 us
               slips=(Slip(hop / 2, "ratio:1/2"),)),
        number("ch03-pq2-small", section=ALLGATHER,
               prompt=f"PQ2(b): the whole AllGather of bf16[256, 256] over the {N}-long axis (latency-bound).",
               reference=small, unit="s", tolerance=small_tolerance, slips=(small_slip,)))


def pq2_valid(N: int, E: int) -> bool:
    """Part (a) bandwidth-bound and part (b) latency-bound, as in the book."""
    big, small_bytes = BF16 * E * 8192, BF16 * 256 * 256
    return (cx5_ignores_latency("all-gather", big, W_V5E, N, wrap=False) > (N - 1) * HOP_S
            and cx5_ignores_latency("all-gather", small_bytes, W_V5E, N, wrap=False) < (N - 1) * HOP_S)


def q3(side: int) -> tuple[Number, ...]:
    """Q3: AllGather_X of a bf16[128] vector on a full v4p cube of ``side``^3 chips (whole 4x4x4 cubes, so every axis
    wraps): latency-bound, side // 2 hops of a microsecond, whatever the bytes."""
    t = collective_time("all-gather", Q3_BYTES, W_V4P, side)
    tolerance = Tolerance(low=0.75 * t, high=1.5 * t)  # the book's 2 us for side 4: 1.5 to 3 us (bytes per hop vary)
    around = side * HOP_S  # every hop of the ring, not the farthest device's
    return (number("ch03-q3-latency", section=PROBLEMS,
                   prompt=f"Q3: AllGather_X([B_X]) of bf16[128] on a v4p {side}x{side}x{side}.",
                   reference=t, unit="s", tolerance=tolerance,
                   slips=(Slip(around, slip_code(around, t, tolerance, "s"),
                               "with wraparound the farthest device is half way round the ring."),)),)


def q2(B: int, D: int) -> tuple[Number, ...]:
    """Q2: collectives of bf16[B, D] sharded [B_X, D_Y] on a full v4p 4x4x4 cube (wraparound on every axis)."""
    full, axis = BF16 * B * D, 4
    gather_x = collective_time("all-gather", full / axis, W_V4P, axis)  # one Y group gathers [B, D_Y]
    gather_xy = collective_time("all-gather", full, W_V4P, axis, axes=2)  # -> [B, D]
    allreduce_z = collective_time("all-reduce", full / axis**2, W_V4P, axis)  # [B_X, D_Y]{U_Z}
    reshard_x = collective_time("all-gather", full / axis, W_V4P, axis, axes=2)  # [B_XZ, D_Y] over X and Z
    reshard_xy = collective_time("all-gather", full, W_V4P, axis, axes=3)  # [B_XZ, D_Y] -> [B, D]
    v0_allreduce = 2 * full / W_V4P  # the first edition reduced the whole unsharded array
    return (
        number("ch03-q2-gather-x", section=PROBLEMS,
               prompt=f"Q2(1): AllGather_X([B_X, D_Y]) on a v4p 4x4x4, B = {B}, D = {D}, bf16 ({LARGE_N}).",
               reference=gather_x, unit="s",
               slips=(Slip(4 * gather_x, "ratio:4", "only D_Y's share is gathered: divide by |Y|."),
                      *exact_ring_slips(gather_x, axis))),
        number("ch03-q2-gather-xy", section=PROBLEMS,
               prompt=f"Q2(2): AllGather_XY([B_X, D_Y]) on the same cube ({LARGE_N}).", reference=gather_xy, unit="s",
               slips=(Slip(2 * gather_xy, "ratio:2", "two axes gather at once, on their own links."),
                      *exact_ring_slips(gather_xy, axis, axis**2))),
        number("ch03-q2-allreduce-z", section=PROBLEMS,
               prompt=f"Q2(3): AllReduce_Z([B_X, D_Y]{{U_Z}}) on the same cube ({LARGE_N}).", reference=allreduce_z,
               unit="s", slips=(Slip(v0_allreduce, "ratio:16", "each device holds only a [B/4, D/4] block."),
                                *exact_ring_slips(allreduce_z, axis))),
        number("ch03-q2-reshard-x", section=PROBLEMS,
               prompt=f"Q2(1) after resharding to [B_XZ, D_Y] locally, so Z's links help the gather ({LARGE_N}).",
               reference=reshard_x, unit="s",
               slips=(Slip(gather_x, "ratio:2"), *exact_ring_slips(reshard_x, axis, axis**2))),
        number("ch03-q2-reshard-xy", section=PROBLEMS,
               prompt=f"Q2(2) after the same reshard: gather over X, Y and Z at once ({LARGE_N}).",
               reference=reshard_xy, unit="s",
               slips=(Slip(gather_xy, "ratio:3/2"), *exact_ring_slips(reshard_xy, axis, axis**2, axis**3))))


def q2_valid(B: int, D: int) -> bool:
    """Every collective of Q2 stays bandwidth-bound (as in the book), so its slips keep their factors."""
    full, axis = BF16 * B * D, 4
    cases = (("all-gather", full / axis, 1), ("all-gather", full, 2), ("all-reduce", full / axis**2, 1),
             ("all-gather", full / axis, 2), ("all-gather", full, 3))
    return all(cx5_ignores_latency(op, v, W_V4P, axis, axes=k) > collective_time(op, 0, W_V4P, axis, axes=k)
               for op, v, k in cases)


def ici_intensity(chip: hw.TPU) -> float:
    """C / W: a chip's bf16 FLOP/s over one ICI link's bytes/s, both directions."""
    return chip.bf16_flops_per_s / chip.ici_bidirectional_bytes_per_s


def q4(chip: hw.TPU) -> tuple[Formula | Number, ...]:
    """Q4: gather the weight or reduce the output; the thresholds are the chip's C / W per ICI axis."""
    intensity = ici_intensity(chip)  # C / W: 2550 on a v5p
    tolerance = rate_tolerance(chip, ONE_PERCENT, of=ici_intensity)  # the book's rounded peaks pass too
    return (
        Formula(qid="ch03-q4-t-s1", points=1, section=PROBLEMS,
                prompt="Q4 strategy 1 (AllGather Y[D_X, F], then multiply): lower bound on its time.",
                reference=T_S1, symbols="B D F X C W", counts="X", exact_form=Q4_EXACT_S1,
                slips=(Slip(sp.Max(2 * B * D * F / (X * C), 2 * D * F / W), "partly",
                            "after the gather every device does the whole matmul."),
                       Slip(Q4_EXACT_S1.subs(C, C * X / (X - 1)), "partly", RING_SHARE))),
        Formula(qid="ch03-q4-t-s2", points=1, section=PROBLEMS,
                prompt="Q4 strategy 2 (local partial matmul, then AllReduce): lower bound on its time.",
                reference=T_S2, symbols="B D F X C W", counts="X", exact_form=Q4_EXACT_S2,
                slips=(Slip(sp.Max(2 * B * D * F / C, 4 * B * F / W), "missing_symbol:X",
                            "each chip multiplies only its 1/X share of the contraction."),
                       Slip(Q4_EXACT_S2.subs(C, C * X / (X - 1)), "partly", RING_SHARE))),
        Number(qid="ch03-q4-b-threshold", points=1, section=PROBLEMS,
               prompt=f"Q4 on {chip.name}: the batch below which strategy 1 is communication-bound.",
               reference=intensity, tolerance=tolerance,
               slips=(Slip(intensity / 2, "ratio:1/2", "W is the bidirectional bandwidth."),)),
        Formula(qid="ch03-q4-d-small-batch", points=1, section=PROBLEMS,
                prompt="Q4 when both strategies are communication-bound: strategy 2 wins for D above what?",
                reference=2 * B, symbols="B D F X C W", counts="X",
                slips=(Slip(B, "ratio:1/2", "the AllReduce moves 4BF bytes, the gather 2DF."),)),
        Number(qid="ch03-q4-d-threshold", points=1, section=PROBLEMS,
               prompt=f"Q4 on {chip.name} with B above that batch: strategy 2 wins for D above what?",
               reference=2 * intensity, tolerance=tolerance,
               slips=(Slip(intensity, "ratio:1/2", "compare 2BDF/C with 4BF/W."),)))


def q6(chip: hw.TPU, mesh: tuple[int, int]) -> tuple[Choice | Number, ...]:
    """Q6: three matmuls on a 2-D TPU slice. (a) is compute-bound for J > 2|Y| C/W (an AllReduce over Y
    of C[I_X, K]), (b) for I > |X| C/W (an AllGather over X of B[J_X, K_Y]); (c) needs no collective."""
    nx, ny = mesh
    intensity = ici_intensity(chip)
    a_j, b_i = 2 * ny * intensity, nx * intensity
    tolerance = rate_tolerance(chip, TWO_PERCENT, of=ici_intensity)  # as Q4's C / W, and Chapter 1's E4
    where = f"a {chip.name} {nx}x{ny}"
    return (
        Choice(qid="ch03-q6-a-collective", points=1, section=PROBLEMS,
               prompt=f"Q6(a): the collective of A[I_X, J_Y] . B[J_Y, K] -> C[I_X, K] on {where}.",
               reference="all-reduce", options=COLLECTIVES,
               slips=(Slip("all-gather", "wrong_option", "the contraction is sharded on both sides: partial sums."),)),
        Number(qid="ch03-q6-a-threshold", points=1, section=PROBLEMS,
               prompt=f"Q6(a) on {where}: the J above which it is compute-bound (bidirectional ring, wraparound "
                      f"assumed, {LARGE_N}).",
               reference=a_j, tolerance=tolerance,
               slips=(Slip(a_j / 2, "ratio:1/2", "an AllReduce costs two gathers' worth."),
                      *exact_ring_slips(a_j, ny, tolerance=tolerance),
                      *wrong_axis(a_j * nx / ny, a_j, tolerance, "J is cut along Y: the AllReduce runs over Y."))),
        Choice(qid="ch03-q6-b-collective", points=1, section=PROBLEMS,
               prompt="Q6(b): the collective of A[I_X, J] . B[J_X, K_Y] -> C[I_X, K_Y].",
               reference="all-gather", options=COLLECTIVES,
               slips=(Slip("all-reduce", "wrong_option", "A is not sharded on J: gather B's J first."),)),
        Number(qid="ch03-q6-b-threshold", points=1, section=PROBLEMS,
               prompt=f"Q6(b) on {where}: the I above which it is compute-bound (the same ring, {LARGE_N}).",
               reference=b_i, tolerance=tolerance,
               slips=(Slip(b_i * 2, "ratio:2", f"the gathered B is bf16[J, K_Y]: 2JK/{ny} bytes."),
                      *exact_ring_slips(b_i, nx, tolerance=tolerance))),
        Choice(qid="ch03-q6-c-collective", points=1, section=PROBLEMS,
               prompt="Q6(c): the collective of A[I_X, J] . B[J, K_Y] -> C[I_X, K_Y].",
               reference="none", options=COLLECTIVES,
               slips=(Slip("all-gather", "wrong_option", "the contraction is not sharded at all."),)))


def _q7_sizes(DF: tuple[int, int], B: int) -> tuple[float, float, float, float]:
    """Q7's weight matrix, tensor-parallel weights per chip, FLOP time and input AllGather time."""
    D_, F_ = DF
    weight = BF16 * D_ * F_  # one of W_in, W_out
    per_chip = 2 * weight / Q7_CHIPS  # tensor parallel: both weights split four ways
    flop_time = 2 * 2 * B * D_ * F_ / Q7_CHIPS / V5E.bf16_flops_per_s
    comm = collective_time("all-gather", BF16 * B * D_, W_V5E, 2, axes=2)  # In[B, D_XY] -> [B, D]
    return weight, per_chip, flop_time, comm


def q7(DF: tuple[int, int], B: int) -> tuple[Choice | Number, ...]:
    """Q7: an MLP block on a v5e 2x2 with 300 MB free per chip, for a student's model width and batch."""
    weight, per_chip, flop_time, comm = _q7_sizes(DF, B)
    return (
        Number(qid="ch03-q7-weight-bytes", points=1, section=PROBLEMS,
               prompt=f"Q7: bytes of one bf16 weight matrix [{DF[0]}, {DF[1]}].",
               reference=weight, unit="B", tolerance=ONE_PERCENT,
               slips=(Slip(weight / 2, "ratio:1/2"),)),
        Choice(qid="ch03-q7-strategy", points=1, section=PROBLEMS,
               prompt="Q7: shard for speed within 300 MB per chip: 'fsdp' or 'tensor' parallel.",
               reference="tensor", options=("fsdp", "tensor"),
               slips=(Slip("fsdp", "wrong_option", "FSDP gathers both full weight matrices at every step."),)),
        Number(qid="ch03-q7-bytes-per-chip", points=1, section=PROBLEMS,
               prompt="Q7: weight bytes per chip with tensor parallelism over all 4 chips.",
               reference=per_chip, unit="B", tolerance=ONE_PERCENT,
               slips=(Slip(per_chip / 2, "ratio:1/2", "there are two weight matrices.", maybe=True),)),
        number("ch03-q7-flop-time", section=PROBLEMS,
               prompt=f"Q7: seconds of matmul per chip for the MLP block with B = {B} (tensor parallel, v5e).",
               reference=flop_time, unit="s", slips=(Slip(flop_time * 4, "ratio:4", "each chip does a quarter."),)),
        number("ch03-q7-comm-time", section=PROBLEMS,
               prompt=f"Q7: seconds for the AllGather of In[B, D_XY] over both axes (wraparound assumed, {LARGE_N}).",
               reference=comm, unit="s", slips=(Slip(comm * 2, "ratio:2", "two axes gather at once."),
                                                *exact_ring_slips(comm, 2, Q7_CHIPS))))


def q7_valid(DF: tuple[int, int], B: int) -> bool:
    """As in the book: the two weights do not fit unsharded but fit tensor-parallel, the gather of the
    input is bandwidth-bound, and the block is compute-bound."""
    weight, per_chip, flop_time, comm = _q7_sizes(DF, B)
    return 2 * weight > Q7_FREE >= per_chip and comm > 2 * HOP_S and flop_time > 2 * comm


def cx2(I: int, J: int, mesh: tuple[int, int]) -> tuple[Program | Formula, ...]:
    """CX2 and Q9: the sharded-matmul cases for a student's x[I, J] (y[J, K]), case 3 on their 2-D mesh.
    Case 2 takes K = 2J, so that its partial-sum alternative moves four times the bytes of the gather."""
    mesh_2d = (("X", mesh[0]), ("Y", mesh[1]))
    x_cols, y_rows = Operand((I, J), (None, "X")), Operand((J, 128), ("X", None))
    return (
        Program(qid="ch03-cx2-case1-local", points=2, section=CASE1,
                prompt=f"Case 1: A[I_X, J] . B[J, K] -> C[I_X, K] with no communication (x[{I}, {J}], y[{J}, 128]).",
                spec=ProgramSpec(mesh=X8, einsum="ij,jk->ik", operands=(Operand((I, J), ("X", None)),
                                                                        Operand((J, 128), (None, None))),
                                 out_spec=("X", None), collectives={}),
                model=case1,
                slips=(Slip(case1_claims_replicated, "wrong_shape"),
                       Slip(case1_gathers_anyway, "collectives:all-gather"))),
        Program(qid="ch03-cx2-case2-allgather", points=3, section=CASE2,
                prompt=f"Case 2: A[I, J_X] . B[J, K] -> C[I, K] (replicated), gathering A once (x[{I}, {J}], "
                       f"y[{J}, {CASE2_WIDEN * J}]).",
                spec=ProgramSpec(mesh=X8, einsum="ij,jk->ik",
                                 operands=(x_cols, Operand((J, CASE2_WIDEN * J), (None, None))),
                                 out_spec=(), collectives={"all-gather": 1}),
                model=case2,
                slips=(Slip(case2_no_sum, "partial_sum:X"), Slip(case2_partial_sums, "collectives:all-reduce"))),
        Program(qid="ch03-cx2-case3-allreduce", points=3, section=CASE3,
                prompt=f"Case 3 on a {mesh[0]} x {mesh[1]} mesh: A[I_X, J_Y] . B[J_Y, K] -> C[I_X, K] with one "
                       f"AllReduce over Y (x[{I}, {J}], y[{J}, 128]).",
                spec=ProgramSpec(mesh=mesh_2d, einsum="ij,jk->ik",
                                 operands=(Operand((I, J), ("X", "Y")), Operand((J, 128), ("Y", None))),
                                 out_spec=("X", None), collectives={"all-reduce": 1}),
                model=case3_allreduce,
                slips=(Slip(case3_forgets_sum, "partial_sum:Y"), Slip(case3_gathers_both, "collectives:all-gather"))),
        Program(qid="ch03-cx2-case3-reducescatter", points=3, section=CASE3,
                prompt=f"Case 3, sharded result: A[I, J_X] . B[J_X, K] -> C[I_X, K] with one ReduceScatter "
                       f"(x[{I}, {J}], y[{J}, 128]).",
                spec=ProgramSpec(mesh=X8, einsum="ij,jk->ik", operands=(x_cols, y_rows), out_spec=("X", None),
                                 collectives={"reduce-scatter": 1}),
                model=case3_reducescatter,
                slips=(Slip(case3_scatters_columns, "wrong_shape"),
                       Slip(case3_reduces_then_slices, "collectives:all-reduce"))),
        Program(qid="ch03-cx2-case4-gather-one", points=3, section=CASE4,
                prompt=f"Case 4: A[I_X, J] . B[J, K_X] -> C[I_X, K], gathering only B (x[{I}, {J}], y[{J}, 128]).",
                spec=ProgramSpec(mesh=X8, einsum="ij,jk->ik",
                                 operands=(Operand((I, J), ("X", None)), Operand((J, 128), (None, "X"))),
                                 out_spec=("X", None), collectives={"all-gather": 1}),
                model=case4,
                slips=(Slip(case4_local_only, "wrong_shape"), Slip(case4_gathers_both, "collectives:all-gather"))),
        Program(qid="ch03-q9-partial-sums", points=3, section=PROBLEMS,
                prompt=f"Q9: A[N, M_X] . B[M, K] (B replicated) -> C[N_X, K]: local partial sums, one ReduceScatter "
                       f"(x[{I}, {J}], y[{J}, 128]).",
                spec=ProgramSpec(mesh=X8, einsum="ij,jk->ik", operands=(x_cols, Operand((J, 128), (None, None))),
                                 out_spec=("X", None), collectives={"reduce-scatter": 1}),
                model=q9_partial_sums,
                slips=(Slip(q9_first_block_everywhere, "wrong_values",
                            "each device's columns of A meet their own rows of B, not the same rows on every device."),
                       Slip(q9_gathers_a, "collectives:all-gather"))),
        Formula(qid="ch03-q9-ratio", points=1, section=PROBLEMS,
                prompt="Bytes moved by AllGather-A-then-multiply over bytes moved by multiply-then-ReduceScatter.",
                reference=M / K, symbols="N M K",
                slips=(Slip(K / M, "not_equivalent", "A is N x M; the output is N x K."),)))


def cx6(I: int, J: int) -> tuple[Program, ...]:
    """CX6: an AllToAll that moves the subscript of a student's f32[I, J] from I to J."""
    return (Program(qid="ch03-cx6-alltoall", points=2, section=ALLTOALL,
                    prompt=f"Reshard f32[{I}, {J}] from [I_X, J] to [I, J_X] with one AllToAll.",
                    spec=ProgramSpec(mesh=X8, einsum="ab->ab", operands=(Operand((I, J), ("X", None)),),
                                     out_spec=(None, "X"), collectives={"all-to-all": 1}),
                    model=alltoall,
                    slips=(Slip(alltoall_axes_swapped, "wrong_shape"),
                           Slip(alltoall_by_gathering, "collectives:all-gather"))),)


# --- the questions -------------------------------------------------------------------------------------------

CHAPTER = Chapter("ch03_sharding", "Sharded matrices and collectives", (
    # 1. Notation and bookkeeping.
    vary("ch03-e1", e1, mesh=values((4, 2), (2, 4)), dtype=values("bf16", "fp32", "int8")),
    vary("ch03-e2", e2, mesh=values((4, 8), (2, 8), (8, 16), (4, 2), (16, 4))),
    vary("ch03-e3", e3, mesh=values((2, 2), (4, 2), (2, 8), (4, 8))),
    Function(qid="ch03-cx1-local-shape", points=2, section=NOTATION,
             prompt="local_shape(global_shape, spec, mesh): the block shape on one device.",
             reference=local_shape, probes=SHAPE_PROBES, draw=draw_shape, output=Output("number", tolerance=EXACT),
             slips=(Slip(cx1_forgets_flattening, "wrong_elements"),)),
    Function(qid="ch03-cx1-total-bytes", points=2, section=NOTATION,
             prompt="total_bytes(global_shape, bytes_per_element, spec, mesh): bytes summed over all devices.",
             reference=total_bytes, probes=BYTES_PROBES, draw=random_case, output=Output("number", tolerance=EXACT),
             slips=(Slip(cx1_one_copy, "ratio:1/4"),)),
    vary("ch03-pq0", pq0, gpu=chips(H100, hw.H200, hw.B200), mesh=values((8, 2), (4, 2), (8, 4))),
    vary("ch03-pq1", pq1, mesh=values((2, 8, 2), (2, 4, 4), (4, 8, 2), (2, 2, 8), (4, 4, 4))),
    vary("ch03-q1", q1, mesh=values((4, 8, 2), (2, 4, 2), (8, 4, 8), (4, 2, 2), (2, 8, 8))),
    Formula(qid="ch03-q1-ratio-formula", points=1, section=PROBLEMS,
            prompt="The same ratio for A[I_X, J, ...] on a mesh {X, Y, Z}, in X, Y, Z.",
            reference=Y * Z, symbols="X Y Z", counts="X Y Z",
            slips=(Slip(X * Y * Z, "extra_symbol:X", "A is split along X, not copied."),)),
    # 2. The four matmul cases, with shard_map.
    vary("ch03-cx2", cx2, I=values(64, 128), J=values(256, 128), mesh=values((2, 4), (4, 2))),
    # 3. Collectives and what they cost. CX3: the cost formulas.
    Formula(qid="ch03-cx3-t-allgather", points=1, section=ALLGATHER,
            prompt="Time of a bandwidth-bound AllGather of V bytes (whole array) on a ring with wraparound "
                   "(large N; the exact (N-1)/N form is right too).",
            reference=T_ALLGATHER, symbols="V W N", counts="N", limit="N",
            slips=(Slip(2 * V / W, "ratio:2", "W counts both directions, and the ring uses both."),
                   Slip(V / (N * W), "ratio_symbols:N", "each device receives almost the whole array."))),
    Formula(qid="ch03-cx3-t-allreduce", points=1, section=ALLGATHER,
            prompt="Time of a bandwidth-bound AllReduce of V bytes on the same ring (large N; the exact form is "
                   "right too).",
            reference=T_ALLREDUCE, symbols="V W N", counts="N", limit="N",
            slips=(Slip(V / W, "ratio:1/2", "an AllReduce is a ReduceScatter followed by an AllGather."),)),
    Formula(qid="ch03-cx3-t-alltoall", points=1, section=ALLTOALL,
            prompt="Time of a bandwidth-bound AllToAll of V bytes (whole array) on the same ring (large N; the exact "
                   "form, on a ring of any length, is right too).",
            reference=T_ALLTOALL, symbols="V W N", counts="N", limit="N", exact_form=T_ALLTOALL_EXACT,
            slips=(Slip(V / (2 * W), "ratio:2", "that is the one-direction ring; both directions halve it."),)),
    Formula(qid="ch03-cx3-t-line", points=1, section=ALLGATHER,
            prompt="Time of that AllGather when the axis has no wraparound (a line of N devices).",
            reference=T_LINE, symbols="V W N", counts="N",
            slips=(Slip(2 * V / W, "missing_symbol:N", "count the N-1 shards exactly, as in PQ2."),
                   Slip((N - 1) * V / (N * W), "ratio:1/2", "a line uses each link in one direction only."))),
    # CX4: ring collectives from ppermute.
    Program(qid="ch03-cx4-ring-allgather", points=3, section=ALLGATHER,
            prompt="AllGather f32[64, 32] @ P('X', None) on a one-way ring: only ppermute, N-1 steps.",
            spec=reshard_spec((), {"collective-permute": 7}),
            model=ring_allgather,
            slips=(Slip(ring_allgather_arrival_order, "misplaced_blocks:X",
                        "after i steps the block in hand left device (index - i) mod N: place it by where it came "
                        "from, not by when it arrived."),
                   Slip(ring_allgather_whole_buffer, "traffic:collective-permute",
                        "a device needs each block once: pass on only the block that arrived last."),
                   Slip(ring_allgather_library, "collectives:all-gather"))),
    Program(qid="ch03-cx4-ring-reducescatter", points=3, section=ALLGATHER,
            prompt="ReduceScatter 8 partial sums f32[64, 32] to f32[64, 32] @ P('X', None): one-way ring, ppermute.",
            spec=scatter_spec(7),
            model=ring_reducescatter,
            slips=(Slip(ring_reducescatter_no_add, "wrong_values",
                        "at each step of the ring, what arrives is added to the device's own chunk before it is sent "
                        "on."),
                   Slip(ring_reducescatter_library, "collectives:reduce-scatter"))),
    Program(qid="ch03-cx4-bidi-allgather", points=2, section=ALLGATHER,
            prompt="The ring AllGather with half of each block going each way round (both link directions).",
            spec=reshard_spec((), {"collective-permute": 14}, both_ways=True),
            model=bidi_allgather,
            slips=(Slip(bidi_allgather_swapped, "permuted_rows"),
                   Slip(ring_allgather, "collectives:collective-permute"))),
    Program(qid="ch03-cx4-bidi-reducescatter", points=2, section=ALLGATHER,
            prompt="The ring ReduceScatter with half of each chunk going each way round.",
            spec=scatter_spec(14, both_ways=True),
            model=bidi_reducescatter,
            slips=(Slip(bidi_reducescatter_wrong_chunk, "wrong_values",
                        "check which neighbour's chunk each direction of the ring adds at each step."),
                   Slip(ring_reducescatter, "collectives:collective-permute"))),
    vary("ch03-e4", e4, chip=chips(V5E, V5P, hw.TPU_V3)),
    Function(qid="ch03-cx5-collective-time", points=3, section=ALLGATHER,
             prompt="collective_time(op, V, W, N, axes, wrap, hop_s): Part 3's time for one collective.",
             reference=collective_time, probes=CX5_PROBES,
             draw=like_probes(collective_time, cx5_ignores_latency, cx5_exact_ring),
             output=Output("number", unit="s", tolerance=Tolerance(rtol=0.001)),
             slips=(Slip(cx5_ignores_latency, "not_equal"),
                    Slip(cx5_exact_ring, "ratio:3/4",
                         "the question uses the large-N forms of the bandwidth term: drop the (N-1)/N factor.",
                         narrow="wrong only where a ring's bandwidth bounds the time (the latency has no (N-1)/N, "
                                "and an AllToAll's large-N form is exact on an even ring), where ignoring the latency "
                                "is right: no case fails both, and the latency-bound cases are most."))),
    vary("ch03-pq2", pq2, N=values(4, 8, 16), E=values(2048, 1024, 4096), valid=pq2_valid),
    vary("ch03-q2", q2, B=values(1024, 2048, 512), D=values(4096, 6144), valid=q2_valid),
    vary("ch03-q3", q3, side=values(Q2_AXIS, 8, 16)),
    # CX6: the AllToAll; Q10: what it saves; E5 and CX7: AllGather and ReduceScatter are transposes.
    vary("ch03-cx6", cx6, I=values(64, 128), J=values(32, 64, 16)),
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
             slips=(Slip(e5_interleaved, "permuted"),)),
    Program(qid="ch03-cx7-grad-transpose", points=3, section=REDUCESCATTER,
            prompt="jax.grad of a loss built on all_gather: x * sum_d y_d, whose backward pass is a ReduceScatter.",
            spec=ProgramSpec(mesh=X8, einsum="ab,kab->ab",
                             operands=(Operand((64, 32), ("X", None)), Operand(RS_SHAPE, ("X", None), view=RS_VIEW)),
                             out_spec=("X", None), collectives={"all-gather": 1, "reduce-scatter": 1}),
            model=gather_gradient,
            slips=(Slip(gradient_forgets_other_devices, "partial_sum:X"),
                   Slip(gradient_by_hand_allreduce, "collectives:all-reduce"))),
    # 4. Choosing a strategy.
    vary("ch03-q4", q4, chip=chips(V5P, V5E, hw.TPU_V6E, V4P)),
    Formula(qid="ch03-q5-flops", points=1, section=PROBLEMS,
            prompt="Q5: FLOPs per chip of A[I, J] . B[J, K] on a v4p 4x4x4 with one operand dimension split 64 ways.",
            reference=Q5_FLOPS, symbols="I J K W",
            slips=(Slip(2 * I * J * K / 16, "ratio:4", "all 64 chips share the work, not one 4x4 face."),)),
    Formula(qid="ch03-q5-comm-gather", points=1, section=PROBLEMS,
            prompt="Q5: time to AllGather the bf16 result C[I_XYZ, K] over all three axes at once.",
            reference=Q5_GATHER, symbols="I J K W", exact_form=Q5_GATHER * RING_64,
            slips=(Slip(BF16 * I * K / W, "ratio:3", "three axes gather at once, each on its own links."),)),
    Formula(qid="ch03-q5-comm-allreduce", points=1, section=PROBLEMS,
            prompt="Q5: time to AllReduce bf16 partial sums C[I, K]{U_XYZ} over all three axes.",
            reference=Q5_ALLREDUCE, symbols="I J K W", exact_form=Q5_ALLREDUCE * RING_64,
            slips=(Slip(Q5_GATHER, "ratio:1/2", "an AllReduce costs two gathers' worth."),)),
    Choice(qid="ch03-q5-best", points=1, section=PROBLEMS,
           prompt="Q5: the lowest-latency way for large I, J, K.",
           reference="split-output", options=("split-output", "split-contraction", "replicate"),
           slips=(Slip("split-contraction", "wrong_option", "its AllReduce moves twice the bytes."),)),
    vary("ch03-q6", q6, chip=chips(V5E, hw.TPU_V6E), mesh=values((4, 4), (4, 8), (8, 4), (2, 4))),
    # (4608, 36864) is Gemma 2 27B's MLP (hidden_size and intermediate_size in the config.json of google/gemma-2-27b
    # on huggingface.co); a (7168, 28672) had 1.96 times (5120, 20480)'s D*F, so a batch of 64 and
    # one of 128 gave FLOP times 2% apart, each passing the other's check
    vary("ch03-q7", q7, DF=values((8192, 32768), (6144, 24576), (5120, 20480), (4608, 36864)),
         B=values(128, 256, 64), valid=q7_valid),
))
