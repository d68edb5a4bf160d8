"""The book's symbols as notebooks import them: ``from course.symbols import B, D, F``.

They are declared once, in ``autograder/symbols.py``, because the grader's formula parser must build
the very same objects a student's formula holds (``Symbol('B') != Symbol('B', positive=True)``).
"""

from autograder import symbols as _declared
from autograder.symbols import *  # noqa: F403  (the whole table, under the names the book uses)

__all__ = _declared.__all__
