"""A tolerance widened for the book's printed value holds at the book's values only (docs/authoring.md, "Where the
book prints a different number, widen the tolerance"). Applied at every choice of a setting, the book's rounding
("~64K" for 65,536, "about 56") graded every student dealt other values more leniently than the course promises
(docs/feedback.md: 3 significant figures, a wider margin of a couple of percent, the exact count) and than sibling
questions: ch04-e3-t-d8192 accepted 32,000 for 32,768 (2.3% off) where ch04-e3-t-gemma refused 40,000 for 40,960.

At every choice a student is dealt (``variants.dealable`` on the released data) other than the book's, each number
question's accepted interval lies within the policy's: the reference within ``POLICY`` (``TWO_PERCENT``, Number's
default and the widest margin the course names), and where the reference is no whole number, the whole number next
to it (the largest degree rounds down, the fewest chips round up); a range of whole numbers accepts no count but
those. A width whose reason holds at every value is named in ``tests/wide_tolerances.py`` with that reason."""

from __future__ import annotations

import math

import pytest

from autograder import variants
from autograder.numbers import round_figures
from autograder.questions import Number, chapter_names, load_chapter
from autograder.release import released
from solutions._kit import TWO_PERCENT
from tests.wide_tolerances import WIDE

POLICY = TWO_PERCENT.rtol
NOISE = 1e-9


def wider_than_policy(q: Number) -> str | None:
    """Why ``q``'s tolerance accepts more than the course's precision promises at its own reference, or None."""
    ref = q.reference
    lo, hi = q.tolerance.bounds(ref)
    low, high = sorted((ref * (1 - POLICY), ref * (1 + POLICY)))
    if ref >= 1 and not float(ref).is_integer():  # a bound that is no whole count: the count next to it
        low, high = min(low, math.floor(ref)), max(high, math.ceil(ref))
    if q.tolerance.is_range:  # a computed end reaches to its own 3-figure rounding (Tolerance.bounds)
        low, high = min(low, round_figures(low)), max(high, round_figures(high))
    if lo < low - NOISE * abs(ref) or hi > high + NOISE * abs(ref):
        return f"accepts [{lo:.6g}, {hi:.6g}] around {ref:.6g}, beyond [{low:.6g}, {high:.6g}]"
    if q.tolerance.of_counts:
        counts = set(range(math.ceil(lo), math.floor(hi) + 1))
        if counts - {math.floor(ref), math.ceil(ref)}:
            return f"accepts the counts {sorted(counts)} for {ref:.6g}"
    return None


def wide_at_dealt_choices(chapter: str) -> dict[str, str]:
    """The number questions of ``chapter`` wider than the policy at some choice a student is dealt (not the
    book's) where its answer is not the book's, each with the first such choice and why."""
    data, out = released(chapter), {}
    for s in load_chapter(chapter).settings:
        block = data["variants"]["settings"][s.name]
        book = variants.ordered(block, block["book"])
        at_book = {q.qid: q.reference for q in s.questions() if isinstance(q, Number)}
        for i in variants.dealable(data, s.name):
            labels = variants.ordered(block, block["combos"][i])
            if labels == book:
                continue
            for q in s.questions(labels):  # a question whose values are the book's has the book's answer and width
                why = isinstance(q, Number) and q.qid not in out and q.reference != at_book[q.qid] \
                    and wider_than_policy(q)
                if why:
                    out[q.qid] = f"at {variants.describe(labels)}: {why}"
    return out


@pytest.mark.parametrize("chapter", chapter_names())
def test_no_tolerance_widened_for_the_book_applies_at_a_students_other_values(chapter):
    wide = wide_at_dealt_choices(chapter)
    named = {qid for qid in WIDE if qid.startswith(chapter[:4] + "-")}
    assert set(wide) == named, {"wider than the policy at a student's values": {
        q: wide[q] for q in sorted(set(wide) - named)}, "named but within the policy": sorted(named - set(wide))}


def test_every_named_width_says_why():
    assert all(len(why) > 30 for why in WIDE.values())


def test_the_policy_check_sees_a_book_rounding_and_a_count_and_one_more():
    def number(reference: float, **tolerance: float) -> Number:
        from autograder.numbers import Tolerance
        from autograder.questions import Slip
        return Number(qid="ch01-zz-t", prompt="p", points=1, reference=reference,
                      tolerance=Tolerance(**tolerance), slips=(Slip(reference * 8, "ratio:8"),))

    assert wider_than_policy(number(32768, rtol=0.025))
    assert not wider_than_policy(number(32768, rtol=0.02))
    assert wider_than_policy(number(117, low=117, high=118))
    assert not wider_than_policy(number(7.48, low=7, high=7.48 * 1.02))  # the largest whole degree
    assert wider_than_policy(number(225.75, low=224, high=227))
