"""Run recorded programs (``jax.export`` artefacts) in a jailed process and report what they did.

    python -m autograder.grading.jail --deny COURSE ... -- python -m autograder.grading.run_programs

The judge starts this through the jail, so the XLA programs of a notebook run where the reference
solutions, the source notebooks and the gradebook cannot be read, with memory and CPU limits. It
serves JSON lines: each request {"items": [{"qid", "spec", "blob", "seed"}]} gets one line,
qid -> report. The judge compares the reports with the references itself.
"""

from __future__ import annotations

import json
import os
import sys


def main() -> None:
    from course.devices import setup

    setup("cpu")
    from ..programs import report_to_json, run_exported
    from ..questions import ProgramSpec

    for line in sys.stdin:
        out = {}
        for item in json.loads(line)["items"]:
            report = run_exported(ProgramSpec.from_json(item["spec"]), item["blob"], int(item["seed"]))
            out[item["qid"]] = report_to_json(report)
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()
    os._exit(0)  # skip JAX's teardown


if __name__ == "__main__":
    main()
