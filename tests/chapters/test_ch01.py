"""Chapter 1 (Rooflines): what is particular to the chapter (test_every_chapter.py runs its records)."""

import pytest

from autograder.questions import load_chapter

pytestmark = pytest.mark.ch01
CHAPTER = load_chapter("ch01_rooflines")


def test_chapter_size():
    assert CHAPTER.total_points >= 35


def _both(q, answer):
    """The grader's verdict (the record through JSON, as it travels) and the self-check's."""
    import json

    from autograder import kinds
    from autograder.checks import judge
    from tests.chapter_checks import printed, recorded

    rec = recorded(q, answer)
    return judge(q, json.loads(json.dumps(rec))), kinds.selfcheck_live(printed(q), q.qid, answer, rec)


def test_e7_names_the_rate_and_hints_the_doubled_one():
    """E7 takes the VPU rate as hw gives it (one TensorCore's) against the chip's HBM, and says so; a student who
    doubles it for the v5p's two TensorCores is refused with a hint that says which rate the question takes."""
    from course import hardware as hw

    q = CHAPTER["ch01-e7-vpu-intensity"]
    assert "TPU_V5P_VPU_FLOPS_PER_S" in q.prompt and "one TensorCore" in q.prompt, q.prompt
    doubled = hw.TPU_V5P.tensorcores_per_chip * hw.TPU_V5P_VPU_FLOPS_PER_S / hw.TPU_V5P.hbm_bytes_per_s
    for v in _both(q, doubled):
        assert not v.ok and "Hint:" in v.message and "TensorCore" in v.message.split("Hint:")[1], v.message


# --- the book's own rounded constants pass alike in every chapter -------------------------------------------

# Every Number of a chapter (every choice of every setting) as (reference, low, high), computed in a fresh
# interpreter once with the course's constants and once for each combination of a chip's values in
# hw.BOOK_VALUES, each swapped in before the chapter is imported again, so that it reaches every derivation.
_AT_BOOK_VALUES = """
import importlib, itertools, json, sys
from course import hardware as hw
from autograder.questions import Number

def numbers(chapter):
    for name in [m for m in sys.modules if m.split(".")[0] == "solutions"
                 or (m.startswith("course.") and m != "course.hardware")]:
        del sys.modules[name]
    ch = importlib.import_module("solutions." + chapter).CHAPTER
    out = {}
    for s in ch.settings:
        for combo in s.combos():
            key = json.dumps(s.labels(combo), sort_keys=True, default=str)
            out |= {q.qid + " " + key: [q.reference, *q.tolerance.bounds(q.reference)]
                    for q in s.build(**combo) if isinstance(q, Number)}
    out |= {q.qid: [q.reference, *q.tolerance.bounds(q.reference)] for q in ch.questions if isinstance(q, Number)}
    return out

chapter, runs = sys.argv[1], []
ours = numbers(chapter)
for name in sorted({c for c, _ in hw.BOOK_VALUES}):
    chip = hw.by_name(name)
    fields = [f for c, f in hw.BOOK_VALUES if c == name]
    kept = {f: getattr(chip, f) for f in fields}
    for pick in itertools.product(*([kept[f], *hw.BOOK_VALUES[name, f]] for f in fields)):
        if list(pick) == list(kept.values()):
            continue
        for f, v in zip(fields, pick):
            object.__setattr__(chip, f, v)
        try:
            runs.append([f"{name} {dict(zip(fields, pick))}", numbers(chapter)])
        finally:
            for f, v in kept.items():
                object.__setattr__(chip, f, v)
print(json.dumps([ours, runs]))
"""


def outside_at_book_values(chapter: str) -> list[str]:
    """The number questions of ``chapter`` whose answer, computed with the book's own rounded constants
    (``hw.BOOK_VALUES``) in place of the course's, falls outside their tolerance."""
    import json
    import pathlib
    import subprocess
    import sys

    root = pathlib.Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", _AT_BOOK_VALUES, chapter], cwd=root, capture_output=True, text=True,
                          check=True)
    ours, runs = json.loads(done.stdout)
    return [f"{key} at {swap}: {value / ours[key][0] - 1:+.2%}" for swap, theirs in runs
            for key, (value, *_) in theirs.items() if key in ours and not ours[key][1] <= value <= ours[key][2]]


def test_the_book_constants_pass_every_question_that_depends_on_them():
    """ch01-q5's H100 batch at the book's 1e15 / 3.35e12 passes as ch12-q13's does; ch01-e4's v5e threshold with
    the peak rounded to 2e14 passes as ch03-q6-b's does (solutions/_kit.py, rate_tolerance)."""
    assert outside_at_book_values("ch01_rooflines") == []


def test_the_same_quantity_passes_alike_with_the_book_constants():
    """The two the review met: the H100's critical batch at 1e15 / 3.35e12 (correct in ch12-q13) and the v5e's
    2C / W_link with the peak rounded to 2e14 (correct in ch03-q6-b) pass here too, in both judges."""
    from course import hardware as hw

    q5 = CHAPTER.variant({"ch01-q5": {"gpu": "H100"}})["ch01-q5-critical-batch"]
    e4 = CHAPTER.variant({"ch01-e4": {"chip": "TPU v5e"}})["ch01-e4-d-threshold"]
    for q, answer in ((q5, 1e15 / 3.35e12), (e4, 2 * 2e14 / hw.TPU_V5E.ici_bytes_per_s_per_link)):
        assert all(v.ok for v in _both(q, answer)), q.qid
