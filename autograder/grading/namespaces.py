"""A private view of the machine for one kernel: its own mounts, processes, network, IPC and user namespace.

Landlock decides which files a kernel may read and write, but not everything a kernel can reach goes
through a file it opens: ``connect()`` to another kernel's Unix socket, a UDP datagram to a port on
the loopback, a POSIX semaphore or a file in ``/dev/shm``, a block device left readable. So each
kernel, right after it is forked and before it applies Landlock, enters new namespaces (Linux,
unprivileged through a user namespace, as root too, where the system allows it) and rebuilds its view:

- the shared temporary folders (``/tmp``, ``/var/tmp``, the grader's temporary folder) become an
  empty memory file system, into which only the kernel's own folders (its work and socket folders,
  and the read-only ones it is allowed, where they lie in those folders) are bound back: other
  kernels' sockets, of this class or of any other grader on the machine, are no longer there;
- ``/dev`` becomes a small memory file system with ``null``, ``zero``, ``full``, ``random`` and
  ``urandom`` bound from the real one, and a fresh ``/dev/shm``; nothing written there outlives the
  kernel or is seen by another;
- the network namespace is new and empty (not even a loopback that is up): no TCP, UDP or abstract
  sockets reach anything outside; the grader talks to the kernel over its socket files, which work
  across network namespaces;
- the IPC namespace is new (System V and POSIX message queues);
- the PID namespace is new: no process of the grader (its workers, the factory, other kernels) has a
  number the kernel could signal, whatever Landlock's ABI (signal scoping needs ABI 6, Linux 6.12), and
  ``/proc`` shows only the kernel's own processes where the system lets it be mounted afresh. A PID
  namespace takes effect for the children of the process that enters it, so that process stays outside
  and only waits; its child is the namespace's first process (its init: it reaps orphans and starts the
  kernel), and the kernel is the second. When the kernel ends, the init ends, and every process left in
  the namespace is killed with it.

Paths opened through ``/proc/<pid>/root`` or ``cwd`` would lead back into another kernel's view;
Landlock refuses those, since they need ptrace access to a process outside the kernel's domain.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import NoReturn

from .jail import DEVICES

CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = (0x00020000, 0x08000000, 0x10000000,
                                                                        0x20000000, 0x40000000)
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_BIND, MS_REC, MS_PRIVATE = 1, 2, 4, 8, 4096, 16384, 1 << 18
PR_SET_PDEATHSIG = 1
SHM_BYTES = 256 * 2**20
_libc = ctypes.CDLL(None, use_errno=True)


def covered_folders() -> list[Path]:
    """The shared scratch folders a kernel sees empty (``/dev`` is rebuilt separately)."""
    folders = {Path(tempfile.gettempdir()).resolve(), Path("/tmp").resolve(), Path("/var/tmp").resolve()}
    return sorted(p for p in folders if p.is_dir())


def _check(result: int, what: str) -> None:
    if result != 0:
        raise OSError(ctypes.get_errno(), what)


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    args = [s.encode() if s is not None else None for s in (source, target, fstype)]
    _check(_libc.mount(*args, ctypes.c_ulong(flags), data.encode() if data else None), f"mount {target}")


def _enter() -> None:
    """New user, mount, network, IPC and PID namespaces (the last for the caller's children), the caller
    mapped to itself."""
    uid, gid = os.geteuid(), os.getegid()
    _check(_libc.unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWPID), "unshare")
    Path("/proc/self/setgroups").write_text("deny")
    Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
    Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")
    _mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing mounted here propagates to the machine


def _bind_back(fds: dict[Path, int]) -> None:
    for path, fd in fds.items():
        if os.path.isdir(f"/proc/self/fd/{fd}"):
            path.mkdir(parents=True, exist_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch()
        _mount(f"/proc/self/fd/{fd}", str(path), None, MS_BIND | MS_REC)
        os.close(fd)


def _outermost(paths: Iterable[Path]) -> list[Path]:
    """``paths`` without those inside another one (binding the outer one shows them already)."""
    out: list[Path] = []
    for p in sorted({p.resolve() for p in paths}, key=lambda p: len(p.parts)):
        if not any(p == q or q in p.parents for q in out):
            out.append(p)
    return out


def isolate(keep: Iterable[Path]) -> None:
    """Enter private namespaces and rebuild the view described above, keeping the ``keep`` paths
    (the kernel's own folders and what it may read) where they lie under a covered folder."""
    covered = covered_folders()
    keep = [p for p in _outermost(keep) if p.exists() and any(c == p or c in p.parents for c in covered)]
    _enter()
    # Opened in the new mount namespace (a bind mount's source must lie in it), before anything is
    # covered: once a folder is hidden, its contents cannot be found again.
    fds = {p: os.open(p, os.O_PATH | os.O_CLOEXEC) for p in keep}
    devices = {Path("/dev", d): os.open(f"/dev/{d}", os.O_PATH | os.O_CLOEXEC) for d in DEVICES
               if os.path.exists(f"/dev/{d}")}
    for folder in _outermost(covered):
        _mount("tmpfs", str(folder), "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=64m")
    _bind_back(fds)
    _mount("tmpfs", "/dev", "tmpfs", MS_NOSUID, "mode=755,size=1m")
    _bind_back(devices)
    Path("/dev/shm").mkdir()
    _mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, f"mode=1777,size={SHM_BYTES}")
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2")):
        os.symlink(target, f"/dev/{name}")
    _enter_pid_namespace()


def _enter_pid_namespace() -> None:
    """Return in the new PID namespace as its second process, the kernel; the caller stays outside and only
    waits, and the namespace's first process reaps and waits too (see the module's docstring)."""
    init = _fork_dying_with_parent()
    if init:
        _wait_then_exit(init)
    with contextlib.suppress(OSError):  # refused where part of the machine's /proc is hidden (some containers)
        _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    kernel = _fork_dying_with_parent()
    if kernel:
        _wait_then_exit(kernel)


def _fork_dying_with_parent() -> int:
    """``os.fork()``, the child killed when this process ends, even if it ended before the child could ask."""
    gone, alive = os.pipe()
    pid = os.fork()
    if pid:
        os.close(gone)
        return pid  # ``alive`` stays open for as long as this process lives
    os.close(alive)
    _check(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PDEATHSIG)")
    if select.select([gone], [], [], 0)[0]:  # end of file: the parent is gone already
        os._exit(1)
    os.close(gone)
    return 0


def _wait_then_exit(child: int) -> NoReturn:
    """Run nothing more: collect children (in a namespace's first process, orphans are its children) and
    end as ``child`` ends. An interrupt is for the kernel (the grader sends it to the whole session)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):  # a service's connection belongs to the service alone
        os.dup2(null, fd)
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            os._exit(1)
        if pid == child:
            code = os.waitstatus_to_exitcode(status)
            os._exit(code if code >= 0 else 128 - code)


def available() -> bool:
    """Whether a forked child can enter the namespaces here (some containers and kernels forbid
    user namespaces); asked once, in a throwaway child, by the kernel factory before it serves."""
    if not hasattr(os, "fork") or not os.path.exists("/proc/self/uid_map"):
        return False
    pid = os.fork()
    if pid == 0:
        try:
            _enter()
            _mount("tmpfs", "/dev", "tmpfs", MS_NOSUID, "mode=755,size=1m")
            first = os.fork()  # the PID namespace's first process
            if first == 0:
                os._exit(0)
            _, status = os.waitpid(first, 0)
            os._exit(os.waitstatus_to_exitcode(status))
        except BaseException:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0
