"""What judging a wrong function answer costs the grader, with and without the shortcuts that leave verdicts alone.

A wrong array answer is diagnosed element by element, and where several elements are wrong each is tried at every
other place (is it a reordering?); every number judge first places its accepted interval in log buckets. Two
shortcuts keep each verdict as it was (tests/engine/test_bucket_index.py, the suite's verdict tests): the reordering
search asks only whether a value passes (``verdict.passing_only``), and an interval is placed from doubles where a
double is sure (``targets._locate_double``). This judges every slip of the chosen chapters' function questions on
its public cases both ways, checks that the verdicts are the same, and prints the seconds of each and their ratio,
measured in one run.
Run: python benchmarks/judge_wrong_answers.py [CHAPTER ... | all]
"""

from __future__ import annotations

import contextlib
import time

from shortcuts import chosen_chapters, print_ratio, with_and_without  # benchmarks/shortcuts.py

from autograder import fingerprint, kinds
from autograder.kinds import function
from autograder.kinds import targets as tg
from autograder.questions import Function, load_chapter


def recorded(q: Function, answer: object) -> object:
    """What ``grade(qid, answer)`` records for ``answer`` in a student's notebook."""
    return kinds.encode(fingerprint.make(q), answer)


def _judge_all(answers: list) -> tuple[float, list]:
    start = time.perf_counter()
    verdicts = [kinds.judge(q, record) for q, record in answers]
    return time.perf_counter() - start, verdicts


def main() -> None:
    chapters = chosen_chapters(__doc__, ["ch01_rooflines", "ch04_transformers"])
    questions = [q for c in chapters for q in load_chapter(c).questions if isinstance(q, Function)]
    answers = [(q, recorded(q, s.answer)) for q in questions for s in q.slips]
    _judge_all(answers)  # imports and caches
    full, quick = with_and_without(lambda: _judge_all(answers), [(function, "passing_only", contextlib.nullcontext),
                                                                 (tg, "_locate_double", lambda _iv: None)])
    print_ratio(f"{len(answers)} wrong answers (the slips of {len(questions)} function questions: "
                f"{', '.join(chapters)})", "without the shortcuts", full, quick)


if __name__ == "__main__":
    main()
