"""What keeping ``grades.csv`` current costs a run, late in a term: one write of the whole table (a row per student
and assignment, a column per question of every assignment) against a class graded one result at a time.

    python benchmarks/grades_table.py [--students 300] [--assignments 1 6 12] [--questions 50] [--seconds 2]

For each size: the milliseconds of one write, how many writes a run of ``--students`` results makes (one result
every ``--seconds``, as two workers grade a chapter), and the share of the run they take, against writing after
every result as the grader did before.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from autograder.grading import STATE, results  # noqa: E402
from autograder.grading.pipeline import Assignment  # noqa: E402


def _course(folder: Path, students: int, assignments: int, questions: int) -> Assignment:
    for k in range(assignments):
        name = f"ch{k + 1:02d}_x"
        qids = [f"ch{k + 1:02d}-q{i}" for i in range(questions)]
        out = folder / STATE / "results" / name
        out.mkdir(parents=True)
        for s in range(students):
            qs = {q: {"points": 1.0, "score": float((s + i) % 2), "status": "correct"} for i, q in enumerate(qids)}
            (out / f"s{s:03d}.json").write_text(json.dumps(
                {"student": f"s{s:03d}", "assignment": name, "questions": qs, "score": 1.0, "max_score": 1.0}))
    return Assignment(folder, name, name, folder / "m.ipynb", {}, dict.fromkeys(qids, 1.0))


def _run(a: Assignment, students: int, seconds: float) -> tuple[float, int, float]:
    """(seconds of one write, writes a run of ``students`` results made, seconds the run spent in them)."""
    table, one = results.Grades(a), time.perf_counter()
    table.write(final=True)
    one = time.perf_counter() - one
    # The run's clock: the real one, plus ``seconds`` of grading between results.
    offset, real, write_csv, made = [0.0], time.monotonic, results.write_csv, []
    results.time.monotonic = lambda: real() + offset[0]
    results.write_csv = lambda *args: made.append(1) or write_csv(*args)
    table, start = results.Grades(a), time.perf_counter()  # a new run
    try:
        for _ in range(students):
            table.write()
            offset[0] += seconds
    finally:
        results.time.monotonic, results.write_csv = real, write_csv
    return one, len(made), time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--students", type=int, default=300)
    ap.add_argument("--assignments", type=int, nargs="+", default=[1, 6, 12])
    ap.add_argument("--questions", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=2.0, help="seconds between results in the simulated run")
    args = ap.parse_args()
    print(f"{'assignments':>11}  {'ms a write':>10}  {'writes':>6}  {'share of run':>12}  {'before':>8}")
    for n in args.assignments:
        with tempfile.TemporaryDirectory() as tmp:
            a = _course(Path(tmp), args.students, n, args.questions)
            one, writes, spent = _run(a, args.students, args.seconds)
            run = args.students * args.seconds + spent
            before = args.students * one / (args.students * args.seconds + args.students * one)
            print(f"{n:>11}  {one * 1000:>10.0f}  {writes:>6}  {spent / run:>12.1%}  {before:>8.1%}")


if __name__ == "__main__":
    main()
