"""Run recorded programs (``jax.export`` artefacts) in a jailed process and report what they did.

The judge asks the class's factory (zygote.py) for this process, which jails itself as a kernel does
(private namespaces where the system has them, Landlock, memory and CPU limits), so the XLA programs
of a notebook run where the reference solutions, the source notebooks and the gradebook cannot be
read. It
serves JSON lines: each request {"items": [{"qid", "spec", "blob", "seed"}]} gets one line,
qid -> report (``programs.run_items``). The judge compares the reports with the references itself
(``kinds.program.judge_all``).
"""

from __future__ import annotations

import json
import os
import sys


def main() -> None:
    from course.devices import mesh, setup

    setup("cpu")
    from ..programs import run_items

    for line in sys.stdin:
        sys.stdout.write(json.dumps(run_items(json.loads(line)["items"], make_mesh=mesh)) + "\n")
        sys.stdout.flush()
    os._exit(0)  # skip JAX's teardown
