"""What a kernel writes into its folders is bounded and removed, however it is laid out. The quota measured by a
walk that skipped what it could not read (a path past the longest a path may be, a folder the kernel made
unreadable) and saw nothing of a file the kernel deleted but held open: each wrote past 512 MiB unseen. And the
removal recursed a level at a time: a folder nested a few thousand deep raised RecursionError past
``ignore_errors``, the submission was a grader error, and the leftover stopped every later run of any assignment."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from autograder.grading.execute import Limits, Quota
from autograder.grading.files import remove_tree
from autograder.grading.pipeline import clear_dead_work

LIMITS = Limits(work_bytes=64 * 2**20, work_files=10_000)
DEAD_PID = 2**22 + 12_345  # above pid_max's default range: no process has it


@pytest.fixture
def tmp_path(tmp_path):
    """pytest's own folder, emptied by the grader's removal once the test is done: pytest's clean-up of earlier
    runs' folders (``shutil.rmtree``) would raise RecursionError on the nesting these tests make."""
    yield tmp_path
    remove_tree(tmp_path)


def _nest(top, depth: int, name: str = "n") -> str:
    """``depth`` folders one inside the other below ``top`` (made by relative steps, as a kernel would), a file at the
    bottom; returns the bottom's path relative to ``top``."""
    here = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir(name, dir_fd=here)
            below = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=here)
            os.close(here)
            here = below
        fd = os.open("bottom", os.O_WRONLY | os.O_CREAT, dir_fd=here)
        os.write(fd, os.urandom(4096))
        os.close(fd)
    finally:
        os.close(here)
    return "/".join([name] * depth)


def _sparse(fd_dir: int, name: str, size: int) -> None:
    fd = os.open(name, os.O_WRONLY | os.O_CREAT, dir_fd=fd_dir)
    os.ftruncate(fd, size)
    os.close(fd)


def test_a_folder_nested_thousands_deep_is_removed_and_stops_no_later_run(tmp_path):
    work = tmp_path / "work"
    stale = work / f"deep-{DEAD_PID}"
    stale.mkdir(parents=True)
    _nest(stale, 3000)
    clear_dead_work(work, stale_seconds=0)  # raised RecursionError, at every later run
    assert not stale.exists()


@pytest.mark.parametrize("layout", ["deep", "long names", "locked folder", "locked file folder"])
def test_remove_tree_removes_whatever_a_kernel_laid_out(tmp_path, layout):
    top = tmp_path / "kernel"
    top.mkdir()
    if layout == "deep":
        _nest(top, 2500)
    elif layout == "long names":
        _nest(top, 24, "d" * 250)  # 6,000 characters: past the longest path a path may be
    else:
        (top / "locked" / "inner").mkdir(parents=True)
        (top / "locked" / "inner" / "f").write_bytes(os.urandom(64))
        (top / "locked" / "inner").chmod(0o300 if layout == "locked folder" else 0o500)
        (top / "locked").chmod(0o000)
    remove_tree(top)
    assert not top.exists()


def test_remove_tree_takes_a_file_or_nothing(tmp_path):
    (tmp_path / "f").write_bytes(os.urandom(8))
    remove_tree(tmp_path / "f")
    remove_tree(tmp_path / "never")
    assert not (tmp_path / "f").exists()


def _over(folders, pids=()) -> str | None:
    said: list[str] = []
    quota = Quota(folders, LIMITS, said.append, pids=lambda: list(pids))
    quota.check()
    return said[0] if said else None


def test_bytes_below_a_path_too_long_to_name_count(tmp_path):
    bottom = _nest(tmp_path, 24, "d" * 250)
    here = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    for part in bottom.split("/"):
        below = os.open(part, os.O_RDONLY | os.O_DIRECTORY, dir_fd=here)
        os.close(here)
        here = below
    _sparse(here, "blob", 2 * LIMITS.work_bytes)
    os.close(here)
    assert _over([tmp_path]) is not None


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a folder whatever its mode")
def test_bytes_in_a_folder_made_unreadable_count(tmp_path):
    (tmp_path / "hidden").mkdir()
    _sparse(os.open(tmp_path / "hidden", os.O_RDONLY | os.O_DIRECTORY), "blob", 2 * LIMITS.work_bytes)
    (tmp_path / "hidden").chmod(0o300)
    try:
        assert _over([tmp_path]) is not None
    finally:
        (tmp_path / "hidden").chmod(0o700)


def test_a_deleted_file_a_kernel_holds_open_counts(tmp_path):
    hold = (f"import os, sys, time\nfd = os.open({str(tmp_path / 'blob')!r}, os.O_WRONLY | os.O_CREAT)\n"
            f"os.ftruncate(fd, {2 * LIMITS.work_bytes})\nos.unlink({str(tmp_path / 'blob')!r})\n"
            "print('held', flush=True)\ntime.sleep(60)\n")
    kernel = subprocess.Popen([sys.executable, "-c", hold], stdout=subprocess.PIPE, text=True)
    try:
        assert kernel.stdout.readline().strip() == "held"
        assert not list(tmp_path.iterdir())  # nothing to see in the folder
        said = _over([tmp_path], [kernel.pid])
        assert said is not None and "MiB" in said, said
    finally:
        kernel.kill()
        kernel.wait()


def test_an_honest_folder_is_not_over(tmp_path):
    (tmp_path / ".matplotlib").mkdir()
    (tmp_path / ".matplotlib" / "fontlist.json").write_bytes(os.urandom(100_000))
    kernel = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        time.sleep(0.1)
        assert _over([tmp_path], [kernel.pid]) is None
    finally:
        kernel.kill()
        kernel.wait()
