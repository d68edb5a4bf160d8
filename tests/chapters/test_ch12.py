"""Chapter 12 (GPUs): CX4's thresholds against the syllabus (test_every_chapter.py runs the records and
the book's and derived answers)."""

import pytest

from autograder.questions import load_chapter
from solutions.ch12_gpus import gpu_intensity

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


def _both(q, answer):
    """The grader's verdict (the record through JSON, as it travels) and the self-check's."""
    import json

    from autograder import kinds
    from autograder.checks import judge
    from tests.chapter_checks import printed, recorded

    rec = recorded(q, answer)
    return judge(q, json.loads(json.dumps(rec))), kinds.selfcheck_live(printed(q), q.qid, answer, rec)


def test_q16_clock_is_asked_and_read_in_hz():
    """The prompt asks for Hz: the question reads Hz and GHz, and a bare number of GHz is a unit slip."""
    q = CHAPTER["ch12-q16-b200-clock"]
    assert q.unit == "Hz"
    ghz = q.reference / 1e9
    for answer in (f"{ghz:.3f} GHz", f"{ghz:.3f}e9 Hz", f"{ghz * 1e3:.1f} MHz", q.reference):
        assert all(v.ok for v in _both(q, answer)), answer
    for v in _both(q, round(ghz, 2)):
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
                for v in _both(qs[qid], answer):
                    assert not v.ok and "Hint:" in v.message, (combo, qid, v.message)


# --- the book's own rounded FLOP rates ------------------------------------------------------------------

# The book's bf16 rates where they differ from the course's table (syllabus errata): the H100 at 1e15 (its first
# version) for 9.9e14, the B200 at 2.25e15 (Q1.3, Q5.1) for 2.3e15.
BOOK_RATES = {"H100": 1e15, "B200": 2.25e15}

_SWAPPED = """
import json, sys
from course import hardware as hw
if sys.argv[1]:
    object.__setattr__(getattr(hw, sys.argv[1]), "bf16_flops_per_s", float(sys.argv[2]))
from autograder.questions import Number, load_chapter
out = {}
for s in load_chapter(sys.argv[3]).settings:
    for combo in s.combos():
        key = json.dumps(s.labels(combo), sort_keys=True, default=str)
        out |= {q.qid + " " + key: [q.reference, *q.tolerance.bounds(q.reference)]
                for q in s.build(**combo) if isinstance(q, Number)}
for q in load_chapter(sys.argv[3]).questions:
    if isinstance(q, Number):
        out[q.qid] = [q.reference, *q.tolerance.bounds(q.reference)]
print(json.dumps(out))
"""


def outside_at_book_rates(chapter: str) -> list[str]:
    """The number questions of ``chapter`` (every choice of every setting) whose answer, computed with a book's
    rounded rate in place of the course's, falls outside the tolerance: each computed in a fresh interpreter, so
    the swapped constant reaches every derivation."""
    import json
    import pathlib
    import subprocess
    import sys

    root = pathlib.Path(__file__).resolve().parents[2]

    def run(*args: str) -> dict:
        done = subprocess.run([sys.executable, "-c", _SWAPPED, *args, chapter], cwd=root, capture_output=True,
                              text=True, check=True)
        return json.loads(done.stdout)

    ours = run("", "")
    out = []
    for gpu, rate in BOOK_RATES.items():
        for key, (value, *_) in run(gpu, str(rate)).items():
            if key in ours and not ours[key][1] <= value <= ours[key][2]:
                out.append(f"{key} at {gpu} {rate:g}: {value / ours[key][0] - 1:+.2%}")
    return out


def test_the_book_rates_pass_every_question_that_scales_with_them():
    assert outside_at_book_rates("ch12_gpus") == []
