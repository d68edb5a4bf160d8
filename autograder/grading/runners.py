"""Where grading jobs run: in this process, in a local process pool (the default), or on a Dask
cluster. Each runner yields ``(job, result)`` as jobs finish, in any order; the caller (the single
writer) records each result at once, so a crash loses at most the jobs still running.

A local worker that dies (killed by the kernel's OOM killer, or by a signal from a misbehaving
kernel on a system without Landlock) breaks the whole pool; the jobs that were in flight are run
again, one at a time in a fresh pool, and a job that kills a worker twice is reported as failed.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import get_context
from typing import Any

from .jail import die_with_parent

Job = Any
Result = dict[str, Any]


def run_serial(work: Callable[[Job], Result], jobs: Sequence[Job]) -> Iterator[tuple[Job, Result]]:
    for job in jobs:
        yield job, work(job)


def run_local(work: Callable[[Job], Result], jobs: Sequence[Job], workers: int,
              on_crash: Callable[[Job], Result]) -> Iterator[tuple[Job, Result]]:
    pending = list(jobs)
    crashes: dict[int, int] = {}
    while pending:
        width = min(workers, len(pending))
        retry: list[Job] = []
        with ProcessPoolExecutor(max_workers=width, mp_context=get_context("spawn"), initializer=die_with_parent,
                                 initargs=(os.getpid(),)) as pool:  # a kill -9 of the grader takes its workers
            futures = {pool.submit(work, job): job for job in pending}
            while futures:
                done, _ = wait(futures, return_when=FIRST_COMPLETED)
                for fut in done:
                    job = futures.pop(fut)
                    try:
                        yield job, fut.result()
                    except BrokenProcessPool:
                        crashes[id(job)] = crashes.get(id(job), 0) + 1
                        if crashes[id(job)] >= 2:
                            yield job, on_crash(job)
                        else:
                            retry.append(job)
        pending = retry
        workers = 1  # after a crash, run the suspects one at a time


def run_dask(work: Callable[[Job], Result], jobs: Sequence[Job], scheduler: str) -> Iterator[tuple[Job, Result]]:
    """The same jobs on a Dask cluster. Workers need this package installed and the course directory
    at the same path (a shared file system); see docs/grading.md."""
    from dask.distributed import Client, as_completed

    with Client(scheduler) as client:
        futures = {client.submit(work, job, pure=False): job for job in jobs}
        for fut in as_completed(futures):
            yield futures[fut], fut.result()
