"""torch.nn.functional spelling: embedding_bag, the sums, means or maxima of bags of
embedding rows without materializing each bag's rows as a separate tensor.

Bags come as a 2-D input (B, N) of equal bags, or a 1-D input with `offsets`, where
bag b starts. The offsets must be known numbers (eager tensors or arrays): they fix
every bag's length, so they lay the bags out as a padded (B, L) table of positions
with a mask; a traced graph takes a 2-D input instead. Entries equal to `padding_idx`
count for nothing (not in a mean's count either); an empty bag gives zeros, as torch's.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from graphc.eager import Tensor
from graphc.ir.errors import GraphcError, ShapeError
from graphc.nn.functional.arrays import embedding
from graphc.ops import cast, expand_dims, maximum, reshape, take, where
from graphc.ops import max as largest
from graphc.ops import sum as total
from graphc.ops.symbolic import Symbol

__all__ = ["embedding_bag"]


def _bag_layout(offsets: Any, count: int, include_last_offset: bool) -> tuple:
    """(positions, valid): a (B, L) table of input positions and which are real."""
    if isinstance(offsets, Symbol):
        raise GraphcError(
            "embedding_bag: offsets must be known numbers (they fix the bags' lengths); a "
            "traced graph takes equal bags as a 2-D input (B, N) instead"
        )
    starts = np.asarray(offsets.detach().numpy() if isinstance(offsets, Tensor) else offsets)
    if starts.ndim != 1 or starts.dtype.kind not in "iu":
        raise ShapeError(f"embedding_bag: offsets must be a 1-D integer array, got {starts!r}")
    ends = np.append(starts[1:], count) if not include_last_offset else starts[1:]
    starts = starts if not include_last_offset else starts[:-1]
    if (starts.size and (starts[0] != 0 or (np.diff(starts) < 0).any())) or (ends > count).any():
        raise ShapeError(
            f"embedding_bag: offsets must start at 0 and not decrease within the {count} "
            f"indices, got {offsets!r}"
        )
    lengths = np.maximum(ends - starts, 0)
    width = max(int(lengths.max()) if lengths.size else 0, 1)
    steps = np.arange(width)
    valid = steps[None, :] < lengths[:, None]
    positions = np.where(valid, starts[:, None] + steps[None, :], 0)
    return positions, valid


def embedding_bag(
    input: Any,  # noqa: A002 - torch's names
    weight: Any,
    offsets: Any = None,
    max_norm: float | None = None,
    norm_type: float = 2.0,
    scale_grad_by_freq: bool = False,
    mode: str = "mean",
    sparse: bool = False,
    per_sample_weights: Any = None,
    include_last_offset: bool = False,
    padding_idx: int | None = None,
) -> Any:
    """torch.nn.functional.embedding_bag: for each bag of indices, the sum, mean or max of
    the rows of `weight` it names (sum: each row times its `per_sample_weights`).

    >>> import graphc.eager as ge
    >>> from graphc.nn import functional as F
    >>> weight = ge.tensor([[1.0, 0.0], [0.0, 2.0], [4.0, 4.0]])
    >>> F.embedding_bag(ge.tensor([0, 1, 2]), weight, ge.tensor([0, 2])).tolist()
    [[0.5, 1.0], [4.0, 4.0]]
    """
    if mode not in ("sum", "mean", "max"):
        raise GraphcError(f"embedding_bag: mode must be 'sum', 'mean' or 'max', got {mode!r}")
    if per_sample_weights is not None and mode != "sum":
        raise GraphcError(
            f"embedding_bag: per_sample_weights is only supported for mode='sum', got {mode!r}"
        )
    rank = len(input.shape)
    if rank == 2:
        if offsets is not None:
            raise GraphcError("embedding_bag: a 2-D input holds its bags; offsets must be None")
        indices, valid, sample_weights = input, None, per_sample_weights
    elif rank == 1:
        if offsets is None:
            raise GraphcError("embedding_bag: a 1-D input needs offsets, where each bag starts")
        positions, valid = _bag_layout(offsets, int(input.shape[0]), include_last_offset)
        indices = reshape(take(input, positions.reshape(-1), axis=0), positions.shape)
        sample_weights = None
        if per_sample_weights is not None:
            picked = take(per_sample_weights, positions.reshape(-1), axis=0)
            sample_weights = reshape(picked, positions.shape)
    else:
        raise ShapeError(f"embedding_bag: expected a 1-D or 2-D input, got shape {input.shape}")
    if sample_weights is not None and tuple(sample_weights.shape) != tuple(indices.shape):
        raise ShapeError(
            f"embedding_bag: per_sample_weights must have the input's shape, got "
            f"{tuple(per_sample_weights.shape)} for {tuple(input.shape)}"
        )
    rows = embedding(indices, weight, None, max_norm, norm_type, scale_grad_by_freq)
    keep = None if padding_idx is None else indices != padding_idx % weight.shape[0]
    if valid is not None:
        keep = valid if keep is None else keep & valid
    if mode == "max":
        chosen = rows if keep is None else where(expand_dims(keep, -1), rows, -np.inf)
        result = largest(chosen, axis=1)
        if keep is None:
            return result
        return where(expand_dims(total(cast(keep, "int64"), axis=1) > 0, -1), result, 0.0)
    weights = None if keep is None else cast(keep, rows.dtype)
    if sample_weights is not None:
        weights = sample_weights if weights is None else weights * sample_weights
    summed = total(rows if weights is None else rows * expand_dims(weights, -1), axis=1)
    if mode == "sum":
        return summed
    if keep is None:
        return summed / indices.shape[1]
    counts = total(cast(keep, rows.dtype), axis=1)
    return summed / expand_dims(maximum(counts, 1.0), -1)
