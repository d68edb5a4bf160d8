"""The inference cost model of Parts 7 and 8, as the references use it.

Book: Part 7 "All About Transformer Inference", https://jax-ml.github.io/scaling-book/inference/ and
Part 8 "Serving LLaMA 3-70B on TPUs", https://jax-ml.github.io/scaling-book/applied-inference/

Notation (the book's): B sequences in a decode batch, T tokens each sequence processes in this step (its
prompt in prefill, 1 in decode), S cached context, P parameters, C the chip's FLOP/s in the dtype the
matmuls run in, W_hbm HBM bytes/s per chip, W_ici ICI bytes/s, n chips. ``bpe`` is bytes per element.

The model, stated once (Part 7, "A rough model of latency"):
- A decode step reads every weight once and each sequence's KV cache once. The weight matmuls see B
  tokens: max(2BP / (nC), weight bytes / (nW_hbm)), compute-bound only above the critical batch.
  Attention has no weights and each sequence reads its own cache: always bandwidth-bound,
  B x KV bytes / (nW_hbm). The step is their sum (the two do not overlap; each overlaps internally).
- Prefill processes B x T tokens at once: 2PBT / (nC), divided by the MFU actually reached.
- Left out: attention FLOPs in decode, activations, collectives inside the step (the sharding helpers
  below price those separately), and collective latency except where a function says so.

Every function is plain arithmetic on its arguments, so it gives a number for numbers and a sympy
expression for ``course.symbols``; the integer roundings (``max_batch``, ``smallest_slice``) are the
exceptions and say so. The constants the chapters state (the book's beta, the legal v5e slices, ...)
are inputs and live in ``course.inference``; they are re-exported here. The round parameter counts
Part 8 takes (70e9, 405e9) live here, not there: they are the sizes in the models' names, which
questions of Chapters 4-7 refuse as counts (``solutions._kit.count_of``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from course import hardware as hw
from course.inference import (  # noqa: F401  (re-exported: the references read constants and costs from one module)
    BETA_BOOK,
    MEDIAN_DECODE_TOKENS,
    PART7,
    PART8,
    PREFILL_MFU,
    V5E_SLICES,
)

from . import models as m

# Part 8 rounds LLaMA 3-70B to 70e9 parameters and names LLaMA 3.1-405B by its 405e9; Chapter 8's
# questions state the round figures, as the book does (Chapter 6 asks for the exact counts).
LLAMA3_70B_PARAMS_BOOK = 70e9
LLAMA31_405B_PARAMS_BOOK = 405e9

# --- rooflines of the two workloads ----------------------------------------------------------------

def critical_batch(flops_per_s: Any, hbm_bytes_per_s: Any, weight_bpe: Any = 2) -> Any:
    """Tokens per step above which a weight matmul is compute-bound: C * bpe / (2 W_hbm).
    2BDF FLOPs over bpe*D*F weight bytes (activations left out, B << D, F)."""
    return flops_per_s * weight_bpe / (2 * hbm_bytes_per_s)


def attention_intensity(T: Any, S: Any) -> Any:
    """FLOPs per byte of bf16 multi-head attention with T queries over S keys: S*T / (S + T).
    Prefill (S = T): T/2. Decode (T = 1): S/(S+1), about 1 whatever the batch."""
    return m.attention_intensity(T, S, 1)


def kv_bytes_per_sequence(cfg: m.Config, S: Any, bpe: Any = 2) -> Any:
    """KV cache of one sequence of S tokens: 2 * L * K * H * bpe * S."""
    return m.kv_bytes_per_token_of(cfg, bpe) * S


def decode_parts_s(B: Any, kv_bytes_per_seq: Any, weight_bytes: Any, param_count: Any, n_chips: Any,
                   flops_per_s: Any, hbm_bytes_per_s: Any) -> dict[str, Any]:
    """The three times of one decode step, in seconds: reading the KV caches, reading the weights,
    and the weight matmuls' FLOPs (2 per parameter per sequence)."""
    return {"kv": B * kv_bytes_per_seq / (n_chips * hbm_bytes_per_s),
            "weights": weight_bytes / (n_chips * hbm_bytes_per_s),
            "flops": 2 * B * param_count / (n_chips * flops_per_s)}


def decode_step_s(B: Any, kv_bytes_per_seq: Any, weight_bytes: Any, param_count: Any, n_chips: Any,
                  flops_per_s: Any, hbm_bytes_per_s: Any) -> Any:
    """Lower bound on one decode step: attention (bandwidth) + max(matmul FLOPs, weight loading)."""
    t = decode_parts_s(B, kv_bytes_per_seq, weight_bytes, param_count, n_chips, flops_per_s, hbm_bytes_per_s)
    return t["kv"] + _max(t["flops"], t["weights"])


def decode_step_memory_s(B: Any, kv_bytes_per_seq: Any, weight_bytes: Any, n_chips: Any,
                         hbm_bytes_per_s: Any) -> Any:
    """The memory-bound step (B below the critical batch): every byte in HBM that the step needs,
    read once, (B * KV + weights) / (n W_hbm)."""
    return (B * kv_bytes_per_seq + weight_bytes) / (n_chips * hbm_bytes_per_s)


def prefill_s(param_count: Any, tokens: Any, n_chips: Any, flops_per_s: Any, mfu: Any = 1) -> Any:
    """Prefill of ``tokens`` tokens (all sequences together): 2 * P * tokens / (n C mfu)."""
    return 2 * param_count * tokens / (n_chips * flops_per_s * mfu)


def tokens_per_s(B: Any, step_s: Any) -> Any:
    """Decode throughput: B new tokens every step."""
    return B / step_s


def hbm_full_step_s(chip: hw.Chip = hw.TPU_V5E) -> float:
    """A step that reads all of every chip's HBM: capacity / bandwidth, whatever the slice (Part 8)."""
    return chip.hbm_bytes / chip.hbm_bytes_per_s


def queries_per_s_per_chip(B: Any, step_s: Any, decode_tokens: Any, n_chips: Any) -> Any:
    """Finished requests per second per chip: B sequences every ``decode_tokens`` steps, over n chips."""
    return B / (step_s * decode_tokens * n_chips)


def flops_per_dollar(flops_per_s: Any, usd_per_hour: Any) -> Any:
    """FLOPs one dollar buys at peak: C * 3600 / price per chip-hour (Part 8)."""
    return flops_per_s * 3600 / usd_per_hour


# --- memory: what fits ------------------------------------------------------------------------------

def min_chips(total_bytes: float, hbm_per_chip: float = hw.TPU_V5E.hbm_bytes) -> float:
    """Chips whose HBM together holds ``total_bytes``, before rounding up (a fraction)."""
    return total_bytes / hbm_per_chip


def smallest_slice(total_bytes: float, hbm_per_chip: float = hw.TPU_V5E.hbm_bytes,
                   slices: Mapping[str, int] = V5E_SLICES) -> str:
    """The name of the smallest legal slice whose HBM holds ``total_bytes`` (an integer rounding)."""
    for name, chips in sorted(slices.items(), key=lambda kv: kv[1]):
        if chips * hbm_per_chip >= total_bytes:
            return name
    raise ValueError(f"{total_bytes:.3g} B does not fit in the largest slice")


def max_batch(hbm_per_chip: float, n_chips: int, weight_bytes: float, kv_bytes_per_seq: float) -> int:
    """Sequences whose caches fit beside one copy of the weights: floor(free HBM / KV per sequence);
    0 when the weights alone do not fit."""
    free = n_chips * hbm_per_chip - weight_bytes
    return max(0, math.floor(free / kv_bytes_per_seq))


# --- sharding for generation ------------------------------------------------------------------------

def ici_intensity(chip: hw.TPU = hw.TPU_V5E) -> float:
    """alpha = C / W_ici, bf16 FLOPs per byte over one bidirectional link (2188.9 on v5e; book 2200)."""
    return chip.bf16_flops_per_s / chip.ici_bidirectional_bytes_per_s


def hbm_over_ici(chip: hw.TPU = hw.TPU_V5E) -> float:
    """beta = W_hbm / W_ici (bidirectional link): 9.1 on v5e; the book rounds it to 8."""
    return chip.hbm_bytes_per_s / chip.ici_bidirectional_bytes_per_s


def tp_limit_compute(F: Any, alpha: Any, n_axes: Any = 1) -> Any:
    """Model parallelism stays compute-bound up to Y = n_axes * F / alpha (Part 5's rule; Part 7
    reuses it): with Y > that, the activations' AllGather/ReduceScatter outlast the matmul."""
    return n_axes * F / alpha


def tp_limit_memory(F: Any, B: Any, beta: Any) -> Any:
    """A memory-bound decode step tolerates more model parallelism, up to Y = F / (B beta): the
    collectives must only hide behind the time to read each chip's share of the weights."""
    return F / (B * beta)


def megatron_times_s(B: Any, D: Any, F: Any, Y: Any, flops_per_s: Any, hbm_bytes_per_s: Any,
                     ici_bidirectional_bytes_per_s: Any, weight_bpe: Any = 2, act_bpe: Any = 2) -> dict[str, Any]:
    """One D x F weight matmul of a decode step, its weight split Y ways (Part 8): the activations'
    collective (act_bpe * B * D bytes over one bidirectional link), reading this chip's weight share,
    and its FLOPs."""
    return {"ici": act_bpe * B * D / ici_bidirectional_bytes_per_s,
            "hbm": weight_bpe * D * F / (Y * hbm_bytes_per_s),
            "flops": 2 * B * D * F / (Y * flops_per_s)}


def weight_stationary_2d_comms_s(B: Any, D: Any, F: Any, X: Any, YZ: Any, W: Any) -> Any:
    """Part 7's appendix: AllGather_YZ of bf16 In[B, D_X], then ReduceScatter_YZ of the output,
    2BD/(X W), plus the AllReduce_X of the bf16 hidden [B, F_YZ], 4BF/(YZ W)."""
    return 2 * B * D / (X * W) + 4 * B * F / (YZ * W)


def model_parallel_1d_comms_s(B: Any, D: Any, W: Any) -> Any:
    """The 1D weight-stationary (Megatron) layer on a 3D torus, as the appendix quotes it: 4BD/(3W)."""
    return 4 * B * D / (3 * W)


def latency_bound_bytes(n_shards: Any, one_way_bytes_per_s: Any, hop_s: Any = hw.ICI_HOP_LATENCY_S) -> Any:
    """Size of a collective's whole buffer below which its hops' latency, not bandwidth, sets its time:
    each of the n shards must take longer than one hop to cross a link, buffer / n > W * hop."""
    return n_shards * one_way_bytes_per_s * hop_s


# --- serving systems ---------------------------------------------------------------------------------

def evicted_tokens_per_step(B: Any, prefill_len: Any, decode_len: Any) -> Any:
    """Continuous batching: B / G sequences finish each step, and each frees P + G cached tokens."""
    return B * (prefill_len + decode_len) / decode_len


def prefill_to_generate_servers(B: Any, prefill_s_per_request: Any, step_s: Any, decode_len: Any) -> Any:
    """Disaggregated serving: prefill servers per generate server that keep both saturated. A generate
    server finishes B requests every G steps; a prefill server makes one request per prefill."""
    return B * prefill_s_per_request / (step_s * decode_len)


# --- curves ------------------------------------------------------------------------------------------

def frontier(param_count: float, weight_bytes: float, kv_bytes_per_token: float, contexts: Sequence[int],
             batches: np.ndarray, n_chips: int, chip: hw.Chip = hw.TPU_V5E) -> tuple[np.ndarray, np.ndarray]:
    """Latency (s) and throughput (tokens/s/chip) of a decode step for every (context, batch), with
    NaN where the caches do not fit beside the weights. Arrays of shape [len(contexts), len(batches)]."""
    b = np.asarray(batches, dtype=float)[None, :]
    kv = np.asarray(contexts, dtype=float)[:, None] * kv_bytes_per_token
    step = decode_step_s(b, kv, weight_bytes, param_count, n_chips, chip.bf16_flops_per_s, chip.hbm_bytes_per_s)
    fits = b * kv + weight_bytes <= n_chips * chip.hbm_bytes
    latency = np.where(fits, step, np.nan)
    return latency, b / latency / n_chips


def _max(a: Any, b: Any) -> Any:
    """max for numbers, numpy arrays and sympy expressions alike."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.maximum(a, b)
    if hasattr(a, "free_symbols") or hasattr(b, "free_symbols"):
        import sympy as sp

        return sp.Max(a, b)
    return max(a, b)
