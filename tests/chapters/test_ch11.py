"""Chapter 11 (Capstone): the chapters' pinned answers the planners must reproduce, and the compiled
program the capstone reads, compiled again (test_every_chapter.py runs the records and the book's
answers)."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import solutions.ch11_capstone as ch11
from autograder.questions import load_chapter
from course.devices import mesh
from solutions.ch09_profiling import arrays, census, program_line, replica_groups, split_instruction
from tests.chapter_checks import both_judges

pytestmark = pytest.mark.ch11
CHAPTER = load_chapter("ch11_capstone")


def test_chapter_size():
    assert CHAPTER.total_points >= 45


# The syllabus's pinned answers (C1): (probe, expected outputs, relative tolerance on the times).
TRAINING = [
    (0, (1024, 4, 0.311, None)),  # Part 5 Q3 (step at 40% MFU)
    (1, (2048, 4, None, 44.3)),  # Part 6 A9, A4 (the book rounds the model to 70e9 parameters)
    (2, (4096, 1, 1.037, None)),  # Part 5 X1, 10M-token batch: pure FSDP
    (3, (1024, 4, 0.109, None)),  # Part 5 X1, 1M-token batch
]


@pytest.mark.parametrize(("index", "expected"), TRAINING)
def test_plan_training_reproduces_the_chapters(index, expected):
    x, y, step, days = ch11.plan_training(**ch11.TRAIN_PROBES[index])
    assert (x, y) == expected[:2]
    if expected[2] is not None:
        assert step == pytest.approx(expected[2], rel=0.01)
    if expected[3] is not None:
        assert days == pytest.approx(expected[3], rel=0.01)


@pytest.mark.parametrize("qid", sorted(ch11.BOOK_PLANS))
def test_book_values_pass_the_planners_tolerances(qid):
    """The book's printed plans (rounded) lie within each output's tolerance around the reference."""
    q = CHAPTER[qid]
    for index, book in ch11.BOOK_PLANS[qid].items():
        reference = q.reference(**q.probes[index])
        for spec, ours, theirs in zip(q.outputs, reference, book, strict=True):
            if theirs is not None:
                lo, hi = spec.tolerance.bounds(float(ours))
                assert lo <= theirs <= hi, (qid, index, theirs, ours)


def test_plan_serving_reproduces_part_8():
    """IQ2/IQ3: LLaMA 3-70B int8, batch 32 at 8k context: a 4x2 slice, 17.22 ms; 4x4: 8.61 ms."""
    chips, step = ch11.plan_serving(**ch11.SERVE_PROBES[0])
    assert chips == 8 and step == pytest.approx(17.22e-3, rel=0.01)
    chips, step = ch11.plan_serving(**ch11.SERVE_PROBES[1])
    assert chips == 16 and step == pytest.approx(8.61e-3, rel=0.01)


SYLLABUS_H100 = [("ch11-c1-h100-min-gpus", 9, 0), ("ch11-c1-h100-days", 39.96, 0.01),
                 ("ch11-c1-h100-tp-limit", 13.0, 0.01), ("ch11-c1-h100-per-gpu-batch", 976.6, 0.001),
                 ("ch11-c1-h100-dp-threshold", 2475, 1e-3), ("ch11-c1-h100-pp-threshold", 309.4, 1e-3)]


@pytest.mark.parametrize(("qid", "expected", "rel"), SYLLABUS_H100)
def test_h100_answers_are_part_12s(qid, expected, rel):
    """Part 12 Q5.2 as the syllabus pins it (the book's 70e9 parameters: days within 1%), at the book's H100
    node, model and batch (what the chapter's records hold by default)."""
    value = CHAPTER[qid].reference
    assert abs(value - expected) <= rel * expected


def test_capstone_plan_is_self_consistent():
    """The new model's plan at the course's own budget: FSDP + TP (memory and latency pull the serving slice
    apart), and at every batch C4 can deal, Part 6's comm/compute ratio at the planner's (X, Y)."""
    assert (CHAPTER["ch11-c1-train-x"].reference, CHAPTER["ch11-c1-train-y"].reference) == (1024, 4)
    assert CHAPTER["ch11-c1-memory-chips"].reference == 8 and CHAPTER["ch11-c1-serve-chips"].reference == 16
    assert CHAPTER["ch11-c1-train-cost"].reference < CHAPTER["ch11-c1-h100-cost"].reference
    assert CHAPTER["ch11-c4-bound"].reference == "compute"
    alpha = ch11.V5P.bf16_flops_per_s / ch11.W_V5P
    setting = next(s for s in CHAPTER.settings if s.name == "ch11-c4-scale")
    for combo in setting.combos():
        batch = combo["batch"]
        x, y, _, _ = ch11.capstone_plan(batch, ch11.V5P_4096)
        t_math, t_fsdp, t_tp = ch11.capstone_times(batch)
        expected = max(x * alpha / (2 * batch), y * alpha / ch11.COURSE_31B.F)
        assert abs(max(t_fsdp, t_tp) / t_math / expected - 1) < 1e-9, batch


# --- C3: the program the notebook compiles ----------------------------------------------------------

def _mlp(x, w_in, w_out):
    return jax.nn.relu(x @ w_in) @ w_out


C3_COMBOS = [dict(B=c["shape"][0], D=c["shape"][1], F=c["shape"][2], X=c["mesh"][0], Y=c["mesh"][1])
             for c in next(s for s in load_chapter("ch11_capstone").settings if s.name == "ch11-c3").combos()]


@pytest.fixture(scope="module", params=C3_COMBOS, ids=lambda c: "{B}x{D}x{F}-{X}x{Y}".format(**c))
def c3_case(request):
    """Every student's sizes and mesh (the course's first): the program their notebook compiles."""
    c = request.param
    m = mesh(X=c["X"], Y=c["Y"])

    def sds(shape, *spec):
        return jax.ShapeDtypeStruct(shape, jnp.float32, sharding=NamedSharding(m, P(*spec)))
    f = jax.jit(_mlp, out_shardings=NamedSharding(m, P("X", "Y")))
    text = f.lower(sds((c["B"], c["D"]), "X", "Y"), sds((c["D"], c["F"]), "X", "Y"),
                   sds((c["F"], c["D"]), "Y", "X")).compile().as_text()
    return c, re.sub(r", metadata=\{[^{}]*\}", "", text)


def test_c3_book_case_is_the_first():
    assert C3_COMBOS[0] == ch11.C3


def test_c3_program_is_what_the_references_say(c3_case):
    c, text = c3_case
    entry = text[text.index("ENTRY"):]
    assert census(entry, "all-gather") == (3.0, float(ch11.c3_gathered_bytes(**c)))
    assert census(entry, "all-reduce")[0] == 1 and census(entry, "reduce-scatter")[0] == 0
    sizes = sorted(replica_groups(line)[0] for line in entry.splitlines() if " all-gather(" in line)
    assert sizes == sorted([c["Y"], c["X"], c["X"]])  # x over Y; both weights over X
    assert replica_groups(program_line(entry, "all-reduce"))[0] == c["Y"]
    params = [arrays(split_instruction(line)[1])[0][1] for line in entry.splitlines() if " parameter(" in line]
    assert sorted(params) == sorted(ch11.c3_local(**c).values())


@pytest.mark.parametrize("i", range(len(C3_COMBOS)))
def test_c3_adding_the_two_communication_times_is_refused_at_every_choice(i):
    """The prose says the FSDP and TP collectives overlap (the slower is the time): their sum must be wrong for every
    student, not only at the course's sizes (a mesh where TP takes 1/64 of FSDP put the sum inside 2%)."""
    s = next(s for s in load_chapter("ch11_capstone").settings if s.name == "ch11-c3")
    combo = s.combos()[i]
    q = next(q for q in s.questions(s.labels(combo)) if q.qid == "ch11-c3-t-comms")
    (B_, D_, F_), (X_, Y_) = combo["shape"], combo["mesh"]
    _, t_fsdp, t_tp = ch11.fsdp_tp_times(B_, D_, F_, X_, Y_, ch11.V5P.bf16_flops_per_s, ch11.W_V5P)
    assert all(not v.ok for v in both_judges(q, t_fsdp + t_tp)), combo
    assert all(v.ok for v in both_judges(q, max(t_fsdp, t_tp))), combo


def test_fsdp_tp_times_are_part_5s_formulas():
    t_math, t_fsdp, t_tp = ch11.fsdp_tp_times(2**20, 8192, 32768, 256, 16, 4.59e14, 1.8e11, MX=2, MY=1)
    assert t_math == pytest.approx(4 * 2**20 * 8192 * 32768 / (4096 * 4.59e14))
    assert t_fsdp == pytest.approx(4 * 8192 * 32768 / (16 * 1.8e11 * 2))
    assert t_tp == pytest.approx(4 * 2**20 * 8192 / (256 * 1.8e11))


# --- C2: head-sharded GQA attention (references in autograder/program_references/) ------------------

def test_gqa_references_agree_with_jax_and_with_each_other():
    """gqa_prefill is JAX's causal dot-product attention with grouped heads (query head n reads key/value
    head n // (N / K)); a decode step over the cache of the first T - 1 tokens gives prefill's last row."""
    from autograder.program_references import REFERENCES

    rng = np.random.default_rng(5)
    b, t, d, n, k, h = 2, 6, 8, 8, 4, 4
    x = rng.standard_normal((b, t, d))
    w_q, w_k, w_v = rng.standard_normal((d, n, h)), rng.standard_normal((d, k, h)), rng.standard_normal((d, k, h))
    w_o = rng.standard_normal((n, h, d))
    got = REFERENCES["gqa_prefill"](x, w_q, w_k, w_v, w_o)
    q, keys, values = (np.einsum("btd,dnh->btnh", x, w) for w in (w_q, w_k, w_v))
    heads = jax.nn.dot_product_attention(*(jnp.asarray(a, jnp.float32) for a in (q, keys, values)), is_causal=True)
    want = np.einsum("btnh,nhd->btd", np.asarray(heads, np.float64), w_o)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    step = REFERENCES["gqa_decode_step"](x[:, -1], keys[:, :-1], values[:, :-1], w_q, w_k, w_v, w_o)
    np.testing.assert_allclose(step, got[:, -1], rtol=1e-12, atol=1e-12 * np.abs(got).max())


@pytest.mark.parametrize("qid", ["ch11-c2-gqa-prefill", "ch11-c2-gqa-decode"])
def test_gqa_programs_keep_heads_and_cache_local(qid):
    """Each device holds whole groups (its query heads read only its key/value heads), and the compiled
    program keeps the syllabus's one reduction over the model axis: a single all-reduce."""
    q = CHAPTER[qid]
    sizes = dict(q.spec.mesh)
    assert ch11.GQA_N % ch11.GQA_K == 0 and ch11.GQA_K % sizes["Y"] == 0
    m = mesh(**sizes)
    args = [jax.ShapeDtypeStruct(op.shape, jnp.float32, sharding=NamedSharding(m, P(*op.spec)))
            for op in q.spec.operands]
    text = jax.jit(q.model).lower(*args).compile().as_text()
    counts = {kind: census(text, kind)[0] for kind in ("all-gather", "all-reduce", "reduce-scatter", "all-to-all",
                                                       "collective-permute")}
    assert counts == {"all-gather": 0, "all-reduce": 1, "reduce-scatter": 0, "all-to-all": 0,
                      "collective-permute": 0}


def test_train_days_in_hours_is_named_a_unit_slip():
    """A number of hours for a question in days is a factor of 24: the message names hours, not a power of ten."""
    import json

    from autograder import kinds
    from autograder.checks import judge
    from tests.chapter_checks import printed, recorded

    q = CHAPTER["ch11-c1-train-days"]
    rec = recorded(q, q.reference * 24)
    for v in (judge(q, json.loads(json.dumps(rec))), kinds.selfcheck_live(printed(q), q.qid, q.reference * 24, rec)):
        assert v.diagnosis == "unit:24" and "answer in hours" in v.message and "power" not in v.message


# --- readings a student may honestly make, at every choice -----------------------------------------------

def _at_every_choice(qid: str):
    """(choice, question) for each choice of the question's setting."""
    setting = CHAPTER.setting_of(qid)
    for combo in setting.combos():
        yield combo, {q.qid: q for q in setting.build(**combo)}[qid]


@pytest.mark.parametrize("qid", ["ch11-c4-t-fsdp", "ch11-c4-t-tp"])
def test_c4_one_way_link_bandwidth_is_told_w_is_bidirectional(qid):
    """T_FSDP and T_TP with W taken one way (half the bidirectional W) are twice the time; the hint names W,
    where a hint about the torus axes alone would blame what the student got right."""
    for combo, q in _at_every_choice(qid):
        for v in both_judges(q, 2 * q.reference):
            assert not v.ok and "bidirectional" in v.message, (combo, v.message)


def test_c1_gpu_tp_limit_accepts_the_books_reading_on_the_h100():
    """The book divides F by 1995 for an H100 (not the course table's C / W of 2200): that reading passes for
    every model and batch on a GPU with the H100's FLOP/s and NVLink bandwidth, not only for the book's model."""
    from course import hardware as hw

    for combo, q in _at_every_choice("ch11-c1-h100-tp-limit"):
        gpu = combo["node"].gpu
        if (gpu.bf16_flops_per_s, gpu.nvlink_bytes_per_s) == (hw.H100.bf16_flops_per_s, hw.H100.nvlink_bytes_per_s):
            assert all(v.ok for v in both_judges(q, combo["model"].F / 1995)), combo


def _one_step_early(steps, lr, seed):
    """The first loss twice, then each one a step early."""
    losses = ch11.train_losses(steps, lr, seed)
    return [losses[0], *losses[:-1]]


@pytest.mark.parametrize(("answer", "code", "words"), [
    (ch11.c4_loss_after_update, "shifted:+1", "one place later"),
    (_one_step_early, "shifted:-1", "one place earlier"),
], ids=["late", "early"])
def test_losses_recorded_a_step_off_are_told_the_shift(answer, code, words):
    """Losses taken after each update, where the prompt asks for before: "20 of the 20 elements are wrong; neither
    the expected value nor a simple multiple of it" named no cause, though each is the next one's value."""
    for v in both_judges(CHAPTER["ch11-c4-train-losses"], answer):
        assert (v.score, v.diagnosis) == (0.0, code) and words in v.message, v.message
