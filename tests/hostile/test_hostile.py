"""Hostile submissions, each a real notebook graded by ``scaling-course grade`` beside a bystander.

Every submission answers Exercise E1 (2 points) correctly and then attacks. Each must score exactly
what its answers earn (2, or less when the attack breaks the student's own recording), never more;
the bystander's grade must be untouched, and the course files must be unchanged.
"""

import hashlib
import io
import json
import os
import re
import shutil
import zipfile
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest

from autograder.demo import copy_course, submit
from autograder.grading.cgroup import PidsFence
from autograder.grading.console import Progress
from autograder.grading.execute import Limits
from autograder.grading.jail import landlock_abi
from autograder.grading.pipeline import grade, prepare
from autograder.grading.warmup import warm
from tests.paths import ROOT

CHAPTER = "ch01_rooflines"
NAME = f"{CHAPTER}.ipynb"
# The quota on what a kernel writes into its folders is lowered from its default (docs/security.md) so that
# the attack that fills the disk costs little.
WORK_BYTES = 64 * 2**20
LIMITS = Limits(cell_seconds=15, notebook_seconds=120, output_bytes_per_cell=200_000, output_bytes_total=1_000_000,
                work_bytes=WORK_BYTES)
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
        "t_h100 = e1.flops / hw.H100.bf16_flops_per_s\nt_v6e = e1.flops / hw.TPU_V6E.bf16_flops_per_s")
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


# A raw output message whose text holds half of a UTF-16 pair, which no file can hold: writing the autograded notebook
# raised, and the whole submission was a grader error, sent to a person, on every run.
HALF_PAIR_IN_A_MESSAGE = """
k = get_ipython().kernel
k.session.send(k.iopub_socket, "stream", content=b'{"name": "stdout", "text": "half \\\\ud800 a pair"}',
               parent=k.get_parent(), ident=b"x")
"""

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
           repo / "solutions" / "ch09_programs.json",  # what Chapter 9's CX8 draws its cases from
           repo / "gradebook.db", Path.cwd().parents[1] / "secret",  # the grading seeds' secret
           repo / "tests" / "chapters" / "syllabus_answers.json"]  # the checkout's tests hold the book's answers
for t in targets:
    for how in ("read", "write"):
        try:
            (t.read_bytes() if how == "read" else t.open("ab").write(b"x"))
            print("HOSTILE", how, t.name, "ALLOWED")
        except OSError as e:
            print("HOSTILE", how, t.name, "blocked")
# The grader's own readers of compiled programs (Chapter 9 asks students to write them) and the program questions'
# references: installed with the package the kernel imports, but not for the kernel to read.
import autograder, importlib
package = Path(autograder.__file__).resolve().parent
for name in ("compiled_hlo", "program_references"):
    try:
        (package / name / "__init__.py").read_bytes()
        print("HOSTILE", "read", name, "ALLOWED")
    except OSError:
        print("HOSTILE", "read", name, "blocked")
    try:
        importlib.import_module("autograder." + name)
        print("HOSTILE", "import", name, "ALLOWED")
    except Exception:
        print("HOSTILE", "import", name, "blocked")
# The self-check's data judges any answer: a notebook that reads it can search for its own answers at grading time.
import os
from course import answers
try:
    (Path(course.__file__).resolve().parent / "fingerprints" / "ch01_rooflines.json").read_bytes()
    print("HOSTILE", "read", "fingerprints", "ALLOWED")
except OSError:
    print("HOSTILE", "read", "fingerprints", "blocked")
v = answers.verdict("ch01-e1-h100-time", 1.0)
print("HOSTILE", "verdict", "ALLOWED" if v.diagnosis != "judged_by_grader" else "blocked")
given = os.environ.pop("SCALING_COURSE_CHAPTER_DATA", "")
answers._chapter_data.cache_clear()
try:
    v = answers.verdict("ch01-e1-h100-time", 1.0)
    print("HOSTILE", "verdict without the given data", "ALLOWED" if v.diagnosis != "judged_by_grader" else "blocked")
except Exception:
    print("HOSTILE", "verdict without the given data", "blocked")
os.environ["SCALING_COURSE_CHAPTER_DATA"] = given  # the answers after this cell are recorded as before
answers._chapter_data.cache_clear()
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


# Another class's kernel, as a kernel of this class could find it: a listening Unix socket where the
# grader keeps kernel sockets (the system's temporary folder), a file in /dev/shm, a UDP port on the
# loopback. The fixture sets them up; a kernel that reaches any of them could read or feed another.
DECOY_SOCKET_DIR = "sc-decoy-kernel"
DECOY_SHM = "/dev/shm/sc-decoy-secret"
DECOY_UDP_PORT = 47_123

REACH_OTHER_KERNELS = f"""
import json, os, socket, stat, tempfile
from pathlib import Path
mine = Path(json.loads(Path("kernel.json").read_text())["ip"]).parent
# Where /tmp cannot be listed (a course directory inside it), the names a kernel can learn or guess.
roots = ["/tmp", "/var/tmp", "/dev/shm", "/run", str(mine.parent), "/tmp/{DECOY_SOCKET_DIR}"]
roots += [f"/proc/{{p}}/{{w}}" for p in os.listdir("/proc") if p.isdigit() for w in ("root/tmp", "cwd")]
found = set()
for root in roots:
    try:
        for folder, dirs, files in os.walk(root):
            if folder.count("/") - root.count("/") >= 4 or Path(folder).resolve() == mine.resolve():
                dirs[:] = []
                continue
            for name in files:
                path = os.path.join(folder, name)
                try:
                    if stat.S_ISSOCK(os.lstat(path).st_mode) and Path(path).resolve().parent != mine.resolve():
                        found.add(path)
                except OSError:
                    pass
    except OSError:
        pass
reached = 0
for path in sorted(found):
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(path)
        reached += 1
        print("HOSTILE socket", path, "ALLOWED")
    except OSError:
        pass
    finally:
        s.close()
print("HOSTILE sockets seen", len(found), "reached", reached)
for name, target in (("abstract", "\\0scaling-course-decoy"),):
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(target)
        print("HOSTILE socket", name, "ALLOWED")
    except OSError:
        print("HOSTILE socket", name, "blocked")
    finally:
        s.close()
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:
    u.sendto(b"answers", ("127.0.0.1", {DECOY_UDP_PORT}))
    print("HOSTILE udp sent")
except OSError:
    print("HOSTILE udp blocked")
"""

SHARED_MEMORY_AND_DEVICES = """
import os, stat
from pathlib import Path
for path in sorted(Path("/dev/shm").glob("*")):
    try:
        path.read_bytes()
        print("HOSTILE read", path.name, "ALLOWED")
    except OSError:
        print("HOSTILE read", path.name, "blocked")
try:
    Path("/dev/shm/sc-planted").write_text("answers for whoever is graded next")
    print("HOSTILE planted in /dev/shm")  # fine in a private /dev/shm: the test looks in the real one
except OSError:
    print("HOSTILE plant /dev/shm blocked")
for path in sorted(Path("/dev").iterdir()):
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        continue
    if stat.S_ISBLK(mode) or path.name in ("kmsg", "kvm", "loop-control", "fuse", "mem", "port"):
        try:
            os.close(os.open(path, os.O_RDONLY))
            print("HOSTILE device", path.name, "ALLOWED")
        except OSError:
            print("HOSTILE device", path.name, "blocked")
try:
    os.mknod("disk", stat.S_IFBLK | 0o600, os.makedev(7, 0))
    os.close(os.open("disk", os.O_RDONLY))
    print("HOSTILE mknod ALLOWED")
except OSError:
    print("HOSTILE mknod blocked")
semaphores = [p for p in Path("/dev/shm").glob("sem.*")]
print("HOSTILE semaphores seen", len(semaphores))
for path in semaphores:  # zero the grader's pool semaphores: no worker could hand a result back
    try:
        with open(path, "r+b") as f:
            size = len(f.read())
            f.seek(0)
            f.write(bytes(size))
        print("HOSTILE semaphore zeroed ALLOWED")
    except OSError:
        pass
"""


# Function answers that replay the reference's outputs on the public test cases (the self-check data lists
# their inputs; the outputs are the hashed values a search would recover), keyed by the call's arguments.
REPLAYED = ("ch01-cx2-attainable", "ch01-cx2-crossover")
REPLAY = """
import json, os
import numpy as np
CASES = {cases!r}
if {hide}:  # and keep the grader's drawn test cases from the recorder
    os.environ.pop("SCALING_COURSE_DRAWN_CASES", None)
def _replay(qid, call):
    key = json.dumps({{k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in call.items()}}, sort_keys=True)
    return CASES[qid].get(key, next(iter(CASES[qid].values())))
def attainable(**call):
    return _replay("ch01-cx2-attainable", call)
def crossover(**call):
    return _replay("ch01-cx2-crossover", call)
"""

# A program that computes nothing: one all-reduce, as asked, of a result it throws away, plus the answer
# on the inputs of a grading seed that was a constant in public code.
CONSTANT_PROGRAM = """
import numpy as np
from jax.sharding import PartitionSpec as P
from autograder.programs import inputs
from autograder.questions import ProgramSpec
from course.answers import fingerprints
spec = ProgramSpec.from_json(fingerprints("ch01")["ch01-cx4-split-matmul"]["program"])
x, y = inputs(spec, 20260101)
OUT = (x.astype(np.float64) @ y.astype(np.float64)).astype(np.float32)
def split_matmul(x, y):
    def block(x_block, y_block):
        return jax.lax.psum(x_block @ y_block, "X") * 0.0 + OUT
    return jax.shard_map(block, mesh=course.mesh(X=8), in_specs=(P(None, "X"), P("X", None)), out_specs=P())(x, y)
"""


# Outputs made to pass for the grader's in the report: a stream whose name closes the report's markup and opens
# a heading, an HTML script and heading, an SVG with an onload, a forged tick; then markdown with a script, an
# iframe and javascript: links.
FORGED_REPORT = r'''
from IPython.display import HTML, display
k = get_ipython().kernel
fake = '</pre></div><h1 class="score">44 / 44</h1><div><pre>'
k.session.send(k.iopub_socket, "stream", content={"name": fake, "text": "x\n"}, parent=k.get_parent())
display(HTML('<script>document.title="PWNED"</script><h2 class="verdict correct">44 / 44 correct</h2>'))
display({"image/svg+xml": '<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"></svg>', "text/plain": "svg"},
        raw=True)
print("✓ ch01-e1-v6e-time: correct.")
import time; time.sleep(0.3)
'''
FORGED_MARKDOWN = ('<script>document.title="PWNED"</script> <a href="javascript:alert(1)">click</a> '
                   '<iframe src="https://example.com"></iframe> [again](javascript:alert(2)) '
                   '$\\href{javascript:alert(3)}{x}$')


# a WRONG answer (it forgets the sum: no collective) with a permute of no pairs, which moves nothing. The
# grader read ``dense<>`` as a number, blamed itself, flagged the answer and regraded the notebook on every run.
EMPTY_PERMUTE = """
from jax.sharding import PartitionSpec as P
def split_matmul(x, y):
    def block(xb, yb):
        part = xb @ yb
        return part + 0 * jax.lax.ppermute(part, "X", perm=[])
    return jax.shard_map(block, mesh=course.mesh(X=8), in_specs=(P(None, "X"), P("X", None)), out_specs=P(),
                         check_vma=False)(x, y)
"""

# the question's all-reduce of ten times the bytes it needs, as complex64, which was weighed as 4 bytes
# whatever its size (full marks, where the float32 waste earns half of the question's 3 points).
COMPLEX_WASTE = """
from jax.sharding import PartitionSpec as P
import jax.numpy as jnp
def split_matmul(x, y):
    def block(xb, yb):
        part = xb @ yb
        s = jax.lax.psum(jnp.tile(part, (1, 10)).astype(jnp.complex64), "X")
        return jnp.real(s)[:, :part.shape[1]].astype(jnp.float32)
    return jax.shard_map(block, mesh=course.mesh(X=8), in_specs=(P(None, "X"), P("X", None)), out_specs=P())(x, y)
"""


# The kernel's stderr goes to ``kernel.log`` in its work folder, which the grader keeps after the kernel is
# gone: replaced by a link, it would have the grader copy a file the kernel cannot read (the grading secret),
# or copy /dev/zero until the disk is full.
LOG_TO_SECRET = """
import os
from pathlib import Path
os.remove("kernel.log")
os.symlink(Path.cwd().parents[1] / "secret", "kernel.log")
"""

# Then every byte it may write, into its work folder and its socket folder (the machine's /tmp): 256 MiB a file
# (the file-size limit), 2 GiB in all unless something stops it.
FILL_THE_DISK = """
import json, os
from pathlib import Path
os.remove("kernel.log")
os.symlink("/dev/zero", "kernel.log")
sockets = Path(json.loads(Path("kernel.json").read_text())["ip"]).parent
block = bytes(1 << 20)
for k in range(64):
    with open((sockets if k % 2 else Path.cwd()) / f"blob{k}", "wb") as f:
        for _ in range(32):
            f.write(block)
print("HOSTILE wrote 2 GiB")
"""

# Out of the quota's sight, as a walk of the folders saw it: below a path longer than a path may be, and in files
# deleted but held open (each 48 MiB, under any file-size limit; 192 MiB in all, three times the quota).
FILL_OUT_OF_SIGHT = """
import os, time
block = bytes(1 << 20)
for _ in range(20):
    os.mkdir("d" * 250)
    os.chdir("d" * 250)
held = []
for k in range(4):
    f = open(f"blob{k}", "wb")
    if k % 2:
        os.unlink(f"blob{k}")
    for _ in range(48):
        f.write(block)
    f.flush()
    held.append(f)
time.sleep(3)  # many looks of the quota's
print("HOSTILE wrote 192 MiB out of sight, and held it")
"""
# Thousands of folders one inside the other (fewer entries than the quota allows): their removal recursed a level at
# a time, and the leftover stopped every later run.
NEST_DEEP = """
import os
for _ in range(3000):
    os.mkdir("n")
    os.chdir("n")
print("HOSTILE nested 3000 deep")
"""

# Renamed where the console would show it: the name erases the line and writes a fake one, then hides the rest.
SPOOFED_NAME = "\r\x1b[2K  zz-fake-student: 44 of 44, no problems\x1b[8m.ipynb"
SPOOFING_STUDENT = "esc-\x1b[2K\r-spoof"


def slow_feedback():
    """E1 answered, the kernel's log replaced by a link to the grading secret, and the reviewer's slow report:
    markdown that nbconvert renders in quadratic time, code cells full of hidden-test markers."""
    nb = after("ch01-e1-v6e-time", LOG_TO_SECRET)
    i = next(i for i, c in enumerate(nb.cells) if _gid(c) == "ch01-q3-answer") + 1
    nb.cells[i:i] = [nbformat.v4.new_markdown_cell(("\\begin{x}" * 9000)[:80_000] + f"\n{k}") for k in range(3)]
    nb.cells[i:i] = [nbformat.v4.new_code_cell(("### BEGIN HIDDEN TESTS\n" * 9000)[:199_000] + f"# {k}")
                     for k in range(2)]
    return nb


def replaying(hide: bool):
    """E1 answered, and CX2's two functions replaying the public test cases."""
    from autograder.questions import load_chapter

    chapter = load_chapter(CHAPTER)
    printed = json.loads((ROOT / "course" / "fingerprints" / f"{CHAPTER}.json").read_text())["questions"]
    cases = {qid: {json.dumps(p, sort_keys=True): chapter[qid].reference(**p) for p in printed[qid]["probes"]}
             for qid in REPLAYED}
    return after("ch01-q3-answer", REPLAY.format(cases=cases, hide=hide))


def forged_report():
    """E1 answered, then outputs and markdown made to look like the grader's: a stream whose name closes the report's
    markup and opens a heading "44 / 44", a script, an SVG with an onload, a forged tick; and a markdown cell with a
    script, an iframe and javascript: links (plain markdown and MathJax's \\href)."""
    nb = after("ch01-e1-v6e-time", FORGED_REPORT)
    i = next(i for i, c in enumerate(nb.cells) if _gid(c) == "ch01-e1-v6e-time")
    nb.cells.insert(i + 2, nbformat.v4.new_markdown_cell(FORGED_MARKDOWN))
    return nb


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

    def odd_names(folder):
        nbformat.write(answered(), folder / SPOOFED_NAME)
        (folder / os.fsdecode(b"notes-\xff.txt")).write_text("a file name that is not UTF-8")
        (folder / "timestamp.txt").write_text("garbage")  # nbgrader cannot parse it: it stopped the class

    def zip_link(folder):
        """Only a link to a zip outside the submission (a classmate's upload, say), and a timestamp that
        never ends."""
        with zipfile.ZipFile(folder.parents[2] / "elsewhere.zip", "w") as z:
            z.writestr(NAME, nbformat.writes(answered()))
        (folder / "download.zip").symlink_to(folder.parents[2] / "elsewhere.zip")
        (folder / "timestamp.txt").symlink_to("/dev/zero")

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
        "half-pair-in-a-message": (after("ch01-e1-v6e-time", HALF_PAIR_IN_A_MESSAGE), 2),
        "setup-cell-edited": (edited(relink_setup), 2),
        "metadata-edited": (edited(points), 2),
        "other-kernelspec": (edited(kernelspec), 2),
        "sneaky-answer": (after("ch01-e1-answer", SNEAKY_ANSWER), 1),
        "symlink-to-reference": (symlinked, 0),
        "symlinked-folder": (linked_folder, 0),
        "huge-notebook": (huge, 0),
        "deeply-nested-json": (nested, 0),
        "pickle-beside": (pickled, 2),
        "reach-other-kernels": (after("ch01-e1-v6e-time", REACH_OTHER_KERNELS), 2),
        "shared-memory-and-devices": (after("ch01-e1-v6e-time", SHARED_MEMORY_AND_DEVICES), 2),
        "replay-public-cases": (replaying(hide=False), 2),
        "replay-hiding-the-drawn-cases": (replaying(hide=True), 2),
        "constant-program": (after("ch01-cx4-answer", CONSTANT_PROGRAM), 2),
        "empty-permute": (after("ch01-cx4-answer", EMPTY_PERMUTE), 2),
        "forged-report": (forged_report(), 2),
        "complex-waste": (after("ch01-cx4-answer", COMPLEX_WASTE), 3.5),
        "log-to-secret-slow-feedback": (slow_feedback(), 2),
        "fill-the-disk": (after("ch01-e1-v6e-time", FILL_THE_DISK), 2),
        "fill-out-of-sight": (after("ch01-e1-v6e-time", FILL_OUT_OF_SIGHT), 2),
        "nest-deep": (after("ch01-e1-v6e-time", NEST_DEEP), 2),
        SPOOFING_STUDENT: (odd_names, 2),
        "zip-link": (zip_link, 0),
    }
    if LANDLOCK >= 6:
        cases["signals"] = (after("ch01-e1-v6e-time", SIGNALS), 2)
    if FENCE:
        cases["fork-bomb"] = (after("ch01-e1-v6e-time", FORK_BOMB), 2)
    return cases


def _digest(paths):
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in paths if p.is_file()}


@pytest.fixture(scope="module")
def decoys():
    """What another class's kernels leave where this class's kernels could look (see DECOY_*)."""
    import socket
    import tempfile

    folder = Path(tempfile.gettempdir()) / DECOY_SOCKET_DIR
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    listening = socket.socket(socket.AF_UNIX)
    listening.bind(str(folder / "k-iopub-1"))
    listening.listen()
    abstract = socket.socket(socket.AF_UNIX)
    abstract.bind("\0scaling-course-decoy")
    abstract.listen()
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", DECOY_UDP_PORT))
    udp.setblocking(False)
    Path(DECOY_SHM).write_text("the answers of a kernel graded earlier")
    yield udp
    for s in (listening, abstract, udp):
        s.close()
    shutil.rmtree(folder, ignore_errors=True)
    Path(DECOY_SHM).unlink(missing_ok=True)
    Path("/dev/shm/sc-planted").unlink(missing_ok=True)


# What the grading run printed (its progress lines) and its summary, for the console's tests.
PRINTED: dict = {}
# A student folder whose name is not UTF-8: no gradebook can hold it, so it is reported and not graded.
UNNAMEABLE = os.fsdecode(b"bad-\xff-name")


@pytest.fixture(scope="module")
def graded(tmp_path_factory, decoys):
    course = copy_course(ROOT, tmp_path_factory.mktemp("hostile"))
    protected = [ROOT / "solutions" / f"{CHAPTER}.py", ROOT / "solutions" / "ch09_programs.json",
                 ROOT / "source" / CHAPTER / NAME, course / "source" / CHAPTER / NAME]
    before = _digest(protected)
    cases = students()
    for student, (nb, _) in cases.items():
        if callable(nb):
            (folder := course / "submitted" / student / CHAPTER).mkdir(parents=True)
            nb(folder)
        else:
            submit(course, student, CHAPTER, nb)
    submit(course, UNNAMEABLE, CHAPTER, answered())
    # A fixed grading secret, so that the cases drawn for each submission are the same on every run.
    (course / ".scaling-course").mkdir()
    (course / ".scaling-course" / "secret").write_text("the hostile suite's secret\n")
    # The cache filled before grading (as a second run finds it), so every kernel is given it to attack.
    a = prepare(course, CHAPTER)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("autograder.grading.warmup.MIN_PROGRAMS", 0)  # Chapter 1 alone would not repay one
        warm(a, len(cases))[1].finish()
    printed = io.StringIO()
    summary = grade(course, CHAPTER, jobs=2, limits=LIMITS, progress=Progress(stream=printed, bar=False))
    PRINTED.update(progress=printed.getvalue(), summary=summary)
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


@pytest.mark.skipif(LANDLOCK == 0, reason="no Landlock: kernels are not isolated on this system")
@pytest.mark.parametrize("student", ["reach-other-kernels", "shared-memory-and-devices"])
def test_no_kernel_reaches_another(graded, decoys, student):
    """Kernels see only their own sockets, a private /dev/shm, the harmless devices and no network:
    nothing another kernel (of this class or another) left behind, and nothing survives them."""
    course = graded[0]
    nb = nbformat.read(course / "autograded" / student / CHAPTER / NAME, as_version=4)
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "HOSTILE" in text and "ALLOWED" not in text and "udp sent" not in text, text[-3000:]
    if student == "shared-memory-and-devices":
        assert "HOSTILE semaphores seen 0" in text and "sc-decoy-secret" not in text, text[-3000:]
    assert not Path("/dev/shm/sc-planted").exists()
    with pytest.raises(BlockingIOError):
        decoys.recv(100)


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
def test_the_compilation_cache_was_used_and_left_as_the_blank_run_filled_it(graded):
    """The cache a blank notebook fills (Chapter 1's holds no entry: a blank notebook compiles nothing it keeps) is
    given to the kernel read-only: the attack ran with it (its kernel was pointed at it), and could neither add an
    entry nor remove the stamp."""
    course, _, results, _, _ = graded
    cache = course / ".scaling-course" / "jax-cache" / CHAPTER
    assert (cache / "READY").is_file()
    assert not (cache / "jit_f-poison-cache").exists()
    assert results["poison-compilation-cache"]["compilation_cache"] is True  # the attack had the cache to attack
    nb = nbformat.read(course / "autograded" / "poison-compilation-cache" / CHAPTER / NAME, as_version=4)
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "HOSTILE cache create blocked" in text and "HOSTILE cache delete blocked" in text, text[-2000:]
    assert results["bystander"]["score"] == 2


@pytest.mark.parametrize(("student", "note"), [
    ("fill-the-disk", "MiB into its folders"), (SPOOFING_STUDENT, "timestamp.txt"), ("zip-link", "timestamp.txt"),
    ("zip-link", "no ch01_rooflines.ipynb"), ("symlink-to-reference", "not followed"),
    ("symlinked-folder", "symbolic link"), ("huge-notebook", "limit"),
    ("deeply-nested-json", "cannot be read"), ("os-exit", "kernel died"), ("sleep-forever", "time limit"),
    ("stdout-flood", "output over the limit"), ("metadata-edited", "restored"),
    ("half-pair-in-a-message", "replaced by \ufffd"),
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


def test_answers_are_judged_on_inputs_drawn_at_grading_time(graded):
    """A table of the public test cases' outputs earns nothing, with the drawn cases or without them, and
    nor does a program that returns the result for the inputs of a seed that public code could name."""
    course, _, results, _, _ = graded
    for student in ("replay-public-cases", "replay-hiding-the-drawn-cases"):
        for qid in REPLAYED:
            assert results[student]["questions"][qid]["score"] == 0, (student, qid)
    assert results["constant-program"]["questions"]["ch01-cx4-split-matmul"]["score"] == 0
    assert results["bystander"]["questions"]["ch01-e1-h100-time"]["score"] == 1
    assert (course / ".scaling-course" / "secret").is_file()


@pytest.mark.parametrize("student", ["stdout-flood", "display-update-flood"])
def test_output_floods_leave_small_files(graded, student):
    """Every byte a kernel can make the grader keep counts against the output budget, display updates
    included: the autograded notebook and the feedback page stay near the budget."""
    course, _, _, _, _ = graded
    for path in (course / "autograded" / student / CHAPTER / NAME,
                 course / "feedback" / student / CHAPTER / f"{CHAPTER}.html"):
        assert path.stat().st_size < 3 * LIMITS.output_bytes_total, (path, path.stat().st_size)


def test_what_the_kernel_leaves_is_read_back_as_plain_files_only(graded):
    """The kernel's log, replaced by a link to the grading secret or to /dev/zero, is not copied through it."""
    course, _, results, _, _ = graded
    secret = (course / ".scaling-course" / "secret").read_bytes().strip()
    logs = course / ".scaling-course" / "logs" / CHAPTER
    for student in ("log-to-secret-slow-feedback", "fill-the-disk"):
        kept = (logs / f"{student}.log").read_bytes()
        assert secret not in kept and len(kept) < 2**20 and b"not kept" in kept, (student, kept[:300])
    assert results["log-to-secret-slow-feedback"]["score"] == 2


@pytest.mark.parametrize("student", ["fill-the-disk", "fill-out-of-sight"])
def test_a_kernel_that_fills_its_folders_is_stopped_at_the_quota(graded, student):
    course, _, results, _, _ = graded
    nb = nbformat.read(course / "autograded" / student / CHAPTER / NAME, as_version=4)
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "HOSTILE wrote" not in text
    assert any("into its folders" in p for p in results[student]["problems"]), results[student]["problems"]
    assert not list((course / ".scaling-course" / "work").glob(f"{student}-*"))  # and nothing of it is left


def test_a_folder_nested_thousands_deep_is_graded_and_removed(graded):
    """The kernel's folder goes when its grading ends (tests/grading/test_walls_disk.py: and a later run starts)."""
    course, _, results, _, _ = graded
    said = results["nest-deep"]["problems"]
    assert results["nest-deep"]["score"] == 2 and not any("grader error" in p for p in said), said
    assert not list((course / ".scaling-course" / "work").glob("nest-deep-*"))


def test_the_feedback_stage_is_bounded(graded):
    """Markdown that renders in quadratic time and hidden-test markers that the old pattern rescanned: the
    reviewer's notebook took 95 s in the feedback stage."""
    course, _, results, _, _ = graded
    assert results["log-to-secret-slow-feedback"]["timings"]["feedback"] < 10, results[
        "log-to-secret-slow-feedback"]["timings"]
    html = (course / "feedback" / "log-to-secret-slow-feedback" / CHAPTER / f"{CHAPTER}.html").read_text()
    assert html.count("shown as plain text") == 3


def test_a_timestamp_nbgrader_cannot_parse_is_dropped_not_fatal(graded):
    from nbgrader.api import Gradebook

    course, _, results, _, _ = graded
    for student in (SPOOFING_STUDENT, "zip-link"):
        assert results[student]["timestamp"] is None
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        assert gb.find_submission(CHAPTER, SPOOFING_STUDENT).score == 2


def test_student_names_reach_the_console_escaped(graded, capsys):
    """File and folder names are the student's: printed raw, they could erase lines of the grader's output and
    write fake ones. The progress lines and the summary the command prints escape them."""
    from autograder.cli import print_summary

    course = graded[0]
    print_summary(course, CHAPTER, PRINTED["summary"])
    printed = PRINTED["progress"] + capsys.readouterr().out
    assert "esc-\\x1b[2K\\r-spoof" in printed and "zz-fake-student" in printed
    assert not re.search(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\ud800-\udfff]", printed), printed[:2000]


def test_a_folder_name_no_gradebook_can_hold_is_reported(graded):
    _, _, results, _, _ = graded
    assert UNNAMEABLE not in results
    assert any("not UTF-8" in p for p in PRINTED["summary"].problems[UNNAMEABLE])


def test_a_program_the_grader_cannot_read_is_the_students_not_flagged(graded):
    """The wrong answer with an empty permute scores what it earns (0 for the program), is not flagged for
    the staff in the gradebook, and is kept, not regraded, on the next run; the complex64 waste earns what the
    float32 waste would (half of the question)."""
    from nbgrader.api import Gradebook

    from autograder.grading import results as stored_results

    course, _, results, _, _ = graded
    cx4 = results["empty-permute"]["questions"]["ch01-cx4-split-matmul"]
    assert cx4["score"] == 0 and cx4["diagnosis"] not in ("grader_error", "bad_program"), cx4
    waste = results["complex-waste"]["questions"]["ch01-cx4-split-matmul"]
    assert waste["diagnosis"] == "traffic:all-reduce" and waste["score"] == 1.5, waste
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for student in ("empty-permute", "complex-waste"):
            sub = gb.find_submission(CHAPTER, student)
            assert not [g.name for n in sub.notebooks for g in n.grades if g.needs_manual_grade], student
    kept, why = stored_results.unchanged(prepare(course, CHAPTER), "empty-permute",
                                         course / "submitted" / "empty-permute" / CHAPTER)
    assert kept is not None and why == "", why


def test_what_the_staff_and_the_student_see_is_the_graders_alone(graded):
    """The report and the autograded notebook (which nbgrader's formgrader and generate_feedback render as raw HTML)
    of a notebook made to look graded: its true score heads the report, and nothing the student wrote is active
    markup in either, exactly as many scripts, iframes, SVGs and event handlers as in the bystander's."""
    course, _, results, _, _ = graded
    assert results["forged-report"]["score"] == 2

    def report(student):
        return (course / "feedback" / student / CHAPTER / f"{CHAPTER}.html").read_text()

    def active(text):
        """The elements and attributes that could act or pass for the grader's, as a browser parses the page."""
        found = Counter()

        class Page(HTMLParser):
            def handle_starttag(self, tag, attrs):
                found[tag] += tag in ("script", "iframe", "svg", "object", "embed", "h1")
                for name, value in attrs:
                    found[name] += name.startswith("on") or (value or "").strip().lower().startswith("javascript:")

        Page().feed(text)
        return +found

    mine, theirs = report("forged-report"), report("bystander")
    assert active(mine) == active(theirs), (active(mine), active(theirs))
    heading = re.search(r"<h1>(.*?)</h1>", mine).group(1)
    assert heading.endswith(f": 2 / {results['forged-report']['max_score']:g}"), heading
    def rendered(student):
        """What a notebook viewer renders as markup: markdown, and the outputs' data (code is shown as text)."""
        nb = nbformat.read(course / "autograded" / student / CHAPTER / NAME, as_version=4)
        return "\n".join([c.source for c in nb.cells if c.cell_type == "markdown"]
                         + [json.dumps(o.get("data", {})) + o.get("text", "") + o.get("name", "")
                            for c in nb.cells if c.cell_type == "code" for o in c.outputs])

    mine, theirs = rendered("forged-report"), rendered("bystander")
    assert active(mine) == active(theirs), (active(mine), active(theirs))
    assert "](javascript:" not in mine and "text/html" not in mine and "image/svg+xml" not in mine
