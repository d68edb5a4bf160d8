"""Honest spellings of options and units, as a review of fair readings found them refused.

1. An option made of numbers and words matches when its numbers match by value: "16x4.0" and "16.0x4" are the
   option "16x4", "dp4-mp2.0" is "dp4-mp2" (``questions.option_key``), at every variant of every Choice record;
   two options that read the same stay an authoring error.
2. Every Choice refusal names the options, and a tuple of numbers where the options are shapes ("16x4") is told
   to write the option as text, with an example that does not depend on the right option.
3. Units are a grammar (prefix x base x rate spelling, and the time units), not a hand list: every spelling the
   review found refused is read, every spelling read before is read the same (``unit_readings.json``, a snapshot
   of the table before the grammar), and the unit list of a question's sentence starts with its common prefixes.

Both judges are asked throughout, on the real paths: they must agree.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from autograder.numbers import UNITS, ParsedNumber, parse_number, unit_examples
from autograder.questions import AuthoringError, Choice, Slip, chapter_names, load_chapter
from autograder.verdict import Status
from tests.chapter_checks import both_judges
from tests.engine.test_fair_reading_variants import cases

# --- 1. an option's numbers match by value -----------------------------------------------------------------

MESH = Choice(qid="ch99-s1-mesh", points=1, prompt="p", reference="16x4", options=("8x8", "16x4", "32x2", "64x1"),
              slips=(Slip("8x8", "wrong_option"),))
STRATEGY = Choice(qid="ch99-s2-strategy", points=1, prompt="p", reference="dp4-mp2",
                  options=("dp8", "mp8", "dp4-mp2", "dp2-mp4"), slips=(Slip("dp8", "wrong_option"),))
WIDTH = Choice(qid="ch99-s3-width", points=1, prompt="p", reference="D=F=4096", options=("D=F=4096", "D=F=1024"),
               slips=(Slip("D=F=1024", "wrong_option"),))


def said(q, answer) -> tuple:
    graded, checked = both_judges(q, answer)
    assert (graded.status, graded.diagnosis, graded.message) == (checked.status, checked.diagnosis, checked.message)
    return graded.status, graded.diagnosis, graded.message


@pytest.mark.parametrize(("q", "answer"), [
    (MESH, "16x4.0"), (MESH, "16.0x4"), (MESH, "16.0x4.0"), (MESH, "16.00 x 4.0"), (MESH, "16×4.0"),
    (STRATEGY, "dp4-mp2.0"), (STRATEGY, "dp4.0-mp2.0"), (STRATEGY, "DP4.0_MP2"), (WIDTH, "D=F=4096.0"),
])
def test_an_option_s_numbers_written_as_floats_are_that_option(q, answer):
    assert said(q, answer)[0] is Status.CORRECT


@pytest.mark.parametrize(("q", "answer", "status"), [
    (MESH, "8.0x8", Status.INCORRECT), (MESH, "16x4.5", Status.INVALID), (MESH, "16x40", Status.INVALID),
    (MESH, "1.6x4", Status.INVALID), (MESH, "16x4.0.0", Status.INVALID), (STRATEGY, "dp4-mp2.5", Status.INVALID),
    (STRATEGY, "dp4-mp20", Status.INVALID), (WIDTH, "D=F=4096.5", Status.INVALID),
])
def test_other_numbers_stay_other_options_or_none(q, answer, status):
    assert said(q, answer)[0] is status


@pytest.mark.parametrize("options", [("16x4", "16x4.0"), ("dp4-mp2", "dp4-mp2.0"), ("D=F=4096", "D=F=4096.00")])
def test_options_whose_numbers_are_equal_are_an_authoring_error(options):
    with pytest.raises(AuthoringError, match="read the same"):
        Choice(qid="ch99-s4-twins", points=1, prompt="p", reference=options[0], options=options,
               slips=(Slip(options[1], "wrong_option"),))


def _as_floats(option: str) -> list[str]:
    """The option with each whole number in it written as a float, one at a time, then all at once."""
    spans = [m.span() for m in re.finditer(r"(?<![0-9./])[0-9]+(?![0-9./])", option)]
    one = [option[:b] + ".0" + option[b:] for _, b in spans]
    every = re.sub(r"(?<![0-9./])([0-9]+)(?![0-9./])", r"\1.0", option)
    return list(dict.fromkeys([*one, every])) if spans else []


@pytest.mark.parametrize("chapter", chapter_names())
def test_every_choice_at_every_variant_reads_its_numbers_written_as_floats(chapter):
    """For each option with a whole number inside, the option with that number written as a float is read as the
    option itself by both judges, at every variant (the same status, diagnosis and message)."""
    bad = []
    for c in cases(chapter, "choice"):
        for option in c.q.options:
            own = c.both(option)
            for spelled in _as_floats(option):
                got = c.both(spelled)
                for v, w in zip(got, own, strict=True):
                    if (v.status, v.diagnosis, v.message) != (w.status, w.diagnosis, w.message):
                        bad.append((repr(c), spelled, v.diagnosis, w.diagnosis))
    assert not bad, bad[:10]


# --- 2. every refusal names the options ---------------------------------------------------------------------

REFUSED = [(16, 4), (16.0, 4.0), [16, 4], ("16x4", "8x8"), ["dp8", "mp8"], True, False, np.array([16, 4]), None,
           {"a": 1}, 1j, 3.5, "neither"]


def _records() -> list[Choice]:
    out = []
    for name in chapter_names():
        ch = load_chapter(name)
        out += [q for q in ch.questions if isinstance(q, Choice)]
        for s in ch.settings:
            for combo in s.combos():
                out += [q for q in s.questions(s.labels(combo)) if isinstance(q, Choice)]
    return out


def test_every_choice_refusal_names_the_options():
    """Over every Choice record at every variant, whatever the refused answer (a tuple, a list, a bool, None, an
    unknown name): the sentence lists every option."""
    bad = []
    for q in _records():
        listed = "Choose one of: " + ", ".join(repr(o) for o in q.options) + "."
        for answer in REFUSED:
            status, code, message = said(q, answer)
            if status is Status.INVALID and listed not in message:
                bad.append((q.qid, repr(answer), message))
    assert not bad, bad[:5]


@pytest.mark.parametrize("answer", [(16, 4), (16.0, 4.0), [16, 4], np.array([16, 4]), (8, 8)])
def test_a_tuple_for_a_shape_is_told_to_write_the_option_as_text(answer):
    status, code, message = said(MESH, answer)
    assert (status, code) == (Status.INVALID, "wrong_type"), message
    assert "write it as text, such as '8x8'" in message and "give the one value" not in message, message


def test_the_example_does_not_depend_on_the_right_option():
    """The example is the first option, whichever option is right: it says nothing of the answer."""
    said_by = {said(Choice(qid="ch99-s1-mesh", points=1, prompt="p", reference=r, options=MESH.options,
                           slips=(Slip(next(o for o in MESH.options if o != r), "wrong_option"),)), (16, 4))[2]
               for r in MESH.options}
    assert len(said_by) == 1, said_by


def test_the_review_s_choice_refusals():
    q = load_chapter("ch05_training")["ch05-e9-mesh"]
    status, code, message = said(q, (16, 4))
    assert (status, code) == (Status.INVALID, "wrong_type") and "Choose one of: " in message, message
    assert "write it as text, such as '" in message, message
    # a truth value answers a yes-or-no question (the book's answer to Q3 is "no": it does not fit)
    fits = load_chapter("ch05_training")["ch05-q3-dp-fits"]
    assert said(fits, False)[0] is Status.CORRECT and said(fits, True)[1] == "wrong_option"


# --- 3. units as a grammar -----------------------------------------------------------------------------------

SNAPSHOT = json.loads((Path(__file__).parent / "unit_readings.json").read_text())


def _reading(text: str, unit: str) -> str:
    p = parse_number(text, unit)
    return repr(p.value) if isinstance(p, ParsedNumber) else p.code


def test_every_unit_read_before_the_grammar_is_read_the_same():
    """The table before the grammar (``unit_readings.json``): each spelling keeps its dimension and scale, and "3 u"
    and "3u" read the same in a question of every dimension."""
    asked = SNAPSHOT["asked"]
    changed = []
    for u, (dim, scale, *readings) in SNAPSHOT.items():
        if u == "asked":
            continue
        if u not in UNITS or (UNITS[u][0], repr(UNITS[u][1])) != (dim, scale):
            changed.append((u, UNITS.get(u), (dim, scale)))
            continue
        for text, row in zip((f"3 {u}", f"3{u}"), readings, strict=False):  # none for "", the plain number
            changed += [(text, w, was, _reading(text, w)) for w, was in zip(asked, row, strict=True)
                        if _reading(text, w) != was]
    assert len(SNAPSHOT) == 1 + 182 and not changed, changed[:10]


SI = {"k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18, "Z": 1e21}
BINARY = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50}
RATES = ("/s", "/sec", "ps", " per second")


def _grammar() -> list[tuple[str, str, float]]:
    """(spelling, the question's unit, the value of "3 <spelling>" in it), composed here independently."""
    out = []
    for p, f in {"": 1.0, **SI, **BINARY}.items():
        for base, bits in (("B", 1), ("byte", 1), ("bytes", 1), ("b", 8), ("bit", 8), ("bits", 8)):
            if p == "" and base == "b":
                continue  # a lone b: see test_a_lone_b_is_not_bits
            if p in BINARY and base in ("byte", "bytes"):
                continue
            out.append((p + base, "B", 3 * f / bits))
            for rate in RATES:
                if rate == "ps" and base not in ("B", "b"):
                    continue  # "Gbps", "GBps"; never "bitsps"
                out.append((p + base + rate, "B/s", 3 * f / bits))
    for p, f in {"": 1.0, **SI}.items():
        for base in ("FLOP", "FLOPs", "flop", "Flop"):
            out.append((p + base, "FLOP", 3 * f))
            out += [(p + base + rate, "FLOP/s", 3 * f) for rate in ("/s", "/sec", " per second")]
        for base in ("FLOPS", "flops", "Flops"):  # a count or a rate, as the question asks
            out += [(p + base, "FLOP", 3 * f), (p + base, "FLOP/s", 3 * f)]
    for p in "tgpez":  # a lower-case prefix before a lower-case flop: never m, which is milli
        out += [(p + "flop/s", "FLOP/s", 3 * SI[p.upper()]), (p + "flops", "FLOP/s", 3 * SI[p.upper()])]
    times = {("ns", "nsec", "nsecs", "nanosecond", "nanoseconds"): 1e-9,
             ("us", "usec", "usecs", "µs", "µsec", "μs", "microsecond", "microseconds"): 1e-6,
             ("ms", "msec", "msecs", "millisecond", "milliseconds"): 1e-3,
             ("s", "sec", "secs", "second", "seconds"): 1.0, ("min", "mins", "minute", "minutes"): 60.0,
             ("h", "hr", "hrs", "hour", "hours"): 3600.0, ("d", "day", "days"): 86400.0,
             ("week", "weeks"): 604800.0, ("y", "yr", "yrs", "year", "years"): 365.25 * 86400}
    out += [(u, "s", 3 * f) for us, f in times.items() for u in us]
    return out


@pytest.mark.parametrize(("spelling", "unit", "value"), _grammar(), ids=lambda x: str(x))
def test_every_spelling_of_the_grammar_is_read(spelling, unit, value):
    p = parse_number(f"3 {spelling}", unit)
    assert isinstance(p, ParsedNumber) and p.value == pytest.approx(value, rel=1e-12), p


def test_a_lone_b_is_not_bits():
    """"3 b" stays unread: b alone is a name more often than a bit; "3 bits" says it."""
    assert _reading("3 b", "B") == "unknown_unit"


@pytest.mark.parametrize(("answer", "unit", "value"), [
    ("8 Gb", "B", 1e9), ("8 GB", "B", 8e9), ("8 Gb/s", "B/s", 1e9), ("8 GB/s", "B/s", 8e9),  # b is bits, B bytes
    ("8 Mb", "B", 1e6), ("8 MB", "B", 8e6),
])
def test_bits_and_bytes_stay_distinct(answer, unit, value):
    p = parse_number(answer, unit)
    assert isinstance(p, ParsedNumber) and p.value == pytest.approx(value), p


@pytest.mark.parametrize(("answer", "unit", "code"), [
    ("5 gb", "B", "unknown_unit"), ("5 mflop/s", "FLOP/s", "unknown_unit"), ("1.2 MS", "s", "unknown_unit"),
    ("3 TFLOPs", "FLOP/s", "unit_dimension"), ("3 TFLOP/s", "FLOP", "unit_dimension"), ("2 d", "B", "unit_dimension"),
])
def test_case_rules_and_dimensions_hold(answer, unit, code):
    assert _reading(answer, unit) == code


# Spellings that were refused, on the questions they were met on, through both judges: each is read and right.
REVIEW = [("ch02_tpus", "ch02-e1-mxu-flops", a) for a in (
    "49.152 TFLOP/sec", "49.152 TFlop/s", "49.152 Tflop/s", "49.152 tflop/s", "49.152e12 FLOPs per second",
    "49.152 teraflops", "49.152 TFLOP per second", "49.152 Tflops")] + \
    [("ch02_tpus", "ch02-cx4-bisection-pod", a) for a in ("2880 GB/sec", "23040 Gbit/s", "23040 Gbits/s",
                                                          "2880 GB per second", "2880 gigabytes per second",
                                                          "23040 Gbit per second", "2.88 TBps")] + \
    [("ch01_rooflines", "ch01-e1-h100-time", a) for a in ("1010.1 usec", "1.0101e6 nsec", "1.0101e6 ns",
                                                          "1.0101 msec", "1010.1 µsec")] + \
    [("ch05_training", "ch05-e5-days", a) for a in ("16.879 d", "16.879 day", "405.1 hr")]


@pytest.mark.parametrize(("chapter", "qid", "answer"), REVIEW, ids=lambda x: str(x))
def test_the_review_s_refused_spellings_are_read(chapter, qid, answer):
    assert said(load_chapter(chapter)[qid], answer)[0] is Status.CORRECT


@pytest.mark.parametrize(("answer", "unit", "value"), [
    ("3.3e24 flop", "FLOP", 3.3e24), ("2 PiB", "B", 2 * 2.0**50), ("6.3 ZFLOPs", "FLOP", 6.3e21),
    ("6.3 ZFLOP", "FLOP", 6.3e21), ("3.29 YFLOP", "FLOP", 3.29e24), ("1 yottabyte", "B", 1e24), ("2 y", "years", 2),
    ("2 y", "s", 2 * 365.25 * 86400), ("3 gigabytes", "B", 3e9),
    ("3 teraflops", "FLOP", 3e12), ("3 teraflops", "FLOP/s", 3e12), ("3 GB per second", "B/s", 3e9),
    ("3 FLOPs per second", "FLOP/s", 3), ("3 ZB", "B", 3e21), ("3 EiB", "B", 3 * 2.0**60),
])
def test_the_review_s_other_spellings_are_read(answer, unit, value):
    p = parse_number(answer, unit)
    assert isinstance(p, ParsedNumber) and p.value == pytest.approx(value, rel=1e-12), p


@pytest.mark.parametrize("given", ["TFLOPs", "GFLOPs", "TFLOP", "Tflop"])
def test_a_count_for_a_rate_is_told_what_a_rate_is(given):
    """"TFLOPs" stays the course's count, so a rate question refuses it; its sentence says how a rate is written."""
    status, code, message = said(load_chapter("ch02_tpus")["ch02-e1-mxu-flops"], f"49.152 {given}")
    assert (status, code) == (Status.INVALID, "unit_dimension"), message
    prefix = given[0]
    assert f"a rate is {prefix}FLOP/s or {prefix}FLOPS" in message, message


@pytest.mark.parametrize(("unit", "first"), [
    ("FLOP/s", ["FLOP/s", "TFLOP/s", "GFLOP/s", "MFLOP/s", "kFLOP/s"]),
    ("B/s", ["B/s", "TB/s", "GB/s", "MB/s", "kB/s"]), ("B", ["B", "TB", "GB", "MB", "kB"]),
    ("FLOP", ["FLOP", "TFLOP", "GFLOP", "MFLOP", "kFLOP"]), ("s", ["s", "ms", "µs", "ns"]),
    ("days", ["days", "h", "min", "s"]), ("Hz", ["Hz", "GHz", "MHz", "kHz"]),
])
def test_unit_examples_start_with_the_common_prefixes(unit, first):
    named = unit_examples(unit).split(", ")
    assert named[:len(first)] == first, named
    assert len(named) == len(set(named)) and all(UNITS[u][0] == UNITS[unit][0] for u in named), named
