"""Scaled dot-product attention, with torch.nn.functional's signature.

softmax(q k^T * scale + mask) v over the last two axes (any leading batch and head
axes broadcast). A composite of matmul, softmax and where: traced, it is a handful of
nodes that the passes fuse; eagerly, each runs on the tape.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from graphc.ir.errors import ShapeError
from graphc.nn.functional.stochastic import dropout
from graphc.ops import matmul, softmax, swapaxes, where

__all__ = ["scaled_dot_product_attention"]


def scaled_dot_product_attention(
    query: Any,
    key: Any,
    value: Any,
    attn_mask: Any = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
) -> Any:
    """torch.nn.functional.scaled_dot_product_attention: a boolean `attn_mask` marks
    the positions that take part (True: attend), a float one is added to the scores;
    `is_causal` masks the future (query i sees keys 0..i).

    >>> import graphc.eager as ge
    >>> from graphc.nn import functional as F
    >>> q = k = v = ge.ones(2, 4, 3)
    >>> F.scaled_dot_product_attention(q, k, v, is_causal=True).shape
    (2, 4, 3)
    """
    if query.shape[-1] != key.shape[-1] or key.shape[-2] != value.shape[-2]:
        raise ShapeError(
            f"scaled_dot_product_attention: query {tuple(query.shape)}, key "
            f"{tuple(key.shape)} and value {tuple(value.shape)} do not fit "
            "(query and key share the last dim, key and value the second to last)"
        )
    if scale is None:
        scale = 1.0 / math.sqrt(query.shape[-1])
    scores = matmul(query, swapaxes(key, -2, -1)) * scale
    if is_causal:
        if attn_mask is not None:
            raise ShapeError("scaled_dot_product_attention: give attn_mask or is_causal, not both")
        rows, cols = query.shape[-2], key.shape[-2]
        attn_mask = np.tril(np.ones((rows, cols), np.bool_))
    if attn_mask is not None:
        if np.dtype(attn_mask.dtype) == np.bool_:
            scores = where(attn_mask, scores, -np.inf)
        else:
            scores = scores + attn_mask
    weights = softmax(scores, axis=-1)
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p)
    return matmul(weights, value)
