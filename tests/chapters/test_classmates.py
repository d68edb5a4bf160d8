"""A classmate's answer is no answer: where a range that reads the book's numbers is kept at every variant, it
must not reach the reference of a neighbouring variant (ch12-q52-tp-limit, whose F / 1995 reading
plus 2% let 9 of 72 ordered pairs of combos pass each other's reference)."""

import pytest

from autograder.questions import load_chapter
from solutions._kit import BOOK_H100_TP_DIVISOR
from tests.chapter_checks import both_judges

CH12 = load_chapter("ch12_gpus")
Q52 = CH12.setting_of("ch12-q52-tp-limit")
COMBOS = [(c, {q.qid: q for q in Q52.build(**c)}) for c in Q52.combos()]


@pytest.mark.parametrize("i", range(len(COMBOS)))
def test_q52_tp_limit_refuses_every_classmate_s_reference(i):
    combo, qs = COMBOS[i]
    q = qs["ch12-q52-tp-limit"]
    assert all(v.ok for v in both_judges(q, combo["F"] / BOOK_H100_TP_DIVISOR)), combo
    for other, oqs in COMBOS:
        theirs = float(oqs["ch12-q52-tp-limit"].reference)
        if theirs == float(q.reference):
            continue  # the same model: the same answer
        grader, selfcheck = both_judges(q, theirs)
        assert not grader.ok and not selfcheck.ok, (combo, other, theirs, q.tolerance)
