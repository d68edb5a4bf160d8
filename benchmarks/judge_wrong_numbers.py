"""What judging wrong number answers costs, in both judges, with and without the shortcuts that leave verdicts alone.

A wrong number is tried against some fifty factors of its reference (is it twice it? a thousandth?), each a question
to the oracle's log buckets, in the grader and in the student's self-check. Two shortcuts keep each verdict as it was
(tests/engine/test_bucket_index.py): the factors are placed in one pass (``targets._Oracle.first_near``) rather than
one ``near`` call each, credit is decided from the interval's ends rounded to doubles wherever they settle it
(``targets.Interval.__contains__``), and the self-check hashes a bucket's block from its target's hash kept
(``targets._block_digest``). This judges wrong values of every number question of the chosen chapters (a
factor off, a little off, far off) both ways, checks that the verdicts are the same, and prints the seconds of each
and their ratio, measured in one run.
Run: python benchmarks/judge_wrong_numbers.py [CHAPTER ... | all]
"""

from __future__ import annotations

import time
from typing import Any

from shortcuts import chosen_chapters, print_ratio, with_and_without  # benchmarks/shortcuts.py

from autograder import fingerprint, kinds
from autograder.kinds import targets as tg
from autograder.questions import Number, load_chapter

OFF = (2, 0.5, 8, 1 / 3, 1000, 1.3, 0.9, 0.07, 37, -1)


def _one_by_one(self: Any, key: str, i: int, values: list) -> int | None:
    return next((j for j, v in enumerate(values) if self.near(key, i, v) is True), None)


def _in_30_digits(self: tg.Interval, v: Any) -> bool:
    return v is not None and self.lo <= v <= self.hi


def _hashed_whole(tag: str, key: str, i: int, sign: str, block: int) -> str:
    return tg.digest(tag, key, i, sign, block)


def _judge_all(answers: list) -> tuple[float, list]:
    start = time.perf_counter()
    verdicts = [(kinds.judge(q, v), kinds.selfcheck(fp, q.qid, v)) for q, fp, v in answers]
    return time.perf_counter() - start, verdicts


def main() -> None:
    chapters = chosen_chapters(__doc__, ["ch01_rooflines", "ch05_training"])
    questions = [q for c in chapters for q in load_chapter(c).questions if isinstance(q, Number)]
    answers = [(q, fingerprint.make(q), float(q.reference) * k) for q in questions for k in OFF]
    _judge_all(answers[:50])  # imports and caches
    full, quick = with_and_without(lambda: _judge_all(answers), [(tg._Oracle, "first_near", _one_by_one),
                                                                 (tg.Interval, "__contains__", _in_30_digits),
                                                                 (tg, "_block_digest", _hashed_whole)])
    print_ratio(f"{len(answers)} wrong answers, each judged by the grader and the self-check ({len(questions)} "
                f"number questions: {', '.join(chapters)})", "without the shortcuts", full, quick)


if __name__ == "__main__":
    main()
