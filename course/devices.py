"""Devices for the exercises: 8 simulated CPU devices by default, real accelerators when present.

JAX reads its device configuration once, when it first initialises a backend, so ``setup()`` must
run before anything touches a device: the locked first cell of every notebook calls it. It sets
``XLA_FLAGS`` unconditionally (a stray value inherited from the grader's environment must not win)
and also uses ``jax_num_cpu_devices``, which works even when jax was imported already. ``mesh``
builds a mesh on those devices; it is the core's (``autograder/meshes.py``), so that a program a
student lowers here has the shardings the grader runs it with.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import re
import warnings
from pathlib import Path

from autograder.meshes import mesh  # noqa: F401  (course.mesh: the grader builds its meshes the same way)

DEFAULT_DEVICES = 8
_COUNT_FLAG = re.compile(r"--xla_force_host_platform_device_count=\S*")


def accelerator_count() -> int:
    """GPUs or TPU chips that an installed JAX plugin can drive, counted without starting JAX."""
    dev = Path("/dev")
    if any(importlib.util.find_spec(m) for m in ("jax_cuda12_plugin", "jax_cuda13_plugin")):
        gpus = [p for p in dev.glob("nvidia*") if re.fullmatch(r"nvidia\d+", p.name)]
        if gpus:
            return len(gpus)
    if importlib.util.find_spec("libtpu"):
        return len([p for p in dev.glob("accel*") if re.fullmatch(r"accel\d+", p.name)]) or len(
            list(dev.glob("vfio/[0-9]*")))
    return 0


def quiet() -> None:
    """Keep library chatter off stderr: nbgrader scores a test cell that writes to stderr as zero."""
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    for name in ("jax", "absl", "matplotlib", "jax._src.xla_bridge"):
        logging.getLogger(name).setLevel(logging.ERROR)
    for module in ("jax", "jaxlib", "sympy", "matplotlib", "absl", "numpy"):
        warnings.filterwarnings("ignore", module=module)


def setup(devices: str = "auto", count: int = DEFAULT_DEVICES, version: str | None = None, *,
          student: str | None = None, variant: str | None = None) -> str:
    """Configure JAX's devices and return a one-line description.

    ``devices``: "cpu" (``count`` simulated CPU devices), "real" (the machine's accelerators), or "auto":
    the environment variable SCALING_COURSE_DEVICES if set, else real accelerators when there are at least
    ``count`` of them (the exercises' meshes need that many), else simulated CPU devices. ``version``: the
    course version the notebook was released with; another installed version adds a note, since its
    self-check data may not know the notebook's questions. ``student``: your id in a class, whose values
    ``course.setting`` deals (course/variant.py); ``variant``: "student" (the default: your dealt values,
    or the book's when no id is known), "book" or "practice" (fresh values each time you ask)."""
    from .variant import configure

    configure(student, variant)
    if devices == "auto":
        devices = os.environ.get("SCALING_COURSE_DEVICES", "auto")
    if devices not in ("auto", "cpu", "real"):
        raise ValueError('devices must be "auto", "cpu" or "real" (also for SCALING_COURSE_DEVICES)')
    quiet()
    use_real = devices == "real" or (devices == "auto" and accelerator_count() >= count)
    if not use_real:
        flags = _COUNT_FLAG.sub("", os.environ.get("XLA_FLAGS", "")).strip()
        os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={count}".strip()
        os.environ["JAX_PLATFORMS"] = "cpu"
    import jax

    if not use_real:
        try:
            jax.config.update("jax_platforms", "cpu")
            jax.config.update("jax_num_cpu_devices", count)
        except RuntimeError:
            pass  # backends already initialised; checked just below
    _compilation_cache()
    found = jax.devices()
    if not use_real and len(found) != count:
        raise RuntimeError(f"JAX already started with {len(found)} device(s), before course.setup() could ask "
                           f"for {count}. Restart the kernel and run the first cell before any other.")
    kind = found[0].platform.upper()
    line = f"{len(found)} {'simulated ' if not use_real else ''}{kind} device(s): {found[0].device_kind}"
    return line + _version_note(version)


def _compilation_cache() -> None:
    """Use the grader's compilation cache when it offers one (read-only: see autograder/grading/warmup.py)."""
    folder = os.environ.get("SCALING_COURSE_JAX_CACHE")
    if folder:
        import jax

        jax.config.update("jax_compilation_cache_dir", folder)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


def _version_note(wanted: str | None) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        have = version("scaling-course")
    except PackageNotFoundError:
        return ""
    if wanted is None or have == wanted:
        return ""
    return (f"\nNote: this notebook was released with scaling-course {wanted}, but {have} is installed; "
            f"if a check does not know a question, install {wanted} or download the notebook of {have}.")
