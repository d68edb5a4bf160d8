"""Single-device references for program questions that are not one einsum: a transformer's blocks.

A program question states what its program computes. Where that is one contraction, the spec's einsum
says it. A block of a transformer (an MLP with its nonlinearity, attention with its softmax, a
gradient) is not one einsum, so the spec names one of the functions here instead (``reference``), and
its ``einsum`` field describes the computation in words for the messages.

Each is the block as the chapter's text defines it, on one device, in float64 numpy, so the judging
process needs no JAX. A block on one device is also what some function questions ask a student to write, so
these are answers: the package ships them for the self-check of program answers on a learner's machine (a known
limit, docs/security.md), and the grader's jail
denies this folder to every process that runs a student's code (``jail.isolation_paths``,
``tests/grading/test_grader_only_code.py``), as it denies ``solutions/``. Only the judge calls them in grading.
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


def relu_stack_train_step(x: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One training step's results for L relu layers h -> relu(h @ w[i]) * sqrt(2 / D), w[L, D, D]: the loss,
    mean over the batch of sum(out^2) / 2, and its gradient with respect to w, in that order. He's factor
    sqrt(2 / D) keeps activations of unit size through many layers of standard-normal weights, so a deep
    stack compares to float32 tolerances."""
    scale = np.sqrt(2.0 / x.shape[1])
    hs = [x]
    for layer in w:
        hs.append(np.maximum(hs[-1] @ layer, 0.0) * scale)
    g = hs[-1] / x.shape[0]  # d loss / d out
    dw = np.empty_like(w)
    for i in range(len(w) - 1, -1, -1):
        g = g * (hs[i + 1] > 0) * scale  # back through the relu and the factor
        dw[i] = hs[i].T @ g
        g = g @ w[i].T
    return np.asarray(np.sum(hs[-1] ** 2) / (2 * x.shape[0])), dw


def moe_top1(x: np.ndarray, logits: np.ndarray, w: np.ndarray) -> np.ndarray:
    """A mixture of experts with top-1 routing: token s of x[S, D] goes to the expert its router scores
    highest, argmax over e of logits[s, e], and comes back as x[s] @ w[e] ([S, F], w[E, D, F]). Random
    logits give each expert a different number of tokens, drawn afresh with every input."""
    return np.einsum("sd,sdf->sf", x, w[np.argmax(logits, axis=1)])


def speculative_decode(prompt: np.ndarray, w_target: np.ndarray, draft_len: int = 3,
                       new_tokens: int = 16) -> tuple[np.ndarray, np.ndarray]:
    """Greedy speculative decoding with a bigram model: after token t the target's logits are row t of
    w_target[V, V], and the draft's are that row rounded to the nearest half (a cheap low-precision copy,
    whose argmax ties go to the first index, as numpy's and jnp's do). Sequence b starts from token
    prompt[b] mod V (an integer operand may be negative). A round: the draft proposes ``draft_len`` tokens
    one after another; the target scores the current token and the proposals in one pass; the proposals
    that agree with the target's choices up to the first that does not are accepted, and the target's own
    token after them is emitted too. Rounds run until ``new_tokens`` are emitted; the result is those
    tokens [B, new_tokens], which are the target's greedy decoding exactly, and per sequence the proposals
    accepted over all its rounds (the last round's included, even those past ``new_tokens``)."""
    v = w_target.shape[0]
    w_draft = np.round(2 * w_target) / 2
    tokens = np.zeros((len(prompt), new_tokens))
    accepted = np.zeros(len(prompt))
    for b, first in enumerate(prompt):
        last, out = int(first) % v, []
        while len(out) < new_tokens:
            drafts = []
            for _ in range(draft_len):
                drafts.append(int(np.argmax(w_draft[drafts[-1] if drafts else last])))
            target = [int(np.argmax(w_target[t])) for t in (last, *drafts)]
            n = 0
            while n < draft_len and drafts[n] == target[n]:
                n += 1
            out += target[:n + 1]  # the n accepted proposals are target[:n]; then the target's own token
            accepted[b] += n
            last = target[n]
        tokens[b] = out[:new_tokens]
    return tokens, accepted


REFERENCES: dict[str, Callable[..., np.ndarray]] = {
    "mlp": mlp,
    "attention": attention,
    "mlp_loss_grad_w_in": mlp_loss_grad_w_in,
    "mlp_train_step": mlp_train_step,
    "decode_attention": decode_attention,
    "gqa_decode_step": gqa_decode_step,
    "gqa_prefill": gqa_prefill,
    "relu_stack": relu_stack,
    "speculative_decode": speculative_decode,
    "relu_stack_train_step": relu_stack_train_step,
    "moe_top1": moe_top1,
}
