"""The student's time budget measures the student's work, and every kill the grader makes says why.

- The notebook's time (``Limits.notebook_seconds``) starts when its first cell is sent: the grader's own latency
  in starting a kernel (a busy factory, a loaded machine, a retry) is bounded apart (``startup_seconds``).
- Once that time is up, no further cell is sent: the running one is interrupted, and killed after a short grace.
- A kernel the grader stopped (notebook deadline, a cell that ignored its interrupt, the folder quota) is
  reported with the grader's reason, in one line; "the kernel died" is left for deaths the grader did not cause.
- The per-submission bound that docs/grading.md states is the sum of the limits that make it up.
- An environment reached through a link under the temporary folder, which a kernel's private view empties,
  still gives kernels their modules.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from autograder.grading import factory
from autograder.grading.execute import KILL_GRACE_SECONDS, Limits, execute
from autograder.grading.jail import isolation_paths
from tests.paths import ROOT

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """One factory for the module's kernels, as ``scaling-course grade`` starts one for its workers."""
    work = tmp_path_factory.mktemp("budgets")
    own = factory.Factory(work / "factory")
    before = os.environ.get(factory.ENV)
    os.environ[factory.ENV] = own.socket
    yield work
    if before is None:
        os.environ.pop(factory.ENV, None)
    else:
        os.environ[factory.ENV] = before
    own.close()


def _run(made: Path, name: str, cells: list[str], limits: Limits):
    deny, allow = isolation_paths(ROOT)
    nb = new_notebook(cells=[new_code_cell(c) for c in cells])
    return nb, execute(nb, made / "work" / name, deny, allow, limits, made / f"{name}.log")


def _ran(nb) -> list[bool]:
    return [bool(c.get("execution_count")) for c in nb.cells if c.cell_type == "code"]


def test_a_slow_kernel_start_is_not_charged_to_the_notebook(made, monkeypatch):
    """Before, the notebook's deadline and its watchdog started before the kernel did: 8 s of the factory's
    latency came out of a 10 s budget, and cells that need 6 s of it were cut short."""
    connect = factory.connect

    def slow(*args, **kwargs):
        time.sleep(8)  # a busy factory, a loaded machine
        return connect(*args, **kwargs)

    monkeypatch.setattr(factory, "connect", slow)
    cells = ["import time\ntime.sleep(2)"] * 3 + ["print('last')"]
    nb, run = _run(made, "slow-start", cells, Limits(cell_seconds=10, notebook_seconds=10, startup_seconds=30))
    assert run.started and _ran(nb) == [True] * 4, run.problems
    assert not any("time limit" in p or "died" in p for p in run.problems), run.problems
    # The start is timed apart from the cells, so a slow class is looked for where its time went.
    assert 8 <= run.kernel_seconds < run.seconds - 6, (run.kernel_seconds, run.seconds)


# A cell that ignores interrupts and sleeps: only a kill ends it.
DEAF = "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\ntime.sleep(120)"


@pytest.mark.parametrize(("name", "cells", "limits", "why"), [
    ("notebook-deadline", ["x = 1", DEAF, "y = 2"], Limits(cell_seconds=60, notebook_seconds=4),
     "notebook time limit (4 s) was reached at cell 2"),
    ("deaf-cell", ["x = 1", DEAF, "y = 2"], Limits(cell_seconds=3, notebook_seconds=60),
     "cell 2 ran past the limit (3 s) and ignored the interrupt"),
    ("quota", ["x = 1", "open('big', 'wb').write(bytes(100 * 2**20))\nimport time\ntime.sleep(120)", "y = 2"],
     Limits(cell_seconds=60, notebook_seconds=60, work_bytes=64 * 2**20), "into its folders (the limit)"),
])
def test_each_kill_the_grader_makes_is_reported_once_with_its_reason(made, name, cells, limits, why):
    """Before, every kill was also reported as "the kernel died (memory limit, a crash, or exit())", which sends
    a student whose notebook was only slow looking for a crash."""
    nb, run = _run(made, name, cells, limits)
    assert run.started and _ran(nb) == [True, True, False], run.problems  # the second began, the third never
    assert not any("kernel died" in p for p in run.problems), run.problems
    assert sum(why in p for p in run.problems) == 1, run.problems
    stopped = [p for p in run.problems if "stopped" in p or "time limit" in p or "limit)" in p]
    assert len(stopped) == 1, run.problems


def test_a_death_the_grader_did_not_cause_is_still_the_kernels(made):
    nb, run = _run(made, "exit", ["x = 1", "import os\nos._exit(3)", "y = 2"], Limits(cell_seconds=30))
    assert [p for p in run.problems if "kernel died" in p] == [
        "the kernel died (memory limit, a crash, or exit()) at cell 2"], run.problems


def test_no_cell_is_sent_once_the_notebook_time_is_up(made):
    """Before, each cell after the deadline was still sent and given a second, until the watchdog killed the
    kernel 10 s later: a notebook of slow cells took its limit and that grace besides."""
    cells = ["import time\ntime.sleep(1.5)"] * 8
    start = time.monotonic()
    nb, run = _run(made, "deadline", cells, Limits(cell_seconds=10, notebook_seconds=4))
    took = time.monotonic() - start
    assert _ran(nb) == [True] * 3 + [False] * 5, run.problems  # the third is interrupted at the deadline
    assert [p for p in run.problems if "time limit" in p] == [
        "the notebook time limit (4 s) was reached at cell 3; later cells did not run"], run.problems
    assert took < 4 + 10, took  # kernel start and the interrupt: before, the watchdog alone ended it at 4 + 10 s


def test_markdown_cells_do_not_start_the_clock_late(made):
    """The clock starts at the first cell handed over, whatever its type: a notebook that opens with prose is
    timed like any other."""
    deny, allow = isolation_paths(ROOT)
    nb = new_notebook(cells=[new_markdown_cell("# intro"), new_code_cell("import time\ntime.sleep(30)")])
    run = execute(nb, made / "work" / "md", deny, allow, Limits(cell_seconds=60, notebook_seconds=3),
                  made / "md.log")
    assert sum("notebook time limit (3 s)" in p for p in run.problems) == 1, run.problems


def test_the_documented_per_submission_bound_is_the_sum_of_its_parts():
    """docs/grading.md states how long one submission may take with the default limits, part by part."""
    from autograder import bounds
    from autograder.grading import feedback, judge
    from autograder.grading.execute import DRAIN_SECONDS
    from autograder.grading.pipeline import DEFAULT_LIMITS, _deadline

    L = DEFAULT_LIMITS
    start = factory.START_SECONDS + L.startup_seconds  # the factory's reply, then the kernel's
    parts = [2 * start, L.notebook_seconds, KILL_GRACE_SECONDS + DRAIN_SECONDS, bounds.NOTEBOOK_SECONDS,
             judge.PROGRAM_SECONDS, feedback.REPORT_SECONDS]
    total = round(sum(parts))
    doc = " ".join((ROOT / "docs" / "grading.md").read_text().split())
    limits = doc.split("## Limits (per notebook)")[1].split("## ")[0]
    stated = re.search(r"at most ([\d,]+) s", limits)
    assert stated and int(stated.group(1).replace(",", "")) == total, (stated and stated.group(0), total)
    for part in parts:
        assert f"{round(part):,} s" in limits, part
    assert total <= _deadline(L), "the worker stops waiting before a submission's own limits are spent"


def _namespaces_available() -> bool:
    probe = "from autograder.grading.namespaces import available; raise SystemExit(0 if available() else 1)"
    return subprocess.run([sys.executable, "-c", probe], cwd=ROOT).returncode == 0


# Runs one notebook whose cells import modules the factory has not imported, with the grader started from the
# interpreter given (argv[1]'s environment reached through a link).
THROUGH_LINK = r'''
import json, sys
from pathlib import Path
import nbformat
from autograder.grading.execute import Limits, execute
from autograder.grading.jail import isolation_paths

root = Path(sys.argv[1])
deny, allow = isolation_paths(root / "class")
nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
    "import sys, xml.dom.minidom, sympy.physics.units\nprint('IMPORTED', sys.prefix)")])
run = execute(nb, root / "work" / "k", deny, allow, Limits(startup_seconds=60), root / "k.log")
print(json.dumps({"problems": run.problems, "out": "".join(o.get("text", "") for o in nb.cells[0].outputs)}))
'''


@pytest.mark.skipif(not _namespaces_available(), reason="no private namespaces: kernels see the temporary folder")
def test_an_environment_reached_through_a_link_under_tmp_still_serves_kernels(tmp_path):
    """Before, a grader run from ``/tmp/x/.venv -> /real/.venv`` handed kernels the unresolved prefix, which
    their private temporary folder hides: every kernel failed to start ("Kernel died before replying")."""
    link_dir = Path(tempfile.mkdtemp(prefix="sc-link-"))
    try:
        venv = link_dir / "venv"
        venv.symlink_to(Path(sys.prefix).resolve(), target_is_directory=True)
        python = venv / "bin" / Path(sys.executable).name
        (tmp_path / "class").mkdir()
        env = {k: v for k, v in os.environ.items() if k != factory.ENV}
        out = subprocess.run([str(python), "-c", THROUGH_LINK, str(tmp_path)], capture_output=True, text=True,
                             timeout=300, cwd=tmp_path, env=env)
        assert out.returncode == 0, out.stderr[-3000:]
        got = __import__("json").loads(out.stdout.strip().splitlines()[-1])
        assert "IMPORTED" in got["out"] and not got["problems"], got
        assert str(link_dir) not in got["out"], got  # the kernel's prefix is the resolved one
    finally:
        import shutil

        shutil.rmtree(link_dir, ignore_errors=True)
