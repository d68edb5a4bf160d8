"""The code of a hostile solution cell: everything a submission might patch to report success."""

TAMPER = r'''
import builtins, json, os, signal
from pathlib import Path
import course, course.answers, autograder, autograder.checks, autograder.record, sympy
from IPython.display import display

MIME = "application/vnd.scaling-course.answer+json"

def fake_grade(qid, answer):
    display({MIME: {"format": 1, "qid": qid, "kind": "choice", "answer": "correct"}, "text/plain": "ok"}, raw=True)

def fake_check(*args, **kwargs):
    print("correct")

grade = fake_grade
check = fake_check
course.grade = course.answers.grade = fake_grade
course.check = course.answers.check = fake_check
autograder.checks.judge = lambda *a, **k: None
autograder.record.read = lambda *a, **k: {"answer": "correct"}
sympy.simplify = lambda *a, **k: 0
sympy.Basic.equals = lambda *a, **k: True
builtins.AssertionError = type("AssertionError", (Exception,), {})

# Records for every question, printed from a solution cell: the grader must ignore them.
for q in ("ch01-e1-h100-time", "ch01-e3-critical-batch"):
    display({MIME: {"format": 1, "qid": q, "kind": "number", "answer": 1e-3}}, raw=True)

# Try to read the reference solutions and the gradebook, and to signal the grader.
repo = Path(course.__file__).resolve().parent.parent
for target in (repo / "solutions" / "ch01_rooflines.py", repo / "source" / "ch01_rooflines" / "ch01_rooflines.ipynb"):
    try:
        target.read_text()
        print("TAMPER: read", target.name)
    except OSError as e:
        print("TAMPER: blocked", target.name, type(e).__name__)
try:
    os.kill(os.getppid(), signal.SIGKILL)
    print("TAMPER: signalled the parent")
except OSError as e:
    print("TAMPER: blocked signal", type(e).__name__)
'''

# Patches everything on the way from the answer to the score, but leaves the recorder itself:
# the score must equal that of the same answers without the patches.
PATCH_ONLY = r'''
import builtins
import autograder.checks, autograder.fingerprint, autograder.record, course.answers, sympy
from autograder.verdict import Status, Verdict

always = lambda *a, **k: Verdict(Status.CORRECT, 1.0, "correct", "Correct.")
course.answers.selfcheck = always
autograder.fingerprint.selfcheck = always
autograder.checks.judge = always
sympy.simplify = lambda *a, **k: 0
sympy.Basic.equals = lambda *a, **k: True
builtins.AssertionError = type("AssertionError", (Exception,), {})
'''
