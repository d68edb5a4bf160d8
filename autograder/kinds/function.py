"""Function answers: a Python function the student writes, called on test cases (probes).

Encoded in the kernel by calling the function on each probe and recording what it returns
(``record.encode_outputs``). Each returned item is judged as a number, a list of numbers (an
array) or a formula, by those kinds' own diagnosis; the grader asks the reference, the self-check
the fingerprints of the reference's outputs. The message names the first failing case with its
inputs, and a slip common to every case ("every value is 8 times the expected one") is said once.

The public probes are in the self-check data, so a function could be a table of their expected
outputs. The grade therefore counts other cases: at grading time the kernel also calls the function on
cases drawn for the submission (``drawn_probes``: one like each public probe, from a seed the notebook
never sees), and the grader draws the same cases itself and judges those outputs alone.
"""

from __future__ import annotations

import json
import math
import numbers
import random
import re
import statistics
import struct
from collections.abc import Callable, Sequence
from typing import Any

from .. import probes as builders
from .. import record
from ..formula import Invalid
from ..messages import frame, in_words, phrase, with_hints
from ..questions import AuthoringError, Function, Output
from ..verdict import REFUSED, Status, Verdict, only_passing, passing_only
from . import common, formula, number
from . import targets as tg
from .common import correct, edge, invalid, not_a_function

SHOWN_VALUES = 6  # a probe's list argument is shown by value up to this length
# How the record says that the answer was not a function, or returned another number of values
# (``record.encode_outputs``).
NOT_A_FUNCTION = common.NOT_A_FUNCTION
RETURNED_COUNT = re.compile(record.RETURNED.format("(.{1,80})", r"(\d+)"))  # what it returned, in words
ONE_VALUE = re.compile(record.ONE_VALUE.format("(tuple|list)"))
# A call the self-check stopped, or did not make, at its bounds on calling the function (``record.bounded_calls``).
TIMED_OUT = {"timeout:case": re.compile(record.TIMED_OUT.format(r"(\S+)")),
             "timeout:not_called": re.compile(record.NOT_CALLED.format(r"(\S+)"))}

ItemJudge = Callable[[Any], Verdict]
# How the record writes a number that is not finite (``record.encode_scalar``): text, but a number returned.
_NOT_FINITE_TEXT = re.compile(r"-?(inf|nan)")


# A function whose parameters are named otherwise than the prompt's: the check calls it by keyword.
_KEYWORD = re.compile(r"TypeError: \S+\(\) got an unexpected keyword argument '(\w+)'")


def _raised(error: Any, code: str = "raised") -> Verdict:
    """``code``: "raised" for the function as a whole, "raised:case" inside one test case. A function that takes
    other parameter names than the prompt's fails every case with a TypeError, which reads like wrong arithmetic
    ("23 of 23 test cases fail"): the sentence after it says the names matter."""
    said = phrase(code, error=error)
    if keyword := _KEYWORD.search(str(error)):
        said = said.rstrip().rstrip(".") + "." + phrase("raised+keyword", name=keyword.group(1))
    return Verdict(Status.INCORRECT, 0.0, "raised", said)


SHOWN_CHARS = 120  # of a text argument (a compiled program is thousands): its first line and its length


def _short(v: Any) -> str:
    """A probe value as the message names it: as the function receives it (``probes.argument``), so an
    array is named by its shape."""
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, str) and len(v) > SHOWN_CHARS:
        first = v.strip().splitlines()[0] if v.strip() else ""
        return f"{first[:SHOWN_CHARS]!r}... ({len(v):,} characters)"
    shape = builders.array_shape(v)
    if shape and math.prod(shape) > SHOWN_VALUES:  # a small one, such as a pair of shapes, by its values
        return f"array of shape {shape}"
    if isinstance(v, list | tuple):
        if len(v) > SHOWN_VALUES:
            return f"[{len(v)} items]"
        return "[" + ", ".join(_short(x) for x in v) + "]"
    return repr(v)


def _returned(got: Any) -> str:
    """What a function returned where an array was expected and the record holds no list, in words: a number, or
    what ``record.describe`` called it (a record made before it named a type: "a value of type dict")."""
    if isinstance(got, dict) and "invalid" in got:
        return in_words(str(got.get("detail") or "")) if got.get("detail") else "a value that is not a number"
    return "text" if isinstance(got, str) and not _NOT_FINITE_TEXT.fullmatch(got) else "a number"


# --- an array's shape ------------------------------------------------------------------------------------------
# The record holds a returned array as nested lists in its shape (``record._encode_array``), and the reference's
# shape is the self-check data's "shape": a result of another shape is wrong before any element is compared (G and
# R swapped, or flattened, hold R's and G's values). A 1-d reference accepts any sequence of its length (a tuple, a
# list, an array); a column (n, 1) or a row (1, n) is another shape, as numpy reads it.
SHAPE_DEPTH = 32  # deeper nesting (only a forged record's) has no shape


def nested_shape(got: Any, depth: int = 0) -> tuple[int, ...] | None:
    """The shape of nested lists as numpy reads them (a value that is no list is 0-d), or None where rows of
    one level differ in length or in depth (ragged)."""
    if not isinstance(got, list):
        return ()
    if depth > SHAPE_DEPTH:
        return None
    rows = [nested_shape(x, depth + 1) for x in got]
    if any(r is None or r != rows[0] for r in rows):
        return None
    return (len(got), *(rows[0] if rows else ()))


def flat(got: Any) -> list[Any]:
    """The values of nested lists in order (row-major, as ``reshape(-1)`` reads an array)."""
    out: list[Any] = []
    stack = [iter([got])]
    while stack:
        x = next(stack[-1], stack)
        if x is stack:
            stack.pop()
        elif isinstance(x, list):
            stack.append(iter(x))
        else:
            out.append(x)
    return out


def _as_lists(x: Any) -> Any:
    """A reference's array output as nested lists: an array by its ``tolist()``, a tuple as a list."""
    if isinstance(x, list | tuple):
        return [_as_lists(v) for v in x]
    return x.tolist() if _is_array(x) else x


def _is_array(x: Any) -> bool:
    """Whether a reference's returned item is an array output: a list or tuple, or an array of one dimension or more
    (a 0-d array is a number)."""
    return isinstance(x, list | tuple) or (isinstance(getattr(x, "shape", None), tuple) and len(x.shape) > 0)


def _shape_words(shape: tuple[int, ...]) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def _position(i: int, shape: tuple[int, ...] | None) -> str:
    """Element ``i`` (row-major) as the message names it: by its index in a 1-d array, by its indices, "(1, 0)", in
    an array of more dimensions."""
    if shape is None or len(shape) < 2:
        return str(i)
    index = []
    for d in reversed(shape):
        i, r = divmod(i, d)
        index.append(r)
    return _shape_words(tuple(reversed(index)))


def _want(shape: tuple[int, ...] | None, length: int) -> str:
    return f"an array of shape {_shape_words(shape)}" if shape is not None and len(shape) != 1 \
        else f"an array of {length} numbers"


def _one_value(wrapper: str, code: str = "returned:one") -> Verdict:
    """The function returned the one value asked for inside a ``wrapper`` ("tuple" or "list") of one:
    unreadable, as a number in a list is, and the same words in the self-check and the grade."""
    fix = "trailing comma" if wrapper == "tuple" else "brackets"
    return Verdict(Status.INVALID, 0.0, "returned:one", phrase(code, got=wrapper, fix=fix))


def _values(n: int) -> str:
    return f"{n} value" if n == 1 else f"{n} values"


def _another_count(got: str, want: str) -> Verdict:
    """A function asked for ``want`` values that returned ``got`` (``record.RETURNED``'s words): None is a
    forgotten return, a dict asks for a tuple, anything else is counted or described."""
    if got == "None":
        return Verdict(Status.INVALID, 0.0, "returned:none", phrase("returned:none"))
    if got == "a dict":
        return Verdict(Status.INVALID, 0.0, "returned:dict", phrase("returned:dict", want=want))
    count = re.fullmatch(r"(\d+) values", got)
    return Verdict(Status.INVALID, 0.0, "returned:count",
                   phrase("returned:count", got=_values(int(count.group(1))) if count else got, want=want))


def _returned_none(got: Any) -> bool:
    return isinstance(got, dict) and got.get("invalid") == "empty"


def _array(elements: Sequence[ItemJudge], length: int, shape: tuple[int, ...] | None = None) -> ItemJudge:
    """Judge an array: its shape first (``shape``: the reference's; None, self-check data made before shapes were
    kept: its number of elements alone), then element by element; a common factor over all of them is one
    finding."""
    def judge(got: Any) -> Verdict:
        if not isinstance(got, list):
            return Verdict(Status.INVALID, 0.0, "returned:type",
                           phrase("returned:type", got=_returned(got), want=_want(shape, length)))
        have = nested_shape(got)
        values = flat(got)
        if shape is None and len(values) != length:
            return Verdict(Status.INVALID, 0.0, "returned:type",
                           phrase("returned:type", got=f"{len(values)} numbers", want=_want(shape, length)))
        if shape is not None and have != shape:
            words = f"an array of shape {_shape_words(have)}" if have is not None else "nested lists of unequal lengths"
            return Verdict(Status.INCORRECT, 0.0, "returned:shape",
                           phrase("returned:shape", got=words, want=_shape_words(shape)))
        if only_passing():  # the first wrong element decides
            return correct() if all(j(x).ok for j, x in zip(elements, values, strict=True)) else REFUSED
        verdicts = [j(x) for j, x in zip(elements, values, strict=True)]
        bad = [(i, v) for i, v in enumerate(verdicts) if not v.ok]
        if not bad:
            return correct()
        if _reordered(elements, values, [i for i, _ in bad]):
            return Verdict(Status.INCORRECT, 0.0, "permuted", phrase("permuted"))
        codes = {v.diagnosis for _, v in bad}
        if len(bad) == len(verdicts) and len(codes) == 1 and bad[0][1].diagnosis.startswith("ratio:"):
            v = bad[0][1]  # one factor over all: the simpler reading, where a geometric sequence is shifted too
            return Verdict(v.status, 0.0, v.diagnosis, frame("every_element", v.message))
        if (shift := _shifted(elements, values, [i for i, _ in bad], shape)) is not None:
            return Verdict(Status.INCORRECT, 0.0, f"shifted:{shift:+d}", phrase(f"shifted:{shift:+d}"))
        i, v = bad[0]
        if v.status is Status.INVALID:
            return Verdict(v.status, 0.0, v.diagnosis, frame("element", v.message, index=_position(i, shape)))
        return Verdict(v.status, 0.0, "wrong_elements",
                       phrase("wrong_elements", bad=len(bad), length=length, index=_position(i, shape),
                              finding=v.message, finding_code=v.diagnosis))
    return judge


def _shifted(elements: Sequence[ItemJudge], values: Sequence[Any], wrong: Sequence[int],
             shape: tuple[int, ...] | None) -> int | None:
    """+1 where a sequence's wrong elements each hold the right value of the next place (-1: of the one before):
    losses recorded after each step's update where the prompt asks for before, a loop started a step late. Every
    wrong element that has such a neighbour must be its value, two at least; the one at the end has none."""
    if (shape is not None and len(shape) != 1) or len(wrong) < 2:
        return None
    with passing_only():
        for s in (1, -1):
            inside = [i for i in wrong if 0 <= i + s < len(values)]
            if len(inside) >= max(2, len(wrong) - 1) and all(elements[i + s](values[i]).ok for i in inside):
                return s
    return None


# An array whose wrong elements are the right values in other places (device 0's group [0, 4, 2, 6] for [0, 2, 4, 6])
# is told so, not "element 1 is off by a factor of 2": each wrong element is matched, by the judges themselves (the
# self-check knows no values), to the place whose judge accepts it. Up to REORDERED_MOST wrong elements are matched.
REORDERED_MOST = 64


def _reordered(elements: Sequence[ItemJudge], values: Sequence[Any], wrong: Sequence[int]) -> bool:
    """Whether the values at the places ``wrong`` are those places' right values in another order: a matching of
    values to places, each accepted by its place's judge, that covers them all (found by augmenting paths)."""
    if len(wrong) < 2 or len(wrong) > REORDERED_MOST:
        return False
    with passing_only():  # only whether each place's judge accepts each value is read: no diagnosis of the rest
        fits = {i: [k for k in wrong if k != i and elements[i](values[k]).ok] for i in wrong}
    placed: dict[int, int] = {}  # value's place -> the place whose judge accepts it

    def place(i: int, seen: set[int]) -> bool:
        for k in fits[i]:
            if k not in seen:
                seen.add(k)
                if k not in placed or place(placed[k], seen):
                    placed[k] = i
                    return True
        return False
    return all(place(i, set()) for i in wrong)


# --- which slip an answer behaves like ---------------------------------------------------------------
# A slip's hint is shown only to an answer that returns what the slip returns. Fingerprinting every
# element of every output of every slip would multiply the self-check data, so each returned number
# or array is summarised by one weighted sum of magnitudes (weights drawn from the question id), and
# the answer matches a slip when every such sum agrees with the slip's to SLIP_RTOL, or closer where the slip
# lies closer than that to the reference (``slip_rtol``).
SLIP_RTOL = 1e-3


def slip_rtol(theirs: Sequence[float | None], reference: Sequence[float | None], most: float = 0.0) -> float:
    """How near a slip's results an answer's must be for its hint: ``most`` (the slip's ``near``, else SLIP_RTOL),
    or half the slip's largest distance from the reference where that is less (a count with the norms' few
    parameters, 2e-4 above a count of billions), so that an answer near the reference, wrong for some other reason,
    is never told the slip's hint."""
    far = max((abs(b - r) / abs(b) for b, r in zip(theirs, reference, strict=False)
               if b not in (None, 0) and r is not None), default=0.0)
    return min(most or SLIP_RTOL, far / 2)


def _summary(tag: str, item: Any) -> float | None:
    values = flat(item)
    if not values or not all(isinstance(x, int | float) and not isinstance(x, bool) for x in values):
        return None
    rng = random.Random(tag)
    total = float(sum((0.5 + rng.random()) * abs(x) for x in values))
    return total if math.isfinite(total) else None


def _summaries(tag: str, outputs: Any) -> list[float | None]:
    """One number per (test case, returned item), in order; None where an item is no number."""
    out: list[float | None] = []
    for i, items in enumerate(outputs if isinstance(outputs, list) else []):
        for n, item in enumerate(items if isinstance(items, list) else [items]):
            out.append(_summary(f"{tag}/{i}/{n}", item))
    return out


def _slip_hints(oracle: Any, hints: Sequence[str], tag: str, outputs: Any) -> list[str]:
    got = _summaries(tag, outputs)
    return [h for j, h in enumerate(hints) if got and tg.all_near(oracle, f"slip{j}", got, only_known=True) is True]


_SLIP_TARGETS: dict[int, tuple[Function, tg.Targets]] = {}  # by question: its slips run once per process


def _slip_targets(q: Function) -> tg.Targets:
    if id(q) in _SLIP_TARGETS and _SLIP_TARGETS[id(q)][0] is q:
        return _SLIP_TARGETS[id(q)][1]
    t: tg.Targets = {}
    kinds = _kinds(q) if any(s.hint for s in q.slips) else []
    calls = [builders.build(q.builder, p) for p in q.probes]
    reference = _summaries(q.qid, record.encode_outputs(q.reference, calls, kinds)) if kinds else []
    for j, slip in enumerate(s for s in q.slips if s.hint):
        outputs = record.encode_outputs(slip.answer, calls, kinds)
        theirs = _summaries(q.qid, outputs)
        rtol = slip_rtol(theirs, reference, slip.near)
        if rtol == 0 and any(v not in (None, 0) for v in theirs):
            raise AuthoringError(_slip_like_reference(q, slip.answer, outputs))
        t[f"slip{j}"] = [None if v in (None, 0) else tg.around(v, rtol) for v in theirs]
    _SLIP_TARGETS[id(q)] = (q, t)
    return t


def _slip_like_reference(q: Function, slip: Callable[..., Any], outputs: Any) -> str:
    """Why a hinted slip has no targets: its numbers are the reference's at every public probe, so no interval
    around them tells an answer that made the slip from a right one (the release says so in one line, as it does
    for every kind's slip the grader passes: ``release.record_problems``)."""
    said = getattr(slip, "__name__", None) or repr(slip)
    if judge(q, outputs).ok:
        return f"{q.qid}: the slip {said} gets full marks from the grader"
    return (f"{q.qid}: the slip {said} returns the reference's numbers at every public probe, so no answer can be "
            "told its hint: add a probe where they differ")


def diagnose(probes: Sequence[dict[str, Any]], judges: Sequence[Sequence[ItemJudge]], outputs: Any,
             hints: Any = lambda outputs: [], drawn: bool = False) -> Verdict:
    """``judges[i][n]`` judges the n-th returned item of probe i; ``outputs`` is the record; ``hints``
    gives the hints of the slips the outputs behave like; ``drawn``: the probes were drawn at grading
    time, and the message says so."""
    if isinstance(outputs, dict) and "error" in outputs:
        error = str(outputs["error"])
        if error.startswith(NOT_A_FUNCTION):  # nothing was called, so nothing raised
            return not_a_function(error[len(NOT_A_FUNCTION):])
        return _raised(error)
    if not isinstance(outputs, list) or len(outputs) != len(probes):
        return invalid(Invalid("wrong_type", type(outputs).__name__), expected="one result per test case")
    failures = []
    for i, (items, item_judges) in enumerate(zip(outputs, judges, strict=True)):
        v = _probe(items, item_judges)
        if not v.ok:
            failures.append((i, v))
    if not failures:
        return correct()
    wrapped = [ONE_VALUE.fullmatch(str(items.get("error"))) if isinstance(items, dict) else None
               for items in outputs]
    if all(wrapped):  # every case returned its value in a tuple of one: one sentence, unframed
        return _one_value(wrapped[0].group(1))  # type: ignore[union-attr]
    score = 1 - len(failures) / len(probes)
    status = Status.PARTIAL if score > 0 else Status.INCORRECT
    first, v = failures[0]
    codes = {f.diagnosis for _, f in failures}
    agreeing = sum(f.diagnosis == v.diagnosis for _, f in failures)
    if FACTOR.match(v.diagnosis) and agreeing < min(2, len(probes)):  # a lone case off by it: no factor
        failures = [(i, _probe(outputs[i], [_no_factor(j) for j in judges[i]]) if FACTOR.match(f.diagnosis) else f)
                    for i, f in failures]
        first, v = failures[0]
        codes = {f.diagnosis for _, f in failures}
    suffix = ":drawn" if drawn else ""
    if len(failures) == len(probes) > 1 and len(codes) == 1 and v.diagnosis.startswith("ratio:"):
        message = frame("every_case" + suffix, v.message)
    else:
        # by name: the self-check data stores each case with its keys sorted, and both judges say the same
        args = ", ".join(f"{k}={_short(val)}" for k, val in sorted(probes[first].items()))
        message = frame("failing_cases" + suffix, v.message, failed=len(failures), cases=len(probes), args=args)
    message = with_hints(message, list(dict.fromkeys(hints(outputs))))
    return Verdict(status, score, v.diagnosis, message, {"failed": [i for i, _ in failures]})


# A simple factor (a ratio, a unit slip, a power of ten) is the function's finding only where cases agree on it: two
# failing cases or more off by that factor, or every case (a function of one case). One case off by 3 among others
# right or off otherwise (33 for 11, of a count) is as likely a coincidence of that case's values as the slip, and
# reads as any other wrong value (``not_equal``). ``unit:binary`` names a prefix the student wrote.
FACTOR = re.compile(r"(ratio|unit|magnitude):(?!binary$)")


def _no_factor(judge: ItemJudge) -> ItemJudge:
    def judged(got: Any) -> Verdict:
        v = judge(got)
        return Verdict(v.status, 0.0, "not_equal", phrase("not_equal:case")) if FACTOR.match(v.diagnosis) else v
    return judged


def _probe(items: Any, judges: Sequence[ItemJudge]) -> Verdict:
    if isinstance(items, dict) and "error" in items:
        count = RETURNED_COUNT.fullmatch(str(items["error"]))
        if count:  # the function ran, and returned another number of values than the question asks for
            return _another_count(*count.groups())
        wrapped = ONE_VALUE.fullmatch(str(items["error"]))
        if wrapped:  # ``return x,``
            return _one_value(wrapped.group(1), "returned:one:case")
        for code, pattern in TIMED_OUT.items():
            stopped = pattern.fullmatch(str(items["error"]))
            if stopped:  # an endless loop, most likely: no error of its own to quote
                return Verdict(Status.INCORRECT, 0.0, code, phrase(code, seconds=stopped.group(1)))
        return _raised(items["error"], "raised:case")
    if len(judges) == 1:
        items = [items[0] if isinstance(items, list) and len(items) == 1 else items]
    if isinstance(items, list) and any(_returned_none(x) for x in items):
        return Verdict(Status.INVALID, 0.0, "returned:none", phrase("returned:none"))
    if not isinstance(items, list) or len(items) != len(judges):
        return invalid(Invalid("wrong_type", "a different number of results"),
                       expected=f"{len(judges)} returned values")
    for n, (item, judge) in enumerate(zip(items, judges, strict=True)):
        v = judge(item)
        if not v.ok:
            message = frame("returned_value", v.message, n=n + 1, count=len(judges)) if len(judges) > 1 \
                else v.message
            return Verdict(v.status, 0.0, v.diagnosis, message)
    return correct()


def _expected_items(q: Function, probe: dict[str, Any]) -> tuple:
    expected = q.reference(**probe)
    return (expected,) if len(q.outputs) == 1 else tuple(expected)


def _kinds(q: Function) -> list[str]:
    """The kind of each returned item as the self-check data names it (``_item_print``: an output whose
    value is a list is an "array"), so that the grader records a slip's results as the kernel records
    the student's."""
    return ["formula" if spec.kind == "formula" else "array" if _is_array(e) else spec.kind
            for spec, e in zip(q.outputs, _expected_items(q, q.probes[0]), strict=True)]


def encode(fp: dict[str, Any], answer: Any) -> Any:
    """Call the student's function on every public test case and record what it returns."""
    calls = [builders.build(fp["builder"], p) for p in fp["probes"]]
    return record.encode_outputs(answer, calls, [o["kind"] for o in fp["outputs"][0]])


def encode_drawn(fp: dict[str, Any], answer: Any, drawn: list[dict[str, Any]]) -> dict[str, Any]:
    """At grading time: what the function returns on the cases the grader drew for this submission
    (they decide the grade, and the judge finds the slips' hints on them too). The public cases are
    not called: they would only double the kernel's work (a function that compiles a program per case
    costs seconds a case)."""
    calls = [builders.build(fp["builder"], p) for p in drawn]
    return {"drawn": record.encode_outputs(answer, calls, [o["kind"] for o in fp["outputs"][0]])}


def _drawn_hints(q: Function, drawn: Sequence[dict[str, Any]], outputs: Any) -> list[str]:
    """The hints of the slips whose results on the drawn cases the answer's match (the grader runs
    each slip there, only for a wrong answer). A slip that cannot run here costs only its hint."""
    got = _summaries(q.qid, outputs)
    found = []
    slips = [s for s in q.slips if s.hint]
    try:
        kinds = _kinds(q) if slips else []
    except Exception:
        return []
    try:
        calls = [builders.build(q.builder, p) for p in drawn]
        reference = _summaries(q.qid, record.encode_outputs(q.reference, calls, kinds)) if slips else []
    except Exception:
        return []
    for slip in slips:
        try:
            theirs = _summaries(q.qid, record.encode_outputs(slip.answer, calls, kinds))
        except Exception:
            continue
        rtol = slip_rtol(theirs, reference, slip.near)
        known = [(a, b) for a, b in zip(got, theirs, strict=False) if b not in (None, 0)]
        if len(got) == len(theirs) and known and all(a is not None and abs(a - b) <= rtol * abs(b)
                                                     for a, b in known):
            found.append(slip.hint)
    return found


# --- test cases drawn at grading time ---------------------------------------------------------------
# One like each public probe, from the record's ``draw`` or ``vary``. A draw that happens to equal a
# public probe is drawn again: a table of the public cases must find nothing it knows.
RETRIES = 50


# The least spread, in powers of two, between the factors of a case's floats. Were they all nearly one factor,
# every ratio of them would stay as it was, and a result that depends only on ratios (a roofline's crossover,
# peak over bandwidth) would equal a public case's: a table of the public outputs would pass.
SPREAD = 0.15


def vary(rng: random.Random, probe: dict[str, Any]) -> dict[str, Any]:
    """The default draw: every float of the probe (in its lists and dicts too) times its own factor
    between 1/2 and 2, to 4 significant figures; a whole float stays whole and at least 1, a fraction
    stays below 1. Integers (counts, sizes, axes), strings and booleans are the case's structure: kept.
    Two floats or more are never all scaled alike (``SPREAD``)."""
    while True:
        exponents: list[float] = []
        case = {k: _vary(rng, v, exponents) for k, v in probe.items()}
        if len(exponents) < 2 or max(exponents) - min(exponents) >= SPREAD:
            return case


def _vary(rng: random.Random, v: Any, exponents: list[float]) -> Any:
    if isinstance(v, dict):
        return {k: _vary(rng, x, exponents) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_vary(rng, x, exponents) for x in v]
    if not isinstance(v, float) or v == 0 or not math.isfinite(v):
        return v
    exponents.append(rng.uniform(-1, 1))
    factor = 2 ** exponents[-1]
    y = float(f"{v * factor:.4g}")
    if v.is_integer():
        return math.copysign(max(1.0, float(round(abs(y)))), v)
    return float(f"{v / factor:.4g}") if abs(v) < 1 <= abs(y) else y


def _as_json(x: Any) -> Any:
    """``x`` as the student's kernel receives it: through JSON (numpy values become plain ones)."""
    return json.loads(json.dumps(x, default=lambda o: o.tolist() if hasattr(o, "tolist") else str(o)))


_DRAWN: dict[tuple[int, str], tuple[Function, str]] = {}  # by (question, seed), as JSON: drawn once a process
DRAWN_KEPT = 4096


def drawn_probes(q: Function, seed: str) -> list[dict[str, Any]]:
    """The test cases of ``q`` drawn from ``seed`` (a submission's grading seed): one like each public
    probe (or ``Function.cases``, like the probes in turn), none equal to one, failing each slip of the record in at
    least half of them (``_slips_share``), and no numeric input written in passing more than half (``_held_share``,
    ``_frozen_share``); the
    same list wherever it is drawn (the grader, for the kernel and for the judge: drawn once per process, since
    telling the slips runs them)."""
    held = _DRAWN.get((id(q), seed))
    if held is not None and held[0] is q:
        return json.loads(held[1])  # a fresh copy: plain JSON data, which no caller may change for another
    if len(_DRAWN) >= DRAWN_KEPT:
        _DRAWN.clear()
    with passing_only():  # the draw asks only whether slips and frozen answers pass, thousands of times
        cases = _draw(q, seed)
    _DRAWN[id(q), seed] = (q, json.dumps(cases))
    return cases


def _draw(q: Function, seed: str) -> list[dict[str, Any]]:
    rng = random.Random(f"{seed}/{q.qid}")
    public = [_as_json(p) for p in q.probes]
    draw = q.draw or vary
    best: tuple[tuple[bool, float], list[dict[str, Any]]] | None = None
    for _ in range(SET_RETRIES):
        out = [_case_like(q, probe, draw, rng, public) for probe in like_which(q)]
        held = _held_share(q, out)
        if best is not None and not best[0][0] and held >= best[0][1]:
            continue  # no better than the best set yet, whose slips fail enough: telling the slips costs a judge
        slips = _slips_share(q, out)
        share = max(slips, held)
        if share <= SLIP_MOST:
            share = max(share, _frozen_share(q, out))
        if best is None or (slips > SLIP_MOST, share) < best[0]:
            best = ((slips > SLIP_MOST, share), out)
        if share <= SLIP_MOST:
            break
    assert best is not None
    return best[1]


class DrawFailed(AuthoringError):
    """No case could be drawn like a probe: the record's draw, or its reference on what it drew, failed every
    time. The grader's fault, for that question alone (``seeds.drawn_cases`` leaves it out; judging it raises)."""


def _case_like(q: Function, probe: dict[str, Any], draw: Callable[..., dict[str, Any]], rng: random.Random,
               public: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    """A case drawn like ``probe``: not one of ``public``, and one the reference answers. Cases are drawn per
    submission from a secret seed, so a draw, or a reference on a drawn case, that fails on a rare case (divides by
    zero, answers inf) would strike a student at random: such a case is drawn again, as a public one is."""
    fault: str = "every case drawn was a public one"
    for _ in range(RETRIES):
        try:
            case = _as_json(draw(rng, dict(probe)))
            if case in public:
                continue
            fault = _unanswered(q, case)
        except Exception as e:
            fault = f"{type(e).__name__}: {e}"
            continue
        if not fault:
            return case
    raise DrawFailed(f"{q.qid}: no case could be drawn like {probe} in {RETRIES} tries ({fault[:200]})")


def _unanswered(q: Function, case: dict[str, Any]) -> str:
    """Why the reference gives no answer to judge by on ``case`` ("": it does): it raised, or a number it returned
    is not finite (which no tolerance can hold an answer to), or reaches ``INT32`` where no public case's does."""
    try:
        items = _expected_items(q, case)
    except Exception as e:
        return f"the reference raised {type(e).__name__}: {e}"
    if not all(_finite_or_other(x) for x in _numbers_of(q, items)):
        return "the reference returned a number that is not finite"
    if _largest(q, items) >= INT32 > _largest_public(q):
        return f"a result reaches 2**31, which no public case's does ({_largest(q, items):.4g})"
    return ""


# A drawn case must not take a result where no public case goes: the self-check runs the public cases alone. A
# function that counts in JAX's default int32 is right on every public case below 2**31, and raised or wrapped
# round on a drawn one above it (Chapter 9's CX1 drew a 2.7 GB tensor at 1 seed in 20, where the public cases stop
# at 134 MB): ticked at home, refused at grading.
INT32 = 2**31


def _numbers_of(q: Function, items: Sequence[Any]) -> list[Any]:
    return [x for spec, item in zip(q.outputs, items, strict=True) if spec.kind != "formula"
            for x in flat(_as_lists(item))]


def _largest(q: Function, items: Sequence[Any]) -> float:
    sizes = [abs(float(x)) for x in _numbers_of(q, items) if isinstance(x, numbers.Real) and not isinstance(x, bool)]
    return max(sizes, default=0.0)


_LARGEST_PUBLIC: dict[int, tuple[Function, float]] = {}


def _largest_public(q: Function) -> float:
    held = _LARGEST_PUBLIC.get(id(q))
    if held is None or held[0] is not q:
        held = _LARGEST_PUBLIC[id(q)] = (q, max(_largest(q, _expected_items(q, _as_json(p))) for p in q.probes))
    return held[1]


def _finite_or_other(x: Any) -> bool:
    try:
        return math.isfinite(x)
    except TypeError:  # not a number (a string, a structure): the output's own judge reads it
        return True


def like_which(q: Function) -> list[dict[str, Any]]:
    """The public probe each drawn case is drawn like: the probes in turn, ``Function.cases`` of them (by default
    one like each)."""
    return [q.probes[i % len(q.probes)] for i in range(q.cases or len(q.probes))]


# How many sets of cases may be drawn for one seed until each slip fails in enough of them: a draw that misses a
# slip's regime (every case memory-bound, where the slip ignores compute) is rare, so a second set nearly always does.
SET_RETRIES = 40
# A function is scored by the share of its cases that pass: a typical mistake must fail at least this share of a
# student's drawn cases, or it costs little (tiles read in the written order failed 1 of 18, 2.83 of 3 points). A
# slip whose record says it is ``narrow`` (wrong by its nature in a few kinds of case) need fail only one.
SLIP_MOST = 0.5


def _slips_share(q: Function, cases: list[dict[str, Any]]) -> float:
    """The most that a slip of ``q`` scores on ``cases``: a set is kept where that is at most ``SLIP_MOST`` (the
    self-check's public cases fail every slip: a test), else the set nearest it. A narrow slip counts only where
    it passes every case. A typical mistake must not earn full marks, or most of them, because a student's draw
    happened to miss the cases where it is wrong (the memory-only step time was right at 1 draw in 12; E3's
    one-way ICI at every draw, which held no ICI case). A slip that cannot run here is no reason to draw again."""
    if not q.slips:
        return 0.0
    try:
        calls = [builders.build(q.builder, p) for p in cases]
        kinds, judges = _kinds(q), _judges(q, cases)
    except Exception:
        return 0.0
    most = 0.0
    for slip in q.slips:
        try:
            v = diagnose(cases, judges, record.encode_outputs(slip.answer, calls, kinds))
        except Exception:
            continue
        most = max(most, 2.0 if v.ok else 0.0 if slip.narrow else v.score)
    return most


def frozen_values(q: Function, name: str) -> list[Any]:
    """What a student who ignored the input ``name`` would write in its place, read off the public probes: any value
    it takes there (the commonest first), their median, 1, or twice or half the median (a regime the probes skip).
    The commonest alone missed an answer that wrote in another probe's width (D = 128 kept every mark of Chapter 4's
    CX2 at 2 students of 6) or the probes' median (N = 56 kept 0.58 of Chapter 11's serving plan); the peak at twice
    the median kept every mark of Chapter 1's attainable FLOP/s where both drawn cases were memory-bound."""
    values = [p[name] for p in q.probes]
    median = statistics.median(values)
    integer = all(isinstance(v, int) for v in values)
    if integer and float(median).is_integer():
        median = int(median)
    one = 1.0 if isinstance(values[0], float) else 1
    apart = [int(round(v)) if integer else v for v in (median * 2, median / 2)]
    return list(dict.fromkeys([max(values, key=values.count), *values, median, one, *apart]))


def numeric_inputs(q: Function) -> list[str]:
    """The numeric arguments of every probe (no flag) that the record does not declare narrow."""
    narrow = {name for name, _ in q.narrow_inputs}
    return [k for k in q.probes[0] if k not in narrow
            and all(isinstance(p.get(k), int | float) and not isinstance(p.get(k), bool) for p in q.probes)]


_AFRESH: dict[int, tuple[Function, list[str]]] = {}
TRIES_TO_SEE_AN_INPUT_CHANGE = 12


def _drawn_afresh(q: Function) -> list[str]:
    """The numeric inputs that the record's draw changes: any that differs from its probe in one of a few cases drawn
    like the first probe (from a generator of their own, once a process)."""
    held = _AFRESH.get(id(q))
    if held is None or held[0] is not q:
        rng, probe, names = random.Random(f"afresh/{q.qid}"), q.probes[0], numeric_inputs(q)
        seen: set[str] = set()
        for _ in range(TRIES_TO_SEE_AN_INPUT_CHANGE):
            case = _case_like(q, probe, q.draw or vary, rng)
            seen |= {n for n in names if case.get(n) != probe[n]}
        held = _AFRESH[id(q)] = (q, [n for n in names if n in seen])
    return held[1]


def _held_share(q: Function, cases: list[dict[str, Any]]) -> float:
    """The most of ``cases`` that hold one value of one numeric input the draw changes: an answer that wrote that
    value in gets them right for free (any value: bob's critical batch was float32 in all 4 cases, so act_bytes = 4
    kept every mark, though no probe is float32). A set where that is more than ``SLIP_MOST`` is drawn again, like a
    set a slip passes. An input the draw never changes (kept as the probe has it) is the record's to draw afresh,
    which tests/test_ignored_inputs.py asks; counting it here would only draw every set again for nothing. Cheap:
    nothing is called."""
    most = 0.0
    for name in _drawn_afresh(q):
        held = [c.get(name) for c in cases]
        most = max(most, max(held.count(v) for v in held) / len(cases))
    return most


def _frozen_share(q: Function, cases: list[dict[str, Any]], names: Sequence[str] | None = None) -> float:
    """The most of ``cases`` that the reference passes with one numeric input written in (at a value of
    ``frozen_values``, or one the cases hold), by the grader's own judges: where the input does not count in a
    case's regime, any value passes it (the peak, where every point of the roofline is memory-bound: both of a
    student's cases were, and a curve that never read the peak kept every mark). A set where that is more than
    ``SLIP_MOST`` is drawn again. Only the inputs that count in some regime alone are asked (``_regimes``;
    ``names``: these): one that counts in every case is held by ``_held_share`` alone."""
    names = _regimes(q) if names is None else names
    if not names:
        return 0.0
    try:
        calls = [builders.build(q.builder, p) for p in cases]
        kinds, judges = _kinds(q), _judges(q, cases)
        right = record.encode_outputs(q.reference, calls, kinds)
    except Exception:  # a reference that cannot run here (its cases need JAX): no reason to draw again
        return 0.0
    most, enough = 0.0, math.floor(len(cases) * SLIP_MOST) + 1
    for name in names:
        if any(not isinstance(kwargs.get(name), int | float) for _, kwargs in calls):
            continue  # built into an array, or no keyword: no value to write in
        for value in dict.fromkeys([*frozen_values(q, name), *(c[name] for c in cases)]):
            free = failed = 0
            for call, judge, want in zip(calls, judges, right, strict=True):
                if call[1][name] == value or _frozen_passes(q, call, kinds, judge, want, name, value):
                    free += 1
                else:
                    failed += 1
                if free >= enough or failed > len(cases) - enough:
                    break  # decided: more than the share, or never
            most = max(most, free / len(cases))
            if most > SLIP_MOST:
                return most
    return most


_REGIMES: dict[int, tuple[Function, list[str]]] = {}
CASES_TO_SEE_A_REGIME = 6


def _regimes(q: Function) -> list[str]:
    """The inputs of ``_drawn_afresh`` that count in some regime alone, and in most of the cases the record's draw
    makes: of a set drawn like the probes (``CASES_TO_SEE_A_REGIME`` cases at least) from a generator of its own
    (once a process), some cases, but with one more still at most half, are passed by the reference with the input
    at twice or at half the case's value (the peak, where every point of a roofline is memory-bound). One that counts
    in every case is held by ``_held_share`` alone (no call); one that counts in about half or fewer (a hop latency,
    where ``like_probes`` keeps most cases bandwidth-bound) is the record's to mend, with probes in its regime or a
    declaration (tests/test_ignored_inputs.py): asking it of every set would only draw every set again for
    nothing."""
    held = _REGIMES.get(id(q))
    if held is None or held[0] is not q:
        rng, draw, names = random.Random(f"regimes/{q.qid}"), q.draw or vary, _drawn_afresh(q)
        which = like_which(q)
        count = max(CASES_TO_SEE_A_REGIME, len(which))
        cases = [_case_like(q, which[i % len(which)], draw, rng) for i in range(count)]
        try:
            calls = [builders.build(q.builder, p) for p in cases]
            kinds, judges = _kinds(q), _judges(q, cases)
            right = record.encode_outputs(q.reference, calls, kinds)
        except Exception:  # a reference that cannot run here: the values alone
            names = []
        counts: dict[str, int] = {}
        for name in names:
            if all(isinstance(kwargs.get(name), int | float) for _, kwargs in calls):
                counts[name] = sum(_ignored_here(q, call, kinds, judge, want, name)
                                   for call, judge, want in zip(calls, judges, right, strict=True))
        held = _REGIMES[id(q)] = (q, [n for n, k in counts.items() if 0 < k <= count * SLIP_MOST - 1])
    return held[1]


def _ignored_here(q: Function, call: tuple[tuple, dict], kinds: list[str], judges: Sequence[ItemJudge], want: Any,
                  name: str) -> bool:
    """Whether the reference with ``name`` at twice or half the case's value (a whole input: halved where it stays
    whole) passes the case: the input does not count in its regime."""
    x = call[1][name]
    apart = [2 * x] + ([x // 2] if x >= 2 and x % 2 == 0 else [] if isinstance(x, int) else [x / 2])
    return any(_frozen_passes(q, call, kinds, judges, want, name, value) for value in apart)


def _frozen_passes(q: Function, call: tuple[tuple, dict], kinds: list[str], judges: Sequence[ItemJudge],
                   want: Any, name: str, value: Any) -> bool:
    """Whether the reference with ``name`` written in as ``value`` passes one case (``want``: what the reference
    returns there, as recorded): at once where the case holds that value or the outputs are the same, else by the
    case's judges."""
    if call[1][name] == value:
        return True

    def frozen(*a: Any, **kw: Any) -> Any:
        return q.reference(*a, **(kw | {name: value}))
    got = json.loads(json.dumps(record.encode_outputs(frozen, [call], kinds)[0]))
    if got == json.loads(json.dumps(want)):
        return True
    numbers = zip(got, judges, kinds, strict=True) if isinstance(got, list) and len(got) == len(judges) > 1 else ()
    if any(not judge(item).ok for item, judge, kind in numbers if kind != "formula"):
        return False  # a number that fails spares a formula's solve
    return _probe(got, judges).ok


def hint(q: Function) -> str:
    return ("Call your function by hand on the first test case and compare with a calculation on "
            "paper; the message above names the case that fails.")


# --- float rounding ---------------------------------------------------------------------------------
# A function's returned numbers are compared "up to float rounding", and JAX computes in float32 by default: a
# ratio of two counts computed with jnp lies a few float32 roundings (2**-24 of it each) from the exact value.
# So an output asked to less than FLOAT32_RTOL also accepts, within FLOAT32_RTOL of the reference, a value that
# float32 can hold. A value it cannot hold (a Python int off by one, a float64 result) is still held to the
# output's own tolerance: a count returned as an int stays exact, unless float32 could not tell it from the
# count either (an odd count above 2**24 it cannot hold; an even one off by two, it could have computed).
# Both judges ask the same targets (``_float32_targets``), the grader's exactly, the self-check's hashed.
FLOAT32_RTOL = 1e-6


def _float32_allowed(tolerance: Any) -> bool:
    return not tolerance.is_range and tolerance.rtol < FLOAT32_RTOL


def _float32_targets(reference: float, element: bool = False) -> tg.Targets:
    """The float32 band around ``reference``, and its two ends cut finer, as a number's "ref" is; except for an
    element of an array, of which there may be thousands (the self-check data stays small, and says "edge" for a
    value within a 64th of the band's end, some 16 float32 roundings off)."""
    band = tg.around(float(reference), FLOAT32_RTOL)
    return {"f32": [band]} | ({} if element else {f"f32end{j}": [iv] for j, iv in enumerate(tg.ends(band))})


def _float32_value(x: Any) -> bool:
    """Whether a recorded number is one float32 can hold: what a float32 result becomes in the record."""
    if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x):
        return False
    try:
        return struct.unpack("f", struct.pack("f", float(x)))[0] == x
    except OverflowError:  # beyond float32's range
        return False


def _in_float32_band(judge: ItemJudge, oracle: tg.Exact | tg.Printed, tolerance_words: str,
                     unit: str) -> ItemJudge:
    """``judge``, which also accepts a float32 value within float32 rounding of the reference; where the
    self-check's hashes cannot tell (an edge of the band), it says so, as a number's edge."""
    def within(got: Any) -> Verdict:
        v = judge(got)
        if v.ok or not _float32_value(got):
            return v
        answers = [oracle.accepts(key, [got]) for key in oracle.entries]
        if True in answers:
            return correct()
        if None in answers:
            return edge(**number.context(unit, tolerance_words), precise=True)
        return v
    return within


# --- the grader -----------------------------------------------------------------------------------

def _reference_judge(tag: str, spec: Output, expected: Any, element: bool = False) -> ItemJudge:
    if spec.kind == "formula":
        return lambda got: formula.check(tag, expected, spec.symbols.split(), (), got)
    if _is_array(expected):
        listed = _as_lists(expected)
        values = flat(listed)
        return _array([_reference_judge(f"{tag}/{j}", Output("number", spec.unit, spec.tolerance), e, element=True)
                       for j, e in enumerate(values)], len(values), _reference_shape(listed))
    def judge(got: Any) -> Verdict:
        return number.check(tag, expected, spec.unit, spec.tolerance, got, element=element)
    if not _float32_allowed(spec.tolerance):
        return judge
    oracle = tg.Exact(tag, _float32_targets(expected, element))
    return _in_float32_band(judge, oracle, number.tolerance_text(spec.tolerance, expected), spec.unit)


def _reference_shape(listed: list) -> tuple[int, ...]:
    shape = nested_shape(listed)
    if shape is None:
        raise ValueError("a reference returned nested lists of unequal lengths: return an array of one shape")
    return shape


def _judges(q: Function, probes: Sequence[dict[str, Any]]) -> list[list[ItemJudge]]:
    return [[_reference_judge(f"{q.qid}/{i}/{n}", spec, e)
             for n, (spec, e) in enumerate(zip(q.outputs, _expected_items(q, probe), strict=True))]
            for i, probe in enumerate(probes)]


def judge(q: Function, outputs: Any, seed: str | None = None) -> Verdict:
    """With a submission's grading ``seed``: the fraction passed of the cases drawn from it, which this
    process draws again (the kernel's record says only what the function returned); the public cases
    are not even called. Without a seed: the public cases (tests, the demo)."""
    if seed is None:
        hinted = [s.hint for s in q.slips if s.hint]
        try:  # a hint is a courtesy: a slip that cannot run here (its test cases need JAX) costs only the hint
            oracle = tg.Exact(q.qid, _slip_targets(q)) if hinted else None
        except Exception:
            hinted, oracle = [], None
        return diagnose(q.probes, _judges(q, q.probes), outputs,
                        lambda got: _slip_hints(oracle, hinted, q.qid, got) if hinted else [])
    if isinstance(outputs, dict) and "error" in outputs:  # not a function: nothing was called
        return diagnose(q.probes, [], outputs)
    drawn = drawn_probes(q, seed)  # first: cases that cannot be drawn are the grader's fault (DrawFailed), not theirs
    if not (isinstance(outputs, dict) and "drawn" in outputs):
        return Verdict(Status.INCORRECT, 0.0, "no_drawn_cases", phrase("no_drawn_cases"))
    return diagnose(drawn, _judges(q, drawn), outputs["drawn"], lambda got: _drawn_hints(q, drawn, got),
                    drawn=True)


# --- the self-check -------------------------------------------------------------------------------

def _item_print(tag: str, spec: Output, expected: Any) -> dict[str, Any]:
    if spec.kind == "formula":
        return {"kind": "formula"} | formula.fingerprint(tag, spec.symbols.split(), (), expected)
    if _is_array(expected):  # every element, or a tick could hide a wrong one; and its shape
        listed = _as_lists(expected)
        values = flat(listed)
        prints = [number.fingerprint(f"{tag}/{j}", x, spec.unit, spec.tolerance, element=True)
                  for j, x in enumerate(values)]
        shared = {k: v for k, v in prints[0].items() if k != "targets"} if prints else {}
        out = {"kind": "array", "length": len(values), "shape": list(_reference_shape(listed)), "shared": shared,
               "elements": [p["targets"] for p in prints]}
        if _float32_allowed(spec.tolerance):
            out["f32"] = [_float32_print(f"{tag}/{j}", x, element=True) for j, x in enumerate(values)]
        return out
    out = {"kind": "number"} | number.fingerprint(tag, expected, spec.unit, spec.tolerance)
    return out | ({"f32": _float32_print(tag, expected)} if _float32_allowed(spec.tolerance) else {})


def _float32_print(tag: str, reference: float, element: bool = False) -> dict[str, Any]:
    return {key: tg.printed(tag, key, ivs) for key, ivs in _float32_targets(reference, element).items()}


def make_print(q: Function) -> dict[str, Any]:
    hinted = [s.hint for s in q.slips if s.hint]
    slips = {"hints": hinted, "targets": {k: tg.printed(q.qid, k, v) for k, v in _slip_targets(q).items()}}
    return {"probes": [dict(p) for p in q.probes], "builder": q.builder, "slips": slips,
            "outputs": [[_item_print(f"{q.qid}/{i}/{n}", spec, e)
                         for n, (spec, e) in enumerate(zip(q.outputs, _expected_items(q, probe), strict=True))]
                        for i, probe in enumerate(q.probes)]}


def _print_judge(tag: str, p: dict[str, Any]) -> ItemJudge:
    if p["kind"] == "formula":
        return lambda got: formula.selfcheck(p, tag, got)
    if p["kind"] == "array":
        f32 = p.get("f32") or [None] * len(p["elements"])
        return _array([_print_judge(f"{tag}/{j}", {"kind": "number", "targets": t} | p["shared"]
                                    | ({"f32": f} if f else {}))
                       for j, (t, f) in enumerate(zip(p["elements"], f32, strict=True))], p["length"],
                      _print_shape(p))

    def judge(got: Any) -> Verdict:
        return number.selfcheck(p, tag, got)
    if "f32" not in p:
        return judge
    return _in_float32_band(judge, tg.Printed(tag, p["f32"]), p["tolerance"], p["unit"])


def _print_shape(p: dict[str, Any]) -> tuple[int, ...] | None:
    """The array's shape in the self-check data; None in data made before shapes were kept (its length alone)."""
    shape = p.get("shape")
    return tuple(int(d) for d in shape) if isinstance(shape, list) else None


def selfcheck(fp: dict[str, Any], qid: str, outputs: Any) -> Verdict:
    judges = [[_print_judge(f"{qid}/{i}/{n}", p) for n, p in enumerate(prints)]
              for i, prints in enumerate(fp["outputs"])]
    slips = fp.get("slips", {"hints": [], "targets": {}})
    oracle = tg.Printed(qid, slips["targets"])
    return diagnose(fp["probes"], judges, outputs,
                    lambda got: _slip_hints(oracle, slips["hints"], qid, got))
