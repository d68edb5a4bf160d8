"""Where grading jobs run: in this process, in a local process pool (the default), or on a Dask
cluster. Each runner yields ``(job, result)`` as jobs finish, in any order; the caller (the single
writer) records each result at once, so a crash loses at most the jobs still running.

A local worker that dies (killed by the kernel's OOM killer, or by a signal from a misbehaving
kernel on a system without Landlock) breaks the whole pool; the jobs that were in flight are run
again, one at a time in a fresh pool, and a job that kills a worker twice is reported as failed.
Neither the pool nor a Dask cluster is waited on without a deadline: a job that runs past its
``seconds`` is abandoned and run once more, and one that stalls twice is reported as timed out.
"""

from __future__ import annotations

import contextlib
import os
import time
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
              on_crash: Callable[[Job], Result], seconds: float | None = None,
              on_stall: Callable[[Job], Result] | None = None) -> Iterator[tuple[Job, Result]]:
    """``seconds``: how long one job may run before the parent stops waiting for it. A job past it,
    or a pool whose workers can no longer hand results back (a kernel that sabotaged the pool's
    semaphores), is abandoned: its workers are killed, the jobs that were running are run again one
    at a time in a fresh pool, and a job that stalls twice gets ``on_stall``'s result."""
    pending = list(jobs)
    strikes: dict[int, int] = {}
    while pending:
        width = min(workers, len(pending))
        retry: list[Job] = []
        pool = ProcessPoolExecutor(max_workers=width, mp_context=get_context("spawn"), initializer=die_with_parent,
                                   initargs=(os.getpid(),))  # a kill -9 of the grader takes its workers
        futures = {pool.submit(work, job): job for job in pending}
        order = list(futures)  # the pool starts jobs in this order, ``width`` at a time
        started: dict[Any, float] = {}
        stalled: list[Any] = []
        try:
            while futures:
                now = time.monotonic()
                running = [f for f in order if f in futures][:width]
                for f in running:
                    started.setdefault(f, now)
                timeout = None if seconds is None else max(0.1, min(started[f] for f in running) + seconds - now)
                done, _ = wait(futures, timeout=timeout, return_when=FIRST_COMPLETED)
                if not done:
                    stalled = running
                    break
                for fut in done:
                    job = futures.pop(fut)
                    try:
                        yield job, fut.result()
                    except BrokenProcessPool:
                        strikes[id(job)] = strikes.get(id(job), 0) + 1
                        if strikes[id(job)] >= 2:
                            yield job, on_crash(job)
                        else:
                            retry.append(job)
        finally:
            if stalled or futures:
                _abandon(pool)
            else:
                pool.shutdown(wait=True)
        for fut in stalled:  # suspects: each runs again alone
            job = futures.pop(fut)
            strikes[id(job)] = strikes.get(id(job), 0) + 1
            if strikes[id(job)] >= 2:
                yield job, (on_stall or on_crash)(job)
            else:
                retry.append(job)
        retry += list(futures.values())  # queued behind the stalled ones, never started
        pending = retry
        workers = 1  # after a crash or a stall, run the suspects one at a time


def _abandon(pool: ProcessPoolExecutor) -> None:
    """Stop a pool that may never answer again, without waiting for it."""
    for proc in list((getattr(pool, "_processes", None) or {}).values()):
        with contextlib.suppress(Exception):
            proc.kill()
    pool.shutdown(wait=False, cancel_futures=True)


DASK_POLL_SECONDS = 1.0  # how often the scheduler is asked which jobs its workers hold
DASK_RESTART_SECONDS = 60  # for a nanny to replace the process of a worker whose job stalled


def run_dask(work: Callable[[Job], Result], jobs: Sequence[Job], scheduler: str,
             on_crash: Callable[[Job], Result], seconds: float | None = None,
             on_stall: Callable[[Job], Result] | None = None) -> Iterator[tuple[Job, Result]]:
    """The same jobs on a Dask cluster, with ``run_local``'s contract. Workers need this package
    installed and the course directory at the same path (a shared file system); see docs/grading.md.

    ``seconds``: how long one job may run once the scheduler has handed it to a worker. A job past it
    is cancelled and its worker restarted (Dask cannot stop a running thread; the worker's nanny
    replaces its process), and it runs once more; a job that stalls twice gets ``on_stall``'s result.
    The clock starts when the scheduler hands the job over, and a worker may hold one job in line
    behind the one it runs, so a job can be timed from a little before it starts: the second run
    keeps that from costing a grade. A job whose worker died more often than Dask retries, or that
    raised, gets ``on_crash``'s result."""
    from dask.distributed import Client, wait

    with Client(scheduler) as client:
        futures = {client.submit(work, job, pure=False): job for job in jobs}
        strikes: dict[int, int] = {}
        started: dict[Any, float] = {}
        while futures:
            try:
                done, _ = wait(list(futures), timeout=DASK_POLL_SECONDS, return_when="FIRST_COMPLETED")
            except TimeoutError:
                done = set()
            for fut in done:
                job = futures.pop(fut)
                started.pop(fut, None)
                yield job, (fut.result() if fut.status == "finished" else on_crash(job))
            if seconds is None:
                continue
            now = time.monotonic()
            held = {key: worker for worker, keys in client.processing().items() for key in keys}
            for fut in [f for f in futures if f.key in held]:
                started.setdefault(fut, now)
            stalled = [f for f, t in started.items() if now - t > seconds]
            if not stalled:
                continue
            client.cancel(stalled, force=True)
            workers = sorted({held[f.key] for f in stalled if f.key in held})
            with contextlib.suppress(Exception):  # no nanny, or already gone: their threads run on
                client.restart_workers(workers, timeout=DASK_RESTART_SECONDS, raise_for_error=False)
            for f in [f for f in started if f in stalled or held.get(f.key) in workers]:
                del started[f]  # the stalled, and those in line on a restarted worker: handed over again
            for fut in stalled:
                job = futures.pop(fut)
                strikes[id(job)] = strikes.get(id(job), 0) + 1
                if strikes[id(job)] >= 2:
                    yield job, (on_stall or on_crash)(job)
                else:
                    futures[client.submit(work, job, pure=False)] = job
