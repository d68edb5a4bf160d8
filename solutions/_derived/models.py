"""Part 4's cost model of a transformer: parameters, FLOPs and memory, as the references use it.

Book: Part 4 "All the Transformer Math You Need to Know", https://jax-ml.github.io/scaling-book/transformers/

Notation (the book's): B batch (sequences), T query length, S key/value length, D model width,
F MLP width, L layers, N query heads, K key/value heads, H head width, G = N/K query heads per KV
head, V vocabulary, E experts per MoE layer, k experts each token uses.

Every formula is a plain function of its dimensions, so the same code gives a number for a config
and a sympy expression for ``course.symbols``: ``layer_params(D, F, N, K, H)`` is the formula a
chapter grades, and ``params_of(LLAMA3_70B)`` is its value for LLaMA 3-70B. The configurations
themselves are inputs and live in ``course.models`` (re-exported here, so a reference reads both
from one module); students are handed those and derive these formulas.

Conventions, each stated once:
- A decoder layer is pre-norm, with a gated MLP (three D x F matrices) and grouped-query
  attention (W_Q, W_O: D x NH; W_K, W_V: D x KH). MHA is K = N, MQA is K = 1.
- Parameter counts leave norms out unless ``norms`` (D-sized scale vectors per layer) is given:
  Part 4 counts one per layer, Parts 6 and 8 none (about 0.001% of a LLaMA-sized model).
- Embeddings: separate input and output V x D matrices unless ``tied``. The input embedding is a
  lookup (no FLOPs); only the output projection (unembedding) costs 2*D*V FLOPs per token.
- FLOPs: a matmul costs 2 x the product of its distinct dimensions forward and twice that backward
  (one matmul per operand gradient), so training costs 3 x forward. Attention without causal
  savings: Q.K^T and softmax.V cost 2*T*S*N*H FLOPs each per sequence, forward.
- Bytes: ``bpe`` is bytes per element (bf16 2, int8 and fp8 1, fp32 4).
"""

from __future__ import annotations

from typing import Any

from course.models import (  # noqa: F401  (re-exported: the references read configs and costs from one module)
    ADAM_BYTES,
    BOOK,
    CONFIGS,
    DEEPSEEK_V3,
    DEEPSEEK_V3_EXPERTS,
    DEEPSEEK_V3_EXPERTS_PER_TOKEN,
    LLAMA2_13B,
    LLAMA3_8B,
    LLAMA3_70B,
    LLAMA31_405B,
    PARAM_BYTES,
    PART4_Q1,
    PART7_MODEL,
    PART7_MOE,
    TRAIN_STATE_BYTES,
    Config,
    Run,
)

TRAIN_OVER_FORWARD = 3  # forward 2NPM + backward 4NPM per matmul (Part 4, "transformers/#forward-and-reverse-flops")


# --- parameters -----------------------------------------------------------------------------------

def mlp_params(D: Any, F: Any) -> Any:
    """Gated MLP: W_in, W_gate [D, F] and W_out [F, D] -> 3*D*F."""
    return 3 * D * F


def attention_params(D: Any, N: Any, K: Any, H: Any) -> Any:
    """W_Q [D, N, H], W_K and W_V [D, K, H], W_O [N, H, D] -> 2*D*(N + K)*H."""
    return 2 * D * (N + K) * H


def layer_params(D: Any, F: Any, N: Any, K: Any, H: Any, E: Any = 1, norms: Any = 0) -> Any:
    """One decoder layer: E expert MLPs (E = 1: dense), attention, ``norms`` D-sized scales.
    An MoE router (D*E) is left out: it is tiny next to the experts."""
    return E * mlp_params(D, F) + attention_params(D, N, K, H) + norms * D


def embedding_params(D: Any, V: Any, tied: bool = False) -> Any:
    """Input embedding and output projection, V x D each (one shared matrix when tied)."""
    return (1 if tied else 2) * D * V


def params(L: Any, D: Any, F: Any, N: Any, K: Any, H: Any, V: Any, E: Any = 1, tied: bool = False,
           norms: Any = 0) -> Any:
    """All parameters: L layers plus the embeddings."""
    return L * layer_params(D, F, N, K, H, E, norms) + embedding_params(D, V, tied)


def params_of(cfg: Config, norms: int = 0) -> int:
    """All parameters of a config (every expert of an MoE)."""
    return params(cfg.L, cfg.D, cfg.F, cfg.N, cfg.K, cfg.H, cfg.V, cfg.E, cfg.tied, norms)


def active_params_of(cfg: Config, norms: int = 0) -> int:
    """Parameters each token uses: k experts of E."""
    return params(cfg.L, cfg.D, cfg.F, cfg.N, cfg.K, cfg.H, cfg.V, cfg.k, cfg.tied, norms)


# --- FLOPs ----------------------------------------------------------------------------------------

def contraction_flops(*sizes: Any) -> Any:
    """2 x the product of every distinct dimension of both operands (batch and contracted counted once)."""
    out = 2
    for s in sizes:
        out = out * s
    return out


def mlp_flops(tokens: Any, D: Any, F: Any, k: Any = 1) -> Any:
    """Forward FLOPs of one layer's MLP (k experts per token in an MoE): 6*tokens*D*F*k."""
    return contraction_flops(tokens, D, F) * 3 * k


def qkvo_flops(tokens: Any, D: Any, N: Any, K: Any, H: Any) -> Any:
    """Forward FLOPs of the four attention projections: 4*tokens*D*(N + K)*H."""
    return 2 * tokens * attention_params(D, N, K, H)


def attention_flops(B: Any, T: Any, S: Any, N: Any, H: Any) -> Any:
    """Forward FLOPs of dot-product attention, Q.K^T then softmax.V: 4*B*T*S*N*H (no causal savings)."""
    return 2 * contraction_flops(B, T, S, N, H)


def unembed_flops(tokens: Any, D: Any, V: Any) -> Any:
    """Forward FLOPs of the output projection: 2*tokens*D*V."""
    return contraction_flops(tokens, D, V)


def layer_flops(B: Any, T: Any, D: Any, F: Any, N: Any, K: Any, H: Any, k: Any = 1, S: Any = None) -> Any:
    """Forward FLOPs of one decoder layer for B sequences of T tokens attending to S keys (S = T:
    self-attention). Norms and softmax are O(B*T*D) and O(B*T*S*N) and left out."""
    S = T if S is None else S
    return mlp_flops(B * T, D, F, k) + qkvo_flops(B * T, D, N, K, H) + attention_flops(B, T, S, N, H)


def forward_flops_per_token_of(cfg: Config, S: int = 0) -> int:
    """Forward FLOPs of one token attending to S keys: matmuls of the activated weights
    (the input embedding is a lookup) plus 4*S*N*H per layer of attention."""
    L, D, F, N, K, H = cfg.L, cfg.D, cfg.F, cfg.N, cfg.K, cfg.H
    return L * layer_flops(1, 1, D, F, N, K, H, cfg.k, S) + unembed_flops(1, D, cfg.V)


def train_flops_per_token_of(cfg: Config, T: int = 0) -> int:
    """Training FLOPs per token of sequences of T tokens (self-attention, no causal savings)."""
    return TRAIN_OVER_FORWARD * forward_flops_per_token_of(cfg, T)


def train_flops(active_params: Any, tokens: Any) -> Any:
    """The rule of thumb: 6 FLOPs per (activated) parameter per token (attention left out)."""
    return 2 * TRAIN_OVER_FORWARD * active_params * tokens


def utilisation(active_params: Any, tokens: Any, chip_hours: Any, peak_flops_per_s: Any) -> Any:
    """Fraction of the chips' peak a training run used: 6*P*tokens over chip-seconds x peak."""
    return train_flops(active_params, tokens) / (chip_hours * 3600 * peak_flops_per_s)


# --- memory ---------------------------------------------------------------------------------------

def kv_bytes_per_token(L: Any, K: Any, H: Any, bpe: Any = 2) -> Any:
    """KV cache per token: a key and a value of K*H elements in each of L layers: 2*L*K*H*bpe."""
    return 2 * L * K * H * bpe


def kv_bytes_per_token_of(cfg: Config, bpe: int = 2) -> int:
    """A config's KV cache per token."""
    return kv_bytes_per_token(cfg.L, cfg.K, cfg.H, bpe)


def saved_per_token(policy: str, D: Any, F: Any = None, N: Any = None, K: Any = None, H: Any = None) -> Any:
    """Elements each layer keeps per token for the backward pass, under a checkpointing policy:

    - ``"everything"``: every intermediate, about 20 D-sized tensors (Part 4's rough count);
    - ``"block"``: only the layer's input (recompute the whole layer in the backward pass);
    - ``"dots"``: the outputs of the seven big matmuls, Q (N*H), K and V (K*H each), the attention
      output projection (D), MLP up and gate (F each) and down (D);
    - ``"mlp_dots"``: the three MLP matmul outputs only, D + 2*F (Part 5's count).
    """
    sizes = {"everything": lambda: 20 * D, "block": lambda: D,
             "dots": lambda: N * H + 2 * K * H + 2 * D + 2 * F, "mlp_dots": lambda: D + 2 * F}
    return sizes[policy]()


def activation_bytes(tokens: Any, L: Any, saved: Any, bpe: Any = 2) -> Any:
    """Checkpointed activations for one batch: ``saved`` elements per token per layer, bpe bytes each."""
    return bpe * tokens * L * saved


def recompute_flops(policy: str, B: Any, T: Any, D: Any, F: Any, N: Any, K: Any, H: Any) -> Any:
    """Forward FLOPs per layer redone in the backward pass under a checkpointing policy (``"dots"``
    recomputes the two attention matmuls; elementwise work is left out)."""
    if policy == "everything":
        return 0
    if policy == "dots":
        return attention_flops(B, T, T, N, H)
    if policy == "block":
        return layer_flops(B, T, D, F, N, K, H)
    raise KeyError(policy)


# --- intensity ------------------------------------------------------------------------------------

def attention_intensity(T: Any, S: Any, G: Any) -> Any:
    """FLOPs per byte of bf16 attention (read Q, K, V, write O): T*S*G / (T*G + S)."""
    return T * S * G / (T * G + S)


def moe_critical_batch(E: Any, k: Any, chip_intensity: Any, weight_bpe: Any = 1) -> Any:
    """Tokens per MoE matmul above which it is compute-bound: all E experts' weights are loaded,
    but each token only uses k of them, so 2*B*k*D*F FLOPs over E*D*F*weight_bpe bytes."""
    return chip_intensity * E * weight_bpe / (2 * k)


# --- runs -----------------------------------------------------------------------------------------

# Part 6: LLaMA 3-70B trained on 15T tokens in batches of 4 * 2**20 tokens (1024 sequences of 4096).
# Here, not in course.models: its parameter count is an answer of Chapters 5 to 8.
LLAMA3_70B_RUN = Run("LLaMA 3-70B pre-training", active_params=params_of(LLAMA3_70B), tokens=15e12,
                     batch_tokens=4 * 2**20, seq_len=4096, source=BOOK + "applied-training/")
