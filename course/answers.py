"""``check`` and ``grade``: the two one-liners of every test cell.

``check(qid, answer)`` is the student's self-check: it compares the answer with the chapter's
fingerprints (no reference in plain text) and says what is wrong. ``grade(qid, answer)`` runs in
the hidden part of the test cell during grading: it records the answer as data for the grader and,
for people who use plain ``nbgrader autograde``, raises on a wrong answer (a provisional score that
the course's own grader does not trust; see docs/security.md).
"""

from __future__ import annotations

import ast
import difflib
import json
import linecache
import math
import numbers as numbers_
import os
import re
import sys
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import sympy

from autograder import kinds, record
from autograder.messages import MESH_BUILT, phrase
from autograder.verdict import Status, Verdict

from . import devices, progress, variant
from .errors import NotText, OneLine

# The head of a check that this machine, not the answer, kept from judging (too few devices): the learner's
# ``scaling-course selfcheck`` finds it in the check cell's error and says what to do under its table.
CANNOT_CHECK_HERE = "cannot be checked here"


class AnswerError(OneLine, AssertionError):
    """A wrong or unreadable answer. An AssertionError, so nbgrader's validate counts it; shown in one line
    (``errors.OneLine``)."""

    shown_as = "AnswerError"  # its subclasses too: the learner needs no finer name


class CheckInterrupted(OneLine, KeyboardInterrupt):
    """A self-check stopped by the learner (the stop button) or the notebook runner: still an interrupt, so that
    Run All stops, but one line."""

    shown_as = "KeyboardInterrupt"


class UnknownQuestion(AnswerError, LookupError):
    """A question id that no chapter has (a typo in a check line or in ``course.hint``): one line, with
    the nearest id."""


def _files() -> list[Any]:
    """The chapters' self-check data: the package's, or in a grading kernel the public part the grader hands it
    (``autograder.kernel_data``: no grading kernel can read the package's, which judges any answer it is shown)."""
    given = os.environ.get(record.CHAPTER_DATA_ENV)
    folder = Path(given) if given else resources.files("course") / "fingerprints"
    return sorted((f for f in folder.iterdir() if f.name.endswith(".json")), key=lambda p: p.name)


@cache
def _chapter_data(prefix: str) -> dict[str, Any]:
    for f in _files():
        if f.name.startswith(prefix + "_"):
            return json.loads(f.read_text())
    raise LookupError(f"No self-check data for {prefix}: run 'scaling-course release' (instructors).")


def fingerprints(prefix: str, whole: bool = False) -> dict[str, Any]:
    """The self-check data of chapter ``prefix`` (e.g. "ch01"), by question id; ``whole``: the chapter's
    file as released, its variant plan included."""
    data = _chapter_data(prefix)
    return data if whole else data["questions"]


def chapter_table() -> dict[str, tuple[str, list[str]]]:
    """Chapter name -> (title, question ids), for every chapter this package can check."""
    table = {}
    for f in _files():
        data = json.loads(f.read_text())
        table[data["chapter"]] = (data["title"], list(data["questions"]))
    return table


def _entry(qid: str) -> dict[str, Any]:
    """Question ``qid``'s self-check data, for the values this student computes with (variant.py)."""
    if not isinstance(qid, str):
        raise NotText("the first argument is the question id, as text, e.g. 'ch01-e3-critical-batch'")
    prefix = qid.split("-", 1)[0]
    try:
        data = _chapter_data(prefix)
    except LookupError:
        if _CHAPTER.fullmatch(prefix) or not _files():
            raise no_chapter_data(prefix) from None
        data = None
    if data is None or qid not in data["questions"]:
        if data is not None and devices.other_version() is not None:  # an id of the notebook's version, not a typo
            raise UnknownQuestion(f"No question {qid!r} in {prefix} " + other_version_advice()) from None
        ids = list(data["questions"]) if data else [q for _, qids in chapter_table().values() for q in qids]
        near = difflib.get_close_matches(qid, ids, n=1, cutoff=0.6)
        where = f"in {prefix}" if data else "in any chapter"
        advice = f"did you mean {near[0]!r}?" if near else "check the id in the question's check cell."
        raise UnknownQuestion(f"No question {qid!r} {where}: {advice}") from None
    return variant.entry(data, qid)


_CHAPTER = re.compile(r"ch\d\d")  # a chapter's prefix, as the locked cells name it (a typo such as "ch1" is not)


def no_chapter_data(prefix: str) -> UnknownQuestion:
    """The error for an id or setting of chapter ``prefix`` where the installed course has no self-check data for
    it: the notebook's cells name ids the learner never typed, so no "did you mean", but the version to install.
    Where no chapter has any, instructors may have not released the course."""
    have = devices.installed_version()
    installed = f"scaling-course {have}" if have else "scaling-course"
    wanted = devices.released_with() or have
    why = f"The installed course ({installed}) has no self-check data for {prefix}"
    if wanted and wanted != have:
        why += f", and this notebook was released with {wanted}"
    if not wanted:
        how = "install the version this notebook was released with, then restart the kernel"
    elif wanted == have:  # the notebook's version, broken: a file of it missing
        how = f"install it again ({devices.install_command(wanted, again=True)}), then restart the kernel"
    else:
        how = f"install the version this notebook was released with ({devices.install_command(wanted)}), then " \
              "restart the kernel"
    extra = "" if _files() else " (Instructors, in the course's repository: run 'scaling-course release'.)"
    return UnknownQuestion(f"{why}: {how}.{extra}")


def other_version_advice() -> str:
    """The end of the sentence for an id (or setting) the installed course's chapter does not have, where the
    notebook was released with another version: the likely cause, and what to do."""
    wanted, have = devices.other_version() or ("?", "?")
    return (f"of the installed course (scaling-course {have}), and this notebook was released with scaling-course "
            f"{wanted}: install {wanted} ({devices.install_command(wanted)}) and restart the kernel, or download "
            f"the notebook of {have}.")


def _book(qid: str) -> tuple[str, dict[str, Any]] | None:
    """Question ``qid``'s self-check data at the book's values, with its setting, where this kernel computes
    with other values (``variant.book_entry``); else None. Call after ``_entry``, which checks the id."""
    return variant.book_entry(_chapter_data(qid.split("-", 1)[0]), qid)


def _stale(qid: str, answer: Any, v: Verdict) -> Verdict:
    """A wrong answer that is right at the values the setting's cell showed before (practice mode deals new
    ones each run) was computed before the cell ran again: say that, not the factor it is off by."""
    if v.status is not Status.INCORRECT:
        return v
    earlier = variant.earlier_entries(_chapter_data(qid.split("-", 1)[0]), qid)
    if earlier is None:
        return v
    name, entries = earlier
    if any(kinds.selfcheck_live(e, qid, answer).ok for e in entries):
        return Verdict(Status.INCORRECT, 0.0, "stale_values", phrase("stale_values", setting=name))
    return v


def encode(qid: str, answer: Any) -> Any:
    """The JSON form of ``answer`` for question ``qid``, as the grader will read it."""
    return kinds.encode(_entry(qid), answer, _drawn(qid))


def _drawn(qid: str) -> list[dict[str, Any]] | None:
    """In a kernel of ``scaling-course grade``: the test cases drawn for this submission, which a function
    answer is called on instead of the public ones (the grade counts those). Elsewhere None."""
    path = os.environ.get(record.DRAWN_ENV)
    try:
        cases = json.loads(Path(path).read_text()) if path else {}
    except (OSError, ValueError):
        return None
    found = cases.get(qid) if isinstance(cases, dict) else None
    return found if isinstance(found, list) else None


def verdict(qid: str, answer: Any) -> Verdict:
    """What the self-check thinks of ``answer`` (no printing, no raising). A program is run live; a function is
    called on each public case within the self-check's bounds (``record.bounded_calls``). A question whose mesh
    has more devices than this kernel gets the ``devices`` verdict, about the kernel, not the answer. A grading
    kernel holds no data that judges (``autograder.kernel_data``): there the grader judges, and says so."""
    entry = _entry(qid)
    if _chapter_data(qid.split("-", 1)[0]).get("public"):
        return Verdict(Status.INVALID, 0.0, "judged_by_grader", phrase("judged_by_grader"))
    if entry["kind"] == "program":
        need, have = _mesh_devices(entry["program"]), devices.kernel_devices()
        if need > have:
            return _too_few_devices(need)
        # A program that could not be lowered on a kernel with more devices: the checks run it on a mesh of ``need``
        # (a program sized from jax.device_count() does not fit it).
        note = phrase("devices:program_mesh", need=need, have=devices.devices_text(have)) if have > need else ""
        with record.bounded_calls():  # its trace, as a function's calls
            return kinds.program.selfcheck_live(entry, qid, answer, lowering_note=note)
    if entry["kind"] != "function":
        return _stale(qid, answer, kinds.selfcheck_live(entry, qid, answer, book=_book(qid)))
    with record.bounded_calls():
        recorded = kinds.encode(entry, answer)
    need = _mesh_needed(recorded)
    # a mesh the course's devices could hold (a larger one is the function's own fault, as JAX says)
    if 0 < need <= devices.DEFAULT_DEVICES and devices.kernel_devices() < need:
        return _too_few_devices(need)
    return kinds.selfcheck_live(entry, qid, answer, recorded, book=_book(qid))


def _mesh_devices(program: dict[str, Any]) -> int:
    """The devices a program question's mesh has (where the learner chooses its shape, the fewest allowed)."""
    meshes = [program["mesh"], *(c["mesh"] for c in program.get("mesh_choices") or ())]
    return min(math.prod(int(n) for _, n in m) for m in meshes)


# JAX's words when a mesh asks for more devices than it has (jax.make_mesh), and the course's (course.mesh), read
# off its template.
_TOO_FEW = re.compile(r"Number of devices \d+ must be >= the product of mesh_shape \(([\d, ]+)\)|"
                      + re.escape(MESH_BUILT).replace(re.escape("{need}"), r"(\d+)"))


def _mesh_needed(recorded: Any) -> int:
    """The devices of the largest mesh a function answer could not build (0: none), from its calls' errors."""
    errors = [x.get("error") for x in recorded if isinstance(x, dict)] if isinstance(recorded, list) else []
    sizes = [m.group(1) or m.group(2) for e in errors if isinstance(e, str) for m in [_TOO_FEW.search(e)] if m]
    return max((math.prod(int(n) for n in size.replace(" ", "").split(",") if n) for size in sizes), default=0)


def _too_few_devices(need: int) -> Verdict:
    have = devices.kernel_devices()
    code = "devices:no_setup" if devices.chosen() is None else "devices:real"
    return Verdict(Status.INVALID, 0.0, "devices", phrase(code, have=devices.devices_text(have), need=need))


# The verdict of the last grade() per question: in a graded test cell check() follows grade() on the
# same answer, and running a student's program or function twice would double the grading time.
# None: the answer was only recorded, for a grader that judges it outside this kernel.
_graded: dict[str, tuple[int, Verdict | None]] = {}


def _judged_elsewhere() -> bool:
    """In a kernel of ``scaling-course grade`` the recorded answer is judged by the grader, which
    replaces the test cell's output with its verdict: judging here too (running a program answer on
    eight devices, say) would only slow grading. Setting this yourself changes no score."""
    return os.environ.get(record.GRADER_ENV) == "1"


def check(qid: str, answer: Any) -> None:
    """Self-check one answer: prints a short confirmation, or raises AnswerError saying what to fix."""
    __tracebackhide__ = True  # IPython then shows the message, not the course's internals
    caller = sys._getframe(1).f_globals  # the notebook's namespace, where a check cell runs
    recent = _graded.pop(qid, None)
    if recent and recent[0] == id(answer):
        if recent[1] is None:
            return  # recorded for the grader, which judges it
        v = recent[1]
    else:
        try:
            v = verdict(qid, answer)
        except KeyboardInterrupt:  # the stop button, or a notebook runner's cell limit: nothing was judged
            raise CheckInterrupted(phrase("interrupted", qid=qid)) from None
    if v.diagnosis == "devices":  # the kernel's fault, not the answer's: no attempt, no hint
        _fail(qid, v)
    if v.diagnosis == "judged_by_grader":  # a grading kernel: the grader's verdict replaces this cell's output
        print(v.message)
        return
    entry = progress.record(qid, str(v.status), v.score, v.message)
    notice = progress.take_notice()  # a progress file that could not be read: where it went
    if notice:
        print(notice)
    if v.ok:
        print(record.tick(qid))
        return
    unlocked = entry.get("wrong", 0) > 0 and progress.enabled() and _entry(qid).get("hint")
    unlocked_text = f'\nA hint is unlocked: run course.hint("{qid}")' if unlocked else ""
    _fail(qid, v, _shadowed(v, answer, caller) + unlocked_text)


def _shadowed(v: Verdict, answer: Any, namespace: dict[str, Any]) -> str:
    """Where a formula lacks symbols the answer needs because a cell gave their names numbers (a program prompt's
    "B = 16, D = 64, F = 256" copied into a cell), a sentence saying so: "depends on B, D and F; yours does not"
    alone sends a student who typed B, D and F looking for a mistake they did not make. Only where the answer is an
    expression (text is read with the course's symbols, whatever the notebook's names hold) and each number is a
    factor of one of its numbers: 8*D*F/(X*C) with B = 16 lacks B, and no cell put it there."""
    code = v.diagnosis or ""
    if not code.startswith("missing_symbol:") or not isinstance(answer, sympy.Expr):
        return ""
    found = [abs(r) for a in answer.atoms(sympy.Rational) for r in (a.p, a.q) if r]
    numbers = {name: value for name in code.split(":", 1)[1].split(",")
               if isinstance(value := namespace.get(name), int | numbers_.Integral)
               and not isinstance(value, bool) and value and any(r % int(value) == 0 for r in found)}
    if not numbers:
        return ""
    said = ", ".join(f"{name} = {value!r}" for name, value in numbers.items())
    return phrase("shadowed_symbols", said=said, names=", ".join(numbers))


def hint(qid: str) -> None:
    """Print the question's hint, once a wrong attempt has unlocked it."""
    __tracebackhide__ = True
    text = _entry(qid).get("hint") or "This question has no hint."
    entry = progress.get(qid)
    if not entry.get("wrong") and not entry.get("solved"):
        text = ("Hints unlock after a first answer the check can read and finds wrong: your last answer could "
                "not be read (its check cell says why)." if entry.get("status") == "invalid" else
                "Hints unlock after a first wrong attempt: run the check cell on your answer first.")
    print(f"{qid}: {text}")


def grade(qid: str, answer: Any) -> None:
    """Record the answer for the grader (hidden tests only)."""
    __tracebackhide__ = True
    payload = encode(qid, answer)
    setting = variant.in_use(_chapter_data(qid.split("-", 1)[0]), qid)
    _display({record.MIME: record.make(qid, _entry(qid)["kind"], payload, setting),
              "text/plain": f"[answer to {qid} recorded]"})
    if _judged_elsewhere():
        _graded[qid] = (id(answer), None)
        return
    v = kinds.selfcheck_live(_entry(qid), qid, answer, payload, _book(qid))
    _graded[qid] = (id(answer), v)
    if v.status is Status.PARTIAL:
        _show_points(_entry(qid).get("points"), v.score)
    if not v.ok:
        _fail(qid, v)


def _show_points(points: Any, score: float) -> None:
    """Plain ``nbgrader autograde`` scores a test cell by its outputs: an error gets nothing, and a number shown as
    the cell's result before it gets that many points. A partly right answer shows its share of the points first, so
    that nbgrader gives it what ``scaling-course grade`` gives, not the error's 0."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None or not isinstance(points, int | float):
        return
    shell.displayhook(round(float(points) * score, 6))


def _fail(qid: str, v: Verdict, notice: str = "") -> None:
    __tracebackhide__ = True
    status = {Status.PARTIAL: f"partly right ({v.score:.0%})", Status.INVALID: "cannot read the answer"}
    heads = {"too_expensive": "too expensive to check", "devices": CANNOT_CHECK_HERE}
    head = heads.get(v.diagnosis) or status.get(v.status, "not right yet")
    url = _entry(qid).get("url", "")
    more = f"\n(Book section: {url})" if url and v.status is not Status.INVALID else ""
    raise AnswerError(f"{qid}: {head}. {v.message}{more}{notice}") from None


def show_run_first(shell: Any = None) -> None:
    """In an IPython kernel (``shell``: this one's), show a NameError raised by a check cell's argument, a name no
    cell has set yet (the answer cell above not run), as one line that says to run that cell first. The error stays
    a NameError (Run All stops there, nbgrader counts it). So is a NameError raised anywhere in the code of the
    notebook's cells (a function they define included) for a name that is an answer of this chapter not given yet
    (``_run_first``), and a NameError for a name that a cell run earlier sets but stopped before setting
    (``_stopped_first``: the cells after a mesh cell on a kernel with fewer devices); any other NameError keeps its
    traceback. Installed
    by ``from course import check``; nothing where the kernel has custom exception handlers of its own."""
    if shell is None:
        try:
            from IPython import get_ipython
        except ImportError:
            return
        shell = get_ipython()
    if shell is None or getattr(shell, "custom_exceptions", None) != () or not hasattr(shell, "set_custom_exc"):
        return  # not IPython, installed already, or another handler there, which this one would replace

    def handler(self: Any, etype: type, value: BaseException, tb: Any, tb_offset: int | None = None) -> None:
        try:
            line = _run_first(self, value, tb)
            if line is None and type(value) is NameError and isinstance(getattr(value, "name", None), str):
                line = _stopped_first(self, value, value.name)
        except Exception:  # never in the way of the traceback (IPython would drop a handler that raises)
            line = None
        if line is not None:
            value._render_traceback_ = lambda: [line]  # type: ignore[attr-defined]  # how IPython shows it
        self.showtraceback((etype, value, tb), tb_offset=tb_offset)

    shell.set_custom_exc((NameError,), handler)
    events = getattr(shell, "events", None)
    if events is not None and _note_refusal not in events.callbacks.get("post_run_cell", []):
        events.register("post_run_cell", _note_refusal)


# The cells of this kernel that a device refusal stopped (execution count -> what to do instead): running such a
# cell again only repeats the refusal, so a NameError for a name it sets says how to get the devices.
_refused: dict[int, str] = {}


def _note_refusal(result: Any) -> None:
    """After each cell (IPython's post_run_cell event): remember whether its devices stopped it."""
    count = getattr(result, "execution_count", None)
    if isinstance(count, int):
        advice = _device_advice(getattr(result, "error_in_exec", None))
        if advice is None:
            _refused.pop(count, None)
        else:
            _refused[count] = advice


def _device_advice(error: BaseException | None) -> str | None:
    """What to do about ``error`` where this kernel's devices, not the cell, caused it: the setup could not give
    the kernel its devices (``SetupError``), or a mesh of the course's size is larger than the kernel (the course's
    sentence or JAX's own); None for any other error, a mesh larger than the course's included (the cell's sizes
    are wrong, and fixing the cell is the way)."""
    from .errors import SetupError

    if isinstance(error, SetupError):
        return phrase("devices:restart")
    if not isinstance(error, ValueError):
        return None
    need = _mesh_needed([{"error": str(error)}])
    if 0 < need <= devices.DEFAULT_DEVICES:  # its sentence says the kernel has fewer
        return phrase("devices:elsewhere", need=need)
    return None


@cache
def _answer_owners() -> dict[str, list[str]]:
    """Every chapter's answers: variable -> the question ids that name it, over all chapters (read once: a kernel
    that knows no chapter asks at every NameError)."""
    owners: dict[str, list[str]] = {}
    for prefix in dict.fromkeys(f.name.split("_", 1)[0] for f in _files()):
        for name, qid in answer_names(prefix).items():
            owners.setdefault(name, []).append(qid)
    return owners


def answer_names(prefix: str) -> dict[str, str]:
    """Chapter ``prefix``'s answers as its notebook names them: variable -> question id (the release writes them
    with the self-check data, ``autograder.release.answer_variables``); {} where it has none."""
    try:
        found = _chapter_data(prefix).get("answers")
    except LookupError:
        return {}
    return found if isinstance(found, dict) else {}


_CHAPTER_FILE = re.compile(r"(?:^|[/\\])(ch\d\d)_\w*\.ipynb$")
_QUESTION_ID = re.compile(r"[\"'](ch\d\d)-[\w-]+[\"']")


def _kernel_chapter(shell: Any) -> str | None:
    """The chapter this kernel runs: the notebook Jupyter names (``__session__``), else the chapter of the last
    question id or setting a cell run here named (the locked setting cells name theirs); None where unknown."""
    session = shell.user_ns.get("__session__") if isinstance(getattr(shell, "user_ns", None), dict) else None
    m = _CHAPTER_FILE.search(session) if isinstance(session, str) else None
    if m:
        return m.group(1)
    history = getattr(getattr(shell, "history_manager", None), "input_hist_raw", None) or []
    for cell in reversed(history[-200:]):
        found = _QUESTION_ID.findall(cell) if isinstance(cell, str) else []
        if found:
            return found[-1]
    return None


def _answer_first(shell: Any, value: BaseException, name: str) -> str | None:
    """The one line for a NameError of ``name`` where it is an answer of this kernel's chapter (of the one chapter
    that has it, where the chapter is unknown), or None."""
    chapter = _kernel_chapter(shell)
    if chapter is not None:
        qid = answer_names(chapter).get(name)
    else:
        owners = _answer_owners().get(name, [])
        qid = owners[0] if len(owners) == 1 else None
    if qid is None:
        return None
    return f"{type(value).__name__}: " + phrase("answer_first", error=str(value), name=name, qid=f" ({qid})")


def _run_first(shell: Any, value: BaseException, tb: Any) -> str | None:
    """The one line for a NameError raised in a cell's own code by the argument of a check(...) call in it, or,
    raised anywhere in the code of the notebook's cells (a function they define included), for a name that is an
    answer of this chapter not given yet; None where it is any other NameError."""
    name = getattr(value, "name", None)
    if not isinstance(name, str) or tb is None:
        return None
    while tb.tb_next is not None:
        tb = tb.tb_next
    code = tb.tb_frame.f_code
    if shell.compile.format_code_name(code.co_filename) is None:
        return None  # raised in a module's code, not a cell's
    if code.co_name != "<module>":  # inside a function or comprehension of a cell: not a check call's argument
        return _answer_first(shell, value, name)
    try:
        tree = ast.parse("".join(linecache.getlines(code.co_filename)))
    except (SyntaxError, ValueError):
        return _answer_first(shell, value, name)
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and node.lineno <= tb.tb_lineno <= (node.end_lineno or node.lineno)):
            continue
        called = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
        arguments = [*node.args, *(k.value for k in node.keywords)]
        if called == "check" and any(isinstance(n, ast.Name) and n.id == name
                                     for a in arguments for n in ast.walk(a)):
            return f"{type(value).__name__}: " + phrase("run_first", error=str(value), name=name)
    return _answer_first(shell, value, name)


def _bound_at_top(source: str) -> tuple[set[str], set[str]]:
    """The names a cell's top level binds, and those it deletes (None where it does not parse)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return set(), set()
    bound: set[str] = set()
    deleted: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.Delete):
            deleted.update(n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name))
        else:
            targets = {ast.Assign: lambda n: n.targets, ast.AnnAssign: lambda n: [n.target],
                       ast.AugAssign: lambda n: [n.target], ast.For: lambda n: [n.target],
                       ast.With: lambda n: [i.optional_vars for i in n.items if i.optional_vars]}
            for t in targets.get(type(node), lambda n: [])(node):
                bound.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
    return bound, deleted


def _stopped_first(shell: Any, value: BaseException, name: str) -> str | None:
    """The one line for a NameError of ``name`` where a cell run earlier in this kernel sets it at its top level and
    no later one deletes it: that cell stopped before it got there (on a kernel with fewer devices, a mesh cell
    stops with one line, and every cell after it that uses its names would show a traceback). None otherwise."""
    history = getattr(getattr(shell, "history_manager", None), "input_hist_raw", None) or []
    for number in range(len(history) - 2, max(len(history) - 400, 0), -1):  # the last one is this cell
        cell = history[number]
        if not isinstance(cell, str):
            continue
        bound, deleted = _bound_at_top(cell)
        if name in deleted:
            return None
        if name in bound:
            first = next((line.strip() for line in cell.splitlines() if line.strip()
                          and not line.strip().startswith("#")), "")
            first = first if len(first) <= 60 else first[:57] + "..."
            advice = _refused.get(number)
            return f"{type(value).__name__}: " + phrase("stopped_first" if advice is None else "stopped_first:devices",
                                                        error=str(value), name=name, cell=f"[{number}] (`{first}`)",
                                                        advice=advice)
    return None


def _display(bundle: dict[str, Any]) -> None:
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:
        get_ipython = None  # noqa: N806
    if get_ipython is not None and get_ipython() is not None:
        display(bundle, raw=True)
    else:
        print(bundle["text/plain"])


show_run_first()  # the kernel that imports check shows a check cell run too early in one line
