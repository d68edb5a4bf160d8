"""A process that imports the grading processes' heavy modules once and forks each of them from itself.

Starting a kernel costs about two CPU-seconds of imports (ipykernel, JAX, sympy, numpy, the course)
before the notebook's first cell runs: as much as grading a short notebook; the judging process
(sympy) and the program runner (JAX) cost as much again. One factory serves a whole class: it has
imported those modules (JAX without starting a backend, so no threads exist and forking is safe) and,
on request, forks a child that becomes an IPython kernel for one notebook, a judging process or a
program runner. Every notebook still gets a fresh process with no state from the previous one; only
clean imports are shared. Nothing of the reference solutions is ever imported here: every kernel
would inherit it.

The factory runs only this module's code, under the jail's resource limits but not Landlock: a
process under Landlock may not mount, and each kernel first enters namespaces of its own
(namespaces.py: private temporary folders, /dev, network and IPC) where the system allows it. The
kernel then applies Landlock itself (no access to the course directory, the solutions or the
gradebook; writes only to its own work and socket folders), sets its own memory and CPU limits and
its own session, keeps only an allow-listed part of the environment (jail.KEPT_VARIABLES; the factory
itself is started with no more than that) and points HOME, TMPDIR and friends at its work folder. The program runner is
jailed the same way; the judging process is not (it reads the references) and runs no student code.

Requests come over a Unix socket in a folder only the grader's user can enter, and are served only
for the process that started the factory or its other children (the grading workers), checked by
the peer's credentials: a kernel is the factory's own child, so even where it could reach the socket
(no private namespaces) it is refused. The factory exits when its starter closes its stdin, and
kills what a worker asked for once that worker is gone.

    python -m autograder.grading.jail --limits-only ... -- python -m autograder.grading.zygote SOCKET
    request:  {"kind": "kernel", "connection_file", "workdir", "sockets", "log", "env", "memory", "cpu",
               "roots", "allow", "deny", "writable", "fence"}  -> {"pid", "private"}
              {"kind": "judge"}                -> {"pid"}, then the connection is the judge's stdin/stdout
              {"kind": "runner", "workdir", "env", "memory", "cpu", "roots", "allow", "deny"} -> likewise
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import importlib
import json
import os
import pkgutil
import select
import signal
import socket
import struct
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
    from autograder import kinds

    dict(kinds.KINDS)  # imports every kind: a student's kernel loads each at its first check, a grading one uses all

    _format_a_traceback()
    _draw_a_figure()


def _draw_a_figure() -> None:
    """The first figure a process draws loads fonts and builds the math-text parser (0.2 s of the
    0.3 s it takes); most notebooks plot, so draw one here, without pyplot (whose backend must be
    chosen in the kernel)."""
    import io

    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure()
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    axes.loglog([1, 10], [1, 10], label=r"$B = 64$")
    axes.set(xlabel="intensity", ylabel="FLOP/s", title="warm-up")
    axes.legend()
    figure.savefig(io.BytesIO(), format="png")


# Tracebacks in the form Python prints them (each frame's line, no surrounding lines, no colours):
# IPython's default form looks up every frame's module among thousands loaded (JAX, sympy, matplotlib)
# and highlights the source, about 15-30 ms an error, and an untouched notebook errs in every cell.
# The feedback page strips colours anyway.
TRACEBACKS = ["--InteractiveShell.xmode=Plain", "--InteractiveShell.colors=nocolor"]


def _format_a_traceback() -> None:
    """The first traceback a kernel formats loads source caches; most notebooks have at least one
    error cell, so pay that here once."""
    from IPython.core.ultratb import AutoFormattedTB

    try:
        raise NotImplementedError("warm-up")
    except NotImplementedError:
        AutoFormattedTB(mode="Plain").structured_traceback(*sys.exc_info())


def _reap(signum: int, frame: Any) -> None:
    """Collect finished kernels so their pids disappear (the worker polls them by pid)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _owned.pop(pid, None)
        _judges.discard(pid)


def _as_child(request: dict[str, Any], factory: int) -> None:
    """What every forked child does first: its own session, death with the factory, default signals,
    its output to its log."""
    os.setsid()
    if request.get("fence"):  # the kernel's fence, entered before the child forks anything (namespaces.py)
        from .cgroup import enter

        enter(request["fence"])
    # A child outlives no factory: when the grader dies, the factory reads EOF and exits, and a kernel
    # still running a notebook nobody will read is killed with it.
    from .jail import die_with_parent

    die_with_parent(factory)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    log = os.open(request.get("log") or os.devnull, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(log, 2)
    os.close(log)


def _jail(request: dict[str, Any], rw: list[Path]) -> None:
    """Namespaces (where the system has them), then limits and Landlock, then the child's own folder
    and environment: a kernel and the program runner alike."""
    from .jail import apply, kernel_environment
    from .namespaces import isolate

    allow = [Path(p) for p in request["allow"]]
    if PRIVATE:
        # Where modules are found, as the view about to be rebuilt shows it: a link under a covered folder is gone
        # there, while the folder it leads to stays (the factory itself is started by its resolved path: jail.PYTHON).
        sys.path[:] = [os.path.realpath(p) if os.path.isabs(p) else p for p in sys.path]
        isolate(keep=[*rw, *allow])
    deny = [Path(p) for p in request.get("deny", [])]  # where an allowed tree holds one (jail.allowed_paths)
    apply(deny, allow, rw, int(request["memory"]), int(request["cpu"]), roots=[Path(p) for p in request["roots"]],
          shm=PRIVATE)
    os.chdir(request["workdir"])
    # Only what the jail keeps of the factory's environment (already only that, where the grader started it).
    kept = kernel_environment(os.environ)
    os.environ.clear()
    os.environ.update(kept | request["env"])


def _become_kernel(request: dict[str, Any]) -> None:
    """Run an IPython kernel until it is shut down."""
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(2, 1)
    workdir = Path(request["workdir"])
    _jail(request, [workdir, Path(request["sockets"]), *(Path(p) for p in request.get("writable", []))])
    sys.argv = ["ipykernel_launcher", "-f", request["connection_file"], "--HistoryManager.hist_file=:memory:",
                *TRACEBACKS]
    from ipykernel.kernelapp import IPKernelApp

    app = IPKernelApp.instance()
    app.initialize(sys.argv[1:])
    _draw_figures_once()
    app.start()


def _draw_figures_once() -> None:
    """After each cell, pyplot draws every changed figure for interactive windows, then the inline
    backend draws it again into the PNG it shows: a figure costs twice (0.5 s each for a roofline
    plot). A notebook has no windows, so only the second, whose picture is kept, is done here. A
    notebook that selects a backend itself (``%matplotlib inline``) gets both again, and the same
    picture."""
    import matplotlib.pyplot as plt

    plt.switch_backend(os.environ.get("MPLBACKEND", "module://matplotlib_inline.backend_inline"))
    plt.uninstall_repl_displayhook()


def _become_service(request: dict[str, Any], conn: socket.socket) -> None:
    """Serve JSON lines on the worker's connection as the judging process or the program runner."""
    os.dup2(conn.fileno(), 0)
    os.dup2(conn.fileno(), 1)
    conn.close()
    sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115
    sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
    if request["kind"] == "judge":
        os.environ.update(request.get("env", {}))
        from .judge import main as serve
    else:
        _jail(request, [Path(request["workdir"])])
        from .run_programs import main as serve
    serve()


def _peer(conn: socket.socket) -> int:
    pid, _, _ = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    return pid


def _parent_of(pid: int) -> int:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return -1
    return int(stat.rsplit(")", 1)[1].split()[1])  # the command name may hold spaces and parentheses


def read_line(conn: socket.socket, seconds: float = 10.0) -> bytes:
    """One line (a request, or the factory's reply), read byte by byte: what follows it belongs to the
    child it asks for. Short of its newline where the other side closed first."""
    conn.settimeout(seconds)
    data = b""
    while not data.endswith(b"\n") and len(data) < 1 << 20:
        byte = conn.recv(1)
        if not byte:
            break
        data += byte
    conn.settimeout(None)
    return data


_owned: dict[int, int] = {}  # child pid -> the worker that asked for it
_judges: set[int] = set()  # children that judge: each may ask for its program runner


def _sweep() -> None:
    """Kill what a worker that is gone asked for (a worker the grader abandoned, or one that died)."""
    for child, worker in list(_owned.items()):
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            _owned.pop(child, None)
            _judges.discard(child)
            continue
        if not _trusted(worker):
            with contextlib.suppress(OSError):
                os.killpg(child, signal.SIGKILL)
            _owned.pop(child, None)
            _judges.discard(child)


def _trusted(pid: int) -> bool:
    """The grader's own processes: the factory's starter, its other children (the workers), and the
    judging processes forked here. Never a kernel or a program runner."""
    return pid == OWNER or _parent_of(pid) == OWNER or pid in _judges


OWNER = 0  # the process that started the factory: it and its children may make requests


def _serve(conn: socket.socket, listener: socket.socket, factory: int) -> None:
    worker = _peer(conn)
    if not _trusted(worker):
        return  # not the grader: a kernel, or a process of another user's making
    try:
        request = json.loads(read_line(conn))
    except (OSError, ValueError):
        return
    if not isinstance(request, dict) or request.get("kind") not in ("kernel", "judge", "runner"):
        return
    pid = os.fork()
    if pid == 0:
        try:
            listener.close()  # a child that kept it could answer the grader in the factory's place
            _as_child(request, factory)
            if request["kind"] == "kernel":
                conn.close()
                _become_kernel(request)
            else:
                _become_service(request, conn)
        except BaseException:
            traceback.print_exc()  # into the child's log, where the grader's notes point
        finally:
            os._exit(0)
    try:
        conn.sendall((json.dumps({"pid": pid, "private": PRIVATE}) + "\n").encode())
    except OSError:  # the requester is gone (killed mid-request): nobody will use or stop this child
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
        return
    _owned[pid] = worker
    if request["kind"] == "judge":
        _judges.add(pid)


def main() -> None:
    global PRIVATE, OWNER
    from .namespaces import available

    OWNER = os.getppid()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(sys.argv[1])  # before the imports: requests wait in the backlog meanwhile
    listener.listen(64)
    PRIVATE = available()  # before any thread or handler exists
    _preload()
    # What was imported stays for good: out of the collector's sight, a forked child's collections
    # neither walk it nor copy the pages they would touch.
    gc.freeze()
    # Become the reaper of every process a kernel leaves behind: killed orphans are collected here
    # instead of lingering as zombies under an init that may not reap them.
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    signal.signal(signal.SIGCHLD, _reap)
    factory = os.getpid()
    while True:
        ready, _, _ = select.select([sys.stdin, listener], [], [], 1.0)
        if sys.stdin in ready and not os.read(sys.stdin.fileno(), 1 << 16):
            break  # the grader is gone
        if listener in ready:
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            with conn:
                try:
                    _serve(conn, listener, factory)
                except Exception:  # one requester's misbehaviour never ends the class's factory
                    traceback.print_exc()
        _sweep()
    os._exit(0)


if __name__ == "__main__":
    main()
