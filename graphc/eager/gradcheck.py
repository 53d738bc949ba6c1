"""`gradcheck` / `gradgradcheck`: the tape's gradients against central finite differences.

The analytic Jacobian comes one row at a time from `autograd.grad` with a one-hot
cotangent per output element; the numerical one from perturbing each input element
by +-eps in place (and restoring it). Use float64 inputs: float32 rounding swamps
the differences.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from graphc.eager.tensor import Tensor, make
from graphc.ir.errors import AutodiffError
from graphc.ir.types import is_float


def _outputs(value: Any) -> list[Tensor]:
    items = list(value) if isinstance(value, (tuple, list)) else [value]
    return [t for t in items if isinstance(t, Tensor) and is_float(t._data.dtype)]


def _numerical(fn: Callable, inputs: tuple, x: Tensor, eps: float) -> list[np.ndarray]:
    """d out / d x for every output, shaped (x.size, out.size), by central differences."""
    data = x._data
    rows: list[list[np.ndarray]] = []
    # grad mode stays on: gradgradcheck's function itself calls autograd.grad
    for i in range(data.size):
        at = np.unravel_index(i, data.shape)
        original = data[at]
        data[at] = original + eps
        plus = [np.array(o._data, np.float64) for o in _outputs(fn(*inputs))]
        data[at] = original - eps
        minus = [np.array(o._data, np.float64) for o in _outputs(fn(*inputs))]
        data[at] = original
        rows.append([((p - m) / (2 * eps)).reshape(-1) for p, m in zip(plus, minus)])
    count = len(rows[0]) if rows else 0
    return [np.stack([row[k] for row in rows]) for k in range(count)]


def _analytic(outputs: list[Tensor], wanted: list[Tensor]) -> list[list[np.ndarray]]:
    """[output][input] -> Jacobian shaped (input.size, output.size)."""
    from graphc.eager.autograd import grad

    result = []
    for out in outputs:
        columns: list[list[np.ndarray]] = [[] for _ in wanted]
        for j in range(out._data.size):
            seed = np.zeros(out.shape, out._data.dtype)
            seed.reshape(-1)[j] = 1
            if out._requires_grad:
                grads = grad(out, wanted, make(seed), retain_graph=True, allow_unused=True)
            else:
                grads = (None,) * len(wanted)
            for k, (g, x) in enumerate(zip(grads, wanted)):
                values = np.zeros(x._data.size) if g is None else g._data.reshape(-1)
                columns[k].append(np.asarray(values, np.float64))
        result.append(
            [np.stack(col, axis=1) if col else np.zeros((x._data.size, 0)) for col, x in
             zip(columns, wanted)]
        )  # fmt: skip
    return result


def gradcheck(
    func: Callable[..., Any],
    inputs: Any,
    *,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    raise_exception: bool = True,
) -> bool:
    """True if the gradients of `func` at `inputs` match finite differences.

    >>> from graphc.eager import randn
    >>> x = randn(5, dtype="float64", requires_grad=True)
    >>> gradcheck(lambda t: (t * t).sum(), (x,))
    True
    """
    inputs = tuple(inputs) if isinstance(inputs, Sequence) else (inputs,)
    wanted = [x for x in inputs if isinstance(x, Tensor) and x._requires_grad]
    if not wanted:
        raise AutodiffError("gradcheck: no input requires grad")
    outputs = _outputs(func(*inputs))
    analytic = _analytic(outputs, wanted)
    for k, x in enumerate(wanted):
        numerical = _numerical(func, inputs, x, eps)
        for o, (num, ana) in enumerate(zip(numerical, (a[k] for a in analytic))):
            if not np.allclose(ana, num, rtol=rtol, atol=atol):
                worst = float(np.max(np.abs(ana - num)))
                message = (
                    f"gradcheck: Jacobian mismatch for output {o} with respect to input {k} "
                    f"(max abs difference {worst:.3g}):\nnumerical:\n{num}\nanalytical:\n{ana}"
                )
                if raise_exception:
                    raise AutodiffError(message)
                return False
    return True


def gradgradcheck(
    func: Callable[..., Any],
    inputs: Any,
    *,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    seed: int = 0,
    raise_exception: bool = True,
) -> bool:
    """gradcheck of the gradient itself (built with create_graph=True), along random
    output cotangents: checks second derivatives.
    """
    from graphc.eager.autograd import grad

    inputs = tuple(inputs) if isinstance(inputs, Sequence) else (inputs,)
    wanted = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x._requires_grad]
    rng = np.random.default_rng(seed)
    first = _outputs(func(*inputs))
    cotangents = [make(rng.standard_normal(o.shape).astype(o._data.dtype)) for o in first]

    def first_derivative(*args: Any) -> tuple:
        pairs = [(o, c) for o, c in zip(_outputs(func(*args)), cotangents) if o._requires_grad]
        xs = [args[i] for i in wanted]
        outs, seeds = [o for o, _ in pairs], [c for _, c in pairs]
        grads = grad(outs, xs, seeds, create_graph=True, allow_unused=True)
        return tuple(g for g in grads if g is not None)

    return gradcheck(
        first_derivative, inputs, eps=eps, atol=atol, rtol=rtol, raise_exception=raise_exception
    )
