"""Hostile submissions, each a real notebook graded by ``scaling-course grade`` beside a bystander.

Every submission answers Exercise E1 (2 points) correctly and then attacks. Each must score exactly
what its answers earn (2, or less when the attack breaks the student's own recording), never more;
the bystander's grade must be untouched, and the course files must be unchanged.
"""

import hashlib
import json
import re
import shutil
from pathlib import Path

import nbformat
import pytest

from autograder.grading.cgroup import PidsFence
from autograder.grading.execute import Limits
from autograder.grading.jail import landlock_abi
from autograder.grading.pipeline import grade, prepare
from autograder.grading.warmup import warm

ROOT = Path(__file__).resolve().parents[2]
CHAPTER = "ch01_rooflines"
NAME = f"{CHAPTER}.ipynb"
LIMITS = Limits(cell_seconds=15, notebook_seconds=120, output_bytes_per_cell=200_000, output_bytes_total=1_000_000)
LANDLOCK = landlock_abi()
pytestmark = pytest.mark.slow


def _fence_available() -> bool:
    fence = PidsFence("scaling-course-probe-0", 64)
    ok = fence.active
    fence.remove()
    return ok


FENCE = _fence_available()


def _gid(cell):
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


def answered():
    nb = nbformat.read(ROOT / "release" / CHAPTER / NAME, as_version=4)
    next(c for c in nb.cells if _gid(c) == "ch01-e1-answer").source = (
        "t_h100 = 1e12 / hw.H100.bf16_flops_per_s\nt_v6e = 1e12 / hw.TPU_V6E.bf16_flops_per_s")
    return nb


def after(anchor: str, code: str):
    """E1 answered, then ``code`` in a cell of its own right after the cell ``anchor``."""
    nb = answered()
    i = next(i for i, c in enumerate(nb.cells) if _gid(c) == anchor)
    nb.cells.insert(i + 1, nbformat.v4.new_code_cell(code))
    return nb


def edited(change):
    nb = answered()
    change(nb)
    return nb


PATCH_EVERYTHING = """
import builtins, json
import course, course.answers, autograder, autograder.checks, autograder.fingerprint, nbgrader, sympy, jax, numpy
from autograder.verdict import Status, Verdict
ok = lambda *a, **k: Verdict(Status.CORRECT, 1.0, "correct", "Correct.")
course.answers.selfcheck = autograder.fingerprint.selfcheck = autograder.checks.judge = ok
sympy.simplify = lambda *a, **k: 0
sympy.Basic.equals = lambda *a, **k: True
numpy.allclose = numpy.isclose = lambda *a, **k: True
jax.jit = lambda f, *a, **k: f
builtins.AssertionError = type("AssertionError", (Exception,), {})
_print, _import = builtins.print, builtins.__import__
builtins.print = lambda *a, **k: _print("[patched]", *a, **k)
builtins.__import__ = lambda *a, **k: _import(*a, **k)
"""

FAKE_RECORDER = """
from IPython.display import display
MIME = "application/vnd.scaling-course.answer+json"
def grade(qid, answer):
    display({MIME: {"format": 1, "qid": qid, "kind": "number", "answer": 12345.0}}, raw=True)
"""

FAKE_RECORDS_FROM_A_THREAD = """
import threading, time
from IPython.display import display
MIME = "application/vnd.scaling-course.answer+json"
def spam():
    for _ in range(200):
        for qid in ("ch01-q5-critical-batch", "ch01-e3-critical-batch"):
            display({MIME: {"format": 1, "qid": qid, "kind": "number", "answer": 999.0}}, raw=True)
        time.sleep(0.05)
threading.Thread(target=spam, daemon=True).start()
"""

READ_AND_WRITE = """
from pathlib import Path
import course
repo = Path(course.__file__).resolve().parent.parent
targets = [repo / "solutions" / "ch01_rooflines.py", repo / "source" / "ch01_rooflines" / "ch01_rooflines.ipynb",
           repo / "gradebook.db"]
for t in targets:
    for how in ("read", "write"):
        try:
            (t.read_bytes() if how == "read" else t.open("ab").write(b"x"))
            print("HOSTILE", how, t.name, "ALLOWED")
        except OSError as e:
            print("HOSTILE", how, t.name, "blocked")
"""

POISON_CACHE = """
import os, pathlib
cache = pathlib.Path(os.environ.get("SCALING_COURSE_JAX_CACHE", "/nonexistent"))
print("HOSTILE cache entries", len(list(cache.glob("jit_*"))))
attempts = {"create": lambda: (cache / "jit_f-poison-cache").write_bytes(b"x"),
            "overwrite": lambda: sorted(cache.glob("jit_*"))[0].open("ab").write(b"x"),
            "delete": lambda: (cache / "READY").unlink()}
for how, attempt in attempts.items():
    try:
        attempt()
        print("HOSTILE cache", how, "ALLOWED")
    except (OSError, IndexError):
        print("HOSTILE cache", how, "blocked")
"""

SIGNALS = """
import os, signal
for target in (os.getppid(), 1):
    try:
        os.kill(target, signal.SIGKILL)
        print("HOSTILE signal", target, "ALLOWED")
    except OSError:
        print("HOSTILE signal", target, "blocked")
try:  # every process it may signal: only its own sandbox's, so the grader and the others carry on
    os.kill(-1, signal.SIGKILL)
except OSError:
    pass
"""

FORK_BOMB = """
import os, time
try:
    while True:
        if os.fork() == 0:
            while True:
                time.sleep(1)
except OSError:
    pass
"""

SNEAKY_ANSWER = """
class Sneaky(float):
    def __repr__(self):
        try:
            import course, pathlib
            repo = pathlib.Path(course.__file__).resolve().parent.parent
            (repo / "solutions" / "ch01_rooflines.py").read_text()
            return "1.0101e-3"  # a student who could read the solutions would answer right
        except OSError:
            return "0.5"
t_h100 = Sneaky(0.5)
"""


DISPLAY_UPDATE_FLOOD = """
from IPython.display import display, update_display
for _ in range(40):  # forty small outputs that share one display id, each within the budget
    display({"text/plain": "x"}, raw=True, display_id="flood")
for _ in range(5):  # then each update would write 5 MB into all forty of them
    update_display({"text/plain": "y" * 5_000_000}, raw=True, display_id="flood")
"""


def students() -> dict:
    """student -> (notebook, or a function that fills the folder; expected score)."""
    def symlinked(folder):
        (folder / NAME).symlink_to(ROOT / "source" / CHAPTER / NAME)  # the reference, by a link

    def linked_folder(folder):
        folder.rmdir()
        folder.symlink_to(ROOT / "source" / CHAPTER)  # the instructor's folder, reference inside

    def huge(folder):
        nb = answered()
        nb.cells.append(nbformat.v4.new_markdown_cell("x" * (25 * 2**20)))
        nbformat.write(nb, folder / NAME)

    def nested(folder):
        (folder / NAME).write_text('{"cells": ' + "[" * 100_000 + "]" * 100_000 + "}")

    def pickled(folder):
        nbformat.write(answered(), folder / NAME)
        (folder / "answers.pkl").write_bytes(b"cos\nsystem\n(S'touch /tmp/pwned'\ntR.")

    def relink_setup(nb):
        next(c for c in nb.cells if _gid(c) == "setup").source = "grade = check = lambda *a, **k: None"

    def points(nb):
        for c in nb.cells:
            if _gid(c) == "ch01-e1-h100-time":
                c.metadata["nbgrader"]["points"] = 1000
                c.source = "print('nothing to see')"
        next(c for c in nb.cells if _gid(c) == "ch01-e1-answer").metadata["nbgrader"]["grade_id"] = "renamed"

    def kernelspec(nb):
        nb.metadata["kernelspec"] = {"name": "bash", "display_name": "Bash", "language": "bash"}

    cases = {
        "bystander": (answered(), 2),
        "patch-everything": (after("setup", PATCH_EVERYTHING), 2),
        "fake-recorder": (after("setup", FAKE_RECORDER), 0),
        "fake-records-thread": (after("ch01-e1-v6e-time", FAKE_RECORDS_FROM_A_THREAD), 2),
        "read-write-course": (after("ch01-e1-v6e-time", READ_AND_WRITE), 2),
        "poison-compilation-cache": (after("ch01-e1-v6e-time", POISON_CACHE), 2),
        "os-exit": (after("ch01-e1-v6e-time", "import os\nos._exit(3)"), 2),
        "system-exit": (after("ch01-e1-v6e-time", "raise SystemExit(1)"), 2),
        "keyboard-interrupt": (after("ch01-e1-v6e-time", "raise KeyboardInterrupt"), 2),
        "sleep-forever": (after("ch01-e1-v6e-time", "import time\ntime.sleep(10**6)"), 2),
        "thread-left-spinning": (after("ch01-e1-v6e-time",
                                       "import threading\nthreading.Thread(target=lambda: [0 for _ in iter(int, 1)], "
                                       "daemon=True).start()"), 2),
        "allocate-all": (after("ch01-e1-v6e-time", "x = bytearray(64 * 2**30)"), 2),
        "stdout-flood": (after("ch01-e1-v6e-time", "import sys\nfor _ in range(50_000):\n    print('y' * 1000)\n"
                               "    sys.stderr.write('z' * 1000 + '\\n')"), 2),
        "display-update-flood": (after("ch01-e1-v6e-time", DISPLAY_UPDATE_FLOOD), 2),
        "setup-cell-edited": (edited(relink_setup), 2),
        "metadata-edited": (edited(points), 2),
        "other-kernelspec": (edited(kernelspec), 2),
        "sneaky-answer": (after("ch01-e1-answer", SNEAKY_ANSWER), 1),
        "symlink-to-reference": (symlinked, 0),
        "symlinked-folder": (linked_folder, 0),
        "huge-notebook": (huge, 0),
        "deeply-nested-json": (nested, 0),
        "pickle-beside": (pickled, 2),
    }
    if LANDLOCK >= 6:
        cases["signals"] = (after("ch01-e1-v6e-time", SIGNALS), 2)
    if FENCE:
        cases["fork-bomb"] = (after("ch01-e1-v6e-time", FORK_BOMB), 2)
    return cases


def _digest(paths):
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in paths if p.is_file()}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    course = tmp_path_factory.mktemp("hostile")
    shutil.copy(ROOT / "nbgrader_config.py", course)
    shutil.copytree(ROOT / "source", course / "source")
    protected = [ROOT / "solutions" / f"{CHAPTER}.py", ROOT / "source" / CHAPTER / NAME,
                 course / "source" / CHAPTER / NAME]
    before = _digest(protected)
    cases = students()
    for student, (nb, _) in cases.items():
        folder = course / "submitted" / student / CHAPTER
        folder.mkdir(parents=True)
        nb(folder) if callable(nb) else nbformat.write(nb, folder / NAME)
    # The cache filled before grading (as a second run finds it), so every kernel is given it to attack.
    a = prepare(course, CHAPTER)
    warm(a, len(cases))[1].finish()
    summary = grade(course, CHAPTER, jobs=2, limits=LIMITS)
    return course, cases, {r["student"]: r for r in summary.results}, before, _digest(protected)


def test_each_hostile_submission_scores_what_its_answers_earn(graded):
    _, cases, results, _, _ = graded
    assert set(results) == set(cases)
    wrong = {s: (results[s]["score"], expected, results[s]["problems"]) for s, (_, expected) in cases.items()
             if results[s]["score"] != expected}
    assert not wrong, wrong


def test_the_bystander_and_the_gradebook_are_untouched(graded):
    from nbgrader.api import Gradebook

    course, cases, results, _, _ = graded
    assert results["bystander"]["score"] == 2 and not results["bystander"]["problems"]
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for student in cases:
            assert gb.find_submission(CHAPTER, student).score == results[student]["score"], student


def test_course_files_are_unchanged(graded):
    _, _, _, before, after_grading = graded
    assert before == after_grading
    assert not Path("/tmp/pwned").exists()


@pytest.mark.skipif(LANDLOCK == 0, reason="no Landlock: reads are not blocked on this system")
def test_reads_writes_and_signals_were_refused(graded):
    course, cases, _, _, _ = graded
    for student in ("read-write-course", "poison-compilation-cache", "signals"):
        if student not in cases:
            continue
        nb = nbformat.read(course / "autograded" / student / CHAPTER / NAME, as_version=4)
        text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
        assert "HOSTILE" in text and "ALLOWED" not in text, text[-2000:]


@pytest.mark.skipif(LANDLOCK == 0, reason="no Landlock: the grader uses no compilation cache here")
def test_the_compilation_cache_was_used_and_left_as_the_reference_filled_it(graded):
    course, _, results, _, _ = graded
    cache = course / ".scaling-course" / "jax-cache" / CHAPTER
    assert (cache / "READY").is_file() and any(cache.glob("jit_*"))
    assert not (cache / "jit_f-poison-cache").exists()
    nb = nbformat.read(course / "autograded" / "poison-compilation-cache" / CHAPTER / NAME, as_version=4)
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert re.search(r"HOSTILE cache entries [1-9]", text), text[-2000:]  # the attack had a cache to attack
    assert results["bystander"]["score"] == 2


@pytest.mark.parametrize(("student", "note"), [
    ("symlink-to-reference", "not followed"), ("symlinked-folder", "symbolic link"), ("huge-notebook", "limit"),
    ("deeply-nested-json", "cannot be read"), ("os-exit", "kernel died"), ("sleep-forever", "time limit"),
    ("stdout-flood", "output over the limit"), ("metadata-edited", "restored"),
    ("display-update-flood", "output over the limit"),
])
def test_problems_are_reported(graded, student, note):
    _, _, results, _, _ = graded
    assert any(note in p for p in results[student]["problems"]), results[student]["problems"]


def test_no_fake_record_counts(graded):
    _, _, results, _, _ = graded
    for student in ("fake-records-thread",):
        assert results[student]["questions"]["ch01-e3-critical-batch"]["score"] == 0
        assert results[student]["questions"]["ch01-q5-critical-batch"]["score"] == 0
    assert json.dumps(results["fake-recorder"]["questions"]).count('"score": 0.0') == len(
        results["fake-recorder"]["questions"])


@pytest.mark.parametrize("student", ["stdout-flood", "display-update-flood"])
def test_output_floods_leave_small_files(graded, student):
    """Every byte a kernel can make the grader keep counts against the output budget, display updates
    included: the autograded notebook and the feedback page stay near the budget."""
    course, _, _, _, _ = graded
    for path in (course / "autograded" / student / CHAPTER / NAME,
                 course / "feedback" / student / CHAPTER / f"{CHAPTER}.html"):
        assert path.stat().st_size < 3 * LIMITS.output_bytes_total, (path, path.stat().st_size)
