"""The course's errors as a notebook shows them: the message alone, on one line.

IPython shows an exception that has ``_render_traceback_`` as the lines that method returns instead of a
traceback. Every error the course raises for a learner to read (a wrong or unreadable answer, a question id
that is not one, a setup that cannot be done) mixes in ``OneLine``, so its message is all the learner sees:
the course's internals, where the error was raised, would only hide it.
"""

from __future__ import annotations


class OneLine:
    """Mixed into an exception class whose message says everything (put it before the exception base)."""

    shown_as = ""  # the name shown before the message; by default the class's own

    def _render_traceback_(self) -> list[str]:
        """What IPython shows in the notebook: the message alone, not the course's internals."""
        return [f"{self.shown_as or type(self).__name__}: {self}"]


class BadArgument(OneLine, ValueError):
    """An argument of a course function that it cannot use (``course.setup(student="")``)."""

    shown_as = "ValueError"


class NotText(OneLine, TypeError):
    """A question id or setting name that is not text (``check(5, ...)``)."""

    shown_as = "TypeError"


class SetupError(OneLine, RuntimeError):
    """``course.setup()`` cannot give the kernel its devices (JAX started before it, with another count)."""
