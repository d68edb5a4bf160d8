"""Chained answers and the book's rounding in chapters 6 and 9, at every combo of every setting.

A whole number derived from an earlier answer (ceil of a total over a chip's memory) passes for every whole
number reachable from an answer the earlier question accepts; the question after it ("on that many chips")
passes at every whole chip count the student could have been credited for; and where the book rounds its
answer to fewer figures, that rounding of the student's own value passes at every combo, in both directions,
while the declared slips still fail. Both judges (grader and self-check) are asked.
"""

import math

import pytest

from autograder.numbers import round_figures
from autograder.questions import load_chapter
from tests.chapter_checks import both_judges

CH06 = load_chapter("ch06_applied_training")
CH09 = load_chapter("ch09_profiling")


def _setting(chapter, name):
    return next(s for s in chapter.settings if s.name == name)


def _combos(chapter, name):
    s = _setting(chapter, name)
    out = []
    for values in s.combos():
        labels = s.labels(values)
        out.append((values, {q.qid: q for q in s.questions(labels)}))
    return out


def _id(values):
    return "-".join(str(getattr(v, "name", v)) for v in values.values())


def _passes(q, answer):
    grader, selfcheck = both_judges(q, answer)
    return grader.diagnosis == "correct" and selfcheck.diagnosis == "correct", (grader.diagnosis,
                                                                               selfcheck.diagnosis)


def _fails(q, answer):
    grader, selfcheck = both_judges(q, answer)
    return grader.diagnosis != "correct" and selfcheck.diagnosis != "correct", (grader.diagnosis,
                                                                               selfcheck.diagnosis)


A5 = _combos(CH06, "ch06-a5")


def _slips_and_factors_fail(q, labels, factors=(2, 0.5), named=True):
    """Each declared slip fails (with its own diagnosis where ``named``), and so does the reference times each
    factor: a widened tolerance lets no slip through."""
    for slip in q.slips:
        ok, why = _fails(q, slip.answer)
        assert ok, (labels, slip, why)
        if named:
            assert both_judges(q, slip.answer)[0].diagnosis == slip.diagnosis
    for factor in factors:
        ok, why = _fails(q, q.reference * factor)
        assert ok, (labels, factor, why)


def _hbm(labels):
    return labels["chip"].hbm_bytes


def _reachable_chips(qs, labels):
    """Every whole chip count a student reaches from a total the total-bytes question accepts: the fewest
    that hold it (ceil), or the quotient rounded down as the book does at its own values."""
    total = qs["ch06-a5-total-bytes"]
    lo, hi = total.tolerance.bounds(total.reference)
    hbm = _hbm(labels)
    return range(math.floor(lo / hbm), math.ceil(hi / hbm) + 1)


@pytest.mark.parametrize("labels,qs", A5, ids=[_id(c[0]) for c in A5])
def test_min_chips_accepts_every_whole_number_from_an_accepted_total(labels, qs):
    q = qs["ch06-a5-min-chips"]
    hbm = _hbm(labels)
    total = qs["ch06-a5-total-bytes"]
    # the 3-figure total a student carries, as docs/feedback.md tells them to
    carried = round_figures(total.reference, 3)
    assert total.tolerance.accepts(total.reference, carried)
    assert math.ceil(carried / hbm) in _reachable_chips(qs, labels)
    for n in _reachable_chips(qs, labels):
        ok, why = _passes(q, n)
        assert ok, (labels, n, why)


@pytest.mark.parametrize("labels,qs", A5, ids=[_id(c[0]) for c in A5])
def test_min_chips_still_refuses_its_slip(labels, qs):
    q = qs["ch06-a5-min-chips"]
    for slip in q.slips:
        ok, why = _fails(q, slip.answer)
        assert ok, (labels, slip, why)
        assert both_judges(q, slip.answer)[0].diagnosis == slip.diagnosis


@pytest.mark.parametrize("labels,qs", A5, ids=[_id(c[0]) for c in A5])
def test_days_on_that_many_chips_pass_at_every_credited_chip_count(labels, qs):
    """Days on n chips, n any whole number min-chips accepts, to 3 figures, pass; so does the book's method
    at its own values (pod-days x pod / chips)."""
    from solutions.ch06_applied_training import A3_FLOPS, DAY, MFU
    chip = labels["chip"]
    q = qs["ch06-a5-days"]
    for n in _reachable_chips(qs, labels):
        assert qs["ch06-a5-min-chips"].tolerance.accepts(qs["ch06-a5-min-chips"].reference, n)
        days = A3_FLOPS / (n * chip.bf16_flops_per_s * MFU) / DAY
        for answer in (days, round_figures(days, 3)):
            ok, why = _passes(q, answer)
            assert ok, (labels, n, answer, q.reference, why)
    _slips_and_factors_fail(q, labels, named=False)


# --- the book's rounding --------------------------------------------------------------------------------

E5 = _combos(CH09, "ch09-e5")


@pytest.mark.parametrize("labels,qs", E5, ids=[_id(c[0]) for c in E5])
def test_reduce_scatter_time_to_the_books_two_figures_passes(labels, qs):
    """The book's "roughly 1.1 ms": at the book's values the time rounded to 2 figures passes, up or down; at every
    other combo the time to 3 figures does (a width for the book's rounding holds at its values only:
    tests/test_book_widths.py)."""
    q = qs["ch09-e6-time"]
    answers = [q.reference, round_figures(q.reference, 3)]
    if labels == _setting(CH09, "ch09-e5").book:
        answers += [round_figures(q.reference, 2), f"{round_figures(q.reference, 2) * 1e3:.2g} ms"]
    for answer in answers:
        ok, why = _passes(q, answer)
        assert ok, (labels, answer, q.reference, why)
    _slips_and_factors_fail(q, labels)


@pytest.mark.parametrize("labels,qs", [(dict(B=56, D=8192), "2.0 ms"), (dict(B=56, D=6144), "1.5 ms")])
def test_reduce_scatter_time_rounded_up_at_other_values_is_close(labels, qs):
    """Two readings that round up, 1.957 ms and 1.468 ms to 2 figures, away from the book's values: held to the
    course's precision, as a sibling question is, and told they are close, by both judges."""
    s = _setting(CH09, "ch09-e5")
    q = next(q for q in s.questions(s.labels(labels)) if q.qid == "ch09-e6-time")
    grader, selfcheck = both_judges(q, qs)
    assert grader.diagnosis == selfcheck.diagnosis == "close", (labels, grader, selfcheck)


A2 = _combos(CH06, "ch06-a2")


@pytest.mark.parametrize("labels,qs", A2, ids=[_id(c[0]) for c in A2])
def test_seconds_per_token_to_the_books_one_figure_passes(labels, qs):
    """The book's "about 1 ms" for the v5p's 0.915 ms: at the book's chip a one-figure reading and the band above
    it pass; at every chip the time to 3 figures does (a width for the book's rounding holds at its values only:
    tests/test_book_widths.py)."""
    q = qs["ch06-a2-seconds-per-token"]
    answers = [q.reference, round_figures(q.reference, 3)]
    if labels == _setting(CH06, "ch06-a2").book:
        answers += [round_figures(q.reference, 1), q.reference * 1.1, q.reference * 0.98,
                    f"{round_figures(q.reference, 1) * 1e3:.1g} ms"]
    for answer in answers:
        ok, why = _passes(q, answer)
        assert ok, (labels, answer, q.reference, why)
    _slips_and_factors_fail(q, labels, factors=(2, 0.5, 1 / 3, 3))


# --- a derived question is at least as tolerant as the answer it is built from (chapters 7, 8, 11, 12) ---------

# (chapter, upstream, downstream) where the downstream is the upstream times a factor of the student's own values
# (a length, a count, a price), in one setting: an upstream answer the grader credits, carried forward, must be
# credited downstream at every combo.
PROPORTIONAL = (
    ("ch07_inference", "ch07-q5-total-params", "ch07-q6-weight-time"),
    ("ch08_applied_inference", "ch08-iq1-kv-32k", "ch08-iq1-kv-240"),
    ("ch08_applied_inference", "ch08-iq3-tokens-per-s", "ch08-iq3-per-chip"),
    ("ch08_applied_inference", "ch08-iq6-step-full", "ch08-iq6-decode-time"),
    ("ch08_applied_inference", "ch08-iq10-prefill", "ch08-iq12-ratio"),
    ("ch08_applied_inference", "ch08-iq7-bf16", "ch08-iq7-int8"),
    ("ch08_applied_inference", "ch08-iq7-int8", "ch08-iq7-int4"),
    ("ch08_applied_inference", "ch08-iq8-bf16", "ch08-iq8-int8"),
    ("ch08_applied_inference", "ch08-iq8-int8", "ch08-iq8-int4"),
    ("ch11_capstone", "ch11-c1-train-flops", "ch11-c1-h100-cost"),
    ("ch11_capstone", "ch11-c1-train-days", "ch11-c1-train-cost"),
    ("ch12_gpus", "ch12-e10-tokens", "ch12-e10-per-gpu"),
    ("ch12_gpus", "ch12-e8-dp-scaleout", "ch12-e8-llama-batch"),
    ("ch12_gpus", "ch12-e8-dp-scaleout", "ch12-e8-two-nodes"),
)


def _pair_combos(chapter_name, up, down):
    chapter = load_chapter(chapter_name)
    s = next(s for s in chapter.settings if up in s.qids and down in s.qids)
    return [(s.labels(v), {q.qid: q for q in s.questions(s.labels(v))}) for v in s.combos()]


def _relative_reach(q):
    r = float(q.reference)
    lo, hi = q.tolerance.bounds(r)
    return hi / r - 1, 1 - lo / r


@pytest.mark.parametrize("chapter,up,down", PROPORTIONAL, ids=[f"{u}->{d}" for _, u, d in PROPORTIONAL])
def test_a_proportional_derived_question_reaches_as_far_as_its_upstream(chapter, up, down):
    """ch08-iq6-step-full accepts up to +3%, and decode-time (decode x that step) accepted only +2%: "20.0 ms",
    credited, times 300 tokens was refused ("6.00 s" close). Each side of the downstream's accepted interval
    reaches, relative to its reference, at least as far as the upstream's."""
    combos = _pair_combos(chapter, up, down)
    for labels, qs in combos:
        u, d = _relative_reach(qs[up]), _relative_reach(qs[down])
        assert d[0] >= u[0] - 1e-9 and d[1] >= u[1] - 1e-9, (labels, up, u, down, d)
    assert combos


IQ5 = _pair_combos("ch08_applied_inference", "ch08-iq6-step-full", "ch08-iq6-decode-time")


@pytest.mark.parametrize("labels,qs", IQ5, ids=[f"{c['context']}-{c['decode']}" for c, _ in IQ5])
def test_decode_time_credits_every_credited_step_carried_forward(labels, qs):
    """Every step the step question credits (its ends, their 3-figure roundings, the review's "20.0 ms"), times the
    student's decode length, exact or to 3 figures, passes decode-time in both judges."""
    step, decode_q = qs["ch08-iq6-step-full"], qs["ch08-iq6-decode-time"]
    lo, hi = step.tolerance.bounds(float(step.reference))
    steps = [x for x in (lo, hi, round_figures(lo, 3), round_figures(hi, 3), 0.0200, 0.0190)
             if step.tolerance.accepts(float(step.reference), x)]
    assert 0.0200 in steps
    for s in steps:
        assert _passes(step, s)[0], (labels, s)
        for answer in (labels["decode"] * s, round_figures(labels["decode"] * s, 3)):
            ok, why = _passes(decode_q, answer)
            assert ok, (labels, s, answer, decode_q.tolerance, why)
    _slips_and_factors_fail(decode_q, labels, named=False)


def test_the_review_s_decode_time_case():
    """Combo {context 8192, decode 300}: the review's credited "20.0 ms" step carried forward."""
    qs = next(q for c, q in IQ5 if c == {"context": 8192, "decode": 300})
    assert _passes(qs["ch08-iq6-step-full"], "20.0 ms")[0]
    ok, why = _passes(qs["ch08-iq6-decode-time"], "6.00 s")
    assert ok, why
