"""The course's meshes: named axes, each ``AxisType.Auto``, as notebooks and the grader both build them.

A program answer is lowered in the student's kernel for shardings on such a mesh and run again by the
grader on one of the same shape, so both must make meshes the same way. Students call this as
``course.mesh``; ``autograder.programs`` takes it (or another factory) from its callers, because which
devices exist is the business of the process that set them up (``course.setup()``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jax.sharding import Mesh

MeshFactory = Callable[..., "Mesh"]  # axis name -> size, in order (``X=2, Y=4``) -> a mesh


def mesh(**axes: int) -> Mesh:
    """A mesh with named axes, e.g. ``mesh(X=8)`` or ``mesh(X=2, Y=4)``.

    Axes are ``AxisType.Auto``: the book's programs let the compiler propagate shardings (jax 0.10's
    ``jax.make_mesh`` defaults to Explicit axes, which reject mismatched input shardings)."""
    import jax
    from jax.sharding import AxisType

    return jax.make_mesh(tuple(axes.values()), tuple(axes), axis_types=(AxisType.Auto,) * len(axes))
