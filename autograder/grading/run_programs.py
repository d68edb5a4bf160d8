"""Run recorded programs (``jax.export`` artefacts) in a jailed process and report what they did.

    python -m autograder.grading.jail --deny COURSE ... -- python -m autograder.grading.run_programs

The judge starts this through the jail, so the XLA programs of a notebook run where the reference
solutions, the source notebooks and the gradebook cannot be read, with memory and CPU limits. Input
on stdin: {"items": [{"qid", "spec", "blob", "seed"}]}; output on stdout: one JSON line,
qid -> report. The judge compares the reports with the references itself.
"""

from __future__ import annotations

import json
import os
import sys


def main() -> None:
    request = json.loads(sys.stdin.read())
    from course.devices import setup

    setup("cpu")
    from ..programs import report_to_json, run_exported
    from ..questions import ProgramSpec

    out = {}
    for item in request["items"]:
        report = run_exported(ProgramSpec.from_json(item["spec"]), item["blob"], int(item["seed"]))
        out[item["qid"]] = report_to_json(report)
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
    os._exit(0)  # skip JAX's teardown


if __name__ == "__main__":
    main()
