"""scaling-course grading engine: safe answer parsing, equivalence, checks and batch grading.

The engine knows answer *kinds*, never chapters: a question is a record in ``solutions/``, and
everything here dispatches on ``question.kind``.
"""

import sys as _sys

# nbformat validates with jsonschema, which imports ``rfc3987_syntax`` when it is installed (Jupyter's
# event schemas pull it in), and that module compiles 38 grammars at import: 1.4 s of CPU in every
# grading process, for IRI formats no notebook schema uses. Without it jsonschema skips those formats.
_sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]
