"""Scaled dot-product attention, with torch.nn.functional's signature.

softmax(q k^T * scale + mask) v over the last two axes (any leading batch and head
axes broadcast). A composite of matmul, softmax and where: traced, it is a handful of
nodes that the passes fuse; eagerly, each runs on the tape.

A query row whose every key is masked (all False in a boolean mask, all -inf in a float
one) gives 0, as torch's does (its "safe softmax", torch >= 2.5), where a plain softmax
of a row of -inf would give nan. `attend` is that safe variant, which
nn.MultiheadAttention(need_weights=False) uses too: the row's scores are set to 0
before the softmax (one more mask step, so the chain still fuses) and its output to 0
after the product with v, so the gradients stay finite (0 for that row, as torch's): no
nan reaches a cotangent through softmax's or matmul's VJP. Masks known when the layer
runs (arrays, eager tensors) that leave every row a key add no step at all.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from graphc.eager import Tensor
from graphc.ir.errors import ShapeError
from graphc.nn.functional.stochastic import dropout
from graphc.ops import equal, logical_not, logical_or, matmul, repeat, softmax, swapaxes, where

__all__ = ["scaled_dot_product_attention"]


def _known(value: Any) -> np.ndarray | None:
    """The array of a value known now (an array or an eager tensor); None for a graph value."""
    if isinstance(value, Tensor):
        return value.detach().numpy()
    return value if isinstance(value, np.ndarray) else None


def blocked_keys(mask: Any, true_attends: bool) -> Any:
    """Where a mask lets no attention through: a boolean mask's blocking value (False
    when True means attend, as here; True for nn.MultiheadAttention's), a float mask's
    -inf. An array for a mask known now, else a graph value."""
    known = _known(mask)
    if known is not None:
        if known.dtype == np.bool_:
            return ~known if true_attends else known
        return known == -np.inf
    if np.dtype(mask.dtype) == np.bool_:
        return logical_not(mask) if true_attends else mask
    return equal(mask, -np.inf)


def fully_masked_rows(*blocked: Any) -> Any:
    """True for the query rows (..., L, 1) whose every key (last axis) is blocked by one
    of the `blocked` boolean masks (they broadcast together); None when the masks are
    known now (arrays, eager tensors) and leave every row a key, so that the common case
    costs nothing and its traced chain has no extra step."""
    known = [_known(b) for b in blocked]
    if all(k is not None for k in known):
        dead = np.logical_or.reduce(np.broadcast_arrays(*known)).all(axis=-1, keepdims=True)
        return dead if dead.any() else None
    combined = blocked[0]
    for more in blocked[1:]:
        combined = logical_or(combined, more)
    return combined.all(axis=-1, keepdims=True)


def attend(scores: Any, value: Any, dead: Any, dropout_p: float = 0.0,
           training: bool = True) -> tuple[Any, Any]:  # fmt: skip
    """softmax(scores) @ value, and the weights; rows marked `dead` (fully masked, or None
    for none) give weights of a uniform row and an output of 0 (see the module's text)."""
    if dead is not None:
        scores = where(dead, 0.0, scores)
    weights = softmax(scores, axis=-1)
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p, training)
    out = matmul(weights, value)
    if dead is not None:
        out = where(dead, 0.0, out)
    return out, weights


def scaled_dot_product_attention(
    query: Any,
    key: Any,
    value: Any,
    attn_mask: Any = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> Any:
    """torch.nn.functional.scaled_dot_product_attention: a boolean `attn_mask` marks
    the positions that take part (True: attend), a float one is added to the scores;
    `is_causal` masks the future (query i sees keys 0..i). A query row with no key to
    attend to gives 0, as torch's (see the module's text). With `enable_gqa` (grouped
    query attention) key and value may have fewer heads (dim -3) than query, each shared
    by a group of query heads, as torch's.

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
    if enable_gqa and len(query.shape) >= 3 and query.shape[-3] != key.shape[-3]:
        heads, kv_heads = query.shape[-3], key.shape[-3]
        if kv_heads != value.shape[-3] or heads % kv_heads:
            raise ShapeError(
                f"scaled_dot_product_attention: with enable_gqa, key and value need a number "
                f"of heads (dim -3) that divides the query's {heads}, got key "
                f"{tuple(key.shape)} and value {tuple(value.shape)}"
            )
        key, value = (repeat(t, heads // kv_heads, axis=-3) for t in (key, value))
    if scale is None:
        scale = 1.0 / math.sqrt(query.shape[-1])
    scores = matmul(query, swapaxes(key, -2, -1)) * scale
    if is_causal:
        if attn_mask is not None:
            raise ShapeError("scaled_dot_product_attention: give attn_mask or is_causal, not both")
        rows, cols = query.shape[-2], key.shape[-2]
        attn_mask = np.tril(np.ones((rows, cols), np.bool_))
    dead = None
    if attn_mask is not None:
        if np.dtype(attn_mask.dtype) == np.bool_:
            scores = where(attn_mask, scores, -np.inf)
        else:
            scores = scores + attn_mask
        dead = fully_masked_rows(blocked_keys(attn_mask, true_attends=True))
    return attend(scores, value, dead, dropout_p)[0]
