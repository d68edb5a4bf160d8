"""Where a program question's reference has a kink: the pre-activations whose sign its gradient depends on.

Drawn inputs keep clear of them (``programs.inputs``): where one lies near zero, a right float32 program may take
the other side of a relu's gate than the float64 reference. They answer nothing (a matmul of the inputs), so
they lie outside ``autograder/program_references/``, which the jailed process that draws a program's inputs
cannot read.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


def _mlp_kinks(x: np.ndarray, w_in: np.ndarray, w_out: np.ndarray) -> list[np.ndarray]:
    return [x @ w_in]


def _relu_stack_kinks(x: np.ndarray, w: np.ndarray) -> list[np.ndarray]:
    scale, h, out = np.sqrt(2.0 / x.shape[1]), x, []
    for layer in w:
        out.append(h @ layer)
        h = np.maximum(out[-1], 0.0) * scale
    return out


# By reference name. A forward pass alone needs none: there the jump is as small as the pre-activation.
KINKS: dict[str, Callable[..., list[np.ndarray]]] = {
    "mlp_loss_grad_w_in": _mlp_kinks,
    "mlp_train_step": _mlp_kinks,
    "relu_stack_train_step": _relu_stack_kinks,
}
