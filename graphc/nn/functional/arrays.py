"""torch.nn.functional spellings: arrays (pad, embedding, one_hot).

>>> import graphc.eager as ge
>>> from graphc.nn import functional as F
>>> F.pad(ge.ones(1, 2), (1, 0)).tolist()
[[0.0, 1.0, 1.0]]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from graphc.eager import Tensor, no_grad, tensor
from graphc.ir.errors import GraphcError
from graphc.ops import indexing as I
from graphc.ops import nn as N
from graphc.ops.along_axis import embedding as _embedding
from graphc.ops.padding import pad as _pad
from graphc.ops.spelling import integer, shape_of

__all__ = ["embedding", "one_hot", "pad"]

_TORCH_MODES = {"constant", "reflect", "replicate", "circular"}


def pad(input: Any, pad: Sequence[int], mode: str = "constant", value: Any = None) -> Any:  # noqa: A002 - torch's names
    """torch.nn.functional.pad: `pad` lists (before, after) pairs from the last dim
    backwards: (left, right) pads the last dim, (left, right, top, bottom) the last two.

    Modes "constant" (`value`, 0 by default), "reflect", "replicate" and "circular";
    a negative pad crops. Unlike torch, any dims may be padded in any mode (torch pads
    only the last 1 to 3 dims of 2-5 dim inputs outside constant mode).

    >>> import graphc.eager as ge
    >>> from graphc.nn import functional as F
    >>> F.pad(ge.tensor([[1.0, 2.0, 3.0]]), (2, 1), mode="reflect").tolist()
    [[3.0, 2.0, 1.0, 2.0, 3.0, 2.0]]
    """
    if mode not in _TORCH_MODES:
        raise GraphcError(f"pad: mode must be one of {sorted(_TORCH_MODES)}, got {mode!r}")
    if value is not None and mode != "constant":
        raise GraphcError(f'pad: padding mode "{mode}" does not take a value')
    pads = [integer(p, "pad", "a pad") for p in pad]
    shape = shape_of(input)
    if len(pads) % 2 or len(pads) // 2 > len(shape):
        raise GraphcError(
            f"pad: the pad list {tuple(pad)} must hold (before, after) pairs for at most "
            f"the {len(shape)} dims of the input"
        )
    pairs = [(0, 0)] * len(shape)
    for i in range(len(pads) // 2):
        pairs[len(shape) - 1 - i] = (pads[2 * i], pads[2 * i + 1])
    grown = tuple((max(b, 0), max(a, 0)) for b, a in pairs)
    result = _pad(input, grown, mode=mode, constant_values=0 if value is None else value)
    if all(b >= 0 and a >= 0 for b, a in pairs):
        return result
    # negative pads crop: a slice of the padded value
    padded = shape_of(result)
    window = tuple(
        slice(max(-b, 0), n - max(-a, 0)) if b < 0 or a < 0 else slice(None)
        for n, (b, a) in zip(padded, pairs)
    )
    return I.slice_(result, index=window)


def embedding(
    input: Any,  # noqa: A002 - torch's name
    weight: Any,
    padding_idx: int | None = None,
    max_norm: float | None = None,
    norm_type: float = 2.0,
    scale_grad_by_freq: bool = False,
    sparse: bool = False,
) -> Any:
    """torch.nn.functional.embedding: the rows of `weight` at the indices `input`; the row
    `padding_idx` gets no gradient. `sparse` gives the same (dense) gradient. With
    `max_norm`, the rows looked up whose `norm_type` norm exceeds it are first scaled
    down to it in place, as torch's (eager tensors only: a traced graph cannot rewrite
    its weight); scale_grad_by_freq is not supported.

    >>> import graphc.eager as ge
    >>> from graphc.nn import functional as F
    >>> weight = ge.tensor([[0.0, 1.0], [2.0, 3.0]], requires_grad=True)
    >>> F.embedding(ge.tensor([1, 1, 0]), weight, padding_idx=0).sum().backward()
    >>> weight.grad.tolist()
    [[0.0, 0.0], [2.0, 2.0]]
    """
    if max_norm is not None:
        _renormalize(input, weight, max_norm, norm_type)
    if scale_grad_by_freq:
        raise GraphcError("embedding: scale_grad_by_freq is not supported")
    return _embedding(input, weight, padding_idx=padding_idx)


def _renormalize(indices: Any, weight: Any, max_norm: float, norm_type: float) -> None:
    """torch's embedding_renorm_: each row of `weight` that `indices` looks up and whose
    norm exceeds max_norm scaled (in place, unrecorded) to max_norm / (norm + 1e-7)."""
    if not (isinstance(indices, Tensor) and isinstance(weight, Tensor)):
        raise GraphcError(
            "embedding: max_norm rewrites the weight in place, which needs eager tensors; "
            "a traced graph cannot (renormalize the weight before tracing, or leave max_norm)"
        )
    rows = np.unique(indices.detach().numpy())
    values = weight.detach().numpy()[rows]
    norms = np.linalg.norm(values, ord=norm_type, axis=1)
    big = norms > max_norm
    if big.any():
        scaled = values[big] * (max_norm / (norms[big] + 1e-7))[:, None]
        with no_grad():
            weight[tensor(rows[big])] = tensor(scaled.astype(values.dtype))


def one_hot(tensor: Any, num_classes: int = -1) -> Any:
    """torch.nn.functional.one_hot: int64, with a new last dim of num_classes; -1 takes
    the largest label + 1, which needs the labels' values (not in a traced graph).

    >>> import graphc.eager as ge
    >>> from graphc.nn import functional as F
    >>> F.one_hot(ge.tensor([0, 2])).tolist()
    [[1, 0, 0], [0, 0, 1]]
    """
    num_classes = integer(num_classes, "one_hot", "num_classes")
    if num_classes == -1:
        labels = np.asarray(tensor)  # a graph value says why it has no data here
        if labels.size == 0:
            raise GraphcError("one_hot: cannot infer num_classes from an empty tensor")
        num_classes = int(labels.max()) + 1
    return N.one_hot(tensor, num_classes=num_classes, dtype=np.int64)
