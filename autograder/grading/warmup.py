"""A compilation cache that a blank notebook fills once per assignment and students only read.

Much of a grading kernel's time goes to XLA compiling the same small programs for every student:
the probes of a function question, the course's own jitted helpers, the grader's checks around each
answer. JAX can keep compiled programs in a persistent cache. Before a class is graded, the notebook as
a student gets it, unanswered, runs once as the grader would run it (its hidden tests included), in a
trusted kernel that may write the cache, alongside the first students' notebooks; each student's kernel
started after it finished gets the cache read-only, so a hit skips compilation and a miss compiles as
before.

Read-only matters: a cache entry is executable code, and a student who could write one could run
code inside other students' kernels. The jail makes the folder read-only to kernels, so the cache
is used only where the jail has Landlock; elsewhere grading runs as before, just slower.

Unanswered matters too: every kernel may read every entry, and an entry can be loaded, printed as HLO and run. A
cache filled by the source notebook held the reference programs, compiled (Chapter 3's, readable in any student's
kernel), and a hit told a student, by the time it saved, that a program was the reference's to the letter. A blank
notebook compiles only what every student's notebook has.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import threading
import time
from dataclasses import dataclass, replace
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING

import nbformat

from . import STATE
from .jail import landlock_abi
from .sanitize import sanitize

if TYPE_CHECKING:
    from .pipeline import Assignment

ENV = "SCALING_COURSE_JAX_CACHE"  # read by course.setup() in the kernel
# Filling the cache costs one blank run, which grading overlaps with its first notebooks; for a
# handful of notebooks that run is not paid back (unless a cache from an earlier run is ready). Nor is
# it where kernels compile little: function answers run on cases drawn per submission, of shapes no
# cache holds, so what a cache saves is mostly the compiling around program questions. Measured on
# 2 cores, 24 notebooks: Chapter 3 (12 programs) 74.6 s with the cache against 76.5 s without (a cache the
# source notebook filled: 72.7 s against 77.7 s), Chapter 1 (1 program) 38.5 s against 37.3 s.
MIN_NOTEBOOKS = 8
MIN_PROGRAMS = 3
READY = "READY"


def _key(a: Assignment) -> str:
    h = hashlib.sha256(a.master.read_bytes())
    h.update(f"|jax {version('jax')}|jaxlib {version('jaxlib')}".encode())
    h.update(b"|filled by a blank notebook")  # a cache the source notebook filled is filled again
    return h.hexdigest()


def ready_cache(a: Assignment) -> Path | None:
    """The cache a kernel may use now: one whose blank run has finished (workers ask per notebook,
    so the notebooks graded while it fills simply compile for themselves)."""
    if a.jax_cache is not None and (a.jax_cache / READY).is_file():
        return a.jax_cache
    return None


@dataclass
class Warming:
    """A blank run filling the cache in a thread of the grading process, and what to say of it."""

    note: str
    thread: threading.Thread | None = None
    outcome: str = "no compilation cache: the blank run stopped"

    def finish(self) -> str:
        """Wait for the blank run (grading a class outlasts it) and say how it went."""
        if self.thread is not None:
            self.thread.join()
            return self.outcome
        return self.note


def warm(a: Assignment, notebooks: int, timeout: int = 600) -> tuple[Assignment, Warming]:
    """The assignment with ``jax_cache`` set where a cache is ready or being filled, and the filling.
    Reuses a cache filled earlier from the same source notebook and JAX version."""
    if not landlock_abi():
        return a, Warming("no compilation cache: kernels could not be kept from writing to it on this system")
    folder = a.course_dir / STATE / "jax-cache" / a.name
    stamp = folder / READY
    key = _key(a)
    if stamp.is_file() and stamp.read_text() == key:
        return replace(a, jax_cache=folder), Warming("compilation cache: reused")
    if notebooks < MIN_NOTEBOOKS:
        return a, Warming(f"no compilation cache: not worth a blank run for {notebooks} notebook(s)")
    if _programs(a.name) < MIN_PROGRAMS:
        return a, Warming("no compilation cache: this assignment's kernels compile too little to repay a blank run")
    shutil.rmtree(folder, ignore_errors=True)  # stale or half-filled: no kernel may see it from now on
    folder.mkdir(parents=True)
    warming = Warming("compilation cache: a blank notebook fills it while the first notebooks are graded")

    def fill() -> None:
        started = time.monotonic()
        try:
            _run_blank(a, folder, timeout)
        except Exception as e:  # grading goes on without the cache, only slower
            shutil.rmtree(folder, ignore_errors=True)
            warming.outcome = (f"no compilation cache: the blank notebook did not run "
                               f"({type(e).__name__}: {str(e)[:200]})")
            return
        tmp = stamp.with_suffix(".tmp")
        tmp.write_text(key)
        os.replace(tmp, stamp)
        warming.outcome = f"compilation cache: filled by a blank notebook in {time.monotonic() - started:.0f} s"

    warming.thread = threading.Thread(target=fill, name="scaling-course-warmup", daemon=True)
    warming.thread.start()
    return replace(a, jax_cache=folder), warming


def _programs(name: str) -> int:
    """How many program questions the assignment has (an assignment that is not a chapter: as if many).
    Read from the chapter's self-check data, which names each question's kind: importing the chapter
    would import JAX into the grading process."""
    from ..release import released_questions

    questions = released_questions(name)
    if questions is None:
        return MIN_PROGRAMS
    return sum(isinstance(q, dict) and q.get("kind") == "program" for q in questions.values())


def _run_blank(a: Assignment, cache: Path, timeout: int) -> None:
    """Run the notebook a blank submission is graded as: the release notebook's cells in the source's graded ones,
    its hidden tests included, no solution. Its kernel is jailed like a student's (its sockets out of their reach,
    and theirs out of its) and may write the cache besides its own folder."""
    from .execute import Limits, execute
    from .jail import isolation_paths

    released = a.course_dir / STATE / "release" / a.name / a.master.name  # staged by ``pipeline.prepare``
    nb = sanitize(nbformat.read(a.master, as_version=4), a.stubs, released, a.locked).notebook
    work = a.course_dir / STATE / "work" / f"warmup-{a.name}"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(a.master.parent, work, ignore=shutil.ignore_patterns("*.ipynb"))
    deny, allow = isolation_paths(a.course_dir)
    limits = Limits(cell_seconds=timeout, notebook_seconds=timeout, output_bytes_per_cell=50_000_000,
                    output_bytes_total=200_000_000)
    log = a.course_dir / STATE / "logs" / a.name / "cache-run.log"
    try:
        run = execute(nb, work, deny, allow, limits, log, {ENV: str(cache)}, writable=[cache])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if run.problems:
        raise RuntimeError("; ".join(run.problems))
