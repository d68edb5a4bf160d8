"""Wall time of each chapter's reference (source) notebook, top to bottom, in a fresh kernel.

Target (docs/architecture.md): under 60 s per chapter on 2 CPU cores.
Run: python benchmarks/reference_notebook.py [CHAPTER ...]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from autograder.kernel import run_notebook  # noqa: E402


def run(chapter: str) -> float:
    path = ROOT / "source" / chapter / f"{chapter}.ipynb"
    nb = nbformat.read(path, as_version=4)
    t0 = time.perf_counter()
    run_notebook(nb, path.parent, {}, timeout=600)
    elapsed = time.perf_counter() - t0
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    if errors:
        raise SystemExit(f"{chapter}: the reference notebook raised {errors[0].ename}: {errors[0].evalue}")
    return elapsed


def main() -> None:
    chapters = sys.argv[1:] or sorted(p.name for p in (ROOT / "source").iterdir() if p.is_dir())
    for chapter in chapters:
        print(f"{chapter}: {run(chapter):.1f} s (kernel start included)")


if __name__ == "__main__":
    main()
