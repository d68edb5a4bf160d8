"""Running a whole notebook in a fresh local kernel, for trusted notebooks and a learner's own.

(Students' submissions never come here: the grader runs them in jailed kernels, grading/execute.py.)
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from nbformat import NotebookNode


def run_notebook(nb: NotebookNode, cwd: Path, env: dict[str, str], timeout: int) -> None:
    """Execute ``nb`` in place, errors and all, with ``env`` added to the kernel's environment."""
    from nbclient import NotebookClient
    from traitlets.config import Config

    sockets = tempfile.mkdtemp(prefix="scaling-course-")
    try:
        # Unix sockets where there are some: no TCP port, and no warning about plain-text TCP.
        ipc = {"transport": "ipc", "ip": os.path.join(sockets, "k")} if os.name == "posix" else {}
        client = NotebookClient(nb, config=Config(KernelManager=ipc), kernel_name="python3", timeout=timeout,
                                allow_errors=True, resources={"metadata": {"path": str(cwd)}})
        # The kernel's environment goes to the kernel alone: the grader fills its compilation cache
        # in a thread while it starts workers, which must not inherit it.
        client.execute(env={**os.environ, **env})
    finally:
        shutil.rmtree(sockets, ignore_errors=True)
