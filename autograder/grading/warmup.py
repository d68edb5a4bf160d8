"""A compilation cache that the reference notebook fills once per assignment and students only read.

Much of a grading kernel's time goes to XLA compiling the same small programs for every student:
the probes of a function question, the course's own jitted helpers, the programs most students
write the same way. JAX can keep compiled programs in a persistent cache. Before a class is graded,
the reference notebook (the instructor's source with its solutions) runs once, in a trusted
kernel that may write the cache; each student's kernel then gets the cache read-only, so a hit
skips compilation and a miss compiles as before.

Read-only matters: a cache entry is executable code, and a student who could write one could run
code inside other students' kernels. The jail makes the folder read-only to kernels, so the cache
is used only where the jail has Landlock; elsewhere grading runs as before, just slower.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from dataclasses import replace
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING

import nbformat

from .jail import landlock_abi

if TYPE_CHECKING:
    from .pipeline import Assignment

ENV = "SCALING_COURSE_JAX_CACHE"  # read by course.setup() in the kernel
# Filling the cache costs one reference run (about what two submissions cost); below this many
# notebooks to grade it does not pay for itself, unless a cache from an earlier run is ready.
MIN_NOTEBOOKS = 8


def _key(a: Assignment) -> str:
    h = hashlib.sha256(a.master.read_bytes())
    h.update(f"|jax {version('jax')}|jaxlib {version('jaxlib')}".encode())
    return h.hexdigest()


def warm(a: Assignment, release_nb: Path, notebooks: int, timeout: int = 600) -> tuple[Assignment, str]:
    """The assignment with ``jax_cache`` set when a filled cache is ready, and a line saying what was
    done. Reuses a cache filled earlier from the same source notebook and JAX version."""
    if not landlock_abi():
        return a, "no compilation cache: kernels could not be kept from writing to it on this system"
    folder = a.course_dir / ".scaling-course" / "jax-cache" / a.name
    stamp = folder / "READY"
    key = _key(a)
    if stamp.is_file() and stamp.read_text() == key:
        return replace(a, jax_cache=folder), "compilation cache: reused"
    if notebooks < MIN_NOTEBOOKS:
        return a, f"no compilation cache: not worth a reference run for {notebooks} notebook(s)"
    started = time.monotonic()
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    try:
        _run_reference(a, release_nb, folder, timeout)
    except Exception as e:  # grading goes on without the cache, only slower
        shutil.rmtree(folder, ignore_errors=True)
        return a, f"no compilation cache: the reference notebook did not run ({type(e).__name__}: {str(e)[:200]})"
    tmp = stamp.with_suffix(".tmp")
    tmp.write_text(key)
    os.replace(tmp, stamp)
    return (replace(a, jax_cache=folder),
            f"compilation cache: filled by the reference notebook in {time.monotonic() - started:.0f} s")


def _run_reference(a: Assignment, release_nb: Path, cache: Path, timeout: int) -> None:
    from ..demo import filled_notebook
    from ..kernel import run_notebook

    nb = filled_notebook(nbformat.read(release_nb, as_version=4), nbformat.read(a.master, as_version=4))
    work = a.course_dir / ".scaling-course" / "work" / f"warmup-{a.name}"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(a.master.parent, work, ignore=shutil.ignore_patterns("*.ipynb"))
    try:  # the environment of a grading kernel, and the cache writable
        run_notebook(nb, work, {ENV: str(cache), "NBGRADER_EXECUTION": "autograde"}, timeout)
    finally:
        shutil.rmtree(work, ignore_errors=True)
