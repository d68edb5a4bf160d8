"""Where grading jobs run: in this process, in a local process pool (the default), or on a Dask
cluster. Each runner yields ``(job, result)`` as jobs finish, in any order; the caller (the single
writer) records each result at once, so a crash loses at most the jobs still running.

A local worker that dies (killed by the kernel's OOM killer, say) breaks the whole pool; the jobs
that were running are run again, each alone in a fresh pool, the jobs that had not started are
started again as they were, and the class then goes on at full width. A job that kills its worker
while running alone, for the second time, is reported as failed: no other job is. Neither the pool
nor a Dask cluster is waited on without a deadline: a job that runs past its ``seconds`` is
abandoned and run once more, and one that stalls twice is reported as timed out.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
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
    semaphores), is abandoned with its workers.

    Only the jobs that were running when the pool broke or stalled are suspects: each gets a strike
    and is run again alone, in a pool of its own width, before the rest of the class goes on at full
    width. Jobs that had not started get no strike. A job that fails while running alone is the
    culprit: at its second strike it gets ``on_crash``'s result (``on_stall``'s if it stalled), so a
    job is failed only after failing with nothing beside it."""
    todo = list(jobs)
    strikes: dict[int, int] = {}
    while todo:
        suspects = [job for job in todo if strikes.get(id(job))]
        batch, width = (suspects, 1) if suspects else (todo, min(workers, len(todo)))
        finished: set[int] = set()
        for job, result in (rounds := _Round(work, batch, width, seconds)):
            finished.add(id(job))
            yield job, result
        for job in rounds.suspects:
            strikes[id(job)] = strikes.get(id(job), 0) + 1
            if strikes[id(job)] >= 2:
                finished.add(id(job))
                yield job, ((on_stall or on_crash) if rounds.stalled else on_crash)(job)
        todo = [job for job in todo if id(job) not in finished]


CRASH_GRACE_SECONDS = 5.0  # for a broken pool to fail the jobs still in flight


class _Round:
    """One pool of ``width`` workers over ``batch``, at most ``width`` jobs submitted at a time, so the
    jobs in flight are exactly the jobs running. Iterating yields each result as it comes; once the pool
    breaks or stalls, it stops, with the jobs that were running in ``suspects`` (``stalled``: which of
    the two) and those not yet started left alone."""

    def __init__(self, work: Callable[[Job], Result], batch: Sequence[Job], width: int, seconds: float | None):
        self.work, self.batch, self.width, self.seconds = work, batch, width, seconds
        self.suspects: list[Job] = []
        self.stalled = False

    def __iter__(self) -> Iterator[tuple[Job, Result]]:
        # A kill -9 of the grader takes its workers.
        pool = ProcessPoolExecutor(max_workers=self.width, mp_context=get_context("spawn"),
                                   initializer=die_with_parent, initargs=(os.getpid(),))
        queue = list(reversed(self.batch))
        running: dict[Future, tuple[Job, float]] = {}
        results: list[tuple[Job, Result]] = []
        broken = False
        try:
            while True:
                while queue and len(running) < self.width and not broken:
                    job = queue.pop()
                    try:
                        running[pool.submit(self.work, job)] = (job, time.monotonic())
                    except BrokenProcessPool:  # a worker died between two results
                        queue.append(job)
                        broken = True
                yield from results  # after the freed workers were given their next jobs
                results = []
                if broken:  # each job still in flight fails with the pool, or hands back its result
                    done, _ = wait(running, timeout=CRASH_GRACE_SECONDS)
                    for fut, (job, _) in list(running.items()):
                        if fut in done and not isinstance(fut.exception(), BrokenProcessPool):
                            results.append((job, fut.result()))
                        else:
                            self.suspects.append(job)
                    running.clear()
                    yield from results
                    return
                if not running:
                    return
                first = min(t for _, t in running.values())
                timeout = None if self.seconds is None else max(0.1, first + self.seconds - time.monotonic())
                done, _ = wait(running, timeout=timeout, return_when=FIRST_COMPLETED)
                if not done:
                    self.stalled = True
                    self.suspects = [job for job, _ in running.values()]
                    return
                for fut in done:
                    job, _ = running.pop(fut)
                    try:
                        results.append((job, fut.result()))
                    except BrokenProcessPool:
                        self.suspects.append(job)
                        broken = True
        finally:
            if broken or self.stalled or running:
                _abandon(pool)
            else:
                pool.shutdown(wait=True)


def _abandon(pool: ProcessPoolExecutor) -> None:
    """Stop a pool that may never answer again, without waiting for it.

    A worker stopped halfway through writing its result leaves the pool's reading thread waiting for the
    rest of the message, and Python waits for that thread before it exits: the grader would never return.
    Once the workers are dead, the pool's own copy of the pipe's writing end is the last one, and closing it
    ends that read (the pool then counts itself broken and its thread ends)."""
    procs = list((getattr(pool, "_processes", None) or {}).values())
    for proc in procs:
        with contextlib.suppress(Exception):
            proc.kill()
    for proc in procs:
        with contextlib.suppress(Exception):
            proc.join(ABANDON_SECONDS)
    with contextlib.suppress(Exception):
        pool._result_queue._writer.close()  # type: ignore[attr-defined]
    with contextlib.suppress(Exception):  # jobs queued for workers that are gone are never read: never wait to send
        pool._call_queue.cancel_join_thread()  # type: ignore[attr-defined]
    pool.shutdown(wait=False, cancel_futures=True)


ABANDON_SECONDS = 5.0  # for a killed worker to be gone (a SIGKILL takes milliseconds, a loaded machine longer)


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
