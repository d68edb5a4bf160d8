"""Chapter 7 (Transformer inference): the syllabus's tables, and the program questions' models
as the collective inspector sees them
(test_every_chapter.py runs the records, the book's answers and the syllabus's)."""

import jax
import numpy as np
import pytest

import solutions.ch07_inference as ch07
from autograder.questions import Function, load_chapter
from course import comms
from tests.chapter_checks import assert_size, both_judges, program_inputs

pytestmark = pytest.mark.ch07
CHAPTER = load_chapter("ch07_inference")


# E8's tables (LLaMA 2-13B on 8 v5e; step ms and tokens/s for B = 1, 8, 16, 32, 64, 240), pinned by the
# syllabus from the book's rounded 6.7e9 / 1.34e9 B caches and 26e9 B of weights: within 0.5%.
E8_MS = {"MHA": (4.98, 12.13, 20.30, 36.65, 69.33, 249.09), "GQA": (4.17, 5.60, 7.23, 10.50, 17.04, 52.99)}
E8_TOKENS = {"MHA": (200.61, 659.30, 787.99, 873.21, 923.13, 963.53),
             "GQA": (239.94, 1429.19, 2212.48, 3047.62, 3756.62, 4529.34)}


def test_chapter_size():
    assert_size(CHAPTER, 60, programs=(2, 6))


@pytest.mark.parametrize("kind", sorted(E8_MS))
def test_e8_tables(kind):
    """The step-time calculator reproduces both of the book's LLaMA 2-13B tables, cell by cell."""
    for b, ms, tokens in zip(ch07.E8_BATCHES, E8_MS[kind], E8_TOKENS[kind], strict=True):
        step, rate = ch07.step_time(b, ch07.E8_KV[kind], ch07.E5_BYTES, ch07.E5_TOTAL, ch07.E8_CHIPS,
                                    ch07.C_BF16, ch07.W_V5E)
        assert step * 1e3 == pytest.approx(ms, rel=0.005) and rate == pytest.approx(tokens, rel=0.005)


def test_q7_derivation():
    """X_opt = sqrt(N/8) and T = sqrt(128) BD / (sqrt(N) W) when F = 4D (the book's forms)."""
    import sympy as sp

    from course.symbols import B, D, N, W

    assert sp.simplify(ch07.Q7_X_OPT.subs(ch07.F, 4 * D) - sp.sqrt(N / 8)) == 0
    assert sp.simplify(ch07.Q7_T_OPT.subs(ch07.F, 4 * D) - sp.sqrt(128) * B * D / (sp.sqrt(N) * W)) == 0


def test_decode_step_model_is_jax_consistent():
    """CX2's numpy reference agrees with a JAX version of the same step."""
    import jax.numpy as jnp

    probe = ch07.DECODE_PROBES[0]
    out, kc, vc = ch07.decode_step(**probe)
    q = jnp.asarray(probe["q"])
    b, n, h = q.shape
    lengths = np.asarray(probe["lengths"])
    k_cache = jnp.asarray(probe["k_cache"]).at[jnp.arange(b), lengths].set(jnp.asarray(probe["k_new"]))
    v_cache = jnp.asarray(probe["v_cache"]).at[jnp.arange(b), lengths].set(jnp.asarray(probe["v_new"]))
    kv = k_cache.shape[2]
    scores = jnp.einsum("bkgh,bskh->bkgs", q.reshape(b, kv, n // kv, h), k_cache) / jnp.sqrt(h)
    visible = jnp.arange(k_cache.shape[1])[None, :] <= lengths[:, None]
    p = jax.nn.softmax(jnp.where(visible[:, None, None, :], scores, -jnp.inf), axis=-1)
    mine = jnp.einsum("bkgs,bskh->bkgh", p, v_cache).reshape(b, n, h)
    assert np.allclose(mine, out, rtol=1e-5) and np.allclose(k_cache, kc) and np.allclose(v_cache, vc)


def test_functions_have_probes_that_tell_slips_apart():
    for q in CHAPTER.questions:
        if isinstance(q, Function):
            assert len(q.probes) >= 2, q.qid


# --- the programs' models, as the collective inspector sees them ----------------------------------

# (What the inspector reports of each model: tests/chapters/inspected.json.)


def test_heads_batch_alltoall_moves_less_than_gathering():
    """Why the AllGather variant of CX3b is the wasteful one: each gather moves 4x the AllToAll's bytes."""
    args = program_inputs(CHAPTER["ch07-cx3-heads-batch"])
    a2a = [c for c in comms.inspect(ch07.decode_heads_batch, *args) if c.kind == "all-to-all"]
    gathers = [c for c in comms.inspect(ch07.cx3b_gathers, *args) if c.kind == "all-gather"]
    assert sum(c.bytes_per_device for c in gathers) == 4 * sum(c.bytes_per_device for c in a2a)


def test_speculative_step_counts():
    """CX6 on the prompt's example, on a draft that fully agrees (k + 1 tokens) and one that agrees nowhere (1)."""
    assert ch07.accepted_tokens([5, 9, 2], [5, 9, 7, 1]) == 3
    assert ch07.accepted_tokens([1, 2, 3], [1, 2, 3, 4]) == 4
    assert ch07.accepted_tokens([8, 2], [1, 2, 3]) == 1


def _greedy(prompt, w_target, steps):
    """Plain greedy decoding with the bigram target: one pass (one row's argmax) per token."""
    token, out = np.asarray(prompt).astype(int) % w_target.shape[0], []
    for _ in range(steps):
        token = w_target[token].argmax(axis=1)
        out.append(token)
    return np.stack(out, axis=1)


def test_speculative_reference_is_greedy_decoding():
    """CX7's reference emits exactly the target's greedy tokens with k and T as the notebook states them, and its
    draft, which usually agrees, is checked: it accepts some proposals and rejects others."""
    import inspect

    from autograder.program_references import speculative_decode

    defaults = inspect.signature(speculative_decode).parameters
    assert (defaults["draft_len"].default, defaults["new_tokens"].default) == (ch07.SPEC_K, ch07.SPEC_T)
    rng = np.random.default_rng(3)
    prompt = rng.integers(-9, 10, 32)
    w = rng.standard_normal((ch07.SPEC_V, ch07.SPEC_V)).astype(np.float32).astype(np.float64)
    tokens, accepted = speculative_decode(prompt, w)
    assert tokens.shape == (32, ch07.SPEC_T) and (tokens == _greedy(prompt, w, ch07.SPEC_T)).all()
    assert 0 < accepted.mean() < ch07.SPEC_T - ch07.SPEC_T // (ch07.SPEC_K + 1)


def test_speculative_draft_equal_to_target_is_always_accepted():
    """A target whose logits are already whole halves is its own draft: every proposal is accepted, so each round
    emits k + 1 tokens and T = 16 tokens take 4 rounds of 3 accepted proposals (the syllabus's check)."""
    from autograder.program_references import speculative_decode

    rng = np.random.default_rng(4)
    w = rng.permutation(ch07.SPEC_V**2).reshape(ch07.SPEC_V, ch07.SPEC_V) / 2  # distinct halves: no ties
    prompt = rng.integers(-9, 10, 8)
    tokens, accepted = speculative_decode(prompt, w)
    assert (tokens == _greedy(prompt, w, ch07.SPEC_T)).all()
    assert (accepted == ch07.SPEC_T // (ch07.SPEC_K + 1) * ch07.SPEC_K).all()


# --- Q6: which weights a chip reads ----------------------------------------------------------------------


def test_q6_weight_time_says_all_the_weights_and_names_the_expert_only_reading():
    """Q6 divides all the int8 weights (experts, attention, embeddings) over the 128 chips: the prompt says so,
    and at every choice of E and k the expert MLPs alone get a hint that names the weights left out, never a bare
    "Close" (they passed at E = 48, where the rest is 0.9% of the weights, and were refused at E = 16)."""
    setting = CHAPTER.setting_of("ch07-q6-weight-time")
    for combo in setting.combos():
        q = {x.qid: x for x in setting.build(**combo)}["ch07-q6-weight-time"]
        assert "all of the model's int8 weights" in q.prompt, q.prompt
        moe = ch07.Q.with_(**combo)
        experts_only = ch07.INT8 * moe.L * moe.E * 3 * moe.D * moe.F / ch07.Q6_CHIPS / ch07.W_V5E
        for v in both_judges(q, experts_only):
            assert not v.ok and "attention and embedding" in v.message, (combo, v.message)


# --- readings a student may honestly make, at every choice -----------------------------------------------

def _at_every_choice(qid: str):
    """(choice, question) for each choice of the question's setting."""
    setting = CHAPTER.setting_of(qid)
    for combo in setting.combos():
        yield combo, {q.qid: q for q in setting.build(**combo)}[qid]


@pytest.mark.parametrize(("qid", "heads"), [("ch07-q2-max-batch", None), ("ch07-q2-max-batch-mqa", 1)])
def test_q2_sixteen_gib_per_chip_is_told_about_hbm_per_chip(qid, heads):
    """16 GiB a chip (the weights taken off) passes where it gives the same batch, or gets a hint naming the
    HBM of a chip, never only "the weights take their share" (which this student did)."""
    import math

    from solutions._derived import inference as inf

    for combo, q in _at_every_choice(qid):
        cfg = ch07.Q if heads is None else ch07.Q.with_(K=heads)
        kv = inf.kv_bytes_per_sequence(cfg, combo["context"], ch07.INT8)
        answer = math.floor((combo["chips"] * 16 * 2**30 - ch07.INT8 * ch07.Q1_PARAMS) / kv)
        for v in both_judges(q, answer):
            assert v.ok or "GiB" in v.message, (combo, answer, v.message)


@pytest.mark.parametrize("qid", ["ch07-q4-tp-one-axis", "ch07-q4-tp-two-axes"])
def test_q4_a_whole_number_of_chips_passes(qid):
    """F / alpha rounded down to whole chips is a reading of "the largest model parallelism" as good as F / alpha
    itself (``largest_degree``); it was refused, with a hint that the question wanted F / alpha."""
    import math

    for combo, q in _at_every_choice(qid):
        assert all(v.ok for v in both_judges(q, math.floor(q.reference))), combo


def test_q7_the_fewest_whole_chips_past_the_crossover_pass():
    """18 F / D is 58.5 chips for F = 3.25 D: 59, the fewest chips with which 2D beats 1D, is as good an answer to
    "the N above which" (``least_count``); it was refused as "close". Past it, 60 is not."""
    import math

    for combo, q in _at_every_choice("ch07-q7-crossover-f4d"):
        assert all(v.ok for v in both_judges(q, math.ceil(q.reference))), combo
        assert not any(v.ok for v in both_judges(q, math.ceil(q.reference) + 1)), combo


def test_q5_flops_with_a_two_figure_coefficient_is_told_the_constant_is_off():
    """c T has no lower-order terms: a coefficient rounded to 2 figures is told its constant is off (slightly, or
    beyond 3 figures), never that lower-order terms differ."""
    for combo, q in _at_every_choice("ch07-q5-flops"):
        coefficient = float(q.reference.subs(ch07.T, 1))
        for v in both_judges(q, f"{coefficient:.1e}*T"):
            assert v.ok or v.diagnosis in ("constant_close", "ratio:other"), (combo, v.message)


def _counts_every_match(draft, target):
    """Counts every proposal that matches, also after the first disagreement."""
    return int((np.asarray(draft) == np.asarray(target)[:len(draft)]).sum()) + 1


def _argmax_of_no_disagreement(draft, target):
    """np.argmax finds the first disagreement, and 0 where there is none."""
    return int(np.argmax(np.asarray(draft) != np.asarray(target)[:len(draft)])) + 1


@pytest.mark.parametrize("answer", [_counts_every_match, _argmax_of_no_disagreement])
def test_cx6_typical_counting_mistakes_keep_at_most_half_the_marks(answer):
    """Counting every matching position kept every mark at 22 seeds of 30, the argmax of "no disagreement" at 11: few
    drawn cases had a match after the first disagreement, or every proposal agreeing. Each student's cases hold both
    kinds, and the self-check's too."""
    import json

    from autograder import kinds
    from autograder.checks import judge
    from autograder.kinds.function import drawn_probes
    from tests.chapter_checks import printed

    q = CHAPTER["ch07-cx6-accepted-tokens"]
    fp = printed(q)
    for seed in range(30):
        cases = drawn_probes(q, f"seed{seed}")
        v = judge(q, json.loads(json.dumps(kinds.encode(fp, answer, cases))), f"seed{seed}")
        assert v.score <= 0.5, (seed, v.message)
    assert not any(v.ok for v in both_judges(q, answer))


def test_cx6_a_count_off_by_one_is_not_told_of_rounding():
    """Nothing is rounded in a count of accepted tokens: "floor against round" does not apply. A count that is a
    rounded quotient (CX1's sequences that fit) is still told it."""
    for v in both_judges(CHAPTER["ch07-cx6-accepted-tokens"], ch07.cx6_stops_early):
        assert "Off by one: check where the count starts and ends (" in v.message, v.message
        assert "round" not in v.message, v.message

    def rounds_to_nearest(hbm_per_chip, n_chips, weight_bytes, kv_bytes_per_seq):
        return max(0, round((n_chips * hbm_per_chip - weight_bytes) / kv_bytes_per_seq))

    for v in both_judges(CHAPTER["ch07-cx1-max-batch"], rounds_to_nearest):
        assert "Off by one" in v.message and "floor against round" in v.message, v.message


def test_attention_scaled_where_the_question_asks_for_none_is_told_its_factor():
    """CX3a's attention takes no 1/sqrt(H) (the prompt says so); the scale added out of habit made every value
    1/sqrt(8) of the expected one, which no fraction names: the message was the generic "got 252.5, expected 714.3"."""
    from jax.sharding import PartitionSpec as P

    import course

    def decode_heads(x, w_q, k_cache, v_cache, w_o):
        def block(x, wq, kc, vc, wo):
            q = jax.numpy.einsum("bd,dnh->bnh", x, wq) / np.sqrt(wq.shape[-1])
            g = q.shape[1] // kc.shape[2]
            k, v = jax.numpy.repeat(kc, g, axis=2), jax.numpy.repeat(vc, g, axis=2)
            o = jax.numpy.einsum("bns,bsnh->bnh", jax.numpy.einsum("bnh,bsnh->bns", q, k), v)
            return jax.lax.psum(jax.numpy.einsum("bnh,nhd->bd", o, wo), "X")

        heads = P(None, None, "X", None)
        return jax.shard_map(block, mesh=course.mesh(X=8), in_specs=(P(), P(None, "X", None), heads, heads,
                                                                      P("X", None, None)), out_specs=P())(
            x, w_q, k_cache, v_cache, w_o)

    for v in both_judges(CHAPTER["ch07-cx3-heads"], decode_heads):
        assert (v.score, v.diagnosis) == (0.0, "scaled:1/sqrt(8)") and "1/sqrt(H)" in v.message, v.message
