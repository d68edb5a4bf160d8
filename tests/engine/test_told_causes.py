"""A wrong number is told a cause only where the evidence holds it (review of chapters 7, 8, 11 and 12): a hint that
sounds certain sends a tired student after a mistake they did not make."""

from __future__ import annotations

import pytest

from autograder.questions import MAYBE, load_chapter
from tests.chapter_checks import both_judges

CH08 = load_chapter("ch08_applied_inference")
CH12 = load_chapter("ch12_gpus")


def _both(q, answer):
    g, s = both_judges(q, answer)
    assert (g.status, g.diagnosis, g.message) == (s.status, s.diagnosis, s.message), (g, s)
    return g


def test_near_a_slip_but_not_its_figures_the_hint_is_one_possible_cause():
    """1.174 ms, a wrong bandwidth, lay within 2% of the slip that drops the ring's (N-1)/N and was told to keep that
    factor, which it had; the slip's own 3 figures are told as before."""
    q = CH12["ch12-q23-allgather-time"]
    slip = next(s for s in q.slips if "(N - 1)/N" in s.hint)
    assert MAYBE + slip.hint in _both(q, repr(slip.answer * 0.984)).message
    for typed in (repr(slip.answer), f"{slip.answer:.3g}"):
        told = _both(q, typed).message
        assert told.endswith("Hint: " + slip.hint), told


def test_eight_times_a_value_in_bytes_is_bits_as_likely_as_the_slip():
    """The KV cache per token written in bits is 8x, as the slip that counts all heads, not the K key/value ones."""
    q = CH08["ch08-iq1-kv-per-token"]
    eight = next(s for s in q.slips if abs(s.answer / q.reference - 8) < 1e-9)
    assert eight.maybe
    assert MAYBE in _both(q, repr(eight.answer)).message


@pytest.mark.parametrize("answer", ["84", "87"])
def test_a_whole_number_one_past_a_range_of_counts_is_off_by_one(answer):
    """"The fewest chips", 85 or 86: 84 (rounded down) and 87 were each "Close, but the question accepts only values
    within a set range", with no word of the count; as for an exact count, they are off by one."""
    q = CH08["ch08-iq1-chips"]
    assert q.tolerance.of_counts
    assert _both(q, answer).message.startswith("Off by one: check where the count starts and ends")


def test_a_function_with_other_parameter_names_is_told_the_names_matter():
    """Right arithmetic under parameter names of one's own scored 0 with "23 of 23 test cases fail", which reads as
    wrong maths; the TypeError is quoted, and the sentence after it says the check calls by the prompt's names."""
    q = load_chapter("ch07_inference")["ch07-cx1-step-time"]

    def step_time(batch, kv_seq, w_bytes, params, n, flops, bw):
        return 1.0, 2.0
    v = _both(q, step_time)
    assert "unexpected keyword argument" in v.message and "by the prompt's parameter names" in v.message, v.message


def test_a_limit_answered_as_a_formula_is_told_to_take_the_limit():
    """"S/(S+1)" where the question asks what the intensity tends to in a long context: "put in the values" alone
    sent the student after values there are none of."""
    q = load_chapter("ch07_inference")["ch07-e4-decode-limit"]
    assert "give that limit" in _both(q, "S/(S+1)").message
