"""`Parameter`: torch.nn.Parameter, a leaf tensor that a Module registers as a parameter
when it is assigned as an attribute (whether or not it requires grad)."""

from __future__ import annotations

from typing import Any

import numpy as np

from graphc.eager import Tensor, from_numpy

__all__ = ["Parameter"]


class Parameter(Tensor):
    """A leaf tensor sharing `data`'s memory, requiring grad unless told otherwise.

    >>> import graphc.eager as ge
    >>> from graphc import nn
    >>> class Scale(nn.Module):
    ...     def __init__(self) -> None:
    ...         super().__init__()
    ...         self.w = nn.Parameter(ge.ones(2))
    >>> [(name, p.requires_grad) for name, p in Scale().named_parameters()]
    [('w', True)]
    """

    def __init__(self, data: Any = None, requires_grad: bool = True) -> None:
        if data is None:
            data = np.zeros(0, np.float32)
        source = data.detach() if isinstance(data, Tensor) else from_numpy(np.asarray(data))
        super().__init__(source)  # an alias of the data: the same memory, as torch's
        self.requires_grad = requires_grad

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()
