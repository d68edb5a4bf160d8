"""scaling-course grading engine: safe answer parsing, equivalence, checks and batch grading.

The engine knows answer *kinds*, never chapters: a question is a record in ``solutions/``, and
everything here dispatches on ``question.kind``.
"""
