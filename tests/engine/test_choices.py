"""Fair reading of choices: any case or spelling of an option, and number options by value; the grader
and the self-check read them alike. Near misses stay wrong or unreadable."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import sympy as sp

from autograder import fingerprint, kinds
from autograder.checks import judge
from autograder.questions import AuthoringError, Choice, Slip
from autograder.verdict import Status

COLLECTIVE = Choice(qid="ch99-c1-collective", points=1, prompt="p", reference="all-reduce",
                    options=("all-gather", "all-reduce", "reduce-scatter", "all-to-all"),
                    slips=(Slip("all-gather", "wrong_option", "the partial sums must be added."),))
BANDWIDTH = Choice(qid="ch99-c2-bandwidth", points=1, prompt="p", reference="150", options=("450", "370", "150"),
                   slips=(Slip("370", "wrong_option"),))


def both(q: Choice, answer: object):
    """As a kernel records the answer (``kinds.encode``), then the grader's and the self-check's verdicts."""
    fp = fingerprint.make(q)
    encoded = kinds.encode(fp, answer)
    return judge(q, encoded), fingerprint.selfcheck(fp, q.qid, encoded)


@pytest.mark.parametrize(("q", "answer"), [
    (COLLECTIVE, "all-reduce"), (COLLECTIVE, "AllReduce"), (COLLECTIVE, "all reduce"), (COLLECTIVE, "ALL_REDUCE"),
    (COLLECTIVE, "  All-Reduce "), (COLLECTIVE, "psum"), (BANDWIDTH, "150"), (BANDWIDTH, 150), (BANDWIDTH, 150.0),
    (BANDWIDTH, " 150 "), (BANDWIDTH, "150.0"),
])
def test_honest_spellings_are_right(q, answer):
    graded, checked = both(q, answer)
    assert graded.ok and checked.ok, (graded, checked)


@pytest.mark.parametrize(("q", "answer", "status", "diagnosis"), [
    (COLLECTIVE, "AllGather", Status.INCORRECT, "wrong_option"),  # another option, however spelled
    (COLLECTIVE, "all-reduces", Status.INVALID, "unknown_option"),
    (BANDWIDTH, 370, Status.INCORRECT, "wrong_option"),
    (BANDWIDTH, 151, Status.INVALID, "unknown_option"),  # a value that is no option is unreadable, not wrong
    (BANDWIDTH, "150 GB/s", Status.INVALID, "unknown_option"),
    (BANDWIDTH, True, Status.INVALID, "wrong_type"),
])
def test_near_misses_are_not_right(q, answer, status, diagnosis):
    graded, checked = both(q, answer)
    assert (graded.status, graded.diagnosis) == (checked.status, checked.diagnosis) == (status, diagnosis)
    assert graded.message == checked.message


FRACTION = Choice(qid="ch99-c4-fraction", points=1, prompt="p", reference="1/4", options=("1/4", "1/2", "1", "2"),
                  slips=(Slip("1/2", "wrong_option"),))


@pytest.mark.parametrize("answer", [0.25, 1 / 4, Fraction(1, 4), sp.Rational(1, 4), np.float64(0.25), "0.25", "25%",
                                    " 1 / 4 ", "2/8", "1/4", sp.Integer(1) / 4, np.float32(0.25)],
                         ids=lambda a: f"{type(a).__name__}-{a}")
def test_an_option_written_as_a_fraction_is_recognised_by_its_value(answer):
    graded, checked = both(FRACTION, answer)
    assert graded.ok and checked.ok, (graded, checked)


@pytest.mark.parametrize(("answer", "status", "diagnosis"), [
    (0.5, Status.INCORRECT, "wrong_option"), ("0.5", Status.INCORRECT, "wrong_option"),
    (Fraction(2, 1), Status.INCORRECT, "wrong_option"), (0.3, Status.INVALID, "unknown_option"),
    ("1/3", Status.INVALID, "unknown_option"), ("1/4 ms", Status.INVALID, "unknown_option"),
])
def test_a_fraction_option_is_not_matched_by_another_value(answer, status, diagnosis):
    graded, checked = both(FRACTION, answer)
    assert (graded.status, graded.diagnosis) == (checked.status, checked.diagnosis) == (status, diagnosis)


def test_a_slip_hint_is_shown_for_any_spelling_of_it():
    graded, checked = both(COLLECTIVE, "AllGather")
    assert graded.message.endswith("Hint: the partial sums must be added.") and checked.message == graded.message


PLAN = Choice(qid="ch99-c8-plan", points=1, prompt="p", reference="tp8-pp8-zero",
              options=("tp8-dp512", "tp8-zero3", "tp8-pp8-zero"), slips=(Slip("tp8-dp512", "wrong_option"),))


@pytest.mark.parametrize(("answer", "score"), [("tp8+pp8+zero", 1), ("TP8 + PP8 + ZeRO", 1), ("tp8 / pp8 / zero", 1),
                                               ("zero-pp8-tp8", 1), ("tp8+dp512", 0), ("tp8-pp8", 0)])
def test_a_plan_is_its_parts_in_any_order_and_with_any_joiner(answer, score):
    """A parallelism plan is the product of its parts: written as them added up, listed, or in another order, it is
    the option (``choice._unordered_parts``); a sequence ("pcie-ici") keeps its order, and "1/4" stays a value."""
    graded, checked = both(PLAN, answer)
    assert graded.score == checked.score == score, (graded.message, checked.message)


def test_options_that_read_the_same_are_an_authoring_error():
    with pytest.raises(AuthoringError, match="read the same"):
        Choice(qid="ch99-c3-twins", points=1, prompt="p", reference="all-reduce", options=("all-reduce", "AllReduce"),
               slips=(Slip("AllReduce", "wrong_option"),))


BOUND = Choice(qid="ch99-c5-bound", points=1, prompt="p", reference="memory", options=("compute", "memory"),
               slips=(Slip("compute", "wrong_option"),))
MESH = Choice(qid="ch99-c6-mesh", points=1, prompt="p", reference="16x4", options=("8x8", "16x4", "32x2"),
              slips=(Slip("8x8", "wrong_option"),))
BOUND_OPTIONS = Choice(qid="ch99-c7-bound", points=1, prompt="p", reference="comms-bound",
                       options=("compute-bound", "comms-bound"), slips=(Slip("compute-bound", "wrong_option"),))


@pytest.mark.parametrize(("q", "answer"), [
    (BOUND, "memory-bound"), (BOUND, "Memory bound"), (BOUND, "memory_bound"), (BOUND, "memorybound"),
    (MESH, "16×4"), (MESH, "16 × 4"), (MESH, "16X4"), (BOUND_OPTIONS, "comms"), (BOUND_OPTIONS, "Comms-Bound"),
])
def test_the_words_a_question_leaves_implied_are_read_too(q, answer):
    """'memory-bound' for the option 'memory' and '16×4' for '16x4' say the option: refusing them as unknown
    options costs an honest student the point."""
    graded, checked = both(q, answer)
    assert graded.ok and checked.ok, (graded, checked)


@pytest.mark.parametrize(("q", "answer", "status"), [
    (BOUND, "compute-bound", Status.INCORRECT), (MESH, "8×8", Status.INCORRECT), (BOUND, "bound", Status.INVALID),
    (MESH, "16x4x1", Status.INVALID), (BOUND_OPTIONS, "bound", Status.INVALID),
])
def test_implied_words_do_not_make_a_wrong_option_right(q, answer, status):
    graded, checked = both(q, answer)
    assert graded.status == checked.status == status, (graded, checked)


def test_options_that_read_the_same_once_bound_is_dropped_are_an_authoring_error():
    with pytest.raises(AuthoringError):
        Choice(qid="ch99-c8-same", points=1, prompt="p", reference="memory", options=("memory", "memory-bound"))


def _choice(options: tuple[str, ...], reference: str) -> Choice:
    wrong_one = next(o for o in options if o != reference)
    return Choice(qid="ch99-c9-loose", points=1, prompt="p", reference=reference, options=options,
                  slips=(Slip(wrong_one, "wrong_option"),))


STRATEGY = _choice(("dp", "fsdp", "tp", "fsdp+tp"), "fsdp+tp")
LEVEL = _choice(("node", "leaf", "spine"), "leaf")
CHIP = _choice(("TPU v5p", "H100"), "TPU v5p")
COMMS = _choice(("compute", "communication"), "communication")
MEMORY = _choice(("compute", "memory"), "memory")
PLACE = _choice(("HBM", "VMEM", "host"), "HBM")
BOUNDS = _choice(("ici", "hbm", "flops"), "hbm")
SLICE = _choice(("2x2", "4x2", "4x4", "8x8"), "4x2")
AXES = _choice(("none", "all-gather over X", "all-reduce over X", "all-reduce over Y"), "all-reduce over Y")


@pytest.mark.parametrize(("q", "answer"), [
    (STRATEGY, "tp+fsdp"), (STRATEGY, "fsdp-tp"), (STRATEGY, "TP + FSDP"), (STRATEGY, "fsdp and tp"),
    (STRATEGY, "fsdp & tp"), (LEVEL, "leaf level"), (LEVEL, "leaf switches"), (LEVEL, "the leaf switch"),
    (CHIP, "v5p"), (CHIP, "tpu-v5p"), (COMMS, "comms"), (COMMS, "comm"), (COMMS, "communications"),
    (COMMS, "comms-bound"), (MEMORY, "bandwidth"), (MEMORY, "memory bandwidth"), (MEMORY, "HBM bandwidth"),
    (_choice(("flops", "weights"), "flops"), "FLOP-bound"), (_choice(("same", "double", "half"), "same"), "unchanged"),
    (_choice(("same", "double", "half"), "same"), "stays the same"), (_choice(("1", "2", "3", "4"), "2"), "two"),
    (_choice(("1/4", "1/2", "1", "2"), "1/4"), "a quarter"), (_choice(("1/4", "1/2", "1", "2"), "1/2"), "half"),
    (_choice(("yes", "never"), "never"), "no"), (_choice(("D=F=4096", "D=F=1024"), "D=F=4096"), "4096"),
    (_choice(("all-reduce", "reduce-scatter"), "reduce-scatter"), "all-reduce-scatter"),
    # a step's bounds: memory is HBM beside FLOPs and ICI, and bandwidth is the network beside compute alone
    (BOUNDS, "memory"), (BOUNDS, "memory-bound"), (BOUNDS, "HBM reads"),
    (_choice(("compute-bound", "comms-bound"), "comms-bound"), "ICI-bound"),
    (_choice(("compute-bound", "comms-bound"), "comms-bound"), "bandwidth-bound"),
    # a v5e slice by its chips
    (SLICE, "8 chips"), (SLICE, "8"),
    (_choice(("heads-then-batch", "sequence"), "heads-then-batch"), "by heads, then batch"),
    (_choice(("yes", "no"), "no"), "no."), (_choice(("yes", "no"), "no"), False),
    (_choice(("yes", "no"), "yes"), np.True_),
    # a collective by its jax name and its axis in other words; a sequence of two with another joiner, in order
    (AXES, "psum over Y"), (AXES, "all-reduce on Y"), (AXES, "all-reduce along Y"), (AXES, "all-reduce (Y)"),
    (_choice(("dcn", "pcie-ici"), "pcie-ici"), "PCIe then ICI"), (_choice(("dcn", "pcie-ici"), "pcie-ici"), "pcie+ici"),
    (_choice(("fsdp", "tensor"), "tensor"), "TP"), (_choice(("fsdp", "tensor"), "tensor"), "tensor parallelism"),
    (_choice(("none", "all-reduce"), "none"), "no collective"), (_choice(("none", "all-reduce"), "none"), "nothing"),
    (_choice(("raises", "all-reduce"), "raises"), "it raises an error"),
    (_choice(("easier", "same", "harder"), "harder"), "more difficult"),
])
def test_an_option_said_in_other_common_words_is_that_option(q, answer):
    """A reordered pair ("tp+fsdp"), the option with the noun it names ("leaf switches"), a chip without its maker's
    word ("v5p"), a usual short form ("comms"): each says one option, and refusing it sent an honest student back to
    the list of options."""
    graded, checked = both(q, answer)
    assert graded.ok and checked.ok, (graded.message, checked.message)


@pytest.mark.parametrize(("q", "answer"), [
    (STRATEGY, "dp+tp"), (STRATEGY, "fsdp+tp+dp"), (STRATEGY, "tp"), (LEVEL, "spine level"), (CHIP, "v5e"),
    (COMMS, "compute-bound"), (MEMORY, "compute"), (PLACE, "memory"), (PLACE, "bandwidth"),
    (_choice(("latency", "bandwidth"), "bandwidth"), "memory"), (_choice(("1", "2", "3", "4"), "2"), "three"),
    (_choice(("same", "double", "half"), "same"), "double"), (_choice(("D=F=4096", "D=F=1024"), "D=F=4096"), "1024"),
    (_choice(("dp4-mp2", "dp2-mp4"), "dp4-mp2"), "4"), (_choice(("8x8", "16x4"), "16x4"), "16"),
    (SLICE, "2x8"), (SLICE, "16 chips"), (_choice(("8x8", "16x4"), "16x4"), "64 chips"),
    (_choice(("yes", "no"), "no"), True), (BOUNDS, "VMEM"),
    (AXES, "psum over X"), (AXES, "all-gather (Y)"), (_choice(("dcn", "pcie-ici"), "pcie-ici"), "ICI then PCIe"),
    # a mesh the other way round is another plan; bandwidth beside ICI and HBM names neither; a bare number is no
    # reason; a list of two is not the fusion of them
    (_choice(("16x4", "8x8", "4x16"), "16x4"), "4x16"), (_choice(("16x4", "8x8"), "16x4"), "4x16"),
    (BOUNDS, "bandwidth"), (BOUNDS, "bandwidth-bound"),
    (_choice(("4-byte-words", "cache-lines"), "4-byte-words"), "4"),
    (_choice(("all-reduce", "reduce-scatter"), "reduce-scatter"), "all-reduce, scatter"),
])
def test_common_words_never_make_another_or_an_unknown_answer_right(q, answer):
    graded, checked = both(q, answer)
    assert not graded.ok and not checked.ok and graded.status == checked.status, (graded.message, checked.message)
