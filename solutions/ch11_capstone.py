"""Chapter 11, Capstone: a new model and a hardware budget, from training plan to serving plan and cost.

Book: Part 11 "Conclusions and Further Reading", https://jax-ml.github.io/scaling-book/conclusion/ (no
problems of its own). The capstone combines Parts 1-10 and 12; labels follow the syllabus's tasks:
C1 planner (training, serving, cost; GPU variant), C2 a sharded decoder block (an MLP with collective
matmuls; head-sharded GQA attention with a KV cache, in prefill and in one decode step), C3 reading a
compiled program, C4 a small FSDP + TP training run and its roofline at scale, C5 an ungraded report.

The planners reproduce the chapters' pinned answers (LLaMA-2 13B and LLaMA 3-70B training, LLaMA 3-70B
serving, LLaMA 3-70B on H100s); the new model, Course-31B, is the course's own, so its answers are
DERIVED. References are computed from ``course.models`` and ``course.hardware`` with ``solutions._derived``, never
typed in.
Prices are the Google Cloud on-demand prices the book's Part 8 quotes (``hw.PRICE_USD_PER_CHIP_HOUR``).
"""

from __future__ import annotations

import math
import random

import numpy as np

import course
from solutions._derived import models as m
from solutions._derived.hardware import pod_chips, torus_axes
from solutions._kit import *  # noqa: F403 (the authoring vocabulary: solutions/_kit.py)
from solutions._kit import NamedSharding, P

V5P, V5E, H100 = hw.TPU_V5P, hw.TPU_V5E, hw.H100
PRICE = hw.PRICE_USD_PER_CHIP_HOUR
TRAINING, APPLIED_TRAINING = "training/", "applied-training/"
INFERENCE, SERVING, GPUS = "inference/", "applied-inference/", "gpus/"
JAX, PROFILING, CONCLUSION = "jax-stuff/", "profiling/", "conclusion/"
DAY_S = 86_400

# The capstone's new model: a dense GQA transformer with a gated MLP, invented for this course.
COURSE_31B = m.Config("Course-31B", L=64, D=6144, F=20_480, N=48, K=8, H=128, V=128_256,
                           source="the course's capstone (a made-up model; not in the book)")
DIMS = ("L", "D", "F", "N", "K", "H", "V")


def dims(cfg: m.Config) -> dict[str, int]:
    return {k: getattr(cfg, k) for k in DIMS}


# --- C1: training plan (Parts 5 and 6) ----------------------------------------------------------------------

def param_count(L, D, F, N, K, H, V):
    """Part 4's count: a gated MLP, grouped-query attention, two V x D embeddings; norms left out."""
    return m.params(L, D, F, N, K, H, V)


def plan_training(L, D, F, N, K, H, V, chips, mesh_axes, peak, ici_bw, batch, tokens, mfu):
    """(X, Y, step seconds, days) for a dense model on a TPU slice (Part 5's rules, Part 6's rounding).

    alpha = peak / ici_bw (bidirectional bytes/s of one link). With b = batch / chips tokens per chip:
    pure FSDP (X = chips, Y = 1) when b > alpha / mesh_axes; else FSDP + TP when b > alpha^2 / (M_X F)
    with M_X = mesh_axes - 1 torus axes for FSDP and one for TP (Part 5), X the power of two nearest
    sqrt(batch / F * M_X * chips) and Y the largest power of two with X Y <= chips; else no strategy is
    compute-bound: X = Y = 0. Times use every chip: 6 P tokens / (chips peak mfu)."""
    P_ = param_count(L, D, F, N, K, H, V)  # P_: P is PartitionSpec in this notebook
    alpha = peak / ici_bw
    b = batch / chips
    mx = max(mesh_axes - 1, 1)
    if b > alpha / mesh_axes:
        x, y = chips, 1
    elif b > alpha**2 / (mx * F):
        x = min(2 ** math.floor(math.log2(math.sqrt(batch / F * mx * chips)) + 0.5), chips)
        y = 2 ** int(math.log2(chips // x))
    else:
        x = y = 0
    rate = chips * peak * mfu
    return x, y, 6 * P_ * batch / rate, 6 * P_ * tokens / rate / 86400


def plan_training_fsdp_only(L, D, F, N, K, H, V, chips, mesh_axes, peak, ici_bw, batch, tokens, mfu):
    """Always pure FSDP: ignores the communication bound."""
    _, _, step, days = plan_training(L, D, F, N, K, H, V, chips, mesh_axes, peak, ici_bw, batch, tokens, mfu)
    return float(chips), 1.0, step, days


def plan_training_forgets_6(L, D, F, N, K, H, V, chips, mesh_axes, peak, ici_bw, batch, tokens, mfu):
    """Counts 2 FLOPs per parameter per token (the forward pass only)."""
    x, y, step, days = plan_training(L, D, F, N, K, H, V, chips, mesh_axes, peak, ici_bw, batch, tokens, mfu)
    return x, y, step / 3, days / 3


def _train(cfg, chips, chip, batch, tokens, mfu=0.4):
    return dict(dims(cfg), chips=chips, mesh_axes=torus_axes(chip), peak=chip.bf16_flops_per_s,
                ici_bw=chip.ici_bidirectional_bytes_per_s, batch=batch, tokens=tokens, mfu=mfu)


V5P_4096, V5P_POD, V5E_POD = 16 * 16 * 16, pod_chips(V5P), pod_chips(V5E)
LLAMA2_TOKENS = 2e12  # LLaMA 2's pre-training tokens (its paper; Part 5 gives no total)
TRAIN_PROBES = (
    _train(m.LLAMA2_13B, V5P_4096, V5P, 3e6, LLAMA2_TOKENS),  # Part 5 Q3: FSDP+TP (1024, 4), 0.311 s
    _train(m.LLAMA3_70B, V5P_POD, V5P, 4 * 2**20, 15e12),  # Part 6 A4, A9: (2048, 4), 44 days
    _train(m.LLAMA2_13B, V5P_4096, V5P, 1e7, LLAMA2_TOKENS),  # Part 5 X1: pure FSDP, 1.037 s
    _train(m.LLAMA2_13B, V5P_4096, V5P, 2**20, LLAMA2_TOKENS),  # Part 5 X1: (1024, 4), 0.109 s
    _train(m.LLAMA2_13B, V5P_4096, V5P, 2**18, LLAMA2_TOKENS),  # 64 tokens per chip: nothing works
    _train(m.LLAMA3_8B, V5E_POD, V5E, 2**20, 15e12, mfu=0.5),  # a v5e pod (2-D torus): pure FSDP
    _train(m.LLAMA3_8B, V5E_POD, V5E, 2**18, 15e12, mfu=0.3),  # FSDP + TP on the 2-D torus
    _train(COURSE_31B, V5P_4096, V5P, 2 * 2**20, 6e12),  # the capstone's budget
)

# The capstone's budget: a v5p 16x16x16 slice, 2M-token batches, 6T tokens at 40% MFU; or H100s at 45%. These
# are the course's own values; each student is dealt a batch, a slice and a token count (c1_train, c4_scale).
BUDGET = TRAIN_PROBES[-1]
CAP_P = m.params_of(COURSE_31B)
CAP_COUNT = count_of(COURSE_31B.name, CAP_P)  # 3 significant figures, and "31B" refused with a hint
H100_MFU = 0.45  # Part 12's assumption for H100 training (Q5.2); Part 2 takes it for every GPU


def capstone_plan(batch: int, chips: int, tokens: float = BUDGET["tokens"]) -> tuple[int, int, float, float]:
    """Course-31B's training plan on a v5p slice of ``chips`` (a 3-D torus) at the budget's 40% MFU:
    (X, Y, step seconds, days), as the student's planner computes it."""
    return plan_training(**_train(COURSE_31B, chips, V5P, batch, tokens))


def fsdp_tp_regime(batch: int, chips: int) -> bool:
    """Whether a batch on ``chips`` v5p chips needs FSDP + TP (pure FSDP is not compute-bound, and FSDP + TP
    is, with Y > 1): the regime the capstone's prose and slips are written for."""
    x, y, _, _ = capstone_plan(batch, chips)
    return x > 0 and y > 1

# --- C1: serving plan (Parts 7 and 8) --------------------------------------------------------------------
# Chips in the legal TPU v5e slices (1x1, 2x2, 2x4, 4x4, 4x8, 8x8, 8x16, 16x16; Cloud TPU documentation).
V5E_SLICE_CHIPS = (1, 4, 8, 16, 32, 64, 128, 256)


def plan_serving(L, D, F, N, K, H, V, weight_bytes, kv_bytes, context, batch, hbm, hbm_bw, peak, latency, slices):
    """(chips, decode step seconds): the smallest legal slice whose HBM holds the weights and the batch's
    KV caches and whose decode step fits the latency budget; (0, 0) when none does. A decode step is
    Part 7's: the weight matmuls (compute- or bandwidth-bound) plus every sequence's KV cache read once
    (always bandwidth-bound); the two do not overlap."""
    P_ = param_count(L, D, F, N, K, H, V)
    cache = 2 * L * K * H * kv_bytes * context  # one sequence: a key and a value per layer and token
    need = P_ * weight_bytes + batch * cache
    for n in sorted(slices):
        step = max(2 * batch * P_ / (n * peak), P_ * weight_bytes / (n * hbm_bw)) + batch * cache / (n * hbm_bw)
        if n * hbm >= need and step <= latency:
            return n, step
    return 0, 0.0


def plan_serving_memory_only(L, D, F, N, K, H, V, weight_bytes, kv_bytes, context, batch, hbm, hbm_bw, peak,
                             latency, slices):
    """Picks the smallest slice that fits in memory, ignoring the latency budget."""
    return plan_serving(L, D, F, N, K, H, V, weight_bytes, kv_bytes, context, batch, hbm, hbm_bw, peak, math.inf,
                        slices)


def plan_serving_kv_once(L, D, F, N, K, H, V, weight_bytes, kv_bytes, context, batch, hbm, hbm_bw, peak, latency,
                         slices):
    """Counts one sequence's KV cache instead of the whole batch's."""
    return plan_serving(L, D, F, N, K, H, V, weight_bytes, kv_bytes, context, 1, hbm, hbm_bw, peak, latency, slices)


def _serve(cfg, weight_bytes, kv_bytes, context, batch, latency, chip=V5E):
    """A serving case on ``chip`` (its HBM, bandwidth and peak), over the v5e's slice sizes."""
    return dict(dims(cfg), weight_bytes=weight_bytes, kv_bytes=kv_bytes, context=context, batch=batch,
                hbm=chip.hbm_bytes, hbm_bw=chip.hbm_bytes_per_s, peak=chip.bf16_flops_per_s, latency=latency,
                slices=list(V5E_SLICE_CHIPS))


SERVE_PROBES = (
    _serve(m.LLAMA3_70B, 1, 1, 8192, 32, 0.05),  # Part 8 IQ2/IQ3: 4x2, about 17 ms
    _serve(m.LLAMA3_70B, 1, 1, 8192, 32, 0.010),  # the same at 10 ms: 4x4
    _serve(COURSE_31B, 1, 1, 8192, 64, 0.015),  # the capstone: memory says 8 chips, latency 16
    _serve(COURSE_31B, 2, 2, 4096, 32, 0.05),
    _serve(m.LLAMA3_8B, 2, 2, 2048, 128, 0.02),
    _serve(m.LLAMA3_8B, 1, 1, 256, 2048, 0.05),  # a big batch: the weight matmuls are compute-bound
    _serve(m.LLAMA31_405B, 1, 1, 32768, 16, 0.02),
    _serve(m.LLAMA31_405B, 2, 2, 8192, 8, 0.001),  # no slice is fast enough
    _serve(m.LLAMA3_70B, 1, 1, 8192, 64, 0.05, chip=hw.TPU_V6E),  # memory decides
    _serve(COURSE_31B, 2, 2, 4096, 64, 0.012, chip=hw.TPU_V5P),  # the latency decides
    _serve(m.LLAMA3_8B, 2, 2, 8192, 256, 0.05, chip=hw.TPU_V6E),  # memory decides
)
SERVE = SERVE_PROBES[2]
CAP_KV_PER_TOKEN = m.kv_bytes_per_token(COURSE_31B.L, COURSE_31B.K, COURSE_31B.H, SERVE["kv_bytes"])


def weights_slice() -> int:
    """Chips of the smallest v5e slice that holds Course-31B's int8 weights alone, no caches."""
    return next(n for n in V5E_SLICE_CHIPS if n * V5E.hbm_bytes >= CAP_P * SERVE["weight_bytes"])


def serving_plan(batch: int, context: int) -> tuple[int, int, float]:
    """Course-31B served int8 on v5e slices within the budget's latency: (chips of the smallest slice that
    holds weights and caches, chips of the one that also meets the latency, its step seconds)."""
    need = CAP_P * SERVE["weight_bytes"] + batch * CAP_KV_PER_TOKEN * context
    memory = next((n for n in V5E_SLICE_CHIPS if n * V5E.hbm_bytes >= need), 0)
    chips, step = plan_serving(**(SERVE | {"batch": batch, "context": context}))
    return memory, chips, step

# --- C1, GPU variant: LLaMA 3-70B on 4096 H100s (Part 12, Q5.2) ----------------------------------------------
# A student may get another node (its GPU) or model; the GPU count, tokens and MFU stay the book's.
Q52_GPUS, Q52_TOKENS = 4096, 15e12
GPU_PP = GPU_TP = 8  # the configurations' 8-way pipeline and 8-way TP inside a node


def gpu_plan(node: hw.GPUNode, model: m.Config, batch: float) -> dict[str, float]:
    """Part 12's Q5.2 for ``model`` on 4096 GPUs of ``node``: the fewest GPUs that hold the training state,
    the days, the largest TP degree NVLink keeps compute-bound (Y < F W / C), tokens per GPU, and the
    tokens per GPU that DP across nodes needs, without and with 8-way pipelining."""
    gpu, p = node.gpu, m.params_of(model)
    dp = gpu.bf16_flops_per_s / node.egress_bytes_per_s
    return dict(min_gpus=math.ceil(m.TRAIN_STATE_BYTES * p / gpu.hbm_bytes),
                days=6 * p * Q52_TOKENS / (Q52_GPUS * gpu.bf16_flops_per_s * H100_MFU) / DAY_S,
                tp_limit=model.F * gpu.nvlink_bytes_per_s / gpu.bf16_flops_per_s, per_gpu=batch / Q52_GPUS,
                dp=dp, pp=dp / GPU_PP, state_per_gpu=m.TRAIN_STATE_BYTES * p / GPU_TP)

# --- C2: an MLP with collective matmuls (Part 10) on (X=2, Y=4) ------------------------------------------------
C2_MESH = (("X", 2), ("Y", 4))
C2_B, C2_D, C2_F = 16, 64, 256


def _slice(w, index, size, axis):
    return jax.lax.dynamic_slice_in_dim(w, index * size, size, axis=axis)


def collective_mlp(x, w_in, w_out):
    """x[B_X, D_Y] . W_in[D, F_Y] . W_out[F_Y, D] -> [B_X, D_Y]: the AllGather of x over Y and the
    ReduceScatter of the result, each done as Y - 1 ppermutes overlapped with Y partial matmuls."""
    def block(x_block, w_in_block, w_out_block):  # [B/X, D/Y], [D, F/Y], [F/Y, D]
        ny, i = jax.lax.axis_size("Y"), jax.lax.axis_index("Y")
        right = [(j, (j + 1) % ny) for j in range(ny)]
        d, c = x_block.shape[1], w_out_block.shape[1] // ny

        def rows(k):  # the rows of W_in that meet chunk k of x: [D/Y, F/Y]
            return jax.lax.dynamic_slice_in_dim(w_in_block, k * d, d, axis=0)

        def cols(k):  # the columns of W_out that make chunk k of the result: [F/Y, D/Y]
            return jax.lax.dynamic_slice_in_dim(w_out_block, k * c, c, axis=1)

        h, piece = x_block @ rows(i), x_block  # [B/X, F/Y], from our own chunk of x
        for s in range(1, ny):
            piece = jax.lax.ppermute(piece, "Y", right)  # chunk of device i - s
            h = h + piece @ rows((i - s) % ny)
        acc = h @ cols((i - 1) % ny)  # a partial sum of chunk i - 1
        for s in range(1, ny):
            acc = jax.lax.ppermute(acc, "Y", right) + h @ cols((i - 1 - s) % ny)
        return acc  # chunk i of the sum: [B/X, D/Y]
    mesh = course.mesh(X=2, Y=4)
    return jax.shard_map(block, mesh=mesh, in_specs=(P("X", "Y"), P(None, "Y"), P("Y", None)),
                         out_specs=P("X", "Y"))(x, w_in, w_out)


def c2_library_collectives(x, w_in, w_out):
    def block(xb, wi, wo):
        full = jax.lax.all_gather(xb, "Y", axis=1, tiled=True)
        return jax.lax.psum_scatter(full @ wi @ wo, "Y", scatter_dimension=1, tiled=True)
    return smap(block, C2_MESH, (P("X", "Y"), P(None, "Y"), P("Y", None)), P("X", "Y"))(x, w_in, w_out)


def c2_own_rows_every_step(x, w_in, w_out):
    """Multiplies every arriving chunk of x by the rows that match its own chunk."""
    def block(xb, wi, wo):
        ny, i = jax.lax.axis_size("Y"), jax.lax.axis_index("Y")
        right = ring(ny)
        rows = _slice(wi, i, xb.shape[1], 0)
        h, piece = xb @ rows, xb
        for _ in range(1, ny):
            piece = jax.lax.ppermute(piece, "Y", right)
            h = h + piece @ rows
        c = wo.shape[1] // ny
        acc = h @ _slice(wo, (i - 1) % ny, c, 1)
        for s in range(1, ny):
            acc = jax.lax.ppermute(acc, "Y", right) + h @ _slice(wo, (i - 1 - s) % ny, c, 1)
        return acc
    return smap(block, C2_MESH, (P("X", "Y"), P(None, "Y"), P("Y", None)), P("X", "Y"))(x, w_in, w_out)


# --- C2: head-sharded GQA attention with a KV cache (Parts 7 and 10) on the same (X=2, Y=4) mesh ----------------
# The block's attention, with the batch over X and the heads over Y: N = 16 query heads, K = 8 key/value heads
# (two query heads read each), so a device holds 4 query heads and the 2 key/value heads they read, and its
# slice of the KV cache. A head's softmax needs only its own q, k, v: the one sum across devices is the output
# projection's over the heads (one AllReduce over Y), in prefill and in every decode step alike.
# B = 4 sequences, a prompt (and a cache) of T = S = 16 tokens, D = 16, H = 8.
GQA_B, GQA_T, GQA_D, GQA_N, GQA_K, GQA_H = 4, 16, 16, 16, 8, 8
HEADS, OUT_ROWS = (None, "Y", None), ("Y", None, None)
PREFILL_SPECS = (("X", None, None), HEADS, HEADS, HEADS, OUT_ROWS)
CACHE = ("X", None, "Y", None)  # [B, S, K, H]: each device keeps its sequences' cache of its key/value heads
DECODE_SPECS = (("X", None), CACHE, CACHE, HEADS, HEADS, HEADS, OUT_ROWS)


def _gqa_atol() -> float:
    """1e-3 of an output entry's typical size: a value is a sum over D of random normals and an output
    entry a sum over N * H of values times weights (float32 rounding stays far below)."""
    return 1e-3 * math.sqrt(GQA_D * GQA_N * GQA_H)


def gqa_prefill(x, w_q, w_k, w_v, w_o):
    """Causal GQA attention over the prompt with the heads split over Y: each device runs its query heads
    and the key/value heads they read in full (softmax and all), then multiplies by its rows of w_o: a
    partial sum over the heads, added by one psum over Y."""
    def block(x_rows, wq, wk, wv, wo):  # f32[2, 16, 16], [16, 4, 8], [16, 2, 8], [16, 2, 8], [4, 8, 16]
        q = jnp.einsum("btd,dnh->btnh", x_rows, wq)  # [2, 16, 4, 8]: this device's query heads
        k = jnp.einsum("btd,dkh->btkh", x_rows, wk)  # [2, 16, 2, 8]: the key/value heads they read
        v = jnp.einsum("btd,dkh->btkh", x_rows, wv)
        group = q.shape[2] // k.shape[2]  # query heads per key/value head
        k, v = jnp.repeat(k, group, axis=2), jnp.repeat(v, group, axis=2)  # query head n reads n // group
        scores = jnp.einsum("btnh,bsnh->bnts", q, k) / jnp.sqrt(q.shape[-1])  # [2, 4, 16, 16]
        causal = jnp.tril(jnp.ones(scores.shape[-2:], dtype=bool))  # token t sees tokens 0..t
        weights = jax.nn.softmax(jnp.where(causal, scores, -jnp.inf), axis=-1)
        out = jnp.einsum("bnts,bsnh->btnh", weights, v)  # [2, 16, 4, 8]
        return jax.lax.psum(jnp.einsum("btnh,nhd->btd", out, wo), "Y")  # [2, 16, 16]: all heads added

    heads = P(None, "Y", None)
    return jax.shard_map(block, mesh=course.mesh(X=2, Y=4),
                         in_specs=(P("X", None, None), heads, heads, heads, P("Y", None, None)),
                         out_specs=P("X", None, None))(x, w_q, w_k, w_v, w_o)


def _prefill_heads(x_rows, wq, wk, wv, *, mask=True, tile=False):
    """This device's heads' attention outputs [B_X, T, N_Y, H] (a helper of the slips): ``mask=False``
    lets every token see the whole prompt, ``tile=True`` pairs query head n with key/value head n % K."""
    q, k, v = (jnp.einsum("btd,dnh->btnh", x_rows, w) for w in (wq, wk, wv))
    group = q.shape[2] // k.shape[2]
    k, v = ((jnp.tile(a, (1, 1, group, 1)) if tile else jnp.repeat(a, group, axis=2)) for a in (k, v))
    scores = jnp.einsum("btnh,bsnh->bnts", q, k) / jnp.sqrt(q.shape[-1])
    if mask:
        scores = jnp.where(jnp.tril(jnp.ones(scores.shape[-2:], dtype=bool)), scores, -jnp.inf)
    return jnp.einsum("bnts,bsnh->btnh", jax.nn.softmax(scores, axis=-1), v)


def prefill_sees_the_future(x, w_q, w_k, w_v, w_o):
    """Leaves out the causal mask: every prompt token attends to the tokens after it too."""
    def block(x_rows, wq, wk, wv, wo):
        return jax.lax.psum(jnp.einsum("btnh,nhd->btd", _prefill_heads(x_rows, wq, wk, wv, mask=False), wo), "Y")
    return smap(block, C2_MESH, PREFILL_SPECS, ("X", None, None))(x, w_q, w_k, w_v, w_o)


def prefill_tiles_kv_heads(x, w_q, w_k, w_v, w_o):
    """Widens the key/value heads with tile instead of repeat: query head n reads head n % K, not n // G."""
    def block(x_rows, wq, wk, wv, wo):
        return jax.lax.psum(jnp.einsum("btnh,nhd->btd", _prefill_heads(x_rows, wq, wk, wv, tile=True), wo), "Y")
    return smap(block, C2_MESH, PREFILL_SPECS, ("X", None, None))(x, w_q, w_k, w_v, w_o)


def prefill_gathers_heads(x, w_q, w_k, w_v, w_o):
    """Gathers every head's output and all of w_o over Y, then projects on every device: right, but it
    moves the [B_X, T, N, H] activations and w_o where one AllReduce of [B_X, T, D] suffices."""
    def block(x_rows, wq, wk, wv, wo):
        out = jax.lax.all_gather(_prefill_heads(x_rows, wq, wk, wv), "Y", axis=2, tiled=True, to="invarying")
        return jnp.einsum("btnh,nhd->btd", out, jax.lax.all_gather(wo, "Y", axis=0, tiled=True, to="invarying"))
    return smap(block, C2_MESH, PREFILL_SPECS, ("X", None, None))(x, w_q, w_k, w_v, w_o)


def gqa_decode(x, k_cache, v_cache, w_q, w_k, w_v, w_o):
    """One decode step with the heads split over Y: each device appends the new token's key and value
    for its key/value heads to its slice of the cache, lets its query heads attend to all S + 1
    positions, and projects with its rows of w_o; one psum over Y adds the heads' partial sums."""
    def block(x_rows, k_past, v_past, wq, wk, wv, wo):  # f32[2, 16], two [2, 16, 2, 8], weights as in prefill
        q = jnp.einsum("bd,dnh->bnh", x_rows, wq)  # [2, 4, 8]: the new token's queries, this device's heads
        k_new = jnp.einsum("bd,dkh->bkh", x_rows, wk)[:, None]  # [2, 1, 2, 8]
        v_new = jnp.einsum("bd,dkh->bkh", x_rows, wv)[:, None]
        keys = jnp.concatenate([k_past, k_new], axis=1)  # [2, 17, 2, 8]: the cache and the token itself
        values = jnp.concatenate([v_past, v_new], axis=1)
        group = q.shape[1] // keys.shape[2]
        keys, values = jnp.repeat(keys, group, axis=2), jnp.repeat(values, group, axis=2)  # [2, 17, 4, 8]
        scores = jnp.einsum("bnh,bsnh->bns", q, keys) / jnp.sqrt(q.shape[-1])  # [2, 4, 17]
        out = jnp.einsum("bns,bsnh->bnh", jax.nn.softmax(scores, axis=-1), values)  # [2, 4, 8]
        return jax.lax.psum(jnp.einsum("bnh,nhd->bd", out, wo), "Y")  # [2, 16]: all heads added

    heads, cache = P(None, "Y", None), P("X", None, "Y", None)
    return jax.shard_map(block, mesh=course.mesh(X=2, Y=4),
                         in_specs=(P("X", None), cache, cache, heads, heads, heads, P("Y", None, None)),
                         out_specs=P("X", None))(x, k_cache, v_cache, w_q, w_k, w_v, w_o)


def _decode_heads(x_rows, k_past, v_past, wq, wk, wv, *, own_token=True):
    """The new token's attention outputs [B_X, N_Y, H] for this device's heads (a helper of the slips);
    ``own_token=False`` attends to the cache alone."""
    q = jnp.einsum("bd,dnh->bnh", x_rows, wq)
    keys, values = k_past, v_past
    if own_token:
        keys = jnp.concatenate([k_past, jnp.einsum("bd,dkh->bkh", x_rows, wk)[:, None]], axis=1)
        values = jnp.concatenate([v_past, jnp.einsum("bd,dkh->bkh", x_rows, wv)[:, None]], axis=1)
    group = q.shape[1] // keys.shape[2]
    keys, values = jnp.repeat(keys, group, axis=2), jnp.repeat(values, group, axis=2)
    scores = jnp.einsum("bnh,bsnh->bns", q, keys) / jnp.sqrt(q.shape[-1])
    return jnp.einsum("bns,bsnh->bnh", jax.nn.softmax(scores, axis=-1), values)


def decode_forgets_its_token(x, k_cache, v_cache, w_q, w_k, w_v, w_o):
    """Attends to the cache alone: the new token never sees its own key and value."""
    def block(x_rows, k_past, v_past, wq, wk, wv, wo):
        out = _decode_heads(x_rows, k_past, v_past, wq, wk, wv, own_token=False)
        return jax.lax.psum(jnp.einsum("bnh,nhd->bd", out, wo), "Y")
    return smap(block, C2_MESH, DECODE_SPECS, ("X", None))(x, k_cache, v_cache, w_q, w_k, w_v, w_o)


def decode_gathers_the_cache(x, k_cache, v_cache, w_q, w_k, w_v, w_o):
    """Gathers the whole KV cache and every weight over Y and runs all heads on every device: right, but each
    step moves the cache, the largest thing in memory, where one AllReduce of [B_X, D] suffices."""
    def block(x_rows, k_past, v_past, wq, wk, wv, wo):
        def whole(a, axis):
            return jax.lax.all_gather(a, "Y", axis=axis, tiled=True, to="invarying")
        out = _decode_heads(x_rows, whole(k_past, 2), whole(v_past, 2), whole(wq, 1), whole(wk, 1), whole(wv, 1))
        return jnp.einsum("bnh,nhd->bd", out, whole(wo, 0))
    return smap(block, C2_MESH, DECODE_SPECS, ("X", None))(x, k_cache, v_cache, w_q, w_k, w_v, w_o)


GQA_WEIGHTS = (Operand((GQA_D, GQA_N, GQA_H), HEADS), Operand((GQA_D, GQA_K, GQA_H), HEADS),
               Operand((GQA_D, GQA_K, GQA_H), HEADS), Operand((GQA_N, GQA_H, GQA_D), OUT_ROWS))
PREFILL_SPEC = ProgramSpec(
    mesh=C2_MESH, einsum="causal grouped-query self-attention of x with w_q, w_k, w_v and w_o", reference="gqa_prefill",
    operands=(Operand((GQA_B, GQA_T, GQA_D), PREFILL_SPECS[0]), *GQA_WEIGHTS),
    out_spec=("X", None, None), collectives={"all-reduce": 1}, rtol=1e-3, atol=_gqa_atol())
DECODE_SPEC = ProgramSpec(
    mesh=C2_MESH, einsum="one decode step of grouped-query attention over the KV cache and the new token",
    reference="gqa_decode_step",
    operands=(Operand((GQA_B, GQA_D), DECODE_SPECS[0]), Operand((GQA_B, GQA_T, GQA_K, GQA_H), CACHE),
              Operand((GQA_B, GQA_T, GQA_K, GQA_H), CACHE), *GQA_WEIGHTS),
    out_spec=("X", None), collectives={"all-reduce": 1}, rtol=1e-3, atol=_gqa_atol())


# --- C3: read a compiled FSDP + TP program ---------------------------------------------------------------------
# The notebook jits relu(x @ W_in) @ W_out with x[B_X, D_Y], W_in[D_X, F_Y], W_out[F_Y, D_X] on an (X, Y) mesh of 8
# devices; each student compiles it at their own sizes and mesh (the course's: B, D, F = 256, 512, 2048 on X=4, Y=2).
C3 = dict(B=256, D=512, F=2048, X=4, Y=2)
C3_SHAPES = ((256, 512, 2048), (128, 1024, 4096), (384, 512, 1536), (256, 768, 3072), (192, 384, 3072))
C3_MESHES = ((4, 2), (2, 4))
W_V5P = V5P.ici_bidirectional_bytes_per_s


def c3_local(B, D, F, X, Y) -> dict[str, tuple[int, int]]:
    """Each device's block of the three operands (the parameter shapes the compiled program shows)."""
    return {"x": (B // X, D // Y), "w_in": (D // X, F // Y), "w_out": (F // Y, D // X)}


def c3_gathered_bytes(B, D, F, X, Y) -> int:
    """What the all-gathers produce on each device (f32 as compiled): W_in[D, F_Y], x[B_X, D], W_out[F_Y, D]."""
    return 4 * (D * F // Y + B // X * D + F // Y * D)


def c3_operand_bytes(B, D, F, X, Y) -> int:
    return 4 * sum(math.prod(s) for s in c3_local(B, D, F, X, Y).values())


C3_LOCAL = c3_local(**C3)
C3_GATHERED_BYTES = c3_gathered_bytes(**C3)
C3_OPERAND_BYTES = c3_operand_bytes(**C3)


def fsdp_tp_times(B, D, F, X, Y, peak, W, MX=1, MY=1):
    """Part 5's forward MLP of one layer under FSDP + TP, bf16: (T_math, T_fsdp, T_tp). T_fsdp gathers
    both weights (2DF bytes each) over X's links, T_tp gathers In and scatters Out (2BD bytes each)
    over Y's; the two run on different links, so a step takes about max(T_math, T_fsdp, T_tp)."""
    return 4 * B * D * F / (X * Y * peak), 4 * D * F / (Y * W * MX), 4 * B * D / (X * W * MY)


C3_T_MATH, C3_T_FSDP, C3_T_TP = fsdp_tp_times(C3["B"], C3["D"], C3["F"], C3["X"], C3["Y"], V5P.bf16_flops_per_s,
                                             W_V5P)
C3_T_COMMS = max(C3_T_FSDP, C3_T_TP)


def c3(shape: tuple[int, int, int], mesh: tuple[int, int]) -> tuple[Number, ...]:
    """C3: what the compiled program of relu(x @ W_in) @ W_out at global sizes ``shape`` (B, D, F) on the mesh
    (X, Y) says: the degrees, the global sizes, the bytes its all-gathers produce, and its roofline on v5p."""
    (B_, D_, F_), (X_, Y_) = shape, mesh
    local = c3_local(B_, D_, F_, X_, Y_)
    gathered, operands = c3_gathered_bytes(B_, D_, F_, X_, Y_), c3_operand_bytes(B_, D_, F_, X_, Y_)
    t_math, t_fsdp, t_tp = fsdp_tp_times(B_, D_, F_, X_, Y_, V5P.bf16_flops_per_s, W_V5P)
    t_comms = max(t_fsdp, t_tp)
    exact = Tolerance.exact_count()
    return (
        number("ch11-c3-data-ways", section=PROFILING,
               prompt="How many ways the batch and the weights are split (FSDP degree).", reference=X_, exact=True,
               slips=(Slip(Y_, slip_code(Y_, X_, exact), "read the group size of the weights' all-gathers."),)),
        number("ch11-c3-model-ways", section=PROFILING, prompt="Tensor-parallel degree (exact).", reference=Y_,
               exact=True, slips=(Slip(X_, slip_code(X_, Y_, exact)),)),
        number("ch11-c3-batch", section=PROFILING, prompt="Global batch in tokens (exact).", reference=B_, exact=True,
               slips=(Slip(local["x"][0], slip_code(local["x"][0], B_, exact),
                           "the parameter shape is one device's block."),)),
        number("ch11-c3-d-model", section=PROFILING, prompt="Global model width D (exact).", reference=D_, exact=True,
               slips=(Slip(local["x"][1], slip_code(local["x"][1], D_, exact)),)),
        number("ch11-c3-d-ff", section=PROFILING, prompt="Global MLP width F (exact).", reference=F_, exact=True,
               slips=(Slip(local["w_in"][1], slip_code(local["w_in"][1], F_, exact)),)),
        number("ch11-c3-gathered-bytes", section=PROFILING,
               prompt="Bytes all the all-gathers produce on one device (f32).",
               reference=gathered, unit="B", tolerance=THREE_FIGURES,
               slips=(Slip(operands, slip_code(operands, gathered, THREE_FIGURES),
                           "count what they produce, not what they send."),
                      *slips(gathered, THREE_FIGURES,
                             (gathered - 4 * B_ // X_ * D_, "the activations x are gathered too, over Y."),
                             (4 * B_ // X_ * D_, "the weights are gathered too: W_in and W_out, over X.")))),
        number("ch11-c3-t-math", section=PROFILING, prompt="Forward MLP FLOP time per chip on 8 TPU v5p, bf16.",
               reference=t_math, unit="s", tolerance=TWO_PERCENT,
               slips=(Slip(t_math * X_ * Y_, slip_code(t_math * X_ * Y_, t_math)),)),
        number("ch11-c3-t-comms", section=PROFILING,
               prompt="Its communication time on v5p links (the slower of FSDP and TP).", reference=t_comms, unit="s",
               tolerance=TWO_PERCENT,
               slips=(Slip(t_tp, slip_code(t_tp, t_comms), "the weight gathers are the slower ones here."),)))


def c3_valid(shape: tuple[int, int, int], mesh: tuple[int, int]) -> bool:
    """As at the course's sizes: every operand splits evenly, the weight gathers are clearly the slower
    communication (at least twice the TP time, yet the TP time is 5% of theirs or more, so that adding the two,
    the slip the prose warns of, is refused), and they take far longer than the matmuls (ten times)."""
    (B_, D_, F_), (X_, Y_) = shape, mesh
    t_math, t_fsdp, t_tp = fsdp_tp_times(B_, D_, F_, X_, Y_, V5P.bf16_flops_per_s, W_V5P)
    even = all(n % k == 0 for n, k in ((B_, X_), (D_, X_), (D_, Y_), (F_, Y_)))
    return even and 0.05 * t_fsdp <= t_tp <= t_fsdp / 2 and t_fsdp >= 10 * t_math


# --- C4: FSDP + TP at small scale (programs) and at the capstone's scale (roofline) -------------------------------
C4_MESH = (("X", 4), ("Y", 2))
C4_B, C4_D, C4_F = 32, 64, 128


def fsdp_tp_mlp(x, w_in, w_out):
    """In[B_X, D_Y] . W_in[D_X, F_Y] . W_out[F_Y, D_X] -> Out[B_X, D_Y] (Part 5): gather the weights over
    X (FSDP), gather In over Y, multiply, reduce-scatter the partial sums over Y (TP)."""
    def block(x_block, w_in_block, w_out_block):  # [B/X, D/Y], [D/X, F/Y], [F/Y, D/X]
        x_full = jax.lax.all_gather(x_block, "Y", axis=1, tiled=True)  # [B/X, D]
        w_in_full = jax.lax.all_gather(w_in_block, "X", axis=0, tiled=True)  # [D, F/Y]
        w_out_full = jax.lax.all_gather(w_out_block, "X", axis=1, tiled=True)  # [F/Y, D]
        partial = x_full @ w_in_full @ w_out_full  # [B/X, D], a partial sum over Y
        return jax.lax.psum_scatter(partial, "Y", scatter_dimension=1, tiled=True)  # [B/X, D/Y]
    return jax.shard_map(block, mesh=course.mesh(X=4, Y=2), in_specs=(P("X", "Y"), P("X", "Y"), P("Y", "X")),
                         out_specs=P("X", "Y"))(x, w_in, w_out)


def c4_allreduce_then_slice(x, w_in, w_out):
    def block(xb, wi, wo):
        x_full = jax.lax.all_gather(xb, "Y", axis=1, tiled=True)
        full = jax.lax.psum(x_full @ jax.lax.all_gather(wi, "X", axis=0, tiled=True)
                            @ jax.lax.all_gather(wo, "X", axis=1, tiled=True), "Y")
        return own_block(full, "Y", 1)
    return smap(block, C4_MESH, (P("X", "Y"), P("X", "Y"), P("Y", "X")), P("X", "Y"))(x, w_in, w_out)


def c4_forgets_the_sum(x, w_in, w_out):
    """Keeps its own block of the partial sums without adding the other device's."""
    def block(xb, wi, wo):
        x_full = jax.lax.all_gather(xb, "Y", axis=1, tiled=True)
        partial = (x_full @ jax.lax.all_gather(wi, "X", axis=0, tiled=True)
                   @ jax.lax.all_gather(wo, "X", axis=1, tiled=True))
        return own_block(partial, "Y", 1)
    return smap(block, C4_MESH, (P("X", "Y"), P("X", "Y"), P("Y", "X")), P("X", "Y"))(x, w_in, w_out)


# The training run: relu(x @ W_in) @ W_out, mean squared error, plain SGD, from a seeded numpy start.
TRAIN_B, TRAIN_D, TRAIN_F = 32, 16, 64


def capstone_data(seed: int):
    """x, y f32[B, D] and W_in f32[D, F], W_out f32[F, D] (scaled by 1/sqrt(fan-in)), from numpy's
    seeded generator, so every machine starts from the same numbers."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((TRAIN_B, TRAIN_D)).astype(np.float32)
    y = rng.standard_normal((TRAIN_B, TRAIN_D)).astype(np.float32)
    w_in = (rng.standard_normal((TRAIN_D, TRAIN_F)) / math.sqrt(TRAIN_D)).astype(np.float32)
    w_out = (rng.standard_normal((TRAIN_F, TRAIN_D)) / math.sqrt(TRAIN_F)).astype(np.float32)
    return x, y, w_in, w_out


def train_losses(steps: int, lr: float, seed: int, relu_mask: bool = True) -> list[float]:
    """The single-device reference, in float64 numpy with hand-written gradients: the loss before each
    of ``steps`` SGD updates."""
    x, y, w_in, w_out = (a.astype(np.float64) for a in capstone_data(seed))
    losses = []
    for _ in range(steps):
        a = x @ w_in  # [B, F]
        h = np.maximum(a, 0)
        err = h @ w_out - y  # [B, D]
        losses.append(float(np.mean(err**2)))
        g_out = 2 * err / err.size
        g_w_out = h.T @ g_out
        g_a = (g_out @ w_out.T) * ((a > 0) if relu_mask else 1)
        w_in, w_out = w_in - lr * (x.T @ g_a), w_out - lr * g_w_out
    return losses


def train(steps, lr, seed):
    """The loss before each of ``steps`` SGD updates of relu(x @ W_in) @ W_out (mean squared error) on the
    (X=4, Y=2) mesh: the batch split over X, the weights FSDP + TP. jit adds the collectives; the
    losses are a single device's."""
    mesh = course.mesh(X=4, Y=2)

    def put(a, *spec):
        return jax.device_put(a, NamedSharding(mesh, P(*spec)))

    x, y, w_in, w_out = capstone_data(seed)
    x, y, params = put(x, "X", None), put(y, "X", None), (put(w_in, "X", "Y"), put(w_out, "Y", "X"))

    def loss(params, x, y):
        w_in, w_out = params
        return jnp.mean((jax.nn.relu(x @ w_in) @ w_out - y) ** 2)

    @jax.jit
    def step(params, x, y):
        value, grads = jax.value_and_grad(loss)(params, x, y)
        return value, jax.tree.map(lambda p, g: p - lr * g, params, grads)

    losses = []
    for _ in range(steps):
        value, params = step(params, x, y)
        losses.append(float(value))
    return losses


def c4_no_relu_mask(steps, lr, seed):
    return train_losses(steps, lr, seed, relu_mask=False)


def c4_sum_loss(steps, lr, seed):
    """Reports the summed squared error instead of its mean (the same run, every loss B D times larger)."""
    return [loss * TRAIN_B * TRAIN_D for loss in train_losses(steps, lr, seed)]


def c4_loss_after_update(steps, lr, seed):
    """Records each loss after its step's update, where the prompt asks for before: the run one step on."""
    return train_losses(steps + 1, lr, seed)[1:]


TRAIN_RUN_PROBES = (dict(steps=20, lr=0.5, seed=0), dict(steps=20, lr=0.5, seed=1), dict(steps=10, lr=1.0, seed=2))


def draw_run(rng: random.Random, probe: dict) -> dict:
    """C4's grading-time runs: as many steps as the probe, a learning rate 1/2 to 1 times its own (no run
    diverges), fresh data and weights."""
    return dict(steps=probe["steps"], lr=round(probe["lr"] * rng.uniform(0.5, 1), 3), seed=rng.randint(3, 2**31))


# The capstone's plan at scale: Course-31B on the v5p 16x16x16 at the planner's (X, Y), M_X = 2, M_Y = 1.
def capstone_times(batch: int) -> tuple[float, float, float]:
    """Part 5's forward MLP times of one Course-31B layer, (T_math, T_FSDP, T_TP), for ``batch`` tokens on the
    16x16x16 slice at the plan the planner gives it (FSDP over M_X = 2 torus axes, TP over M_Y = 1)."""
    x, y, _, _ = capstone_plan(batch, V5P_4096)
    return fsdp_tp_times(batch, COURSE_31B.D, COURSE_31B.F, x, y, V5P.bf16_flops_per_s, W_V5P, MX=2, MY=1)


# The chapters' printed answers this capstone reproduces (syllabus, pinned V2).
# (The planners' book values are in BOOK_PLANS: they are outputs of Function questions, by probe.)
BOOK_PLANS = {"ch11-c1-plan-training": {0: (1024, 4, 0.300, None), 1: (2048, 4, None, 44)},
              "ch11-c1-plan-serving": {0: (8, 17e-3)}}
BOOK = {"ch11-c1-h100-min-gpus": 9, "ch11-c1-h100-days": 40, "ch11-c1-h100-tp-limit": 14.37,
        "ch11-c1-h100-per-gpu-batch": 976.6, "ch11-c1-h100-dp-threshold": 2475,
        "ch11-c1-h100-pp-threshold": 309.4}


# --- the exercises whose numbers each student is dealt (variants.py); the course's own values first ----------


EXACT_COUNT = Tolerance.exact_count()


def c1_train(batch: int, chips: int, tokens: float) -> tuple[Question, ...]:
    """C1, the new model's training: FLOPs, plan, days and cost of Course-31B for a batch, a v5p slice and a
    token count, and the same FLOPs on H100s."""
    x, y, _, days = capstone_plan(batch, chips, tokens)
    flops = 6 * CAP_P * tokens
    cost = chips * days * 24 * PRICE["TPU v5p"]
    h100_cost = flops / (H100.bf16_flops_per_s * H100_MFU) / 3600 * PRICE["H100"]
    cheaper, dearer = ("TPU v5p", "H100") if cost < h100_cost else ("H100", "TPU v5p")
    budget = f"{chips} v5p chips, {batch / 2**20:g}M-token batches"
    return (
        number("ch11-c1-train-flops", section="transformers/",
               prompt=f"Training FLOPs of Course-31B on {tokens / 1e12:g}T tokens.",
               reference=flops, unit="FLOP", tolerance=ONE_PERCENT,
               slips=(Slip(flops / 3, "ratio:1/3",
                           "a training token costs forward and backward: 6 FLOPs per parameter."),)),
        number("ch11-c1-train-x", section=TRAINING, prompt=f"FSDP degree X (exact) for Course-31B on {budget}.",
               reference=x, exact=True,
               slips=(Slip(chips, slip_code(chips, x, EXACT_COUNT),
                           "the tokens per chip fall below the pure-FSDP bound over 3 axes."),)),
        number("ch11-c1-train-y", section=TRAINING, prompt="Its tensor-parallel degree Y (exact).", reference=y,
               exact=True, slips=(Slip(1, slip_code(1, y, EXACT_COUNT)),)),
        number("ch11-c1-train-days", section=APPLIED_TRAINING,
               prompt=f"Days to train Course-31B on {tokens / 1e12:g}T tokens with that slice at 40% MFU.",
               reference=days, unit="days", tolerance=ONE_PERCENT,
               slips=(Slip(days * 24, "unit:24"),)),
        number("ch11-c1-train-cost", section=SERVING, prompt="Its cost in US dollars at the v5p on-demand price.",
               reference=cost, tolerance=ONE_PERCENT,
               slips=(Slip(cost / 24, slip_code(cost / 24, cost, ONE_PERCENT), "prices are per chip-hour."),)),
        number("ch11-c1-h100-cost", section=GPUS, prompt="The same training on H100s at 45% MFU, in US dollars.",
               reference=h100_cost, tolerance=rate_tolerance(H100),
               slips=(Slip(h100_cost * H100_MFU / 0.4, "close", "H100s here reach 45% MFU."),)),
        Choice(qid="ch11-c1-cheaper", points=1, section=SERVING, prompt="Which trains Course-31B for less money?",
               reference=cheaper, options=("TPU v5p", "H100"),
               slips=(Slip(dearer, "wrong_option", "compare dollars per useful FLOP, not FLOP/s per chip."),)))


def c1_train_valid(batch: int, chips: int, tokens: float) -> bool:
    """The capstone is about FSDP + TP: keep the batches and slices where it, and not pure FSDP, is the plan."""
    return fsdp_tp_regime(batch, chips)


def c1_serve(batch: int, context: int) -> tuple[Number, ...]:
    """C1, the new model's serving: the slices memory and the latency budget ask for, the step time, the
    throughput per chip and the price of a million tokens, for ``batch`` sequences of ``context`` tokens."""
    memory, chips_, step = serving_plan(batch, context)
    per_chip = batch / step / chips_
    usd = chips_ * PRICE["TPU v5e"] / 3600 / (batch / step) * 1e6
    return (
        number("ch11-c1-memory-chips", section=SERVING,
               prompt=f"How many chips are in the smallest v5e slice that holds the serving batch ({batch} "
                      f"sequences of {context} tokens)?", reference=memory, exact=True,
               slips=(Slip(weights_slice(), slip_code(weights_slice(), memory, EXACT_COUNT),
                           "the batch's KV caches need room too."),)),
        number("ch11-c1-serve-chips", section=SERVING,
               prompt="How many chips are in the slice that also meets the 15 ms step budget?", reference=chips_,
               exact=True, slips=(Slip(memory, slip_code(memory, chips_, EXACT_COUNT),
                                       "that slice fits but is too slow."),)),
        number("ch11-c1-serve-step", section=INFERENCE, prompt="Its decode step time.", reference=step, unit="s",
               tolerance=ONE_PERCENT, slips=(Slip(step * 2, "ratio:2"),)),
        number("ch11-c1-serve-tokens-per-chip", section=SERVING, prompt="Generated tokens per second per chip.",
               reference=per_chip, tolerance=ONE_PERCENT,
               slips=(Slip(per_chip * chips_, slip_code(per_chip * chips_, per_chip, ONE_PERCENT),
                           "per chip: divide by the slice's chips."),)),
        number("ch11-c1-serve-cost", section=SERVING,
               prompt="US dollars per million generated tokens at the v5e price.",
               reference=usd, tolerance=ONE_PERCENT,
               slips=(Slip(usd * 3600, slip_code(usd * 3600, usd, ONE_PERCENT),
                           "prices are per hour, steps in seconds."),)))


def c1_serve_valid(batch: int, context: int) -> bool:
    """Memory and latency must pull apart, as the exercise asks: some slice meets the budget, and it is larger
    than the smallest one that holds the batch; and the caches the prose names must change that smallest slice, or
    leaving them out would pass for some students."""
    memory, chips_, _ = serving_plan(batch, context)
    return weights_slice() < memory < chips_


def c1_gpu(node: hw.GPUNode, model: m.Config, batch: float) -> tuple[Question, ...]:
    """C1's GPU variant, Part 12's Q5.2 for a node's GPU, a model and a batch: memory, days, the TP limit and
    the per-GPU batches that decide which configuration is compute-bound."""
    g, gpu = gpu_plan(node, model, batch), node.gpu
    rate = rate_tolerance(gpu)  # days, the TP limit and the DP thresholds scale with the GPU's FLOP/s
    # The book divides F by 1995 for the H100 (14.37 for LLaMA 3-70B), not by the table's C / W of 2200: that
    # reading passes for every model and batch on a GPU with the H100's C and W, from the course's value up.
    h100_like = (gpu.bf16_flops_per_s, gpu.nvlink_bytes_per_s) == (H100.bf16_flops_per_s, H100.nvlink_bytes_per_s)
    tp_tolerance = Tolerance(low=g["tp_limit"] * (1 - rate.rtol), high=model.F / BOOK_H100_TP_DIVISOR * 1.01) \
        if h100_like else rate
    state = m.TRAIN_STATE_BYTES * m.params_of(model)
    short = math.ceil(2 * m.params_of(model) / gpu.hbm_bytes)
    if g["per_gpu"] > g["dp"]:
        config = "tp8-zero512"
    elif g["per_gpu"] > g["pp"]:
        config = "tp8-pp8-zero"
    else:
        config = "none"  # c1_gpu_valid keeps this out
    return (
        number("ch11-c1-h100-min-gpus", section=GPUS,
               prompt=f"How many {gpu.name}s are needed to hold {model.name}'s parameters and Adam state?",
               reference=g["min_gpus"], exact=True,
               slips=slips(g["min_gpus"], EXACT_COUNT,
                           (short, "Adam keeps two fp32 moments per parameter: 10 bytes in all."),
                           (math.ceil((m.TRAIN_STATE_BYTES - 2) * m.params_of(model) / gpu.hbm_bytes),
                            "the bf16 weights are held too: 2 bytes per parameter beside Adam's 8."))),
        number("ch11-c1-h100-days", section=GPUS,
               prompt=f"Days to train {model.name} on 15T tokens with 4096 {gpu.name}s at 45% MFU.",
               reference=g["days"], unit="days", tolerance=rate,
               slips=(Slip(g["days"] * 0.45 / 0.4, "close", "this run assumes 45% MFU."),)),
        number("ch11-c1-h100-tp-limit", section=GPUS,
               prompt=f"The largest tensor-parallel degree that stays compute-bound over NVLink ({gpu.name}, "
                      f"{model.name}).", reference=g["tp_limit"],
               tolerance=largest_degree(g["tp_limit"], tp_tolerance),
               slips=(Slip(g["tp_limit"] * 2, slip_code(g["tp_limit"] * 2, g["tp_limit"], tp_tolerance),
                           "use the NVLink bandwidth in one direction."),)),
        number("ch11-c1-h100-per-gpu-batch", section=GPUS,
               prompt=f"Tokens per GPU of a {batch / 1e6:g}M-token batch on 4096 GPUs.", reference=g["per_gpu"],
               tolerance=ONE_PERCENT,
               slips=(Slip(batch / (Q52_GPUS / 8), "ratio:8", "every GPU holds a share of the batch."),)),
        number("ch11-c1-h100-dp-threshold", section=GPUS,
               prompt="Tokens per GPU above which DP across nodes is compute-bound.", reference=g["dp"],
               tolerance=rate,
               slips=(Slip(g["dp"] * 8, "ratio:8", "the node's egress is shared by its 8 GPUs."),)),
        number("ch11-c1-h100-pp-threshold", section=GPUS,
               prompt="That threshold when 8-way pipelining spreads DP over 8x the links.", reference=g["pp"],
               tolerance=rate, slips=(Slip(g["dp"], "ratio:8"),)),
        Choice(qid="ch11-c1-h100-config", points=1, section=GPUS,
               prompt=f"Which configuration trains {model.name} compute-bound on 4096 {gpu.name}s?",
               reference=config, options=("tp8-dp512", "tp8-zero512", "tp8-pp8-zero"),
               slips=(Slip("tp8-zero512", "wrong_option", "compare the tokens per GPU with the DP threshold."),
                      Slip("tp8-dp512", "wrong_option",
                           f"8-way TP alone leaves {state / GPU_TP / 1e9:.1f} GB of state per GPU."))))


def c1_gpu_valid(node: hw.GPUNode, model: m.Config, batch: float) -> bool:
    """Keep Q5.2's regime, which its Choice and hints assume: 8-way TP stays compute-bound over NVLink, 8-way
    TP alone cannot hold the training state, ZeRO across nodes is short of its bound and 8-way pipelining
    reaches it."""
    g = gpu_plan(node, model, batch)
    return (g["tp_limit"] > GPU_TP and g["state_per_gpu"] > node.gpu.hbm_bytes
            and g["pp"] < g["per_gpu"] < g["dp"])


ONE_LINK = "W is the bidirectional bandwidth of one link (v5p.ici_bidirectional_bytes_per_s)"


def c4_scale(batch: int) -> tuple[Question, ...]:
    """C4 at scale: Course-31B's tokens per chip and forward MLP times per layer on the 16x16x16 slice for a
    batch, at the plan the planner gives it, and which bound wins."""
    x, y, _, _ = capstone_plan(batch, V5P_4096)
    t_math, t_fsdp, t_tp = capstone_times(batch)
    bound = "communication" if max(t_fsdp, t_tp) > t_math else "compute"
    per_chip = batch / V5P_4096
    return (
        number("ch11-c4-tokens-per-chip", section=TRAINING,
               prompt=f"Course-31B's tokens per chip on the 16x16x16 slice with {batch / 2**20:g}M-token batches.",
               reference=per_chip, tolerance=THREE_FIGURES,
               slips=(Slip(batch / (V5P_4096 // y), slip_code(batch / (V5P_4096 // y), per_chip, THREE_FIGURES),
                           "every chip holds a share of the batch."),)),
        number("ch11-c4-t-math", section=TRAINING, prompt="Forward MLP FLOP time per layer per chip at that scale.",
               reference=t_math, unit="s", tolerance=TWO_PERCENT,
               slips=(Slip(t_math / 2, "ratio:1/2", "the MLP has two matmuls of 2BDF FLOPs each."),)),
        number("ch11-c4-t-fsdp", section=TRAINING, prompt="Its FSDP weight-gather time per layer.", reference=t_fsdp,
               unit="s", tolerance=TWO_PERCENT,
               # W taken one way and a single torus axis both double the time: the hint names both
               slips=(Slip(t_fsdp * 2, "ratio:2", f"{ONE_LINK}, and FSDP runs over M_X = 2 torus axes at once."),)),
        number("ch11-c4-t-tp", section=TRAINING, prompt="Its TP activation gather and scatter time per layer.",
               reference=t_tp, unit="s", tolerance=TWO_PERCENT,
               slips=(Slip(t_tp * y, slip_code(t_tp * y, t_tp)), Slip(t_tp * 2, "ratio:2", f"{ONE_LINK}."))),
        Choice(qid="ch11-c4-bound", points=1, section=TRAINING, prompt="Is that layer compute- or communication-bound?",
               reference=bound, options=("compute", "communication"),
               slips=(Slip("communication" if bound == "compute" else "compute", "wrong_option",
                           "compare T_math with the slower of the two communications."),)))


def c4_scale_valid(batch: int) -> bool:
    """FSDP + TP on the 16x16x16 slice, as the exercise's formulas assume, and a bound that is clear: the
    slower communication at least 10% away from the matmuls' time."""
    t_math, t_fsdp, t_tp = capstone_times(batch)
    return fsdp_tp_regime(batch, V5P_4096) and abs(max(t_fsdp, t_tp) / t_math - 1) > 0.1


STRATEGIES = ("dp", "fsdp", "tp", "fsdp+tp")
# Step times within 5% and days within 2%: Part 5 rounds LLaMA-2 13B's 0.311 s step to "about 300 ms", and
# Part 6 prints 44 days for LLaMA 3-70B (with 70e9 parameters); both book values must pass.
_train_out = (Output("number", tolerance=EXACT), Output("number", tolerance=EXACT),
              Output("number", unit="s", tolerance=Tolerance(rtol=0.05)),
              Output("number", unit="days", tolerance=TWO_PERCENT))
# Part 8 prints "17 ms" for LLaMA 3-70B's int8 step (17.22 ms with 70e9 parameters): 2% lets it pass.
_serve_out = (Output("number", tolerance=EXACT), Output("number", unit="s", tolerance=TWO_PERCENT))

CHAPTER = Chapter("ch11_capstone", "Capstone", (
    # C1: the planners, checked on the chapters' pinned cases, then the new model.
    Function(qid="ch11-c1-plan-training", points=4, section=TRAINING,
             prompt="plan_training(...): FSDP and TP degrees, step time and days for a dense model on a TPU slice.",
             reference=plan_training, probes=TRAIN_PROBES, output=_train_out,
             slips=(Slip(plan_training_fsdp_only, "ratio:4"), Slip(plan_training_forgets_6, "ratio:1/3"))),
    Function(qid="ch11-c1-plan-serving", points=4, section=SERVING,
             prompt="plan_serving(...): the smallest v5e slice that holds the batch and meets the latency budget.",
             reference=plan_serving, probes=SERVE_PROBES,
             output=_serve_out,
             slips=(Slip(plan_serving_memory_only, "ratio:1/2"), Slip(plan_serving_kv_once, "not_equal"))),
    number("ch11-c1-params", section="transformers/", prompt=f"Course-31B's parameter count{CAP_COUNT.words}.",
           reference=CAP_P, tolerance=CAP_COUNT.tolerance,
           slips=(Slip(CAP_P + COURSE_31B.L * 2 * COURSE_31B.D * (COURSE_31B.N - COURSE_31B.K) * COURSE_31B.H, "close",
                       "K and V have K = 8 heads, not N = 48."), *CAP_COUNT.slips,
                  *slips(CAP_P, CAP_COUNT.tolerance,
                         (CAP_P - 2 * COURSE_31B.V * COURSE_31B.D,
                          "the embeddings count too: the input table and the output projection, V x D each."),
                         (CAP_P - COURSE_31B.V * COURSE_31B.D,
                          "Course-31B's embeddings are not tied: the input table and the output projection are two "
                          "V x D matrices.")))),
    vary("ch11-c1-train", c1_train, valid=c1_train_valid, batch=values(2 * 2**20, 2**20, 3 * 2**20, 2**19),
         chips=values(V5P_4096, V5P_4096 // 2), tokens=values(6e12, 4e12, 9e12)),
    number("ch11-c1-kv-bytes", section=INFERENCE, prompt="Course-31B's int8 KV cache per token, in bytes.",
           reference=CAP_KV_PER_TOKEN, unit="B", tolerance=THREE_FIGURES,
           slips=(Slip(CAP_KV_PER_TOKEN * COURSE_31B.N // COURSE_31B.K,
                       slip_code(CAP_KV_PER_TOKEN * COURSE_31B.N // COURSE_31B.K, CAP_KV_PER_TOKEN, THREE_FIGURES, "B"),
                       "GQA caches K = 8 heads, not 48."),
                  Slip(CAP_KV_PER_TOKEN / 2, "ratio:1/2", "the cache holds keys and values: two vectors per head and "
                                                           "layer.", maybe=True))),
    vary("ch11-c1-serve", c1_serve, valid=c1_serve_valid, batch=values(64, 48, 80, 128),
         context=values(8192, 4096, 12288, 16384)),
    # C1, GPU variant: LLaMA 3-70B on 4096 H100s (Part 12, Q5.2).
    vary("ch11-c1-gpu", c1_gpu, valid=c1_gpu_valid, node=chips(hw.DGX_H100, hw.DGX_H200, hw.DGX_B200, hw.DGX_A100),
         model=models(m.LLAMA3_70B, m.LLAMA31_405B), batch=values(4e6, 2e6, 8e6)),
    # C2: collective matmuls.
    Program(qid="ch11-c2-collective-mlp", points=4, section=JAX,
            prompt="x[B_X, D_Y] . W_in[D, F_Y] . W_out[F_Y, D] -> [B_X, D_Y] with collective matmuls (ppermute only).",
            spec=ProgramSpec(mesh=C2_MESH, einsum="bd,df,fe->be",
                             operands=(Operand((C2_B, C2_D), ("X", "Y")), Operand((C2_D, C2_F), (None, "Y")),
                                       Operand((C2_F, C2_D), ("Y", None))),
                             out_spec=("X", "Y"), collectives={"collective-permute": 6}, atol=1e-2),
            model=collective_mlp,
            slips=(Slip(c2_own_rows_every_step, "wrong_values",
                        "the chunk of x that arrives at a step came from another device: it meets the rows of W that "
                        "match that device's chunk."),
                   Slip(c2_library_collectives, "collectives:all-gather,reduce-scatter"))),
    Program(qid="ch11-c2-gqa-prefill", points=3,
            section=INFERENCE + "#distributing-inference-over-multiple-accelerators",
            prompt="Causal GQA attention over a prompt on (X=2, Y=4): batch over X, heads over Y, one psum.",
            spec=PREFILL_SPEC, model=gqa_prefill,
            slips=(Slip(prefill_sees_the_future, "wrong_values",
                        "in a prompt, a token attends only to itself and the tokens before it."),
                   Slip(prefill_tiles_kv_heads, "wrong_values",
                        "query head n uses key/value head n // G (n = kG + g): jnp.tile and jnp.repeat widen heads "
                        "in different orders."),
                   Slip(prefill_gathers_heads, "collectives:all-gather"))),
    Program(qid="ch11-c2-gqa-decode", points=3, section=INFERENCE + "#sharding-the-kv-cache",
            prompt="One decode step of that attention with a head-sharded KV cache: the new token joins the cache.",
            spec=DECODE_SPEC, model=gqa_decode,
            slips=(Slip(decode_forgets_its_token, "wrong_values",
                        "the new token attends to its own key and value too, not only to the cache."),
                   Slip(decode_gathers_the_cache, "collectives:all-gather"))),
    # C3: read the compiled program.
    Choice(qid="ch11-c3-strategy", points=1, section=PROFILING, prompt="The compiled program's sharding strategy.",
           reference="fsdp+tp", options=STRATEGIES,
           slips=(Slip("tp", "wrong_option", "the weights are gathered before use: that is FSDP as well."),)),
    vary("ch11-c3", c3, valid=c3_valid, shape=values(*C3_SHAPES), mesh=values(*C3_MESHES)),
    Choice(qid="ch11-c3-reduction", points=1, section=PROFILING,
           prompt="The collective a TPU would run where this CPU program all-reduces and slices.",
           reference="reduce-scatter", options=("all-gather", "reduce-scatter", "all-reduce", "all-to-all"),
           slips=(Slip("all-reduce", "wrong_option", "each device keeps only its block of the sum."),)),
    # C4: FSDP + TP.
    Program(qid="ch11-c4-fsdp-tp-mlp", points=3, section=TRAINING,
            prompt="In[B_X, D_Y] . W_in[D_X, F_Y] . W_out[F_Y, D_X] -> Out[B_X, D_Y] with shard_map collectives.",
            spec=ProgramSpec(mesh=C4_MESH, einsum="bd,df,fe->be",
                             operands=(Operand((C4_B, C4_D), ("X", "Y")), Operand((C4_D, C4_F), ("X", "Y")),
                                       Operand((C4_F, C4_D), ("Y", "X"))),
                             out_spec=("X", "Y"), collectives={"all-gather": 3, "reduce-scatter": 1}, atol=1e-2),
            model=fsdp_tp_mlp,
            slips=(Slip(c4_forgets_the_sum, "partial_sum:Y"),
                   Slip(c4_allreduce_then_slice, "collectives:all-gather,all-reduce"))),
    Function(qid="ch11-c4-train-losses", points=3, section=TRAINING,
             prompt="train(steps, lr, seed): the losses of an FSDP + TP SGD run, equal to one device's.",
             reference=train_losses, model=train, probes=TRAIN_RUN_PROBES, draw=draw_run,
             output=Output("number", tolerance=Tolerance(rtol=1e-3)),
             slips=(Slip(c4_no_relu_mask, "wrong_elements"), Slip(c4_sum_loss, "wrong_elements"),
                    Slip(c4_loss_after_update, "shifted:+1"))),
    vary("ch11-c4-scale", c4_scale, valid=c4_scale_valid,
         batch=values(2 * 2**20, 3 * 2**20, 3 * 2**19, 5 * 2**19, 7 * 2**18)),
))
