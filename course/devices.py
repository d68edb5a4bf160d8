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

# The core's, one definition for both sides; course.mesh: the grader builds its meshes the same way.
from autograder.meshes import COURSE_DEVICES as DEFAULT_DEVICES
from autograder.meshes import devices_text, mesh  # noqa: F401

from .errors import BadArgument, SetupError

_COUNT_FLAG = re.compile(r"--xla_force_host_platform_device_count=\S*")


def _plugin(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def accelerator_count(dev: Path = Path("/dev")) -> int:
    """GPUs or TPU chips that an installed JAX plugin can drive, counted without starting JAX: the device nodes
    under ``dev``, or fewer where the environment lets this process use fewer (CUDA_VISIBLE_DEVICES, which a
    batch system sets to the process's share; TPU_VISIBLE_CHIPS). An estimate: ``setup`` counts what JAX
    found once it has started."""
    if any(_plugin(m) for m in ("jax_cuda12_plugin", "jax_cuda13_plugin")):
        gpus = [p for p in dev.glob("nvidia*") if re.fullmatch(r"nvidia\d+", p.name)]
        if gpus:
            return _visible(len(gpus), "CUDA_VISIBLE_DEVICES")
    if _plugin("libtpu"):
        chips = len([p for p in dev.glob("accel*") if re.fullmatch(r"accel\d+", p.name)]) or len(
            list(dev.glob("vfio/[0-9]*")))
        return _visible(chips, "TPU_VISIBLE_CHIPS")
    return 0


def _visible(found: int, variable: str) -> int:
    """``found`` devices, or as many as ``variable`` lists where set: its entries up to the first that names no
    device (CUDA reads "-1", or an empty list, as none)."""
    value = os.environ.get(variable)
    if value is None:
        return found
    listed = 0
    for entry in value.split(","):
        if not entry.strip() or entry.strip().startswith("-"):
            break
        listed += 1
    return min(found, listed)


_state: dict[str, str | None] = {"setup": None, "version": None}


def chosen() -> str | None:
    """What the last ``setup`` of this kernel chose, "cpu" or "real"; None before any (the self-check then says
    to run the setup cell, where a question's mesh needs more devices than the kernel has)."""
    return _state["setup"]


def kernel_devices() -> int:
    """The devices this kernel's JAX has, as JAX counts them (starting JAX if nothing has yet: its default is one
    CPU device where ``setup`` did not run)."""
    import jax

    return jax.device_count()


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
    ``count`` of them (the exercises' meshes need that many), else simulated CPU devices. Real devices fewer
    than ``count`` add a warning line: the program questions cannot be checked there. ``version``: the
    course version the notebook was released with; another installed version adds a note, since its
    self-check data may not know the notebook's questions. ``student``: your id in a class, whose values
    ``course.setting`` deals (course/variant.py); ``variant``: "student" (the default: your dealt values,
    or the book's when no id is known), "book" or "practice" (fresh values each time you ask)."""
    from .variant import configure

    configure(student, variant)
    if devices == "auto":
        devices = os.environ.get("SCALING_COURSE_DEVICES", "auto")
    if devices not in ("auto", "cpu", "real"):
        raise BadArgument('devices must be "auto", "cpu" or "real" (also for SCALING_COURSE_DEVICES)')
    quiet()
    use_real = devices == "real" or (devices == "auto" and accelerator_count() >= count)
    if not use_real:
        _ask_cpus(count)
    import jax

    _compilation_cache()
    found = jax.devices()
    if not use_real and len(found) != count:
        raise SetupError(f"JAX already started with {len(found)} device(s), before course.setup() could ask "
                         f"for {count}. Restart the kernel and run the first cell before any other.")
    _state["setup"] = "real" if use_real else "cpu"
    _state["version"] = version
    platform = found[0].platform
    # More than one CPU device is simulated, whatever was asked (SCALING_COURSE_DEVICES=real set after the first
    # cell ran leaves the kernel with its simulated devices).
    simulated = not use_real or (platform == "cpu" and len(found) > 1)
    kind = "" if found[0].device_kind.lower() == platform else f": {found[0].device_kind}"
    line = f"{len(found)} {'simulated ' if simulated else ''}{platform.upper()} device(s){kind}"
    if len(found) < count:  # real accelerators, fewer than the meshes need: the other questions still work
        from autograder.messages import phrase

        line += "\n" + phrase("devices:setup", have=devices_text(len(found)), need=count)
    return line + _version_note(version)


def _ask_cpus(count: int) -> None:
    """Ask JAX for ``count`` simulated CPU devices: heard only before its backends start (``jax.devices()`` says)."""
    flags = _COUNT_FLAG.sub("", os.environ.get("XLA_FLAGS", "")).strip()
    os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={count}".strip()
    os.environ["JAX_PLATFORMS"] = "cpu"
    import jax

    try:
        jax.config.update("jax_platforms", "cpu")
        jax.config.update("jax_num_cpu_devices", count)
    except RuntimeError:
        pass  # backends already initialised; the caller checks the count


def simulated_cpus(count: int = DEFAULT_DEVICES) -> None:
    """The devices part of ``setup("cpu")`` alone, for a process of the course's own (the release, the grader's
    judging process) that exports references: no student, variant, warning filters or compilation cache. Raises
    ``SetupError`` where JAX already started with another number of devices."""
    import jax

    _ask_cpus(count)
    if jax.device_count() != count:
        raise SetupError(f"JAX already started with {jax.device_count()} device(s), before the course could ask for "
                         f"{count}")


def _compilation_cache() -> None:
    """Use the grader's compilation cache when it offers one (read-only: see autograder/grading/warmup.py)."""
    folder = os.environ.get("SCALING_COURSE_JAX_CACHE")
    if folder:
        import jax

        jax.config.update("jax_compilation_cache_dir", folder)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


def installed_version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("scaling-course")
    except PackageNotFoundError:
        return None


def released_with() -> str | None:
    """The course version this kernel's notebook was released with (its first cell's ``setup(version=...)``); None
    where unknown."""
    return _state.get("version")


def install_command(version: str, again: bool = False) -> str:
    """The pip command that installs course ``version``, as the first cell of its notebooks installs it (``again``:
    over the same version, a broken install)."""
    pip = "pip install --force-reinstall" if again else "pip install"
    try:
        from autograder.distribution import DISTRIBUTION, repository_url

        return f"{pip} '{DISTRIBUTION} @ git+{repository_url()}@v{version}'"
    except Exception:  # no Repository URL in the installed metadata: the version alone
        return f"{pip} 'scaling-course=={version}'"


def other_version() -> tuple[str, str] | None:
    """(released with, installed) where this kernel's notebook was released with another course version than the
    one installed; None where they agree or either is unknown."""
    wanted, have = released_with(), installed_version()
    return None if wanted is None or have is None or wanted == have else (wanted, have)


def _version_note(wanted: str | None) -> str:
    have = installed_version()
    if have is None or wanted is None or have == wanted:
        return ""
    return (f"\nNote: this notebook was released with scaling-course {wanted}, but {have} is installed; "
            f"if a check does not know a question, install {wanted} ({install_command(wanted)}) or download the "
            f"notebook of {have}.")
