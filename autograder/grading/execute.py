"""Execute: run a sanitized notebook in a fresh, jailed kernel with time and output limits.

The kernel starts through ``jail`` (see there) in a private working directory, with no route to
the course directory. Limits: seconds per cell and per notebook, bytes of output per cell and per
notebook (more is dropped and reported, so 10 GB of prints cannot exhaust the grader's memory),
address space and CPU time of the kernel. A kernel that dies or hangs ends the run; the cells that
ran keep their outputs and the rest score what they recorded: nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbformat import NotebookNode


@dataclass(frozen=True)
class Limits:
    cell_seconds: int = 180  # JAX compiles for 8 simulated devices on 2 cores take seconds each
    notebook_seconds: int = 900
    output_bytes_per_cell: int = 1_000_000
    output_bytes_total: int = 5_000_000
    memory_bytes: int = 12 * 2**30  # address space: XLA reserves a lot of virtual memory up front
    startup_seconds: int = 60


@dataclass
class Execution:
    notebook: NotebookNode
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0
    isolation: str = ""


class JailedKernelManager(AsyncKernelManager):
    """Starts ipykernel through the jail. The kernel talks to us over Unix sockets (``ipc``), so it
    needs no TCP at all, and parallel kernels cannot race for the same port. Asynchronous, because
    nbclient's timeouts only work with an async client (a blocking one waits on output forever)."""

    jail_args: list[str] = []

    def format_kernel_cmd(self, extra_arguments: list[str] | None = None) -> list[str]:
        return [*self.jail_args, "--", *super().format_kernel_cmd(extra_arguments)]


class LimitedClient(NotebookClient):
    """An nbclient that drops output beyond a budget instead of holding it all in memory."""

    def __init__(self, *args: Any, limits: Limits, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.limits = limits
        self.total_bytes = 0
        self.cell_bytes: dict[int, int] = {}
        self.truncated: set[int] = set()
        self.timed_out: list[int] = []
        self.deadline = time.monotonic() + limits.notebook_seconds

    async def _async_handle_timeout(self, timeout: int, cell: NotebookNode | None = None) -> None | dict:
        if cell is not None:
            self.timed_out.append(self.nb.cells.index(cell) + 1)
        return await super()._async_handle_timeout(timeout, cell)

    def output(self, outs: list, msg: dict, display_id: str | None, cell_index: int) -> NotebookNode | None:
        size = len(json.dumps(msg.get("content", {}), default=str))
        used = self.cell_bytes.get(cell_index, 0) + size
        if used > self.limits.output_bytes_per_cell or self.total_bytes + size > self.limits.output_bytes_total:
            self.truncated.add(cell_index)
            return None
        self.cell_bytes[cell_index] = used
        self.total_bytes += size
        return super().output(outs, msg, display_id, cell_index)


def execute(nb: NotebookNode, workdir: Path, deny: list[Path], allow: list[Path], limits: Limits,
            log: Path) -> Execution:
    """Run ``nb`` in place (outputs are written into it); the kernel's own stderr goes to ``log``."""
    from .jail import jail_command, landlock_abi

    workdir.mkdir(parents=True, exist_ok=True)
    env = _kernel_env(workdir)
    # Unix socket paths are limited to ~107 bytes, so the sockets live in a short private folder.
    sockets = Path(tempfile.mkdtemp(prefix="sc-"))
    manager = JailedKernelManager(kernel_name="python3", transport="ipc", ip=str(sockets / "k"))
    manager.jail_args = jail_command(deny, allow, [workdir, sockets], limits.memory_bytes, limits.notebook_seconds * 2)
    manager.connection_file = str(workdir / "kernel.json")
    client = LimitedClient(nb, km=manager, limits=limits, timeout=limits.cell_seconds, allow_errors=True,
                           startup_timeout=limits.startup_seconds, interrupt_on_timeout=True,
                           resources={"metadata": {"path": str(workdir)}}, kernel_name="python3")
    client.timeout_func = lambda cell: max(1, min(limits.cell_seconds, int(client.deadline - time.monotonic())))
    problems: list[str] = []
    started = time.monotonic()
    log.parent.mkdir(parents=True, exist_ok=True)
    try:
        with log.open("w") as stderr:
            client.execute(cwd=str(workdir), env={**os.environ, **env}, stderr=stderr, stdout=stderr)
    except DeadKernelError:
        problems.append(f"the kernel died (memory limit, a crash, or exit()) at cell {_last_run(nb)}")
    except CellTimeoutError:
        problems.append(f"time limit reached at cell {_last_run(nb)}")
    except Exception as e:  # a kernel that will not start, a protocol error: grade what ran
        problems.append(f"execution stopped: {type(e).__name__}: {str(e)[:200]}")
    finally:
        _stop(manager)
        shutil.rmtree(sockets, ignore_errors=True)
    if time.monotonic() - started >= limits.notebook_seconds:
        problems.append(f"the notebook time limit ({limits.notebook_seconds} s) was reached")
    if client.timed_out:
        cells = ", ".join(map(str, client.timed_out))
        problems.append(f"time limit: cell {cells} ran past the limit and was interrupted (TimeoutError)")
    if client.truncated:
        problems.append(f"output over the limit was dropped in {len(client.truncated)} cells")
    abi = landlock_abi()
    return Execution(nb, problems, time.monotonic() - started,
                     f"landlock ABI {abi}" if abi else "resource limits only (no Landlock on this system)")


def _kernel_env(workdir: Path) -> dict[str, str]:
    home = str(workdir)
    return {"HOME": home, "TMPDIR": home, "IPYTHONDIR": str(workdir / ".ipython"),
            "MPLCONFIGDIR": str(workdir / ".matplotlib"), "JUPYTER_RUNTIME_DIR": home,
            "NBGRADER_EXECUTION": "autograde", "MPLBACKEND": "agg", "PYDEVD_DISABLE_FILE_VALIDATION": "1"}


def _last_run(nb: NotebookNode) -> int:
    ran = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and c.get("execution_count")]
    return (ran[-1] + 1) if ran else 1


def _stop(manager: AsyncKernelManager) -> None:
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
