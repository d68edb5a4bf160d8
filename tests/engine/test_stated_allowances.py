"""What a prompt says is accepted is accepted at every case the grader draws, not only at the public cases the
self-check sees; and what the self-check ticks, the grader gives full marks at every draw. Chapter 4's parameter count
once said the norms may be counted or left out: on the LLaMA sizes they are 0.001% of the count, but on the small
models drawn at grading time they reached 0.025%, past a tolerance of 0.01%, and about one student in twenty who
counted them lost points after a tick. The prompt now asks for the count without them, and its public cases include
a small model, so that the self-check refuses a count with them as the grader does. Each allowance a prompt states
is listed here, and judged by the grader over many students' drawn cases."""

import json

import pytest

from autograder import kinds
from autograder.checks import judge
from autograder.kinds.function import drawn_probes
from autograder.questions import load_chapter
from solutions.ch04_transformers import param_count
from tests.chapter_checks import printed

SEEDS = 300


def int_count(L, D, F, N, K, H, V, E, tied):
    return int(param_count(L, D, F, N, K, H, V, E, tied))


ALLOWED = [  # (chapter, question, an answer its prompt says is accepted)
    ("ch04_transformers", "ch04-cx5-param-count", int_count),
]


@pytest.mark.parametrize("chapter, qid, answer", ALLOWED, ids=[f"{q}-{a.__name__}" for _, q, a in ALLOWED])
def test_an_allowance_the_prompt_states_holds_at_every_drawn_case(chapter, qid, answer):
    q = load_chapter(chapter)[qid]
    lost = []
    for i in range(SEEDS):
        seed = f"student-{i}"
        record = json.loads(json.dumps(kinds.encode(printed(q), answer, drawn_probes(q, seed))))
        v = judge(q, record, seed)
        if v.score != 1:
            lost.append((seed, v.score, v.message[:200]))
    assert not lost, f"{len(lost)} of {SEEDS} students lose points: {lost[:3]}"


def with_layer_norms(L, D, F, N, K, H, V, E, tied):
    return param_count(L, D, F, N, K, H, V, E, tied) + 2 * L * D


def test_a_count_with_the_norms_is_refused_by_the_self_check_as_by_the_grader():
    """The self-check refused it (a small model among its cases); the grader, on the drawn cases, mostly of large
    models whose norms lie inside a tolerance of 0.01%, gave it full marks for 37 students in 40. The count is now
    checked exactly, so it is refused at every draw, with the same hint."""
    from course.answers import verdict

    q = load_chapter("ch04_transformers")["ch04-cx5-param-count"]
    own = verdict(q.qid, with_layer_norms)
    assert own.score < 1, own.message
    assert "norms" in own.message or "norms" in str(getattr(own, "hint", "")), own.message
    for i in range(40):
        seed = f"student-{i}"
        record = json.loads(json.dumps(kinds.encode(printed(q), with_layer_norms, drawn_probes(q, seed))))
        v = judge(q, record, seed)
        assert v.score == 0 and "norms" in v.message, (seed, v.score, v.message)
