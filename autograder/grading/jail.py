"""Start a command (the grading kernel) with resource limits and, where Linux allows, Landlock.

    python -m autograder.grading.jail --rw DIR --deny PATH ... [--allow PATH ...]
        [--memory BYTES] [--cpu SECONDS] [--limits-only] -- COMMAND ...

Landlock (Linux >= 5.13, no root needed) restricts the process and everything it starts: it may
read the whole file system *except* the ``--deny`` trees (the course directory with its solutions,
source notebooks, gradebook and other students' submissions, and the grading user's home) and ``/dev``,
read ``--allow`` paths inside them (the course package itself, the Python environment), and write only
under ``--rw``. The grader also hands such a process only an allow-listed environment
(``kernel_environment``). Of ``/dev`` it may use only
the harmless devices (``null``, ``zero``, ``full``, ``random``, ``urandom``), and ``/dev/shm`` where
that is private to it (namespaces.py). Where the kernel supports it (ABI >= 4) all TCP is refused
(the grading kernel talks over Unix sockets), and (ABI >= 6) the process cannot signal processes
outside its domain. Nowhere may it create device nodes. Limits: address space, CPU seconds, file
size, no core dumps. Where Landlock is missing, the limits still apply and the grader reports the
weaker isolation. ``--limits-only`` applies the limits alone (the kernel factory, which runs no
foreign code and must stay free to give each kernel its own namespaces).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import functools
import importlib.util
import os
import platform
import resource
import signal
import struct
import sys
from pathlib import Path

_SYS = {"x86_64": (444, 445, 446), "aarch64": (444, 445, 446)}
_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_PDEATHSIG = 1
_RULE_PATH_BENEATH = 1
_FS_EXECUTE, _FS_WRITE_FILE, _FS_READ_FILE, _FS_READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_FS_ALL_V1 = (1 << 13) - 1
_FS_MAKE_CHAR, _FS_MAKE_BLOCK = 1 << 6, 1 << 11
_FS_REFER, _FS_TRUNCATE, _FS_IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1
_SCOPE_ABSTRACT_UNIX, _SCOPE_SIGNAL = 1 << 0, 1 << 1
_READ = _FS_EXECUTE | _FS_READ_FILE | _FS_READ_DIR
_FILE_ONLY = _FS_EXECUTE | _FS_WRITE_FILE | _FS_READ_FILE | _FS_TRUNCATE | _FS_IOCTL_DEV


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, 0 where unavailable."""
    numbers = _SYS.get(platform.machine())
    if not numbers or sys.platform != "linux":
        return 0
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    version = libc.syscall(numbers[0], None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    return max(int(version), 0)


DEVICES = ("null", "zero", "full", "random", "urandom")


def readable_roots(deny: list[Path]) -> list[Path]:
    """Paths whose trees together cover the file system minus the ``deny`` trees and ``/dev``
    (whose few usable devices are granted one by one). Worked out once per process: a folder made
    later beside a denied one is simply not readable."""
    return list(_readable_roots(tuple(deny)))


@functools.lru_cache(maxsize=16)
def _readable_roots(deny_paths: tuple[Path, ...]) -> tuple[Path, ...]:
    return _cover(Path("/"), tuple(p.resolve() for p in [*deny_paths, Path("/dev")]))


def allowed_paths(allow: list[Path], deny: list[Path]) -> tuple[list[Path], list[Path]]:
    """The trees to grant for ``allow`` (to read), and the folders to grant only to list. Each allowed path
    is granted as it is, unless a denied tree lies inside it (``solutions`` in the site-packages of
    ``sys.prefix``, where the grader is installed from a wheel): Landlock only ever adds access, so a rule on
    the whole tree would re-open the denied one. It is then granted around the denied tree, and the folders
    on the way down to it may be listed (Python finds a module by listing site-packages), not read."""
    denied = [d.resolve() for d in deny]
    read: list[Path] = []
    listed: list[Path] = []
    for path in allow:
        root = path.resolve()
        # an allowed package inside a denied tree (the course in a checkout on PYTHONPATH): the folders from the
        # denied tree down to it may be listed, or Python could not find it there
        listed += [a for d in denied if d in root.parents for a in root.parents if a == d or d in a.parents]
        inner = tuple(d for d in denied if root in d.parents)
        if not inner:
            read.append(path)
            continue
        read += _cover(root, inner)
        listed += sorted({a for d in inner for a in d.parents if a == root or root in a.parents})
    return read, sorted(set(listed))


@functools.lru_cache(maxsize=16)
def _cover(start: Path, deny: tuple[Path, ...]) -> tuple[Path, ...]:
    """Paths whose trees together cover ``start``'s tree minus the ``deny`` trees."""
    out: list[Path] = []

    def visit(path: Path) -> None:
        if any(path == d for d in deny):
            return
        if not any(path in d.parents for d in deny):
            out.append(path)
            return
        try:
            children = list(os.scandir(path))
        except OSError:
            return
        for child in children:
            p = Path(child.path)
            if child.is_symlink():
                # A rule on a link applies to its target: skip links into, or above, a denied tree
                # (/tmp/x -> / would otherwise re-open everything). Real paths are visited anyway.
                target = p.resolve()
                if not any(target == d or d in target.parents or target in d.parents for d in deny):
                    out.append(p)
                continue
            visit(p)
    visit(start)
    return tuple(out)


def _apply_landlock(abi: int, roots: list[Path], allow: list[Path], listed: list[Path], rw: list[Path],
                    shm: bool) -> None:
    create, add_rule, restrict = _SYS[platform.machine()]
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    handled_fs = _FS_ALL_V1 | (_FS_REFER if abi >= 2 else 0) | (_FS_TRUNCATE if abi >= 3 else 0) | (
        _FS_IOCTL_DEV if abi >= 5 else 0)
    handled_net = (_NET_BIND_TCP | _NET_CONNECT_TCP) if abi >= 4 else 0
    scoped = (_SCOPE_ABSTRACT_UNIX | _SCOPE_SIGNAL) if abi >= 6 else 0
    attr = struct.pack("=QQQ", handled_fs, handled_net, scoped)
    size = 8 if abi < 4 else (16 if abi < 6 else 24)
    fd = libc.syscall(create, ctypes.c_char_p(attr[:size]), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if fd < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset")

    def grant(path: Path, access: int) -> None:
        try:
            pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            return
        try:
            if not os.path.isdir(path):
                access &= _FILE_ONLY
            rule = struct.pack("=Qi", access & handled_fs, pfd)
            if libc.syscall(add_rule, ctypes.c_int(fd), ctypes.c_int(_RULE_PATH_BENEATH), ctypes.c_char_p(rule),
                            ctypes.c_uint32(0)) < 0:
                raise OSError(ctypes.get_errno(), f"landlock_add_rule {path}")
        finally:
            os.close(pfd)

    for root in roots:
        grant(root, _READ)
    for path in allow:
        grant(path, _READ)
    for path in listed:
        grant(path, _FS_READ_DIR)
    # Everything under a writable folder but device nodes (sockets and fifos included: the kernel
    # binds its sockets in its own folder).
    writable = (_READ | _FS_ALL_V1 | (_FS_TRUNCATE if abi >= 3 else 0)) & ~(_FS_MAKE_CHAR | _FS_MAKE_BLOCK)
    for path in rw:
        grant(path, writable)
    grant(Path("/dev"), _FS_READ_DIR)
    for device in DEVICES:
        grant(Path("/dev", device), _FS_READ_FILE | _FS_WRITE_FILE | (_FS_TRUNCATE if abi >= 3 else 0) | (
            _FS_IOCTL_DEV if abi >= 5 else 0))
    if shm:
        grant(Path("/dev/shm"), writable)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(NO_NEW_PRIVS)")
    if libc.syscall(restrict, ctypes.c_int(fd), ctypes.c_uint32(0)) < 0:
        raise OSError(ctypes.get_errno(), "landlock_restrict_self")
    os.close(fd)


def die_with_parent(parent: int) -> None:
    """Be killed when the process ``parent`` ends, even by kill -9 (Linux; elsewhere a no-op), so
    nothing the grader started outlives it: workers, and kernels in their factory."""
    try:
        armed = ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return
    if armed and os.getppid() != parent:  # it ended before the signal was armed
        os._exit(1)


def isolation_paths(course_dir: Path, runner: bool = False) -> tuple[list[Path], list[Path]]:
    """What grading processes that run foreign code may not read (deny), and the exceptions inside
    those trees (allow): the course directory, the reference solutions and the grading user's home
    are off limits; the course's own package and the Python environment, wherever they live (in the
    home too), stay readable, but for the self-check's data (``course/fingerprints``, which judges any answer: a
    kernel is handed its public part) and the grader's readers of compiled programs (``autograder.compiled_hlo``),
    which Chapter 9 asks students to write: only the program ``runner``, which runs no Python of a student's, reads
    them."""
    import autograder
    import course
    import solutions

    from . import STATE

    solutions_dir = Path(solutions.__file__).parent.resolve()
    repo = solutions_dir.parent
    # The program questions' single-device references answer function questions: the grader's package holds them
    # (a student's self-check runs them), but no grading process that runs a student's code may read them.
    references = Path(importlib.util.find_spec("autograder.program_references").origin).parent.resolve()
    readers = Path(importlib.util.find_spec("autograder.compiled_hlo").origin).parent.resolve()
    # The self-check's data judges any answer it is shown: kernels get its public part (``kernel_data``).
    judging = Path(course.__file__).parent.resolve() / "fingerprints"
    # A checkout of the course (where the package is installed from) holds answers outside solutions/ too: its
    # tests' tables of the book's answers. The whole checkout is denied, but for the packages and the environment.
    checkout = [repo] if (repo / "pyproject.toml").is_file() else []
    deny = [course_dir.resolve(), *checkout, solutions_dir, references, judging, *([] if runner else [readers]),
            repo / "source", repo / "gradebook.db", repo / "submitted", repo / "autograded", repo / STATE,
            *other_copies(runner)]
    needed = [Path(course.__file__).parent.resolve(), Path(autograder.__file__).parent.resolve(),
              *(Path(p).resolve() for p in {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix})]
    # A home that is itself a package's or the environment's folder stays readable: denying it would break grading.
    private = [h for h in homes() if not any(h == p or p in h.parents for p in needed)]
    # A path entry that is a denied tree, or lies in one (a checkout on PYTHONPATH), is not granted: its packages
    # are (``needed``), and the folders above them may be listed (``allowed_paths``), so imports still find them.
    closed = [*deny, *private]
    allow = needed + [p for p in python_paths() if p not in needed and not any(p == d or d in p.parents
                                                                                for d in closed)]
    return [d for d in dict.fromkeys(closed) if d.exists()], allow


PACKAGES = ("solutions", "course", "autograder")


def other_copies(runner: bool = False) -> list[Path]:
    """The answers of every other copy of the course this Python could import: a kernel may drop its first path
    entry and import the packages anew, and an editable install maps them to its checkout whatever ``sys.path``
    holds (a grader run from one checkout, first on PYTHONPATH, beside an environment installed from another).
    Each finder of ``sys.meta_path`` is asked, and each path entry: for every copy found, its solutions, its
    self-check data, its references and readers, and its checkout, as for the grader's own copy."""
    import importlib.machinery

    found: set[Path] = set()
    for name in PACKAGES:
        specs = []
        for finder in sys.meta_path:
            with contextlib.suppress(Exception):
                specs.append(finder.find_spec(name, None))
        for entry in python_paths():
            with contextlib.suppress(Exception):
                specs.append(importlib.machinery.PathFinder.find_spec(name, [str(entry)]))
        for spec in specs:
            if spec is not None and spec.origin and os.path.isfile(spec.origin):
                found.add(Path(spec.origin).resolve().parent.parent)
    deny = []
    for root in sorted(found):
        answers = [root / "solutions", root / "course" / "fingerprints", root / "autograder" / "program_references",
                   *([] if runner else [root / "autograder" / "compiled_hlo"])]
        deny += [root] if (root / "pyproject.toml").is_file() else []
        deny += [a for a in answers if a.exists()]
    return deny


def homes() -> list[Path]:
    """The grading user's home folders (its account's, and ``$HOME``): private files (keys, tokens, shell
    history) that no kernel has any business reading. Never "/"."""
    found = {os.environ.get("HOME", "")}
    try:
        import pwd

        found.add(pwd.getpwuid(os.getuid()).pw_dir)
    except (ImportError, KeyError):
        pass
    paths = {Path(h).resolve() for h in found if h and os.path.isdir(h)}
    return sorted(p for p in paths if p != Path("/"))


def python_paths() -> list[Path]:
    """Where this Python finds modules besides its prefixes: the site-packages (the user's too) and every
    entry of ``sys.path`` but the first (the script's or working folder, which holds no installed package)."""
    import site

    found = [*site.getsitepackages(), *sys.path[1:]]
    if site.ENABLE_USER_SITE:
        found.append(site.getusersitepackages())
    return list(dict.fromkeys(Path(p).resolve() for p in found if p and os.path.exists(p)))


# What a kernel (or program runner) keeps of the grader's environment: where programs and Python's modules are
# found, the locale and time zone. Nothing else: no JAX_* or XLA_* setting (the grader sets the kernel's devices,
# GRADING_DEVICES below), no instructor's tokens or keys, no factory socket. The grader then adds the kernel's own
# (HOME, TMPDIR, ...).
KEPT_VARIABLES = ("PATH", "PYTHONPATH", "LD_LIBRARY_PATH", "LANG", "LANGUAGE", "TZ", "MPLBACKEND",
                  "TF_CPP_MIN_LOG_LEVEL")
KEPT_PREFIXES = ("LC_",)
# The devices and JAX settings of every grading process are the grader's, never the shell's: a grade must not depend
# on the machine it is computed on (SCALING_COURSE_DEVICES=real on a one-CPU host could not lower the programs; on a
# GPU host they would be exported for the GPU; JAX_ENABLE_X64 changes dtypes). Every JAX_* and XLA_* is dropped.
GRADING_DEVICES = {"SCALING_COURSE_DEVICES": "cpu", "JAX_PLATFORMS": "cpu"}


def kernel_environment(env: dict[str, str] | os._Environ) -> dict[str, str]:
    """The part of ``env`` that a process running foreign code may see (``KEPT_VARIABLES``), and the devices the
    grader chooses for it (``GRADING_DEVICES``). ``PYTHONPATH``'s folders are resolved, as the interpreter's are
    (``resolved_python``): a link under the temporary folder leads nowhere in a kernel's private view."""
    kept = {k: v for k, v in env.items() if k in KEPT_VARIABLES or k.startswith(KEPT_PREFIXES)}
    if kept.get("PYTHONPATH"):
        kept["PYTHONPATH"] = os.pathsep.join(str(Path(p).resolve()) if os.path.isabs(p) else p
                                             for p in kept["PYTHONPATH"].split(os.pathsep))
    return kept | GRADING_DEVICES


def resolved_python(executable: str) -> str:
    """``executable`` with its folder's path resolved, not the file itself (an environment's ``bin/python`` is a link
    to the base interpreter, and Python finds its environment beside the name it was started by). Python derives
    ``sys.prefix`` and ``sys.path`` from that name: an environment reached through a link under the temporary folder
    (``/tmp/x/.venv -> /srv/.venv``), which a kernel's private view empties, would leave every kernel without the
    modules the factory had not imported yet."""
    path = Path(executable)
    return str(path.parent.resolve() / path.name) if path.is_absolute() else executable


# How grading processes start Python: -P keeps the folder the grader runs in off the import path. A course folder
# that holds its own copy of ``course/`` (a clone of the repository) would otherwise shadow the installed package in
# the factory, whose kernels the jail then denies that folder: every setup cell would fail. The interpreter's path is
# the resolved one (``resolved_python``).
PYTHON = (resolved_python(sys.executable), "-P")


def jail_command(deny: list[Path], allow: list[Path], rw: list[Path], memory: int, cpu: int,
                 limits_only: bool = False) -> list[str]:
    """The argument list that starts a command through this jail (append "--" and the command)."""
    args = [*PYTHON, "-m", "autograder.grading.jail", "--memory", str(memory), "--cpu", str(cpu)]
    args += ["--limits-only"] if limits_only else []
    for flag, paths in (("--deny", deny), ("--allow", allow), ("--rw", rw)):
        for p in paths:
            args += [flag, str(p)]
    return args


def _limit(kind: int, value: int) -> None:
    """``value`` as both the soft and the hard limit (or the hard limit there is, if lower): a soft limit alone is
    one the jailed process may raise again, up to the hard one it inherited."""
    _, hard = resource.getrlimit(kind)
    value = value if hard == resource.RLIM_INFINITY else min(value, hard)
    resource.setrlimit(kind, (value, value))


def apply(deny: list[Path], allow: list[Path], rw: list[Path], memory: int, cpu: int,
          roots: list[Path] | None = None, shm: bool = False, landlock: bool = True) -> int:
    """Apply limits and Landlock to this process; returns the Landlock ABI used (0: none).
    ``roots`` (readable_roots(deny)) must be given by a caller that is already jailed: inside a
    Landlock domain that hides part of the tree, "/" itself can no longer be listed. ``shm``: grant
    ``/dev/shm``, only where it is the process's own."""
    _limit(resource.RLIMIT_AS, memory)
    _limit(resource.RLIMIT_CPU, cpu)
    _limit(resource.RLIMIT_FSIZE, 256 * 2**20)
    _limit(resource.RLIMIT_CORE, 0)
    abi = landlock_abi() if landlock else 0
    if abi:
        read, listed = allowed_paths(allow, deny)
        _apply_landlock(abi, roots if roots is not None else readable_roots(deny), read, listed, rw, shm)
    return abi


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m autograder.grading.jail")
    parser.add_argument("--deny", action="append", default=[], type=Path)
    parser.add_argument("--allow", action="append", default=[], type=Path)
    parser.add_argument("--rw", action="append", default=[], type=Path)
    parser.add_argument("--memory", type=int, default=8 * 2**30)
    parser.add_argument("--cpu", type=int, default=900)
    parser.add_argument("--limits-only", action="store_true")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given")
    apply(args.deny, args.allow, args.rw, args.memory, args.cpu, landlock=not args.limits_only)
    os.execvp(command[0], command)


if __name__ == "__main__":
    main()
