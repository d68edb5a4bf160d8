"""The answer record: how a hidden test passes a student's answer to the grader *as data*.

In the student's kernel, ``grade(qid, answer)`` turns the answer into JSON (formula text, a number,
an option, a function's outputs on its test cases) and displays it under a dedicated MIME type in
the test cell's output. After the notebook ran, a process that never ran student code reads the
record back from the cell whose nbgrader grade_id is ``qid`` and judges it against the reference.
A student can forge a record, but a forged record only ever carries answers the student chose.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .formula import Invalid

MIME = "application/vnd.scaling-course.answer+json"
FORMAT = 1
MAX_RECORD_BYTES = 2_000_000  # a record larger than this is ignored, never parsed
# Set by ``scaling-course grade`` in its kernels: it judges records itself, so grade() only records.
GRADER_ENV = "SCALING_COURSE_GRADER"
# Also set there: a JSON file of the test cases drawn for this submission, by question id, on which
# grade() calls a function answer besides the public ones (see kinds/function.py).
DRAWN_ENV = "SCALING_COURSE_DRAWN_CASES"
# The student whose variant a kernel computes with (variants.py): set by the grader from the submission's
# folder, in a class by whoever starts the student's kernels, or by course.setup(student=...).
STUDENT_ENV = "SCALING_COURSE_STUDENT"


def encode_scalar(kind: str, answer: Any) -> Any:
    """JSON for one answer of kind formula / number / choice (text, or an invalid marker)."""
    if kind == "choice" and isinstance(answer, str):
        return answer
    if kind in ("number", "choice") and isinstance(answer, int | float) and not isinstance(answer, bool):
        try:
            value = float(answer)
        except (OverflowError, TypeError, ValueError):  # an int beyond any float, a hostile subclass
            return {"invalid": "not_finite", "detail": ""}
        return value if math.isfinite(value) else float.__repr__(value)
    from .formula import Invalid, answer_to_text  # sympy: in the kernel, not in the grader's workers

    text = answer_to_text(answer)
    if kind == "choice":  # an option is a string or a number; anything else is recorded as why not
        return _invalid(text if isinstance(text, Invalid) else Invalid("wrong_type", type(answer).__name__))
    return _invalid(text) if isinstance(text, Invalid) else text


def _invalid(x: Invalid) -> dict[str, str]:
    return {"invalid": x.code, "detail": x.detail}


def encode_outputs(fn: Callable[..., Any], calls: Iterable[tuple[tuple, dict]], kinds: list[str]) -> Any:
    """Call a student's function on each probe and encode what it returns, item by item."""
    if not callable(fn):
        return {"error": f"expected a function, got {type(fn).__name__}"}
    out = []
    for args, kwargs in calls:
        try:
            result = fn(*args, **kwargs)
        except Exception as e:  # the student's bug, reported per probe
            out.append({"error": f"{type(e).__name__}: {str(e)[:300]}"})
            continue
        items = list(result) if len(kinds) > 1 and isinstance(result, tuple | list) else [result]
        out.append([_encode_item(k, x) for k, x in zip(kinds, items, strict=False)] if len(items) == len(kinds)
                   else {"error": f"returned {len(items)} values, expected {len(kinds)}"})
    return out


def _encode_item(kind: str, x: Any) -> Any:
    kind = "number" if kind == "array" else kind  # the self-check data names array outputs "array"
    shape = getattr(x, "shape", None)
    if kind == "number" and shape not in (None, ()):
        try:
            return [float(v) for v in x.reshape(-1).tolist()]
        except Exception as e:
            return {"invalid": "wrong_type", "detail": f"array ({type(e).__name__})"}
    if kind == "number" and isinstance(x, list | tuple):
        return [encode_scalar("number", v) for v in x]
    return encode_scalar(kind, x)


def make(qid: str, kind: str, answer: Any) -> dict[str, Any]:
    return {"format": FORMAT, "qid": qid, "kind": kind, "answer": answer}


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
