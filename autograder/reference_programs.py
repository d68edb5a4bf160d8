"""Single-device references for program questions that are not one einsum: a transformer's blocks.

A program question states what its program computes. Where that is one contraction, the spec's einsum
says it. A block of a transformer (an MLP with its nonlinearity, attention with its softmax, a
gradient) is not one einsum, so the spec names one of the functions here instead (``reference``), and
its ``einsum`` field describes the computation in words for the messages.

They are public, like the spec: each is the block as the chapter's text defines it, on one device, in
float64 numpy, so the judging process needs no JAX and the self-check and the grader agree on what
is right. They answer no question: the exercise is to shard the computation over a mesh, with the
collectives the chapter asks for, and the grader checks those, not only the numbers.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


def _softmax(scores: np.ndarray, axis: int = -1) -> np.ndarray:
    shifted = np.exp(scores - scores.max(axis=axis, keepdims=True))
    return shifted / shifted.sum(axis=axis, keepdims=True)


def mlp(x: np.ndarray, w_in: np.ndarray, w_out: np.ndarray) -> np.ndarray:
    """x[B, D] -> relu(x @ w_in[D, F]) @ w_out[F, D]: a transformer's MLP block (relu keeps it exact to
    compare; the book's gated forms shard the same way)."""
    return np.maximum(x @ w_in, 0.0) @ w_out


def attention(x: np.ndarray, w_q: np.ndarray, w_k: np.ndarray, w_v: np.ndarray, w_o: np.ndarray) -> np.ndarray:
    """Multi-head self-attention of x[B, T, D] without a mask: w_q, w_k, w_v [D, N, H], w_o [N, H, D];
    scores scaled by 1/sqrt(H), softmax over the keys."""
    q, k, v = (np.einsum("btd,dnh->btnh", x, w) for w in (w_q, w_k, w_v))
    scores = np.einsum("btnh,bsnh->bnts", q, k) / np.sqrt(q.shape[-1])
    return np.einsum("bnts,bsnh,nhd->btd", _softmax(scores), v, w_o)


def mlp_loss_grad_w_in(x: np.ndarray, w_in: np.ndarray, w_out: np.ndarray) -> np.ndarray:
    """The gradient with respect to w_in of the mean over the batch of sum(mlp(x)^2) / 2: what one step of
    data-parallel training must agree on across devices (the mean is over the *global* batch)."""
    h = x @ w_in
    y = np.maximum(h, 0.0) @ w_out
    dy = y / x.shape[0]
    dh = (dy @ w_out.T) * (h > 0)
    return x.T @ dh


def mlp_train_step(x: np.ndarray, w_in: np.ndarray, w_out: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One training step's results for the MLP: the loss, mean over the global batch of sum(mlp(x)^2) / 2, and
    its gradients with respect to w_in and w_out (a program with several results names them in this order)."""
    h = x @ w_in
    a = np.maximum(h, 0.0)
    y = a @ w_out
    dy = y / x.shape[0]
    dh = (dy @ w_out.T) * (h > 0)
    return np.asarray(np.sum(y**2) / (2 * x.shape[0])), x.T @ dh, a.T @ dy


def decode_attention(q: np.ndarray, k_new: np.ndarray, v_new: np.ndarray, k_cache: np.ndarray,
                     v_cache: np.ndarray) -> np.ndarray:
    """One decode step's attention with grouped key/value heads, as LLaMA 3 serves it: the new token's
    queries q[B, N, H] attend to the S cached positions k_cache, v_cache [B, S, K, H] and to the token's
    own key and value k_new, v_new [B, K, H], appended after them. Query head n reads key/value head
    n // (N / K); scores are scaled by 1/sqrt(H), softmax over the S + 1 positions; the result is [B, N, H].
    Raises ValueError where N is not a multiple of K (blocks that do not compose)."""
    b, n, h = q.shape
    k = k_cache.shape[2]
    if n % k or k_new.shape != (b, k, h) or v_new.shape != (b, k, h):
        raise ValueError(f"{n} query heads over {k} key/value heads, or a new key/value of the wrong shape")
    keys = np.concatenate([k_cache, k_new[:, None]], axis=1)  # [B, S + 1, K, H]
    values = np.concatenate([v_cache, v_new[:, None]], axis=1)
    grouped = q.reshape(b, k, n // k, h)  # [B, K, G, H]: head n = k * G + g
    scores = np.einsum("bkgh,bskh->bkgs", grouped, keys) / np.sqrt(h)
    return np.einsum("bkgs,bskh->bkgh", _softmax(scores), values).reshape(b, n, h)


def gqa_decode_step(x: np.ndarray, k_cache: np.ndarray, v_cache: np.ndarray, w_q: np.ndarray, w_k: np.ndarray,
                    w_v: np.ndarray, w_o: np.ndarray) -> np.ndarray:
    """A decoder block's attention for one decode step, projections included (the capstone's C2): x[B, D]
    is each sequence's newest token, k_cache and v_cache [B, S, K, H] the keys and values of the tokens
    before it; w_q [D, N, H], w_k and w_v [D, K, H], w_o [N, H, D]. The token's own key and value join
    the cache (``decode_attention``) and the heads' outputs are projected back to [B, D]: with the heads
    split over a mesh axis, that projection is the step's one sum across devices."""
    q, k_new, v_new = (np.einsum("bd,dnh->bnh", x, w) for w in (w_q, w_k, w_v))
    return np.einsum("bnh,nhd->bd", decode_attention(q, k_new, v_new, k_cache, v_cache), w_o)


def gqa_prefill(x: np.ndarray, w_q: np.ndarray, w_k: np.ndarray, w_v: np.ndarray, w_o: np.ndarray) -> np.ndarray:
    """Causal self-attention of a prompt x[B, T, D] with grouped key/value heads, weights as in
    ``gqa_decode_step`` (a decoder's prefill): token t attends to tokens 0..t, which is one decode step
    per position over the keys and values of the tokens before it, so prefill and decode agree."""
    q, k, v = (np.einsum("btd,dnh->btnh", x, w) for w in (w_q, w_k, w_v))
    heads = [decode_attention(q[:, t], k[:, t], v[:, t], k[:, :t], v[:, :t]) for t in range(x.shape[1])]
    return np.einsum("btnh,nhd->btd", np.stack(heads, axis=1), w_o)


def relu_stack(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """x[B, D] through L relu layers in turn, h -> relu(h @ w[i]) with w[L, D, D]: the layers a pipeline
    splits into stages (one stage per layer or per run of layers), so its output, however the
    microbatches are scheduled and passed between stages, is this."""
    for layer in w:
        x = np.maximum(x @ layer, 0.0)
    return x


REFERENCES: dict[str, Callable[..., np.ndarray]] = {
    "mlp": mlp,
    "attention": attention,
    "mlp_loss_grad_w_in": mlp_loss_grad_w_in,
    "mlp_train_step": mlp_train_step,
    "decode_attention": decode_attention,
    "gqa_decode_step": gqa_decode_step,
    "gqa_prefill": gqa_prefill,
    "relu_stack": relu_stack,
}
