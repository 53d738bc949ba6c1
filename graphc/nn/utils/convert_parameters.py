"""torch.nn.utils.convert_parameters: parameters_to_vector, a result of the parameters
as torch's (gradients flow through it to them), and vector_to_parameters.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from graphc.eager import Tensor, from_numpy, no_grad
from graphc.ir.errors import GraphcError, ShapeError
from graphc.ops import concat, reshape

__all__ = ["parameters_to_vector", "vector_to_parameters"]


def parameters_to_vector(parameters: Iterable[Tensor]) -> Any:
    """Every parameter flattened and joined into one vector: a result of the parameters,
    as torch's (a loss of it sends them gradients; inside gc.trace, a graph value).

    >>> import graphc.eager as ge
    >>> from graphc import nn
    >>> w = ge.tensor([[1.0, 2.0]], requires_grad=True)
    >>> (nn.utils.parameters_to_vector([w, ge.tensor(3.0)]) ** 2).sum().backward()
    >>> w.grad
    tensor([[2., 4.]])
    """
    listed = list(parameters)
    if not listed:
        raise GraphcError("parameters_to_vector: got no parameters")
    return concat([reshape(p, (-1,)) for p in listed], axis=0)


def vector_to_parameters(vec: Tensor, parameters: Iterable[Tensor]) -> None:
    """Copy consecutive slices of the vector `vec` into the parameters, in order."""
    if not isinstance(vec, Tensor):
        raise GraphcError(f"vector_to_parameters: expected a tensor, got {type(vec).__name__}")
    values = vec.detach().numpy()
    if values.ndim != 1:
        raise ShapeError(f"vector_to_parameters: expected a vector, got shape {values.shape}")
    start = 0
    with no_grad():
        for p in parameters:
            size = int(np.prod(p.shape))
            if start + size > values.size:
                raise ShapeError(
                    f"vector_to_parameters: the vector of {values.size} values is shorter than "
                    "the parameters"
                )
            p.copy_(from_numpy(values[start : start + size].reshape(p.shape).astype(p.dtype)))
            start += size
