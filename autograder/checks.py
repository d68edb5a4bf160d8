"""The grader's verdicts: a pure function from a question and a recorded answer to a Verdict.

The work is done per answer kind in ``autograder/kinds``; this module is the grader's door to it.
"""

from __future__ import annotations

from .kinds import judge

__all__ = ["judge"]
