"""What a grading kernel can import answers no question: the single-device references of the program questions
included. They are the chapters' answers as much as any record's (ch07-cx2 asks for the decode step that the
decode-attention reference computes; ch04-cx3's attention is that reference called once per query), so the
jail denies their folder to a grading kernel as it denies ``solutions/``, and only the judge, which runs no
student code, calls them. (A learner's own self-check runs them: the student package ships them.)

So are the grader's readers of compiled programs (``autograder.compiled_hlo``): Chapter 9 asks students to write a
reader of replica groups and a census of a compiled program, and an answer that called the grader's own earned full
marks. Only the program runner, which runs no Python of a student's, reads them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.grading.jail import isolation_paths, landlock_abi
from autograder.questions import Program, chapter_names, load_chapter

NAMES = sorted({q.spec.reference for name in chapter_names() for q in load_chapter(name).questions
                if isinstance(q, Program) and q.spec.reference})

# The grader's readers of compiled HLO text, by the names they have had: CX2's and CX3's answers.
READERS = ["compiled_census", "compiled_collectives", "compiled_runs", "placed_permutes", "_compiled_groups",
           "_groups_of", "_hlo_array", "_compiled_kind"]

# What a student would try: every module of the packages a notebook imports, searched for the references by name.
PROBE = """
import importlib, json, pkgutil, sys
import autograder, course
names, found = json.loads(sys.argv[1]), []
for package in (autograder, course):
    for module in pkgutil.walk_packages(package.__path__, package.__name__ + ".", onerror=lambda name: None):
        try:
            loaded = importlib.import_module(module.name)
        except BaseException:
            continue
        found += [f"{module.name}.{n}" for n in names if callable(getattr(loaded, n, None))]
print(json.dumps(found))
"""


def test_every_program_question_names_a_reference():
    assert len(NAMES) >= 8, NAMES  # the search below looks for something


@pytest.mark.skipif(landlock_abi() == 0, reason="no Landlock on this kernel")
def test_a_grading_kernel_finds_no_program_reference_or_hlo_reader_in_what_it_can_import(tmp_path):
    deny, allow = isolation_paths(Path.cwd())
    walls = [a for d in deny for a in ("--deny", str(d))] + [a for p in allow for a in ("--allow", str(p))]
    cmd = [sys.executable, "-m", "autograder.grading.jail", *walls, "--rw", str(tmp_path), "--",
           sys.executable, "-c", PROBE, json.dumps(NAMES + READERS)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path,
                         env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "JAX_PLATFORMS": "cpu",
                              "PYTHONPATH": os.environ.get("PYTHONPATH", "")})  # kept for kernels too
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.splitlines()[-1]) == []


def test_the_judge_still_reads_the_references():
    from autograder import programs

    q = next(q for name in chapter_names() for q in load_chapter(name).questions
             if isinstance(q, Program) and q.spec.reference == "decode_attention")
    (out,) = programs.expected_outputs(q.spec, seed=7)
    assert out.shape and abs(out).sum() > 0


def test_the_program_runner_still_reads_the_compiled_program():
    course_dir = Path.cwd()
    kernel, _ = isolation_paths(course_dir)
    runner, _ = isolation_paths(course_dir, runner=True)
    import autograder.compiled_hlo as readers

    folder = Path(readers.__file__).resolve().parent
    assert folder in kernel and folder not in runner
    assert {p.name for p in set(kernel) - set(runner)} == {"compiled_hlo"}  # this copy's, and any other's
