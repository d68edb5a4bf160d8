"""scaling-course: the library the chapter notebooks import.

The locked first cell of every notebook runs ``course.setup()`` before anything touches JAX, then
imports ``check`` (the self-check in each test cell) and ``grade`` (the hidden test's recorder).
Demo and plot cells read a student's answer through ``as_expr`` and ``as_number``, which accept every
form the grader accepts (sympy or text formulas, numbers with or without a unit).
Attributes load lazily, so ``course.symbols`` can be imported by the grading engine without
pulling in the notebook-side machinery. A module of the course loads on first use too (``course.models``
after a plain ``import course``): a grading kernel starts with every module imported, so an answer that reads
``course.models`` without importing it works there; it must work in the student's own kernel as well, or the
grader would pass an answer the student sees fail.
"""

from importlib import import_module
from importlib.util import find_spec
from typing import Any

_LAZY = {"check": "answers", "grade": "answers", "hint": "answers", "AnswerError": "answers",
         "setup": "devices", "mesh": "devices", "setting": "variant",
         "as_expr": "answerforms", "as_number": "answerforms", "UnreadableAnswer": "answerforms"}
__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        module = import_module(f"{__name__}.{_LAZY[name]}")
        if name == "check":  # in this kernel (IPython's), a check cell run before its answer cell says so
            module.show_run_first()
        return getattr(module, name)
    if not name.startswith("_") and find_spec(f"{__name__}.{name}") is not None:
        return import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'course' has no attribute {name!r}")
