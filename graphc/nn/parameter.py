"""`Parameter` and `Buffer`: torch.nn.Parameter, a leaf tensor that a Module registers as
a parameter when it is assigned as an attribute (whether or not it requires grad), and
torch.nn.Buffer, one it registers as a buffer (persistent or not)."""

from __future__ import annotations

from typing import Any

import numpy as np

from graphc.eager import Tensor, from_numpy

__all__ = ["Buffer", "Parameter"]


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


class Buffer(Tensor):
    """A tensor a Module registers as a buffer when it is assigned as an attribute, as
    `register_buffer` would (torch.nn.Buffer): saved in `state_dict` unless
    `persistent=False`, never trained. It shares `data`'s memory.

    >>> import graphc.eager as ge
    >>> from graphc import nn
    >>> class Counter(nn.Module):
    ...     def __init__(self) -> None:
    ...         super().__init__()
    ...         self.seen = nn.Buffer(ge.zeros(()))
    ...         self.scratch = nn.Buffer(ge.zeros(3), persistent=False)
    >>> list(Counter().state_dict()), [name for name, _ in Counter().named_buffers()]
    (['seen'], ['seen', 'scratch'])
    """

    def __init__(self, data: Any = None, *, persistent: bool = True) -> None:
        if data is None:
            data = np.zeros(0, np.float32)
        source = data.detach() if isinstance(data, Tensor) else from_numpy(np.asarray(data))
        super().__init__(source)
        self.requires_grad = isinstance(data, Tensor) and data.requires_grad
        self.persistent = persistent
