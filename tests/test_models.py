"""The cost model of Part 4 (``solutions._derived.models``) on the configurations of ``course.models``
reproduces the syllabus's worked numbers.

Each expected value below is a number the syllabus pins for Chapters 4-8 (book answers recomputed from
the configs); the chapter that uses it is named beside it.
"""

import pytest
import sympy as sp

from course.symbols import B, D, F, H, K, N, T, symbols
from solutions._derived import models as m


@pytest.mark.parametrize(("cfg", "expected"), [
    (m.LLAMA3_8B, 8_029_995_008),        # ch08 W2
    (m.LLAMA3_70B, 70_552_387_584),      # ch06 A1
    (m.LLAMA2_13B, 13_015_449_600),      # ch05 Q1, ch07 E5
    (m.PART7_MODEL, 18_385_207_296),     # ch07 Q1 (tied embedding)
    (m.PART7_MOE, 211_658_735_616),      # ch07 Q5, all experts
], ids=lambda x: getattr(x, "name", str(x)))
def test_parameter_counts(cfg, expected):
    assert m.params_of(cfg) == expected


def test_part4_q1_counts_one_norm_per_layer():
    assert m.params_of(m.PART4_Q1, norms=1) == 17_442_275_328  # ch04 Q1
    assert m.params_of(m.PART4_Q1, norms=1) - m.params_of(m.PART4_Q1) == m.PART4_Q1.L * m.PART4_Q1.D


def test_llama3_70b_breakdown():
    c = m.LLAMA3_70B  # ch06 A1: MLP, attention and vocabulary separately
    assert c.L * m.mlp_params(c.D, c.F) == 56_371_445_760
    assert c.L * m.attention_params(c.D, c.N, c.K, c.H) == 12_079_595_520
    assert m.embedding_params(c.D, c.V) == 2_101_346_304


def test_moe_activated_parameters():
    assert m.active_params_of(m.PART7_MOE) == 31_270_109_184  # ch07 Q5
    assert m.params_of(m.PART7_MODEL) == m.active_params_of(m.PART7_MODEL)


@pytest.mark.parametrize(("cfg", "bpe", "expected"), [
    (m.PART4_Q1, 1, 524_288),      # ch04 Q1
    (m.PART7_MODEL, 1, 262_144),   # ch07 Q1
    (m.LLAMA3_70B, 1, 163_840),    # ch08 IQ1
    (m.LLAMA3_70B, 2, 327_680),    # ch08 IQ5 (bf16)
    (m.LLAMA3_8B, 1, 65_536),      # ch08 W2
    (m.LLAMA31_405B, 1, 258_048),  # ch08 W3
], ids=str)
def test_kv_bytes_per_token(cfg, bpe, expected):
    assert m.kv_bytes_per_token_of(cfg, bpe) == expected


def test_kv_cache_examples():
    assert m.kv_bytes_per_token(64, 64, 128, bpe=1) * 8192 == 8 * 2**30  # ch04 E5
    assert m.kv_bytes_per_token_of(m.LLAMA2_13B, 2) * 8192 == 6_710_886_400  # ch07 E7


def test_activation_memory():
    tokens, L, D = 4e6, 64, 8192  # ch04 E4
    assert m.activation_bytes(tokens, L, m.saved_per_token("everything", D)) == pytest.approx(8.389e13, rel=1e-3)
    assert m.activation_bytes(tokens, L, m.saved_per_token("block", D)) == pytest.approx(4.194e12, rel=1e-3)
    assert m.saved_per_token("dots", D, 4 * D, 64, 64, D // 64) == 13 * D  # MHA, F = 4D
    c = m.LLAMA2_13B  # ch05 Q2: the three MLP outputs, 16e6 tokens
    assert m.activation_bytes(16e6, c.L, m.saved_per_token("mlp_dots", c.D, c.F)) == pytest.approx(4.194e13, rel=1e-3)
    c = m.LLAMA3_70B  # ch06 A5: four D-sized checkpoints per layer, 4e6 tokens
    assert m.activation_bytes(4e6, c.L, 4 * c.D) == pytest.approx(2.097e13, rel=1e-3)
    total = m.TRAIN_STATE_BYTES * m.params_of(c) + m.activation_bytes(4e6, c.L, 4 * c.D)
    assert total == pytest.approx(2.167e13, rel=2e-3)


def test_layer_flops_are_the_books_formulas():
    B_, T_, D_, F_, N_, K_, H_ = symbols("B T D F N K H")
    fwd = m.layer_flops(B_, T_, D_, F_, N_, K_, H_)
    assert sp.expand(fwd - (6 * B * T * D * F + 4 * B * T * D * (N + K) * H + 4 * B * T**2 * N * H)) == 0
    train = m.TRAIN_OVER_FORWARD * fwd
    matmuls = train - m.TRAIN_OVER_FORWARD * m.attention_flops(B, T, T, N, H)
    ratio = (train - matmuls) / matmuls
    assert sp.simplify(ratio.subs({F: 4 * D, K: N}).subs(H, D / N) - T / (8 * D)) == 0  # ch04 E3
    assert m.recompute_flops("dots", B, T, D, F, N, K, H) == 4 * B * T**2 * N * H  # ch04 Q6
    assert m.recompute_flops("everything", B, T, D, F, N, K, H) == 0
    assert m.recompute_flops("block", B, T, D, F, N, K, H) == fwd


def test_training_flops_and_utilisation():
    assert m.train_flops(70e9, 15e12) == pytest.approx(6.3e24)  # ch06 A3
    ds = m.DEEPSEEK_V3  # ch04 Q7, dense FP8 peak of an H800
    assert m.utilisation(ds.active_params, ds.tokens, ds.chip_hours, 1.513e15) == pytest.approx(0.2162, rel=1e-3)


def test_flops_per_token():
    c = m.LLAMA31_405B  # ch08 W1: about 2 x 405e9 forward FLOPs per token, attention ignored
    assert m.forward_flops_per_token_of(c) == pytest.approx(8.1e11, rel=0.01)
    c = m.PART7_MOE  # ch07 Q5: 2 x activated parameters, less the input embedding (a lookup)
    assert m.forward_flops_per_token_of(c) == 2 * (m.active_params_of(c) - c.V * c.D) + 2 * c.D * c.V
    assert m.train_flops_per_token_of(c, 0) == 3 * m.forward_flops_per_token_of(c)
    attention = m.train_flops_per_token_of(m.LLAMA3_70B, 4096) - m.train_flops_per_token_of(m.LLAMA3_70B, 0)
    assert attention == 12 * 4096 * 64 * 128 * 80


def test_intensities():
    v5e = 1.97e14 / 8.2e11
    assert m.moe_critical_batch(256, 8, v5e) == pytest.approx(3843.9, rel=1e-4)  # ch04 Q8
    assert m.moe_critical_batch(16, 2, v5e, weight_bpe=2) == pytest.approx(1921.95, rel=1e-4)  # ch07 Q5
    T_, S_, G_ = symbols("T S G")
    assert sp.simplify(m.attention_intensity(T_, T_, 1) - T_ / 2) == 0  # ch07 E3: prefill MHA
    assert sp.limit(m.attention_intensity(1, S_, G_), S_, sp.oo) == G_  # ch04 Q4: decode


def test_contraction_flops_match_xla():
    import jax
    import jax.numpy as jnp

    x, y = jax.random.normal(jax.random.key(0), (2, 3, 4, 5)), jax.random.normal(jax.random.key(1), (2, 5, 6))
    cost = jax.jit(lambda a, b: jnp.einsum("gijk,gkl->gijl", a, b)).lower(x, y).compile().cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    assert cost["flops"] == m.contraction_flops(2, 3, 4, 5, 6)


def test_configs_are_data_with_sources():
    assert set(m.CONFIGS) >= {"LLaMA 3-8B", "LLaMA 3-70B", "LLaMA 3.1-405B", "LLaMA 2-13B"}
    for c in m.CONFIGS.values():
        assert c.source and c.N % c.K == 0 and c.G * c.K == c.N
        assert c.dims()["D"] == c.D
    variant = m.LLAMA3_8B.with_(name="8B as an MoE", E=8, k=2)
    assert m.params_of(variant) > m.params_of(m.LLAMA3_8B) and m.LLAMA3_8B.E == 1
    assert m.LLAMA3_70B_RUN.batch_tokens / m.LLAMA3_70B_RUN.seq_len == 1024  # ch06 A7
