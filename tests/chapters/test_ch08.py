"""Chapter 8 (Serving LLaMA 3-70B): the syllabus's tables, and the program questions' models
as the collective inspector sees them
(test_every_chapter.py runs the records, the book's answers and the syllabus's)."""

import numpy as np
import pytest

import solutions.ch08_applied_inference as ch08
from autograder.questions import load_chapter
from solutions._derived import inference as inf
from solutions._derived import models as m
from tests.chapter_checks import assert_size, both_judges, inspected, program_inputs

pytestmark = pytest.mark.ch08
CHAPTER = load_chapter("ch08_applied_inference")


# Integer answers compared exactly, not with a relative tolerance (the syllabus's traps).
INTEGERS = ("ch08-iq1-chips", "ch08-iq5-sequences", "ch08-iq8-batch", "ch08-iq9-tp-memory", "ch08-iq11-evicted",
            "ch08-w3-batch-hbm", "ch08-w3-batch-flops")


@pytest.mark.parametrize("qid", INTEGERS)
def test_integer_answers_are_exact(qid):
    q = CHAPTER[qid]
    assert float(q.reference).is_integer()
    lo, hi = q.tolerance.bounds(float(q.reference))
    assert hi - lo <= 1


def test_chapter_size():
    assert_size(CHAPTER, 56, programs=(3, 6))


def test_iq5_table():
    """The book's dtype table: weights, KV per token, slice, free HBM and 43 sequences in every row."""
    rows = {"bf16": (140e9, 327_680, "4x4", 116e9), "int8": (70e9, 163_840, "4x2", 58e9),
            "int4": (35e9, 81_920, "2x2", 29e9)}
    for dtype, (weights, kv, slice_name, free) in rows.items():
        bpe = ch08.DTYPES[dtype]
        assert bpe * ch08.P70 == weights and m.kv_bytes_per_token_of(ch08.L70, bpe) == kv
        assert inf.smallest_slice(weights) == slice_name
        probe = dict(ch08._plan_probe(dtype), kv_bytes_per_token=kv)  # the probe itself carries another model's cache
        chips, left, batch, step, _ = ch08.serving_plan(**probe)
        assert (left, batch) == (free, 43) and inf.V5E_SLICES[slice_name] == chips
        assert step == pytest.approx(ch08.STEP_FULL, rel=0.005)  # a full HBM, read once


def test_cx2_grids():
    """The syllabus's CX2: 137 on the step-4 grid, 138 on the step-1 grid; the book's script stops at 34."""
    step4, step1 = (dict(p, kv_bytes_per_token=ch08.KV8) for p in ch08.BATCH_PROBES[:2])  # the book's model
    assert ch08.largest_batch(**step4) == 137 and ch08.largest_batch(**step1) == 138
    assert ch08.cx2_book_bug(**step4) == 34


def test_frontier_matches_the_point_questions():
    chips = CHAPTER.setting_of("ch08-iq13-latency-b1").book["chips"]
    latency, per_chip = inf.frontier(ch08.P70, ch08.P70, ch08.KV8, [2048, 8192, 65_536], np.arange(1, 600), chips)
    assert latency[0, 0] == pytest.approx(CHAPTER["ch08-iq13-latency-b1"].reference)
    assert per_chip[0, ch08.IQ13_PLATEAU_B - 1] / 1e3 == pytest.approx(CHAPTER["ch08-iq13-plateau"].reference)
    assert np.isnan(latency[1, 138]) and not np.isnan(latency[1, 137])  # 138 sequences fit at 8k, 139 do not
    # The book's "about 20 ms" at the largest batch: a full HBM read, plus a little where FLOPs win.
    assert ch08.STEP_FULL < np.nanmax(latency[1]) < 1.05 * ch08.STEP_FULL


def test_w3_batches():
    """W3: the HBM-only answer is the syllabus's; counting FLOPs the batch drops below it but stays above
    the critical batch, where that model applies."""
    flops, hbm = CHAPTER["ch08-w3-batch-flops"].reference, CHAPTER["ch08-w3-batch-hbm"].reference
    assert flops < hbm
    assert inf.critical_batch(ch08.C_BF16, ch08.W_V5E, 1) < flops


# --- the program, as the collective inspector sees it ----------------------------------------------

def test_inspector_reads_the_model():
    found = inspected(CHAPTER["ch08-cx4-kv-sharded-decode"])
    assert found == ["1 x all-reduce of f32[4,16] over kv (384 bytes moved per device each)"]


def test_each_device_reads_an_eighth_of_the_cache():
    q = CHAPTER["ch08-cx4-kv-sharded-decode"]
    cache = program_inputs(q)[2]
    assert {s.data.nbytes for s in cache.addressable_shards} == {cache.nbytes // 8}
    assert 2 * cache.nbytes // 8 == CHAPTER["ch08-cx4-kv-bytes"].reference


def test_inspector_reads_the_weight_stationary_mlp():
    """The weights never move: one AllReduce over the whole slice of the [B, D] partial outputs, IQ9's T_ici."""
    assert inspected(CHAPTER["ch08-cx6-weight-stationary-mlp"]) == [
        "1 x all-reduce of f32[8,32] over X+Y (1,792 bytes moved per device each)",
    ]


def test_decode_attention_is_local_and_reads_an_eighth_of_the_cache():
    """Each device's query heads read the key/value heads it stores, so the softmax attention communicates
    nothing, and each device holds an eighth of the cache."""
    q = CHAPTER["ch08-cx7-decode-attention"]
    assert inspected(q) == []
    cache = program_inputs(q)[3]
    assert {s.data.nbytes for s in cache.addressable_shards} == {cache.nbytes // 8}


def test_decode_attention_reference_is_grouped_query_softmax():
    """The reference appends the new token's key and value to the cache and groups query heads n // G; with one
    cached position equal to the new one, both positions get the same weight."""
    from autograder.program_references import decode_attention

    rng = np.random.default_rng(3)
    b, n, k, h = 2, 4, 2, 3
    q = rng.standard_normal((b, n, h))
    k_new, v_new = rng.standard_normal((b, k, h)), rng.standard_normal((b, k, h))
    out = decode_attention(q, k_new, v_new, k_new[:, None], v_new[:, None])
    np.testing.assert_allclose(out, np.repeat(v_new, n // k, axis=1))  # head n reads key/value head n // 2


# --- the book's 19 ms step and the frontier's cache, at every variant -------------------------------

BOOK_STEP = 0.019  # the book's full-HBM step, which IQ6 accepts for everyone


def _at_every_choice(qid: str):
    """(choice, question) for each choice of the question's setting."""
    setting = CHAPTER.setting_of(qid)
    for combo in setting.combos():
        yield combo, {q.qid: q for q in setting.build(**combo)}[qid]


def test_iq6_accepts_the_book_step_for_everyone():
    for combo, q in _at_every_choice("ch08-iq6-step-full"):
        assert all(v.ok for v in both_judges(q, BOOK_STEP)), combo


@pytest.mark.parametrize("qid", ["ch08-iq6-decode-time", "ch08-iq7-bf16", "ch08-iq7-int8", "ch08-iq7-int4",
                                 "ch08-iq8-bf16", "ch08-iq8-int8", "ch08-iq8-int4", "ch08-iq12-ratio"])
def test_the_book_step_carries_through_at_every_choice(qid):
    """A student who reuses the 19 ms step IQ6 accepts gets the same credit downstream whatever values they
    were dealt: the reading is computed at each choice, not only at the book's."""
    for combo, q in _at_every_choice(qid):
        scale = BOOK_STEP / ch08.STEP_FULL  # the step enters decode times as a factor, QPS and ratios as a divisor
        answer = q.reference * scale if qid == "ch08-iq6-decode-time" else q.reference / scale
        for v in both_judges(q, answer):
            assert v.ok, (combo, answer, v.message)


def test_iq12_with_the_book_step_and_the_book_peak():
    """IQ12 from IQ10's prefill at the book's rounded 2e14 and the book's step: both readings together pass."""
    for combo, q in _at_every_choice("ch08-iq12-ratio"):
        prefill = inf.prefill_s(ch08.P70, combo["prompt"], ch08.IQ10_CHIPS, 2e14, inf.PREFILL_MFU)
        answer = inf.prefill_to_generate_servers(combo["batch"], prefill, BOOK_STEP, ch08.DECODE)
        assert all(v.ok for v in both_judges(q, answer)), combo


def test_iq13_latency_tests_the_cache():
    """Weights alone (no cache) fail at every choice with a hint about the cache; a bf16 cache (int8 asked) fails
    at every choice but the book's, whose plot reading of 5.5 ms lies beyond it, so that range holds it."""
    for combo, q in _at_every_choice("ch08-iq13-latency-b1"):
        weights = ch08.INT8 * ch08.P70 / (combo["chips"] * ch08.W_V5E)
        cache = ch08.KV8 * combo["context"] / (combo["chips"] * ch08.W_V5E)
        assert q.reference == pytest.approx(weights + cache)
        for v in both_judges(q, weights):
            assert not v.ok and "cache" in v.message, (combo, v.message)
        book = combo == CHAPTER.setting_of("ch08-iq13-latency-b1").book
        for v in both_judges(q, weights + 2 * cache):
            assert v.ok == book, (combo, v.message)
            assert book or "int8" in v.message, (combo, v.message)


def test_iq13_latency_cannot_be_copied_from_a_classmate():
    """Another choice's step fails, except where the book's own range reaches it: at the book's values the range
    runs up to the book's 5.5 ms, and the 8k context on the same 16 chips takes 5.44 ms."""
    answers = [q for _, q in _at_every_choice("ch08-iq13-latency-b1")]
    book = CHAPTER["ch08-iq13-latency-b1"]
    copied = [(mine, theirs) for mine in answers for theirs in answers
              if theirs.reference != mine.reference and any(v.ok for v in both_judges(mine, theirs.reference))]
    assert len(copied) <= 1 and all(mine.prompt == book.prompt and theirs.reference <= ch08.BOOK[book.qid]
                                    for mine, theirs in copied), [(m.prompt, t.prompt) for m, t in copied]


@pytest.mark.parametrize("qid", ["ch08-e1-h100", "ch08-e1-v5p", "ch08-e1-v5e"])
def test_flops_per_dollar_may_carry_its_unit(qid):
    q = CHAPTER[qid]
    for answer in (f"{q.reference:.3g} FLOP", f"{q.reference:.3g} FLOPs", f"{q.reference:.3g}"):
        assert all(v.ok for v in both_judges(q, answer)), answer
