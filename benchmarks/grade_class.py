"""Class grading throughput: plain sequential ``nbgrader autograde`` against ``scaling-course grade``,
on the same synthetic submissions, on this machine, in one run.

    python benchmarks/grade_class.py [--students 8 24] [--chapter ch01_rooflines] [--jobs N]

For each class size: the throughput ratio, where our time goes per notebook (kernel start, the
notebook's own cells, judging, feedback), the per-notebook overhead (everything but executing the
notebook's cells), and the peak memory of each run. Grading pays a start-up cost once (each
worker's kernel factory, judging service and program runner; the blank run that fills the
compilation cache), so small classes show a smaller ratio. Run it on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from autograder.demo import copy_course, reference_notebook, submit, with_slips  # noqa: E402


def make_class(course: Path, chapter: str, n: int) -> None:
    """n submissions cycling through: the reference, a partly wrong one, an untouched one, a broken file."""
    copy_course(ROOT, course, [chapter])
    release = nbformat.read(ROOT / "release" / chapter / f"{chapter}.ipynb", as_version=4)
    reference = reference_notebook(ROOT, chapter)
    kinds = [reference, with_slips(reference, chapter), release, b'{"cells": [ broken']
    for i in range(n):
        submit(course, f"student{i:03d}", chapter, kinds[i % len(kinds)])


class PeakMemory:
    """Largest memory of a process tree, sampled every 0.1 s, counted two ways. Summed resident sizes
    count a page shared by several processes once per process: our kernels, judges and runners are
    forked from one factory and share its imports, so that sum overstates what the machine needs. The
    proportional set size (PSS) charges a shared page in shares, so its sum is the tree's true use."""

    def __init__(self, pid: int):
        import psutil

        self.root, self.rss, self.pss, self._stop = psutil.Process(pid), 0, 0, threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        import psutil

        while not self._stop.is_set():
            rss = pss = 0
            try:
                for p in [self.root, *self.root.children(recursive=True)]:
                    with contextlib.suppress(psutil.Error):
                        info = p.memory_full_info()
                        rss, pss = rss + info.rss, pss + getattr(info, "pss", info.rss)
            except psutil.Error:
                pass
            self.rss, self.pss = max(self.rss, rss), max(self.pss, pss)
            time.sleep(0.1)

    def stop(self) -> tuple[float, float]:
        """(peak PSS, peak summed RSS) in GiB."""
        self._stop.set()
        self.thread.join()
        return self.pss / 2**30, self.rss / 2**30


def busy_seconds() -> float:
    """CPU-seconds the whole machine has spent busy (Linux): a run's share of the cores, since XLA's
    threads let even a 'sequential' tool use several."""
    try:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return float("nan")
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def timed(cmd: list[str], cwd: Path, must_succeed: bool = True) -> tuple[float, tuple[float, float], str, float]:
    """Wall seconds, peak memory (PSS and summed RSS, GiB), output, and the mean number of busy cores during the run."""
    started, busy = time.perf_counter(), busy_seconds()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    memory = PeakMemory(proc.pid)
    out, _ = proc.communicate()
    elapsed = time.perf_counter() - started
    peak = memory.stop()
    if proc.returncode != 0 and must_succeed:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{out[-3000:]}")
    return elapsed, peak, out, (busy_seconds() - busy) / elapsed


def run(n: int, chapter: str, jobs: int | None) -> float:
    """Grade one synthetic class both ways; print the figures and return the throughput ratio."""
    bin_dir = Path(sys.executable).parent
    with tempfile.TemporaryDirectory(prefix="grade-bench-") as tmp:
        course = Path(tmp)
        make_class(course, chapter, n)
        # Both tools need the assignment in the gradebook; nbgrader's own way, outside the timing.
        subprocess.run([bin_dir / "nbgrader", "generate_assignment", chapter, "--force"], cwd=course,
                       check=True, capture_output=True)
        # nbgrader exits non-zero when a submission is unreadable, after grading the others.
        t_nb, mem_nb, _, cores_nb = timed([str(bin_dir / "nbgrader"), "autograde", chapter, "--force"], course,
                                          must_succeed=False)
        # nbgrader writes feedback in a second command; ours comes with grading. Time both ways.
        t_fb, _, _, _ = timed([str(bin_dir / "nbgrader"), "generate_feedback", chapter, "--force"], course,
                              must_succeed=False)
        flags = ["--jobs", str(jobs)] if jobs else []
        t_us, mem_us, out, cores_us = timed([str(bin_dir / "scaling-course"), "grade", chapter, "--force", *flags],
                                            course)
        results = [json.loads(p.read_text()) for p in (course / ".scaling-course" / "results" / chapter)
                   .glob("*.json")]
    stages = {k: statistics.median(r["timings"][k] for r in results if r.get("timings")) for k in
              ("sanitize", "kernel_start", "cells", "between_cells", "collect_judge", "feedback", "total")}
    overhead = stages["total"] - stages["cells"]
    print(f"\n{n} submissions of {chapter}, {jobs or 'all'} jobs on {len(os.sched_getaffinity(0))} CPUs")
    for name, t, mem, cores in (("nbgrader autograde (sequential):", t_nb, mem_nb, cores_nb),
                                ("scaling-course grade:           ", t_us, mem_us, cores_us)):
        print(f"{name} {t:7.1f} s  {n / t * 60:6.1f} notebooks/min  peak {mem[0]:.2f} GiB"
              f" (summed RSS {mem[1]:.2f} GiB)  {cores:.2f} cores busy")
    for line in [line.strip() for line in out.splitlines() if "compilation cache" in line] or ["no word of it"]:
        print("  " + line)
    print(f"  notebooks that ran with the compilation cache: {sum(bool(r.get('compilation_cache')) for r in results)}"
          f" of {len(results)}")
    print(f"CPU-seconds per notebook: nbgrader {t_nb * cores_nb / n:.1f}, scaling-course {t_us * cores_us / n:.1f}")
    print(f"nbgrader generate_feedback (sequential): {t_fb:7.1f} s")
    print(f"throughput ratio: {t_nb / t_us:.2f}x against autograde alone, "
          f"{(t_nb + t_fb) / t_us:.2f}x against autograde + generate_feedback (both then have feedback)")
    print("median seconds per notebook, by stage: " + ", ".join(f"{k} {v:.2f}" for k, v in stages.items()))
    print(f"per-notebook overhead (everything but the notebook's own cells): {overhead:.2f} s")
    return t_nb / t_us


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--students", type=int, nargs="+", default=[8, 24],
                        help="class sizes: grading has a fixed start-up cost, so the ratio grows with the class")
    parser.add_argument("--chapter", default="ch01_rooflines")
    parser.add_argument("--jobs", type=int, default=None)
    args = parser.parse_args()
    # The environment's own commands (nbgrader runs alembic by name), where its python was called without activating it.
    os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    ratios = {n: run(n, args.chapter, args.jobs) for n in args.students}
    print("\nthroughput ratio by class size: " + ", ".join(f"{n} notebooks {r:.2f}x" for n, r in ratios.items()))


if __name__ == "__main__":
    main()
