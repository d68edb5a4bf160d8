"""A jailed process that imports the kernel's heavy modules once and forks a fresh kernel per notebook.

Starting a kernel costs about two CPU-seconds of imports (ipykernel, JAX, sympy, numpy, the course)
before the notebook's first cell runs: as much as grading a short notebook. Each grading worker keeps
one zygote: it has imported those modules (JAX without starting a backend, so no threads exist and
forking is safe) and, on request, forks a child that restricts itself further and becomes an
IPython kernel for one notebook. Every notebook still gets a fresh process with no state from the
previous one; only clean imports are shared.

The zygote runs only this module's code, under the jail's resource limits but not Landlock: a
process under Landlock may not mount, and each child first enters namespaces of its own
(namespaces.py: private temporary folders, /dev, network and IPC) where the system allows it. The
child then applies Landlock itself (no access to the course directory, the solutions or the
gradebook; writes only to its own work and socket folders), sets its own memory and CPU limits and
its own session, and points HOME, TMPDIR and friends at its work folder.

    python -m autograder.grading.jail ... -- python -m autograder.grading.zygote
    stdin:  {"connection_file", "workdir", "sockets", "log", "env", "memory", "cpu", "roots", "allow"}
    stdout: {"pid": ..., "private": whether the kernel has namespaces of its own}
"""

from __future__ import annotations

import ctypes
import importlib
import json
import os
import pkgutil
import signal
import sys
import traceback
from pathlib import Path
from typing import Any

PR_SET_CHILD_SUBREAPER = 36
PRIVATE = False  # whether kernels get namespaces of their own: asked once, before serving


def _preload() -> None:
    """Imports every notebook pays for, done once (no JAX backend: that would start threads)."""
    os.environ.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")  # debugpy's import-time warning
    # What IPKernelApp's start imports (about 0.1 s), then what every notebook imports.
    import pdb  # noqa: F401
    import sqlite3  # noqa: F401

    import ipykernel.debugger  # noqa: F401  (debugpy: it starts no thread until a debugger attaches)
    import ipykernel.ipkernel  # noqa: F401
    import ipykernel.kernelapp  # noqa: F401
    import jax  # noqa: F401
    import jax.numpy  # noqa: F401
    import matplotlib  # noqa: F401
    import matplotlib.axes  # noqa: F401
    import matplotlib.backends.backend_agg  # noqa: F401
    import matplotlib.figure  # noqa: F401
    import matplotlib.pyplot  # noqa: F401  (not matplotlib_inline: imported here, it would not hook the kernel)
    import numpy  # noqa: F401
    import psutil  # noqa: F401
    import sympy  # noqa: F401

    import course

    # Every module of the course, and the engine parts its checks use: about 0.4 s a notebook. pyplot
    # loads its backend (the kernel's inline one, from MPLBACKEND) at the first figure, in the kernel.
    for module in pkgutil.iter_modules(course.__path__):
        importlib.import_module(f"course.{module.name}")
    import autograder.collectives  # noqa: F401
    import autograder.programs  # noqa: F401

    _format_a_traceback()


def _format_a_traceback() -> None:
    """The first traceback a kernel formats loads lexers and source caches (0.1 s); most notebooks
    have at least one error cell, so pay that here once."""
    from IPython.core.ultratb import AutoFormattedTB

    try:
        raise NotImplementedError("warm-up")
    except NotImplementedError:
        AutoFormattedTB(mode="Context").structured_traceback(*sys.exc_info())


def _reap(signum: int, frame: Any) -> None:
    """Collect finished kernels so their pids disappear (the worker polls them by pid)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _become_kernel(request: dict[str, Any], factory: int) -> None:
    """In the forked child: isolate further, then run an IPython kernel until it is shut down."""
    from .jail import apply, die_with_parent
    from .namespaces import isolate

    os.setsid()
    # A kernel outlives no factory: when its worker dies, the factory reads EOF and exits, and a
    # kernel still running a notebook nobody will read is killed with it.
    die_with_parent(factory)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    workdir = Path(request["workdir"])
    log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    allow = [Path(p) for p in request["allow"]]
    rw = [workdir, Path(request["sockets"]), *(Path(p) for p in request.get("writable", []))]
    if PRIVATE:
        isolate(keep=[*rw, *allow])
    apply([], allow, rw, int(request["memory"]), int(request["cpu"]), roots=[Path(p) for p in request["roots"]],
          shm=PRIVATE)
    os.chdir(workdir)
    os.environ.update(request["env"])
    sys.argv = ["ipykernel_launcher", "-f", request["connection_file"], "--HistoryManager.hist_file=:memory:"]
    from ipykernel.kernelapp import IPKernelApp

    IPKernelApp.launch_instance(argv=sys.argv[1:])


def main() -> None:
    global PRIVATE
    from .namespaces import available

    PRIVATE = available()  # before any thread or handler exists
    _preload()
    # Become the reaper of every process a kernel leaves behind: killed orphans are collected here
    # instead of lingering as zombies under an init that may not reap them.
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    signal.signal(signal.SIGCHLD, _reap)
    factory = os.getpid()
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            try:
                _become_kernel(request, factory)
            except BaseException:
                traceback.print_exc()  # into the kernel's log, where the grader's notes point
            finally:
                os._exit(0)
        sys.stdout.write(json.dumps({"pid": pid, "private": PRIVATE}) + "\n")
        sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
