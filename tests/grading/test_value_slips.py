"""A wrong program is told what is wrong with it by its diagnosis: a psum left out, a factor, a transposition, the
wrong collectives. A slip that changes only the values (a relu after the sum, attention that skips the new token,
query heads paired with the wrong key/value heads, accepted tokens miscounted) was "differs at index (0, 0)" and
nothing more, in 36 slips of the records, and the hint a first wrong attempt unlocks spoke of collectives the program
had right. Such a slip may now carry a hint: the release keeps its results at the self-check's inputs, and a program
whose results are that slip's (the grader runs it there once more) is told the slip's hint, in both judges; a
program wrong in another way is told none."""

import pytest

import solutions.ch08_applied_inference as ch08
from autograder.kinds.program import value_slips
from autograder.questions import Program, chapter_names, load_chapter
from tests.chapter_checks import both_judges

SLIPS = [pytest.param(q, s, id=f"{q.qid}-{s.answer.__name__}", marks=getattr(pytest.mark, q.chapter))
         for name in chapter_names() for q in load_chapter(name).questions if isinstance(q, Program)
         for s in value_slips(q)]


def test_the_slips_the_reviews_met_carry_hints():
    told = {s.answer.__name__ for q in (p.values[0] for p in SLIPS) for s in value_slips(q)}
    assert {"tp_mlp_relu_after_sum", "heads_attention_unscaled", "cx3b_mha_grouping", "cx7_drops_bonus",
            "cx7_skips_new_token", "cx7_interleaves_heads"} <= told


@pytest.mark.parametrize(("q", "slip"), SLIPS)
def test_a_program_that_makes_a_value_slip_is_told_its_hint(q, slip):
    for v in both_judges(q, slip.answer):
        assert v.score == 0 and v.diagnosis.startswith("wrong_values") and slip.hint in v.message, v.message


def test_a_program_wrong_in_another_way_is_told_no_slip_of_values():
    """Chapter 8's decode attention both skipping the new token and pairing heads n % K: neither slip's results."""
    q = load_chapter("ch08_applied_inference")["ch08-cx7-decode-attention"]

    def both_mistakes(q_, k_new, v_new, k_cache, v_cache):
        def block(q_b, kn, vn, kc, vc):
            return ch08._softmax_attend(q_b, kc, vc, grouped=False)
        return ch08.smap(block, ch08.MESH_BK, ch08._DA_IN, ch08._DA_HEADS)(q_, k_new, v_new, k_cache, v_cache)

    for v in both_judges(q, both_mistakes):
        assert v.diagnosis == "wrong_values" and "Hint" not in v.message, v.message


def test_every_slip_of_wrong_values_carries_a_hint():
    """The records' slips that change only the values say what they get wrong: none is left at "differs"."""
    bare = [f"{q.qid}:{s.answer.__name__}" for name in chapter_names() for q in load_chapter(name).questions
            if isinstance(q, Program) for s in q.slips if s.diagnosis.startswith("wrong_values") and not s.hint]
    assert bare == []


def test_a_program_run_again_shares_the_notebooks_budget(tmp_path, monkeypatch):
    """The run at the self-check's inputs that tells a slip by its results got a budget of its own (300 s more per
    notebook, past the bound tests/grading/test_budgets.py holds the grader to): every run of a notebook's programs
    now draws on one budget, so a second call after the first spent it runs nothing."""
    import time

    from autograder.grading import judge

    class Runner:  # answers each program after the time it is given, or 0.2 s
        served, max_requests = 0, 10

        def alive(self):
            return True

        def ready(self, seconds):
            return True

        def request(self, payload, seconds):
            if not payload["items"]:
                return {}
            time.sleep(min(seconds, 0.2))
            return {item["qid"]: {"outputs": []} for item in payload["items"]} if seconds > 0.2 else None

    monkeypatch.setattr(judge, "_runner", lambda *args, **kwargs: Runner())
    run = judge.program_runs(tmp_path, seconds=0.5, each=1.0)
    first = run([{"qid": "a"}, {"qid": "b"}])
    again = run([{"qid": "c"}, {"qid": "d"}])
    assert set(first) == {"a"} or set(first) == {"a", "b"}, first
    assert again == {}, again
