"""The derivations the reference solutions compute with: parameter counts, FLOPs, intensities,
critical batches, memory limits, collective times.

Why here and not in ``course``: what a student imports must answer no question (docs/architecture.md),
so the ``course`` library holds only inputs (chips, model dimensions, symbols, meshes, plots) and these
formulas live beside the records that use them. Neither ``course`` nor a notebook imports this
package; the grader does, through ``solutions/chNN_*.py``. ``tests/test_library_rule.py`` proves
that nothing left in ``course`` answers a question.

Modules mirror the ``course`` modules they build on: ``models`` (Part 4's cost model over
``course.models`` configs), ``inference`` (Parts 7 and 8), ``hardware`` (quantities derived from
``course.hardware`` chips) and ``topology`` (TPU tori and GPU fat trees, Parts 2 and 12).
"""
