"""What copying earns: the share of a chapter's number points that a student gets by typing another's answers.

Two copiers, each judged by the grader on the student's own records (the course's variant plan, as
``scaling-course grade`` deals it):
- **classmate**: types the reference answers of a random classmate (another student id);
- **book**: types the book's answers (the references at the book's values).

A course with variants should make both small; what remains is the questions every student shares
(``tests/unvaried_numbers.py`` names them with why) and the classmates dealt the same values.
Run: python benchmarks/copying.py [CHAPTER ...] [--students N]
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

from autograder import fingerprint, kinds
from autograder.checks import judge
from autograder.questions import Chapter, chapter_names, load_chapter
from autograder.variant_report import student_answers

ROOT = Path(__file__).resolve().parents[1]


def _records(book: Chapter, chapter: str, student: str) -> Chapter:
    """The student's own records, dealt as ``scaling-course variant`` deals them."""
    return book.variant(student_answers(ROOT, chapter, student)["setting"])


def _earned(mine: Chapter, answers: dict[str, float]) -> tuple[float, float]:
    """Points the typed ``answers`` earn on ``mine``'s number questions, and the points there are."""
    got = total = 0.0
    for q in mine.questions:
        if q.kind != "number":
            continue
        total += q.points
        rec = kinds.encode(fingerprint.make(q), answers[q.qid])
        got += q.points * judge(q, rec).score
    return got, total


def measure(chapter: str, students: int, rng: random.Random) -> tuple[float, float]:
    book = load_chapter(chapter)
    ids = [f"student{i:03d}" for i in range(students)]
    records = {s: _records(book, chapter, s) for s in ids}
    refs = {s: {q.qid: float(q.reference) for q in r.questions if q.kind == "number"} for s, r in records.items()}
    book_refs = {q.qid: float(q.reference) for q in book.questions if q.kind == "number"}
    classmate = from_book = total = 0.0
    for s in ids:
        other = rng.choice([o for o in ids if o != s])
        got, points = _earned(records[s], refs[other])
        classmate, total = classmate + got, total + points
        from_book += _earned(records[s], book_refs)[0]
    return classmate / total, from_book / total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chapters", nargs="*", default=chapter_names())
    parser.add_argument("--students", type=int, default=40)
    args = parser.parse_args()
    rng = random.Random(0)
    print(f"{'chapter':<24} {'classmate':>10} {'book':>8}   (share of number points a copier earns)")
    for chapter in args.chapters:
        c, b = measure(chapter, args.students, rng)
        print(f"{chapter:<24} {c:>10.0%} {b:>8.0%}")


if __name__ == "__main__":
    main()
