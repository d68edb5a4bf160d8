"""The layers of docs/architecture.md hold: the core imports neither ``course`` nor the grading engine,
and a student's self-check loads only the answer kind it checks.

Why: the core (answer kinds, parsing, equivalence, numbers, messages, verdicts, records, question types)
is what both sides share. If it reached back into ``course`` or ``autograder.grading``, each side would
carry the other's machinery, and a change to the student's library could change a grade. A kernel that
checks a number has no use for the program kind (JAX's export machinery), the function kind, the batch
grader or the references; loading them costs every notebook time, and loading ``solutions`` would put
the answers in reach of the student's code.

How: each core module is imported alone in a fresh interpreter (``sys.modules`` shows what it pulled
in), and every import statement of a core module, including those inside functions that run only
later, is read from its source. A student kernel is a fresh interpreter that runs a notebook's first
cell and one number check.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import autograder
import autograder.kinds
from autograder.questions import Number, load_chapter
from tests.paths import ROOT

# The applications: command-line programs built on the core that may use ``course`` and the grader.
APPLICATIONS = {"cli", "demo", "release", "authoring", "selfcheck", "variant_report"}
FORBIDDEN = ("course", "autograder.grading")


def core_modules() -> list[str]:
    top = [f"autograder.{m.name}" for m in pkgutil.iter_modules(autograder.__path__)
           if not m.ispkg and m.name not in APPLICATIONS]
    kinds = [f"autograder.kinds.{m.name}" for m in pkgutil.iter_modules(autograder.kinds.__path__)]
    return ["autograder", "autograder.kinds", *sorted(top), *sorted(kinds)]


def _forbidden(name: str) -> bool:
    return any(name == f or name.startswith(f + ".") for f in FORBIDDEN)


def _loaded_after(code: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    """A fresh interpreter that runs ``code`` and prints, as JSON, the project's modules it loaded."""
    report = ("\nimport json, sys\nprint(json.dumps(sorted(m for m in sys.modules "
              "if m.split('.')[0] in ('autograder', 'course', 'solutions'))))")
    return subprocess.Popen([sys.executable, "-c", code + report], cwd=ROOT, text=True, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _modules(proc: subprocess.Popen) -> list[str]:
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def test_importing_a_core_module_loads_neither_course_nor_the_grader():
    # All at once: each interpreter spends most of its second importing sympy, and they do not share.
    procs = {name: _loaded_after(f"import {name}") for name in core_modules()}
    offenders = {name: bad for name, p in procs.items() if (bad := [m for m in _modules(p) if _forbidden(m)])}
    assert not offenders, f"core modules that load course or the grader: {offenders}"


def _imports(path: Path, package: str) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in a module's source, inside functions too."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            name = ".".join(p for p in (base, node.module or "") if p)
            found += [(node.lineno, f"{name}.{a.name}" if not node.module else name) for a in node.names]
    return found


@pytest.mark.parametrize("name", core_modules())
def test_no_core_module_imports_course_or_the_grader_even_later(name):
    """A lazy import inside a function escapes the fresh-interpreter test until the function runs."""
    spec = importlib.util.find_spec(name)
    package = name if spec.submodule_search_locations else name.rsplit(".", 1)[0]
    bad = [f"line {line}: {module}" for line, module in _imports(Path(spec.origin), package) if _forbidden(module)]
    assert not bad, f"{name} imports {bad}"


def test_a_number_check_loads_only_what_it_needs(tmp_path):
    q = next(q for q in load_chapter("ch01_rooflines").questions if isinstance(q, Number))
    kernel = ("import course\ncourse.setup()\nfrom course import check\n"
              f"check({q.qid!r}, {float(q.reference)!r})\n")
    env = {**os.environ, "SCALING_COURSE_PROGRESS": str(tmp_path / "progress.json")}
    loaded = _modules(_loaded_after(kernel, env))
    unwanted = ("autograder.kinds.program", "autograder.kinds.function", "autograder.programs",
                "autograder.grading", "solutions")
    extra = [m for m in loaded if any(m == u or m.startswith(u + ".") for u in unwanted)]
    assert not extra, f"a number check loaded {extra}"
    assert "autograder.kinds.number" in loaded, loaded


def test_the_learners_commands_load_nothing_the_student_wheel_leaves_out():
    """``scaling-course selfcheck`` and ``progress`` run from the student wheel, which has no grader: the modules
    they import (the command line's too) must not need one (the wheel's own test finds it only at the end)."""
    from autograder.distribution import GRADER_ONLY

    def grader_only(module: str) -> bool:
        path = module.replace(".", "/")
        return any(path + suffix == g or (path + "/").startswith(g) for g in GRADER_ONLY for suffix in ("", ".py"))

    procs = {name: _loaded_after(f"import {name}") for name in ("autograder.selfcheck", "autograder.cli")}
    offenders = {name: bad for name, p in procs.items() if (bad := [m for m in _modules(p) if grader_only(m)])}
    assert not offenders, f"learner commands that load what the student wheel leaves out: {offenders}"
