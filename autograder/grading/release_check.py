"""The records the grader judges with are the ones the students' self-check was released from.

The grader builds its references from ``solutions/`` (the judge imports the chapter), while each notebook's points,
and each student's self-check, come from the released data (``course/fingerprints/<chapter>.json``, which
``scaling-course release`` writes from the records). An erratum typed into ``solutions/`` and graded without a
release was applied by half: a new reference regraded the class, a new number of points did not (the maximum stayed
the notebook's), and the students' self-check still judged the old reference, so that it and the grade disagreed.
Before a class is graded, the records are turned into self-check data again and compared with the released data;
where they differ the run refuses, naming each question and how, and says to run the release.

It imports the chapter (and so JAX), which the grading parent never does: it runs in a process of its own
(``python -m autograder.grading.release_check``), 2 to 4 s, once for each answers key (``results.answers_key``: a
hash of the records in use, the source notebook, and both packages, the released data among the course package's
files). The outcome depends on that key alone (the course folder's variant plan is the released one, or
``pipeline._released_plan`` refused it), so an agreement is kept by key in the user's cache folder
(``$XDG_CACHE_HOME/scaling-course/released/``), shared by every course folder of the installation; where it cannot
be written, the check runs each time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

SECONDS = 300  # the chapter's import and its self-check data, on a loaded machine


class ReleaseDiffers(Exception):
    """The records changed since the release: the run must not grade."""


def differences(chapter: str, course_dir: Path) -> list[str]:
    """A line per question whose self-check data the records now give is not what was released (in this process:
    it imports the chapter)."""
    from ..fingerprint import make_chapter
    from ..questions import load_chapter
    from ..release import released_questions, variant_plan

    shipped = released_questions(chapter)
    if shipped is None:
        return []
    now = json.loads(json.dumps(make_chapter(load_chapter(chapter), variant_plan(course_dir, chapter))["questions"]))
    out = []
    for qid in sorted(set(shipped) | set(now)):
        was, made = shipped.get(qid), now.get(qid)
        if was == made:
            continue
        if was is None or made is None:
            out.append(f"{qid}: {'new in' if was is None else 'gone from'} the records")
        elif was.get("points") != made.get("points"):
            out.append(f"{qid}: {made.get('points'):g} points in the records, {was.get('points'):g} released")
        else:
            out.append(f"{qid}: its reference or checks changed")
    return out


def _kept(answers: str) -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "scaling-course" / "released" / answers


def check(course_dir: Path, chapter: str, answers: str) -> None:
    """Raise ReleaseDiffers where the records of ``chapter`` give other self-check data than was released; pass
    where they were found to agree under the same answers key before."""
    kept = _kept(answers)
    if kept.is_file():
        return
    done = subprocess.run([sys.executable, "-m", __name__, str(course_dir), chapter], capture_output=True,
                          text=True, timeout=SECONDS, check=False)
    try:
        found: Any = json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise ReleaseDiffers(f"the chapter's records could not be compared with its release: "
                             f"{(done.stderr.strip().splitlines() or ['no output'])[-1][:300]}") from None
    if found:
        raise ReleaseDiffers(f"solutions/{chapter}.py changed since its last release, so the grade would mix the "
                             "two (points from the release, references from the records) and the students' "
                             "self-check would judge otherwise than the grader:\n  " + "\n  ".join(found[:20])
                             + (f"\n  and {len(found) - 20} more" if len(found) > 20 else "")
                             + f"\nRun `scaling-course release {chapter}`, then grade.")
    try:
        kept.parent.mkdir(parents=True, exist_ok=True)
        kept.write_text(chapter)
    except OSError:
        pass  # checked again next run


def main() -> None:
    course_dir, chapter = Path(sys.argv[1]), sys.argv[2]
    if (course_dir / "solutions" / "__init__.py").is_file():
        sys.path.insert(0, str(course_dir))  # the course's own references, as the judge finds them
    print(json.dumps(differences(chapter, course_dir)))


if __name__ == "__main__":
    main()
