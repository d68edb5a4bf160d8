"""Execute: run a sanitized notebook in a fresh, jailed kernel with time and output limits.

The kernel is forked by the class's factory (zygote.py: modules imported once, each kernel a fresh
process), given namespaces of its own where the system allows (namespaces.py: no other kernel's
sockets, shared memory or network in sight) and jailed (jail.py) in a private working directory with
no route to the course directory.
Limits: seconds per cell and per notebook, bytes of output per cell and per notebook (more is
dropped and reported, so 10 GB of prints cannot exhaust the grader's memory), answer records in test
cells apart from that output (a budget of their own, so a student whose plots filled the output budget
still has every answer recorded; bounded too, since a kernel can forge records), address space and
CPU time of the kernel, and bytes and files in its folders (a watchdog measures them; a kernel past the
quota is stopped). The notebook's time starts when its first cell is sent: starting the kernel is
the grader's work, bounded by ``startup_seconds`` of its own. Once that time is up no further cell
is sent; the running one is interrupted, and its kernel killed after ``KILL_GRACE_SECONDS``. A kernel
that dies or hangs ends the run; the cells that ran keep their outputs and the rest score what they
recorded: nothing. A kernel the grader kills is reported with the grader's reason, once; "the kernel
died" only where the grader did not kill it. What the kernel leaves in its folders (its
log) is read back as a plain file only, and only so many bytes of it (files.py).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import os
import signal
import stat
import tempfile
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.manager import AsyncKernelManager
from jupyter_client.provisioning.local_provisioner import LocalProvisioner
from nbclient import NotebookClient
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbformat import NotebookNode
from traitlets import Type

from ..kernel_data import write_public
from ..record import CHAPTER_DATA_ENV, GRADER_ENV, MAX_RECORD_BYTES, MIME, RECORD_DROPPED
from . import factory
from .cgroup import PREFIX as FENCE_PREFIX
from .cgroup import PidsFence
from .files import NotPlain, read_plain, remove_tree

# Past the notebook's time limit the running cell is interrupted (an interrupted cell ends in milliseconds); a kernel
# still busy this much later is killed, whatever it is doing.
KILL_GRACE_SECONDS = 5
MAX_PIDS = 2048  # processes and threads of one kernel (JAX alone starts dozens of threads)
LOG_BYTES = 2**20  # of the kernel's own log (its stderr), kept in .scaling-course/logs/
QUOTA_SECONDS = 0.2  # how often the watchdog measures a kernel's folders
DRAIN_SECONDS = 1.0  # for a stopped kernel's processes to end before those left are killed (and reported)
# Answer records have a budget of their own (``Limits.record_bytes_total``), in test cells only (the only cells
# records are read from), for a message that holds a record and its text and nothing else: no larger than the
# largest record the grader reads (record.read ignores larger ones) and a few a cell (a test cell records one
# answer; the last counts). A record past these bounds is output like any other, charged to the output budget.
RECORD_BYTES = MAX_RECORD_BYTES + 2**16
RECORDS_PER_CELL = 3
_RECORD_KEYS = {MIME, "text/plain"}


@dataclass(frozen=True)
class Limits:
    cell_seconds: int = 180  # JAX compiles for 8 simulated devices on 2 cores take seconds each
    notebook_seconds: int = 900
    output_bytes_per_cell: int = 1_000_000
    output_bytes_total: int = 5_000_000
    # Answer records in test cells, apart from the output above. A chapter's records take well under 1 MB (a
    # program's is its exported StableHLO): this bounds what forged ones can make the grader hold.
    record_bytes_total: int = 16_000_000
    memory_bytes: int = 12 * 2**30  # address space: XLA reserves a lot of virtual memory up front
    startup_seconds: int = 60
    # Everything the kernel writes into its folders (its work folder, on the course's file system, and its
    # socket folder, in the machine's temporary folder), together; the file-size limit (256 MiB) is per file.
    # An honest notebook writes a few MiB (matplotlib's and IPython's caches).
    work_bytes: int = 512 * 2**20
    work_files: int = 10_000
    # How long the parent waits for one submission's whole grading (kernel start, the notebook, judging,
    # feedback) before it gives up on it and the class goes on; 0: derived from the limits above.
    submission_seconds: int = 0


@dataclass
class Execution:
    notebook: NotebookNode
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0
    isolation: str = ""
    # False where the kernel failed before the notebook's first cell was sent to it: nothing of the student's ran,
    # so the failure is the grader's (a limit no kernel starts in, a broken factory), never a graded 0.
    started: bool = True
    # From the call to the first cell's clock: the kernel's start alone, apart from the time between and after cells
    # (a slow class is looked for where its time went).
    kernel_seconds: float = 0.0


class ForeignProcess:
    """The parts of ``subprocess.Popen`` jupyter_client uses, for a kernel forked by the zygote (not
    our child: the zygote reaps it, so a finished kernel's pid disappears)."""

    stdin = stdout = stderr = None

    def __init__(self, pid: int):
        self.pid, self.returncode = pid, None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                os.kill(self.pid, 0)
            except ProcessLookupError:
                self.returncode = -1
            except PermissionError:
                pass
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"kernel {self.pid} still running")
            time.sleep(0.05)
        return self.returncode or 0

    def send_signal(self, signum: int) -> None:
        os.kill(self.pid, signum)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


class ZygoteProvisioner(LocalProvisioner):
    """Launches a kernel by asking the class's factory to fork one (see zygote.py), and fences it
    (every process it starts is counted, and killed with it)."""

    request: dict[str, Any] = {}
    fence: PidsFence | None = None
    private = False  # whether the kernel got namespaces of its own

    async def launch_kernel(self, cmd: list[str], **kwargs: Any) -> dict:
        request = {**self.request, "kind": "kernel", "connection_file": self.parent.connection_file}
        got = factory.connect(request, factory.START_SECONDS, Path(self.request["home"]))
        if got is None:
            raise RuntimeError("the kernel could not be started (the kernel factory failed)")
        reply, sock = got
        sock.close()
        self.process = ForeignProcess(int(reply["pid"]))
        if self.fence is not None:
            # Before the first cell: until then the kernel runs only the factory's own code.
            self.fence.add(self.process.pid)
        self.private = bool(reply.get("private"))
        self.pid = self.pgid = self.process.pid  # the kernel leads its own session
        self.cwd = self.request["workdir"]
        return self.connection_info


class ReadyClient(AsyncKernelClient):
    """Ready as soon as the kernel answers and its IOPub stream is live. The stock client then waits
    for 0.2 s of silence on IOPub, once per notebook; nbclient ignores messages that answer other
    requests, so the wait buys nothing here."""

    async def _async_wait_for_ready(self, timeout: float | None = None) -> None:
        from queue import Empty

        deadline = time.monotonic() + (timeout if timeout is not None else 60.0)
        while time.monotonic() < deadline:
            msg_id = self.kernel_info()
            try:
                reply = await self._async_recv_reply(msg_id, timeout=1.0)
            except TimeoutError:
                if not await self._async_is_alive():
                    raise RuntimeError("Kernel died before replying to kernel_info") from None
                continue
            try:  # a message on IOPub: subscribed, so no output of the first cell can be missed
                await self._async_get_iopub_msg(timeout=0.2)
            except Empty:
                continue
            self._handle_kernel_info_reply(reply)
            return
        raise RuntimeError(f"Kernel didn't respond in {timeout} seconds")

    wait_for_ready = _async_wait_for_ready  # the public name is bound to the base class's function


class ZygoteKernelManager(AsyncKernelManager):
    """An async manager (nbclient's timeouts need one) whose kernels come from the zygote and talk
    over Unix sockets (``ipc``): no TCP at all, and parallel kernels cannot race for ports."""

    client_factory = Type(ReadyClient, klass=AsyncKernelClient)
    provisioner_setup: tuple[PidsFence, dict[str, Any]] | None = None

    async def _async_wait(self, pollinterval: float = 0.1) -> None:
        """Wait for a dying kernel, looking every 5 ms rather than every 0.1 s (once per notebook)."""
        await super()._async_wait(pollinterval=min(pollinterval, 0.005))

    async def _async_pre_start_kernel(self, **kw: Any) -> tuple[list[str], dict[str, Any]]:
        self.kernel_id = self.kernel_id or str(uuid.uuid4())
        if self.provisioner is None and self.provisioner_setup is not None:
            fence, request = self.provisioner_setup
            self.provisioner = ZygoteProvisioner(kernel_id=self.kernel_id, kernel_spec=self.kernel_spec, parent=self)
            self.provisioner.fence, self.provisioner.request = fence, request
        return await super()._async_pre_start_kernel(**kw)


class TimeUp(Exception):
    """The notebook's time ran out: no further cell is sent."""


def _not_here(*_: Any) -> None:
    raise RuntimeError("signal handlers are the grader's")


class LimitedClient(NotebookClient):
    """An nbclient that drops output beyond a budget instead of holding it all in memory. Answer records in
    test cells have a budget of their own, so that the student's own output never crowds them out."""

    def __init__(self, *args: Any, limits: Limits, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.limits = limits
        self.total_bytes = 0
        self.cell_bytes: dict[int, int] = {}
        self.truncated: set[int] = set()
        # Test cells by index (their metadata is the master's: sanitize.py), and what their records spent.
        self.test_cells = {i: gid for i, c in enumerate(self.nb.cells) if (gid := _test_cell_id(c))}
        self.record_bytes = 0
        self.record_count: dict[int, int] = {}
        self.records_dropped: set[int] = set()
        self.timed_out: list[int] = []
        # The notebook's time runs from its first cell (``start_clock``), not from the kernel's start.
        self.started: float | None = None
        self.deadline = float("inf")
        self.late = 0  # the cell (from 1) that was running or due when the notebook's time ran out
        self.kill: Callable[[str], None] = lambda why: None  # set once the kernel exists
        self.on_clock: Callable[[], None] = lambda: None  # called once the clock starts (the watchdog)
        self.sent = 0  # cells handed to the kernel: before the first, a failure is no student's doing
        self.current = 0  # the cell (from 1) being run
        self.stopped = 0  # the cell (from 1) whose kernel was killed for ignoring its interrupt

    @contextlib.asynccontextmanager
    async def async_setup_kernel(self, **kwargs: Any) -> AsyncIterator[None]:
        """nbclient's, without the two things it does for a program of its own: it takes SIGINT and SIGTERM
        where it runs in the main thread (the grader's own process, for one submission or ``--jobs 1``), so that a
        Ctrl-C stopped the student's kernel and the run went on to store that as their grade ("the kernel died"),
        or escaped as a traceback; and it registers an exit hook holding the client until the process ends. Here
        Ctrl-C stays the grader's, which stops the run and stores nothing for the notebook (``finally`` in
        ``execute`` stops the kernel)."""
        loop = asyncio.get_running_loop()
        loop.add_signal_handler = _not_here  # type: ignore[method-assign]  # nbclient passes over a RuntimeError
        try:
            async with super().async_setup_kernel(**kwargs):
                yield
        finally:
            del loop.add_signal_handler
            atexit.unregister(self._cleanup_kernel)

    def start_clock(self) -> None:
        self.started = time.monotonic()
        self.deadline = self.started + self.limits.notebook_seconds
        self.on_clock()

    def time_up(self) -> str:
        return (f"the notebook time limit ({self.limits.notebook_seconds} s) was reached at cell "
                f"{self.late or self.current}; later cells did not run")

    async def async_execute_cell(self, cell: NotebookNode, cell_index: int, *args: Any, **kw: Any) -> NotebookNode:
        if self.sent == 0:
            self.start_clock()
        elif time.monotonic() >= self.deadline:  # not one more cell, however short
            self.late = self.late or cell_index + 1
            raise TimeUp(self.time_up())
        self.sent += 1
        self.current = cell_index + 1
        return await super().async_execute_cell(cell, cell_index, *args, **kw)

    async def _async_handle_timeout(self, timeout: int, cell: NotebookNode | None = None) -> None | dict:
        """First timeout of a cell: interrupt the kernel (the cell gets a KeyboardInterrupt and the
        notebook goes on, unless its time is up). A cell that still does not finish ignores interrupts:
        kill the kernel. A timeout at the notebook's deadline is the notebook's, not the cell's."""
        index = self.nb.cells.index(cell) + 1 if cell is not None else 0
        if self.started is not None and time.monotonic() >= self.deadline - 0.05:
            self.late = self.late or index
        if index in self.timed_out or (self.late and self.late == index and self._interrupted):
            self.stopped = index
            self.kill(self.time_up() if self.late == index else
                      f"time limit: cell {index} ran past the limit ({self.limits.cell_seconds} s) and ignored the "
                      "interrupt: its kernel was stopped; later cells did not run")
            return None
        if self.late == index:
            self._interrupted = True
        else:
            self.timed_out.append(index)
        return await super()._async_handle_timeout(timeout, cell)

    _interrupted = False  # the cell running at the deadline was interrupted already

    def _spend(self, cells: dict[int, int], size: int) -> bool:
        """Count ``size`` bytes into each of ``cells`` (cell index -> how many outputs get them), or
        refuse them all, before anything is kept. Bytes are never given back (a cleared or replaced
        output still cost its bytes): a kernel cannot recycle the budget."""
        total = sum(cells.values()) * size
        over = [c for c, n in cells.items() if self.cell_bytes.get(c, 0) + n * size > self.limits.output_bytes_per_cell]
        if over or self.total_bytes + total > self.limits.output_bytes_total:
            self.truncated.update(cells)
            return False
        for c, n in cells.items():
            self.cell_bytes[c] = self.cell_bytes.get(c, 0) + n * size
        self.total_bytes += total
        return True

    def _record(self, msg: dict, size: int, cell_index: int) -> bool:
        """Whether ``msg`` is an answer record that the records' own budget takes (and count it there): a
        display of a record and its text only, in a test cell, within the bounds above."""
        content = msg.get("content")
        data = content.get("data") if isinstance(content, dict) else None
        if (cell_index not in self.test_cells or msg.get("msg_type") not in ("display_data", "execute_result")
                or not isinstance(data, dict) or MIME not in data or not set(data) <= _RECORD_KEYS):
            return False
        if (size > RECORD_BYTES or self.record_count.get(cell_index, 0) >= RECORDS_PER_CELL
                or self.record_bytes + size > self.limits.record_bytes_total):
            return False
        self.record_count[cell_index] = self.record_count.get(cell_index, 0) + 1
        self.record_bytes += size
        return True

    def output(self, outs: list, msg: dict, display_id: str | None, cell_index: int) -> NotebookNode | None:
        size = len(json.dumps(msg.get("content", {}), default=str))
        if not (self._record(msg, size, cell_index) or self._spend({cell_index: 1}, size)):
            data = (msg.get("content") or {}).get("data")
            if cell_index in self.test_cells and isinstance(data, dict) and MIME in data:
                self.records_dropped.add(cell_index)
            return None
        return super().output(outs, msg, display_id, cell_index)

    def _update_display_id(self, display_id: str, msg: dict) -> None:
        """An update rewrites every output that carries its display id, in any cell: it costs its size
        once for each of them."""
        shown = {c: len(ix) for c, ix in self._display_id_map.get(display_id, {}).items()}
        if shown and self._spend(shown, len(json.dumps(msg.get("content", {}), default=str))):
            super()._update_display_id(display_id, msg)

    def handle_comm_msg(self, outs: list, msg: dict, cell_index: int) -> None:
        """Widget messages are kept in the notebook's metadata: they count too, and so do their binary
        buffers, which are kept there base64-encoded (4 bytes for every 3)."""
        buffers = sum(4 * -(-memoryview(b).nbytes // 3) for b in msg.get("buffers") or [])
        if self._spend({cell_index: 1}, len(json.dumps(msg.get("content", {}), default=str)) + buffers):
            super().handle_comm_msg(outs, msg, cell_index)


def execute(nb: NotebookNode, workdir: Path, deny: list[Path], allow: list[Path], limits: Limits,
            log: Path, env: dict[str, str] | None = None, writable: list[Path] | None = None) -> Execution:
    """Run ``nb`` in place (outputs are written into it); the kernel's own stderr ends up in ``log``.
    ``workdir`` must lie inside the worker's work root (its parent). ``writable``: folders the
    kernel may write besides its own (only the trusted blank run that fills it gets one: the compilation cache)."""
    from .jail import landlock_abi, readable_roots

    workdir.mkdir(parents=True, exist_ok=True)
    # Unix socket paths are limited to ~107 bytes, so the sockets live in a short private folder.
    socket_root = _socket_root()
    sockets = Path(tempfile.mkdtemp(dir=socket_root))
    fence = PidsFence(f"{FENCE_PREFIX}{os.getpid()}-{sockets.name}", MAX_PIDS, memory=limits.memory_bytes)
    kernel_log = workdir / "kernel.log"
    manager = ZygoteKernelManager(kernel_name="python3", transport="ipc", ip=str(sockets / "k"))
    manager.provisioner_setup = (fence, {"home": str(workdir.parent),
        "workdir": str(workdir), "sockets": str(sockets), "log": str(kernel_log),
        "env": _kernel_env(workdir) | (env or {}), "writable": [str(p) for p in writable or []],
        "memory": limits.memory_bytes, "cpu": limits.notebook_seconds * 2,
        "roots": [str(p) for p in readable_roots(deny)], "allow": [str(p) for p in allow],
        "deny": [str(p) for p in deny], "fence": str(fence.path or "")})
    manager.connection_file = str(workdir / "kernel.json")
    client = LimitedClient(nb, km=manager, limits=limits, timeout=limits.cell_seconds, allow_errors=True,
                           startup_timeout=limits.startup_seconds, interrupt_on_timeout=True,
                           resources={"metadata": {"path": str(workdir)}}, kernel_name="python3")
    # What is left of the notebook's time, the cell's own limit at most (a fraction of a second at least, so that a
    # cell due just before the deadline is interrupted there rather than given a second past it).
    client.timeout_func = lambda cell: max(0.1, min(limits.cell_seconds, client.deadline - time.monotonic()))
    problems: list[str] = []
    started = time.monotonic()
    killed: list[str] = []  # the grader's reason for each kill it made: the first one is reported

    def kill(why: str) -> None:  # the kernel, and everything it started, even outside its session
        killed.append(why)
        process = getattr(manager.provisioner, "process", None)
        if process is not None:
            with contextlib.suppress(OSError):
                os.killpg(process.pid, signal.SIGKILL)
        fence.kill_all()

    client.kill = kill
    # From the first cell, as the notebook's time: the grader's own latency in starting the kernel is not the student's.
    watchdog = threading.Timer(limits.notebook_seconds + KILL_GRACE_SECONDS, lambda: kill(client.time_up()))
    watchdog.daemon = True
    client.on_clock = watchdog.start
    quota = Quota([workdir, sockets], limits, kill, pids=lambda: fence.pids() or _kernel_pid(manager))
    quota.start()
    ran = True  # False where the kernel failed before the first cell: see ``Execution.started``
    try:
        client.execute()
    except TimeUp:
        pass  # reported below, with the other reasons the grader stopped the notebook
    except DeadKernelError:
        ran = client.sent > 0
        if not ran:
            problems.append("the kernel could not be started: it died before the first cell")
        elif not killed:  # a kill of the grader's own is reported with its reason, below
            # The cell it was running: its first output may never have come, so that cell may show no run.
            problems.append(f"the kernel died (memory limit, a crash, or exit()) at cell {client.current}")
    except CellTimeoutError:
        problems.append(f"time limit reached at cell {_last_run(nb)}")
    except Exception as e:  # a kernel that will not start, a protocol error: grade what ran
        ran = client.sent > 0
        problems.append(f"execution stopped: {type(e).__name__}: {str(e)[:200]}" if ran
                        else f"the kernel could not be started ({type(e).__name__}: {str(e)[:200]})")
    finally:
        watchdog.cancel()
        quota.stop()
        _stop(manager)
        # Whatever the notebook started and left behind, even outside its session, dies with it. In a PID
        # namespace of its own, all of it is dying already, with the namespace's first process: let it go.
        _drain(fence, DRAIN_SECONDS)
        if fence.kill_all():
            problems.append("processes the notebook left running were stopped")
        fence.remove()
        remove_tree(sockets)
        keep_log(kernel_log, log)
        if quota.over is not None:
            # What it wrote goes at once, not when the submission is done: other kernels share the disk.
            remove_tree(workdir)
    # Why the grader stopped the notebook, once: the first kill's reason, else the deadline it stopped at; then the
    # quota, where that was found past only after the run.
    why = killed[0] if killed else client.time_up() if client.late else None
    problems += [why] if why else []
    if quota.over is not None and quota.over != why:
        problems.append(quota.over)
    client.timed_out = [c for c in client.timed_out if c not in (client.late, client.stopped)]  # said once, above
    if client.timed_out:
        cells = ", ".join(map(str, client.timed_out))
        problems.append(f"time limit: cell {cells} ran past the limit and was interrupted (TimeoutError)")
    if client.truncated:
        problems.append(dropped_note(client))
    for i in client.records_dropped:  # its question says why it has no answer (``record.why_no_record``)
        nb.cells[i].metadata[RECORD_DROPPED] = True
    private = getattr(manager.provisioner, "private", False)
    run = Execution(nb, problems, time.monotonic() - started, isolation(landlock_abi(), private))
    run.started = ran
    run.kernel_seconds = client.started - started if client.started is not None else run.seconds
    return run


def _test_cell_id(cell: Any) -> str | None:
    """The grade id of a test cell (a graded code cell that is no solution), the cells answers are read from."""
    meta = cell.get("metadata", {}).get("nbgrader", {}) if isinstance(cell.get("metadata"), dict) else {}
    gid = meta.get("grade_id") if isinstance(meta, dict) else None
    if cell.get("cell_type") == "code" and meta.get("grade") and not meta.get("solution") and isinstance(gid, str):
        return gid
    return None


def dropped_note(client: LimitedClient) -> str:
    """The problem note for output dropped over the limit, naming the test cells whose answer record went with it
    (their questions then say that nothing was recorded)."""
    note = f"output over the limit was dropped in {len(client.truncated)} cells"
    lost = [client.test_cells[i] for i in sorted(client.records_dropped)]
    if lost:
        note += (f"; the answer recorded in the test cell of {', '.join(lost[:10])}"
                 f"{f' and {len(lost) - 10} more' if len(lost) > 10 else ''} was dropped with it")
    return note


def _drain(fence: PidsFence, seconds: float) -> None:
    """Wait up to ``seconds`` for the processes in ``fence`` to end by themselves."""
    deadline = time.monotonic() + seconds
    while fence.pids() and time.monotonic() < deadline:
        time.sleep(0.01)


def keep_log(kernel_log: Path, log: Path) -> None:
    """The kernel's log, copied into the course's logs: the first ``LOG_BYTES`` of it, and only if it is a
    plain file (the kernel can replace it with anything, a link to a file it cannot read included)."""
    try:
        data, cut = read_plain(kernel_log, LOG_BYTES, one_link=True)
        if cut:
            data += f"\n[the rest of the kernel's log, past {LOG_BYTES // 2**20} MiB, was not kept]\n".encode()
    except FileNotFoundError:
        return
    except NotPlain as e:
        data = f"[the kernel's log was not kept: it was {e.strerror} (replaced by the notebook)]\n".encode()
    except OSError as e:
        data = f"[the kernel's log was not kept: {type(e).__name__}: {e.strerror}]\n".encode()
    with contextlib.suppress(OSError):
        log.parent.mkdir(parents=True, exist_ok=True)
        tmp = log.with_name(f".{log.name}.tmp")
        tmp.write_bytes(data)
        tmp.replace(log)


def folder_usage(folders: list[Path], max_entries: int) -> tuple[int, int, str | None]:
    """(bytes, entries, what could not be looked into) under ``folders``, links not followed (a link counts as an
    entry of its own size); counting stops past ``max_entries``. A file counts its size or the blocks it holds,
    whichever is more. A folder that is there but cannot be read (made unreadable, or below a path longer than a
    path may be) is named: what it holds cannot be counted, so the quota cannot hold there."""
    used = entries = 0
    hidden: str | None = None
    stack = [str(f) for f in folders]
    while stack and entries <= max_entries:
        path = stack.pop()
        try:
            with os.scandir(path) as it:
                for entry in it:
                    entries += 1
                    if entries > max_entries:
                        break
                    try:
                        info = entry.stat(follow_symlinks=False)
                    except FileNotFoundError:
                        continue
                    except OSError as e:
                        hidden = hidden or _reason(e)
                        continue
                    used += max(info.st_size, getattr(info, "st_blocks", 0) * 512)
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
        except (FileNotFoundError, NotADirectoryError):
            continue  # removed since it was listed
        except OSError as e:
            hidden = hidden or _reason(e)
    return used, entries, hidden


def _reason(e: OSError) -> str:
    return os.strerror(e.errno).lower() if e.errno else type(e).__name__


def held_deleted_bytes(pids: Iterable[int]) -> int:
    """Bytes of the files that ``pids`` hold open after deleting them: no walk of a folder sees them, yet they take
    the disk until the last of them closes (three such files, each under the file-size limit, held 750 MiB past
    a 512 MiB quota). Each file counts once, its size or its blocks, whichever is more."""
    seen: set[tuple[int, int]] = set()
    used = 0
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                info = os.stat(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if info.st_nlink or not stat.S_ISREG(info.st_mode) or (info.st_dev, info.st_ino) in seen:
                continue
            seen.add((info.st_dev, info.st_ino))
            used += max(info.st_size, info.st_blocks * 512)
    return used


class Quota(threading.Thread):
    """Measures a kernel's folders, and the deleted files its processes (``pids``) hold open, every
    ``QUOTA_SECONDS``, and calls ``kill`` once they hold more than ``limits.work_bytes`` or ``limits.work_files``,
    or hold a folder it cannot look into; ``over`` then says so, for the student."""

    def __init__(self, folders: list[Path], limits: Limits, kill: Callable[[str], None],
                 pids: Callable[[], Iterable[int]] = tuple):
        super().__init__(daemon=True)
        self.folders, self.limits, self.kill, self.pids = folders, limits, kill, pids
        self.over: str | None = None
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(QUOTA_SECONDS):
            if self.check():
                return

    def check(self) -> bool:
        used, entries, hidden = folder_usage(self.folders, self.limits.work_files)
        if hidden is None and used <= self.limits.work_bytes and entries <= self.limits.work_files:
            used += held_deleted_bytes(self.pids())
            if used <= self.limits.work_bytes:
                return False
        what = (f"a folder the grader cannot look into ({hidden}), where the limit cannot be kept" if hidden
                else f"more than {self.limits.work_bytes // 2**20} MiB" if used > self.limits.work_bytes
                else f"more than {self.limits.work_files} files")
        self.over = f"the notebook wrote {what} into its folders (the limit): its kernel was stopped"
        self.kill(self.over)
        return True

    def stop(self) -> None:
        self.done.set()
        self.join()
        if self.over is None:
            self.check()  # what was written since the last look


def _kernel_pid(manager: AsyncKernelManager) -> list[int]:
    """The kernel's own process, where no cgroup lists all of its processes."""
    process = getattr(manager.provisioner, "process", None)
    return [process.pid] if process is not None else []


def isolation(abi: int, private: bool) -> str:
    """What walls a kernel had, as the results and the grade report state it. Private namespaces include
    a PID namespace, which keeps signals in; without them, only Landlock ABI 6+ does."""
    walls = f"landlock ABI {abi}" if abi else "resource limits only (no Landlock on this system)"
    if private:
        return walls + ", private namespaces"
    gaps = "kernels graded at the same time could reach each other's sockets"
    if abi < 6:
        gaps += "; signals: not confined (Landlock ABI < 6): a kernel could kill the grader's processes"
    return walls + f" (no private namespaces: {gaps})"


def _kernel_env(workdir: Path) -> dict[str, str]:
    """A grading kernel's environment, and the public part of the chapters' data in its folder (``kernel_data``)."""
    home = str(workdir)
    return {"HOME": home, "TMPDIR": home, "IPYTHONDIR": str(workdir / ".ipython"),
            "MPLCONFIGDIR": str(workdir / ".matplotlib"), "JUPYTER_RUNTIME_DIR": home,
            "NBGRADER_EXECUTION": "autograde", GRADER_ENV: "1", "PYDEVD_DISABLE_FILE_VALIDATION": "1",
            CHAPTER_DATA_ENV: str(write_public(workdir / ".chapter-data"))}


_sockets: list[Path] = []


def _socket_root() -> Path:
    if not _sockets:
        _sockets.append(Path(tempfile.mkdtemp(prefix="sc-")))
    return _sockets[0]


def _last_run(nb: NotebookNode) -> int:
    ran = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and c.get("execution_count")]
    return (ran[-1] + 1) if ran else 1


def _stop(manager: ZygoteKernelManager) -> None:
    """Shut the kernel down, then kill its whole session (children the student started)."""
    from jupyter_core.utils import run_sync

    pgid = getattr(manager.provisioner, "pgid", None)
    try:
        if manager.has_kernel:
            run_sync(manager.shutdown_kernel)(now=True)
    except Exception:
        pass
    if pgid and pgid != os.getpgrp():
        with contextlib.suppress(OSError):
            os.killpg(pgid, signal.SIGKILL)
