"""The answer record: how a hidden test passes a student's answer to the grader *as data*.

In the student's kernel, ``grade(qid, answer)`` turns the answer into JSON (formula text, a number,
an option, a function's outputs on its test cases) and displays it under a dedicated MIME type in
the test cell's output. After the notebook ran, a process that never ran student code reads the
record back from the cell whose nbgrader grade_id is ``qid`` and judges it against the reference.
A student can forge a record, but a forged record only ever carries answers the student chose.
"""

from __future__ import annotations

import contextlib
import json
import math
import numbers
import operator
import os
import re
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from decimal import Decimal
from fractions import Fraction
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .formula import Invalid

MIME = "application/vnd.scaling-course.answer+json"
# What ``course.setting`` shows beside its text: {"name", "values"} of an exercise's setting as the notebook ran it.
# The grader compares a submission's last shown values with the ones it grades with; nothing is judged from it.
SETTING_MIME = "application/vnd.scaling-course.setting+json"


def tick(qid: str) -> str:
    """What ``course.check`` prints for a right answer; the grader reads it back from a saved notebook (``TICK``)."""
    return f"✓ {qid}: correct."


TICK = re.compile(r"✓ (ch\d\d-[\w\-]{1,80}): correct\.")
FORMAT = 1
MAX_RECORD_BYTES = 2_000_000  # a record larger than this is ignored, never parsed
# Set by ``scaling-course grade`` in its kernels: it judges records itself, so grade() only records.
GRADER_ENV = "SCALING_COURSE_GRADER"
# Also set there: a JSON file of the test cases drawn for this submission, by question id, on which
# grade() calls a function answer besides the public ones (see kinds/function.py).
DRAWN_ENV = "SCALING_COURSE_DRAWN_CASES"
# Also set there: a folder of the chapters' self-check data without what judges an answer (``kernel_data``), which
# the kernel reads in place of ``course/fingerprints/``, a folder no grading kernel can read.
CHAPTER_DATA_ENV = "SCALING_COURSE_CHAPTER_DATA"
# The student whose variant a kernel computes with (variants.py): set by the grader from the submission's
# folder, in a class by whoever starts the student's kernels, or by course.setup(student=...).
STUDENT_ENV = "SCALING_COURSE_STUDENT"


def plain_number(x: Any) -> int | float | Fraction | None:
    """The Python number a scalar stands for, whichever library holds it, or None where ``x`` is no
    single real number (a flag, text, a complex number, an array of several values, anything else).

    The one reading of a scalar for every kind that reads numbers: a Python, numpy or JAX int or float,
    a 0-d array of one, sympy's Integer, Rational and Float, ``fractions.Fraction`` and
    ``decimal.Decimal``. Integers stay ints and fractions Fractions (exact); the rest become floats.
    Never raises: a hostile subclass whose number methods fail is no number."""
    try:
        return _plain_number(x)
    except Exception:
        return None


def _plain_number(x: Any) -> int | float | Fraction | None:
    if isinstance(x, bool | str | bytes):
        return None
    if isinstance(x, int):
        return int.__int__(x)  # the value itself, whatever a subclass overrides
    if isinstance(x, float):  # numpy's float64 too
        return float.__float__(x)
    if isinstance(x, numbers.Integral):  # numpy's and sympy's integers
        return operator.index(x)
    if isinstance(x, numbers.Rational):  # Fraction, sympy's Rational
        numerator, denominator = operator.index(x.numerator), operator.index(x.denominator)
        return numerator if denominator == 1 else Fraction(numerator, denominator)
    if isinstance(x, numbers.Real):  # numpy's float32 and longdouble, sympy's Float
        return float(x)
    if isinstance(x, Decimal):
        return float("nan") if x.is_nan() else float(x)  # float() refuses a signalling NaN
    item = getattr(x, "item", None)  # a 0-d numpy or JAX array, a bfloat16 scalar
    if callable(item) and getattr(x, "shape", None) == ():
        value = item()
        if type(value) in (int, float):
            return value
        if isinstance(value, numbers.Real) and not isinstance(value, bool):  # numpy's longdouble
            return float(value)
    return None


def number_of(x: Any) -> int | float | Fraction | complex | None:
    """``plain_number``, and besides it the number an array of one element holds (``jnp.array([t])``,
    ``np.array([[t]])``: as a 0-d array, its value is not in doubt) and the value of a sympy expression of numbers
    alone, as ``.subs`` leaves one (8*sqrt(3), log(4096)/log(2), 76.47*pi): a float (a complex where it is not
    real). The reading of a number answer and of a choice between numbers; a formula keeps such an expression
    exact. A list or tuple of one number is none (``container_words`` says what it is). Never raises."""
    number = plain_number(x)
    if number is None:
        number = _one_element(x)
    return number if number is not None else expression_value(x)


def _one_element(x: Any) -> int | float | Fraction | None:
    """The number an array of one element holds, whatever its shape ((1,), (1, 1)...), read as ``plain_number``
    reads the 0-d array of it; None where ``x`` is no such array (a list or a tuple is none)."""
    if isinstance(x, list | tuple | str | bytes):
        return None
    try:
        shape = getattr(x, "shape", None)
        if not (isinstance(shape, tuple) and shape and all(type(d) is int and d == 1 for d in shape)):
            return None
        return plain_number(x.reshape(()))
    except Exception:  # no reshape (a sympy Matrix), or a hostile object
        return None


def container_words(x: Any) -> str | None:
    """A scalar answer given in a container, in words, for the message that refuses it: "a list of one value",
    "a tuple of 3 values", "an array of shape (2, 3)" (never a library's class name). None where ``x`` is no list,
    tuple or array of one dimension or more. ``messages.phrase`` says what to give instead."""
    try:
        if isinstance(x, list | tuple):
            name, n = ("list", list.__len__(x)) if isinstance(x, list) else ("tuple", tuple.__len__(x))
            return f"a {name} of {'one value' if n == 1 else f'{n} values'}"
        shape = getattr(x, "shape", None)
        if isinstance(shape, tuple) and 0 < len(shape) <= 8 and all(type(d) is int for d in shape):
            return f"{_array_name(x)} of shape {tuple.__repr__(tuple(shape))}"
    except Exception:  # a hostile object: its type says what it is
        return None
    return None


# The array types a student meets, by the package their class comes from: named in words, never by the class.
ARRAY_NAMES = {"jax": "a JAX array", "jaxlib": "a JAX array", "numpy": "a NumPy array", "sympy": "a sympy Matrix",
               "torch": "a PyTorch tensor"}  # ``messages`` reads a container's fix off these names


def _array_name(x: Any) -> str:
    package = type_module(x).partition(".")[0]
    return ARRAY_NAMES.get(package, "an array")


# The words ``describe`` gives ("a formula", "nothing (None)", "text"), not a type's bare name.
_IN_WORDS = re.compile(r"(an? |nothing \()|(text|bytes)$")


def in_words(detail: str) -> str:
    """A wrong type's detail as ``describe`` puts it: a record made before it holds a type's bare name ("int"), said
    as "a value of type int"; words ("a formula", "text") are kept."""
    return detail if _IN_WORDS.match(detail) else f"a value of type {detail}"


def describe(x: Any) -> str:
    """A value of the wrong type for its question, in plain words, for every kind's message: a course object by what
    it is ("the chip TPU v5p"), "a formula",
    "nothing (None)", "a list of one value", "a JAX array of shape (1,)", "a sympy Matrix of shape (1, 1)", "a
    function", "text" (``messages.phrase`` adds the container's fix). A library's class name only for a value of
    no kind a student meets. Never raises."""
    try:
        return _describe(x)
    except Exception:  # a hostile object: its type says what it is
        return f"a value of type {type_name(x)}"


# The objects a student holds in every setting cell (a setting's values, a chip, a node, a model), by the module of
# their class: named in words where a number, an option or a function is asked, never by their class.
COURSE_OBJECTS = {"course.variant": "setting", "course.hardware": "chip", "course.models": "model"}


def course_object(x: Any) -> str | None:
    """A course object in words, "the setting ch03-e2", "the chip TPU v5p", "the model LLaMA-3 8B" (a node of GPUs
    is "the node ..."); None for anything else. Never raises: a hostile object is no course object."""
    try:
        what = COURSE_OBJECTS.get(type_module(x))
        if what is None or isinstance(x, type):
            return None
        name = getattr(x, "_name" if what == "setting" else "name", None)
        if what == "chip" and hasattr(x, "gpus"):
            what = "node"
        return f"the {what} {name}" if isinstance(name, str) and name else f"a {what} of the course"
    except Exception:
        return None


def _describe(x: Any, depth: int = 0) -> str:
    obj = course_object(x)
    if obj is not None:
        return obj
    if x is None:
        return "nothing (None)"
    if isinstance(x, bool):
        return f"a truth value ({bool.__repr__(x)})"
    if isinstance(x, str):
        return "text"
    if isinstance(x, bytes | bytearray):
        return "bytes"
    contained = container_words(x)
    if contained is not None:
        return contained
    if isinstance(x, dict):
        return "a dict"
    if isinstance(x, set | frozenset):
        return "a set"
    if isinstance(x, complex):
        return "a complex number"
    sp = sys.modules.get("sympy")
    if sp is not None and isinstance(x, sp.Basic):
        if isinstance(x, sp.Rel):
            return "an equation or a comparison"
        if isinstance(x, sp.Expr):
            if x.free_symbols:
                return "a formula"
            return "a complex number" if isinstance(expression_value(x), complex) else "a number"
    if plain_number(x) is not None:
        return "a number"
    if isinstance(x, numbers.Complex):  # numpy's complex64
        return "a complex number"
    item = getattr(x, "item", None)  # a numpy scalar or a 0-d array of a flag or a complex number: as its value
    if callable(item) and getattr(x, "shape", None) == () and not depth:
        return _describe(item(), depth + 1)
    if isinstance(x, type):
        return "a class"
    if callable(x):
        return "a function"
    return f"a value of type {type_name(x)}"


# The most a kernel spends evaluating a sympy expression of numbers: milliseconds for any a cell computes, while
# floor(exp(exp(100))) never ends. Past it the expression is recorded as its text, which a number question
# refuses with its reason.
EVALUATE_SECONDS = 2.0


def expression_value(x: Any) -> float | complex | None:
    """The value of a sympy expression that holds no symbol (``is_number``), to float precision, or None where
    ``x`` is no such expression or its value cannot be found within ``EVALUATE_SECONDS``."""
    sp = sys.modules.get("sympy")  # an expression comes only from a process that imported sympy
    if sp is None:
        return None
    from .bounds import TooExpensive, bounded

    try:
        if not isinstance(x, sp.Expr) or not x.is_number:
            return None
        with bounded(cpu=EVALUATE_SECONDS, wall=EVALUATE_SECONDS):
            value = x.evalf(30, chop=True)
            if value.has(sp.zoo, sp.nan):
                return math.nan
            real, imaginary = value.as_real_imag()
            if not (real.is_Number and imaginary.is_Number):
                return None  # an integral or a sum evalf leaves as it is
            return float(real) if imaginary == 0 else complex(float(real), float(imaginary))
    except TooExpensive:
        return None
    except Exception:  # a hostile subclass, or a value sympy cannot compute
        return None


def encode_scalar(kind: str, answer: Any) -> Any:
    """JSON for one answer of kind formula / number / choice, or for one value a function returned (text, or an
    invalid marker whose detail is ``describe``'s words). Never raises: an object whose methods raise is recorded
    as a value of the wrong type."""
    try:
        return _encode_scalar(kind, answer)
    except Exception as e:
        return _unreadable(answer, e)


def _encode_scalar(kind: str, answer: Any) -> Any:
    if kind == "choice" and issubclass(type(answer), str):
        return str.__str__(answer)
    number = number_of(answer) if kind in ("number", "choice") else None
    if isinstance(number, complex):
        answer = number  # recorded as a value of the wrong type, as Python's own complex numbers are
    elif number is not None:
        try:
            value = float(number)  # rounded once, correctly (int / int is)
        except OverflowError:  # a whole number beyond any float (10**5000): finite, and said so
            digits = int(abs(int(number)).bit_length() * math.log10(2)) + 1  # str() of it may be refused
            return {"invalid": "too_large", "detail": f"a whole number of about {digits:,} digits"}
        except (TypeError, ValueError):  # a number beyond any float
            return {"invalid": "not_finite", "detail": ""}
        return value if math.isfinite(value) else float.__repr__(value)
    from .formula import Invalid, answer_to_text  # sympy: in the kernel, not in the grader's workers

    # An array of several values, or one value in a list, a tuple or an array: its shape and size, not its class.
    contained = container_words(answer)
    if contained is not None:
        return {"invalid": "wrong_type", "detail": contained}
    text = answer_to_text(answer)
    # an option is a string or a number; and a value of the wrong type is said in words, the same for every kind
    wrong_type = text.code == "wrong_type" if isinstance(text, Invalid) else kind == "choice"
    if wrong_type:
        text = Invalid("wrong_type", describe(answer))
    return _invalid(text) if isinstance(text, Invalid) else text


def type_name(x: Any) -> str:
    """The name of ``x``'s type, whatever its class claims (a metaclass may override ``__name__``)."""
    return type.__dict__["__name__"].__get__(type(x))


def type_module(x: Any) -> str:
    """The module of ``x``'s type, whatever its class claims, as ``type_name`` reads its name."""
    return str(type.__dict__["__module__"].__get__(type(x)) or "")


def _unreadable(x: Any, e: Exception) -> dict[str, str]:
    """The record of a value that raised ``e`` while it was read (its ``shape``, ``__len__``, ``__iter__``...)."""
    return {"invalid": "wrong_type", "detail": f"{type_name(x)} ({type_name(e)})"}


# A run of spaces and tabs inside an answer's text: read as one space. Python's tokenizer reads it so, and a
# unit written with two spaces ("FLOPs  per byte") is the unit written with one.
_BLANKS = re.compile(r"[ \t]+")


def canonical(kind: str, answer: Any) -> Any:
    """The answer as both judges read it, the grader's and the self-check's: text with its ends stripped and
    each run of spaces and tabs made one space (so respaced copies of an answer also share the grader's memo).
    A program's answer is an artefact, not text, and anything but text stays as it is (an object that claims to
    be a str through ``__class__`` is none: its type says)."""
    if kind == "program" or not issubclass(type(answer), str):
        return answer
    return _BLANKS.sub(" ", str.__str__(answer)).strip()


def _invalid(x: Invalid) -> dict[str, str]:
    return {"invalid": x.code, "detail": x.detail}


# The self-check's bounds on calling a student's function (wall time): a function that never returns (an endless
# loop) must not hang the notebook. Measured over every function question's model answer on its public and drawn
# cases, on a busy 2-core machine: the slowest, which compiles a decoder layer to read XLA's cost analysis, takes
# 22 s a call; every other about 3 s at most, and 6 s for all of a question's cases. The bounds leave five times
# the slowest call, for a slower laptop or a less direct answer. Grading calls the function unbounded
# (``bounded_calls`` is the self-check's): there the kernel's cell limit is the bound, as before.
CALL_SECONDS = 120.0
CALLS_SECONDS = 240.0
# How the record says that a call ran past its bound, or was not made because the calls before it used up the
# bound on them all or one of them ran past its own (the function kind phrases both).
TIMED_OUT = "did not return within {} s"
NOT_CALLED = "not called: the calls before it used up {} s"

_CALL_BOUNDS: ContextVar[tuple[float, float] | None] = ContextVar("call_bounds", default=None)


@contextlib.contextmanager
def bounded_calls() -> Iterator[None]:
    """In this block, ``encode_outputs`` bounds each call of a student's function by ``CALL_SECONDS`` and all of
    them by ``CALLS_SECONDS`` (read when the block starts); after a call that ran past its bound, it makes no
    more. Only where a thread can be interrupted: the main
    thread of a POSIX process (``bounds.available``); elsewhere the calls run unbounded."""
    token = _CALL_BOUNDS.set((CALL_SECONDS, CALLS_SECONDS))
    try:
        yield
    finally:
        _CALL_BOUNDS.reset(token)


class _TimedOut(Exception):
    pass


def bounded_trace(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)``, where it traces a student's program: in a ``bounded_calls`` block (the
    self-check's) within the bound on one call, else unbounded. Returns ``{"error": TIMED_OUT...}``, the
    record of a call that ran past it, in place of what ``fn`` would have returned."""
    from .bounds import available

    limits = _CALL_BOUNDS.get() if available() else None
    if limits is None:
        return fn(*args, **kwargs)
    try:
        return _call(fn, args, kwargs, limits[0])
    except _TimedOut:
        return {"error": TIMED_OUT.format(f"{limits[0]:.3g}")}


def _call(fn: Callable[..., Any], args: tuple, kwargs: dict, seconds: float | None) -> Any:
    """``fn(*args, **kwargs)``, stopped after ``seconds`` of wall time (None: unbounded) with ``_TimedOut``."""
    if seconds is None:
        return fn(*args, **kwargs)
    from .bounds import TooExpensive, bounded

    try:
        # wall time alone: the CPU bound, all cores busy for the whole wall bound, never comes first
        with bounded(cpu=seconds * (os.cpu_count() or 1) + 1, wall=seconds):
            return fn(*args, **kwargs)
    except TooExpensive:
        raise _TimedOut from None


def encode_outputs(fn: Callable[..., Any], calls: Iterable[tuple[tuple, dict]], kinds: list[str]) -> Any:
    """Call a student's function on each probe and encode what it returns, item by item (in a
    ``bounded_calls`` block, each call within its bound). Nothing the function returns or raises can stop the
    encoding: an exception whose message cannot be printed, or a value whose ``shape``, ``__len__`` or
    ``__iter__`` raises, is recorded as that case's reason, and the other cases keep theirs."""
    if not callable(fn):
        return {"error": f"expected a function, got {describe(fn)}"}
    from .bounds import available

    limits = _CALL_BOUNDS.get() if available() else None
    started = time.monotonic()
    deadline = started + limits[1] if limits else None
    out = []
    for args, kwargs in calls:
        seconds = None
        if limits is not None and deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                out.append({"error": NOT_CALLED.format(f"{time.monotonic() - started:.3g}")})
                continue
            seconds = min(limits[0], left)
        try:
            result = _call(fn, args, kwargs, seconds)
        except _TimedOut:
            out.append({"error": TIMED_OUT.format(f"{seconds:.3g}")})
            deadline = time.monotonic()  # a call that never returns would not on the next case either, most likely
            continue
        except Exception as e:  # the student's bug, reported per probe
            out.append({"error": error_text(e)})
            continue
        wrapped = _wrapped(kinds[0], result) if len(kinds) == 1 else None
        if wrapped:  # ``return x,``: the one value asked for, in a tuple of one
            out.append({"error": ONE_VALUE.format(wrapped)})
            continue
        items = _items(result, len(kinds))
        out.append([_encode_item(k, x) for k, x in zip(kinds, items, strict=False)] if items is not None
                   else {"error": RETURNED.format(_returned(result), len(kinds))})
    return out


# How the record says that an exception's message could not be printed (its ``__str__`` raised): its type, and
# the type of what ``__str__`` raised.
UNPRINTABLE = "{} (its message could not be printed: {} in its __str__)"


def error_text(e: BaseException) -> str:
    """What the record says of an exception a student's function raised: its type and the start of its message."""
    try:
        message = str.__str__(str(e))[:300]  # a plain str, whatever __str__ returned
    except Exception as inner:
        return UNPRINTABLE.format(type_name(e), type_name(inner))
    return f"{type_name(e)}: {message}"


# How the record says that a function returned another number of values than asked for: what it returned
# ("3 values", "1 values", "None", "a dict", "a NumPy array of shape (3,)"), and how many were asked for.
RETURNED = "returned {}, expected {}"


def _items(result: Any, n: int) -> list[Any] | None:
    """The ``n`` values a function returned, or None where it returned another number of them. Several values
    come as a tuple or a list, or as an array whose first dimension holds them (np.array((X, Y)))."""
    if n == 1:
        return [result]
    try:
        if isinstance(result, tuple | list):
            items = list(result)
        else:
            shape = getattr(result, "shape", None)
            items = list(result) if isinstance(shape, tuple) and shape and shape[0] == n else []
        return items if len(items) == n else None
    except Exception:  # a hostile object: no values to judge
        return None


def _returned(result: Any) -> str:
    """What a function returned in place of several values, in words."""
    if result is None:
        return "None"
    try:
        if isinstance(result, dict):
            return "a dict"
        if isinstance(result, tuple | list):
            return f"{len(list(result))} values"
        contained = container_words(result)  # "a NumPy array of shape (3,)"
        if contained is not None:
            return contained
    except Exception:  # a hostile object: one value, whatever it is
        pass
    return "1 values"


# How the record says that a function asked for one value returned it inside a tuple or list of one.
ONE_VALUE = "returned a {} of one value"


def _wrapped(kind: str, result: Any) -> str | None:
    """"tuple" or "list" where ``result`` is the one value asked for, wrapped in a sequence of one: a
    number or a formula never is a sequence, and an array is one of numbers, so a sequence of one array
    (or one list) is a wrapper; a tuple of one number is an array of one (a 1-d shape, ``(n,)``). None also
    where asking raised: what the value is, the judge of it says."""
    try:
        if not isinstance(result, tuple | list) or len(result) != 1:
            return None
        if kind == "array":
            inner = result[0]
            if not (isinstance(inner, tuple | list) or bool(getattr(inner, "shape", ()))):
                return None
            if isinstance(inner, tuple | list) and inner and isinstance(inner[0], tuple | list):
                return None  # nested lists, an array's .tolist() whose first dimension is 1 (B = 1): its values
        return "tuple" if isinstance(result, tuple) else "list"
    except Exception:  # a hostile object
        return None


# How deep lists may nest where an array is asked (a 4-d array's .tolist() nests 4 deep); deeper, a list is one value
# of the wrong type.
MAX_NESTING = 16


# An array whose values cannot all be read as real numbers, in the words of "your function returned ...".
UNREAD_ARRAY = "an array whose entries are not all real numbers (complex, masked, or arrays inside its cells?)"


def _encode_item(kind: str, x: Any) -> Any:
    """One returned value as JSON; a value that raises while it is read is recorded as of the wrong type."""
    try:
        if kind == "array":  # the self-check data names array outputs "array"
            return _encode_array(x)
        contained = container_words(x) if kind == "number" else None
        if contained is not None:  # an array of one value too, which a whole answer is read from: ``x.item()``
            return {"invalid": "wrong_type", "detail": contained}
        return encode_scalar(kind, x)
    except Exception as e:
        return _unreadable(x, e)


def _encode_array(x: Any, depth: int = 0) -> Any:
    """An array output as nested lists of its numbers, in its shape: an array as its ``tolist()`` is, a list or
    tuple item by item (a list of rows, of arrays or of numbers), so the judge reads the shape back (a transposed
    or flattened result has the values of the right one, in another shape). A number where an array is asked stays
    a number (or the reason it is none), for the judge to refuse."""
    if isinstance(x, list | tuple):
        if depth >= MAX_NESTING:
            return encode_scalar("number", x)
        return [_encode_array(v, depth + 1) for v in x]
    shape = getattr(x, "shape", None)
    if not (isinstance(shape, tuple) and tuple.__len__(shape) > 0):
        return encode_scalar("number", x)
    try:
        return _floats(x.tolist(), depth)
    except Exception:
        return {"invalid": "wrong_type", "detail": UNREAD_ARRAY}


def _floats(values: Any, depth: int) -> Any:
    """An array's ``tolist()`` with each value a float, as a returned array's values always were recorded."""
    if isinstance(values, list) and depth < MAX_NESTING:
        return [_floats(v, depth + 1) for v in values]
    return float(values)


def make(qid: str, kind: str, answer: Any, setting: dict[str, Any] | None = None) -> dict[str, Any]:
    """``setting``: for a question of an exercise setting, its name and the values the kernel computed with
    ({"name", "values"}): never what is graded against, only what the staff are told when it is not."""
    return {"format": FORMAT, "qid": qid, "kind": kind, "answer": answer} | ({"setting": setting} if setting else {})


def read(outputs: list[dict[str, Any]], qid: str) -> dict[str, Any] | None:
    """The last well-formed record for ``qid`` among a cell's outputs, or None."""
    found = None
    for out in outputs:
        data = out.get("data") if isinstance(out, dict) else None
        if not isinstance(data, dict) or MIME not in data:
            continue
        rec = data[MIME]
        if isinstance(rec, str):  # some writers store JSON MIME data as a string
            if len(rec) > MAX_RECORD_BYTES:
                continue
            try:
                rec = json.loads(rec)
            except ValueError:
                continue
        if not isinstance(rec, dict) or rec.get("qid") != qid or rec.get("format") != FORMAT:
            continue
        if len(json.dumps(rec.get("answer"))) > MAX_RECORD_BYTES:
            continue
        found = rec
    return found


# The metadata key of an answer cell the grader put back from the assignment, the notebook having none
# (``grading.sanitize``).
RESTORED = "scaling_course_restored"
# The metadata key of a test cell whose answer record the grader dropped: the notebook's output, or its answers'
# room, was spent (``grading.execute``).
RECORD_DROPPED = "scaling_course_record_dropped"


def why_no_record(cell: dict[str, Any], answer: dict[str, Any] | None = None) -> str:
    """Why an executed test cell holds no record, from its own outputs and those of its ``answer`` cell (the
    answer cell before it): the grader's feedback and the learner's ``selfcheck`` table say it alike. A name the
    check cannot find most often follows an answer cell that stopped: its placeholder, or another error."""
    if cell.get("metadata", {}).get(RECORD_DROPPED):
        return ("the test cell recorded an answer, but the grader dropped it: the notebook's output, or the room it "
                "keeps for answers, was spent by then (an answer or a print far too large, here or in a cell "
                "above: the grader's notes name them)")
    out = cell_error(cell)
    before = cell_error(answer) if out.get("ename") == "NameError" and answer is not None else {}
    if before.get("ename") == "NotImplementedError" and (answer or {}).get("metadata", {}).get(RESTORED):
        return ("your notebook had no answer cell here (deleted?): the assignment's, put back with its placeholder, "
                "stops with NotImplementedError: write the answer in it")
    if before.get("ename") == "NotImplementedError":
        return ("the answer cell above still holds its placeholder (# YOUR ANSWER HERE), which stops with "
                "NotImplementedError: write the answer there")
    if before:
        return (f"the answer cell above stopped with {before.get('ename', 'an error')}: "
                f"{str(before.get('evalue', ''))[:200]}, so the check had no answer to read")
    if out:
        return f"the test cell stopped with {out.get('ename', 'an error')}: {str(out.get('evalue', ''))[:200]}"
    if cell.get("execution_count") is None:
        return "the test cell did not run (an earlier cell hung, crashed the kernel or hit a limit)"
    return "the test cell ran but recorded nothing"


def cell_error(cell: dict[str, Any]) -> dict[str, Any]:
    """The first error output of an executed cell ({} where it ran through)."""
    return next((o for o in cell.get("outputs", []) if o.get("output_type") == "error"), {})
