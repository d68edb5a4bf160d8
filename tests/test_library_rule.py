"""No graded question can be answered by calling what a student imports from ``course``.

Why: a library function that computes the very quantity a question asks for rewards calling it
instead of deriving it, and a self-check tick then proves nothing ("what a student imports answers no
question", docs/architecture.md). So ``course`` holds inputs (chips, model dimensions, symbols, meshes,
plots, timelines); the derivations live in ``solutions/``, which only the grader imports.

How: every public callable of every ``course`` module is called with arguments drawn from the
questions' inputs, and each result is judged against every question of every chapter.

- Callables: module-level functions and classmethods, the methods and properties of the modules'
  public objects (chips, nodes, model configs, runs, ...) and of the objects those calls return, and,
  for formula questions, objects of the course's classes built from the question's symbols.
- Formula questions: the question's symbols (``q.names``) in every order, up to the callable's
  arity (sampled when there are too many orders), string parameters from the callable's own string
  constants. Compared first at one random point of the domain (counts are integers >= 2), exact to
  1e-9; a match is confirmed with the symbols themselves at three points before it is reported.
- Number and choice questions: a parameter annotated with a course class gets every object of that
  class; a parameter named after an attribute of the course's objects (``hbm_bytes_per_s``, ``D``,
  ``flops_per_s`` for ``bf16_flops_per_s``) gets those attributes' values, all from one object per
  call (one chip's numbers, not a mix); a bytes-per-element parameter gets 1, 2 and 4; a callable with
  a parameter the course states nothing for is not called. Products are capped. Compared within 2%
  first, then confirmed with the question's own tolerance.
- Function questions: the question's public probes as keyword arguments (or positional, for a
  signature of the same length); a callable that reproduces one of the outputs on every probe does
  the graded work.

- What the library says rather than returns: the docstrings of every module, class, function and
  property of ``course`` (the machinery modules' too), the text a call prints or returns (a report), and
  the text of every picture a plotting helper draws (titles, labels, legends, annotations; rendered with
  Agg). Numbers in that text are read with their unit ("373 us") and judged like results; pieces that
  read as formulas ("2 V / W_bidi") are parsed over each formula question's symbols and judged at three
  points.
- Plain module constants (numbers, and the numbers of module-level dicts, tuples and lists), against
  every number question at every choice of its setting (``test_no_module_constant_answers_a_question``).
- Objects a callable takes that are not the course's own (``Collective``): built by ``CONSTRUCTORS``
  from the questions' inputs (every collective kind, the arrays the prompts name, the group sizes) and,
  for formula questions, from their symbols; a public callable of ``course`` that is never called fails
  ``test_every_public_callable_is_called``.

Not counted as answers, because they derive nothing: a result equal to one of the call's own inputs
(``as_expr(B)`` is ``B``, ``cfg.dims()`` hands back the config's fields), and small whole numbers
(``SMALL_COUNT``). Limits, on purpose: arguments that are themselves derived quantities (the numbers
a question hands over after a first step) are not generated, and only one level of returned objects
is explored.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib
import inspect
import io
import itertools
import math
import numbers
import pkgutil
import random
import re
import warnings
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import sympy as sp

import course
from autograder.checks import judge
from autograder.collectives import KINDS, Collective
from autograder.numbers import UNITS
from autograder.questions import chapter_names, load_chapter
from course.symbols import symbol
from tests.chapter_checks import recorded
from tests.leak_checks import as_formula, dealt, declared_names, fragments, in_names, in_unit, numbers_in

# Modules that hold machinery, not quantities: they judge or record answers by qid, keep a learner's
# progress on disk, or start JAX devices. Calling them with arbitrary arguments would write files or
# initialise JAX, and none returns a number, an expression or an option id.
MACHINERY_MODULES = {"answers": "check/grade/hint judge or record an answer given its qid",
                     "progress": "reads and writes a learner's attempts on disk",
                     "devices": "starts JAX's devices"}
# Single callables that need a JAX program or time a real machine; they return no formula or number
# a question asks for (timings are never graded, see course.measure).
MACHINERY = {"course.measure.matmul_throughput": "times matmuls on this machine; never graded",
             "course.comms.report": "called by report_hits with every built collective",
             "course.comms.inspect": "lowers a JAX function; the collectives it returns are built directly "
                                     "(CONSTRUCTORS) and judged with every call that takes them",
             "course.comms.inspect_text": "reads a lowered program's text, as inspect does"}
DRAWS = "ax"  # a callable with an ``ax`` parameter draws a picture: its texts are read (plot_texts)
MAX_DRAWN = 24  # pictures drawn per plotting callable (each costs a figure)

FORMULA_RTOL = 1e-9
NUMBER_PREFILTER = 0.02
MAX_ORDERS = 2000  # symbol orders tried per (callable, arity); sampled beyond that
MAX_OBJECT_ORDERS = 400  # built objects with symbols, per (callable, formula group)
MAX_COMBOS = 3000  # argument combinations per callable for number questions
MAX_BUILT = 60_000  # ... where an argument is a built object (every collective of every prompt's array)
BPE = (1, 2, 4)
# Parameter names that mean an attribute of another name (the only aliases the course uses).
ALIASES = {"hbm_per_chip": "hbm_bytes", "one_way_bytes_per_s": "ici_bytes_per_s_per_link",
           "chip_intensity": "critical_intensity", "peak": "bf16_flops_per_s", "bw": "hbm_bytes_per_s"}
SHAPES = ((2, 2), (4, 4), (4, 8), (8, 8), (8, 16), (16, 16), (4, 4, 4), (8, 8, 8), (16, 16, 16), (16, 20, 28))
UNIT_SCALE = {"days": 86400.0}  # a library that returns seconds answers a question in days
# Small whole numbers (counts of axes, hosts, hops, heads per group, ...) are left out of the number
# search, as answers and as results: every count the course's objects state or imply coincides with
# some question's answer, and a coincidence is not a derivation. Formula and function questions have
# no such blind spot.
SMALL_COUNT = 64


# --- what a student can import ----------------------------------------------------------------------

def course_modules() -> list[Any]:
    names = sorted(m.name for m in pkgutil.iter_modules(course.__path__) if not m.name.startswith("_"))
    return [importlib.import_module(f"course.{n}") for n in names if n not in MACHINERY_MODULES]


def _is_course_class(obj: Any) -> bool:
    return inspect.isclass(obj) and getattr(obj, "__module__", "").startswith("course.")


def _is_course_object(obj: Any) -> bool:
    return _is_course_class(type(obj)) and not inspect.isclass(obj)


@dataclass
class Library:
    functions: list[tuple[str, Callable]]  # (label, callable taking arguments)
    zero_arg: list[tuple[str, Any, Any]]  # (label, value of a property, the object it belongs to)
    objects: list[tuple[str, Any]]  # public objects of course classes
    classes: dict[str, type]
    foreign: dict[str, type] = dataclasses.field(default_factory=dict)  # classes a course module re-exports


def _members(label: str, obj: Any) -> Iterator[tuple[str, str, Any]]:
    """("property" | "method", label, value or bound method) for each public member of an object."""
    fields = {f.name for f in dataclasses.fields(obj)} if dataclasses.is_dataclass(obj) else set()
    for name in dir(type(obj)):
        if name.startswith("_") or name in fields:
            continue
        attr = inspect.getattr_static(type(obj), name)
        if isinstance(attr, property):
            try:
                yield "property", f"{label}.{name}", getattr(obj, name)
            except Exception:
                continue
        elif inspect.isfunction(attr) or isinstance(attr, classmethod):
            yield "method", f"{label}.{name}", getattr(obj, name)


def _skipped(label: str, fn: Callable) -> bool:
    if label in MACHINERY:
        return True
    try:
        inspect.signature(fn)
    except (TypeError, ValueError):
        return True
    return False


def _draws(fn: Callable) -> bool:
    try:
        return DRAWS in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def discover() -> Library:
    functions: list[tuple[str, Callable]] = []
    objects: list[tuple[str, Any]] = []
    classes: dict[str, type] = {}
    foreign: dict[str, type] = {}
    for mod in course_modules():
        for name, value in vars(mod).items():
            if name.startswith("_"):
                continue
            label = f"{mod.__name__}.{name}"
            if inspect.isfunction(value) and _reexported(value.__module__, mod.__name__):
                if not _skipped(label, value):
                    functions.append((label, value))
            elif inspect.isclass(value) and value.__module__.startswith("autograder."):
                foreign[value.__name__] = value  # reachable as course.<module>.<name>: its objects are built
            elif _is_course_class(value) and value.__module__ == mod.__name__:
                classes[value.__name__] = value
                for attr in vars(value).values():
                    if isinstance(attr, classmethod):
                        fn = getattr(value, attr.__func__.__name__)
                        functions.append((f"{label}.{attr.__func__.__name__}", fn))
            elif _is_course_object(value):
                objects.append((label, value))
            elif isinstance(value, tuple | list | dict):
                items = value.items() if isinstance(value, dict) else enumerate(value)
                objects += [(f"{label}[{k!r}]", v) for k, v in items if _is_course_object(v)]
    seen: set[int] = set()
    unique = [(lab, o) for lab, o in objects if not (id(o) in seen or seen.add(id(o)))]
    zero_arg: list[tuple[str, Any, Any]] = []
    for label, obj in unique:
        for kind, lab, value in _members(label, obj):
            if kind == "property":
                zero_arg.append((lab, value, obj))
            elif not _skipped(lab, value):
                functions.append((lab, value))
    return Library(functions, zero_arg, unique, classes, foreign)


def _reexported(defined_in: str, module: str) -> bool:
    """A function of this module, or one of the grading core's that it hands on under its own name."""
    return defined_in == module or defined_in.startswith("autograder.")


# --- the questions -----------------------------------------------------------------------------------

@dataclass
class Questions:
    formulas: dict[tuple[tuple[str, ...], frozenset[str]], list[Any]]  # (names, counts) -> questions
    intervals: list[tuple[float, float, Any]]  # accepted ranges of number questions, sorted by low end
    lows: list[float]
    choices: dict[str, list[Any]]
    functions: list[Any]
    expected: dict[str, list[Any]]  # qid of a function question -> its reference's output per probe
    units: tuple[str, ...] = ()  # the units number questions ask in


def load_questions() -> Questions:
    formulas: dict = {}
    intervals: list[tuple[float, float, Any]] = []
    choices: dict[str, list[Any]] = {}
    functions: list[Any] = []
    book = {id(q) for c in chapter_names() for q in load_chapter(c).questions}
    for d in dealt():  # numbers and choices at every choice of their setting (formulas have no variants)
        q = d.question
        if q.kind == "formula":
            if id(q) in book:
                formulas.setdefault((tuple(q.names), frozenset(q.counts.split())), []).append(q)
        elif q.kind == "number":
            ref = float(q.reference)
            if ref == int(ref) and abs(ref) <= SMALL_COUNT:
                continue
            for scale in (1.0, UNIT_SCALE.get(getattr(q, "unit", ""), 1.0)):
                lo, hi = sorted((ref * (1 - NUMBER_PREFILTER), ref * (1 + NUMBER_PREFILTER)))
                bounds = getattr(q.tolerance, "bounds", None)
                if bounds is not None:
                    a, b = bounds(ref)
                    lo, hi = min(lo, a), max(hi, b)
                intervals.append((lo * scale, hi * scale, (q, scale)))
        elif q.kind == "choice":
            choices.setdefault(str(q.reference).strip().lower(), []).append(q)
        elif q.kind == "function" and not q.builder and id(q) in book:
            functions.append(q)
    intervals.sort(key=lambda t: t[0])
    expected = {q.qid: [call(q.reference, **probe) for probe in q.probes] for q in functions}
    units = tuple(sorted({q.unit for _, _, (q, _) in intervals}))
    return Questions(formulas, intervals, [t[0] for t in intervals], choices, functions, expected, units)


def number_accepts(q: Any, scale: float, value: float) -> bool:
    """The question's own rule (its tolerance), falling back to 2% where a record has none."""
    ref = float(q.reference)
    value = value / scale
    accepts = getattr(getattr(q, "tolerance", None), "accepts", None)
    if accepts is not None:
        return bool(accepts(ref, value))
    return abs(value - ref) <= NUMBER_PREFILTER * abs(ref)


# --- judging results ---------------------------------------------------------------------------------

# The unit a name states (the course names units: ``*_BYTES_PER_S``, ``ici_bytes_per_s_per_link``,
# ``*_seconds``, ``*_HZ``): a value is compared with the questions asked in its dimension. None: no
# question is asked in it (Hz); ANY_UNIT: the name says none.
UNIT_SUFFIXES = (("_BYTES_PER_S", "B/s"), ("_BYTES_PER_S_PER_LINK", "B/s"), ("_FLOPS_PER_S", "FLOP/s"),
                 ("_OPS_PER_S", "FLOP/s"), ("_HZ", None), ("_SECONDS", "s"), ("_S", "s"), ("_BYTES", "B"),
                 ("KIB", "B"), ("MIB", "B"))
ANY_UNIT = "any"


def named_unit(label: str) -> str | None:
    name = label.rsplit(".", 1)[-1].split("[", 1)[0].split("(", 1)[0].upper()
    return next((unit for suffix, unit in UNIT_SUFFIXES if name.endswith(suffix)), ANY_UNIT)


def scalars(result: Any) -> list[float]:
    """The numbers in a result: itself, or the items of a (short) tuple, list or dict."""
    items = list(result.values()) if isinstance(result, dict) else (
        list(result) if isinstance(result, tuple | list) and len(result) <= 16 else [result])
    out = []
    for r in items:
        if isinstance(r, bool):
            continue
        if isinstance(r, numbers.Real | np.number) or (isinstance(r, np.ndarray) and r.size == 1):
            out.append(float(np.asarray(r).reshape(())))
        elif isinstance(r, sp.Expr) and r.is_number:
            try:
                out.append(float(r))
            except (TypeError, ValueError):
                continue
    return [x for x in out if math.isfinite(x)]


@dataclass
class Finder:
    questions: Questions
    hits: dict[str, str]  # qid -> the call that answers it
    calls: int = 0
    ran: set[str] = dataclasses.field(default_factory=set)  # callables called at least once without raising
    stated: set[float] = dataclasses.field(default_factory=set)  # the inputs the course states (a text may repeat them)

    def found(self, q: Any, how: str) -> None:
        self.hits.setdefault(q.qid, how)

    def number(self, result: Any, how: Callable[[], str], given: set[float] = frozenset(),
               unit: str | None = ANY_UNIT) -> None:
        """``unit``: the unit the result is in, where its name says (a bandwidth answers no question in
        bytes); None: no question is asked in it."""
        if isinstance(result, str):
            for q in self.questions.choices.get(result.strip().lower(), []):
                self.found(q, how())
            return
        if unit is None:
            return
        for v in scalars(result):
            if v == 0 or v in given or (v == int(v) and abs(v) <= SMALL_COUNT):
                continue  # zero is no reference; a value the call was given (or its object states) derives nothing
            i, j = bisect_left(self.questions.lows, v - 2.5 * abs(v)), bisect_right(self.questions.lows, v)
            for lo, hi, (q, scale) in self.questions.intervals[i:j]:
                if unit != ANY_UNIT and UNITS[unit][0] != UNITS[q.unit][0]:
                    continue
                if lo <= v <= hi and number_accepts(q, scale, v):
                    self.found(q, f"{how()} = {v:.6g}")

    def text(self, text: str, how: Callable[[], str], given: set[float] = frozenset(),
             moved_bytes: bool = False) -> None:
        """What a text states: its numbers, each read in its own unit ("373 us" answers a question in
        seconds), and its pieces that read as formulas ("2 V / W_bidi"). ``moved_bytes``: the text reports
        the bytes a program moves, which it may (``STATES_BYTES``)."""
        for number, word, value in numbers_in(text):
            if value in given or (moved_bytes and word in UNITS and UNITS[word][0] == "bytes"):
                continue
            if not (word and word in UNITS):
                self.number(value, lambda number=number: f"{how()} says {number!r}", given)
                continue
            for unit in self.questions.units:
                x = in_unit(number, word, unit)
                if x is None or x == 0 or x in given:
                    continue
                i, j = bisect_left(self.questions.lows, x - 2.5 * abs(x)), bisect_right(self.questions.lows, x)
                for lo, hi, (q, scale) in self.questions.intervals[i:j]:
                    if q.unit == unit and scale == 1.0 and lo <= x <= hi and number_accepts(q, 1.0, x):
                        self.found(q, f"{how()} says {number} {word}")
        for fragment in fragments(text):
            for (names, counts), qs in self.questions.formulas.items():
                expr = as_formula(fragment, names)
                if expr is None or not expr.free_symbols:
                    continue
                for q in qs:
                    if q.qid in self.hits or not _formula_agrees(q, expr, counts):
                        continue
                    if judge(q, recorded(q, in_names(fragment, names))).ok:
                        self.found(q, f"{how()} says {fragment!r}")


def _formula_agrees(q: Any, expr: sp.Expr, counts: frozenset[str]) -> bool:
    """A cheap first look before the judge: equal to 1% at two points, with the question's limit
    symbols large (where its reference is the large-N form)."""
    rng = random.Random(q.qid)
    for _ in range(2):
        point = _point(tuple(q.names), counts, rng)
        point |= {n: 1e6 for n in q.limit.split()}
        a, b = _value(expr, point), _value(q.reference, point)
        if a is None or b is None or abs(a - b) > 0.01 * max(abs(a), abs(b), 1e-300):
            return False
    return True


def said(fn: Callable, *args: Any, **kwargs: Any) -> tuple[Any, list[str], bool]:
    """The result of a call, the texts it shows (what it prints, a string it returns, the words of a
    picture it draws) and whether it ran without raising."""
    out = io.StringIO()
    draws = _draws(fn)
    if draws:
        import matplotlib

        matplotlib.use("Agg")
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"), contextlib.redirect_stdout(out):
            warnings.simplefilter("ignore")
            result, ok = fn(*args, **kwargs), True
    except Exception:
        result, ok = None, False
    texts = [out.getvalue()] if out.getvalue() else []
    if isinstance(result, str):
        texts.append(result)
    if draws:
        texts += plot_texts(result)
    return result, texts, ok


def plot_texts(ax: Any) -> list[str]:
    """Every word a picture shows besides its tick numbers: titles, axis labels, legend entries, texts
    and annotations, of every axes of the figure (closed afterwards)."""
    import matplotlib.pyplot as plt
    from matplotlib.axes import Axes

    if not isinstance(ax, Axes):
        plt.close("all")
        return []
    fig = ax.figure
    texts = [t.get_text() for t in fig.texts]
    for a in fig.axes:
        texts += [a.get_title(loc) for loc in ("left", "center", "right")] + [a.get_xlabel(), a.get_ylabel()]
        texts += [t.get_text() for t in a.texts]
        texts += [str(line.get_label()) for line in [*a.lines, *a.patches, *a.collections]
                  if not str(line.get_label()).startswith("_")]
        legend = a.get_legend()
        if legend is not None:
            texts += [t.get_text() for t in legend.get_texts()]
            texts.append(legend.get_title().get_text())
    plt.close(fig)
    return [t for t in texts if t]


def call(fn: Callable, *args: Any, **kwargs: Any) -> Any:
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            return fn(*args, **kwargs)
    except Exception:
        return None


# --- formula questions -------------------------------------------------------------------------------

def _annotation(p: inspect.Parameter) -> str:
    a = p.annotation
    return "" if a is inspect.Parameter.empty else (a if isinstance(a, str) else getattr(a, "__name__", str(a)))


NON_NUMERIC = re.compile(r"\b(Sequence|ndarray|Mapping|Callable|dict|list|tuple|bool)\b")


def _strings(fn: Callable) -> list[str]:
    """Short string constants in a function's code (and its lambdas): the options of a ``str`` parameter."""
    code = getattr(getattr(fn, "__func__", fn), "__code__", None)
    out: list[str] = []
    stack = [code] if code else []
    while stack:
        c = stack.pop()
        for k in c.co_consts:
            if isinstance(k, str) and re.fullmatch(r"[A-Za-z0-9_]{1,20}", k):
                out.append(k)
            elif inspect.iscode(k):
                stack.append(k)
    return sorted(set(out))


def formula_slots(fn: Callable, classes: dict[str, type]) -> tuple[list[tuple[str, Any]], int] | None:
    """The positional parameters as (name, "sym" | [string options]) and how many symbols are
    required; None when a required parameter needs an object."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    slots: list[tuple[str, Any]] = []
    required = 0
    for p in sig.parameters.values():
        ann = _annotation(p)
        if p.kind is p.VAR_POSITIONAL:
            slots += [(f"{p.name}{i}", "sym") for i in range(6)]
            continue
        if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            continue
        needs_object = any(c in ann for c in classes) or NON_NUMERIC.search(ann)
        if ann == "str":
            options = _strings(fn) if p.default is p.empty else [p.default]
            slots.append((p.name, options))
        elif needs_object:
            if p.default is p.empty:
                return None
            break
        else:
            slots.append((p.name, "sym"))
            required += p.default is p.empty
    return slots, required


def _orders(names: tuple[str, ...], slot_names: list[str], k: int, rng: random.Random) -> Iterator[tuple[str, ...]]:
    """Assignments of the names to k symbol slots: all of them if few, else the one that matches the
    parameters' own names (the book's letters) plus a sample."""
    if math.perm(len(names), k) <= MAX_ORDERS:
        yield from itertools.permutations(names, k)
        return
    by_name = tuple(n if n in names else None for n in slot_names[:k])
    if None not in by_name and len(set(by_name)) == k:
        yield by_name  # type: ignore[misc]
    for _ in range(MAX_ORDERS):
        yield tuple(rng.sample(names, k))


def _point(names: tuple[str, ...], counts: frozenset[str], rng: random.Random) -> dict[str, float]:
    return {n: float(rng.randint(2, 64)) if n in counts else 10 ** rng.uniform(0.2, 3.2) for n in names}


@functools.lru_cache(maxsize=4096)
def _evaluator(expr: sp.Basic) -> tuple[tuple[str, ...], Callable] | None:
    """A float function of the expression's symbols (sympy's ``subs`` is 1000 times slower)."""
    names = tuple(sorted(str(x) for x in expr.free_symbols))
    try:
        return names, sp.lambdify([symbol(n) for n in names], expr, modules="math")
    except Exception:
        return None


def _value(expr: Any, point: dict[str, float]) -> float | None:
    if isinstance(expr, numbers.Real):
        return float(expr)
    ev = _evaluator(expr) if isinstance(expr, sp.Basic) else None
    if ev is None or not set(ev[0]) <= point.keys():
        return None
    v = call(ev[1], *(point[n] for n in ev[0]))
    try:
        v = complex(v)
    except (TypeError, ValueError):
        return None
    return v.real if abs(v.imag) <= 1e-12 * max(abs(v.real), 1e-300) else None


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= FORMULA_RTOL * max(abs(a), abs(b), 1e-300)


def formula_hits(finder: Finder, label: str, fn: Callable, classes: dict[str, type], seed: int = 0) -> None:
    shape = formula_slots(fn, classes)
    if shape is None:
        return
    slots, required = shape
    sym_slots = [i for i, (_, kind) in enumerate(slots) if kind == "sym"]
    str_slots = [i for i, (_, kind) in enumerate(slots) if kind != "sym"]
    for (names, counts), qs in finder.questions.formulas.items():
        rng = random.Random(hash((seed, names)) & 0xFFFF)
        point = _point(names, counts, rng)
        refs = [(q, _value(q.reference, point)) for q in qs]
        refs = [(q, r) for q, r in refs if r is not None]
        for k in range(max(required, 1), min(len(sym_slots), len(names)) + 1):
            # the string options of every string slot before the k-th symbol slot
            last = sym_slots[k - 1]
            strs = [i for i in str_slots if i < last]
            for options in itertools.product(*(slots[i][1] for i in strs)):
                for order in _orders(names, [slots[i][0] for i in sym_slots], k, rng):
                    args: list[Any] = [None] * (last + 1)
                    for i, o in zip(strs, options, strict=True):
                        args[i] = o
                    for i, n in zip(sym_slots[:k], order, strict=True):
                        args[i] = point[n]
                    finder.calls += 1
                    result = call(fn, *args)
                    if result is None:
                        continue
                    finder.ran.add(label)
                    for v in scalars(result):
                        if v in args:
                            continue  # it handed back one of its inputs (as_expr(B) is B): no derivation
                        for q, r in refs:
                            if _close(v, r) and q.qid not in finder.hits:
                                _confirm_formula(finder, q, label, fn, slots, sym_slots, strs, options, order, rng)


def _confirm_formula(finder: Finder, q: Any, label: str, fn: Callable, slots: list, sym_slots: list[int],
                     strs: list[int], options: tuple, order: tuple[str, ...], rng: random.Random) -> None:
    """The same call with the symbols themselves, equal to the reference at three points."""
    last = sym_slots[len(order) - 1]
    args: list[Any] = [None] * (last + 1)
    for i, o in zip(strs, options, strict=True):
        args[i] = o
    for i, n in zip(sym_slots, order, strict=False):
        args[i] = symbol(n)
    result = call(fn, *args)
    if result is None:
        return
    candidates = list(result.values()) if isinstance(result, dict) else (
        list(result) if isinstance(result, tuple | list) else [result])
    counts = frozenset(q.counts.split())
    for expr in candidates:
        if not isinstance(expr, sp.Basic | numbers.Real):
            continue
        points = [_point(tuple(q.names), counts, rng) for _ in range(3)]
        values = [(_value(expr, p), _value(q.reference, p)) for p in points]
        if all(a is not None and b is not None and _close(a, b) for a, b in values):
            shown = ", ".join(str(a) if isinstance(a, str) else str(a) for a in args if a is not None)
            finder.found(q, f"{label}({shown}) = {sp.sstr(expr)}")
            return


def class_formula_hits(finder: Finder, classes: dict[str, type]) -> None:
    """Objects of the course's classes built from a question's symbols (a model config from L, D,
    F, ...), then their properties and zero-argument methods."""
    for cls in classes.values():
        if not dataclasses.is_dataclass(cls):
            continue
        fields = [f for f in dataclasses.fields(cls) if f.init]
        for (names, counts), qs in finder.questions.formulas.items():
            kwargs: dict[str, Any] = {}
            ok = True
            for f in fields:
                if f.name in names:
                    kwargs[f.name] = symbol(f.name)
                elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                    if f.type in ("str", str):
                        kwargs[f.name] = "x"
                    else:
                        ok = False
                        break
            if not ok or not any(isinstance(v, sp.Symbol) for v in kwargs.values()):
                continue
            obj = call(cls, **kwargs)
            if obj is None:
                continue
            for kind, lab, value in _members(f"{cls.__name__}({', '.join(kwargs)})", obj):
                result = value if kind == "property" else call(value)
                if result is None:
                    continue
                for expr in (result.values() if isinstance(result, dict) else [result]):
                    if not isinstance(expr, sp.Expr):
                        continue
                    rng = random.Random(1)
                    for q in qs:
                        pts = [_point(names, counts, rng) for _ in range(3)]
                        if all((a := _value(expr, p)) is not None and (b := _value(q.reference, p)) is not None
                               and _close(a, b) for p in pts):
                            finder.found(q, f"{lab}{'' if kind == 'property' else '()'} = {sp.sstr(expr)}")


# --- number and choice questions ---------------------------------------------------------------------

def _fields(obj: Any) -> dict[str, Any]:
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)} if dataclasses.is_dataclass(obj) else {}


def _attributes(o: Any) -> dict[str, Any]:
    """The plain attributes of an object that is no dataclass (a student's setting values), and the
    values of its dicts."""
    out: dict[str, Any] = {}
    for k, v in vars(o).items() if hasattr(o, "__dict__") else ():
        out |= {f"{k}[{j}]": x for j, x in v.items()} if isinstance(v, dict) else {k: v}
    return out


def _own_values(*objs: Any) -> set[float]:
    """The numbers an object states or a call was given: a result equal to one of them derives nothing."""
    out: set[float] = set()
    for o in objs:
        values = (_fields(o) or _attributes(o)).values() if _is_course_object(o) else [o]
        for v in values:
            for x in (v if isinstance(v, tuple) else (v,)):
                if isinstance(x, numbers.Real) and not isinstance(x, bool):
                    out.add(float(x))
    return out


@dataclass(frozen=True)
class Source:
    """Where the values of one parameter come from: fixed ``values``, or the attributes ``attrs`` of
    whichever object of ``family`` a combination picks (so one call reads one chip's numbers)."""

    values: tuple[Any, ...] = ()
    family: type | None = None
    attrs: tuple[str, ...] = ()


def number_source(p: inspect.Parameter, fn: Callable, lib: Library, draws: bool = False) -> Source | None:
    """The question inputs a parameter can take, or None when the course states nothing for it. A
    picture is drawn whatever its numbers: a parameter of a plotting callable that the course states
    nothing for gets ``SAMPLES``."""
    ann = _annotation(p)
    default = () if p.default is p.empty else (p.default,)
    if p.name == DRAWS:
        return Source((None,))
    built = [name for name in CONSTRUCTORS if re.search(rf"\b{name}\b", ann)]
    listed = re.search(r"Sequence\[(\w+)", ann)
    if listed and listed.group(1) in lib.classes:  # all the course's objects of that class, and each alone
        objs = tuple(o for _, o in lib.objects if isinstance(o, lib.classes[listed.group(1)]))
        if objs:
            return Source(default + (objs,) + tuple((o,) for o in objs))
    if built:  # objects the course has none of at module level: built from the questions' inputs
        return Source(default + tuple(o for name in built for o in CONSTRUCTORS[name][0]()))
    if draws and "Callable" in ann:  # the student's own model, which a picture draws: any function will do
        return Source(default or (student_model,))
    if "Mapping" in ann:
        return Source(default or ({"curve": ARRAY},))
    if "ndarray" in ann:
        return Source(default or (ARRAY,))
    if ann in ("str", "object") and p.name in NAMED_INPUTS:
        return Source(default + tuple(NAMED_INPUTS[p.name](lib)))
    if p.name == "data" and "dict" in ann:
        return Source(default + released_data())
    source = _number_source(p, ann, default, fn, lib)
    if source is None and draws and p.kind is not p.VAR_KEYWORD:
        return Source(SAMPLES)
    return source


def _number_source(p: inspect.Parameter, ann: str, default: tuple, fn: Callable, lib: Library) -> Source | None:
    wanted = tuple(c for name, c in lib.classes.items() if re.search(rf"\b{name}\b", ann))
    if wanted:
        return Source(default + tuple(o for _, o in lib.objects if isinstance(o, wanted)))
    if ann == "str":
        return Source(default or tuple(_strings(fn)))
    if re.search(r"Sequence\[int\]|tuple\[int", ann):
        return Source(default + SHAPES)
    if NON_NUMERIC.search(ann):
        return Source(default) if default else None
    if "bpe" in p.name or "bytes_per_element" in p.name:
        return Source(BPE)
    name = ALIASES.get(p.name, p.name)
    for cls in {type(o) for _, o in lib.objects}:
        names = [f.name for f in dataclasses.fields(cls)] if dataclasses.is_dataclass(cls) else []
        attrs = tuple(a for a in names if a == name or a.endswith("_" + name))
        if attrs:
            return Source(default, _root(cls, lib), attrs)
    return Source(default) if default else None


def _root(cls: type, lib: Library) -> type:
    """The widest course class among cls's bases whose objects the library holds (Chip for TPU)."""
    for base in reversed(cls.__mro__):
        if _is_course_class(base) and any(isinstance(o, base) for _, o in lib.objects):
            return base
    return cls


def _built(s: Source) -> bool:
    return any(type(v).__name__ in CONSTRUCTORS for v in s.values[:1])


def combinations(sources: list[Source], lib: Library, rng: random.Random,
                 most: int = MAX_COMBOS) -> Iterator[list[Any]]:
    families = sorted({s.family for s in sources if s.family is not None}, key=lambda c: c.__name__)
    picks = [[o for _, o in lib.objects if isinstance(o, fam)] for fam in families]
    combos: list[list[Any]] = []
    for chosen in itertools.product(*picks):
        obj = dict(zip(families, chosen, strict=True))
        pools = []
        for s in sources:
            values = list(s.values)
            if s.family is not None:
                values += [getattr(obj[s.family], a, None) for a in s.attrs]
                values = [v for v in values if v is not None] or list(s.values)
            pools.append(values)
        combos += [list(c) for c in itertools.product(*pools)]
        if len(combos) > 20 * most:
            break
    if len(combos) > most:
        combos = rng.sample(combos, most)
    yield from combos


def number_hits(finder: Finder, label: str, fn: Callable, lib: Library) -> None:
    try:
        params = [p for p in inspect.signature(fn).parameters.values()
                  if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    except (TypeError, ValueError):
        return
    draws = _draws(fn)
    sources = [number_source(p, fn, lib, draws) for p in params]
    if any(s is None for s in sources):
        return  # a parameter nothing in the course provides: not a call made from the inputs
    bound = getattr(fn, "__self__", None)
    most = MAX_DRAWN if draws else MAX_BUILT if any(_built(s) for s in sources) else MAX_COMBOS  # type: ignore[arg-type]
    for args in combinations(sources, lib, random.Random(label), most):  # type: ignore[arg-type]
        finder.calls += 1
        kwargs = {p.name: a for p, a in zip(params, args, strict=True)}
        result, texts, ok = said(fn, **kwargs)
        finder.ran |= {label} if ok else set()
        given = _own_values(*args, *([bound] if bound is not None else []))
        for text in texts:  # a text may restate its inputs and the values of the object it shows
            finder.text(text, lambda kwargs=kwargs: f"{label}({_show(kwargs)})",
                        given | finder.stated | _own_values(result))
        if result is None:
            continue
        finder.number(result, lambda kwargs=kwargs: f"{label}({_show(kwargs)})", given, named_unit(label))
        if _is_course_object(result):  # one level down: a FatTree's bandwidth, a Torus's diameter
            for kind, lab, value in _members(f"{label}({_show(kwargs)})", result):
                if kind == "property":
                    finder.number(value, lambda lab=lab: lab, given | _own_values(result), named_unit(lab))


def _show(kwargs: dict[str, Any]) -> str:
    def one(v: Any) -> str:
        return getattr(v, "name", None) or (f"{v:.6g}" if isinstance(v, float) else repr(v))
    return ", ".join(f"{k}={one(v)}" for k, v in kwargs.items())


# --- function questions ------------------------------------------------------------------------------

def function_hits(finder: Finder, label: str, fn: Callable) -> None:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    fixed = all(p.kind is p.POSITIONAL_OR_KEYWORD for p in sig.parameters.values())
    for q in finder.questions.functions:
        outputs = q.outputs
        results, expected = [], []
        for probe, want in zip(q.probes, finder.questions.expected[q.qid], strict=True):
            try:
                args = sig.bind(**probe)
            except TypeError:
                if not (fixed and len(sig.parameters) == len(probe)):
                    break
                args = sig.bind(*probe.values())  # same order, other names (hbm vs hbm_per_chip)
            got = call(fn, *args.args, **args.kwargs)
            if got is None or want is None:
                break
            parts = list(got.values()) if isinstance(got, dict) else list(got) if isinstance(got, tuple) else []
            results.append([v for v in map(_flat, [got, *parts]) if v is not None])
            expected.append(want if isinstance(want, tuple) and len(outputs) > 1 else (want,))
        else:
            for i, out in enumerate(outputs):
                if out.kind != "number":
                    continue
                tol = out.tolerance

                def ok(candidates: list[list[float]], w: tuple, i: int = i, tol: Any = tol) -> bool:
                    want = _flat(w[i]) if i < len(w) else None
                    return want is not None and any(
                        len(c) == len(want) and all(tol.accepts(a, b) for a, b in zip(want, c, strict=True))
                        for c in candidates)
                if results and all(ok(g, w) for g, w in zip(results, expected, strict=True)):
                    finder.found(q, f"{label}(**probe) reproduces output {i} on every probe")
                    break


def _flat(x: Any) -> list[float] | None:
    """A number, or a list or array of them, as a flat list of floats (the grader judges a list of
    numbers element by element)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            arr = np.asarray(x, dtype=float).ravel()
    except (TypeError, ValueError, OverflowError):
        return None
    return arr.tolist() if 0 < arr.size <= 100_000 and np.isfinite(arr).all() else None



# --- objects the course has none of: built from the questions' inputs --------------------------------

PROMPT_ARRAY = re.compile(r"\b(bf16|f32|fp32|f16|int8|i8)\[(\d+(?:,\s*\d+)*)\]")
DTYPE_NAMES = {"fp32": "f32", "int8": "i8"}
GROUPS = (2, 4, 8, 16)
ARRAY = np.array([1.0, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024])  # an array argument of a plotting callable
SAMPLES = (3.0, 1.5e9)  # a number a picture is drawn with where the course states none


def student_model(*_: Any) -> float:
    """A student's function a plotting helper draws (a step time): one the course states nothing for."""
    return SAMPLES[0]


@functools.cache
def prompt_arrays() -> tuple[tuple[str, tuple[int, ...]], ...]:
    """Every array a prompt names ("bf16[2048, 8192]"), at every choice of every setting."""
    found = set()
    for d in dealt():
        for m in PROMPT_ARRAY.finditer(d.question.prompt):
            dims = tuple(int(x) for x in m.group(2).split(","))
            found.add((DTYPE_NAMES.get(m.group(1), m.group(1)), dims))
    return tuple(sorted(found))


@functools.cache
def collectives() -> tuple[Collective, ...]:
    """Every kind of collective over one axis of each group size, on each array a prompt names, whole or
    split along one of its dimensions by the group (one device's shard)."""
    out = []
    for dtype, dims in prompt_arrays():
        for g in GROUPS:
            shapes = {dims} | {dims[:i] + (dims[i] // g,) + dims[i + 1:] for i in range(len(dims)) if dims[i] % g == 0}
            out += [Collective(kind, ("X",), dtype, shape, g, 1) for shape in sorted(shapes) for kind in KINDS.values()]
    return tuple(out)


def symbolic_collectives(names: tuple[str, ...], counts: frozenset[str]) -> list[Collective]:
    """The same with a formula question's symbols: an operand of a one-byte elements (or a shard of them,
    a/g) over a group of g, one of its counts."""
    syms = [symbol(n) for n in names]
    return [Collective(kind, ("X",), "i8", (size,), symbol(g), 1)
            for g in sorted(counts) for size in syms + [a / symbol(g) for a in syms] for kind in KINDS.values()]


def _sample_ops() -> tuple[tuple[Any, ...], ...]:
    """A step of three ops (a list, as a timeline takes them). A timeline computes with the durations it is
    handed, a student's own estimates; these are femtoseconds, far from every answer, so that what its
    helpers compute from them (a step's length, the communication nothing hid) meets no answer by chance,
    while a number they stated of their own would still show."""
    from course.timeline import Op

    return ((Op("matmul", "compute", 1.234e-15), Op("gather", "comms", 2.345e-15),
             Op("second matmul", "compute", 1.357e-15, after=("gather",))),)


def _sample_spans() -> tuple[tuple[Any, ...], ...]:
    from course.timeline import schedule

    return (tuple(schedule(_sample_ops()[0])),)


# Class name -> the objects a parameter of that class gets (built from the questions' inputs).
CONSTRUCTORS: dict[str, tuple[Callable[[], tuple[Any, ...]]]] = {"Collective": (collectives,),
                                                                  "Op": (_sample_ops,), "Span": (_sample_spans,)}


def _setting_names(lib: Library) -> list[str]:
    return sorted({d.choice.split(" ", 1)[0] for d in dealt() if d.choice != "book"})


# A text parameter named after an input the course names: the chips' and models' names, the settings'
# names, the question ids, a record's fields, a question's symbols.
NAMED_INPUTS: dict[str, Callable[[Library], list[Any]]] = {
    "name": lambda lib: sorted({str(getattr(o, "name", "")) for _, o in lib.objects} - {""}) + _setting_names(lib)
    + list(declared_names()),
    "names": lambda lib: sorted({d.question.symbols for d in dealt() if d.question.kind == "formula"}),
    "qid": lambda lib: sorted({d.question.qid for d in dealt()}),
    "field": lambda lib: sorted({f.name for _, o in lib.objects if dataclasses.is_dataclass(o)
                                 for f in dataclasses.fields(o)}),
    "record": lambda lib: [o for _, o in lib.objects],
    "lane": lambda lib: ["compute", "comms"],
}


@functools.cache
def released_data() -> tuple[dict[str, Any], ...]:
    """Each chapter's released self-check data, as ``course.variant`` reads it."""
    import json
    from pathlib import Path

    folder = Path(course.__file__).parent / "fingerprints"
    return tuple(json.loads(p.read_text()) for p in sorted(folder.glob("ch*.json")))
# Texts that state the bytes a program moves: what the inspector is for. A student who writes a program
# and reads what it moves has measured it (docs/architecture.md); its times are what they derive.
STATES_BYTES = ("course.comms.report", "course.comms.Collective")


def _equal_formula(expr: Any, q: Any, counts: frozenset[str], rng: random.Random) -> bool:
    if not isinstance(expr, sp.Expr) or not expr.free_symbols:
        return False
    points = [_point(tuple(q.names), counts, rng) for _ in range(3)]
    return all((a := _value(expr, p)) is not None and (b := _value(q.reference, p)) is not None and _close(a, b)
               for p in points)


def object_formula_hits(finder: Finder, label: str, fn: Callable) -> None:
    """A callable that takes a built object (a ``Collective``), called with a formula question's symbols in
    the object and in its other numeric parameters: each symbol, and half and twice it (the question's W
    counts both directions of a link; a parameter may count one)."""
    try:
        params = [p for p in inspect.signature(fn).parameters.values() if p.kind is p.POSITIONAL_OR_KEYWORD]
    except (TypeError, ValueError):
        return
    takes = [i for i, p in enumerate(params) if any(re.search(rf"\b{n}\b", _annotation(p)) for n in ("Collective",))]
    if not takes:
        return
    rest = [p for i, p in enumerate(params) if i not in takes and p.default is p.empty]
    for (names, counts), qs in finder.questions.formulas.items():
        if not counts:
            continue
        rng = random.Random(f"{label} {names}")
        syms = [symbol(n) for n in names]
        scalars_ = [s * f for s in syms for f in (1, sp.Rational(1, 2), 2)]
        combos = list(itertools.product(symbolic_collectives(names, counts), *([scalars_] * len(rest))))
        if len(combos) > MAX_OBJECT_ORDERS:
            combos = rng.sample(combos, MAX_OBJECT_ORDERS)
        for obj, *values in combos:
            kwargs = {params[takes[0]].name: obj} | {p.name: v for p, v in zip(rest, values, strict=True)}
            finder.calls += 1
            result = call(fn, **kwargs)
            if result is None:
                continue
            finder.ran.add(label)
            for q in qs:
                if q.qid not in finder.hits and _equal_formula(result, q, counts, rng):
                    finder.found(q, f"{label}({obj}, {values}) = {sp.sstr(result)}")


def built_object_hits(finder: Finder, lib: Library) -> None:
    """The members of built objects: with numbers (every collective of the prompts' arrays: what they
    print), and with a formula question's symbols (what they compute)."""
    for name, cls in lib.foreign.items():
        if name not in CONSTRUCTORS:
            continue
        label = f"{cls.__module__.replace('autograder.collectives', 'course.comms')}.{name}"
        for obj in CONSTRUCTORS[name][0]():
            for kind, lab, value in _members(label, obj):
                result, texts, ok = said(value) if kind == "method" else (value, [], True)
                finder.ran |= {lab} if ok else set()
                given = _own_values(obj) | set(obj.operand_shape) | finder.stated
                for text in texts:
                    finder.text(text, lambda lab=lab, obj=obj: f"{lab} of {obj}", given, moved_bytes=True)
        for (names, counts), qs in finder.questions.formulas.items():
            if not counts or name != "Collective":
                continue
            rng = random.Random(" ".join(names))
            for obj in symbolic_collectives(names, counts):
                for kind, lab, value in _members(label, obj):
                    if kind != "property" or value in (*obj.operand_shape, obj.group_size):
                        continue  # a size it was built with derives nothing
                    for q in qs:
                        if q.qid not in finder.hits and _equal_formula(value, q, counts, rng):
                            finder.found(q, f"{lab} of {obj} = {sp.sstr(value)}")


def report_hits(finder: Finder, lib: Library) -> None:
    """``comms.report(fn, *args)`` prints what ``comms.inspect(fn, *args)`` finds: it is handed each built
    collective in place of a lowered program that runs it (lowering thousands of programs would take
    minutes), with every chip's link rate where it takes one."""
    from course import comms

    params = inspect.signature(comms.report).parameters
    links = {getattr(o, "ici_bytes_per_s_per_link", None) for _, o in lib.objects} - {None}
    rates = [None, *sorted(links)]
    original = comms.inspect
    try:
        for c in collectives():
            comms.inspect = lambda fn, *args, c=c: [c]
            for rate in rates:
                kwargs = {} if rate is None or "one_way_bytes_per_s" not in params else {"one_way_bytes_per_s": rate}
                finder.calls += 1
                result, texts, ok = said(comms.report, None, **kwargs)
                finder.ran |= {"course.comms.report"} if ok else set()
                given = set(c.operand_shape) | {c.group_size} | ({rate} if rate else set()) | finder.stated
                for text in texts:
                    finder.text(text, lambda c=c, rate=rate: f"course.comms.report({c}, {rate})", given,
                                moved_bytes=True)
    finally:
        comms.inspect = original


# --- what the library says: docstrings, constants -------------------------------------------------------

def all_course_modules() -> list[Any]:
    names = sorted(m.name for m in pkgutil.iter_modules(course.__path__) if not m.name.startswith("_"))
    return [course] + [importlib.import_module(f"course.{n}") for n in names]


def docstrings() -> list[tuple[str, str]]:
    """(where, text) of the docstring of every module, and of every public function, class, method and
    property defined in it, of the whole ``course`` package (machinery included)."""
    out = []
    for mod in all_course_modules():
        out.append((mod.__name__, mod.__doc__ or ""))
        for name, value in vars(mod).items():
            if name.startswith("_") or getattr(value, "__module__", None) != mod.__name__:
                continue
            out.append((f"{mod.__name__}.{name}", inspect.getdoc(value) or ""))
            if inspect.isclass(value):
                for attr_name, attr in vars(value).items():
                    if attr_name.startswith("_"):
                        continue
                    target = attr.fget if isinstance(attr, property) else getattr(attr, "__func__", attr)
                    if inspect.isfunction(target):
                        out.append((f"{mod.__name__}.{name}.{attr_name}", inspect.getdoc(target) or ""))
    return [(where, text) for where, text in out if text]


def constants() -> dict[str, float]:
    """Every plain number a ``course`` module states at module level, in dicts, tuples and lists too."""
    out: dict[str, float] = {}
    for mod in all_course_modules():
        for name, value in vars(mod).items():
            if name.startswith("_") or inspect.ismodule(value):
                continue
            items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, tuple | list) \
                else [(None, value)]
            for key, x in items:
                if isinstance(x, numbers.Real) and not isinstance(x, bool):
                    out[f"{mod.__name__}.{name}" + (f"[{key!r}]" if key is not None else "")] = float(x)
    return out


def stated(lib: Library) -> set[float]:
    """The inputs the course states: its objects' fields and its constants (a text may repeat them)."""
    return _own_values(*(o for _, o in lib.objects)) | set(constants().values())


# --- the test ----------------------------------------------------------------------------------------

def find_answers(lib: Library, questions: Questions) -> Finder:
    finder = Finder(questions, {}, stated=stated(lib))
    for label, value, obj in lib.zero_arg:
        finder.number(value, lambda label=label: label, _own_values(obj), named_unit(label))
        if _is_course_object(value):
            for kind, lab, v in _members(label, value):
                if kind == "property":
                    finder.number(v, lambda lab=lab: lab, _own_values(obj, value), named_unit(lab))
    for label, fn in lib.functions:
        number_hits(finder, label, fn, lib)
        if not _draws(fn):
            formula_hits(finder, label, fn, lib.classes)
            function_hits(finder, label, fn)
            object_formula_hits(finder, label, fn)
    class_formula_hits(finder, lib.classes)
    built_object_hits(finder, lib)
    report_hits(finder, lib)
    for where, text in docstrings():
        finder.text(text, lambda where=where: f"the docstring of {where}", finder.stated)
    return finder


@pytest.fixture(scope="module")
def library() -> Library:
    return discover()


@pytest.fixture(scope="module")
def questions() -> Questions:
    return load_questions()


def test_the_finder_finds_a_planted_answer(library: Library, questions: Questions) -> None:
    """Proof that the search works: a library that offered a question's formula, or a chip property
    equal to a number question's reference, would be caught."""
    (names, counts), qs = next((k, v) for k, v in questions.formulas.items() if 2 <= len(k[0]) <= 5)
    q = qs[0]
    ordered = [symbol(n) for n in names]

    def planted(*args: Any) -> Any:  # the reference with the question's symbols in reverse order
        return q.reference.subs(dict(zip(ordered, reversed(args), strict=True)), simultaneous=True)

    finder = Finder(questions, {})
    formula_hits(finder, "planted", lambda *a: planted(*a) if len(a) == len(names) else None, {})
    assert q.qid in finder.hits, "a formula planted in the library was not found"
    number = next(iter(questions.intervals))[2][0]
    finder.number(float(number.reference), lambda: "planted constant")
    assert number.qid in finder.hits


@pytest.fixture(scope="module")
def finder(library: Library, questions: Questions) -> Finder:
    return find_answers(library, questions)


@pytest.mark.every_chapter
def test_nothing_in_course_answers_a_question(library: Library, finder: Finder) -> None:
    """Every public callable of ``course``, called with the questions' inputs, answers no question; nor
    does any docstring, printed report or picture of it."""
    assert library.functions and library.objects, "found nothing to call: the discovery is broken"
    lines = [f"{qid}: {how}" for qid, how in sorted(finder.hits.items())]
    assert not lines, (f"{len(lines)} graded question(s) are answered by calling the course library "
                       f"({finder.calls} calls); move these derivations to solutions/:\n" + "\n".join(lines))


# Module constants that equal a question's answer by coincidence: (constant, the questions it meets) and
# why it is no derivation. Anything else a constant meets fails the test.
_POWERS_OF_TWO = "a power of two the course states as a size or a count; {} is a power of two for other reasons"
COINCIDENCES: dict[str, tuple[str, frozenset[str]]] = {
    "course.hardware.MIB": ("a unit of bytes: a question whose array is 1 MiB says so in its shapes", frozenset(
        {"ch03-pq0-bytes", "ch03-pq1-total-bytes", "ch07-e13-activation-bytes", "ch07-q1-kv-bytes"})),
    "course.hardware.NIC_BYTES_PER_S": ("the spine gives each GPU its NIC's 400 Gb/s (a full fat tree): that the "
                                        "two are equal is what E13 derives", frozenset({"ch12-e13-per-gpu-spine"})),
    "course.hardware.NVLINK5_LINK_BYTES_PER_S": ("an NVLink 5 link also runs at 50 GB/s; E13 is about the "
                                                 "InfiniBand spine", frozenset({"ch12-e13-per-gpu-spine"})),
    "course.hardware.TPU_V5P_VPU_FLOPS_PER_S": ("Part 1 states the VPU's 7e12 FLOP/s (Chapter 1, E7); Part 2's pop "
                                                "quiz derives 7.168e12 from its shape and the book answers 7e12",
                                                frozenset({"ch02-pq1-vpu-flops"})),
    "course.hardware.PRICE_USD_PER_CHIP_HOUR['H100']": ("dollars an hour; these answers are intensities and a "
                                                        "parallelism degree", frozenset(
        {"ch02-e2-vmem-intensity", "ch02-q4-crossover-vmem", "ch07-q4-tp-two-axes"})),
    "course.hardware.PRICE_USD_PER_CHIP_HOUR['TPU v5p']": ("dollars an hour; W2's tensor-parallel limit on a TPU7x "
                                                           "axis (4.17 ways) is a degree",
                                                           frozenset({"ch06-w2-tp-limit"})),
    "course.hardware.NVLINK5_SWITCH_PORTS": ("an NVLink 5 switch's port count; these answers are a crossover batch "
                                             "and a count of chips", frozenset(
        {"ch07-q7-crossover-f4d", "ch08-iq1-chips"})),
    "course.inference.PREFILL_MFU": ("a utilisation; E10's answer is the share of a prompt's tokens a cache misses",
                                     frozenset({"ch07-e10-prefix-fraction"})),
    "course.hardware.SHARP_THEORETICAL_GAIN": ("an AllReduce speed-up; these answers are memory fractions",
                                               frozenset({"ch08-iq8-bf16", "ch08-iq8-int8"})),
    "course.hardware.VPU_LANES": (_POWERS_OF_TWO.format("the answer"), frozenset(
        {"ch02-q2-v5e-hosts", "ch03-e2-ways", "ch07-e9-tp-limit", "ch09-e3-padded-elements", "ch11-c3-batch"})),
    "course.inference.V5E_SLICES['8x16']": (_POWERS_OF_TWO.format("the answer"), frozenset(
        {"ch02-q2-v5e-hosts", "ch03-e2-ways", "ch07-e9-tp-limit", "ch09-e3-padded-elements", "ch11-c3-batch"})),
    "course.inference.V5E_SLICES['16x16']": (_POWERS_OF_TWO.format("the answer"), frozenset(
        {"ch01-e5-tile-intensity", "ch01-e6-local-batch", "ch02-q2-v5e-cores", "ch02-q4-crossover-hbm",
         "ch04-q4-prefill-threshold", "ch06-a7-max-ways", "ch09-e3-padded-elements", "ch10-e1-local-cols",
         "ch11-c1-train-x", "ch11-c3-batch"})),
    "course.models.DEEPSEEK_V3_EXPERTS": (_POWERS_OF_TWO.format("the answer"), frozenset(
        {"ch01-e5-tile-intensity", "ch01-e6-local-batch", "ch02-q2-v5e-cores", "ch02-q4-crossover-hbm",
         "ch04-q4-prefill-threshold", "ch06-a7-max-ways", "ch09-e3-padded-elements", "ch10-e1-local-cols",
         "ch11-c1-train-x", "ch11-c3-batch"})),
    "course.inference.MEDIAN_DECODE_TOKENS": (_POWERS_OF_TWO.format("the answer") + "; ch06-a5-min-chips accepts "
                                              "every whole chip count an accepted total leads to (508 to 519 at "
                                              "3M tokens on the v4p), 512 among them", frozenset(
        {"ch01-e6-local-batch", "ch06-a7-max-ways", "ch10-e1-local-cols", "ch11-c1-train-x", "ch11-c3-d-model",
         "ch11-c4-tokens-per-chip", "ch12-e10-model-parallel", "ch06-a5-min-chips", "ch12-e1-h100-tc-flops"})),
}
# A constant's unit, from its name (the course names units: ``*_BYTES_PER_S``, ``*_S``, ``*_HZ``); a constant
# is compared with the questions asked in its dimension. None: no question is asked in it (Hz).
def constant_unit(label: str) -> str | None:
    unit = named_unit(label)
    return "" if unit == ANY_UNIT else unit


@pytest.mark.every_chapter
def test_no_module_constant_answers_a_question():
    """A plain number of a ``course`` module is an input; none may be an answer, at any choice of any
    setting (the round 70e9 of a model's name is not its parameter count)."""
    values = constants()
    lines = []
    for d in dealt():
        q = d.question
        if q.kind != "number" or not float(q.reference):
            continue
        for label, x in values.items():
            unit = constant_unit(label)
            if unit is None or UNITS[unit][0] != UNITS[q.unit][0] or (x == int(x) and abs(x) <= SMALL_COUNT):
                continue
            if q.qid in COINCIDENCES.get(label, ("", frozenset()))[1]:
                continue
            if q.tolerance.accepts(float(q.reference), x):
                lines.append(f"{q.qid} [{d.choice}]: {label} = {x:g}")
    assert values, "found no constant: the discovery is broken"
    assert not lines, ("module constants of course answer graded questions (move them to solutions/, or list "
                       "a coincidence with its reason):\n" + "\n".join(sorted(set(lines))))


def test_every_public_callable_is_called(library: Library, finder: Finder) -> None:
    """The search calls every public callable of ``course`` at least once without an error (the
    machinery aside): one it cannot call is one it does not check."""
    public = {label for label, _ in library.functions} | {"course.comms.report"}
    assert not public - finder.ran, f"never called: {sorted(public - finder.ran)}"
