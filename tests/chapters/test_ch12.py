"""Chapter 12 (GPUs): CX4's thresholds against the syllabus (test_every_chapter.py runs the records and
the book's and derived answers)."""

import pytest

from autograder.questions import load_chapter
from solutions._kit import BOOK_H100_TP_DIVISOR
from solutions.ch12_gpus import gpu_intensity
from tests.chapter_checks import both_judges

pytestmark = pytest.mark.ch12
CHAPTER = load_chapter("ch12_gpus")

# Thresholds the syllabus pins for CX4 (Q1.3, Q5.1, E8), against the function's reference.
CX4_SYLLABUS = {("H100", "hbm"): 291.2, ("B200", "hbm"): 287.5, ("H100", "nvlink"): 2200, ("B200", "nvlink"): 2556,
                ("H800", "nvlink"): 3300, ("H100", "scaleout"): 2475, ("B200", "scaleout"): 5750}


@pytest.mark.parametrize(("chip", "channel"), sorted(CX4_SYLLABUS))
def test_cx4_matches_the_syllabus(chip, channel):
    assert gpu_intensity(chip, channel) == pytest.approx(CX4_SYLLABUS[chip, channel], rel=0.005)


def test_chapter_size():
    assert CHAPTER.total_points >= 80


def test_q16_clock_is_asked_and_read_in_hz():
    """The prompt asks for Hz: the question reads Hz and GHz, and a bare number of GHz is a unit slip."""
    q = CHAPTER["ch12-q16-b200-clock"]
    assert q.unit == "Hz"
    ghz = q.reference / 1e9
    for answer in (f"{ghz:.3f} GHz", f"{ghz:.3f}e9 Hz", f"{ghz * 1e3:.1f} MHz", q.reference):
        assert all(v.ok for v in both_judges(q, answer)), answer
    for v in both_judges(q, round(ghz, 2)):
        assert v.diagnosis.startswith("unit:") and "in GHz" in v.message, v.message


def test_cx1_times_name_the_exact_form_and_the_rough_one_gets_a_hint():
    """CX1's times are the per-level ring form, (N - 1)/N included: the prompts say so, and bytes / W (the rough
    form PQ1 also asks for) gets a hint naming the factor, at every choice of the setting."""
    setting = CHAPTER.setting_of("ch12-cx1-nvlink-time")
    for combo in setting.combos():
        qs = {q.qid: q for q in setting.build(**combo)}
        node, nbytes = combo["node"], combo["nbytes"]
        rough = {"ch12-cx1-nvlink-time": [nbytes / node.nvlink_bytes_per_s_per_gpu],
                 "ch12-cx1-ib-time": [nbytes / min(node.nvlink_bytes_per_s_per_gpu, node.egress_bytes_per_s),
                                      nbytes / node.egress_bytes_per_s]}
        for qid, answers in rough.items():
            assert "(N - 1)/N" in qs[qid].prompt, qs[qid].prompt
            for answer in answers:
                for v in both_judges(qs[qid], answer):
                    assert not v.ok and "Hint:" in v.message, (combo, qid, v.message)


def test_q52_tp_limit_takes_the_books_divisor_for_every_model():
    """The book divides F by 1995 (its 14.37), not C / W = 2200: that reading passes for every model the setting
    deals, not only the book's; a limit 5% above it, or NVLink's per-node bandwidth, does not."""
    setting = CHAPTER.setting_of("ch12-q52-tp-limit")
    for combo in setting.combos():
        q = {q.qid: q for q in setting.build(**combo)}["ch12-q52-tp-limit"]
        book = combo["F"] / BOOK_H100_TP_DIVISOR
        assert all(v.ok for v in both_judges(q, book)), combo
        assert not any(v.ok for v in both_judges(q, book * 1.05)), combo


# A slip at the book's values and the words of the hint it gets: a clock, a switch level or a byte count mistaken.
H100_CORES = 132 * 128
HINTED = [
    ("ch12-q12-vector-flops", H100_CORES * 1.98e9, "boost clock"),  # the boost clock for the base one dealt
    ("ch12-q12-tensor-ratio", 989e12 / (H100_CORES * 1.59e9), "boosted"),  # the base clock where boosted is asked
    ("ch12-q17-chip-intensity", H100_CORES * 1.59e9 / 3.35e12, "boosted"),
    ("ch12-q31-su-bandwidth", 32 * 50e9, "one leaf switch"),  # the book's arithmetic (its erratum)
    ("ch12-q23-allgather-time", 1.04e-3 / 2, "bf16 is 2 bytes"),  # bf16 counted as 1 byte
]


@pytest.mark.parametrize(("qid", "answer", "words"), HINTED)
def test_a_slip_gets_the_hint_of_its_cause(qid, answer, words):
    for v in both_judges(CHAPTER[qid], answer):
        assert not v.ok and words in v.message, (qid, answer, v.message)
