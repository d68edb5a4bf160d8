"""Chapter 6, Training LLaMA 3 on TPUs: every graded question of the chapter, as records with references.

Book: Part 6 "Training LLaMA 3 on TPUs", https://jax-ml.github.io/scaling-book/applied-training/
Numbers are computed from ``course.models`` (the LLaMA 3 configurations) and ``course.hardware`` with
``solutions._derived`` (never typed in); where the book prints a rounded or differently-based value, the
tolerance admits it and ``BOOK`` records it for the tests. Labels follow the syllabus: A1-A9 the chapter's inline
questions, W1-W2 its two worked problems (no book answers: the course derives them), CX1-CX7 coding
exercises. CX3 grades the MLP block of the syllabus's scaled-down LLaMA step (FSDP on one mesh axis,
Megatron-style tensor parallelism on the other) as a forward program; the whole two-layer step is not
graded. CX5 is a data-parallel gradient step from the loss itself; the syllabus's checkpoint-policy
exercise is not graded here. CX6 and CX7 go beyond the syllabus: a step under a per-device memory budget,
first by gathering one layer at a time, then by choosing the mesh's shape (the student's choice is part of
the answer).

The book multiplies with the models' nominal sizes (70e9, 405e9) once it has counted the parameters,
and evaluates memory with a 4e6-token batch although the run used 4 * 2**20 tokens; the references
follow it where the prompts say so, and the tolerances admit the exact counts.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import course
from autograder.numbers import round_figures
from autograder.questions import MeshChoice
from course.symbols import D, F, H, K, L, N, V, X, Y
from solutions._derived import models as m
from solutions._derived.hardware import pod_chips, torus_axes
from solutions._kit import *  # noqa: F403 (the authoring vocabulary: solutions/_kit.py)
from solutions._kit import P

V5P = hw.TPU_V5P
PEAK = V5P.bf16_flops_per_s
ALPHA = PEAK / V5P.ici_bidirectional_bytes_per_s  # C / W_ici = 2550
ALPHA_DCN = PEAK / V5P.dcn_bytes_per_s  # C / W_dcn = 73,440 tokens per pod
POD = pod_chips(V5P)  # 8960
TORUS_AXES = torus_axes(V5P)  # 3
BF16 = hw.BYTES_PER_ELEMENT["bf16"]
STATE_BYTES = m.TRAIN_STATE_BYTES  # bf16 weights + fp32 Adam moments: 10 bytes per parameter
DAY, YEAR = 86_400.0, 365.25 * 86_400.0

SECTION = "applied-training/"
CONFIG = SECTION + "#what-does-llama-3-look-like"
COUNTING = SECTION + "#counting-parameters-and-flops"
SHARDING = SECTION + "#how-to-shard-llama-3-70b-for-training"
WORKED = SECTION + "#worked-problems"
PART5_MIX = "training/#mixed-fsdp-and-tensor-parallelism"
PART5_PODS = "training/#scaling-between-pods"
PART5_DP = "training/#data-parallelism"
PART5_FSDP = "training/#fully-sharded-data-parallelism-fsdp"

# --- inputs the chapter states -------------------------------------------------------------------------
M70, M405 = m.LLAMA3_70B, m.LLAMA31_405B
NOMINAL_70B, NOMINAL_405B = 70e9, 405e9  # the sizes in the models' names, which the book multiplies with
TOKENS = 15e12  # LLaMA 3's pre-training tokens
BATCH = 4 * 2**20  # tokens per batch: 1024 sequences of 4096
SEQ_LEN = 4096
MEMORY_BATCH = 4e6  # the book's memory estimate rounds the batch to 4e6 tokens
N_CKPT = 4  # checkpoints per layer, each a [tokens, D] bf16 tensor
MFU = 0.4
M_X, M_Y = 2, 1  # a 3D torus: FSDP over two axes, tensor parallelism over one
W1_PODS, W2_PODS = 4, 8
W1_MESH, W1_MESH_ALT = (896, 10), (1120, 8)  # factorisations of 8960 near W1's optimum
W2_BATCH = 16 * 2**20

# --- references the settings do not vary ----------------------------------------------------------------
PARAMS_FORMULA = m.params(L, D, F, N, K, H, V)
A2_FLOPS = m.train_flops(NOMINAL_70B, 1)
A3_FLOPS = m.train_flops(NOMINAL_70B, TOKENS)


def ckpt_bytes(D: float, tokens: float, n_ckpt: float, L: float) -> float:
    """Checkpoints: n_ckpt tensors of [tokens, D] in bf16 per layer."""
    return BF16 * D * tokens * n_ckpt * L




def comm_ratio(B, X, Y, F, alpha, M_X, M_Y):
    """CX2: communication over compute time of FSDP (X ways, M_X axes) + tensor parallelism (Y ways, M_Y
    axes) for a global batch of B tokens on X * Y chips; the collectives overlap, so the larger counts."""
    return max(X * alpha / (M_X * B), Y * alpha / (M_Y * F))


def comm_ratio_summed(B, X, Y, F, alpha, M_X, M_Y):
    return X * alpha / (M_X * B) + Y * alpha / (M_Y * F)


W1_CHIPS = W1_PODS * POD
W1_POD_BATCH = BATCH / W1_PODS

W2_PARAMS = m.params_of(M405)
W2_COUNT = count_of(M405.name, W2_PARAMS)  # to 4 significant figures: to 3 it is the "405B" of the name
W2_FLOPS_PER_TOKEN = m.train_flops(W2_PARAMS, 1)
W2_FLOPS = m.train_flops(NOMINAL_405B, TOKENS)
W2_CHIPS = W2_PODS * POD

# The book's printed answers (syllabus, pinned V2), for the tests that compare them with ours.
BOOK = {
    "ch06-a1-mlp-params": 56.3e9, "ch06-a1-attn-params": 12e9, "ch06-a1-vocab-params": 2.1e9,
    "ch06-a1-params": 70.4e9, "ch06-a2-flops-per-token": 4.2e11, "ch06-a2-seconds-per-token": 1e-3,
    "ch06-a3-total-flops": 6.3e24, "ch06-a3-years": 435, "ch06-a4-pod-days": 44, "ch06-a5-ckpt-bytes": 20.9e12,
    "ch06-a5-total-bytes": 21.6e12, "ch06-a5-min-chips": 225, "ch06-a5-days": 1752,
    "ch06-a6-bytes-per-chip": 2.4e9, "ch06-a6-bytes-per-chip-12": 8e9, "ch06-a7-max-ways": 1024,
    "ch06-a8-tokens-per-chip": 468, "ch06-a9-mix-bound": 113, "ch06-a9-x-opt": 1618,
}


# --- CX1: the budget calculator ------------------------------------------------------------------------

def llama_budget(cfg, tokens, batch, chips, mfu, n_ckpt, hbm, peak):
    """(parameters, training FLOPs, days on ``chips`` at ``mfu``, training memory in bytes, the fewest
    chips that hold it, bytes per chip on ``chips``). Norms left out; bf16 weights, fp32 Adam moments,
    ``n_ckpt`` bf16 [batch, D] checkpoints per layer."""
    L_, D_, F_, N_, K_, H_, V_ = (cfg[k] for k in "LDFNKHV")
    params = L_ * (3 * D_ * F_ + 2 * D_ * (N_ + K_) * H_) + 2 * V_ * D_
    flops = 6 * params * tokens
    days = flops / (chips * peak * mfu) / 86400
    memory = 10 * params + 2 * D_ * batch * n_ckpt * L_  # 2 + 4 + 4 bytes per parameter, bf16 checkpoints
    return float(params), float(flops), days, float(memory), memory / hbm, memory / chips


def llama_budget_mha(cfg, tokens, batch, chips, mfu, n_ckpt, hbm, peak):
    """Counts every head's keys and values (multi-head attention), ignoring K."""
    return llama_budget({**cfg, "K": cfg["N"]}, tokens, batch, chips, mfu, n_ckpt, hbm, peak)


def llama_budget_no_optimizer(cfg, tokens, batch, chips, mfu, n_ckpt, hbm, peak):
    """Forgets the optimizer state: 2 bytes per parameter."""
    params, flops, days, memory, _, _ = llama_budget(cfg, tokens, batch, chips, mfu, n_ckpt, hbm, peak)
    memory -= (STATE_BYTES - BF16) * params
    return params, flops, days, memory, memory / hbm, memory / chips


def _cfg(c: m.Config) -> dict:
    return {k: c.dims()[k] for k in "LDFNKHV"}


def _budget(c, tokens, batch, chips, mfu=MFU, n_ckpt=N_CKPT, hbm=V5P.hbm_bytes, peak=PEAK):
    return dict(cfg=_cfg(c), tokens=tokens, batch=float(batch), chips=chips, mfu=mfu, n_ckpt=n_ckpt, hbm=hbm,
                peak=peak)


BUDGET_PROBES = (
    _budget(M70, TOKENS, MEMORY_BATCH, POD),  # A1-A6
    _budget(M70, TOKENS, BATCH, W1_CHIPS, n_ckpt=12),
    _budget(m.LLAMA3_8B, 2e12, BATCH, 256, mfu=0.5, n_ckpt=1, hbm=hw.TPU_V5E.hbm_bytes,
            peak=hw.TPU_V5E.bf16_flops_per_s),  # a shorter run, on another chip
    _budget(M405, TOKENS, W2_BATCH, W2_CHIPS),  # W2
)
def _alpha(chip: hw.Chip) -> float:
    return chip.bf16_flops_per_s / chip.ici_bidirectional_bytes_per_s


COMM_PROBES = (
    dict(B=float(BATCH), X=2048, Y=4, F=float(M70.F), alpha=ALPHA, M_X=M_X, M_Y=M_Y),  # A9's choice
    dict(B=W1_POD_BATCH, X=W1_MESH[0], Y=W1_MESH[1], F=float(M70.F), alpha=ALPHA, M_X=M_X, M_Y=M_Y),  # W1
    dict(B=W1_POD_BATCH, X=W1_MESH_ALT[0], Y=W1_MESH_ALT[1], F=float(M70.F), alpha=ALPHA, M_X=M_X, M_Y=M_Y),
    dict(B=float(BATCH), X=POD, Y=1, F=float(M70.F), alpha=ALPHA, M_X=TORUS_AXES, M_Y=1),  # A8: pure FSDP
    dict(B=3e6, X=1024, Y=4, F=13_824.0, alpha=ALPHA, M_X=M_X, M_Y=M_Y),  # Part 5's Q3
    dict(B=float(W2_BATCH) / W2_PODS, X=1024, Y=8, F=float(M405.F), alpha=ALPHA, M_X=M_X, M_Y=M_Y),  # W2
    # Other chips' C / W_ici, so that no alpha is the same in every case.
    dict(B=2e6, X=64, Y=64, F=float(M70.F), alpha=_alpha(hw.TPU_V6E), M_X=1, M_Y=1),  # too much tensor parallelism
    dict(B=float(2**20), X=1024, Y=8, F=float(M70.F), alpha=_alpha(hw.TPU_V4P), M_X=M_X, M_Y=M_Y),
    dict(B=8.0 * 2**20, X=1024, Y=8, F=36_864.0, alpha=_alpha(hw.TPU7X), M_X=M_X, M_Y=M_Y),
    dict(B=float(BATCH), X=512, Y=16, F=20_480.0, alpha=_alpha(hw.TPU_V5E), M_X=M_X, M_Y=M_Y),
)


# --- CX4: data parallelism across pods, FSDP and tensor parallelism inside ------------------------------
# Mesh Z = 2 pods (the DCN axis, outermost) x X = 2 (FSDP) x Y = 2 (tensor parallelism). The backward pass
# of W_in: In[B_ZX, D_Y] and dOut[B_ZX, D_Y], W_out[F_Y, D_X]; the result dW_in[D_X, F_Y], the same in both
# pods. B = 64 tokens, D = 64, F = 256.
PB, PD, PF = 64, 64, 256
ZXY = (("Z", 2), ("X", 2), ("Y", 2))


def _pieces(x_block, g_block, w_out_block):
    """This device's dW_in[D, F_Y] summed over its own tokens: In and dOut gathered over Y, W_out over X."""
    x_rows = jax.lax.all_gather(x_block, "Y", axis=1, tiled=True)  # In[B_ZX, D]
    g_rows = jax.lax.all_gather(g_block, "Y", axis=1, tiled=True)  # dOut[B_ZX, D]
    w_out_rows = jax.lax.all_gather(w_out_block, "X", axis=1, tiled=True)  # W_out[F_Y, D]
    return x_rows.T @ (g_rows @ w_out_rows.T)  # dW_in[D, F_Y]{U_ZX}


def multipod_grad(x, g, w_out):
    """Reduce-scatter inside the pod first (ICI), then all-reduce the smaller shard across pods (DCN)."""
    def block(x_block, g_block, w_out_block):  # f32[16, 32], f32[16, 32], f32[128, 32]
        x_rows = jax.lax.all_gather(x_block, "Y", axis=1, tiled=True)  # In[B_ZX, D]
        g_rows = jax.lax.all_gather(g_block, "Y", axis=1, tiled=True)  # dOut[B_ZX, D]
        w_out_rows = jax.lax.all_gather(w_out_block, "X", axis=1, tiled=True)  # W_out[F_Y, D]
        partial = x_rows.T @ (g_rows @ w_out_rows.T)  # dW_in[D, F_Y]{U_ZX}
        shard = jax.lax.psum_scatter(partial, "X", scatter_dimension=0, tiled=True)  # [D_X, F_Y]{U_Z}
        return jax.lax.psum(shard, "Z")  # across pods, over the DCN

    mesh = course.mesh(Z=2, X=2, Y=2)
    return jax.shard_map(block, mesh=mesh, in_specs=(P(("Z", "X"), "Y"), P(("Z", "X"), "Y"), P("Y", "X")),
                         out_specs=P("X", "Y"))(x, g, w_out)


def multipod_grad_one_pod(x, g, w_out):
    """Forgets the other pod's tokens: no sum over Z (check_vma=False hides the mistake)."""
    def block(x_block, g_block, w_out_block):
        return jax.lax.psum_scatter(_pieces(x_block, g_block, w_out_block), "X", scatter_dimension=0, tiled=True)
    return smap(block, ZXY, (P(("Z", "X"), "Y"), P(("Z", "X"), "Y"), P("Y", "X")), P("X", "Y"),
                check_vma=False)(x, g, w_out)


def multipod_grad_allreduce(x, g, w_out):
    """All-reduces the full-size partial over both pods and both FSDP chips, then keeps its rows."""
    def block(x_block, g_block, w_out_block):
        return own_block(jax.lax.psum(_pieces(x_block, g_block, w_out_block), ("Z", "X")), "X")
    return smap(block, ZXY, (P(("Z", "X"), "Y"), P(("Z", "X"), "Y"), P("Y", "X")), P("X", "Y"))(x, g, w_out)


MULTIPOD_SPEC = ProgramSpec(
    mesh=ZXY, einsum="bd,be,fe->df",
    operands=(Operand((PB, PD), (("Z", "X"), "Y")), Operand((PB, PD), (("Z", "X"), "Y")),
              Operand((PF, PD), ("Y", "X"))),
    out_spec=("X", "Y"), collectives={"all-gather": 3, "reduce-scatter": 1, "all-reduce": 1},
    rtol=1e-3)


# --- CX3: the MLP block under FSDP + tensor parallelism, as A9 chose (few ways of tensor parallelism) -------
# Mesh X = 2 (FSDP: the batch, and the weights' D, which each device gathers just in time) x Y = 4 (tensor
# parallelism: F, A9's 4 ways). Megatron style: x[B_X, D] arrives whole on every device of a Y group,
# W_in[D_X, F_Y] and W_out[F_Y, D_X]; each device computes relu(x . W_in[:, F_Y]) exactly (the D sum is
# whole), so the only partial sum is the second matmul's over F, added by one AllReduce over Y.
# B = 32 tokens, D = 64, F = 256.
MB, MD, MF = 32, 64, 256
XY24 = (("X", 2), ("Y", 4))
MLP_SPECS = (("X", None), ("X", "Y"), ("Y", "X"))  # the slips' in_specs, as smap takes them


def fsdp_tp_mlp(x, w_in, w_out):
    """Gather each weight's D over X (FSDP), keep this device's F columns (tensor parallelism), apply the
    relu to whole hidden units, and add the F partial sums over Y with one AllReduce."""
    def block(x_block, w_in_block, w_out_block):  # f32[16, 64], f32[32, 64], f32[64, 32]
        w_in_cols = jax.lax.all_gather(w_in_block, "X", axis=0, tiled=True)  # W_in[D, F_Y]
        w_out_rows = jax.lax.all_gather(w_out_block, "X", axis=1, tiled=True)  # W_out[F_Y, D]
        hidden = jnp.maximum(x_block @ w_in_cols, 0.0)  # [B_X, F_Y]: whole sums over D, so relu is exact
        return jax.lax.psum(hidden @ w_out_rows, "Y")  # Out[B_X, D]: the F_Y partial sums added

    mesh = course.mesh(X=2, Y=4)
    return jax.shard_map(block, mesh=mesh, in_specs=(P("X", None), P("X", "Y"), P("Y", "X")),
                         out_specs=P("X", None))(x, w_in, w_out)


def _hidden_cols(x_block, w_in_block, w_out_block):
    """This device's relu(x . W_in[:, F_Y]) and W_out[F_Y, D], the weights gathered over X."""
    w_in_cols = jax.lax.all_gather(w_in_block, "X", axis=0, tiled=True)
    w_out_rows = jax.lax.all_gather(w_out_block, "X", axis=1, tiled=True)
    return jnp.maximum(x_block @ w_in_cols, 0.0), w_out_rows


def fsdp_tp_mlp_no_sum(x, w_in, w_out):
    """Forgets the AllReduce over Y: the result holds only the first quarter of F's terms
    (check_vma=False hides the mistake)."""
    def block(x_block, w_in_block, w_out_block):
        hidden, w_out_rows = _hidden_cols(x_block, w_in_block, w_out_block)
        return hidden @ w_out_rows
    return smap(block, XY24, MLP_SPECS, P("X", None), check_vma=False)(x, w_in, w_out)


def fsdp_tp_mlp_gathers_all(x, w_in, w_out):
    """Gathers both weights whole on every device (over X and Y) and computes the block alone: right, but
    each device moves and multiplies all of F, four times its share."""
    def block(x_block, w_in_block, w_out_block):
        w_in_cols = jax.lax.all_gather(w_in_block, "X", axis=0, tiled=True)
        w_out_rows = jax.lax.all_gather(w_out_block, "X", axis=1, tiled=True)
        w_in_full = jax.lax.all_gather(w_in_cols, "Y", axis=1, tiled=True, to="invarying")
        w_out_full = jax.lax.all_gather(w_out_rows, "Y", axis=0, tiled=True, to="invarying")
        return jnp.maximum(x_block @ w_in_full, 0.0) @ w_out_full
    return smap(block, XY24, MLP_SPECS, P("X", None))(x, w_in, w_out)


MLP_SPEC = ProgramSpec(
    mesh=XY24, einsum="the MLP block relu(x @ w_in) @ w_out", reference="mlp",
    operands=(Operand((MB, MD), ("X", None)), Operand((MD, MF), ("X", "Y")), Operand((MF, MD), ("Y", "X"))),
    out_spec=("X", None), collectives={"all-gather": 2, "all-reduce": 1},
    rtol=1e-3)


# --- CX5: one data-parallel step's gradient, from the loss -----------------------------------------------
# x[B_X, D] split over 8 data-parallel replicas (8 pods, say), W_in[D, F] and W_out[F, D] replicated; the
# loss is the mean over the whole batch of sum(Out^2) / 2; the result dW_in[D, F] must be the same on every
# replica. B = 64 tokens, D = 32, F = 64. A replica's tokens are 1/8 of the batch, so its loss is its sum
# divided by the *global* B: autodiff inside shard_map adds the replicas' gradients of a replicated W_in
# (one AllReduce), and their sum is the gradient of the global mean.
DB, DD, DF = 64, 32, 64
DP_SPECS = (("X", None), (), ())
DP_ATOL = 0.03  # 1e-3 of an entry's typical size: about 32 for random normal inputs of these shapes


def dp_loss_grad(x, w_in, w_out):
    """Each replica differentiates its tokens' share of the global mean loss; autodiff sums the shares of
    the replicated W_in's gradient over X (one AllReduce)."""
    def block(x_block, w_in_full, w_out_full):  # f32[8, 32], f32[32, 64], f32[64, 32]
        def loss(w):  # this replica's part of mean_b sum(Out^2) / 2 over all x.shape[0] tokens
            out = jnp.maximum(x_block @ w, 0.0) @ w_out_full
            return jnp.sum(out**2) / (2 * x.shape[0])

        return jax.grad(loss)(w_in_full)  # f32[32, 64], summed over X by autodiff

    return jax.shard_map(block, mesh=course.mesh(X=8), in_specs=(P("X", None), P(), P()),
                         out_specs=P())(x, w_in, w_out)


def _replica_mean_grad(x_block, w_in_full, w_out_full):
    """The gradient of this replica's own mean loss: what one replica alone would train with."""
    def loss(w):
        out = jnp.maximum(x_block @ w, 0.0) @ w_out_full
        return jnp.mean(jnp.sum(out**2, axis=-1)) / 2
    return jax.grad(loss)(w_in_full)


def dp_loss_grad_sums_means(x, w_in, w_out):
    """Averages per replica, then sums the averages: 8 times the gradient of the global mean."""
    def block(x_block, w_in_full, w_out_full):
        return jax.lax.psum(_replica_mean_grad(x_block, w_in_full, w_out_full), "X")
    return smap(block, X8, DP_SPECS, P(), check_vma=False)(x, w_in, w_out)


def dp_loss_grad_averages_shares(x, w_in, w_out):
    """Weights each replica by the global batch, as it should, but then averages the shares (pmean) where
    they must be added: 1/8 of the gradient."""
    def block(x_block, w_in_full, w_out_full):
        def loss(w):
            out = jnp.maximum(x_block @ w, 0.0) @ w_out_full
            return jnp.sum(out**2) / (2 * x.shape[0])
        return jax.lax.pmean(jax.grad(loss)(w_in_full), "X")
    return smap(block, X8, DP_SPECS, P(), check_vma=False)(x, w_in, w_out)


def dp_loss_grad_gathers_batch(x, w_in, w_out):
    """Gathers the whole batch to every replica and differentiates the global loss there: right, but each
    replica moves every token and does all the batch's FLOPs."""
    def block(x_block, w_in_full, w_out_full):
        x_full = jax.lax.all_gather(x_block, "X", axis=0, tiled=True, to="invarying")
        return _replica_mean_grad(x_full, w_in_full, w_out_full)
    return smap(block, X8, DP_SPECS, P())(x, w_in, w_out)


DP_LOSS_SPEC = ProgramSpec(
    mesh=X8, einsum="the gradient with respect to w_in of mean_b sum(mlp(x)^2) / 2", reference="mlp_loss_grad_w_in",
    operands=(Operand((DB, DD), ("X", None)), Operand((DD, DF), (None, None)), Operand((DF, DD), (None, None))),
    out_spec=(), collectives={"all-reduce": 1}, rtol=1e-3, atol=DP_ATOL)


# --- CX6: the training step under a memory budget: FSDP over a stack of layers, one layer gathered at a time ---
# L = 16 relu layers h -> relu(h @ W[i]) * sqrt(2 / D) (He's factor keeps activations of unit size through the
# stack), W[L, D_X, D]: each device holds 1/8 of every layer. x[B_X, D], B = 64 tokens, D = 128. The step returns
# the loss (mean over the global batch of sum(out^2) / 2) and dW[L, D_X, D], sharded like W.
# The budget, per device, for results and temporaries: its gradient shard plus 8 whole layers (half the model).
# Measured on CPU (jax 0.10.2): the model holds 279 KB (2.3x under), autodiff keeping every gathered layer
# 1.39 MB (2.1x over), gathering all layers up front 3.35 MB (5.1x over). A Python loop over the layers (even
# with jax.checkpoint) holds 1.25 MB: unrolled, XLA is free to schedule every gather early, so the prompt asks
# for a scan.
SL, SB, SD = 16, 64, 128
LAYER_BYTES = 4 * SD * SD  # one gathered layer, f32
SHARD_BYTES = SL * LAYER_BYTES // 8  # a device's share of W, and of dW
STACK_BUDGET = SHARD_BYTES + 8 * LAYER_BYTES  # 655,360 bytes


def fsdp_layers_step(x, w):
    """A scan over the layers gathers one layer's weights at a time; jax.checkpoint makes the backward pass
    gather that layer again rather than keep every gathered layer alive for it, and the gather's transpose
    reduce-scatters each layer's gradient straight back to this device's shard."""
    scale = (2 / x.shape[1]) ** 0.5  # He's factor, sqrt(2 / D)

    def block(x_block, w_block):  # f32[8, 128], f32[16, 16, 128]
        @jax.checkpoint
        def layer(h, w_shard):  # f32[8, 128], f32[16, 128]: this device's rows of layer i
            w_layer = jax.lax.all_gather(w_shard, "X", axis=0, tiled=True)  # W[i]: f32[128, 128], this layer only
            return jnp.maximum(h @ w_layer, 0.0) * scale, None

        def loss(w_shards):
            out, _ = jax.lax.scan(layer, x_block, w_shards)  # f32[8, 128]
            return jax.lax.psum(jnp.sum(out**2), "X") / (2 * x.shape[0])  # the mean over all 64 tokens

        return jax.value_and_grad(loss)(w_block)  # the loss, and dW[L, D_X, D] summed over X by the transpose

    return jax.shard_map(block, mesh=course.mesh(X=8), in_specs=(P("X", None), P(None, "X", None)),
                         out_specs=(P(), P(None, "X", None)))(x, w)


def _stack_layer(h, w_shard):
    """One layer on this device's rows of it, gathered just in time (the slips' shared body)."""
    w_layer = jax.lax.all_gather(w_shard, "X", axis=0, tiled=True)
    return jnp.maximum(h @ w_layer, 0.0) * math.sqrt(2 / SD), None


def _stack_step(loss: Callable) -> Callable:
    """A training step around a slip's loss of (x_block, w_block)."""
    def step(x, w):
        return jax.shard_map(lambda xb, wb: jax.value_and_grad(lambda ws: loss(xb, ws))(wb), mesh=course.mesh(X=8),
                             in_specs=(P("X", None), P(None, "X", None)), out_specs=(P(), P(None, "X", None)))(x, w)
    return step


# Gathers each layer in the scan's body but without jax.checkpoint: autodiff keeps every gathered layer for the
# backward pass, so the whole model is alive at once after all.
fsdp_layers_step_keeps_gathered = _stack_step(lambda xb, ws: jax.lax.psum(
    jnp.sum(jax.lax.scan(_stack_layer, xb, ws)[0] ** 2), "X") / (2 * SB))
# Gathers every layer up front, then runs the stack on whole weights: one big AllGather, the whole model held.
fsdp_layers_step_gathers_all = _stack_step(lambda xb, ws: jax.lax.psum(jnp.sum(jax.lax.scan(
    lambda h, w_layer: (jnp.maximum(h @ w_layer, 0.0) * math.sqrt(2 / SD), None), xb,
    jax.lax.all_gather(ws, "X", axis=1, tiled=True))[0] ** 2), "X") / (2 * SB))
# Divides by its own 8 tokens instead of all 64: the loss and the gradient 8 times too large.
fsdp_layers_step_local_mean = _stack_step(lambda xb, ws: jax.lax.psum(
    jnp.sum(jax.lax.scan(jax.checkpoint(_stack_layer), xb, ws)[0] ** 2), "X") / (2 * xb.shape[0]))

STACK_SPEC = ProgramSpec(
    mesh=X8, einsum="one training step of L relu layers h -> relu(h @ w[i]) * sqrt(2 / D): the loss, "
                    "mean_b sum(out^2) / 2, and its gradient with respect to w",
    reference="relu_stack_train_step", outputs=("loss", "dW"),
    operands=(Operand((SB, SD), ("X", None)), Operand((SL, SD, SD), (None, "X", None))),
    out_spec=((), (None, "X", None)),
    # FSDP's step: each layer gathered in the forward pass and again in the backward pass, each layer's gradient
    # reduce-scattered, the loss added once. A program that gathers less has kept gathered layers: the message
    # then adds the memory sentence (and a right-count program over the budget, such as an unrolled loop, gets it).
    collectives={"all-gather": 2 * SL, "reduce-scatter": SL, "all-reduce": 1},
    collectives_note=f"FSDP gathers each layer's weights in the forward pass and again in the backward pass "
                     f"({2 * SL} AllGathers), reduce-scatters each layer's gradient back to shards ({SL} "
                     "ReduceScatters) and adds up the loss once; fewer gathers mean gathered layers were kept "
                     "alive, which is what the budget forbids.",
    max_bytes=STACK_BUDGET,
    over_memory=("That is more than your gradient shard plus 8 whole layers: most likely every layer's gathered "
                 "weights are alive at once, gathered up front or kept by autodiff for the backward pass. Gather "
                 "each layer inside the body of a jax.lax.scan over the layers, and wrap that body in "
                 "jax.checkpoint so the backward pass gathers the layer again instead of keeping it. A Python "
                 "loop over the layers is no scan, even with each layer under jax.checkpoint: it unrolls into "
                 "one program, in which XLA may gather every layer before it is needed."),
    rtol=1e-3, atol=1e-3)  # a typical entry of dW is about 0.1 for standard-normal inputs: 1% of it
# Bytes of bf16 MLP weights one chip holds at the peak of a layer-by-layer FSDP forward pass over X chips: its
# shard of every layer's three D x F matrices, and one layer gathered whole.
JIT_WEIGHT_BYTES = BF16 * 3 * D * F * (L / X + 1)


# --- CX7: the same step at the mesh shape the student chooses for a memory budget -----------------------------
# Eight devices as X (FSDP: the batch, and the weights' D, gathered just in time) x Y (tensor parallelism: F),
# X * Y = 8, laid out as CX3: x[B_X, D], W_in[D_X, F_Y], W_out[F_Y, D_X]. The step returns (loss, dW_in, dW_out),
# each gradient sharded like its weight. The student's function names the axes in its shardings and takes the
# shape as keyword parameters X and Y, so one function runs at every shape; their defaults are its choice.
# Per device the step holds its shards of the two gradients (the results, 4 * 2 * D * F / (X * Y) bytes) and
# each weight gathered over X, D x F/Y of it: that slab shrinks as Y grows, so the budget decides how much
# tensor parallelism the step needs. B = 64 tokens, D = 256, F = 1024.
# Measured on CPU (jax 0.10.2), results + temporaries per device: 8x1 2,490,396 bytes; 4x2 1,441,820; 2x4 917,532;
# 1x8 426,016. The budget lies 1.3x under 4x2 and 1.2x over 2x4: exactly the shapes with Y >= 4 fit.
CB, CD, CF = 64, 256, 1024
BUDGET_BYTES = 1_100_000


def budget_step(x, w_in, w_out, *, X=2, Y=4):
    """CX3's layout as a training step, at any X x Y mesh; the defaults are the shape chosen, the least tensor
    parallelism that fits the budget. Autodiff turns each gather over X into a ReduceScatter, so the gradients
    come out summed over the whole batch and sharded like the weights."""
    def block(x_block, w_in_block, w_out_block):  # f32[B/X, D], f32[D/X, F/Y], f32[F/Y, D/X]
        def loss(w_in_shard, w_out_shard):
            w_in_cols = jax.lax.all_gather(w_in_shard, "X", axis=0, tiled=True)  # W_in[D, F_Y]
            w_out_rows = jax.lax.all_gather(w_out_shard, "X", axis=1, tiled=True)  # W_out[F_Y, D]
            hidden = jnp.maximum(x_block @ w_in_cols, 0.0)  # [B_X, F_Y]: whole sums over D
            out = jax.lax.psum(hidden @ w_out_rows, "Y")  # Out[B_X, D]: the F_Y partial sums added
            return jax.lax.psum(jnp.sum(out**2), "X") / (2 * x.shape[0])  # the mean over all the tokens

        value, (d_in, d_out) = jax.value_and_grad(loss, argnums=(0, 1))(w_in_block, w_out_block)
        return value, d_in, d_out  # dW_in[D_X, F_Y], dW_out[F_Y, D_X]

    return jax.shard_map(block, mesh=course.mesh(X=X, Y=Y), in_specs=(P("X", None), P("X", "Y"), P("Y", "X")),
                         out_specs=(P(), P("X", "Y"), P("Y", "X")))(x, w_in, w_out)


def _budget_map(block: Callable, X: int, Y: int) -> Callable:
    """The slips' shard_map of ``block`` at an X x Y mesh, with the step's shardings (check_vma off: some slips
    return what autodiff did not sum)."""
    return jax.shard_map(block, mesh=course.mesh(X=X, Y=Y), in_specs=(P("X", None), P("X", "Y"), P("Y", "X")),
                         out_specs=(P(), P("X", "Y"), P("Y", "X")), check_vma=False)


# The right step at a shape with too little tensor parallelism: each device gathers D x F/2 of each weight.
budget_step_on_4x2 = functools.partial(budget_step, X=4, Y=2)
budget_step_on_1x8 = functools.partial(budget_step, X=1, Y=8)  # fits, with more tensor parallelism than needed


def budget_step_local_grads(x, w_in, w_out, *, X=2, Y=4):
    """Differentiates with respect to the gathered weights and keeps its own rows of the gradients: each
    device's gradient covers only its own tokens, never summed over the data axis X."""
    def block(x_block, w_in_block, w_out_block):
        w_in_cols = jax.lax.all_gather(w_in_block, "X", axis=0, tiled=True)
        w_out_rows = jax.lax.all_gather(w_out_block, "X", axis=1, tiled=True)

        def loss(wi, wo):
            out = jax.lax.psum(jnp.maximum(x_block @ wi, 0.0) @ wo, "Y")
            return jax.lax.psum(jnp.sum(out**2), "X") / (2 * x.shape[0])
        value, (d_in, d_out) = jax.value_and_grad(loss, argnums=(0, 1))(w_in_cols, w_out_rows)
        return value, own_block(d_in, "X", 0), own_block(d_out, "X", 1)
    return _budget_map(block, X, Y)(x, w_in, w_out)


def budget_step_gathers_weights(x, w_in, w_out, *, X=2, Y=4):
    """Gathers both weights whole (over X and Y) and differentiates on every device: right numbers, but each
    device holds whole weights and full-size gradients, and AllReduces them where FSDP reduce-scatters."""
    def block(x_block, w_in_block, w_out_block):
        w_in_full = jax.lax.all_gather(jax.lax.all_gather(w_in_block, "X", axis=0, tiled=True), "Y", axis=1,
                                       tiled=True)
        w_out_full = jax.lax.all_gather(jax.lax.all_gather(w_out_block, "X", axis=1, tiled=True), "Y", axis=0,
                                        tiled=True)

        def loss(wi, wo):
            return jnp.sum((jnp.maximum(x_block @ wi, 0.0) @ wo) ** 2) / (2 * x.shape[0])
        value, (d_in, d_out) = jax.value_and_grad(loss, argnums=(0, 1))(w_in_full, w_out_full)
        value, d_in, d_out = (jax.lax.psum(v, "X") for v in (value, d_in, d_out))
        return value, own_block(own_block(d_in, "X", 0), "Y", 1), own_block(own_block(d_out, "Y", 0), "X", 1)
    return _budget_map(block, X, Y)(x, w_in, w_out)


# The step's collectives: each weight gathered over X and its gradient reduce-scattered back, Out's partial sums
# added over Y and the loss over X. Reduce-scattering Out over Y instead (and gathering it back in the backward
# pass) is right too: one more AllGather and ReduceScatter, one AllReduce fewer.
BUDGET_COLLECTIVES = {"all-gather": (2, 3), "reduce-scatter": (2, 3), "all-reduce": (1, 2)}
BUDGET_SPEC = ProgramSpec(
    mesh=(("X", 2), ("Y", 4)), einsum="one training step of the MLP: the loss, mean_b sum(mlp(x)^2) / 2, and its "
                                      "gradients with respect to W_in and W_out",
    reference="mlp_train_step", outputs=("loss", "dW_in", "dW_out"),
    operands=(Operand((CB, CD), ("X", None)), Operand((CD, CF), ("X", "Y")), Operand((CF, CD), ("Y", "X"))),
    out_spec=((), ("X", "Y"), ("Y", "X")), collectives=BUDGET_COLLECTIVES,
    # Every X x Y = 8; listed from the least tensor parallelism to the most. A collective over an axis of size 1
    # moves nothing, and a step written for 1 x 8 may leave out the FSDP gathers and scatters.
    mesh_choices=(MeshChoice((("X", 8), ("Y", 1))), MeshChoice((("X", 4), ("Y", 2))), MeshChoice((("X", 2), ("Y", 4))),
                  MeshChoice((("X", 1), ("Y", 8)), {**BUDGET_COLLECTIVES, "all-gather": (0, 3),
                                                    "reduce-scatter": (0, 3)},
                             earns_half="a shape of less tensor parallelism fits the budget too, and its AllReduce "
                                        "of activations over Y is smaller: the exercise asks for the least tensor "
                                        "parallelism that fits.")),
    collectives_note="The step gathers each weight over X only (FSDP) and reduce-scatters its gradient back; "
                     "gathering a weight over Y too puts it whole on every device. A loss under jax.checkpoint runs "
                     "the forward pass's AllReduce of activations again in the backward pass: at the shape chosen "
                     "the step fits the budget without recomputing it.",
    max_bytes=BUDGET_BYTES,
    over_memory=("Each device holds each weight gathered over X, D x F/Y of it, and that slab is the larger the "
                 "fewer ways of tensor parallelism the mesh has: choose a shape with a larger Y, and gather each "
                 "weight over X only."),
    rtol=1e-3, atol=0.5)  # standard-normal inputs make the gradients' entries about 700 (dW_in) and 1,500 (RMS)
# CX7a: what the step holds per device, in f32: its shards of dW_in and dW_out (the results) and both weights
# gathered over X, D x F/Y each. XLA measures 6-17% more where X > 1 (one shard-sized buffer more); at X = 1
# there is nothing to gather, and it measures 19% less.
STEP_BYTES = 4 * (2 * D * F / (X * Y) + 2 * D * F / Y)


# --- the exercises whose numbers each student is dealt (autograder/variants.py); the book's values first -------


def pow2_mesh(x_opt: float, chips: int) -> tuple[str, str]:
    """The mesh "XxY": X = X_opt rounded to the nearest power of two in log scale, Y the largest power of
    two with X * Y <= chips; and the mesh of the other neighbouring power of two (the rounding slip)."""
    k = math.log2(x_opt)
    near, other = 2 ** round(k), 2 ** (math.floor(k) if round(k) > k else math.ceil(k))
    return f"{near}x{2 ** math.floor(math.log2(chips / near))}", f"{other}x{2 ** math.floor(math.log2(chips / other))}"


def a1(model: m.Config) -> tuple[Number, ...]:
    """A1: a GQA model's parameters, counted from its configuration, part by part."""
    mlp = model.L * m.mlp_params(model.D, model.F)
    attn = model.L * m.attention_params(model.D, model.N, model.K, model.H)
    mha = model.L * m.attention_params(model.D, model.N, model.N, model.H)
    vocab = m.embedding_params(model.D, model.V)
    total = m.params_of(model)
    one_embedding = total - vocab / 2
    count = count_of(model.name, total)
    return (
        number("ch06-a1-mlp-params", section=COUNTING, prompt=f"A1: {model.name}'s MLP parameters.", reference=mlp,
               tolerance=ONE_PERCENT, slips=(Slip(mlp * 2 / 3, "ratio:2/3", "a gated MLP has three D x F matrices."),)),
        number("ch06-a1-attn-params", section=COUNTING, prompt=f"A1: {model.name}'s attention parameters.",
               reference=attn, tolerance=ONE_PERCENT,
               slips=(Slip(mha, slip_code(mha, attn, ONE_PERCENT), f"only K = {model.K} heads of keys and values."),)),
        number("ch06-a1-vocab-params", section=COUNTING,
               prompt=f"A1: {model.name}'s embedding parameters (input and output).", reference=vocab,
               tolerance=ONE_PERCENT,
               slips=(Slip(vocab / 2, "ratio:1/2", "the input embedding and the output projection are separate."),)),
        number("ch06-a1-params", section=COUNTING, prompt=f"A1: {model.name}'s total parameter count{count.words}.",
               reference=total, tolerance=count.tolerance,
               slips=(Slip(one_embedding, slip_code(one_embedding, total, count.tolerance)), *count.slips)))


def with_rounding(low: float, high: float, reference: float, *, figures: int) -> Tolerance:
    """The range [low, high], widened to hold ``reference`` rounded to ``figures`` significant figures (the
    book's reading of its own answer), whether that rounds up or down, with 1% to spare."""
    rounded = round_figures(reference, figures)
    return Tolerance(low=min(low, rounded * 0.99), high=max(high, rounded * 1.01))


def a2(chip: hw.TPU) -> tuple[Number, ...]:
    """A2: seconds per token on one chip at peak. The book rounds the v5p's 0.915 ms up to about 1 ms, so on the
    v5p answers from 2% below the exact time to 10% above it pass, and the time to one figure; on another chip, the
    time to 2% (or the book's rounded peak of it, ``rate_tolerance``)."""
    seconds = A2_FLOPS / chip.bf16_flops_per_s
    book = with_rounding(0.98 * seconds, 1.1 * seconds, seconds, figures=1)
    return (number("ch06-a2-seconds-per-token", section=COUNTING,
                   prompt=f"A2: seconds per token on one {chip.name} at peak.", reference=seconds, unit="s",
                   tolerance=book if chip is V5P else rate_tolerance(chip),
                   slips=(Slip(seconds / 3, "ratio:1/3"), Slip(seconds * 1e3, "unit:1000"))),)


def a3(chip: hw.TPU, mfu: float) -> tuple[Number, ...]:
    """A3-A4: the run's FLOPs on one chip at peak (years), and on a full pod of that chip at a utilisation
    (days)."""
    years = A3_FLOPS / chip.bf16_flops_per_s / YEAR
    pod = pod_chips(chip)
    days = A3_FLOPS / (pod * chip.bf16_flops_per_s * mfu) / DAY
    return (
        number("ch06-a3-years", section=COUNTING,
               prompt=f"A3: years that takes on one {chip.name} at peak.", reference=years, unit="years",
               tolerance=rate_tolerance(chip, ONE_PERCENT),  # 1 / C: the book's rounded peaks pass too
               slips=(Slip(years * 365.25, slip_code(years * 365.25, years, ONE_PERCENT, "years"),
                           "in years, not days."),)),
        number("ch06-a4-pod-days", section=COUNTING,
               prompt=f"A4: days on a full {pod}-chip {chip.name} pod at {mfu:.0%} utilisation.", reference=days,
               unit="days", tolerance=TWO_PERCENT,
               slips=(Slip(days * mfu, slip_code(days * mfu, days), "divide by the utilisation."),
                      Slip(days * DAY, "unit:86400"))))


# The book rounds A6's 7.1e9 bytes per chip (12 checkpoints) up to "about 8 GB": accepted at its batch alone.
A6_ROUNDED_UP = BOOK["ch06-a6-bytes-per-chip-12"] / (
    (STATE_BYTES * NOMINAL_70B + ckpt_bytes(M70.D, MEMORY_BATCH, 12, M70.L)) / POD)


def a5(batch: float, chip: hw.TPU) -> tuple[Number, ...]:
    """A5-A6: LLaMA 3-70B's training memory for one batch (weights, Adam state, 4 bf16 checkpoints per
    layer), the fewest chips of a kind that hold it and how slow training on just those would be, and
    its share per chip of a v5p pod."""
    state = STATE_BYTES * NOMINAL_70B
    ckpt = ckpt_bytes(M70.D, batch, N_CKPT, M70.L)
    total = state + ckpt
    fewest = total / chip.hbm_bytes
    # A student carries their own total (3 figures, or any the question accepts) into the fewest chips, and
    # trains on the whole number they were credited with: every whole count reachable from an accepted
    # total passes, and the days on any of those chips.
    weights = BF16 * NOMINAL_70B  # 0.65-2.4% of the total: leaving it out must be refused at every batch
    total_tol = refusing(total, total - weights, ONE_PERCENT)
    least, most = (f(bound / chip.hbm_bytes)
                   for f, bound in zip((math.floor, math.ceil), total_tol.bounds(total), strict=True))

    def days_on(n: float) -> float:
        return A3_FLOPS / (n * chip.bf16_flops_per_s * MFU) / DAY
    days = days_on(fewest)
    days_tol = Tolerance(low=days_on(most) * (1 - ONE_PERCENT.rtol), high=days_on(least) * (1 + ONE_PERCENT.rtol))
    per_chip = total / POD
    per_chip_12 = (state + ckpt_bytes(M70.D, batch, 12, M70.L)) / POD
    doubled_12 = (state + 2 * ckpt_bytes(M70.D, batch, 12, M70.L)) / POD
    # High: the book's round-up, at its batch. Low: as far as leaving out a named term allows (the weights: 0.3-0.9%).
    no_weights_12, no_moments_12 = per_chip_12 - weights / POD, per_chip_12 - (state - weights) / POD
    tol_12 = Tolerance(low=refusing(per_chip_12, no_weights_12).bounds(per_chip_12)[0],
                       high=per_chip_12 * A6_ROUNDED_UP * 1.01, kept_ends=True) if batch == MEMORY_BATCH \
        else refusing(per_chip_12, no_weights_12)
    no_optimizer, no_weights = BF16 * NOMINAL_70B + ckpt, ckpt / POD
    # the book prints 2.4e9 at its batch, which is the total without the weights, to 2 figures
    per_chip_tol = TWO_PERCENT if batch == MEMORY_BATCH else refusing(per_chip, (total - weights) / POD)
    return (
        number("ch06-a5-ckpt-bytes", section=COUNTING,
               prompt=f"A5: bytes of checkpoints: 4 bf16 [tokens, D] tensors per layer, a {batch:.3g}-token batch.",
               reference=ckpt, unit="B", tolerance=ONE_PERCENT,
               slips=(Slip(ckpt / 2, "ratio:1/2", "bf16 is 2 bytes.", maybe=True),)),
        number("ch06-a5-total-bytes", section=COUNTING,
               prompt="A5: total training memory (weights, fp32 Adam state, checkpoints), nominal 70e9.",
               reference=total, unit="B", tolerance=total_tol,
               slips=(Slip(no_optimizer, slip_code(no_optimizer, total, total_tol),
                           "the optimizer state: 8 bytes per parameter."),
                      Slip(total - weights, slip_code(total - weights, total, total_tol),
                           "the bf16 weights take memory too: 2 bytes per parameter."))),
        number("ch06-a5-min-chips", section=COUNTING,
               prompt=f"A5: the fewest {chip.hbm_bytes / 1e9:.0f} GB {chip.name} chips that hold it.", reference=fewest,
               tolerance=Tolerance(low=least, high=most),
               slips=(Slip(fewest * 2, "ratio:2"),)),
        number("ch06-a5-days", section=COUNTING,
               prompt=f"A5: days to train on that many {chip.name} chips at 40% utilisation.",
               reference=days, unit="days", tolerance=days_tol,
               slips=(Slip(days / 365.25, slip_code(days / 365.25, days, days_tol, "days"), "in days."),)),
        number("ch06-a6-bytes-per-chip", section=COUNTING, prompt="A6: bytes per chip of that memory on 8960 chips.",
               reference=per_chip, unit="B", tolerance=per_chip_tol,
               slips=(Slip(no_weights, slip_code(no_weights, per_chip, per_chip_tol),
                           "weights and optimizer state take memory too."),
                      *(() if batch == MEMORY_BATCH else (
                          Slip((total - weights) / POD, slip_code((total - weights) / POD, per_chip, per_chip_tol),
                               "the bf16 weights take memory too: 2 bytes per parameter."),)))),
        number("ch06-a6-bytes-per-chip-12", section=COUNTING,
               prompt="A6: bytes per chip with 12 checkpoints per layer instead of 4.", reference=per_chip_12, unit="B",
               tolerance=tol_12,
               slips=(Slip(doubled_12, slip_code(doubled_12, per_chip_12, tol_12),
                           "bf16 checkpoints: 2 bytes per element."),
                      Slip(no_moments_12, slip_code(no_moments_12, per_chip_12, tol_12),
                           "the optimizer state takes memory too: 8 bytes per parameter."))))


def a7(batch: int, seq_len: int) -> tuple[Number | Choice, ...]:
    """A7-A8: pure FSDP is capped by the sequences in a batch; split inside sequences, a pod leaves each
    chip batch / 8960 tokens, which FSDP's three-axis bound judges."""
    ways = batch / seq_len
    per_chip = batch / POD
    rounded = batch / 2**20 * 1e6
    fsdp = "compute-bound" if per_chip > ALPHA / TORUS_AXES else "comms-bound"
    bounds = ("compute-bound", "comms-bound")
    return (
        number("ch06-a7-max-ways", section=SHARDING,
               prompt=f"A7: how many ways, at most, pure FSDP can split a {batch // 2**20} * 2**20-token batch of "
                      f"{seq_len}-token sequences without splitting sequences.", reference=ways, exact=True,
               slips=(Slip(ways / 2, "ratio:1/2", f"the sequences are {seq_len} tokens long."),
                      Slip(float(POD), slip_code(POD, ways, Tolerance.exact_count())))),
        number("ch06-a8-tokens-per-chip", section=SHARDING,
               prompt=f"A8: tokens per chip with FSDP over batch and sequence on 8960 chips, a {batch // 2**20} * 2**20"
                      "-token batch.",
               reference=per_chip, tolerance=ONE_PERCENT,
               slips=(Slip(rounded / POD, slip_code(rounded / POD, per_chip, ONE_PERCENT),
                           f"the batch is {batch // 2**20} * 2**20 tokens."),)),
        Choice(qid="ch06-a8-fsdp-bound", points=1, section=SHARDING,
               prompt="A8: is that FSDP (three axes) compute-bound or comms-bound?",
               reference=fsdp, options=bounds,
               slips=(Slip(next(o for o in bounds if o != fsdp), "wrong_option",
                           "compare with FSDP's three-axis bound."),)))


def a9(batch: int) -> tuple[Number | Choice, ...]:
    """A9: X_opt on a v5p pod for a batch, and the power-of-two mesh it rounds to."""
    x = math.sqrt(batch * POD * M_X / (M70.F * M_Y))
    mesh, other = pow2_mesh(x, POD)
    return (
        number("ch06-a9-x-opt", section=SHARDING,
               prompt=f"A9: X_opt for a {batch // 2**20} * 2**20-token batch on 8960 chips.", reference=x,
               tolerance=ONE_PERCENT,
               slips=(Slip(x / math.sqrt(2), "not_equal", "FSDP has two axes: M_X / M_Y = 2."),)),
        Choice(qid="ch06-a9-mesh", points=1, section=SHARDING,
               prompt="A9: FSDP ways x tensor-parallel ways for that batch, powers of two.",
               reference=mesh, options=("1024x8", "2048x4", "4096x2", "8192x1"),
               slips=(Slip(other, "wrong_option", "round X_opt to the nearest power of two (in log scale)."),)))


def mix_bound(chip: hw.TPU, F: float) -> float:
    """Part 5's FSDP + tensor-parallel per-chip bound on a chip's 3D torus (M_X = 2, M_Y = 1): (C/W)^2 / (M_X M_Y F)."""
    alpha = chip.bf16_flops_per_s / chip.ici_bidirectional_bytes_per_s
    return alpha**2 / (M_X * M_Y * F)


def a9_bound(chip: hw.TPU) -> tuple[Number, ...]:
    """A9: the FSDP + tensor-parallel per-chip bound for LLaMA 3-70B on a chip with a 3D torus."""
    bound = mix_bound(chip, M70.F)
    return (number("ch06-a9-mix-bound", section=SHARDING,
                   prompt=f"A9: the FSDP + tensor-parallel per-chip bound for LLaMA 3-70B on a {chip.name} 3D torus "
                          "(M_X = 2, M_Y = 1).",
                   reference=bound, tolerance=ONE_PERCENT,
                   slips=(Slip(4 * bound, "ratio:4", "the two collectives overlap."),)),)


def w1_mesh(x_opt: float) -> tuple[int, int]:
    """The split X x Y of a pod's 8960 chips (2**8 * 5 * 7, so no power-of-two mesh fills it) with Y a
    whole number from 4 to 32 and X nearest X_opt in log scale: 896 x 10 for the book's W1."""
    ys = [y for y in range(4, 33) if POD % y == 0]
    y = min(ys, key=lambda y: abs(math.log(POD / y / x_opt)))
    return POD // y, y


def w1(pods: int, batch: int) -> tuple[Number, ...]:
    """W1: LLaMA 3-70B over several pods, data parallel across them: tokens per chip, X_opt inside a
    pod, how far the nearest split of the pod is from compute-bound, and the days with and without that
    penalty."""
    pod_batch = batch / pods
    per_chip = pod_batch / POD
    x = math.sqrt(pod_batch * POD * M_X / (M70.F * M_Y))
    x_whole = math.sqrt(batch * POD * M_X / (M70.F * M_Y))
    mesh = w1_mesh(x)
    ratio = comm_ratio(pod_batch, *mesh, M70.F, ALPHA, M_X, M_Y)
    summed = comm_ratio_summed(pod_batch, *mesh, M70.F, ALPHA, M_X, M_Y)
    compute_days = A3_FLOPS / (pods * POD * PEAK * MFU) / DAY
    days = compute_days * max(1.0, ratio)
    one_pod, added = compute_days * pods, compute_days * (1 + ratio)
    size = f"{batch // 2**20} * 2**20-token batch"
    return (
        number("ch06-w1-tokens-per-chip", section=WORKED,
               prompt=f"W1: tokens per chip on {pods} v5p pods with a {size}.", reference=per_chip,
               tolerance=TWO_PERCENT, slips=(Slip(batch / POD, slip_code(batch / POD, per_chip)),)),
        number("ch06-w1-x-opt", section=WORKED, prompt="W1: X_opt inside one pod (DP across pods, M_X = 2, M_Y = 1).",
               reference=x, tolerance=TWO_PERCENT,
               slips=(Slip(x_whole, slip_code(x_whole, x), f"each pod has 1/{pods} of the batch."),)),
        number("ch06-w1-ratio", section=WORKED,
               prompt="W1: communication over compute time at the split of the pod nearest X_opt.",
               reference=ratio, tolerance=TWO_PERCENT,
               slips=(Slip(summed, slip_code(summed, ratio), "the collectives overlap: take the larger."),)),
        number("ch06-w1-compute-days", section=WORKED,
               prompt=f"W1: days on {pods} pods at 40% utilisation if compute-bound.",
               reference=compute_days, unit="days", tolerance=TWO_PERCENT,
               slips=(Slip(one_pod, slip_code(one_pod, compute_days)),)),
        number("ch06-w1-days", section=WORKED,
               prompt="W1: days at that split, with the step as long as the slower of compute and communication.",
               reference=days, unit="days", tolerance=TWO_PERCENT,
               slips=(Slip(added, slip_code(added, days), "they overlap: take the larger."),)))


def w2_plan(pods: int, batch: int, chip: hw.TPU) -> dict[str, float]:
    """W2's numbers for LLaMA 3.1-405B on ``pods`` pods of ``chip``: the tensor-parallel limit on one axis, the
    FSDP + TP bound, the smallest compute-bound batch, the days, and the bytes per chip (weights and optimizer
    state sharded inside a pod, checkpoints over every chip)."""
    pod = pod_chips(chip)
    chips_ = pods * pod
    bound = mix_bound(chip, M405.F)
    ckpt = ckpt_bytes(M405.D, batch, N_CKPT, M405.L)
    return dict(pod=pod, chips=chips_, bound=bound, tp_limit=M405.F * chip.ici_bidirectional_bytes_per_s
                / chip.bf16_flops_per_s, min_batch=bound * chips_,
                days=W2_FLOPS / (chips_ * chip.bf16_flops_per_s * MFU) / DAY,
                per_chip=STATE_BYTES * NOMINAL_405B / pod + ckpt / chips_,
                spread=STATE_BYTES * NOMINAL_405B / chips_ + ckpt / chips_)


def w2(pods: int, batch: int, chip: hw.TPU) -> tuple[Number, ...]:
    """W2: LLaMA 3.1-405B over several pods of a chip: its tensor-parallel limit and FSDP + TP bound there, the
    batch that keeps the pods compute-bound, the days, and the bytes per chip."""
    w = w2_plan(pods, batch, chip)
    min_batch, days, per_chip, spread = w["min_batch"], w["days"], w["per_chip"], w["spread"]
    no_weights = per_chip - BF16 * NOMINAL_405B / w["pod"]  # 0.6-6% below: refused at every choice
    per_chip_tol = refusing(per_chip, no_weights)
    one_pod = w["bound"] * w["pod"]
    return (
        number("ch06-w2-tp-limit", section=WORKED, prompt=f"W2: the largest tensor-parallel degree on one {chip.name} "
                                                           "axis.",
               reference=w["tp_limit"], tolerance=largest_degree(w["tp_limit"]),
               slips=(Slip(w["tp_limit"] / 2, "ratio:1/2"),)),
        number("ch06-w2-mix-bound", section=WORKED,
               prompt=f"W2: the FSDP + tensor-parallel per-chip bound on {chip.name} (M_X = 2, M_Y = 1).",
               reference=w["bound"], tolerance=TWO_PERCENT, slips=(Slip(4 * w["bound"], "ratio:4"),)),
        number("ch06-w2-min-batch", section=WORKED,
               prompt=f"W2: the smallest global batch (tokens) that keeps {pods} {chip.name} pods compute-bound.",
               reference=min_batch, tolerance=TWO_PERCENT,
               slips=(Slip(one_pod, slip_code(one_pod, min_batch), f"all {pods} pods' chips share the batch."),)),
        number("ch06-w2-days", section=WORKED, prompt=f"W2: days on {pods} pods at 40% utilisation.", reference=days,
               unit="days", tolerance=TWO_PERCENT, slips=(Slip(days * pods, slip_code(days * pods, days)),)),
        number("ch06-w2-bytes-per-chip", section=WORKED,
               prompt=f"W2: bytes per chip with a {batch // 2**20} * 2**20-token batch and 4 checkpoints per layer.",
               reference=per_chip, unit="B", tolerance=per_chip_tol,
               slips=(Slip(spread, slip_code(spread, per_chip, per_chip_tol),
                           "weights and optimizer state are copied in every pod."),
                      Slip(no_weights, slip_code(no_weights, per_chip, per_chip_tol),
                           "the bf16 weights take memory too: 2 bytes per parameter."))))


def w2_valid(pods: int, batch: int, chip: hw.TPU) -> bool:
    """Every v5p choice, and another 3D-torus chip at any listed number of pods where the batch keeps the pods
    compute-bound (the days at 40% utilisation assume it); the bytes per chip must fit in its HBM, and the weights
    must be more of them than 3-figure rounding hides (0.3% on 2 pods at the largest batch), so that leaving them
    out is refused."""
    w = w2_plan(pods, batch, chip)
    weights = BF16 * NOMINAL_405B / w["pod"]
    return ((chip == V5P or batch >= w["min_batch"]) and w["per_chip"] <= chip.hbm_bytes
            and weights > THREE_FIGURES.rtol * w["per_chip"])


CHAPTER = Chapter("ch06_applied_training", "Training LLaMA 3", (
    # 1. Parameters.
    Formula(qid="ch06-a1-params-formula", points=2, section=COUNTING,
            prompt="Parameters of a LLaMA-style model: gated MLP, grouped-query attention, separate input and "
                   "output embeddings, norms left out.",
            reference=PARAMS_FORMULA, symbols="L D F N K H V",
            slips=(Slip(m.params(L, D, F, N, N, H, V), "missing_symbol:K", "K heads of keys and values, not N."),
                   Slip(PARAMS_FORMULA - L * D * F, "term_extra", "a gated MLP has three D x F matrices."),
                   Slip(PARAMS_FORMULA + 2 * L * D + D, "lower_terms",
                        "the norms' scales are left out here, as the prose says: count the matrices only."))),
    vary("ch06-a1", a1, model=models(M70, m.LLAMA3_8B, M405)),
    # 2. FLOPs and time.
    number("ch06-a2-flops-per-token", section=COUNTING,
           prompt="A2: training FLOPs per token (use the nominal 70e9 parameters).", reference=A2_FLOPS,
           unit="FLOP", tolerance=ONE_PERCENT,
           slips=(Slip(A2_FLOPS / 3, "ratio:1/3", "the backward pass costs twice the forward."),)),
    vary("ch06-a2", a2, chip=chips(V5P, hw.TPU_V4P, hw.TPU_V5E, hw.TPU_V6E, hw.TPU7X)),
    number("ch06-a3-total-flops", section=COUNTING, prompt="A3: training FLOPs for 15e12 tokens.", reference=A3_FLOPS,
           unit="FLOP", tolerance=ONE_PERCENT, slips=(Slip(A3_FLOPS / 3, "ratio:1/3"),)),
    vary("ch06-a3", a3, chip=chips(V5P, hw.TPU_V4P, hw.TPU7X, hw.TPU_V6E), mfu=values(MFU, 0.5, 0.3)),
    # 3. Memory.
    vary("ch06-a5", a5, batch=values(MEMORY_BATCH, 2e6, 1e6, 3e6),
         chip=chips(V5P, hw.TPU_V4P, hw.TPU7X)),
    # 4. Sharding.
    vary("ch06-a7", a7, batch=values(BATCH, 2 * 2**20, 8 * 2**20), seq_len=values(SEQ_LEN, 8192, 2048)),
    vary("ch06-a9-bound", a9_bound, chip=chips(V5P, hw.TPU_V4P, hw.TPU7X)),
    vary("ch06-a9", a9, batch=values(BATCH, 2 * 2**20, 8 * 2**20, 16 * 2**20, 3 * 2**20)),
    Function(qid="ch06-cx2-comm-ratio", points=2, section=PART5_MIX,
             prompt="comm_ratio(B, X, Y, F, alpha, M_X, M_Y): communication over compute time of FSDP + TP.",
             reference=comm_ratio, probes=COMM_PROBES, output=Output("number", tolerance=Tolerance(rtol=1e-6)),
             slips=(Slip(comm_ratio_summed, "not_equal"),)),
    Program(qid="ch06-cx3-fsdp-tp-mlp", points=3, section=SHARDING,
            prompt="relu(x @ w_in) @ w_out on a (X=2, Y=4) mesh: batch and weights' D over X (FSDP), F over Y.",
            spec=MLP_SPEC, model=fsdp_tp_mlp,
            slips=(Slip(fsdp_tp_mlp_no_sum, "wrong_values",
                        "the second matmul sums over F, which is split over Y: each device holds only part of those "
                        "terms."),
                   Slip(fsdp_tp_mlp_gathers_all, "collectives:all-gather"))),
    # 5. Worked problem 1: four pods.
    vary("ch06-w1", w1, pods=values(W1_PODS, 2, 3, 6), batch=values(BATCH, 8 * 2**20)),
    # 6. Worked problem 2: LLaMA 3.1-405B.
    number("ch06-w2-params", section=WORKED,
           prompt=f"W2: LLaMA 3.1-405B's parameter count (public config){W2_COUNT.words}.",
           reference=W2_PARAMS, tolerance=W2_COUNT.tolerance,
           slips=(Slip(m.params(M405.L, M405.D, M405.F, M405.N, M405.N, M405.H, M405.V), "close"), *W2_COUNT.slips)),
    number("ch06-w2-flops-per-token", section=WORKED, prompt="W2: its training FLOPs per token.",
           reference=W2_FLOPS_PER_TOKEN, unit="FLOP", tolerance=ONE_PERCENT,
           slips=(Slip(W2_FLOPS_PER_TOKEN / 3, "ratio:1/3"),)),
    number("ch06-w2-total-flops", section=WORKED,
           prompt="W2: training FLOPs for 15e12 tokens (nominal 405e9 parameters).", reference=W2_FLOPS,
           unit="FLOP", tolerance=ONE_PERCENT, slips=(Slip(W2_FLOPS / 3, "ratio:1/3"),)),
    vary("ch06-w2", w2, valid=w2_valid, pods=values(W2_PODS, 4, 16, 12, 2),
         batch=values(W2_BATCH, 8 * 2**20, 32 * 2**20), chip=chips(V5P, hw.TPU_V4P, hw.TPU7X)),
    # Coding exercises.
    Function(qid="ch06-cx1-llama-budget", points=3, section=COUNTING,
             prompt="llama_budget(cfg, tokens, batch, chips, mfu, n_ckpt, hbm, peak): parameters, FLOPs, days, "
                    "memory, fewest chips, bytes per chip.",
             reference=llama_budget, probes=BUDGET_PROBES,
             output=tuple(Output("number", tolerance=Tolerance(rtol=1e-4)) for _ in range(6)),
             slips=(Slip(llama_budget_mha, "close"), Slip(llama_budget_no_optimizer, "close"))),
    Program(qid="ch06-cx4-multipod-grad", points=3, section=PART5_PODS,
            prompt="dW_in[D_X, F_Y] = In^T . (dOut . W_out^T), multiplied in that order, on a (Z=2 pods, X=2, Y=2) "
                   "mesh: DP across pods, FSDP over X, TP over Y.",
            spec=MULTIPOD_SPEC, model=multipod_grad,
            slips=(Slip(multipod_grad_one_pod, "partial_sum:Z"),
                   Slip(multipod_grad_allreduce, "collectives:all-gather,all-reduce"))),
    Program(qid="ch06-cx5-dp-loss-grad", points=3, section=PART5_DP,
            prompt="Data parallelism over 8 replicas: dW_in of the global-batch mean loss sum(mlp(x)^2) / 2, "
                   "replicated.",
            spec=DP_LOSS_SPEC, model=dp_loss_grad,
            slips=(Slip(dp_loss_grad_sums_means, "scaled:8",
                        "is the loss averaged per device and then summed, or a gradient psummed that autodiff "
                        "already summed (either is 8x)? The global batch's mean divides by the whole batch once: "
                        "add per-device sums and divide by B, or average (pmean) the per-device means."),
                   Slip(dp_loss_grad_averages_shares, "scaled:1/8"),
                   Slip(dp_loss_grad_gathers_batch, "collectives:all-gather"))),
    Formula(qid="ch06-cx6-weight-bytes", points=1, section=PART5_FSDP,
            prompt="Peak bytes per chip of a stack of L gated-MLP layers' bf16 weights (three D x F matrices each) "
                   "under FSDP over X chips, gathering one layer at a time: every layer's shard plus one whole "
                   "gathered layer.",
            reference=JIT_WEIGHT_BYTES, symbols="L D F X", counts="X",
            slips=(Slip(BF16 * 3 * L * D * F, "missing_symbol:X", "each chip keeps only 1/X of the layers it is "
                                                                   "not computing."),
                   Slip(BF16 * 3 * L * D * F / X, "term_missing", "the gathered layer is a whole extra copy."),
                   Slip(3 * D * F * (L / X + 1), "ratio:1/2", "bf16 is 2 bytes per element."))),
    Program(qid="ch06-cx6-fsdp-layers-step", points=3, section=PART5_FSDP,
            prompt="A training step of 16 relu layers, W[L, D_X, D] sharded FSDP-style over 8 devices: (loss, dW), "
                   f"in at most {STACK_BUDGET:,} bytes per device of results and temporaries.",
            spec=STACK_SPEC, model=fsdp_layers_step,
            slips=(Slip(fsdp_layers_step_keeps_gathered, "collectives:all-gather,all-reduce,reduce-scatter"),
                   Slip(fsdp_layers_step_gathers_all, "collectives:all-gather,all-reduce,reduce-scatter"),
                   Slip(fsdp_layers_step_local_mean, "scaled:8@dW"))),
    Formula(qid="ch06-cx7-step-bytes", points=1, section=PART5_MIX,
            prompt="Bytes per device of the FSDP + tensor-parallel MLP step on an X x Y mesh, in f32: its shards of "
                   "dW_in and dW_out, plus both weights gathered over X.",
            reference=STEP_BYTES, symbols="B D F X Y", counts="X Y",
            slips=(Slip(8 * D * F / Y, "missing_symbol:X", "the results count too: this device's shards of the two "
                                                           "gradients, D * F / (X * Y) each."),
                   Slip(STEP_BYTES / 2, "ratio:1/2", "f32 is 4 bytes per element."),
                   Slip(8 * D * F / (X * Y) + 8 * D * F, "ratio_symbols:X,Y",
                        "tensor parallelism keeps F split: a device gathers only its F/Y columns of each weight."))),
    Program(qid="ch06-cx7-budget-step", points=3, section=PART5_MIX,
            prompt="The FSDP + tensor-parallel MLP training step (loss, dW_in, dW_out) at the X x Y mesh you choose "
                   f"(X * Y = 8), holding at most {BUDGET_BYTES:,} bytes per device.",
            spec=BUDGET_SPEC, model=budget_step,
            hint="A device holds each weight gathered over X, D x F/Y of it: evaluate your CX7a formula at each "
                 "allowed shape, and choose the least tensor parallelism that fits.",
            slips=(Slip(budget_step_on_4x2, "memory"), Slip(budget_step_on_1x8, "mesh_choice:earns_half"),
                   Slip(budget_step_local_grads, "wrong_values@dW_in",
                        "each device's gradient covers only its own tokens: the devices that hold other tokens add "
                        "theirs in."),
                   Slip(budget_step_gathers_weights, "collectives:all-gather,all-reduce"))),
))
