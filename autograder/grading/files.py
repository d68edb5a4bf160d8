"""Files the grader reads but does not trust: what a kernel left in its folders, what a student handed in.

The grader runs with more rights than a kernel (no Landlock, no file-size limit), so a file a kernel can
replace is a door: a link named like its log, pointing at the grading secret, would have the grader copy
the secret; one pointing at ``/dev/zero`` would have it copy zeros until the disk is full. So such a file
is opened without following a link (``O_NOFOLLOW``), without waiting on a FIFO (``O_NONBLOCK``), and taken
only if what was opened is a plain file (checked on the open descriptor, so nothing can be swapped in
between), with one name where a kernel could have linked it (``one_link``: a hard link to a file the kernel
cannot read is refused), and read to a stated number of bytes at most.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0)
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class NotPlain(OSError):
    """The path is a link, a FIFO, a device, a folder, or a second name of another file: not read."""


def open_plain(path: Path, one_link: bool = False) -> int:
    """A descriptor of ``path``, opened as described above; raises ``NotPlain`` (or the ``OSError`` of the
    open) otherwise."""
    try:
        fd = os.open(path, _FLAGS)
    except OSError as e:
        if e.errno == getattr(os, "ELOOP", 40):  # the last part of the path is a link
            raise NotPlain(e.errno, "a symbolic link, not followed", str(path)) from None
        raise
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or (one_link and info.st_nlink != 1):
        os.close(fd)
        what = "a second name of another file" if stat.S_ISREG(info.st_mode) else "not a plain file"
        raise NotPlain(0, what, str(path))
    os.set_blocking(fd, True)
    return fd


@contextlib.contextmanager
def opened(path: Path, one_link: bool = False) -> Iterator[BinaryIO]:
    """``open_plain`` as a binary file object, closed after the block."""
    with os.fdopen(open_plain(path, one_link), "rb") as f:
        yield f


def read_plain(path: Path, limit: int, one_link: bool = False) -> tuple[bytes, bool]:
    """At most ``limit`` bytes of the plain file ``path``, and whether there were more."""
    with opened(path, one_link) as f:
        data = f.read(limit + 1)
    return data[:limit], len(data) > limit


WALKED_ENTRIES = 100_000  # entries of a handed-in folder looked at, at most (100,000 empty files walk in 2 s)


def walk(top: Path) -> Iterator[tuple[Path, list[str], list[str]]]:
    """``os.walk`` of a folder a student filled, top down, links not followed, folders it cannot read skipped. By a
    stack, not by recursion: Python 3.11's ``os.walk`` and ``Path.rglob`` recurse once a level, and a folder nested
    1,500 deep raised RecursionError where the grader looked for the notebook. As with ``os.walk``, the caller may
    prune the folder names it is given."""
    stack = [top]
    while stack:
        here = stack.pop()
        dirs, files = [], []
        try:
            with os.scandir(here) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        dirs.append(entry.name)
                    elif entry.is_file(follow_symlinks=False):
                        files.append(entry.name)
        except OSError:  # unreadable, gone, or a path longer than a path may be: nothing to grade there
            continue
        dirs.sort()
        yield here, dirs, sorted(files)
        stack += [here / d for d in reversed(dirs)]


def files_under(top: Path, limit: int = WALKED_ENTRIES) -> list[Path]:
    """The plain files under ``top`` (links not followed), sorted by path, as ``sorted(top.rglob("*"))`` filtered
    would be; after ``limit`` entries, no more are looked at."""
    found, seen = [], 0
    for here, dirs, files in walk(top):
        found += [here / f for f in files]
        seen += len(dirs) + len(files)
        if seen > limit:
            break
    return sorted(found)


def remove_tree(top: Path) -> None:
    """``shutil.rmtree(top, ignore_errors=True)`` for a folder a kernel laid out, which it cannot get past: Python
    3.11's rmtree recurses a level at a time (a folder nested 3,000 deep raised RecursionError, past
    ``ignore_errors``, and the leftover stopped every later run). Here one folder is open at a time and entered
    by name relative to it, down a stack of the names still to remove (a path longer than a path may be is no
    obstacle), back up by its ``..`` (never a link: folders are opened with ``O_NOFOLLOW``); a folder the kernel
    made unreadable is made readable first. What cannot be removed stays; nothing is raised."""
    try:
        if not stat.S_ISDIR(os.lstat(top).st_mode):
            top.unlink()
            return
        fd = _enter(str(top), None)
    except OSError:
        return
    names: list[str] = []  # from ``top`` down to the folder open as ``fd``
    pending = [_clear(fd)]  # a level each: the folders still to remove in it
    while True:
        if pending[-1]:
            name = pending[-1].pop()
            try:
                below = _enter(name, fd)
            except OSError:
                continue
            os.close(fd)
            fd = below
            names.append(name)
            pending.append(_clear(fd))
            continue
        pending.pop()
        if not names:
            break
        try:
            up = os.open("..", _FOLDER, dir_fd=fd)
        except OSError:
            break
        os.close(fd)
        fd = up
        with contextlib.suppress(OSError):
            os.rmdir(names.pop(), dir_fd=fd)
    os.close(fd)
    with contextlib.suppress(OSError):
        os.rmdir(top)


def _enter(name: str, parent: int | None) -> int:
    """The folder ``name`` (relative to ``parent``) opened, after making it the owner's to read where it was not."""
    try:
        return os.open(name, _FOLDER, dir_fd=parent)
    except PermissionError:
        os.chmod(name, 0o700, dir_fd=parent)
        return os.open(name, _FOLDER, dir_fd=parent)


def _clear(fd: int) -> list[str]:
    """Removes all but the folders in the folder open as ``fd`` (made writable where it was not); their names."""
    with contextlib.suppress(OSError):
        os.fchmod(fd, 0o700)
    folders = []
    try:
        with os.scandir(fd) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    folders.append(entry.name)
                else:
                    with contextlib.suppress(OSError):
                        os.unlink(entry.name, dir_fd=fd)
    except OSError:
        pass
    return folders
