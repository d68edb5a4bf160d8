"""The course's meshes: named axes, each ``AxisType.Auto``, as notebooks and the grader both build them.

A program answer is lowered in the student's kernel for shardings on such a mesh and run again by the
grader on one of the same shape, so both must make meshes the same way. Students call this as
``course.mesh``; ``autograder.programs`` takes it (or another factory) from its callers, because which
devices exist is the business of the process that set them up (``course.setup()``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jax.sharding import Mesh

MeshFactory = Callable[..., "Mesh"]  # axis name -> size, in order (``X=2, Y=4``) -> a mesh


COURSE_DEVICES = 8  # the devices of the course's meshes (course.devices.DEFAULT_DEVICES is this one)


def devices_text(n: int) -> str:
    return f"{n} device" if n == 1 else f"{n} devices"


# Not course.errors.OneLine: the core may not import ``course`` (tests/test_layers.py), so the one-line rendering is
# written here again.
class MeshTooLarge(ValueError):
    """A mesh of more devices than this process has: shown in a notebook as its message alone, one line (IPython
    shows what ``_render_traceback_`` returns), since the cell, not the course, asked for it. A ValueError, as
    JAX's own error for it."""

    def _render_traceback_(self) -> list[str]:
        return [f"ValueError: {self}"]


def _device_count() -> int:
    import jax

    return jax.device_count()


def mesh(*, explicit: bool = False, **axes: int) -> Mesh:
    """A mesh with named axes, e.g. ``mesh(X=8)`` or ``mesh(X=2, Y=4)``.

    Axes are ``AxisType.Auto``: the book's programs let the compiler propagate shardings (jax 0.10's
    ``jax.make_mesh`` defaults to Explicit axes, which reject mismatched input shardings). ``explicit=True``: the
    Explicit axes ``jax.make_mesh`` makes, for a cell that shows them (ch10). A mesh of more devices than the process
    has raises ``MeshTooLarge``, one line that says what to do, not JAX's traceback: notebooks and the code they
    run build every mesh here (``release.direct_mesh_problems``)."""
    import jax
    from jax.sharding import AxisType

    sizes = tuple(axes.values())
    if all(isinstance(n, int) and n > 0 for n in sizes):
        need, have = math.prod(sizes), _device_count()
        if need > have:
            from .messages import phrase

            code = "devices:mesh" if need <= COURSE_DEVICES else "devices:mesh_too_large"
            raise MeshTooLarge(phrase(code, need=need, have=devices_text(have),
                                      most=COURSE_DEVICES))
    kind = AxisType.Explicit if explicit else AxisType.Auto
    return jax.make_mesh(sizes, tuple(axes), axis_types=(kind,) * len(axes))
