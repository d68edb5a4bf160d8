"""A program slip's hint reaches the student whose program goes wrong the same way, in the grader and in
the self-check alike; a hint that could not tell its slip from other wrong programs is refused."""

import pytest

from autograder.kinds import program
from autograder.questions import AuthoringError, Program, Slip, load_chapter
from tests.chapter_checks import recorded

DP = load_chapter("ch05_training")["ch05-cx1-dp-grad"]


def _with_slips(q: Program, slips: tuple[Slip, ...]) -> Program:
    return Program(qid=q.qid, points=q.points, prompt=q.prompt, spec=q.spec, model=q.model, slips=slips)


def test_the_self_check_data_carries_each_hint_by_its_diagnosis():
    hinted = {s.diagnosis: s.hint for s in DP.slips if s.hint}
    assert hinted and program.make_print(DP)["hints"] == hinted


def test_a_hint_is_added_only_to_its_own_diagnosis():
    slip = next(s for s in DP.slips if s.hint)
    other = next(s for s in DP.slips if not s.hint)
    assert slip.hint in program.judge(DP, recorded(DP, slip.answer)).message
    assert "Hint" not in program.judge(DP, recorded(DP, other.answer)).message
    assert program.judge(DP, recorded(DP, DP.model)).ok


@pytest.mark.parametrize("diagnosis", ["wrong_values", "wrong_values@dW_in"])
def test_hints_on_wrong_values_are_told_by_the_values_not_the_diagnosis(diagnosis):
    """Two slips of wrong values may each carry a hint: neither is matched by its diagnosis, which every wrong program
    shares, but by its results (tests/grading/test_value_slips.py)."""
    q = _with_slips(DP, (Slip(DP.model, diagnosis, "one ..."), Slip(DP.model, diagnosis, "another ...")))
    assert program.slip_hints(q) == {} and [s.hint for s in program.value_slips(q)] == ["one ...", "another ..."]


def test_a_hint_on_a_diagnosis_two_slips_share_is_refused():
    with pytest.raises(AuthoringError, match="partial_sum:X"):
        _with_slips(DP, (Slip(DP.model, "partial_sum:X", "most likely ..."), Slip(DP.model, "partial_sum:X")))
