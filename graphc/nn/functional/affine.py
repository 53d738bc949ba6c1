"""torch.nn.functional spellings: linear and bilinear maps (nn.Linear's and nn.Bilinear's
forwards), on eager tensors and graph values alike."""

from __future__ import annotations

from typing import Any

from graphc.ir.errors import ShapeError
from graphc.ops import einsum

__all__ = ["bilinear", "linear"]


def linear(input: Any, weight: Any, bias: Any = None) -> Any:  # noqa: A002 - torch's names
    """input @ weight.T + bias, weight (out_features, in_features).

    >>> import graphc.eager as ge
    >>> from graphc.nn import functional as F
    >>> F.linear(ge.ones(2, 3), ge.ones(4, 3), ge.zeros(4)).shape
    (2, 4)
    """
    if len(input.shape) == 0 or len(weight.shape) not in (1, 2):
        raise ShapeError(
            f"linear: expected an input of at least 1 dim and a 1-D or 2-D weight, got "
            f"{tuple(input.shape)} and {tuple(weight.shape)}"
        )
    if input.shape[-1] != weight.shape[-1]:
        raise ShapeError(
            f"linear: the input's last dim ({input.shape[-1]}) must match the weight's "
            f"in_features ({weight.shape[-1]}): input {tuple(input.shape)}, weight "
            f"{tuple(weight.shape)}"
        )
    y = input @ weight.T if len(weight.shape) == 2 else input @ weight
    return y if bias is None else y + bias


def bilinear(input1: Any, input2: Any, weight: Any, bias: Any = None) -> Any:
    """y[..., o] = sum over i, j of input1[..., i] weight[o, i, j] input2[..., j] + bias[o].

    >>> import graphc.eager as ge
    >>> from graphc.nn import functional as F
    >>> F.bilinear(ge.ones(2, 3), ge.ones(2, 5), ge.ones(4, 3, 5)).tolist()[0]
    [15.0, 15.0, 15.0, 15.0]
    """
    if len(weight.shape) != 3 or (tuple(weight.shape[1:]) != (input1.shape[-1], input2.shape[-1])):
        raise ShapeError(
            f"bilinear: weight must be (out, {input1.shape[-1]}, {input2.shape[-1]}) for inputs "
            f"{tuple(input1.shape)} and {tuple(input2.shape)}, got {tuple(weight.shape)}"
        )
    if tuple(input1.shape[:-1]) != tuple(input2.shape[:-1]):
        raise ShapeError(
            f"bilinear: the inputs' leading dims must match, got {tuple(input1.shape)} and "
            f"{tuple(input2.shape)}"
        )
    y = einsum("...i,oij,...j->...o", input1, weight, input2)
    return y if bias is None else y + bias
