"""Chapter 1 (Rooflines): what is particular to the chapter (test_every_chapter.py runs its records)."""

import pytest

from autograder.questions import load_chapter
from tests.chapter_checks import both_judges

pytestmark = pytest.mark.ch01
CHAPTER = load_chapter("ch01_rooflines")


def test_chapter_size():
    assert CHAPTER.total_points >= 35


def test_e7_names_the_rate_and_hints_the_doubled_one():
    """E7 takes the VPU rate as hw gives it (one TensorCore's) against the chip's HBM, and says so; a student who
    doubles it for the v5p's two TensorCores is refused with a hint that says which rate the question takes."""
    from course import hardware as hw

    q = CHAPTER["ch01-e7-vpu-intensity"]
    assert "TPU_V5P_VPU_FLOPS_PER_S" in q.prompt and "one TensorCore" in q.prompt, q.prompt
    doubled = hw.TPU_V5P.tensorcores_per_chip * hw.TPU_V5P_VPU_FLOPS_PER_S / hw.TPU_V5P.hbm_bytes_per_s
    for v in both_judges(q, doubled):
        assert not v.ok and "Hint:" in v.message and "TensorCore" in v.message.split("Hint:")[1], v.message


# --- the book's own rounded constants pass alike in every chapter (test_every_chapter.py) --------------------


def test_the_same_quantity_passes_alike_with_the_book_constants():
    """The two the review met: the H100's critical batch at 1e15 / 3.35e12 (correct in ch12-q13) and the v5e's
    2C / W_link with the peak rounded to 2e14 (correct in ch03-q6-b) pass here too, in both judges."""
    from course import hardware as hw

    q5 = CHAPTER.variant({"ch01-q5": {"gpu": "H100"}})["ch01-q5-critical-batch"]
    e4 = CHAPTER.variant({"ch01-e4": {"chip": "TPU v5e"}})["ch01-e4-d-threshold"]
    for q, answer in ((q5, 1e15 / 3.35e12), (e4, 2 * 2e14 / hw.TPU_V5E.ici_bytes_per_s_per_link)):
        assert all(v.ok for v in both_judges(q, answer)), q.qid


def test_every_drawn_crossover_case_has_a_crossover():
    """As every public case has: a negative B* (the weights' bytes outlasting the math at every batch) is no batch,
    and a right answer that solved for a positive B, or guarded that case, lost its marks there."""
    import random

    from solutions.ch01_rooflines import CROSSOVER_PROBES, crossover_reference, draw_crossover

    rng = random.Random(2026)
    drawn = [crossover_reference(**draw_crossover(rng, p)) for _ in range(100) for p in CROSSOVER_PROBES]
    assert all(b > 0 for b in drawn) and all(crossover_reference(**p) > 0 for p in CROSSOVER_PROBES)
