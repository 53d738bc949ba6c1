"""Attention layers with PyTorch's names, parameters and masks: MultiheadAttention.

Shapes as torch: (L, N, E) for queries (S for keys and values), or (N, L, E) with
`batch_first`, or unbatched (L, E). Heads are split by reshaping the last axis into
(heads, head_dim) and moving heads before the sequence axes, so a symbolic batch or
sequence length needs no product of symbols. Masks follow nn.MultiheadAttention: a
boolean `attn_mask` or `key_padding_mask` marks with True the positions that may NOT
be attended (the opposite of F.scaled_dot_product_attention's boolean mask); a float
mask is added to the scores. A query row that the masks together leave no key gives
nan with `need_weights=True` and 0 attention (the output projection's bias) with
`need_weights=False`, as torch's (whose weight-free path is its scaled-dot-product
kernel, with a softmax that gives 0 for a fully masked row); the gradients stay finite.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from graphc.eager import zeros
from graphc.ir.errors import GraphcError, ShapeError
from graphc.ir.types import as_dtype
from graphc.nn import init
from graphc.nn.functional.attention import attend, blocked_keys, fully_masked_rows
from graphc.nn.layers import Linear
from graphc.nn.module import Module
from graphc.ops import concat, matmul, mean, pad, reshape, swapaxes, transpose, where, zeros_like

__all__ = ["MultiheadAttention"]


def _reshaped(value: Any, shape: tuple) -> Any:
    """An array reshaped as an array (a symbolic batch dim read as -1), else by the op."""
    if isinstance(value, np.ndarray):
        return value.reshape(tuple(-1 if isinstance(d, str) else d for d in shape))
    return reshape(value, shape)


def _one_more_key(mask: Any) -> Any:
    """A mask (..., S) for one more key at the end, which it leaves attended (False, or 0
    added), as torch pads it."""
    if mask is None:
        return None
    pads = [(0, 0)] * (len(mask.shape) - 1) + [(0, 1)]
    if isinstance(mask, np.ndarray):
        return np.pad(mask, pads)
    return pad(mask, pads)


class MultiheadAttention(Module):
    """torch.nn.MultiheadAttention.

    Parameters: `in_proj_weight` (3E, E) (or, with a kdim or vdim other than E,
    `q_proj_weight` (E, E), `k_proj_weight` (E, kdim), `v_proj_weight` (E, vdim)),
    `in_proj_bias` (3E), `out_proj.weight`, `out_proj.bias`, and with add_bias_kv
    `bias_k` and `bias_v` (1, 1, E), a learned key and value appended to every sequence
    (add_zero_attn appends a zero one); initialized as torch (xavier-uniform projections,
    xavier-normal bias_k and bias_v, zero biases).

    >>> import graphc.eager as ge
    >>> from graphc import nn
    >>> attn = nn.MultiheadAttention(8, 2, generator=0)
    >>> out, weights = attn(ge.ones(5, 3, 8), ge.ones(5, 3, 8), ge.ones(5, 3, 8))
    >>> out.shape, weights.shape
    ((5, 3, 8), (3, 5, 5))
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        add_bias_kv: bool = False,
        add_zero_attn: bool = False,
        kdim: int | None = None,
        vdim: int | None = None,
        batch_first: bool = False,
        dtype: Any = "float32",
        generator: init.Generator = None,
    ) -> None:
        super().__init__()
        if embed_dim % num_heads:
            raise GraphcError(
                f"MultiheadAttention: embed_dim {embed_dim} is not divisible by num_heads "
                f"{num_heads}"
            )
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.kdim = embed_dim if kdim is None else kdim
        self.vdim = embed_dim if vdim is None else vdim
        self.head_dim = embed_dim // num_heads
        self.dropout, self.batch_first = dropout, batch_first
        dtype = as_dtype(dtype)
        rng = init.as_generator(generator)
        if self.kdim == embed_dim and self.vdim == embed_dim:  # one packed projection
            self.in_proj_weight = zeros(3 * embed_dim, embed_dim, dtype=dtype, requires_grad=True)
            init.xavier_uniform_(self.in_proj_weight, generator=rng)
        else:  # torch's three, each of its input's size, and an empty in_proj_weight
            for name, size in (("q", embed_dim), ("k", self.kdim), ("v", self.vdim)):
                weight = zeros(embed_dim, size, dtype=dtype, requires_grad=True)
                setattr(self, f"{name}_proj_weight", init.xavier_uniform_(weight, generator=rng))
            self.in_proj_weight = None
        self.in_proj_bias = zeros(3 * embed_dim, dtype=dtype, requires_grad=True) if bias else None
        self.add_zero_attn = add_zero_attn
        if add_bias_kv:  # one more key and value, learned (after the projections)
            for name in ("bias_k", "bias_v"):
                extra = zeros(1, 1, embed_dim, dtype=dtype, requires_grad=True)
                setattr(self, name, init.xavier_normal_(extra, generator=rng))
        else:
            self.bias_k = self.bias_v = None
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias, dtype=dtype, generator=rng)
        if bias:
            init.zeros_(self.out_proj.bias)

    def forward(
        self,
        query: Any,
        key: Any,
        value: Any,
        key_padding_mask: Any = None,
        need_weights: bool = True,
        attn_mask: Any = None,
        average_attn_weights: bool = True,
        is_causal: bool = False,
    ) -> tuple[Any, Any]:
        unbatched = query.ndim == 2
        if unbatched:
            query, key, value = (
                x.reshape((x.shape[0], 1, x.shape[1])) for x in (query, key, value)
            )
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.reshape((1, key_padding_mask.shape[0]))
        self._check_shapes(query, key, value, key_padding_mask)
        # the projections run on the rows as they lie (batch first or not): one GEMM over
        # contiguous rows, where projecting a transposed view is a GEMM per batch entry
        first = bool(self.batch_first) and not unbatched
        length, batch = (query.shape[1], query.shape[0]) if first else query.shape[:2]
        q, k, v = (self._project(x, i, first) for i, x in enumerate((query, key, value)))
        if self.bias_k is not None:
            k, v = self._append(k, self.bias_k), self._append(v, self.bias_v)
            attn_mask, key_padding_mask = _one_more_key(attn_mask), _one_more_key(key_padding_mask)
        if self.add_zero_attn:
            k, v = self._append(k, None), self._append(v, None)
            attn_mask, key_padding_mask = _one_more_key(attn_mask), _one_more_key(key_padding_mask)
        scores = matmul(q, swapaxes(k, -2, -1)) * (1.0 / math.sqrt(self.head_dim))
        scores, blocked = self._masked(scores, attn_mask, key_padding_mask, is_causal, batch)
        # torch's weight-free path zeroes the rows with no key; with the weights, nan
        dead = fully_masked_rows(*blocked) if blocked and not need_weights else None
        out, weights = attend(scores, v, dead, self.dropout, self.training)
        # out: (N, heads, L, head_dim)
        if first:
            out = reshape(transpose(out, (0, 2, 1, 3)), (batch, length, self.embed_dim))
        else:
            out = reshape(transpose(out, (2, 0, 1, 3)), (length, batch, self.embed_dim))
        out = self.out_proj(out)
        if unbatched:
            out = out.reshape((out.shape[0], out.shape[2]))
        if not need_weights:
            return out, None
        if average_attn_weights:
            weights = mean(weights, axis=1)
        if unbatched:
            weights = weights.reshape(tuple(weights.shape)[1:])
        return out, weights

    def _check_shapes(self, query: Any, key: Any, value: Any, key_padding_mask: Any) -> None:
        """torch's checks (after an unbatched input got its batch of 1), as ShapeErrors."""
        for name, x, size in (
            ("query", query, self.embed_dim), ("key", key, self.kdim), ("value", value, self.vdim)
        ):  # fmt: skip
            if x.ndim != 3 or x.shape[-1] != size:
                raise ShapeError(
                    f"MultiheadAttention: {name} must be (L, N, {size}) (or batch first, or "
                    f"unbatched), got shape {tuple(x.shape)}"
                )
        if tuple(key.shape[:2]) != tuple(value.shape[:2]):
            raise ShapeError(
                f"MultiheadAttention: key of shape {tuple(key.shape)} and value of shape "
                f"{tuple(value.shape)} must have the same batch and length"
            )
        first = 0 if self.batch_first else 1
        if query.shape[first] != key.shape[first]:
            raise ShapeError(
                f"MultiheadAttention: query of shape {tuple(query.shape)} and key of shape "
                f"{tuple(key.shape)} must have the same batch size"
            )
        batch, source = key.shape[first], key.shape[1 - first]
        if key_padding_mask is not None and tuple(key_padding_mask.shape) != (batch, source):
            raise ShapeError(
                f"MultiheadAttention: key_padding_mask must have shape (N, S) = "
                f"({batch}, {source}), got {tuple(key_padding_mask.shape)}"
            )

    def _append(self, x: Any, row: Any) -> Any:
        """x (N, heads, S, head_dim) with one more position: `row` (1, 1, E) split into
        heads, or zeros (add_zero_attn)."""
        last = zeros_like(x[:, :, :1, :])
        if row is not None:
            last = last + reshape(row, (1, self.num_heads, 1, self.head_dim))
        return concat([x, last], axis=2)

    def _project(self, x: Any, which: int, batch_first: bool) -> Any:
        """x @ W_which^T + b_which, split into heads: (N, heads, T, head_dim), from x
        (N, T, E) when batch_first, else (T, N, E)."""
        e = self.embed_dim
        if self.in_proj_weight is None:
            weight = (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight)[which]
        else:
            weight = self.in_proj_weight[which * e : (which + 1) * e]
        y = x @ weight.T
        if self.in_proj_bias is not None:
            y = y + self.in_proj_bias[which * e : (which + 1) * e]
        y = reshape(y, (y.shape[0], y.shape[1], self.num_heads, self.head_dim))
        return transpose(y, (0, 2, 1, 3) if batch_first else (1, 2, 0, 3))

    def _masked(
        self, scores: Any, attn_mask: Any, padding: Any, is_causal: bool, batch: Any
    ) -> tuple[Any, list[Any]]:
        """The masked scores, and each mask's blocked positions (boolean, broadcasting to
        the scores), for finding the rows no key is left to."""
        length, source = scores.shape[-2], scores.shape[-1]
        if is_causal and attn_mask is None:
            attn_mask = ~np.tril(np.ones((length, source), np.bool_))
        # the blocked keys come from the masks as given: of an array (or an eager tensor),
        # an array, so that masks leaving every row a key record nothing (fully_masked_rows)
        blocked = []
        if attn_mask is not None:
            want = {2: (length, source), 3: (batch * self.num_heads, length, source)}
            if any(isinstance(d, str) for d in (length, source, batch)):
                pass  # a symbolic size: the ops' own broadcasting checks apply
            elif tuple(attn_mask.shape) != want.get(attn_mask.ndim):
                raise ShapeError(
                    f"MultiheadAttention: attn_mask must have shape (L, S) = {want[2]} or "
                    f"(N * num_heads, L, S) = {want[3]}, got {tuple(attn_mask.shape)}"
                )
            block = blocked_keys(attn_mask, true_attends=False)
            if attn_mask.ndim == 3:  # (N * heads, L, S), as torch
                heads = (batch, self.num_heads, length, source)
                attn_mask, block = reshape(attn_mask, heads), _reshaped(block, heads)
            scores = self._apply(scores, attn_mask)
            blocked.append(block)
        if padding is not None:
            keys = (padding.shape[0], 1, 1, padding.shape[1])
            blocked.append(_reshaped(blocked_keys(padding, true_attends=False), keys))
            scores = self._apply(scores, reshape(padding, keys))
        return scores, blocked

    @staticmethod
    def _apply(scores: Any, mask: Any) -> Any:
        if np.dtype(mask.dtype) == np.bool_:
            return where(mask, -np.inf, scores)
        return scores + mask
