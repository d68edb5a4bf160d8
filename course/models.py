"""Transformer configurations: the model dimensions the chapters hand to students.

Book: Part 4 "All the Transformer Math You Need to Know", https://jax-ml.github.io/scaling-book/transformers/

Notation (the book's): B batch (sequences), T query length, S key/value length, D model width,
F MLP width, L layers, N query heads, K key/value heads, H head width, G = N/K query heads per KV
head, V vocabulary, E experts per MoE layer, k experts each token uses.

This module holds inputs only: a config's dimensions, and the book's quoted training runs. What
the chapters ask students to derive from them (parameter counts, FLOPs, KV-cache bytes, ...) is
deliberately not here: a library that computed it would answer the questions (docs/architecture.md). The
reference solutions derive them in ``solutions/_derived/models.py``; a notebook that needs such a
number after its question states it, or computes it in the cell from these dimensions.

Conventions the chapters state with these configs: a decoder layer is pre-norm, with a gated MLP
(three D x F matrices) and grouped-query attention (MHA is K = N, MQA is K = 1); separate input and
output embeddings unless ``tied``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

BOOK = "https://jax-ml.github.io/scaling-book/"

PARAM_BYTES = 2  # bf16 weights
ADAM_BYTES = 8  # two fp32 moments per parameter
TRAIN_STATE_BYTES = PARAM_BYTES + ADAM_BYTES  # Part 5: "10 bytes per parameter" (gradients not kept)


# --- configurations -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Config:
    """A decoder-only transformer in the book's symbols; E, k for mixture-of-experts layers."""

    name: str
    L: int
    D: int
    F: int
    N: int
    K: int
    H: int
    V: int
    source: str
    E: int = 1
    k: int = 1
    tied: bool = False

    @property
    def G(self) -> int:
        """Query heads per key/value head: a dimension of the book's notation, not a derived answer."""
        return self.N // self.K

    def dims(self) -> dict[str, int]:
        """The symbols' values, e.g. ``expr.subs({symbol(n): v for n, v in cfg.dims().items()})``."""
        return {n: getattr(self, n) for n in ("L", "D", "F", "N", "K", "H", "V", "E", "k")}

    def with_(self, **changes: Any) -> Config:
        """A variant, e.g. the same model as an MoE: ``cfg.with_(E=16, k=2, name=...)``."""
        return replace(self, **changes)


HF = "https://huggingface.co/"
LLAMA3_8B = Config("LLaMA 3-8B", L=32, D=4096, F=14_336, N=32, K=8, H=128, V=128_256,
                   source=HF + "meta-llama/Meta-Llama-3-8B/blob/main/config.json (not printed in the book)")
LLAMA3_70B = Config("LLaMA 3-70B", L=80, D=8192, F=28_672, N=64, K=8, H=128, V=128_256,
                    source=BOOK + "applied-training/ (config table)")
LLAMA31_405B = Config("LLaMA 3.1-405B", L=126, D=16_384, F=53_248, N=128, K=8, H=128, V=128_256,
                      source=HF + "meta-llama/Llama-3.1-405B/blob/main/config.json (not printed in the book)")
LLAMA2_13B = Config("LLaMA 2-13B", L=40, D=5120, F=13_824, N=40, K=40, H=128, V=32_000,
                    source=BOOK + "training/ (worked problems) and inference/ (LLaMA-2 13B example)")
# Part 4, question 1: D = 4096, F = 4D, V = 32,000, L = 64, MHA with N*H = D. Only N*H enters any
# count, so the split into 32 heads of 128 is a choice, not the book's.
PART4_Q1 = Config("Part 4 Q1 model", L=64, D=4096, F=16_384, N=32, K=32, H=128, V=32_000,
                  source=BOOK + "transformers/#worked-problems (question 1)")
# Part 7's worked problems: a GQA model with one (tied) embedding matrix, and its MoE variant.
PART7_MODEL = Config("Part 7 worked-problem model", L=64, D=4096, F=16_384, N=32, K=8, H=256, V=32_128, tied=True,
                     source=BOOK + "inference/#worked-problems")
PART7_MOE = PART7_MODEL.with_(name="Part 7 worked-problem model as an MoE", E=16, k=2,
                              source=BOOK + "inference/#worked-problems (question 5)")

CONFIGS = {c.name: c for c in (LLAMA3_8B, LLAMA3_70B, LLAMA31_405B, LLAMA2_13B, PART4_Q1, PART7_MODEL, PART7_MOE)}


@dataclass(frozen=True)
class Run:
    """A training run as the book quotes it."""

    name: str
    active_params: float
    tokens: float
    source: str
    chip_hours: float | None = None
    batch_tokens: float | None = None
    seq_len: int | None = None


# Part 4, question 7, quoting the DeepSeek-V3 report: 256 routed experts, 8 per token.
DEEPSEEK_V3 = Run("DeepSeek-V3", active_params=37e9, tokens=14.8e12, chip_hours=2.79e6,
                  source=BOOK + "transformers/#worked-problems (question 7)")
DEEPSEEK_V3_EXPERTS, DEEPSEEK_V3_EXPERTS_PER_TOKEN = 256, 8
