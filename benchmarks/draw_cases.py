"""What drawing a student's function cases costs the grader, with and without ``verdict.passing_only``.

Each submission's function questions are graded on cases drawn from its seed; the draw tries every slip and the
reference with each input written in, and keeps a set where none of them passes more than half. It needs only
whether each passes: inside ``passing_only`` a wrong answer is refused without its diagnosis (an array's order, a
factor of each element). Both runs draw the same cases (tests/engine/test_passing_only.py); this prints the seconds
of each and their ratio, measured in one run.
Run: python benchmarks/draw_cases.py [CHAPTER ...] [--students N]
"""

from __future__ import annotations

import argparse
import contextlib
import time

from shortcuts import print_ratio, with_and_without  # benchmarks/shortcuts.py

from autograder.kinds import function
from autograder.questions import Function, chapter_names, load_chapter


def _draw_all(questions: list[Function], students: int) -> tuple[float, list]:
    function._DRAWN.clear()
    start = time.perf_counter()
    drawn = [function.drawn_probes(q, f"bench-{s}") for s in range(students) for q in questions]
    return time.perf_counter() - start, drawn


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chapters", nargs="*", default=["ch01_rooflines"], help="chapters (default: ch01_rooflines)")
    parser.add_argument("--students", type=int, default=3)
    args = parser.parse_args()
    chapters = chapter_names() if args.chapters == ["all"] else args.chapters
    questions = [q for c in chapters for q in load_chapter(c).questions if isinstance(q, Function)]
    _draw_all(questions, 1)  # imports, the references' own caches
    full, quick = with_and_without(lambda: _draw_all(questions, args.students),
                                   [(function, "passing_only", contextlib.nullcontext)])  # every wrong answer diagnosed
    print_ratio(f"{len(questions)} function questions x {args.students} students ({', '.join(chapters)})",
                "diagnosing every wrong answer", full, quick)


if __name__ == "__main__":
    main()
