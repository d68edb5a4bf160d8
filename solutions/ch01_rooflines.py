"""Chapter 1, Rooflines: every graded question of the chapter, as records with references.

Book: Part 1 "All About Rooflines", https://jax-ml.github.io/scaling-book/roofline/
Numbers are computed from ``course.hardware`` (never typed in); where the book prints a rounded or
differently-based value, the tolerance admits it and ``BOOK`` records it for the tests.
"""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Callable

import numpy as np
import sympy as sp

import course
from course.symbols import C8, B, C, D, F, N, W, W_link, bk, bm, bn, tk, tm, tn
from solutions._derived.hardware import critical_intensity
from solutions._kit import *  # noqa: F403 (the authoring vocabulary: solutions/_kit.py)
from solutions._kit import P

V5E, V6E, H100 = hw.TPU_V5E, hw.TPU_V6E, hw.H100
# The chips a student's variant may use (autograder/variants.py), the book's first where it names one.
TPUS = (V5E, hw.TPU_V5P, V6E, hw.TPU_V4P, hw.TPU_V3)
GPUS = (H100, hw.H200, hw.B200, hw.A100)
SECTION = "roofline/"

# --- the chapter's formulas, each once ------------------------------------------------------------
CRIT_V5E = V5E.bf16_flops_per_s / V5E.hbm_bytes_per_s  # 240.24 FLOPs/byte


def matmul_bytes(act: float, weight: float, out: float) -> sp.Expr:
    """HBM bytes of X[B,D] @ Y[D,F] -> Z[B,F] with the given bytes per element of each."""
    return act * B * D + weight * D * F + out * B * F


@functools.cache
def _critical_batch_solved() -> tuple[sp.Expr, tuple[sp.Symbol, ...]]:
    """2BDF/peak = bytes/bw solved for B once, with the bytes per element, peak and bandwidth as symbols too: a solve
    for each case took a sixth of a second, and the grader's draw of one student's CX2 or CX3 asked about a
    hundred."""
    given = sp.symbols("act weight out peak bw", positive=True)
    act, weight, out, peak, bw = given
    (solution,) = sp.solve(2 * B * D * F / peak - matmul_bytes(act, weight, out) / bw, B)
    return solution, given


@functools.cache  # the judge, the slips and the draws ask the same cases again
def critical_batch_exact(act_bytes: float, weight_bytes: float, out_bytes: float, peak: float,
                         bw: float) -> sp.Expr:
    """The exact batch where the matmul turns compute-bound, in D and F (peak and bandwidth as exact rationals)."""
    solution, given = _critical_batch_solved()
    values = (act_bytes, weight_bytes, out_bytes, sp.nsimplify(peak), sp.nsimplify(bw))
    return sp.together(solution.subs(dict(zip(given, values, strict=True))))


def critical_batch_limit(act_bytes: float, weight_bytes: float, out_bytes: float, peak: float,
                         bw: float) -> float:
    """The B << D, F limit of the exact solution: only the weight bytes matter."""
    return weight_bytes * peak / (2 * bw)


def critical_batch_reference(**probe: float) -> tuple[sp.Expr, float]:
    """CX3's reference: the exact B* (solved with exact rationals) and its B << D, F limit."""
    return critical_batch_exact(**probe), critical_batch_limit(**probe)


@functools.cache
def _crossover() -> Callable[..., float]:
    solution, given = _critical_batch_solved()
    return sp.lambdify((*given, D, F), solution)


def crossover_reference(D: float, F: float, peak: float, bw: float, act_bytes: float, weight_bytes: float,
                        out_bytes: float) -> float:
    """Exact B* for concrete D and F (Q3, and CX2's reference)."""
    return float(_crossover()(act_bytes, weight_bytes, out_bytes, peak, bw, D, F))


@functools.cache
def _public_crossovers() -> list[float]:
    return [crossover_reference(**p) for p in CROSSOVER_PROBES]


# CX2 and CX3's grading-time cases: peak and bandwidth rescaled, and the widths and bytes per element (integers, which
# the default draw keeps) drawn afresh, each on its own: an answer that wrote in bf16, or used D for F, fails most.
_widths_and_bytes = with_choices(D=WIDTHS, F=WIDTHS, act_bytes=BYTES_PER_ELEMENT, weight_bytes=BYTES_PER_ELEMENT,
                                 out_bytes=BYTES_PER_ELEMENT)
_bytes = with_choices(act_bytes=BYTES_PER_ELEMENT, weight_bytes=BYTES_PER_ELEMENT, out_bytes=BYTES_PER_ELEMENT)


def draw_crossover(rng: random.Random, probe: dict) -> dict:
    """CX2's grading-time cases: widths and bytes drawn afresh, peak and bandwidth rescaled, but never one whose B* is
    within 5% of a public case's (B* depends on little more than peak over bandwidth, so a table of the public
    outputs could be right), and always one with a crossover, a positive B*, as every public case has: where the
    weights' bytes alone outlast the math at every batch, solving for B gives a negative root, which no prompt
    asks for (a fifth of the cases drawn had one, and a student's positive symbol or guard lost its marks there).
    Where the math and the bytes grow alike with B there is no crossover at all: B* divides by zero, and the grader
    draws that case again, as it does any draw that raises."""
    public = _public_crossovers()
    while True:
        case = _widths_and_bytes(rng, probe)
        crossover = crossover_reference(**case)
        if crossover > 0 and all(abs(crossover / p - 1) > 0.05 for p in public):
            return case


def attainable_reference(B: list[float], D: float, F: float, peak: float, bw: float, act_bytes: float,
                         weight_bytes: float, out_bytes: float) -> list[float]:
    """CX2's reference: FLOPs / max(T_math, T_comms) at each batch size, one float each."""
    out = []
    for b in B:
        flops = 2 * b * D * F
        moved = act_bytes * b * D + weight_bytes * D * F + out_bytes * b * F
        out.append(flops / max(flops / peak, moved / bw))
    return out


WIDTH = {"float32": 4, "int32": 4, "int8": 1}


def measured_intensity(einsum: str, shapes: list[list[int]], dtype: str, out_dtype: str | None = None,
                       seed: int = 0) -> tuple[float, float, float]:
    """What XLA's CPU cost analysis reports for one contraction: 2 FLOPs per multiply-add over every
    index, and the bytes of both operands and the result at their own widths. (bf16 is skewed on
    CPU, so no probe uses it: see the chapter's traps.)"""
    inputs, out = einsum.split("->")
    sizes = {c: n for spec, shape in zip(inputs.split(","), shapes, strict=True) for c, n in zip(spec, shape,
                                                                                                  strict=True)}
    flops = 2 * math.prod(sizes.values())
    moved = WIDTH[dtype] * sum(math.prod(s) for s in shapes) + WIDTH[out_dtype or dtype] * math.prod(
        sizes[c] for c in out)
    return float(flops), float(moved), flops / moved


def draw_contraction(rng: random.Random, probe: dict) -> dict:
    """CX1's grading-time cases: the probe's contraction and dtypes, each index a fresh power of two from
    8 to 256 (an operand of at most 2**20 elements), other random data."""
    operands = probe["einsum"].split("->")[0].split(",")
    while True:
        size = {c: 2 ** rng.randint(3, 8) for c in sorted(set("".join(operands)))}
        shapes = [[size[c] for c in spec] for spec in operands]
        if max(math.prod(s) for s in shapes) <= 2**20:
            return dict(probe, shapes=shapes, seed=rng.randrange(2**31))


def random_batches(seed: int, n: int = 64) -> list[float]:
    """``n`` distinct batch sizes in [1, 512), random so that no formula fits them by accident."""
    return [float(b) for b in sorted(random.Random(seed).sample(range(1, 512), n))]


# --- the model answers (the release writes each into the notebook's solution cell) --------------------
def intensity(f, *args):
    """FLOPs, bytes accessed and their ratio, as XLA's cost model counts them for the compiled f(*args)."""
    cost = jax.jit(f).lower(*args).compile().cost_analysis()
    if isinstance(cost, list):  # one dict per program on older JAX releases
        cost = cost[0]
    return cost["flops"], cost["bytes accessed"], cost["flops"] / cost["bytes accessed"]


def attainable(B, D, F, peak, bw, act_bytes, weight_bytes, out_bytes):
    """The roofline: FLOPs / max(T_math, T_comms) at each batch size in B."""
    B = np.asarray(B, dtype=float)
    flops = 2 * B * D * F
    moved = act_bytes * B * D + weight_bytes * D * F + out_bytes * B * F
    return flops / np.maximum(flops / peak, moved / bw)


def crossover(D, F, peak, bw, act_bytes, weight_bytes, out_bytes):
    # 2*B*D*F/peak = (a*B*D + w*D*F + o*B*F)/bw, solved for B
    return weight_bytes * D * F * peak / (2 * D * F * bw - peak * (act_bytes * D + out_bytes * F))


def critical_batch(act_bytes, weight_bytes, out_bytes, peak, bw):
    """The batch B* where T_math = T_comms, exactly (a formula in D and F) and for B << D, F."""
    t_math = 2*B*D*F / peak
    t_comms = (act_bytes*B*D + weight_bytes*D*F + out_bytes*B*F) / bw
    exact = sp.solve(sp.Eq(t_math, t_comms), B)[0]
    limit = weight_bytes * peak / (2 * bw)
    return exact, limit


def split_matmul(x, y):
    """x @ y with the contraction D split over 8 devices: x[B, D_X] . y[D_X, F] -> [B, F] (replicated).
    Each device multiplies its slices; one psum (an AllReduce) adds the partial sums."""
    mesh = course.mesh(X=8)

    def block(x_block, y_block):  # x_block: f32[B, D/8], y_block: f32[D/8, F]
        partial_sum = x_block @ y_block  # f32[B, F]: this device's share
        return jax.lax.psum(partial_sum, "X")

    return jax.shard_map(block, mesh=mesh, in_specs=(P(None, "X"), P("X", None)), out_specs=P())(x, y)


def cx4_forgets_the_sum(x, y):
    return smap(lambda a, b: a @ b, X8, (P(None, "X"), P("X", None)), P(), check_vma=False)(x, y)


def cx4_gathers_everything(x, y):
    def block(a, b):
        return jax.lax.all_gather(a, "X", axis=1, tiled=True) @ jax.lax.all_gather(b, "X", axis=0, tiled=True)
    return smap(block, X8, (P(None, "X"), P("X", None)), P(), check_vma=False)(x, y)


# Typical wrong implementations, for the tests (each must fail).
def cx1_counts_multiply_adds_once(f, *args):
    cost = compiled_cost(f, *args)
    return cost["flops"] / 2, cost["bytes accessed"], cost["flops"] / 2 / cost["bytes accessed"]


def cx2_peak_everywhere(B, D, F, peak, bw, act_bytes, weight_bytes, out_bytes):
    return [peak for _ in B]


def cx2_leading_order(D, F, peak, bw, act_bytes, weight_bytes, out_bytes):
    return weight_bytes * peak / (2 * bw)


def cx3_without_output_bytes(act_bytes, weight_bytes, out_bytes, peak, bw):
    return critical_batch_reference(act_bytes=act_bytes, weight_bytes=weight_bytes, out_bytes=0, peak=peak, bw=bw)


Q3_D_LARGE, Q3_D_SMALL = 4096, 1024
# CX2's public cases: Q3's two matmuls on the book's v5e, then a v6e with float32 outputs, and a v5p with bf16 weights
# and float32 activations and outputs, D != F: every chip figure, width and byte count takes two values or more,
# so an answer that writes one in (the v5e's bandwidth, bf16 activations) fails a public case, as it fails most of
# the cases drawn at grading.
CX2_MATMULS = ((V5E, Q3_D_LARGE, Q3_D_LARGE, 2, 1, 2), (V5E, Q3_D_SMALL, Q3_D_SMALL, 2, 1, 2),
               (V6E, Q3_D_LARGE, Q3_D_LARGE, 2, 1, 4), (hw.TPU_V5P, Q3_D_LARGE, Q3_D_SMALL, 4, 2, 4))
CROSSOVER_PROBES = tuple(dict(D=d, F=f, peak=chip.bf16_flops_per_s, bw=chip.hbm_bytes_per_s, act_bytes=a,
                              weight_bytes=w, out_bytes=o) for chip, d, f, a, w, o in CX2_MATMULS)

# The book's printed answers, for the tests that compare them with ours (syllabus, pinned V2).
BOOK = {
    "ch01-e1-h100-time": 1.01e-3, "ch01-e1-v6e-time": 1.1e-3, "ch01-e3-critical-batch": 240,
    "ch01-e4-d-threshold": 8755, "ch01-e5-tile-intensity": 256, "ch01-e6-local-batch": 1024,
    "ch01-e6-global-tokens": 2_097_152, "ch01-e7-vpu-intensity": 3, "ch01-q1-critical-batch": 240,
    "ch01-q2-critical-batch": 120, "ch01-q4-limit": 2, "ch01-q5-critical-batch": 295,
    "ch01-e2-intensity-limit": 0.5, "ch01-q3-crossover-large": 136.09, "ch01-q3-crossover-small": 226.32,
}

# E7: one TensorCore's VPU rate (as hw gives it) over the chip's HBM bandwidth. The book says "about 3", which
# matches an older bandwidth figure: anything from the computed 2.5 up to 3 passes.
E7_INTENSITY = hw.TPU_V5P_VPU_FLOPS_PER_S / hw.TPU_V5P.hbm_bytes_per_s
E7_TOLERANCE = Tolerance(low=2.5 * 0.99, high=3.0 * 1.01)
E7_BOTH_CORES = hw.TPU_V5P.tensorcores_per_chip * E7_INTENSITY  # the rate doubled for the chip's two TensorCores

_bf16 = matmul_bytes(2, 2, 2)
_int8 = matmul_bytes(1, 1, 1)
_mixed = matmul_bytes(2, 1, 2)
_row_weights = B * D + B * D * F + B * F



# --- the exercises whose numbers each student is dealt (variants.py); the book's values first ----------------
def e1(flops: float) -> tuple[Number, ...]:
    """E1: time for ``flops`` bf16 FLOPs at peak on an H100 and a TPU v6e."""
    h100, v6e = flops / H100.bf16_flops_per_s, flops / V6E.bf16_flops_per_s
    return (
        Number(qid="ch01-e1-h100-time", points=1, section=SECTION + "#the-roofline-model",
               prompt=f"Seconds for {flops:.3g} bf16 FLOPs on an H100 at dense peak.",
               reference=h100, unit="s", tolerance=rate_tolerance(H100),
               slips=(Slip(flops / hw.H100_SPARSE_BF16_FLOPS_PER_S, "ratio:1/2",
                           "the datasheet's 1.979e15 assumes 2:4 sparsity; use the dense peak."),
                      Slip(h100 * 1e3, "unit:1000"))),
        Number(qid="ch01-e1-v6e-time", points=1, section=SECTION + "#the-roofline-model",
               prompt=f"Seconds for {flops:.3g} bf16 FLOPs on a TPU v6e at peak.",
               reference=v6e, unit="s", tolerance=rate_tolerance(V6E),
               slips=(Slip(v6e / 2, "ratio:1/2"), Slip(v6e * 1e6, "unit:1000000"))))


def e2(dtype: str) -> tuple[Formula | Number, ...]:
    """E2: the bytes of a dot product of two length-N vectors of ``dtype`` (scalar output of the same dtype), and
    its intensity as N grows: 2N FLOPs over 2bN bytes, 1/b FLOP per byte for b bytes per element."""
    b = hw.BYTES_PER_ELEMENT[dtype]
    moved = 2 * b * N + b
    limit = float(sp.limit((2 * N - 1) / moved, N, sp.oo))
    other = 1 if b == 2 else 2  # a width miscounted: bf16's one byte too few, or any other dtype's as bf16's
    width = f"one {dtype} element is {b} byte{'s' if b > 1 else ''}."
    inverse = 1 / limit  # bytes per FLOP
    byte_slips = (Slip(2 * other * N + other, f"ratio:{sp.Rational(other, b)}", width),)
    limit_slips = [Slip(1 / other, slip_code(1 / other, limit, ONE_PERCENT), width, maybe=True)]
    if b != 1:  # at one byte per element the inverse is the answer itself
        limit_slips.insert(0, Slip(inverse, slip_code(inverse, limit, ONE_PERCENT),
                                   "intensity is FLOPs divided by bytes, not bytes by FLOPs."))
    return (
        Formula(qid="ch01-e2-dot-bytes", points=1, section=SECTION + "#arithmetic-intensity",
                prompt=f"Bytes read and written by a {dtype} dot product of length-N vectors (scalar {dtype} output).",
                reference=moved, symbols="N", counts="N",
                slips=(*byte_slips, Slip(2 * b * N, "lower_terms", "the scalar result is written too."))),
        Number(qid="ch01-e2-intensity-limit", points=1, section=SECTION + "#arithmetic-intensity",
               prompt=f"The {dtype} dot product's FLOPs per byte as N grows large.",
               reference=limit, tolerance=ONE_PERCENT, slips=tuple(limit_slips)))


def q4(dtype: str) -> tuple[Formula | Number, ...]:
    """Q4: a different D x F weight matrix for every batch row, all operands of ``dtype``: 2BDF FLOPs over b(BD + BDF
    + BF) bytes, which tends to 2/b for large D and F, whatever the batch."""
    b = hw.BYTES_PER_ELEMENT[dtype]
    intensity = 2 * B * D * F / (b * _row_weights)
    limit = float(sp.limit(sp.limit(intensity, D, sp.oo), F, sp.oo))
    return (
        Formula(qid="ch01-q4-intensity", points=1, section=SECTION + "#worked-problems",
                prompt=f"Intensity of {dtype}[B,D] x {dtype}[B,D,F] -> {dtype}[B,F] (one D x F matrix per row).",
                reference=intensity, symbols="B D F",
                slips=(Slip(2 * B * D * F / (b * (B * D + D * F + B * F)), "extra_symbol:B",
                            "each row has its own weights: B*D*F elements of them."),)),
        Number(qid="ch01-q4-limit", points=1, section=SECTION + "#worked-problems",
               prompt=f"That {dtype} intensity for large D and F.",
               reference=limit, tolerance=ONE_PERCENT,
               slips=(Slip(limit / 2, "ratio:1/2"),)))


def e3(chip: hw.TPU) -> tuple[Number, ...]:
    """E3: the batch above which a bf16 matmul is compute-bound on ``chip``."""
    crit = critical_intensity(chip)
    return (Number(qid="ch01-e3-critical-batch", points=1, section=SECTION + "#matrix-multiplication",
                   prompt=f"The token batch above which a bf16 matmul is compute-bound on {chip.name}.",
                   reference=crit, tolerance=rate_tolerance(chip, ONE_PERCENT, of=critical_intensity),
                   slips=(Slip(crit / 2, "ratio:1/2"), Slip(crit * 2, "ratio:2"))),)


def e4_threshold(chip: hw.TPU) -> float:
    """E4's D: each chip's half of the FLOPs takes as long as its partial sums over one link, 2C / W_link."""
    return 2 * chip.bf16_flops_per_s / chip.ici_bytes_per_s_per_link


def e4(chip: hw.TPU) -> tuple[Number, ...]:
    """E4: the D above which a contraction split over two ``chip``s, partial sums over one link, is
    compute-bound."""
    per_half = chip.bf16_flops_per_s / chip.ici_bytes_per_s_per_link
    return (Number(qid="ch01-e4-d-threshold", points=1, section=SECTION + "#network-communication-rooflines",
                   prompt=f"The D above which the two-chip matmul is compute-bound ({chip.name}, one link each way).",
                   reference=2 * per_half, tolerance=rate_tolerance(chip, ONE_PERCENT, of=e4_threshold),
                   slips=(Slip(per_half, "ratio:1/2", "that is the condition on D/2, each chip's half."),)),)


def e5(bm: int, bn: int) -> tuple[Number, ...]:
    """E5: the on-chip intensity of bm x bn output tiles over a long contraction."""
    tile = bm * bn / (bm + bn)
    return (Number(qid="ch01-e5-tile-intensity", points=1, section=SECTION + "#matrix-multiplication",
                   prompt=f"Approximate on-chip intensity with bm = {bm}, bn = {bn} (long contraction).",
                   reference=tile, tolerance=ONE_PERCENT, slips=(Slip(2 * tile, "ratio:2"),)),)


def e6(sequences: int, seq_len: int, gpus: int) -> tuple[Number, ...]:
    """E6: tokens, not sequences, in a batch and per GPU."""
    tokens = sequences * seq_len
    tokens_only = slip_code(sequences, tokens, THREE_FIGURES)  # about 10^-d only where seq_len is near 10^d
    return (
        Number(qid="ch01-e6-global-tokens", points=1, section=SECTION + "#matrix-multiplication",
               prompt=f"Tokens in a batch of {sequences} sequences of {seq_len} tokens.",
               reference=tokens, tolerance=THREE_FIGURES, slips=(Slip(sequences, tokens_only),)),
        Number(qid="ch01-e6-local-batch", points=1, section=SECTION + "#matrix-multiplication",
               prompt=f"Tokens per GPU when that batch is split over {gpus} GPUs (pure data parallelism).",
               reference=tokens / gpus, tolerance=THREE_FIGURES,
               slips=(Slip(sequences / gpus, tokens_only, "count tokens, not sequences."),)))


def q1(chip: hw.TPU) -> tuple[Number, ...]:
    """Q1: the batch above which an all-int8 matmul is compute-bound (int8 peak)."""
    batch = chip.int8_ops_per_s / chip.hbm_bytes_per_s / 2
    return (Number(qid="ch01-q1-critical-batch", points=1, section=SECTION + "#worked-problems",
                   prompt=f"The batch above which the all-int8 matmul is compute-bound on {chip.name} (int8 peak).",
                   reference=batch, tolerance=rate_tolerance(chip, ONE_PERCENT,
                                                             of=lambda c: c.int8_ops_per_s / c.hbm_bytes_per_s),
                   slips=(Slip(2 * batch, "ratio:2", "the int8 intensity is about 2B, not B."),)),)


def q2(chip: hw.TPU) -> tuple[Number, ...]:
    """Q2: int8 weights halve the bytes per FLOP, and so the critical batch."""
    crit = critical_intensity(chip)
    return (Number(qid="ch01-q2-critical-batch", points=1, section=SECTION + "#worked-problems",
                   prompt=f"The batch above which that matmul is compute-bound on {chip.name}.",
                   reference=crit / 2, tolerance=rate_tolerance(chip, ONE_PERCENT, of=critical_intensity),
                   slips=(Slip(crit, "ratio:2", "int8 weights halve the bytes per FLOP."),)),)


def q3(chip: hw.TPU) -> tuple[Number, ...]:
    """Q3: the exact crossovers of the Q2 matmul for two square sizes."""
    crit = critical_intensity(chip)

    def crossover_on(d: int) -> Callable[[hw.TPU], float]:
        return lambda c: crossover_reference(d, d, c.bf16_flops_per_s, c.hbm_bytes_per_s, 2, 1, 2)

    exact = [crossover_on(d)(chip) for d in (Q3_D_LARGE, Q3_D_SMALL)]
    return tuple(
        Number(qid=f"ch01-q3-crossover-{size}", points=1, section=SECTION + "#worked-problems",
               prompt=f"Exact crossover batch of the Q2 matmul on {chip.name} with D = F = {d}.",
               reference=b, tolerance=rate_tolerance(chip, Tolerance(rtol=0.005), of=crossover_on(d)),
               slips=(Slip(crit / 2, diagnosis, "that is the B << D limit; use the exact byte count."),))
        for size, d, b, diagnosis in (("large", Q3_D_LARGE, exact[0], "close"),
                                      ("small", Q3_D_SMALL, exact[1], "not_equal")))


def q3_valid(chip: hw.TPU) -> bool:
    """The smaller matmul must turn compute-bound at all (2D*W > 4C: not on a v6e at D = 1024), and its
    B << D limit stay a slip that is not close to the answer."""
    small = crossover_reference(Q3_D_SMALL, Q3_D_SMALL, chip.bf16_flops_per_s, chip.hbm_bytes_per_s, 2, 1, 2)
    return small > 0 and abs(small / (critical_intensity(chip) / 2) - 1) > 0.25


def q5(gpu: hw.GPU) -> tuple[Number, ...]:
    """Q5: the critical batch of a GPU, at its dense bf16 peak."""
    crit = critical_intensity(gpu)
    return (Number(qid="ch01-q5-critical-batch", points=1, section=SECTION + "#worked-problems",
                   prompt=f"The batch above which a bf16 matmul is compute-bound on one {gpu.name} (dense peak).",
                   reference=crit, tolerance=rate_tolerance(gpu, TWO_PERCENT, of=critical_intensity),
                   slips=(Slip(2 * crit, "ratio:2", "datasheets quote peaks with 2:4 sparsity; use the dense one."),)),)


def cx4(B: int, D: int, F: int) -> tuple[Program, ...]:
    """CX4: E4's split of the contraction on 8 devices, for a student's shapes."""
    return (Program(qid="ch01-cx4-split-matmul", points=3, section=SECTION + "#network-communication-rooflines",
                    prompt=f"x[{B}, {D}] @ y[{D}, {F}] with the contraction split over 8 devices, partial sums "
                           "combined once.",
                    spec=ProgramSpec(mesh=X8, einsum="bd,df->bf",
                                     operands=(Operand((B, D), (None, "X")), Operand((D, F), ("X", None))),
                                     out_spec=(), collectives={"all-reduce": 1}),
                    model=split_matmul,
                    slips=(Slip(cx4_forgets_the_sum, "partial_sum:X"),
                           Slip(cx4_gathers_everything, "collectives:all-gather"))),)


CHAPTER = Chapter("ch01_rooflines", "Rooflines", (
    # E1: time for a number of FLOPs at peak.
    vary("ch01-e1", e1, flops=values(1e12, 4e12, 2.5e11, 8e12, 6e11)),
    # E2: dot product of two bf16 vectors of length N.
    Formula(qid="ch01-e2-dot-flops", points=1, section=SECTION + "#arithmetic-intensity",
            prompt="FLOPs of a dot product of two length-N vectors.",
            reference=2 * N - 1, symbols="N", counts="N",
            slips=(Slip(2 * N, "lower_terms", "N products need only N-1 additions."),
                   Slip(N, "not_equivalent"))),
    vary("ch01-e2", e2, dtype=values("bf16", "fp32", "int8")),
    Choice(qid="ch01-e2-bound", points=1, section=SECTION + "#arithmetic-intensity",
           prompt="Is a large dot product like E2's compute-bound or memory-bound on a TPU?",
           reference="memory", options=("compute", "memory"),
           slips=(Slip("compute", "wrong_option",
                       "compare its FLOPs per byte with the chip's critical intensity: peak FLOP/s over HBM B/s."),)),
    # E3: bf16 matmul on TPU v5e.
    Formula(qid="ch01-e3-intensity", points=2, section=SECTION + "#matrix-multiplication",
            prompt="Exact arithmetic intensity of a bf16 matmul X[B,D] @ Y[D,F].",
            reference=2 * B * D * F / _bf16, symbols="B D F",
            accept=(Accept(B, 0.5, "That is the B << D, F limit; here the exact intensity is asked."),),
            slips=(Slip(4 * B * D * F / _bf16, "ratio:2", "bf16 takes 2 bytes per element."),
                   Slip(2 * B * D * F / (2 * B * D + 2 * D * F), "missing_symbol:D", "the output is written too."))),
    Formula(qid="ch01-e3-intensity-limit", points=1, section=SECTION + "#matrix-multiplication",
            prompt="The intensity of the bf16 matmul to leading order when B << D, F.",
            reference=B, symbols="B D F",
            slips=(Slip(2 * B, "ratio:2"), Slip(D, "extra_symbol:D"))),
    vary("ch01-e3", e3, chip=chips(*TPUS)),
    # E4: contraction split over two chips, partial sums over one link.
    Formula(qid="ch01-e4-t-math", points=1, section=SECTION + "#network-communication-rooflines",
            prompt="Compute time per chip when D is split over 2 chips (peak C).",
            reference=B * D * F / C, symbols="B D F C W_link",
            slips=(Slip(2 * B * D * F / C, "ratio:2", "each chip does half of the 2*B*D*F FLOPs."),)),
    Formula(qid="ch01-e4-t-comms", points=1, section=SECTION + "#network-communication-rooflines",
            prompt="Time to send the bf16[B, F] partial sums over a link of W_link bytes/s.",
            reference=2 * B * F / W_link, symbols="B D F C W_link",
            slips=(Slip(B * F / W_link, "ratio:1/2", "bf16 takes 2 bytes per element."),
                   Slip(2 * B * D / W_link, "extra_symbol:D"))),
    vary("ch01-e4", e4, chip=chips(*TPUS)),
    # E5: tiled matmul.
    Formula(qid="ch01-e5-tiled-bytes", points=2, section=SECTION + "#matrix-multiplication",
            prompt="HBM bytes of a bf16 tiled matmul with tiles bm x bk x bn and tile counts tm, tn, tk.",
            reference=2 * tm * tn * (tk * (bm * bk + bk * bn) + bm * bn), symbols="bm bk bn tm tn tk",
            slips=(Slip(tm * tn * (tk * (bm * bk + bk * bn) + bm * bn), "ratio:1/2"),
                   Slip(2 * tm * tn * tk * (bm * bk + bk * bn), "lower_terms",
                        "each output tile is written once as well."))),
    vary("ch01-e5", e5, bm=values(512, 256, 1024), bn=values(512, 128, 2048)),
    # E6: tokens per GPU.
    vary("ch01-e6", e6, sequences=values(512, 256, 1024), seq_len=values(4096, 2048, 8192),
         gpus=values(2048, 1024, 512)),
    # E7: vector unit.
    Number(qid="ch01-e7-vpu-intensity", points=1, section=SECTION + "#arithmetic-intensity",
           prompt="Critical intensity of TPU v5p vector work: one TensorCore's VPU FLOP/s "
                  "(hw.TPU_V5P_VPU_FLOPS_PER_S, as given) over the chip's HBM bandwidth.",
           reference=E7_INTENSITY, tolerance=E7_TOLERANCE,
           slips=(Slip(hw.TPU_V5P.hbm_bytes_per_s / hw.TPU_V5P_VPU_FLOPS_PER_S, "magnitude:-1",
                       "divide FLOP/s by bytes/s, not the other way round."),
                  Slip(E7_BOTH_CORES, slip_code(E7_BOTH_CORES, E7_INTENSITY, E7_TOLERANCE),
                       "the question takes one TensorCore's VPU rate, as hw gives it, not doubled for the "
                       "v5p's two.", maybe=True))),
    # Q1: all-int8 matmul.
    Formula(qid="ch01-q1-bytes", points=1, section=SECTION + "#worked-problems",
            prompt="Bytes read and written by an all-int8 matmul X[B,D] @ Y[D,F] -> Z[B,F].",
            reference=_int8, symbols="B D F",
            slips=(Slip(2 * _int8, "ratio:2", "int8 is 1 byte per element."),
                   Slip(B * D + D * F, "term_missing", "the output is written too."))),
    Formula(qid="ch01-q1-ops", points=1, section=SECTION + "#worked-problems",
            prompt="Integer operations of that matmul.",
            reference=2 * B * D * F, symbols="B D F",
            slips=(Slip(B * D * F, "ratio:1/2", "each multiply comes with an add."),)),
    vary("ch01-q1", q1, chip=chips(*TPUS)),
    Formula(qid="ch01-q1-t-lower", points=1, section=SECTION + "#worked-problems",
            prompt="Lower bound on the runtime (int8 peak C8, HBM bandwidth W).",
            reference=sp.Max(2 * B * D * F / C8, _int8 / W), symbols="B D F C8 W",
            slips=(Slip(2 * B * D * F / C8 + _int8 / W, "partly",
                        "that is the upper bound, with no overlap."),)),
    Formula(qid="ch01-q1-t-upper", points=1, section=SECTION + "#worked-problems",
            prompt="Upper bound on the runtime (no overlap of compute and memory traffic).",
            reference=2 * B * D * F / C8 + _int8 / W, symbols="B D F C8 W",
            slips=(Slip(sp.Max(2 * B * D * F / C8, _int8 / W), "not_equivalent",
                        "that is the lower bound, with perfect overlap."),)),
    # Q2: int8 weights, bf16 activations and compute.
    Formula(qid="ch01-q2-intensity", points=1, section=SECTION + "#worked-problems",
            prompt="Exact intensity of bf16[B,D] @ int8[D,F] -> bf16[B,F].",
            reference=2 * B * D * F / _mixed, symbols="B D F",
            slips=(Slip(2 * B * D * F / _bf16, "not_equivalent", "the weights are int8: 1 byte each."),)),
    vary("ch01-q2", q2, chip=chips(*TPUS)),
    # Q3: exact crossovers for D = F.
    vary("ch01-q3", q3, chip=chips(*TPUS), valid=q3_valid),
    Choice(qid="ch01-q3-sooner", points=1, section=SECTION + "#worked-problems",
           prompt="Which matmul reaches peak throughput at the smaller batch?",
           reference="D=F=4096", options=("D=F=4096", "D=F=1024"),
           slips=(Slip("D=F=1024", "wrong_option"),)),
    # Q4: a different weight matrix per batch row.
    vary("ch01-q4", q4, dtype=values("int8", "bf16", "fp32")),
    Choice(qid="ch01-q4-bound", points=1, section=SECTION + "#worked-problems",
           prompt="Is it compute-bound for a large enough batch?",
           reference="never", options=("yes", "never"),
           slips=(Slip("yes", "wrong_option", "its intensity does not grow with B."),)),
    # Q5: H100.
    vary("ch01-q5", q5, gpu=chips(*GPUS)),
    # CX1-CX3: functions the student writes, run on public test cases.
    Function(qid="ch01-cx1-intensity", points=3, section=SECTION + "#arithmetic-intensity",
             prompt="intensity(f, *args): FLOPs, bytes and FLOPs/byte from XLA's cost analysis.",
             reference=measured_intensity, builder="contraction", model=intensity, draw=draw_contraction,
             probes=(dict(einsum="bd,df->bf", shapes=[[128, 1024], [1024, 2048]], dtype="float32"),
                     dict(einsum="bd,df->bf", shapes=[[128, 1024], [1024, 2048]], dtype="int8"),
                     dict(einsum="bd,df->bf", shapes=[[128, 1024], [1024, 2048]], dtype="int8",
                          out_dtype="int32"),
                     dict(einsum="bd,bdf->bf", shapes=[[16, 64], [16, 64, 128]], dtype="float32")),
             output=(Output("number", tolerance=EXACT),) * 3,
             slips=(Slip(cx1_counts_multiply_adds_once, "ratio:1/2"),)),
    Function(qid="ch01-cx2-attainable", points=2, section=SECTION + "#visualizing-rooflines",
             prompt="attainable(B, D, F, peak, bw, act_bytes, weight_bytes, out_bytes): the roofline curve.",
             reference=attainable_reference, model=attainable,
             probes=tuple(dict(B=random_batches(seed), **p) for seed, p in enumerate(CROSSOVER_PROBES, start=1)),
             draw=_widths_and_bytes, cases=6,
             output=Output("number", tolerance=Tolerance(rtol=1e-6)),
             slips=(Slip(cx2_peak_everywhere, "wrong_elements"),)),
    Function(qid="ch01-cx2-crossover", points=1, section=SECTION + "#visualizing-rooflines",
             prompt="crossover(D, F, peak, bw, act_bytes, weight_bytes, out_bytes): the exact B*.",
             reference=crossover_reference, model=crossover, probes=CROSSOVER_PROBES, draw=draw_crossover, cases=6,
             output=Output("number", tolerance=Tolerance(rtol=0.005)),
             slips=(Slip(cx2_leading_order, "close"),)),
    Function(qid="ch01-cx3-critical-batch", points=2, section=SECTION + "#matrix-multiplication",
             prompt="critical_batch(act_bytes, weight_bytes, out_bytes, peak, bw): exact B* in D, F and its limit.",
             reference=critical_batch_reference, model=critical_batch,
             probes=tuple(dict(act_bytes=a, weight_bytes=w, out_bytes=o, peak=pk, bw=bw) for a, w, o, pk, bw in (
                 (2, 2, 2, V5E.bf16_flops_per_s, V5E.hbm_bytes_per_s),
                 (1, 1, 1, V5E.int8_ops_per_s, V5E.hbm_bytes_per_s),
                 (2, 1, 2, V5E.bf16_flops_per_s, V5E.hbm_bytes_per_s),
                 (2, 2, 2, H100.bf16_flops_per_s, H100.hbm_bytes_per_s))), draw=_bytes,
             output=(Output("formula", symbols="D F"), Output("number", tolerance=Tolerance(rtol=0.001))),
             slips=(Slip(cx3_without_output_bytes, "missing_symbol:D"),)),
    # CX4: the E4 split, on 8 simulated devices.
    vary("ch01-cx4", cx4, B=values(64, 32, 128), D=values(256, 512), F=values(128, 64)),
))
