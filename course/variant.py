"""``course.setting``: the values of an exercise as this student was dealt them (autograder/variants.py).

Whose values: in a kernel of ``scaling-course grade``, the student the grader names (from the
submission's folder); elsewhere the one given to ``course.setup(student=...)``, else the environment's
SCALING_COURSE_STUDENT, else JupyterHub's user. With none of them, or with variants turned off for the
assignment, the book's own values, so that the book and the notebook agree. A learner who wants new
numbers calls ``course.setup(variant="practice")``: each ``course.setting`` then deals a fresh choice.

The self-check judges a varied question against the data of the values dealt here, and the grader
against the records built for the student of the submission's folder: claiming another student here
changes what the notebook shows, never what is graded.
"""

from __future__ import annotations

import difflib
import os
import random
from typing import Any

from autograder import record, variants

from .errors import BadArgument, NotText

MODES = ("student", "book", "practice")
_state: dict[str, Any] = {"student": None, "mode": "student"}
_practice: dict[str, int] = {}  # setting -> the choice last dealt in practice mode
_shown: dict[str, list[int]] = {}  # setting -> the choices its cell has shown in this kernel, the latest last


def configure(student: str | None = None, variant: str | None = None) -> None:
    """What ``course.setup`` passes on: the student id, and the mode ("student", "book" or "practice")."""
    if variant is not None:
        if variant not in MODES:
            raise BadArgument(f'variant must be one of {", ".join(map(repr, MODES))}')
        _state["mode"] = variant
        _practice.clear()
    if student is not None:
        if not isinstance(student, str) or not student.strip():
            raise BadArgument("student is your id in the class, as text (e.g. student=\"jdoe\")")
        _state["student"] = student.strip()


def _graded() -> bool:
    """In a kernel of ``scaling-course grade``, the grader names the student. Code of the notebook that
    names another (here, or in the environment) changes what the notebook computes with, never the
    values it is graded against: the grader deals those from the submission's folder."""
    return os.environ.get(record.GRADER_ENV) == "1"


def student() -> str | None:
    """The student whose values this kernel computes with, or None (the book's)."""
    if _graded():
        return os.environ.get(record.STUDENT_ENV) or None
    return _state["student"] or os.environ.get(record.STUDENT_ENV) or os.environ.get("JUPYTERHUB_USER") or None


def choice(data: dict[str, Any], name: str) -> int | None:
    """Which of setting ``name``'s released choices this kernel uses (None: the book's)."""
    block = data.get("variants") or {}
    mode = "student" if _graded() else _state["mode"]
    if mode == "practice":
        return _practice.get(name)
    who = student()
    if mode == "book" or who is None or not block.get("enabled"):
        return None
    return variants.pick(data, name, who)


def entry(data: dict[str, Any], qid: str) -> dict[str, Any]:
    """Question ``qid``'s self-check data for the values in use."""
    base = data["questions"][qid]
    name = base.get("setting")
    if name is None:
        return base
    index = choice(data, name)
    return _at_book(base) if index is None else variants.merge(_at_book(base), base["variants"][index])


def _at_book(base: dict[str, Any]) -> dict[str, Any]:
    """A question's self-check data at the book's values: its data without the settings' parts."""
    return {k: v for k, v in base.items() if k not in ("setting", "variants")}


def in_use(data: dict[str, Any], qid: str) -> dict[str, Any] | None:
    """The setting of question ``qid`` and the values this kernel computes with ({"name", "values"}), for
    its record; None for a question of no setting."""
    name = data["questions"][qid].get("setting")
    if name is None:
        return None
    s = data["variants"]["settings"][name]
    index = choice(data, name)
    return {"name": name, "values": variants.ordered(s, s["book"] if index is None else s["combos"][index])}


def earlier_entries(data: dict[str, Any], qid: str) -> tuple[str, list[dict[str, Any]]] | None:
    """(the setting, question ``qid``'s self-check data at the values its cell showed before the ones in use,
    the latest first), so that the check can tell an answer still computed from those; None where there are none."""
    name = data["questions"][qid].get("setting")
    if name is None:
        return None
    base, current = data["questions"][qid], choice(data, name)
    earlier = [variants.merge(_at_book(base), base["variants"][i]) for i in reversed(_shown.get(name, []))
               if i != current]
    return (name, earlier[:3]) if earlier else None


def book_entry(data: dict[str, Any], qid: str) -> tuple[str, dict[str, Any]] | None:
    """(the setting, question ``qid``'s self-check data at the book's values) where this kernel computes
    with other values, so that the check can tell a student who typed the book's answer; else None."""
    base = data["questions"][qid]
    name = base.get("setting")
    if name is None or choice(data, name) is None:
        return None
    return name, _at_book(base)


class Values:
    """One exercise's values, as attributes (``p.chip``, ``p.B``): chips and models are the records of
    ``course.hardware`` and ``course.models``, mesh shapes tuples."""

    def __init__(self, name: str, labels: dict[str, Any], kinds: dict[str, str], origin: str):
        self._name, self._labels, self._origin = name, labels, origin
        for key, lab in labels.items():
            setattr(self, key, _value(kinds.get(key, "value"), lab))

    def __repr__(self) -> str:
        return f"Your setting for {self._name}: {variants.describe(self._labels)}{self._origin}"


def _value(kind: str, lab: Any) -> Any:
    if kind == "chip":
        from . import hardware

        nodes = {n.name: n for n in hardware.NODES}
        return nodes[lab] if lab in nodes else hardware.by_name(lab)
    if kind == "model":
        from .models import CONFIGS

        return CONFIGS[lab]
    return tuple(lab) if isinstance(lab, list) else lab


def _settings_of(chapter: str) -> list[str]:
    from .answers import fingerprints

    return list((fingerprints(chapter[:4], whole=True).get("variants") or {}).get("settings") or {})


def setting(name: str) -> Values:
    """Show and return the values of exercise ``name`` ("ch01-e3") that this notebook computes with."""
    from . import devices
    from .answers import (
        _CHAPTER,
        UnknownQuestion,
        _display,
        _files,
        chapter_table,
        fingerprints,
        no_chapter_data,
        other_version_advice,
    )

    if not isinstance(name, str) or "-" not in name:
        raise NotText('the argument is the exercise\'s setting, as text, e.g. course.setting("ch01-e3")')
    prefix = name.split("-", 1)[0]
    try:
        data = fingerprints(prefix, whole=True)
    except LookupError:  # no chapter of that number: the installed course lacks it, or a typo in the number
        if _CHAPTER.fullmatch(prefix) or not _files():
            raise no_chapter_data(prefix) from None
        data = {}
    settings = (data.get("variants") or {}).get("settings") or {}
    if name not in settings and data and devices.other_version() is not None:
        raise UnknownQuestion(f"No exercise setting {name!r} in {prefix} " + other_version_advice())
    if name not in settings:
        known = list(settings) or [n for chapter in chapter_table() for n in _settings_of(chapter)]
        near = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
        advice = f"did you mean {near[0]!r}?" if near else "check the name in the cell that asks for it."
        raise UnknownQuestion(f"No exercise setting {name!r} {'in ' + prefix if settings else 'in any chapter'}: "
                              f"{advice}")
    s = settings[name]
    mode = "student" if _graded() else _state["mode"]
    if mode == "practice":
        options = [i for i in range(len(s["combos"])) if i != _practice.get(name)] or [0]
        _practice[name] = random.choice(options)
    index = choice(data, name)
    if index is not None:
        shown = _shown.setdefault(name, [])
        shown[:] = [i for i in shown if i != index] + [index]
    labels = variants.ordered(s, s["book"] if index is None else s["combos"][index])
    if mode == "practice":
        origin = "  (practice: run this cell again for new numbers)"
    elif index is None:
        origin = "  (the book's)"
    else:
        origin = f"  (dealt to {student()})"
    values = Values(name, labels, dict(s["params"]), origin)
    _display({record.SETTING_MIME: {"name": name, "values": labels}, "text/plain": repr(values)})
    return values
