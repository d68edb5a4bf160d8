"""The inference cost model of Parts 7 and 8 (``solutions._derived.inference``) reproduces the syllabus's
worked numbers, gives the book's formulas on symbols, and behaves as a roofline should; the plots of
``course.inference`` draw the same model.

Each expected value is a number the syllabus pins for Chapters 7 and 8 (the chapter and label beside it).
"""

import math

import numpy as np
import pytest
import sympy as sp

from course import hardware as hw
from course import inference as course_inference
from course.symbols import B, C, D, F, N, S, T, W, W_hbm, W_ici, symbol
from solutions._derived import hardware as dhw
from solutions._derived import inference as inf
from solutions._derived import models as m

V5E = hw.TPU_V5E
C16, C8, W5 = V5E.bf16_flops_per_s, V5E.int8_ops_per_s, V5E.hbm_bytes_per_s
pytestmark = [pytest.mark.ch07, pytest.mark.ch08]


def test_critical_batch_per_dtype():
    assert inf.critical_batch(C16, W5) == pytest.approx(240.24, rel=1e-4)  # ch07 E1, ch08 IQ4
    assert inf.critical_batch(C16, W5, 1) == pytest.approx(120.12, rel=1e-4)  # int8 weights, bf16 math
    assert inf.critical_batch(C8, W5, 1) == pytest.approx(240.24, rel=1e-4)  # int8 weights and math
    b_w = symbol("b_w")
    assert sp.simplify(inf.critical_batch(C, W_hbm, b_w) - C * b_w / (2 * W_hbm)) == 0


def test_attention_intensity():
    assert sp.simplify(inf.attention_intensity(T, S) - S * T / (S + T)) == 0
    assert sp.simplify(inf.attention_intensity(T, T) - T / 2) == 0  # prefill: ch07 E3
    assert sp.limit(inf.attention_intensity(1, S), S, sp.oo) == 1  # decode: ch07 E4


@pytest.mark.parametrize(("batch", "expected"), [(4, 2.536e-3), (256, 20.86e-3)])
def test_pop_quiz(batch, expected):
    """ch07 PQ1: 30e9 int8 parameters, 16 v5e, 1e5 B of cache per token, 8k context."""
    step = inf.decode_step_s(batch, 1e5 * 8192, 30e9, 30e9, 16, C16, W5)
    assert step == pytest.approx(expected, rel=2e-3)


def test_step_is_memory_bound_below_the_critical_batch():
    args = dict(kv_bytes_per_seq=1e9, weight_bytes=30e9, n_chips=16, hbm_bytes_per_s=W5)
    crit = inf.critical_batch(C16, W5, 1)  # int8 weights
    for b in (1, 16, math.floor(crit)):
        assert inf.decode_step_s(b, param_count=30e9, flops_per_s=C16, **args) == pytest.approx(
            inf.decode_step_memory_s(b, **args))
    for b in (math.ceil(crit) + 1, 400):
        assert inf.decode_step_s(b, param_count=30e9, flops_per_s=C16, **args) > inf.decode_step_memory_s(b, **args)


def test_step_on_symbols_is_the_books_formula():
    P_, KV, Wb, n = sp.symbols("P_ KV Wb n", positive=True)
    step = inf.decode_step_s(B, KV, Wb, P_, n, C, W)
    assert step == B * KV / (n * W) + sp.Max(2 * B * P_ / (n * C), Wb / (n * W))


def test_llama2_13b_tables():
    """ch07 E8, first and last cells of each table (8 v5e chips, bf16)."""
    c = m.LLAMA2_13B
    for kv_heads, (first, last) in ((40, (4.98e-3, 249.09e-3)), (8, (4.17e-3, 52.99e-3))):
        kv = inf.kv_bytes_per_sequence(c.with_(K=kv_heads), 8192, 2)
        p = m.params_of(c)
        steps = [inf.decode_step_s(b, kv, 2 * p, p, 8, C16, W5) for b in (1, 240)]
        assert steps == [pytest.approx(first, rel=5e-3), pytest.approx(last, rel=5e-3)]
        assert inf.tokens_per_s(240, steps[1]) > inf.tokens_per_s(1, steps[0])


def test_memory_fit():
    pm = m.PART7_MODEL  # ch07 Q2: 7 sequences of 128,000 tokens, 56 with one KV head
    assert inf.max_batch(16e9, 16, m.params_of(pm), inf.kv_bytes_per_sequence(pm, 128_000, 1)) == 7
    assert inf.max_batch(16e9, 16, m.params_of(pm), inf.kv_bytes_per_sequence(pm.with_(K=1), 128_000, 1)) == 56
    assert inf.max_batch(16e9, 2, 70e9, 1e9) == 0  # the weights alone do not fit
    assert inf.min_chips(70e9 + 1.2885e12) == pytest.approx(84.9, rel=1e-3)  # ch08 IQ1
    assert [inf.smallest_slice(b) for b in (35e9, 70e9, 1.1295e11, 140e9, 1.369e11)] == [
        "2x2", "4x2", "4x2", "4x4", "4x4"]  # ch08 IQ5, IQ2, W2
    with pytest.raises(ValueError):
        inf.smallest_slice(1e13)


def test_slices_are_legal_v5e_topologies():
    assert all(n == math.prod(int(a) for a in name.split("x")) for name, n in inf.V5E_SLICES.items())
    assert max(inf.V5E_SLICES.values()) == dhw.pod_chips(V5E)


def test_full_hbm_step_and_queries():
    assert inf.hbm_full_step_s() == pytest.approx(19.51e-3, rel=1e-3)  # ch08 IQ6
    assert inf.queries_per_s_per_chip(43, inf.hbm_full_step_s(), 512, 8) == pytest.approx(0.538, rel=2e-3)  # IQ7
    assert inf.prefill_s(70e9, 8192, 16, C16, inf.PREFILL_MFU) == pytest.approx(0.9096, rel=1e-3)  # IQ10


def test_flops_per_dollar():
    """ch08 E1."""
    got = [inf.flops_per_dollar(hw.by_name(n).bf16_flops_per_s, p) for n, p in hw.PRICE_USD_PER_CHIP_HOUR.items()]
    assert got == [pytest.approx(v, rel=2e-3) for v in (3.30e17, 3.934e17, 5.91e17)]


def test_sharding_limits():
    assert inf.ici_intensity() == pytest.approx(2188.9, rel=1e-4)
    assert inf.hbm_over_ici() == pytest.approx(9.11, rel=1e-3)  # the book rounds it to 8
    assert inf.tp_limit_compute(16_384, inf.ici_intensity()) == pytest.approx(7.49, rel=2e-3)  # ch07 Q4
    assert inf.tp_limit_compute(28_672, inf.ici_intensity(), 2) == pytest.approx(26.2, rel=2e-3)  # ch08 IQ3
    assert inf.tp_limit_memory(16_384, 32, inf.BETA_BOOK) == 64  # ch07 E9
    assert inf.tp_limit_memory(28_672, 64, inf.BETA_BOOK) == 56  # ch08 IQ9
    assert sp.simplify(inf.tp_limit_memory(F, B, W_hbm / W_ici) - F * W_ici / (B * W_hbm)) == 0


def test_megatron_times():
    """ch08 IQ9: bf16 LLaMA 3-70B, batch 64, 32-way."""
    c = m.LLAMA3_70B
    t = inf.megatron_times_s(64, c.D, c.F, 32, C16, W5, V5E.ici_bidirectional_bytes_per_s)
    assert (t["ici"], t["hbm"], t["flops"]) == (pytest.approx(11.65e-6, rel=2e-3), pytest.approx(17.90e-6, rel=2e-3),
                                                pytest.approx(4.77e-6, rel=2e-3))


def test_weight_stationary_crossover():
    """ch07 Q7: the optimum X and the 18 F / D crossover follow from the two comms formulas."""
    X = symbol("X")
    t = inf.weight_stationary_2d_comms_s(B, D, F, X, N / X, W)
    x_opt = sp.sqrt(D * N / (2 * F))
    assert sp.simplify(sp.diff(t, X).subs(X, x_opt)) == 0
    crossing = sp.solve(sp.Eq(sp.simplify(t.subs(X, x_opt)), inf.model_parallel_1d_comms_s(B, D, W)), N)
    assert crossing == [18 * F / D]


def test_latency_bound_bytes():
    assert inf.latency_bound_bytes(8, V5E.ici_bytes_per_s_per_link) == pytest.approx(360_000)  # ch07 E12
    assert inf.latency_bound_bytes(8, V5E.ici_bytes_per_s_per_link) > 16 * 8192  # ch07 E13


def test_serving_system():
    assert inf.evicted_tokens_per_step(32, 8192, 4096) == 96  # ch08 IQ11
    ratio = inf.prefill_to_generate_servers(32, inf.prefill_s(70e9, 8192, 16, C16, 0.4), inf.hbm_full_step_s(), 512)
    assert ratio == pytest.approx(2.914, rel=2e-3)  # ch08 IQ12
    assert inf.prefill_to_generate_servers(32, 0.91, 0.019, 512) == pytest.approx(2.99, rel=2e-3)  # the book's


def test_frontier_shape_and_capacity():
    c = m.LLAMA3_70B
    contexts, batches = [2048, 8192, 32_768], np.arange(1, 700)
    latency, per_chip = inf.frontier(70e9, 70e9, m.kv_bytes_per_token_of(c, 1), contexts, batches, 16)
    assert latency.shape == per_chip.shape == (3, len(batches))
    for i, s in enumerate(contexts):
        fits = inf.max_batch(V5E.hbm_bytes, 16, 70e9, m.kv_bytes_per_token_of(c, 1) * s)
        assert not np.isnan(latency[i, fits - 1]) and np.isnan(latency[i, fits])
        valid = latency[i, :fits]
        rate = per_chip[i, :fits]
        assert np.all(np.diff(valid) > 0)  # every extra sequence makes the step slower ...
        assert np.all(np.diff(rate) >= -1e-9 * rate.max())  # ... and the throughput never drops (it saturates)
    assert latency[0, 0] == pytest.approx(5.36e-3, rel=2e-3)  # ch08 IQ13


def test_plots_draw():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    p = m.params_of(m.LLAMA2_13B)
    ax = course_inference.plot_decode_latency(lambda b: inf.decode_step_s(b, 1e9, 2 * p, p, 8, C16, W5), 300)
    assert len(ax.lines) == 1
    ax = course_inference.plot_prefill_latency(lambda t: inf.decode_step_s(t, 0, 2 * p, p, 8, C16, W5), 1e5)
    assert len(ax.lines) == 1
    ax = course_inference.plot_frontier(lambda b, s: 1e-3 * b, [2048, 8192], lambda s: 300, 16)
    assert len(ax.lines) == 2
    plt.close("all")


def test_plots_draw_the_students_model():
    """The inference pictures draw the student's own step time, on the helper's own grid of whole batches
    up to the largest the student allows: the course's model is never computed there (tests/test_plot_data.py)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    c = m.LLAMA3_70B
    per_token = m.kv_bytes_per_token_of(c, 1)

    def step(b: float, s: int = 8192) -> float:
        return float(inf.decode_step_s(b, per_token * s, 70e9, 70e9, 16, C16, W5))

    ax = course_inference.plot_decode_latency(step, 120)
    b = ax.lines[0].get_xdata()
    assert b[0] == 1 and b[-1] == 120 and np.all(b == np.round(b))
    np.testing.assert_allclose(ax.lines[0].get_ydata(), [1e3 * step(x) for x in b])
    ax = course_inference.plot_frontier(step, [2048, 8192], lambda s: 4 * 8192 // s, 16)
    for line, s in zip(ax.lines, [2048, 8192], strict=True):
        assert line.get_xdata().size == 4 * 8192 // s
        np.testing.assert_allclose(line.get_xdata()[0], 1e3 * step(1, s))
    plt.close("all")
