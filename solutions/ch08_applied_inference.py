"""Chapter 8, Serving LLaMA 3-70B: every graded question of the chapter, as records with references.

Book: Part 8 "Serving LLaMA 3-70B on TPUs", https://jax-ml.github.io/scaling-book/applied-inference/
References are computed from ``solutions._derived`` (the inference cost model), ``course.models`` and
``course.hardware``; where the book prints a rounded or differently-based value, the tolerance admits
it and ``BOOK`` records it for the tests. Labels follow the syllabus: E1 the cost table, IQ1-IQ13 the
chapter's inline questions, W1-W3 its worked problems (no book answers: DERIVED), CX1-CX4 coding
exercises.

Like the book, the chapter takes LLaMA 3-70B as 70e9 parameters (``inf.LLAMA3_70B_PARAMS_BOOK``) and
LLaMA 3.1-405B as 405e9; the exact counts of ``course.models`` would move the integer batch sizes.
"""

from __future__ import annotations

import math
import random

import numpy as np
import sympy as sp

import course
from autograder.kinds.function import vary
from autograder.numbers import Tolerance
from autograder.questions import Chapter, Choice, Formula, Function, Operand, Output, Program, ProgramSpec, Slip
from course import hardware as hw
from course.symbols import B, G, N, P, symbol
from solutions._derived import inference as inf
from solutions._derived import models as m
from solutions._kit import EXACT, ONE_PERCENT, THREE_FIGURES, jax, jnp, number, smap
from solutions._kit import P as P_  # PartitionSpec: P is the parameter count's symbol here

V5E = hw.TPU_V5E
SECTION = "applied-inference/"
BF16, INT8, INT4 = hw.BYTES_PER_ELEMENT["bf16"], hw.BYTES_PER_ELEMENT["int8"], 0.5
C_BF16, W_V5E, HBM = V5E.bf16_flops_per_s, V5E.hbm_bytes_per_s, V5E.hbm_bytes
t_pre, t_step = symbol("t_pre"), symbol("t_step")

_story = SECTION + "#whats-the-llama-serving-story"
_prefill = SECTION + "#what-about-prefill"
_pareto = SECTION + "#visualizing-the-latency-throughput-tradeoff"
_wp = SECTION + "#worked-problems"

# --- E1: FLOPs per dollar ------------------------------------------------------------------------------
PRICE = hw.PRICE_USD_PER_CHIP_HOUR
E1 = {name: inf.flops_per_dollar(hw.by_name(name).bf16_flops_per_s, PRICE[name]) for name in PRICE}

# --- IQ1-IQ4: LLaMA 3-70B, int8 weights and cache -----------------------------------------------------
L70 = m.LLAMA3_70B
P70 = inf.LLAMA3_70B_PARAMS_BOOK
KV8 = m.kv_bytes_per_token_of(L70, INT8)  # bytes per token, int8
IQ1_CONTEXT, IQ1_SEQS = 32_768, 240
IQ1_SEQ = KV8 * IQ1_CONTEXT
IQ1_TOTAL = IQ1_SEQS * IQ1_SEQ
IQ1_CHIPS = math.ceil(inf.min_chips(INT8 * P70 + IQ1_TOTAL))
IQ2_BATCH, IQ2_CONTEXT = 32, 8192
IQ2_KV = IQ2_BATCH * KV8 * IQ2_CONTEXT
IQ2_TOTAL = INT8 * P70 + IQ2_KV
IQ2_SLICE = inf.smallest_slice(IQ2_TOTAL)
SLICE_OPTIONS = ("2x2", "4x2", "4x4", "4x8", "8x8")


def iq3_step(chips: int) -> float:
    return inf.decode_step_s(IQ2_BATCH, KV8 * IQ2_CONTEXT, INT8 * P70, P70, chips, C_BF16, W_V5E)


IQ3_STEP_8 = iq3_step(8)
IQ3_TOKENS = inf.tokens_per_s(IQ2_BATCH, IQ3_STEP_8)
IQ3_PER_CHIP = IQ3_TOKENS / 8
ALPHA = inf.ici_intensity()
IQ3_TP = inf.tp_limit_compute(L70.F, ALPHA, n_axes=2)
IQ3_STEP_16 = iq3_step(16)
IQ4 = inf.critical_batch(C_BF16, W_V5E, INT8)

# --- IQ5-IQ8: which dtype, which slice, how many queries ----------------------------------------------
CONTEXT = 8192
DTYPES = {"bf16": BF16, "int8": INT8, "int4": INT4}  # weights and cache in the same precision
STEP_FULL = inf.hbm_full_step_s(V5E)  # a step that reads all of HBM: 16e9 / 8.2e11
DECODE = inf.MEDIAN_DECODE_TOKENS


def chips_for(dtype: str, double: bool = False) -> int:
    """The smallest legal slice for the weights alone (IQ5); ``double``: the next one up (IQ8)."""
    chips = inf.V5E_SLICES[inf.smallest_slice(DTYPES[dtype] * P70)]
    return 2 * chips if double else chips


def batch_for(dtype: str, chips: int) -> int:
    return inf.max_batch(HBM, chips, DTYPES[dtype] * P70, m.kv_bytes_per_token_of(L70, DTYPES[dtype]) * CONTEXT)


IQ5_BATCH = {d: batch_for(d, chips_for(d)) for d in DTYPES}  # 43 in every row
IQ6_DECODE_S = DECODE * STEP_FULL
IQ6_INT4_WEIGHTS = INT4 * P70 / (chips_for("int4") * W_V5E)
IQ7 = {d: inf.queries_per_s_per_chip(IQ5_BATCH[d], STEP_FULL, DECODE, chips_for(d)) for d in DTYPES}
IQ8_BATCH = {d: batch_for(d, chips_for(d, double=True)) for d in DTYPES}  # 138 in every row
IQ8 = {d: inf.queries_per_s_per_chip(IQ8_BATCH[d], STEP_FULL, DECODE, chips_for(d, double=True)) for d in DTYPES}
# DERIVED: at IQ8's batch, int4 weights with bf16 arithmetic are FLOP-bound (critical batch 60), so the
# HBM-full step understates it; the book's QPS assumes a bandwidth-bound step throughout.
IQ8_INT4 = inf.decode_parts_s(IQ8_BATCH["int4"], m.kv_bytes_per_token_of(L70, INT4) * CONTEXT, INT4 * P70, P70,
                              chips_for("int4", double=True), C_BF16, W_V5E)
IQ8_INT4_BOUND = "flops" if IQ8_INT4["flops"] > IQ8_INT4["weights"] else "weights"

# --- IQ9: bf16 on a 4x8, one matmul of a decode step --------------------------------------------------
IQ9_B, IQ9_Y = 64, 32
IQ9_TP_MEMORY = inf.tp_limit_memory(L70.F, IQ9_B, inf.BETA_BOOK)
IQ9 = inf.megatron_times_s(IQ9_B, L70.D, L70.F, IQ9_Y, C_BF16, W_V5E, V5E.ici_bidirectional_bytes_per_s)
IQ9_BOUND = max(IQ9, key=IQ9.get)

# --- IQ10-IQ12: prefill, continuous batching, disaggregation ------------------------------------------
IQ10_TOKENS, IQ10_CHIPS = 8192, 16
IQ10 = inf.prefill_s(P70, IQ10_TOKENS, IQ10_CHIPS, C_BF16, inf.PREFILL_MFU)
IQ11_B, IQ11_P, IQ11_G = 32, 8192, 4096
IQ11_FINISHED = IQ11_B / IQ11_G
IQ11_EVICTED = inf.evicted_tokens_per_step(IQ11_B, IQ11_P, IQ11_G)
IQ11_FORMULA = inf.evicted_tokens_per_step(B, P, G)
IQ12_B = 32
IQ12 = inf.prefill_to_generate_servers(IQ12_B, IQ10, STEP_FULL, DECODE)
IQ12_FORMULA = inf.prefill_to_generate_servers(B, t_pre, t_step, G)

# --- IQ13: the latency-throughput frontier, int8 on 16 chips ------------------------------------------
IQ13_CHIPS, IQ13_CONTEXT, IQ13_PLATEAU_B = 16, 2048, 120


def frontier_point(batch: int, context: int = IQ13_CONTEXT) -> tuple[float, float]:
    """(seconds per step, tokens per second per chip) of int8 LLaMA 3-70B on 16 v5e, bf16 math."""
    step = inf.decode_step_s(batch, KV8 * context, INT8 * P70, P70, IQ13_CHIPS, C_BF16, W_V5E)
    return step, batch / step / IQ13_CHIPS


IQ13_LATENCY = frontier_point(1)[0]
IQ13_PLATEAU = frontier_point(IQ13_PLATEAU_B)[1] / 1e3  # tokens per ms per chip

# --- W1-W3: LLaMA 3-8B and 3.1-405B (no book answers) ---------------------------------------------------
P405 = inf.LLAMA31_405B_PARAMS_BOOK
W1_FLOPS = 2 * P405
W1_FLOP_BOUND = sp.nsimplify(W1_FLOPS) / (N * sp.nsimplify(C_BF16))
W1_HBM_BOUND = sp.nsimplify(INT8 * P405) / (N * sp.nsimplify(W_V5E))
L8 = m.LLAMA3_8B
W2_BATCH = 240
W2_KV = m.kv_bytes_per_token_of(L8, INT8)
W2_TOTAL = INT8 * m.params_of(L8) + W2_BATCH * W2_KV * CONTEXT
W2_SLICE = inf.smallest_slice(W2_TOTAL)
L405 = m.LLAMA31_405B
W3_LIMIT_S = 0.015
W3_KV = m.kv_bytes_per_token_of(L405, INT8) * CONTEXT
W3_MIN_CHIPS = INT8 * P405 / (W3_LIMIT_S * W_V5E)
W3_SLICE = next(name for name, n in sorted(inf.V5E_SLICES.items(), key=lambda kv: kv[1]) if n >= W3_MIN_CHIPS)
W3_CHIPS = inf.V5E_SLICES[W3_SLICE]
W3_MIN_STEP = INT8 * P405 / (W3_CHIPS * W_V5E)


def w3_batch(with_flops: bool) -> int:
    """The largest batch whose decode step stays within 15 ms on the 8x8 (and fits in its HBM)."""
    fits = inf.max_batch(HBM, W3_CHIPS, INT8 * P405, W3_KV)
    for b in range(fits, 0, -1):
        step = (inf.decode_step_s(b, W3_KV, INT8 * P405, P405, W3_CHIPS, C_BF16, W_V5E) if with_flops
                else inf.decode_step_memory_s(b, W3_KV, INT8 * P405, W3_CHIPS, W_V5E))
        if step <= W3_LIMIT_S:
            return b
    return 0


W3_BATCH_HBM, W3_BATCH_FLOPS = w3_batch(False), w3_batch(True)

# The book's printed answers (syllabus, pinned V2), for the tests that compare them with ours.
BOOK = {
    "ch08-e1-h100": 3.3e17, "ch08-e1-v5p": 3.9e17, "ch08-e1-v5e": 5.8e17,
    "ch08-iq1-kv-per-token": 160e3, "ch08-iq1-kv-32k": 5.3e9, "ch08-iq1-kv-240": 1.3e12, "ch08-iq1-chips": 86,
    "ch08-iq2-kv-bytes": 41.9e9, "ch08-iq2-total-bytes": 112e9, "ch08-iq3-step-4x2": 17e-3,
    "ch08-iq3-tokens-per-s": 1882, "ch08-iq3-per-chip": 235, "ch08-iq3-tp-limit": 26, "ch08-iq3-step-4x4": 8.5e-3,
    "ch08-iq4-int8-weights": 120, "ch08-iq5-sequences": 43, "ch08-iq6-step-full": 19e-3, "ch08-iq6-decode-time": 9,
    "ch08-iq6-int4-weights": 10e-3, "ch08-iq7-bf16": 0.27, "ch08-iq7-int8": 0.55, "ch08-iq7-int4": 1.11,
    "ch08-iq8-bf16": 0.44, "ch08-iq8-int8": 0.90, "ch08-iq8-int4": 1.80,
    "ch08-iq9-tp-memory": 56, "ch08-iq9-t-ici": 11e-6, "ch08-iq9-t-hbm": 18e-6, "ch08-iq9-t-math": 4e-6,
    "ch08-iq10-prefill": 0.91, "ch08-iq12-ratio": 2.99, "ch08-iq13-latency-b1": 5.5e-3, "ch08-iq13-plateau": 1.0,
}


# --- CX1: a serving planner --------------------------------------------------------------------------

def serving_plan(weight_bytes, kv_bytes_per_token, context, hbm_per_chip, hbm_bytes_per_s, decode_tokens, slices):
    """On the smallest slice in ``slices`` (chip counts) that holds the weights, fill HBM with caches:
    (chips, free HBM bytes, max batch, bandwidth-bound step seconds, queries/s per chip)."""
    chips = min(n for n in slices if n * hbm_per_chip >= weight_bytes)
    free = chips * hbm_per_chip - weight_bytes
    batch = math.floor(free / (kv_bytes_per_token * context))
    step = (batch * kv_bytes_per_token * context + weight_bytes) / (chips * hbm_bytes_per_s)
    return float(chips), float(free), float(batch), step, batch / (step * decode_tokens * chips)


def cx1_ignores_caches_in_step(weight_bytes, kv_bytes_per_token, context, hbm_per_chip, hbm_bytes_per_s,
                               decode_tokens, slices):
    chips, free, batch, _, _ = serving_plan(weight_bytes, kv_bytes_per_token, context, hbm_per_chip,
                                            hbm_bytes_per_s, decode_tokens, slices)
    step = weight_bytes / (chips * hbm_bytes_per_s)
    return chips, free, batch, step, batch / (step * decode_tokens * chips)


def cx1_ignores_slices(weight_bytes, kv_bytes_per_token, context, hbm_per_chip, hbm_bytes_per_s, decode_tokens,
                      slices):
    """Rounds the chip count up to a power of two, ignoring the legal slices (2 chips is not a v5e slice)."""
    chips = 2 ** math.ceil(math.log2(weight_bytes / hbm_per_chip))
    return serving_plan(weight_bytes, kv_bytes_per_token, context, hbm_per_chip, hbm_bytes_per_s, decode_tokens,
                        [chips])


SLICE_CHIPS = sorted(inf.V5E_SLICES.values())


def _plan_probe(dtype: str, double: bool = False) -> dict:
    slices = [n for n in SLICE_CHIPS if n >= chips_for(dtype, double)]
    return dict(weight_bytes=DTYPES[dtype] * P70, kv_bytes_per_token=m.kv_bytes_per_token_of(L70, DTYPES[dtype]),
                context=CONTEXT, hbm_per_chip=HBM, hbm_bytes_per_s=W_V5E, decode_tokens=DECODE, slices=slices)


PLAN_PROBES = (*(_plan_probe(d) for d in ("int4", "int8", "bf16")), *(_plan_probe(d, True) for d in DTYPES),
               dict(weight_bytes=INT8 * m.params_of(L8), kv_bytes_per_token=W2_KV, context=CONTEXT, hbm_per_chip=HBM,
                    hbm_bytes_per_s=W_V5E, decode_tokens=DECODE, slices=SLICE_CHIPS))


def draw_plan(rng: random.Random, probe: dict) -> dict:
    """CX1's grading-time cases: the probe with its floats rescaled (``vary``), where one of its slices
    holds the weights and at least one sequence beside them."""
    while True:
        case = vary(rng, probe)
        try:
            if serving_plan(**case)[2] >= 1:
                return case
        except ValueError:  # no slice holds the weights
            pass


# --- CX2: the book's roofline script, with its grid bug fixed --------------------------------------------

def largest_batch(step, context, weight_bytes, kv_bytes_per_token, n_chips, hbm_per_chip):
    """The largest batch on the grid 1, 1 + step, 1 + 2 step, ... < 1024 whose caches and weights fit."""
    grid = np.arange(1, 1024, step)
    fits = grid * kv_bytes_per_token * context + weight_bytes <= n_chips * hbm_per_chip
    return float(grid[fits][-1])


def cx2_book_bug(step, context, weight_bytes, kv_bytes_per_token, n_chips, hbm_per_chip):
    """The book's script: the index found on the step grid slices a step-1 grid."""
    grid = np.arange(1, 1024, step)
    idx = np.where(grid * kv_bytes_per_token * context + weight_bytes <= n_chips * hbm_per_chip)[0][-1]
    return float(np.arange(1, 512, 1)[:idx][-1])


def cx2_off_by_one(step, context, weight_bytes, kv_bytes_per_token, n_chips, hbm_per_chip):
    grid = np.arange(1, 1024, step)
    fits = grid * kv_bytes_per_token * context + weight_bytes < n_chips * hbm_per_chip
    return float(grid[np.argmin(fits)])  # the first batch that does not fit


BATCH_PROBES = tuple(dict(step=s, context=c, weight_bytes=INT8 * P70, kv_bytes_per_token=KV8, n_chips=n,
                          hbm_per_chip=HBM)
                     for s, c, n in ((4, 8192, 16), (1, 8192, 16), (4, 2048, 16), (8, 8192, 32), (1, 32_768, 16)))


def draw_largest(rng: random.Random, probe: dict) -> dict:
    """CX2's grading-time cases: the probe's model and chips; a fresh grid step (1 to 8) and context
    (2k to 32k tokens), HBM per chip 0.7 to 2 times the probe's, where batch 1 fits."""
    while True:
        case = dict(probe, step=rng.choice((1, 2, 3, 4, 8)), context=rng.choice((2048, 4096, 8192, 16_384, 32_768)),
                    hbm_per_chip=float(f"{probe['hbm_per_chip'] * 2 ** rng.uniform(-0.5, 1):.4g}"))
        room = case["n_chips"] * case["hbm_per_chip"] - case["weight_bytes"]
        if case["kv_bytes_per_token"] * case["context"] <= room:
            return case

# --- CX4: a KV-sharded decode step on a ('batch', 'kv') mesh ---------------------------------------------
# Mesh batch = 2, kv = 4: B 8, S 16, D 16, N 16, K 8 (G 2), H 8. Attention without softmax or scale
# (scores times values; see Chapter 7), W_Q seen as [D, K, G, H] and W_O as [K, G, H, D].
MESH_BK = (("batch", 2), ("kv", 4))
KS = dict(B=8, S=16, D=16, N=16, K=8, H=8)
_G = KS["N"] // KS["K"]
_CACHE = ("batch", None, "kv", None)
_KV_IN = (("batch", None), (None, "kv", None), _CACHE, _CACHE, ("kv", None, None))  # the operands' specs
KV_SPEC = ProgramSpec(
    mesh=MESH_BK, einsum="bd,dkgh,bskh,bskv,kgve->be",
    operands=(Operand((KS["B"], KS["D"]), ("batch", None)),
              Operand((KS["D"], KS["N"], KS["H"]), (None, "kv", None), view=(KS["D"], KS["K"], _G, KS["H"])),
              Operand((KS["B"], KS["S"], KS["K"], KS["H"]), _CACHE),
              Operand((KS["B"], KS["S"], KS["K"], KS["H"]), _CACHE),
              Operand((KS["N"], KS["H"], KS["D"]), ("kv", None, None), view=(KS["K"], _G, KS["H"], KS["D"]))),
    out_spec=("batch", None), collectives={"all-reduce": 1}, atol=0.05)
CX4_DEVICES = 8
CX4_BYTES_PER_DEVICE = 2 * KS["B"] * KS["S"] * KS["K"] * KS["H"] * hw.BYTES_PER_ELEMENT["fp32"] / CX4_DEVICES


def _attend(q, k_cache, v_cache):
    b, n, h = q.shape
    k = k_cache.shape[2]
    scores = jnp.einsum("bkgh,bskh->bkgs", q.reshape(b, k, n // k, h), k_cache)  # [b, k, G, S]
    return jnp.einsum("bkgs,bskv->bkgv", scores, v_cache).reshape(b, n, h)


def kv_sharded_decode(x, w_q, k_cache, v_cache, w_o):
    """Sequences split over 'batch', key/value heads over 'kv'. Each device reads only its block of the
    cache; the heads' partial outputs are added over 'kv' (one AllReduce), never over 'batch'."""
    def block(x, wq, kc, vc, wo):  # x: f32[4, 16]; wq: f32[16, 4, 8]; kc, vc: f32[4, 16, 2, 8]; wo: f32[4, 8, 16]
        q = jnp.einsum("bd,dnh->bnh", x, wq)                                  # f32[4, 4, 8]
        b_, n, h = q.shape
        kv = kc.shape[2]
        scores = jnp.einsum("bkgh,bskh->bkgs", q.reshape(b_, kv, n // kv, h), kc)
        o = jnp.einsum("bkgs,bskv->bkgv", scores, vc).reshape(b_, n, h)        # f32[4, 4, 8]
        return jax.lax.psum(jnp.einsum("bnh,nhd->bd", o, wo), "kv")            # f32[4, 16]

    cache = P_("batch", None, "kv", None)
    specs = (P_("batch", None), P_(None, "kv", None), cache, cache, P_("kv", None, None))
    mesh = course.mesh(batch=2, kv=4)
    return jax.shard_map(block, mesh=mesh, in_specs=specs, out_specs=P_("batch", None))(x, w_q, k_cache, v_cache, w_o)


def cx4_forgets_sum(x, w_q, k_cache, v_cache, w_o):
    def block(x, wq, kc, vc, wo):
        return jnp.einsum("bnh,nhd->bd", _attend(jnp.einsum("bd,dnh->bnh", x, wq), kc, vc), wo)
    return smap(block, MESH_BK, _KV_IN, ("batch", None), check_vma=False)(x, w_q, k_cache, v_cache, w_o)


def cx4_gathers_cache(x, w_q, k_cache, v_cache, w_o):
    """Gathers every head of the cache (and the weights) onto each device: right numbers, 4x the reads."""
    def block(x, wq, kc, vc, wo):
        def gather(a, axis):
            return jax.lax.all_gather(a, "kv", axis=axis, tiled=True, to="invarying")
        o = _attend(jnp.einsum("bd,dnh->bnh", x, gather(wq, 1)), gather(kc, 2), gather(vc, 2))
        return jnp.einsum("bnh,nhd->bd", o, gather(wo, 0))
    return smap(block, MESH_BK, _KV_IN, ("batch", None))(x, w_q, k_cache, v_cache, w_o)


# --- the records -------------------------------------------------------------------------------------

def _no_3600(value: float) -> Slip:
    return Slip(value / 3600, "magnitude:-4", "prices are per hour, FLOP/s per second.")


CHAPTER = Chapter("ch08_applied_inference", "Serving LLaMA 3-70B", (
    # 1. Which chip.
    number("ch08-e1-h100", section=_story,
           prompt="FLOPs per dollar of an H100 at its dense bf16 peak ($10.8 per hour).", reference=E1["H100"],
           tolerance=Tolerance(rtol=0.025), slips=(_no_3600(E1["H100"]),)),
    number("ch08-e1-v5p", section=_story, prompt="FLOPs per dollar of a TPU v5p ($4.2 per hour).",
           reference=E1["TPU v5p"], tolerance=Tolerance(rtol=0.025), slips=(_no_3600(E1["TPU v5p"]),)),
    number("ch08-e1-v5e", section=_story, prompt="FLOPs per dollar of a TPU v5e ($1.2 per hour).",
           reference=E1["TPU v5e"], tolerance=Tolerance(rtol=0.025),
           slips=(_no_3600(E1["TPU v5e"]), Slip(E1["TPU v5e"] * 2, "ratio:2", "use the bf16 rate."))),
    # 2. Memory: what fits where.
    number("ch08-iq1-kv-per-token", section=_story, prompt="LLaMA 3-70B: int8 KV cache bytes per token.", reference=KV8,
           unit="B", tolerance=Tolerance(rtol=0.025),
           slips=(Slip(2 * KV8, "ratio:2", "int8: 1 byte per element."),
                  Slip(KV8 * L70.N // L70.K, "ratio:8", "the cache holds the 8 key/value heads."))),
    number("ch08-iq1-kv-32k", section=_story, prompt="Its int8 cache for one 32,768-token sequence.", reference=IQ1_SEQ,
           unit="B", tolerance=Tolerance(rtol=0.025),
           slips=(Slip(IQ1_SEQ / L70.L, "magnitude:-2", "every layer keeps its own."),)),
    number("ch08-iq1-kv-240", section=_story, prompt="The caches of 240 such sequences.", reference=IQ1_TOTAL, unit="B",
           tolerance=Tolerance(rtol=0.025), slips=(Slip(IQ1_TOTAL / 2, "ratio:1/2"),)),
    number("ch08-iq1-chips", section=_story,
           prompt="v5e chips (16e9 B each) to hold those caches and 70e9 B of int8 weights.", reference=IQ1_CHIPS,
           tolerance=Tolerance(low=IQ1_CHIPS, high=IQ1_CHIPS + 1),
           slips=(Slip(math.ceil(inf.min_chips(IQ1_TOTAL)), "close", "the weights need room too."),)),
    number("ch08-iq2-kv-bytes", section=_story, prompt="int8 caches of 32 sequences of 8192 tokens.", reference=IQ2_KV,
           unit="B", tolerance=Tolerance(rtol=0.03), slips=(Slip(2 * IQ2_KV, "ratio:2", "int8: 1 byte per element."),)),
    number("ch08-iq2-total-bytes", section=_story, prompt="Those caches plus the int8 weights.", reference=IQ2_TOTAL,
           unit="B", tolerance=Tolerance(rtol=0.03), slips=(Slip(IQ2_KV, "ratio:3/8", "add the 70e9 B of weights."),)),
    Choice(qid="ch08-iq2-slice", points=1, section=_story, prompt="The smallest v5e slice that holds them.",
           reference=IQ2_SLICE, options=SLICE_OPTIONS,
           slips=(Slip("2x2", "wrong_option", "4 chips hold 64e9 B."),)),
    number("ch08-iq3-step-4x2", section=_story, prompt="Decode step lower bound at batch 32 on that 4x2 (bf16 math).",
           reference=IQ3_STEP_8, unit="s",
           slips=(Slip(INT8 * P70 / (8 * W_V5E), "not_equal", "the caches are read every step too."),)),
    number("ch08-iq3-tokens-per-s", section=_story, prompt="Its throughput in tokens per second.", reference=IQ3_TOKENS,
           slips=(Slip(1 / IQ3_STEP_8, "ratio:1/32", "each step yields one token per sequence."),)),
    number("ch08-iq3-per-chip", section=_story, prompt="Its throughput per chip.", reference=IQ3_PER_CHIP,
           slips=(Slip(IQ3_TOKENS, "ratio:8"),)),
    number("ch08-iq3-tp-limit", section=_story,
           prompt="Largest compute-bound model parallelism over both axes of a v5e 2D slice (F = 28,672).",
           reference=IQ3_TP, slips=(Slip(IQ3_TP / 2, "ratio:1/2", "two axes share the collectives."),)),
    number("ch08-iq3-step-4x4", section=_story, prompt="The batch-32 step lower bound on a 4x4.", reference=IQ3_STEP_16,
           unit="s", slips=(Slip(IQ3_STEP_8, "ratio:2", "twice the chips read at twice the bandwidth."),)),
    number("ch08-iq4-int8-weights", section=_story, prompt="Critical batch on v5e with int8 weights and bf16 math.",
           reference=IQ4, tolerance=ONE_PERCENT,
           slips=(Slip(2 * IQ4, "ratio:2", "int8 weights halve the bytes per FLOP."),)),
    Function(qid="ch08-cx1-serving-plan", points=3, section=_story,
             prompt="serving_plan(weight_bytes, kv_bytes_per_token, context, hbm_per_chip, hbm_bytes_per_s, "
                    "decode_tokens, slices): chips, free HBM, max batch, step seconds, queries/s per chip.",
             reference=serving_plan, probes=PLAN_PROBES, draw=draw_plan,
             output=(Output("number", tolerance=EXACT), Output("number", unit="B", tolerance=Tolerance(rtol=1e-6)),
                     Output("number", tolerance=EXACT), Output("number", unit="s", tolerance=Tolerance(rtol=1e-6)),
                     Output("number", tolerance=Tolerance(rtol=1e-6))),
             slips=(Slip(cx1_ignores_caches_in_step, "not_equal"), Slip(cx1_ignores_slices, "ratio:1/2"))),
    number("ch08-iq5-sequences", section=_story,
           prompt="How many 8k sequences fit beside int8 weights on the smallest slice for them?",
           reference=IQ5_BATCH["int8"], exact=True,
           slips=(Slip(IQ5_BATCH["int8"] + 1, "close", "round down: a partial cache is no cache."),)),
    number("ch08-iq6-step-full", section=_story,
           prompt="The step time when every chip's HBM is full and read once per step.", reference=STEP_FULL, unit="s",
           tolerance=Tolerance(low=0.019 * 0.99, high=STEP_FULL * 1.03),
           slips=(Slip(8 * STEP_FULL, "ratio:8", "each chip reads its own HBM, all at once."),)),
    number("ch08-iq6-decode-time", section=_story, prompt="Seconds to decode 512 tokens at that step.",
           reference=IQ6_DECODE_S, unit="s", tolerance=Tolerance(low=9 * 0.99, high=IQ6_DECODE_S * 1.01),
           slips=(Slip(IQ6_DECODE_S / DECODE, "magnitude:-3", "one step per token."),)),
    number("ch08-iq6-int4-weights", section=_story,
           prompt="Step time on a 2x2 reading only int4 weights (batch 1, short context).", reference=IQ6_INT4_WEIGHTS,
           unit="s", tolerance=Tolerance(low=0.010 * 0.99, high=IQ6_INT4_WEIGHTS * 1.02),
           slips=(Slip(2 * IQ6_INT4_WEIGHTS, "ratio:2", "int4: half a byte per parameter."),)),
    *(number(f"ch08-iq7-{d}", section=_story,
             prompt=f"Queries/s per chip: {d} on its smallest slice, batch filling HBM, 512 tokens each.",
             reference=IQ7[d], tolerance=Tolerance(rtol=0.04),
             slips=(Slip(IQ7[d] * DECODE, "magnitude:+3", "a query takes 512 steps."),))
      for d in DTYPES),
    number("ch08-iq8-batch", section=_story,
           prompt="How many 8k sequences fit on twice the smallest slice (any of the three dtypes)?",
           reference=IQ8_BATCH["int8"], exact=True,
           slips=(Slip(2 * IQ5_BATCH["int8"], "not_equal", "the weights do not double."),)),
    *(number(f"ch08-iq8-{d}", section=_story, prompt=f"Queries per second per chip: {d} on twice its smallest slice.",
             reference=IQ8[d], tolerance=Tolerance(rtol=0.05),
             slips=(Slip(IQ7[d], "not_equal", "the batch more than triples on twice the chips."),)) for d in DTYPES),
    Choice(qid="ch08-iq8-int4-bound", points=1, section=_story,
           prompt="At that batch on a 2x4 with int4 weights and bf16 math: more time in the weight matmuls' "
                  "'flops' or in reading the 'weights'?",
           reference=IQ8_INT4_BOUND, options=("flops", "weights"),
           slips=(Slip("weights", "wrong_option", "int4 weights with bf16 math: the critical batch is 60."),)),
    # 3. Sharding and serving.
    number("ch08-iq9-tp-memory", section=_story,
           prompt="Memory-bound limit F / (8B) at batch 64 (W_hbm / W_ici taken as 8).", reference=IQ9_TP_MEMORY,
           tolerance=THREE_FIGURES, slips=(Slip(L70.F / IQ9_B, "ratio:8"),)),
    number("ch08-iq9-t-ici", section=_story,
           prompt="One decode matmul on a 4x8, batch 64, bf16: the activations' collective (D = 8192).",
           reference=IQ9["ici"], unit="s", tolerance=Tolerance(low=11e-6 * 0.99, high=IQ9["ici"] * 1.02),
           slips=(Slip(IQ9["ici"] * 2, "ratio:2", "W_ici is the bidirectional bandwidth."),)),
    number("ch08-iq9-t-hbm", section=_story, prompt="Its time to read the chip's share of the bf16 D x F weight.",
           reference=IQ9["hbm"], unit="s", tolerance=Tolerance(rtol=0.03),
           slips=(Slip(IQ9["hbm"] * IQ9_Y, "ratio:32", "each of 32 chips reads 1/32."),)),
    number("ch08-iq9-t-math", section=_story, prompt="Its FLOP time.", reference=IQ9["flops"], unit="s",
           tolerance=Tolerance(low=4e-6 * 0.99, high=IQ9["flops"] * 1.03),
           slips=(Slip(IQ9["flops"] * IQ9_Y, "ratio:32", "each chip does 1/32 of the FLOPs."),)),
    Choice(qid="ch08-iq9-bound", points=1, section=_story, prompt="Which of the three bounds that matmul?",
           reference=IQ9_BOUND, options=("ici", "hbm", "flops"),
           slips=(Slip("ici", "wrong_option", "compare the three times."),)),
    number("ch08-iq10-prefill", section=_prefill,
           prompt="Seconds to prefill 8192 tokens of 70e9 parameters on 16 v5e at 40% MFU.", reference=IQ10, unit="s",
           tolerance=ONE_PERCENT, slips=(Slip(IQ10 * inf.PREFILL_MFU, "not_equal", "divide by the MFU."),)),
    number("ch08-iq11-finished", section=_prefill,
           prompt="Continuous batching, batch 32, 4096-token decodes: sequences finishing per step.",
           reference=IQ11_FINISHED, tolerance=THREE_FIGURES,
           slips=(Slip(1 / IQ11_G, "ratio:1/32", "B sequences finish every G steps."),)),
    number("ch08-iq11-evicted", section=_prefill, prompt="Tokens of cache freed per step with 8192-token prompts.",
           reference=IQ11_EVICTED, tolerance=THREE_FIGURES,
           slips=(Slip(IQ11_B * IQ11_P / IQ11_G, "ratio:2/3", "the generated tokens' cache is freed too."),)),
    Formula(qid="ch08-iq11-formula", points=1, section=_prefill,
            prompt="Cache tokens freed per step: batch B, prompts of P tokens, decodes of G tokens.",
            reference=IQ11_FORMULA, symbols="B P G",
            slips=(Slip(B * P / G, "not_equivalent", "the generated tokens' cache is freed too."),)),
    Formula(qid="ch08-iq12-formula", points=1, section=_prefill,
            prompt="Prefill servers per generate server: batch B, t_pre per prefill, t_step per step, G-token decodes.",
            reference=IQ12_FORMULA, symbols="B G t_pre t_step",
            slips=(Slip(t_pre / (t_step * G), "missing_symbol:B", "a generate server finishes B requests at once."),)),
    number("ch08-iq12-ratio", section=_prefill,
           prompt="That ratio with batch 32, 512-token decodes, IQ10's prefill and a full-HBM step.", reference=IQ12,
           tolerance=Tolerance(low=2.88, high=3.02),
           slips=(Slip(IQ12 / IQ12_B, "ratio:1/32", "a generate server finishes B requests every G steps."),)),
    number("ch08-iq13-latency-b1", section=_pareto,
           prompt="Frontier: step time at batch 1, 2048-token context, int8 on 16 v5e.", reference=IQ13_LATENCY,
           unit="s", tolerance=Tolerance(rtol=0.05),
           slips=(Slip(IQ13_LATENCY * 2, "ratio:2", "int8: 1 byte per parameter."),)),
    number("ch08-iq13-plateau", section=_pareto,
           prompt="Frontier: tokens per ms per chip at batch 120 with a 2048-token context.", reference=IQ13_PLATEAU,
           tolerance=Tolerance(low=0.85, high=1.05), slips=(Slip(IQ13_PLATEAU * IQ13_CHIPS, "ratio:16", "per chip."),)),
    Function(qid="ch08-cx2-largest-batch", points=2, section=_pareto,
             prompt="largest_batch(step, context, weight_bytes, kv_bytes_per_token, n_chips, hbm_per_chip): "
                    "the largest batch on the grid that fits.",
             reference=largest_batch, probes=BATCH_PROBES, draw=draw_largest, output=Output("number", tolerance=EXACT),
             slips=(Slip(cx2_book_bug, "magnitude:-1"), Slip(cx2_off_by_one, "close"))),
    # 4. Worked problems (no book answers).
    number("ch08-w1-flops-per-token", section=_wp,
           prompt="W1: forward FLOPs per token of a 405e9-parameter dense model.", reference=W1_FLOPS, unit="FLOP",
           slips=(Slip(3 * W1_FLOPS, "ratio:3", "inference is the forward pass only."),)),
    Formula(qid="ch08-w1-flop-bound", points=1, section=_wp,
            prompt="W1: FLOP-bound seconds per token on N v5e chips (bf16).",
            reference=W1_FLOP_BOUND, symbols="N", counts="N",
            slips=(Slip(W1_FLOP_BOUND * N, "missing_symbol:N", "N chips share the FLOPs."),)),
    Formula(qid="ch08-w1-hbm-bound", points=1, section=_wp,
            prompt="W1: seconds per step to read int8 weights on N v5e chips.",
            reference=W1_HBM_BOUND, symbols="N", counts="N",
            slips=(Slip(2 * W1_HBM_BOUND, "ratio:2", "int8: 1 byte per parameter."),)),
    number("ch08-w2-kv-per-token", section=_wp, prompt="W2: LLaMA 3-8B's int8 cache bytes per token.", reference=W2_KV,
           unit="B", tolerance=THREE_FIGURES,
           slips=(Slip(4 * W2_KV, "ratio:4", "the cache holds 8 key/value heads, not 32."),)),
    number("ch08-w2-total-bytes", section=_wp, prompt="W2: int8 weights plus 240 int8 caches of 8192 tokens.",
           reference=W2_TOTAL, unit="B",
           slips=(Slip(W2_TOTAL - INT8 * m.params_of(L8), "close", "count the weights too."),)),
    Choice(qid="ch08-w2-slice", points=1, section=_wp, prompt="W2: the smallest v5e slice for it.",
           reference=W2_SLICE, options=SLICE_OPTIONS,
           slips=(Slip("4x2", "wrong_option", "8 chips hold 128e9 B."),)),
    Choice(qid="ch08-w3-slice", points=1, section=_wp,
           prompt="W3: smallest v5e slice that reads 405e9 B of int8 weights within 15 ms.",
           reference=W3_SLICE, options=SLICE_OPTIONS,
           slips=(Slip("4x8", "wrong_option", "32 chips need more than 15 ms for the weights alone."),)),
    number("ch08-w3-min-step", section=_wp, prompt="W3: the minimum decode step on that slice.", reference=W3_MIN_STEP,
           unit="s", slips=(Slip(2 * W3_MIN_STEP, "ratio:2", "int8: 1 byte per parameter."),)),
    number("ch08-w3-batch-hbm", section=_wp,
           prompt="W3: the largest 8k-context batch (an exact count) within 15 ms by HBM bandwidth alone.",
           reference=W3_BATCH_HBM, exact=True,
           slips=(Slip(inf.max_batch(HBM, W3_CHIPS, INT8 * P405, W3_KV), "not_equal",
                       "that is what fits, not what 15 ms allows."),)),
    number("ch08-w3-batch-flops", section=_wp,
           prompt="W3: the same batch (an exact count) with the weight matmuls' bf16 FLOPs counted.",
           reference=W3_BATCH_FLOPS, exact=True,
           slips=(Slip(W3_BATCH_HBM, "not_equal", "above batch 120 the weight matmuls are FLOP-bound."),)),
    # 5. A program.
    Program(qid="ch08-cx4-kv-sharded-decode", points=3, section=_story,
            prompt="A decode step's attention on a ('batch': 2, 'kv': 4) mesh: sequences and cache heads split.",
            spec=KV_SPEC, model=kv_sharded_decode,
            slips=(Slip(cx4_forgets_sum, "partial_sum:kv"), Slip(cx4_gathers_cache, "collectives:all-gather"))),
    number("ch08-cx4-kv-bytes", section=_story,
           prompt="CX4: bytes of f32 key and value cache each device reads in that program.",
           reference=CX4_BYTES_PER_DEVICE, unit="B", tolerance=THREE_FIGURES,
           slips=(Slip(CX4_DEVICES * CX4_BYTES_PER_DEVICE, "ratio:8", "each device reads its block."),
                  Slip(CX4_BYTES_PER_DEVICE / 2, "ratio:1/2", "keys and values."))),
))
