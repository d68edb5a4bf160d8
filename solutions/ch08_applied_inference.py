"""Chapter 8, Serving LLaMA 3-70B: every graded question of the chapter, as records with references.

Book: Part 8 "Serving LLaMA 3-70B on TPUs", https://jax-ml.github.io/scaling-book/applied-inference/
References are computed from ``solutions._derived`` (the inference cost model), ``course.models`` and
``course.hardware``; where the book prints a rounded or differently-based value, the tolerance admits
it and ``BOOK`` records it for the tests. Labels follow the syllabus: E1 the cost table, IQ1-IQ13 the
chapter's inline questions, W1-W3 its worked problems (no book answers: DERIVED), CX1, CX2 and CX4 the
syllabus's coding exercises, CX6 and CX7 two more programs of the decode step (its MLP, and its softmax
attention over a sharded cache). The syllabus's CX3 (the frontier) is a plot here, and CX5 (a serving
simulator) is not graded.

Like the book, the chapter takes LLaMA 3-70B as 70e9 parameters (``inf.LLAMA3_70B_PARAMS_BOOK``) and
LLaMA 3.1-405B as 405e9; the exact counts of ``course.models`` would move the integer batch sizes.
"""

from __future__ import annotations

import math
import random

import numpy as np
import sympy as sp

import course
from autograder.kinds.function import vary as rescaled
from course.symbols import B, G, N, P, symbol
from solutions._derived import inference as inf
from solutions._derived import models as m
from solutions._kit import *  # noqa: F403 (the authoring vocabulary: solutions/_kit.py)
from solutions._kit import P as P_

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
E1_CHIPS = {"H100": hw.H100, "TPU v5p": hw.TPU_V5P, "TPU v5e": V5E}

# --- IQ1-IQ4: LLaMA 3-70B, int8 weights and cache -----------------------------------------------------
L70 = m.LLAMA3_70B
P70 = inf.LLAMA3_70B_PARAMS_BOOK
KV8 = m.kv_bytes_per_token_of(L70, INT8)  # bytes per token, int8
KEY_AND_VALUE = "each key/value head keeps both a key and a value per token."  # the cache at half its size
# The public probes of CX1 and CX2 give LLaMA 3-70B 12 key/value heads, so that they do not carry IQ1's answer.
PROBE_L70 = L70.with_(K=12)
SLICE_OPTIONS = ("2x2", "4x2", "4x4", "4x8", "8x8")
ALPHA = inf.ici_intensity()
IQ3_TP = inf.tp_limit_compute(L70.F, ALPHA, n_axes=2)
IQ4 = inf.critical_batch(C_BF16, W_V5E, INT8)

# --- IQ5-IQ8: which dtype, which slice, how many queries ----------------------------------------------
CONTEXT = 8192  # the book's context, which CX1's probes keep
DTYPES = {"bf16": BF16, "int8": INT8, "int4": INT4}  # weights and cache in the same precision
STEP_FULL = inf.hbm_full_step_s(V5E)  # a step that reads all of HBM: 16e9 / 8.2e11
# The book rounds that step to 19 ms. IQ6 accepts it, so every answer computed from it (IQ6's decode time, IQ7
# and IQ8's queries per second, IQ12's ratio) accepts it too, at every student's values.
BOOK_STEP = 0.019
DECODE = inf.MEDIAN_DECODE_TOKENS


def chips_for(dtype: str, double: bool = False) -> int:
    """The smallest legal slice for the weights alone (IQ5); ``double``: the next one up (IQ8)."""
    chips = inf.V5E_SLICES[inf.smallest_slice(DTYPES[dtype] * P70)]
    return 2 * chips if double else chips


def batch_for(dtype: str, chips: int, context: int = CONTEXT) -> int:
    """Sequences of ``context`` tokens whose caches fit beside the weights, all in ``dtype``."""
    return inf.max_batch(HBM, chips, DTYPES[dtype] * P70, m.kv_bytes_per_token_of(L70, DTYPES[dtype]) * context)


IQ6_INT4_WEIGHTS = INT4 * P70 / (chips_for("int4") * W_V5E)

# --- IQ10-IQ12: prefill, continuous batching, disaggregation ------------------------------------------
IQ10_CHIPS = 16
IQ11_G = 4096  # IQ11's decode length
IQ11_FORMULA = inf.evicted_tokens_per_step(B, P, G)
IQ12_FORMULA = inf.prefill_to_generate_servers(B, t_pre, t_step, G)

# --- IQ13: the latency-throughput frontier, int8, bf16 math ---------------------------------------------
IQ13_PLATEAU_B = 120
IQ13_CACHE_SHARE = 0.015  # the least share of the batch-1 step the cache takes, outside the book's own values

# --- W1-W3: LLaMA 3-8B and 3.1-405B (no book answers) ---------------------------------------------------
P405 = inf.LLAMA31_405B_PARAMS_BOOK
W1_FLOPS = 2 * P405
W1_FLOP_BOUND = sp.nsimplify(W1_FLOPS) / (N * sp.nsimplify(C_BF16))
W1_HBM_BOUND = sp.nsimplify(INT8 * P405) / (N * sp.nsimplify(W_V5E))
L8 = m.LLAMA3_8B
W2_KV = m.kv_bytes_per_token_of(L8, INT8)
L405 = m.LLAMA31_405B


def w3_plan(limit: float, context: int) -> dict:
    """W3: the smallest slice whose chips read the int8 weights within ``limit`` seconds, its shortest step,
    and the largest batches of ``context``-token caches within the limit, by HBM bytes alone and with the
    weight matmuls' FLOPs counted (both within what fits in its HBM)."""
    kv = m.kv_bytes_per_token_of(L405, INT8) * context
    need = INT8 * P405 / (limit * W_V5E)
    name = next(s for s, n in sorted(inf.V5E_SLICES.items(), key=lambda kv_: kv_[1]) if n >= need)
    chips = inf.V5E_SLICES[name]
    fits = inf.max_batch(HBM, chips, INT8 * P405, kv)

    def largest(with_flops: bool) -> int:
        for b in range(fits, 0, -1):
            step = (inf.decode_step_s(b, kv, INT8 * P405, P405, chips, C_BF16, W_V5E) if with_flops
                    else inf.decode_step_memory_s(b, kv, INT8 * P405, chips, W_V5E))
            if step <= limit:
                return b
        return 0
    return dict(slice=name, chips=chips, min_step=INT8 * P405 / (chips * W_V5E), fits=fits,
                hbm=largest(False), flops=largest(True))


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


def _plan_probe(dtype: str, double: bool = False, chip: hw.Chip = V5E) -> dict:
    """On the v5e, IQ5's slices (IQ8's with ``double``); on another chip, every slice of that shape."""
    slices = [n for n in SLICE_CHIPS if chip is not V5E or n >= chips_for(dtype, double)]
    return dict(weight_bytes=DTYPES[dtype] * P70, kv_bytes_per_token=m.kv_bytes_per_token_of(PROBE_L70, DTYPES[dtype]),
                context=CONTEXT, hbm_per_chip=chip.hbm_bytes, hbm_bytes_per_s=chip.hbm_bytes_per_s,
                decode_tokens=DECODE, slices=slices)


# Other chips beside the v5e, so that no HBM size or bandwidth is the same in every case.
PLAN_PROBES = (*(_plan_probe(d) for d in ("int4", "int8", "bf16")), *(_plan_probe(d, True) for d in DTYPES),
               dict(weight_bytes=INT8 * m.params_of(L8), kv_bytes_per_token=W2_KV, context=CONTEXT, hbm_per_chip=HBM,
                    hbm_bytes_per_s=W_V5E, decode_tokens=DECODE, slices=SLICE_CHIPS),
               _plan_probe("int8", chip=hw.TPU_V6E), _plan_probe("int4", chip=hw.TPU_V6E),
               _plan_probe("bf16", chip=hw.TPU_V5P))


def draw_plan(rng: random.Random, probe: dict) -> dict:
    """CX1's grading-time cases: the probe with its floats rescaled (``vary``), where one of its slices
    holds the weights and at least one sequence beside them."""
    while True:
        case = rescaled(rng, probe)
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


BATCH_PROBES = tuple(dict(step=s, context=c, weight_bytes=INT8 * P70, kv_bytes_per_token=2 * KV8, n_chips=n,
                          hbm_per_chip=chip.hbm_bytes)
                     for s, c, n, chip in ((4, 8192, 16, V5E), (1, 8192, 16, V5E), (4, 2048, 16, V5E),
                                           (8, 8192, 32, V5E), (1, 32_768, 16, V5E), (4, 8192, 8, hw.TPU_V6E),
                                           (2, 16_384, 4, hw.TPU_V5P)))


def draw_largest(rng: random.Random, probe: dict) -> dict:
    """CX2's grading-time cases: the probe's model and chips; a fresh grid step (2 to 8: on a grid of step 1 the
    book's bug reads the right batch) and context (2k to 32k tokens), HBM per chip 0.7 to 2 times the probe's, where
    batch 1 fits."""
    while True:
        case = dict(probe, step=rng.choice((2, 3, 4, 8)), context=rng.choice((2048, 4096, 8192, 16_384, 32_768)),
                    hbm_per_chip=float(f"{probe['hbm_per_chip'] * 2 ** rng.uniform(-0.5, 1):.4g}"))
        room = case["n_chips"] * case["hbm_per_chip"] - case["weight_bytes"]
        if case["kv_bytes_per_token"] * case["context"] <= room:
            return case

# --- CX4: a KV-sharded decode step on a ('batch', 'kv') mesh ---------------------------------------------
# Mesh batch = 2, kv = 4: D 16, N 16, K 8 (G 2), H 8, with a student's batch B and context S (the book's B 8,
# S 16). Attention without softmax or scale (scores times values; see Chapter 7), W_Q seen as
# [D, K, G, H] and W_O as [K, G, H, D].
MESH_BK = (("batch", 2), ("kv", 4))
CX4_D, CX4_N, CX4_K, CX4_H = 16, 16, 8, 8
_G = CX4_N // CX4_K
_CACHE = ("batch", None, "kv", None)
_KV_IN = (("batch", None), (None, "kv", None), _CACHE, _CACHE, ("kv", None, None))  # the operands' specs
CX4_DEVICES = 8


def kv_spec(B: int, S: int) -> ProgramSpec:
    """CX4's spec for B sequences (split over 'batch', so even) with caches of S positions."""
    d, n, k, h = CX4_D, CX4_N, CX4_K, CX4_H
    return ProgramSpec(
        mesh=MESH_BK, einsum="bd,dkgh,bskh,bskv,kgve->be",
        operands=(Operand((B, d), ("batch", None)),
                  Operand((d, n, h), (None, "kv", None), view=(d, k, _G, h)),
                  Operand((B, S, k, h), _CACHE),
                  Operand((B, S, k, h), _CACHE),
                  Operand((n, h, d), ("kv", None, None), view=(k, _G, h, d))),
        out_spec=("batch", None), collectives={"all-reduce": 1}, atol=0.05)


def kv_sharded_decode(x, w_q, k_cache, v_cache, w_o):
    """Sequences split over 'batch', key/value heads over 'kv'. Each device reads only its block of the
    cache; the heads' partial outputs are added over 'kv' (one AllReduce), never over 'batch'."""
    def block(x, wq, kc, vc, wo):  # x: f32[B/2, D]; wq: f32[D, N/4, H]; kc, vc: f32[B/2, S, K/4, H]; wo: f32[N/4, H, D]
        q = jnp.einsum("bd,dnh->bnh", x, wq)                                  # f32[B/2, N/4, H]
        b_, n, h = q.shape
        kv = kc.shape[2]
        scores = jnp.einsum("bkgh,bskh->bkgs", q.reshape(b_, kv, n // kv, h), kc)
        o = jnp.einsum("bkgs,bskv->bkgv", scores, vc).reshape(b_, n, h)        # f32[B/2, N/4, H]
        return jax.lax.psum(jnp.einsum("bnh,nhd->bd", o, wo), "kv")            # f32[B/2, D]

    cache = P_("batch", None, "kv", None)
    specs = (P_("batch", None), P_(None, "kv", None), cache, cache, P_("kv", None, None))
    mesh = course.mesh(batch=2, kv=4)
    return jax.shard_map(block, mesh=mesh, in_specs=specs, out_specs=P_("batch", None))(x, w_q, k_cache, v_cache, w_o)


def cx4_forgets_sum(x, w_q, k_cache, v_cache, w_o):
    def block(x, wq, kc, vc, wo):
        return jnp.einsum("bnh,nhd->bd", attend_heads(jnp.einsum("bd,dnh->bnh", x, wq), kc, vc), wo)
    return smap(block, MESH_BK, _KV_IN, ("batch", None), check_vma=False)(x, w_q, k_cache, v_cache, w_o)


cx4_gathers_cache = gathered_cache_decode("kv", MESH_BK, _KV_IN, ("batch", None))  # 4x the reads


# --- CX6: the decode step's MLP, weight-stationary over both axes of a 2x4 slice -------------------------
# IQ3 and IQ9's layout: model parallelism over all 8 chips. The [B, D] activations of the batch arrive whole
# on every chip; W_in[D, F_XY] and W_out[F_XY, D] never move. Each chip's hidden units are whole sums over D,
# so its relu is exact; its rows of W_out give a partial sum over F, and one AllReduce over both axes adds
# the 8 of them, leaving the [B, D] output on every chip for the next layer. Only B x D values move per
# matmul pair: the T_ici of IQ9. B = 8 sequences, D = 32, F = 256.
MESH_XY = (("X", 2), ("Y", 4))
WS_B, WS_D, WS_F = 8, 32, 256
_WS_IN = ((None, None), (None, ("X", "Y")), (("X", "Y"), None))


def weight_stationary_mlp(x, w_in, w_out):
    """relu(x @ w_in) @ w_out with F split over all 8 chips: the weights stay, the partial outputs are added
    by one AllReduce over ('X', 'Y')."""
    def block(x, wi, wo):  # x: f32[B, D]; wi: f32[D, F/8]; wo: f32[F/8, D]
        hidden = jnp.maximum(x @ wi, 0.0)                   # f32[B, F/8]: this chip's hidden units, whole
        return jax.lax.psum(hidden @ wo, ("X", "Y"))        # f32[B, D]: the 8 partial sums over F added

    specs = (P_(), P_(None, ("X", "Y")), P_(("X", "Y"), None))
    mesh = course.mesh(X=2, Y=4)
    return jax.shard_map(block, mesh=mesh, in_specs=specs, out_specs=P_())(x, w_in, w_out)


def _ws_partial(x, wi, wo):
    """This chip's share of the MLP's output: its hidden units times its rows of W_out."""
    return jnp.maximum(x @ wi, 0.0) @ wo


def cx6_forgets_sum(x, w_in, w_out):
    """Returns one chip's partial sum over F as the output (check_vma=False hides the mistake)."""
    return smap(_ws_partial, MESH_XY, _WS_IN, (), check_vma=False)(x, w_in, w_out)


def cx6_sums_over_y(x, w_in, w_out):
    """Adds the partial sums over Y only: each result holds half of F's terms, those of its X row."""
    def block(x, wi, wo):
        return jax.lax.psum(_ws_partial(x, wi, wo), "Y")
    return smap(block, MESH_XY, _WS_IN, (), check_vma=False)(x, w_in, w_out)


def cx6_gathers_weights(x, w_in, w_out):
    """Gathers both weights whole onto every chip and computes the block there: right numbers, but each step
    moves the weights (F x D values twice) where B x D would do, and every chip reads all of them."""
    def block(x, wi, wo):
        wi_full = jax.lax.all_gather(wi, ("X", "Y"), axis=1, tiled=True, to="invarying")
        wo_full = jax.lax.all_gather(wo, ("X", "Y"), axis=0, tiled=True, to="invarying")
        return _ws_partial(x, wi_full, wo_full)
    return smap(block, MESH_XY, _WS_IN, ())(x, w_in, w_out)


WS_SPEC = ProgramSpec(
    mesh=MESH_XY, einsum="the MLP block relu(x @ w_in) @ w_out", reference="mlp",
    operands=(Operand((WS_B, WS_D), (None, None)), Operand((WS_D, WS_F), (None, ("X", "Y"))),
              Operand((WS_F, WS_D), (("X", "Y"), None))),
    out_spec=(), collectives={"all-reduce": 1}, rtol=1e-3, atol=1e-3 * math.sqrt(WS_D * WS_F))


# --- CX7: a decode step's softmax attention over a cache split by sequence and key/value head ------------
# The serving layout of CX4 ('batch' = 2, 'kv' = 4), now with the real attention: the new token's queries
# q[B, N, H] (split like the cache, by sequence and by head: W_Q's columns are split over 'kv'), its own key
# and value k_new, v_new [B, K, H], appended after the S cached positions, scale 1/sqrt(H) and softmax over
# the S + 1 positions. Query head n = k G + g reads key/value head k, which lies on the same chip, so the
# softmax is local and nothing moves: the output o[B, N, H] stays split as q is (W_O's AllReduce, CX4's,
# comes after). B = 8, S = 16, N = 16, K = 8 (G = 2), H = 8.
DA_B, DA_S, DA_N, DA_K, DA_H = 8, 16, 16, 8, 8
_DA_HEADS = ("batch", "kv", None)
_DA_IN = (_DA_HEADS, _DA_HEADS, _DA_HEADS, _CACHE, _CACHE)


def sharded_decode_attention(q, k_new, v_new, k_cache, v_cache):
    """Each chip appends its sequences' new keys and values to its block of the cache and attends with its
    own query heads: the heads it needs are its own, so no collective."""
    def block(q, kn, vn, kc, vc):  # q: f32[B/2, N/4, H]; kn, vn: f32[B/2, K/4, H]; kc, vc: f32[B/2, S, K/4, H]
        keys = jnp.concatenate([kc, kn[:, None]], axis=1)                  # f32[B/2, S + 1, K/4, H]
        values = jnp.concatenate([vc, vn[:, None]], axis=1)
        b, n, h = q.shape
        kv = kc.shape[2]
        grouped = q.reshape(b, kv, n // kv, h)                            # head n = k G + g
        scores = jnp.einsum("bkgh,bskh->bkgs", grouped, keys) / h**0.5   # f32[B/2, K/4, G, S + 1]
        weights = jax.nn.softmax(scores, axis=-1)
        return jnp.einsum("bkgs,bskh->bkgh", weights, values).reshape(b, n, h)  # f32[B/2, N/4, H]

    heads = P_("batch", "kv", None)
    cache = P_("batch", None, "kv", None)
    mesh = course.mesh(batch=2, kv=4)
    return jax.shard_map(block, mesh=mesh, in_specs=(heads, heads, heads, cache, cache),
                         out_specs=heads)(q, k_new, v_new, k_cache, v_cache)


def _softmax_attend(q, keys, values, grouped=True):
    """Scaled softmax attention of q[b, n, H] over keys, values [b, s, k, H]; ``grouped=False`` pairs query
    head n with key/value head n % k, as a multi-head model would interleave them."""
    b, n, h = q.shape
    k = keys.shape[2]
    qg = q.reshape(b, k, n // k, h) if grouped else q.reshape(b, n // k, k, h).swapaxes(1, 2)
    weights = jax.nn.softmax(jnp.einsum("bkgh,bskh->bkgs", qg, keys) / h**0.5, axis=-1)
    out = jnp.einsum("bkgs,bskh->bkgh", weights, values)
    return (out if grouped else out.swapaxes(1, 2)).reshape(b, n, h)


def _with_new(cache, new):
    return jnp.concatenate([cache, new[:, None]], axis=1)


def cx7_skips_new_token(q, k_new, v_new, k_cache, v_cache):
    """Attends to the S cached positions only: the new token never sees its own key and value."""
    def block(q, kn, vn, kc, vc):
        return _softmax_attend(q, kc, vc)
    return smap(block, MESH_BK, _DA_IN, _DA_HEADS)(q, k_new, v_new, k_cache, v_cache)


def cx7_interleaves_heads(q, k_new, v_new, k_cache, v_cache):
    """Pairs query head n with key/value head n % K (multi-head habits) instead of n // G."""
    def block(q, kn, vn, kc, vc):
        return _softmax_attend(q, _with_new(kc, kn), _with_new(vc, vn), grouped=False)
    return smap(block, MESH_BK, _DA_IN, _DA_HEADS)(q, k_new, v_new, k_cache, v_cache)


def cx7_gathers_cache(q, k_new, v_new, k_cache, v_cache):
    """Gathers every head of the queries and the caches over 'kv', attends with all of them, and keeps its
    own heads: right numbers, with four times the cache reads and the whole cache moved each step."""
    def block(q, kn, vn, kc, vc):
        def gather(a, axis):
            return jax.lax.all_gather(a, "kv", axis=axis, tiled=True)
        out = _softmax_attend(gather(q, 1), _with_new(gather(kc, 2), gather(kn, 1)),
                              _with_new(gather(vc, 2), gather(vn, 1)))  # f32[B/2, N, H], every head
        return own_block(out, "kv", 1)
    return smap(block, MESH_BK, _DA_IN, _DA_HEADS)(q, k_new, v_new, k_cache, v_cache)


DA_SPEC = ProgramSpec(
    mesh=MESH_BK, einsum="one decode step's grouped-query softmax attention over the cache and the new token",
    reference="decode_attention",
    operands=(Operand((DA_B, DA_N, DA_H), _DA_HEADS), Operand((DA_B, DA_K, DA_H), _DA_HEADS),
              Operand((DA_B, DA_K, DA_H), _DA_HEADS), Operand((DA_B, DA_S, DA_K, DA_H), _CACHE),
              Operand((DA_B, DA_S, DA_K, DA_H), _CACHE)),
    out_spec=_DA_HEADS, collectives={})


# --- the exercises whose numbers each student is dealt (autograder/variants.py); the book's values first ---


def _below(name: str) -> str:
    """The slice one size smaller than ``name`` among the options: the classic off-by-one-slice answer."""
    return SLICE_OPTIONS[SLICE_OPTIONS.index(name) - 1]


# IQ1's bytes per token, the same for every student, accept the book's "160kB" (2.4% below 163,840): a cache size
# carried from a credited per-token answer passes as far, at every choice.
PER_TOKEN = Tolerance(rtol=0.025)
E1_TOLERANCE = Tolerance(rtol=0.025)  # the book prints 5.8e17 for the v5e's 5.91e17: at the book's prices


def e1(h100_usd: float, v5p_usd: float, v5e_usd: float) -> tuple[Number, ...]:
    """E1: the FLOPs a dollar buys on each chip at its dense bf16 peak, at the prices per chip-hour a
    student's cloud quotes (the book's: Google Cloud's of February 2025)."""
    prices = {"H100": h100_usd, "TPU v5p": v5p_usd, "TPU v5e": v5e_usd}
    out = {n: inf.flops_per_dollar(chip.bf16_flops_per_s, prices[n]) for n, chip in E1_CHIPS.items()}
    per_hour = "prices are per hour, FLOP/s per second."

    def tol(name: str) -> Tolerance:  # the book's rounding at its price; elsewhere the chip's peak to 2%
        return E1_TOLERANCE if prices[name] == PRICE[name] else rate_tolerance(E1_CHIPS[name])

    def per_second(name: str) -> Slip:  # a price per hour taken per second: 3600 times too few FLOPs
        return Slip(out[name] / 3600, slip_code(out[name] / 3600, out[name], tol(name)), per_hour)
    return (
        number("ch08-e1-h100", section=_story, unit="FLOP", reference=out["H100"], tolerance=tol("H100"),
               prompt=f"FLOPs per dollar of an H100 at its dense bf16 peak (${h100_usd:g} per hour).",
               slips=(per_second("H100"),)),
        number("ch08-e1-v5p", section=_story, unit="FLOP", reference=out["TPU v5p"], tolerance=tol("TPU v5p"),
               prompt=f"FLOPs per dollar of a TPU v5p (${v5p_usd:g} per hour).",
               slips=(per_second("TPU v5p"),)),
        number("ch08-e1-v5e", section=_story, unit="FLOP", reference=out["TPU v5e"], tolerance=tol("TPU v5e"),
               prompt=f"FLOPs per dollar of a TPU v5e (${v5e_usd:g} per hour).",
               slips=(per_second("TPU v5e"),
                      Slip(out["TPU v5e"] * 2, "ratio:2", "use the bf16 rate."))))


def iq1(context: int, sequences: int) -> tuple[Number, ...]:
    """IQ1: the int8 caches of ``sequences`` sequences of ``context`` tokens, and the v5e chips that hold
    them beside the int8 weights (the fewest whole chips, or at the book's values one more, as its rounded bytes
    give)."""
    seq = KV8 * context
    total = sequences * seq
    chips = math.ceil(inf.min_chips(INT8 * P70 + total))
    book = (context, sequences) == (32_768, 240)
    whole = Tolerance(low=chips, high=chips + 1) if book else Tolerance.exact_count()
    return (
        number("ch08-iq1-kv-32k", section=_story, prompt=f"Its int8 cache for one {context:,}-token sequence.",
               reference=seq, unit="B", tolerance=PER_TOKEN,
               slips=(Slip(seq / L70.L, "magnitude:-2", "every layer keeps its own."),
                      Slip(seq / 2, "ratio:1/2", KEY_AND_VALUE))),
        number("ch08-iq1-kv-240", section=_story, prompt=f"The caches of {sequences} such sequences.",
               reference=total, unit="B", tolerance=PER_TOKEN, slips=(Slip(total / 2, "ratio:1/2", KEY_AND_VALUE),)),
        number("ch08-iq1-chips", section=_story, exact=not book,
               prompt="v5e chips (16e9 B each) to hold those caches and 70e9 B of int8 weights"
                      + ("." if book else " (an exact count)."), reference=chips,
               tolerance=whole,
               slips=slips(chips, whole, (math.ceil(inf.min_chips(total)), "the weights need room too."))))


def iq2(batch: int, context: int) -> tuple[Question, ...]:
    """IQ2, IQ3: a batch of int8 caches beside the int8 weights, the smallest slice for them, and the
    memory-bound decode step there and on twice the chips. Every batch stays below the critical batch (120),
    as the book's 32 does; the compute-bound TP limit between them does not depend on the values."""
    kv_seq = KV8 * context
    kv = batch * kv_seq
    total = INT8 * P70 + kv
    name = inf.smallest_slice(total)
    chips = inf.V5E_SLICES[name]

    def step(n: int) -> float:
        return inf.decode_step_s(batch, kv_seq, INT8 * P70, P70, n, C_BF16, W_V5E)
    small, large = step(chips), step(2 * chips)
    tokens = inf.tokens_per_s(batch, small)
    per_chip = tokens / chips
    return (
        number("ch08-iq2-kv-bytes", section=_story, prompt=f"int8 caches of {batch} sequences of {context} tokens.",
               reference=kv, unit="B", tolerance=PER_TOKEN,
               slips=(Slip(2 * kv, "ratio:2", "int8: 1 byte per element.", maybe=True),)),
        number("ch08-iq2-total-bytes", section=_story, prompt="Those caches plus the int8 weights.", reference=total,
               unit="B", slips=slips(total, TWO_PERCENT, (kv, "add the 70e9 B of weights."))),
        Choice(qid="ch08-iq2-slice", points=1, section=_story, prompt="The smallest v5e slice that holds them.",
               reference=name, options=SLICE_OPTIONS,
               slips=(Slip("2x2", "wrong_option", "a 2x2 slice's HBM is less than those bytes."),)),
        number("ch08-iq3-step-4x2", section=_story,
               prompt=f"Decode step lower bound at batch {batch} on that slice (bf16 math).", reference=small, unit="s",
               slips=slips(small, TWO_PERCENT, (INT8 * P70 / (chips * W_V5E), "the caches are read every step too."))),
        number("ch08-iq3-tokens-per-s", section=_story, prompt="Its throughput in tokens per second.",
               reference=tokens,
               slips=slips(tokens, TWO_PERCENT, (1 / small, "each step yields one token per sequence."))),
        number("ch08-iq3-per-chip", section=_story, prompt="Its throughput per chip.", reference=per_chip,
               slips=slips(per_chip, TWO_PERCENT, (tokens, ""))),
        number("ch08-iq3-tp-limit", section=_story,
               prompt="Largest compute-bound model parallelism over both axes of a v5e 2D slice (F = 28,672).",
               reference=IQ3_TP, tolerance=largest_degree(IQ3_TP),
               slips=(Slip(IQ3_TP / 2, "ratio:1/2", "two axes share the collectives."),)),
        number("ch08-iq3-step-4x4", section=_story,
               prompt=f"The batch-{batch} step lower bound on a slice with twice those chips.", reference=large,
               unit="s", slips=slips(large, TWO_PERCENT, (small, "twice the chips read at twice the bandwidth."))))


def iq5(context: int, decode: int) -> tuple[Question, ...]:
    """IQ5-IQ8: for each precision of weights and cache, the batch of ``context``-token caches that fills
    its smallest slice and twice that slice, the full-HBM step, and queries per second per chip for
    ``decode``-token answers. The batch is one number for all three precisions, whatever the context."""
    batch = batch_for("int8", chips_for("int8"), context)
    batch2 = batch_for("int8", chips_for("int8", double=True), context)
    seconds = decode * STEP_FULL
    qps = {d: inf.queries_per_s_per_chip(batch, STEP_FULL, decode, chips_for(d)) for d in DTYPES}
    qps2 = {d: inf.queries_per_s_per_chip(batch2, STEP_FULL, decode, chips_for(d, double=True)) for d in DTYPES}
    # DERIVED: at IQ8's batch, int4 weights with bf16 arithmetic are FLOP-bound (critical batch 60), so the
    # HBM-full step understates it; the book's QPS assumes a bandwidth-bound step throughout.
    int4 = inf.decode_parts_s(batch2, m.kv_bytes_per_token_of(L70, INT4) * context, INT4 * P70, P70,
                              chips_for("int4", double=True), C_BF16, W_V5E)
    bound = "flops" if int4["flops"] > int4["weights"] else "weights"
    exact = Tolerance.exact_count()
    # Decode-time is ``decode`` steps: it reaches as far as the step question does on either side (its book's
    # 19 ms below, +3% above), so a credited step carried forward is credited at every choice; and wherever
    # the decode length is the book's (at any context: the step does not depend on it) the book's "about 9 s".
    step_tol = Tolerance(low=BOOK_STEP * 0.99, high=STEP_FULL * 1.03)
    step_lo, step_hi = step_tol.bounds(STEP_FULL)
    decode_tol = Tolerance(low=9 * 0.99 if decode == DECODE else decode * step_lo, high=decode * step_hi)
    q7, q8 = Tolerance(rtol=0.04), Tolerance(rtol=0.05)  # the book's 19 ms step raises its QPS a few percent
    return (
        number("ch08-iq5-sequences", section=_story, exact=True,
               prompt=f"How many {context}-token sequences fit beside int8 weights on the smallest slice for them?",
               reference=batch, slips=slips(batch, exact, (batch + 1, "round down: a partial cache is no cache."))),
        number("ch08-iq6-step-full", section=_story,
               prompt="The step time when every chip's HBM is full and read once per step.", reference=STEP_FULL,
               unit="s", tolerance=step_tol,
               slips=(Slip(8 * STEP_FULL, "ratio:8", "each chip reads its own HBM, all at once."),)),
        number("ch08-iq6-decode-time", section=_story, prompt=f"Seconds to decode {decode} tokens at that step.",
               reference=seconds, unit="s", tolerance=decode_tol,
               slips=slips(seconds, decode_tol, (STEP_FULL, "one step per token."))),
        number("ch08-iq6-int4-weights", section=_story,
               prompt="Step time on a 2x2 reading only int4 weights (batch 1, short context).",
               reference=IQ6_INT4_WEIGHTS, unit="s",
               tolerance=Tolerance(low=0.010 * 0.99, high=IQ6_INT4_WEIGHTS * 1.02),
               slips=(Slip(2 * IQ6_INT4_WEIGHTS, "ratio:2", "int4: half a byte per parameter."),)),
        *(number(f"ch08-iq7-{d}", section=_story,
                 prompt=f"Queries/s per chip: {d} on its smallest slice, batch filling HBM, {decode} tokens each.",
                 reference=qps[d], tolerance=q7,
                 slips=slips(qps[d], q7, (qps[d] * decode, f"a query takes {decode} steps.")))
          for d in DTYPES),
        number("ch08-iq8-batch", section=_story, exact=True,
               prompt=f"How many {context}-token sequences fit on twice the smallest slice (any of the three "
                      "dtypes)?",
               reference=batch2, slips=slips(batch2, exact, (2 * batch, "the weights do not double."))),
        *(number(f"ch08-iq8-{d}", section=_story, prompt=f"Queries per second per chip: {d} on twice its smallest "
                                                         "slice.",
                 reference=qps2[d], tolerance=q8,
                 slips=slips(qps2[d], q8, (qps[d], "the batch more than triples on twice the chips.")))
          for d in DTYPES),
        Choice(qid="ch08-iq8-int4-bound", points=1, section=_story,
               prompt="At that batch on a 2x4 with int4 weights and bf16 math: more time in the weight matmuls' "
                      "'flops' or in reading the 'weights'?",
               reference=bound, options=("flops", "weights"),
               slips=(Slip("weights" if bound == "flops" else "flops", "wrong_option",
                           "int4 weights with bf16 math: the critical batch is 60."),)))


def iq5_valid(context: int, decode: int) -> bool:
    """IQ8's point (twice the chips more than double the batch) and its FLOP-bound int4 step must hold."""
    batch, batch2 = (batch_for("int8", chips_for("int8", d), context) for d in (False, True))
    return batch2 > 2 * batch and batch2 > inf.critical_batch(C_BF16, W_V5E, INT4)


def _same(value: float, book: float) -> bool:
    """A quantity at the student's values that is the book's (to float noise: B / Y = 2 computed two ways)."""
    return math.isclose(value, book, rel_tol=1e-12)


def iq9(B: int, Y: int) -> tuple[Question, ...]:
    """IQ9: one D x F weight matmul of a bf16 decode step at batch ``B`` split ``Y`` ways: the memory-bound
    TP limit (beta = 8, as the book takes it) and the collective, weight-read and FLOP times."""
    limit = inf.tp_limit_memory(L70.F, B, inf.BETA_BOOK)
    t = inf.megatron_times_s(B, L70.D, L70.F, Y, C_BF16, W_V5E, V5E.ici_bidirectional_bytes_per_s)
    book = inf.megatron_times_s(64, L70.D, L70.F, 32, C_BF16, W_V5E, V5E.ici_bidirectional_bytes_per_s)
    bound = max(t, key=t.get)
    # The book's 11 us, 4 us and 18 us, wherever the time is the book's: the collective at batch 64 (any Y), the
    # FLOPs at B / Y = 2, the weight read on 32 chips. Keyed to each time, not to the whole (B, Y); elsewhere 2%.
    t3 = Tolerance(rtol=0.03) if _same(t["hbm"], book["hbm"]) else TWO_PERCENT
    ici_tol = Tolerance(low=11e-6 * 0.99, high=book["ici"] * 1.02) if _same(t["ici"], book["ici"]) else TWO_PERCENT
    math_tol = Tolerance(low=4e-6 * 0.99, high=book["flops"] * 1.03) if _same(t["flops"], book["flops"]) \
        else rate_tolerance(V5E)
    return (
        number("ch08-iq9-tp-memory", section=_story,
               prompt=f"Memory-bound limit F / (8B) at batch {B} (W_hbm / W_ici taken as 8).", reference=limit,
               tolerance=THREE_FIGURES, slips=(Slip(L70.F / B, "ratio:8"),)),
        number("ch08-iq9-t-ici", section=_story,
               prompt=f"One decode matmul on {Y} chips, batch {B}, bf16: the activations' collective (D = 8192).",
               reference=t["ici"], unit="s", tolerance=ici_tol,
               slips=(Slip(t["ici"] * 2, "ratio:2", "W_ici is the bidirectional bandwidth."),)),
        number("ch08-iq9-t-hbm", section=_story, prompt="Its time to read the chip's share of the bf16 D x F weight.",
               reference=t["hbm"], unit="s", tolerance=t3,
               slips=(Slip(t["hbm"] * Y, f"ratio:{Y}",
                           "the weight is split over the chips: each reads only its own shard."),)),
        number("ch08-iq9-t-math", section=_story, prompt="Its FLOP time.", reference=t["flops"], unit="s",
               tolerance=math_tol,
               slips=(Slip(t["flops"] * Y, f"ratio:{Y}",
                           "the matmul is split over the chips: each does only its own share of the FLOPs."),)),
        Choice(qid="ch08-iq9-bound", points=1, section=_story, prompt="Which of the three bounds that matmul?",
               reference=bound, options=("ici", "hbm", "flops"),
               slips=(Slip(next(o for o in ("ici", "flops", "hbm") if o != bound), "wrong_option",
                           "compare the three times."),)))


def iq10(prompt: int, batch: int) -> tuple[Question, ...]:
    """IQ10-IQ12: prefilling a ``prompt``-token request of 70e9 parameters on 16 v5e at the book's MFU, the
    cache a continuous batch of ``batch`` frees per step, and prefill servers per generate server (the
    formulas between them do not depend on the values)."""
    prefill = inf.prefill_s(P70, prompt, IQ10_CHIPS, C_BF16, inf.PREFILL_MFU)
    finished = batch / IQ11_G
    evicted = inf.evicted_tokens_per_step(batch, prompt, IQ11_G)
    ratio = inf.prefill_to_generate_servers(batch, prefill, STEP_FULL, DECODE)
    # The book: 0.91 s, 19 ms, about 3. Its 19 ms step passes at every choice; with the v5e's peak rounded to
    # 2e14 (hw.BOOK_VALUES) the ratio is 1.5% lower (2.87 for the book's values).
    with_book_step = inf.prefill_to_generate_servers(batch, prefill, BOOK_STEP, DECODE)
    ratio_tol = Tolerance(low=ratio * (1 - TWO_PERCENT.rtol), high=with_book_step * 1.01)
    return (
        number("ch08-iq10-prefill", section=_prefill,
               prompt=f"Seconds to prefill {prompt} tokens of 70e9 parameters on 16 v5e at 40% MFU.",
               reference=prefill, unit="s", tolerance=rate_tolerance(V5E, ONE_PERCENT),  # 1 / C, as IQ4's C / W
               slips=(Slip(prefill * inf.PREFILL_MFU, "not_equal", "divide by the MFU."),)),
        number("ch08-iq11-finished", section=_prefill,
               prompt=f"Continuous batching, batch {batch}, {IQ11_G}-token decodes: sequences finishing per step.",
               reference=finished, tolerance=THREE_FIGURES,
               slips=slips(finished, THREE_FIGURES, (1 / IQ11_G, "B sequences finish every G steps."))),
        number("ch08-iq11-evicted", section=_prefill, prompt=f"Tokens of cache freed per step with {prompt}-token "
                                                             "prompts.",
               reference=evicted, tolerance=THREE_FIGURES,
               slips=slips(evicted, THREE_FIGURES, (batch * prompt / IQ11_G,
                                                    "the generated tokens' cache is freed too."))),
        Formula(qid="ch08-iq11-formula", points=1, section=_prefill,
                prompt="Cache tokens freed per step: batch B, prompts of P tokens, decodes of G tokens.",
                reference=IQ11_FORMULA, symbols="B P G",
                slips=(Slip(B * P / G, "term_missing", "the generated tokens' cache is freed too."),)),
        Formula(qid="ch08-iq12-formula", points=1, section=_prefill,
                prompt="Prefill servers per generate server: batch B, t_pre per prefill, t_step per step, G-token "
                       "decodes.",
                reference=IQ12_FORMULA, symbols="B G t_pre t_step",
                slips=(Slip(t_pre / (t_step * G), "missing_symbol:B",
                            "a generate server finishes B requests at once."),)),
        number("ch08-iq12-ratio", section=_prefill,
               prompt=f"That ratio with batch {batch}, 512-token decodes, IQ10's prefill and a full-HBM step.",
               reference=ratio, tolerance=ratio_tol,
               slips=slips(ratio, ratio_tol, (ratio / batch, "a generate server finishes B requests every G steps."))))


def iq13(context: int, chips: int) -> tuple[Number, ...]:
    """IQ13: two points of the frontier of int8 LLaMA 3-70B on ``chips`` v5e with bf16 math: the step at
    batch 1 and the throughput per chip at batch 120, with ``context``-token caches."""
    book = (context, chips) == (2048, 16)

    def point(batch: int) -> tuple[float, float]:
        step = inf.decode_step_s(batch, KV8 * context, INT8 * P70, P70, chips, C_BF16, W_V5E)
        return step, batch / step / chips
    latency = point(1)[0]
    cache = KV8 * context / (chips * W_V5E)  # the one sequence's cache, read every step
    plateau = point(IQ13_PLATEAU_B)[1] / 1e3  # tokens per ms per chip
    plateau_tol = Tolerance(low=0.85, high=1.05) if book else TWO_PERCENT  # the book reads "around 1"
    # The cache is what this point asks about. Elsewhere it is at least IQ13_CACHE_SHARE of the step, so 1%
    # tells leaving it out, or reading it in bf16, from the step. At the book's 2k context it is 0.5%: the range
    # stops halfway to leaving it out, and reaches the book's 5.5 ms read off its plot (which a bf16 cache,
    # lying between, cannot be told from).
    latency_tol = Tolerance(low=latency - cache / 2, high=BOOK["ch08-iq13-latency-b1"] * 1.01) if book \
        else ONE_PERCENT
    return (
        number("ch08-iq13-latency-b1", section=_pareto,
               prompt=f"Frontier: step time at batch 1, {context}-token context, int8 on {chips} v5e.",
               reference=latency, unit="s", tolerance=latency_tol,
               slips=(Slip(latency * 2, "ratio:2", "int8: 1 byte per parameter."),
                      *slips(latency, latency_tol, (latency - cache, "the sequence's KV cache is read every step too."),
                             (latency + cache, "the KV cache is int8 too: 1 byte per element.")))),
        number("ch08-iq13-plateau", section=_pareto,
               prompt=f"Frontier: tokens per ms per chip at batch {IQ13_PLATEAU_B} with a {context}-token context.",
               reference=plateau, tolerance=plateau_tol,
               slips=slips(plateau, plateau_tol, (plateau * chips, "per chip."))))


def iq13_valid(context: int, chips: int) -> bool:
    """Batch 120's caches must fit beside the weights, and at batch 1 the cache must weigh enough in the step
    for the latency to ask about it (the book's 2k context excepted: there the book's plot reading decides)."""
    fits = inf.max_batch(HBM, chips, INT8 * P70, KV8 * context) >= IQ13_PLATEAU_B
    return fits and (context == 2048 and chips == 16 or KV8 * context / (INT8 * P70) >= IQ13_CACHE_SHARE)


def w2(batch: int) -> tuple[Question, ...]:
    """W2: LLaMA 3-8B's int8 weights and ``batch`` int8 caches of 8192 tokens, and the smallest slice."""
    weights = INT8 * m.params_of(L8)
    total = weights + batch * W2_KV * CONTEXT
    name = inf.smallest_slice(total)
    below = _below(name)
    # every weight, the embeddings included (0.8-2% of the total, by the batch): leaving them out, or one of the two
    # matrices, is refused where rounding allows (one matrix is 0.4% of it at the book's batch of 240)
    embeddings = INT8 * m.embedding_params(L8.D, L8.V, L8.tied)
    tolerance = refusing(total, total - embeddings / 2)
    return (
        number("ch08-w2-total-bytes", section=_wp,
               prompt=f"W2: int8 weights plus {batch} int8 caches of 8192 tokens.", reference=total, unit="B",
               tolerance=tolerance,
               slips=slips(total, tolerance, (total - weights, "count the weights too."),
                           (total - embeddings, "LLaMA 3-8B's weights include its two V x D embedding matrices."))),
        Choice(qid="ch08-w2-slice", points=1, section=_wp, prompt="W2: the smallest v5e slice for it.",
               reference=name, options=SLICE_OPTIONS,
               slips=(Slip(below, "wrong_option", f"the HBM of a {below} slice's {inf.V5E_SLICES[below]} chips is "
                                                  "less than those bytes."),)))


def w3(limit: float, context: int) -> tuple[Question, ...]:
    """W3: LLaMA 3.1-405B within ``limit`` seconds per step, ``context``-token caches: the slice, its
    shortest step, and the largest batch by HBM bytes and with FLOPs."""
    plan = w3_plan(limit, context)
    ms = f"{limit * 1e3:g} ms"
    below = _below(plan["slice"])
    exact = Tolerance.exact_count()
    return (
        Choice(qid="ch08-w3-slice", points=1, section=_wp,
               prompt=f"W3: smallest v5e slice that reads 405e9 B of int8 weights within {ms}.",
               reference=plan["slice"], options=SLICE_OPTIONS,
               slips=(Slip(below, "wrong_option",
                           f"{inf.V5E_SLICES[below]} chips need more than {ms} for the weights alone."),)),
        number("ch08-w3-min-step", section=_wp, prompt="W3: the minimum decode step on that slice.",
               reference=plan["min_step"], unit="s",
               slips=(Slip(2 * plan["min_step"], "ratio:2", "int8: 1 byte per parameter."),)),
        number("ch08-w3-batch-hbm", section=_wp, exact=True,
               prompt=f"W3: the largest {context}-token batch (an exact count) within {ms} by HBM bandwidth alone.",
               reference=plan["hbm"],
               slips=slips(plan["hbm"], exact, (plan["fits"], "that is what fits, not what the limit allows."))),
        number("ch08-w3-batch-flops", section=_wp, exact=True,
               prompt="W3: the same batch (an exact count) with the weight matmuls' bf16 FLOPs counted at "
                      "v5e.bf16_flops_per_s, as decode_step does.",
               reference=plan["flops"],
               slips=slips(plan["flops"], exact,
                           (plan["hbm"], "above the critical batch (IQ4) the weight matmuls are FLOP-bound."))))


def w3_valid(limit: float, context: int) -> bool:
    """As in the book's setting: the limit, not HBM, caps the batch, and the FLOPs lower it (a batch above
    the critical one)."""
    plan = w3_plan(limit, context)
    return plan["fits"] > plan["hbm"] > plan["flops"] > inf.critical_batch(C_BF16, W_V5E, INT8)


def cx4(B: int, S: int) -> tuple[Question, ...]:
    """CX4: the KV-sharded decode step for a student's batch and context, and the cache bytes each of the 8
    devices reads."""
    per_device = 2 * B * S * CX4_K * CX4_H * hw.BYTES_PER_ELEMENT["fp32"] / CX4_DEVICES
    return (
        Program(qid="ch08-cx4-kv-sharded-decode", points=3, section=_story,
                prompt=f"A decode step's attention on a ('batch': 2, 'kv': 4) mesh (B = {B}, S = {S}): sequences and "
                       "cache heads split.",
                spec=kv_spec(B, S), model=kv_sharded_decode,
                slips=(Slip(cx4_forgets_sum, "partial_sum:kv"), Slip(cx4_gathers_cache, "collectives:all-gather"))),
        number("ch08-cx4-kv-bytes", section=_story,
               prompt="CX4: bytes of f32 key and value cache each device reads in that program.",
               reference=per_device, unit="B", tolerance=THREE_FIGURES,
               slips=(Slip(CX4_DEVICES * per_device, "ratio:8", "each device reads its block."),
                      Slip(per_device / 2, "ratio:1/2", "keys and values.", maybe=True))))


# --- the records -------------------------------------------------------------------------------------

CHAPTER = Chapter("ch08_applied_inference", "Serving LLaMA 3-70B", (
    # 1. Which chip.
    vary("ch08-e1", e1, h100_usd=values(PRICE["H100"], 9.0, 12.6), v5p_usd=values(PRICE["TPU v5p"], 3.5, 5.0),
         v5e_usd=values(PRICE["TPU v5e"], 1.0, 1.5)),
    # 2. Memory: what fits where.
    number("ch08-iq1-kv-per-token", section=_story, prompt="LLaMA 3-70B: int8 KV cache bytes per token.", reference=KV8,
           unit="B", tolerance=PER_TOKEN,
           slips=(Slip(2 * KV8, "ratio:2", "int8: 1 byte per element.", maybe=True),
                  Slip(KV8 / 2, "ratio:1/2", KEY_AND_VALUE),
                  Slip(KV8 * L70.N // L70.K, "ratio:8", "the cache holds the 8 key/value heads."))),
    vary("ch08-iq1", iq1, context=values(32_768, 16_384, 65_536), sequences=values(240, 100, 64)),
    vary("ch08-iq2", iq2, batch=values(32, 16, 48), context=values(CONTEXT, 2048)),
    number("ch08-iq4-int8-weights", section=_story, prompt="Critical batch on v5e with int8 weights and bf16 math.",
           reference=IQ4, tolerance=rate_tolerance(V5E, ONE_PERCENT),  # C / W: the book's rounded peak passes too
           slips=(Slip(2 * IQ4, "ratio:2", "int8 weights halve the bytes per FLOP."),)),
    Function(qid="ch08-cx1-serving-plan", points=3, section=_story,
             prompt="serving_plan(weight_bytes, kv_bytes_per_token, context, hbm_per_chip, hbm_bytes_per_s, "
                    "decode_tokens, slices): chips, free HBM, max batch, step seconds, queries/s per chip.",
             reference=serving_plan, probes=PLAN_PROBES, draw=draw_plan,
             output=(Output("number", tolerance=EXACT), Output("number", unit="B", tolerance=Tolerance(rtol=1e-6)),
                     Output("number", tolerance=EXACT), Output("number", unit="s", tolerance=Tolerance(rtol=1e-6)),
                     Output("number", tolerance=Tolerance(rtol=1e-6))),
             slips=(Slip(cx1_ignores_caches_in_step, "not_equal"), Slip(cx1_ignores_slices, "ratio:1/2"))),
    vary("ch08-iq5", iq5, context=values(CONTEXT, 4096, 16_384), decode=values(DECODE, 300, 1024), valid=iq5_valid),
    # 3. Sharding and serving.
    vary("ch08-iq9", iq9, B=values(64, 32, 96), Y=values(32, 16, 64)),
    vary("ch08-iq10", iq10, prompt=values(8192, 4096, 16_384), batch=values(32, 20, 48)),
    vary("ch08-iq13", iq13, context=values(2048, 8192, 16_384), chips=values(16, 32, 64), valid=iq13_valid),
    Function(qid="ch08-cx2-largest-batch", points=2, section=_pareto,
             prompt="largest_batch(step, context, weight_bytes, kv_bytes_per_token, n_chips, hbm_per_chip): "
                    "the largest batch on the grid that fits.",
             reference=largest_batch, probes=BATCH_PROBES, draw=draw_largest, output=Output("number", tolerance=EXACT),
             slips=(Slip(cx2_book_bug, "not_equal", "the index found on the step grid reads a grid of step 1 "
                                                       "(the book's script): take the batch from the grid the index "
                                                       "came from."),
                    Slip(cx2_off_by_one, "close"))),
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
    vary("ch08-w2", w2, batch=values(240, 120, 160, 80)),  # at 360 or more the embeddings are under 0.5% of it
    vary("ch08-w3", w3, limit=values(0.015, 0.013, 0.012), context=values(CONTEXT, 4096, 2048), valid=w3_valid),
    # 5. Programs: the decode step's pieces on 8 chips.
    vary("ch08-cx4", cx4, B=values(8, 4, 16), S=values(16, 24)),
    Program(qid="ch08-cx6-weight-stationary-mlp", points=3, section=_story,
            prompt="A decode batch's MLP relu(x @ w_in) @ w_out on a (X=2, Y=4) mesh: F split over both axes, the "
                   "weights never move.",
            spec=WS_SPEC, model=weight_stationary_mlp,
            slips=(Slip(cx6_forgets_sum, "partial_sum:X,Y"),
                   Slip(cx6_sums_over_y, "wrong_values",
                        "the partial sums of F are split over both mesh axes: a sum over one of them adds only part "
                        "of the terms."),
                   Slip(cx6_gathers_weights, "collectives:all-gather"))),
    Program(qid="ch08-cx7-decode-attention", points=3, section=_story,
            prompt="A decode step's softmax attention (GQA) over a cache split by sequence and key/value head on a "
                   "('batch': 2, 'kv': 4) mesh.",
            spec=DA_SPEC, model=sharded_decode_attention,
            slips=(Slip(cx7_skips_new_token, "wrong_values",
                        "the new token attends to its own key and value too, not only to the cached positions."),
                   Slip(cx7_interleaves_heads, "wrong_values",
                        "query head n uses key/value head n // G (the prompt's n = kG + g), not n % K."),
                   Slip(cx7_gathers_cache, "collectives:all-gather"))),
))
