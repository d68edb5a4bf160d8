"""Self-check latency: median time of ``course.check``'s verdict per question kind, after imports.

Target (docs/architecture.md): under 50 ms for a formula. Run: python benchmarks/selfcheck_latency.py
"""

from __future__ import annotations

import statistics
import time

import course.devices

course.devices.setup("cpu")

from autograder.questions import Choice, Formula, Number, load_chapter  # noqa: E402
from course.answers import verdict  # noqa: E402


def median_ms(qid: str, answer: object, repeats: int = 30) -> float:
    verdict(qid, answer)  # warm: loads the chapter's fingerprints once
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        verdict(qid, answer)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def main() -> None:
    chapter = load_chapter("ch01_rooflines")
    rows = {"formula": [], "number": [], "choice": []}
    for q in chapter.questions:
        kind = {Formula: "formula", Number: "number", Choice: "choice"}.get(type(q))
        if kind:
            right = median_ms(q.qid, q.reference)
            wrong = median_ms(q.qid, q.slips[0].answer)
            rows[kind].append((q.qid, right, wrong))
    print(f"{'question':<28} {'right (ms)':>10} {'wrong (ms)':>10}")
    for items in rows.values():
        for qid, right, wrong in items:
            print(f"{qid:<28} {right:>10.2f} {wrong:>10.2f}")
    for kind, items in rows.items():
        all_ms = [x for _, r, w in items for x in (r, w)]
        print(f"median {kind} self-check: {statistics.median(all_ms):.2f} ms over {len(items)} questions "
              f"(worst {max(all_ms):.2f} ms)")


if __name__ == "__main__":
    main()
