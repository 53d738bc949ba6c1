"""Dropout, with torch.nn.functional's signatures, drawing its masks from a key: dropout
(each element), dropout1d/2d/3d (whole channels), alpha_dropout and feature_alpha_dropout
(SELU's, keeping mean and variance); gumbel_softmax draws its noise from the same keys.

Eagerly, each call draws a fresh key from graphc.eager's global generator
(`graphc.eager.manual_seed` makes runs repeatable), as PyTorch draws from its own.
On graph values the mask must differ from call to call of the compiled graph, so the
key is an input: the first dropout traced into a graph declares an int64 placeholder
`rng_key` there (in the outermost graph being declared; bodies capture it), and each
dropout of that graph folds it with its own index (`fold_in`), so two layers never
share a mask. `gc.compile_train_step` keeps `rng_key` as state and folds it every
step; `gc.jit` feeds a fresh key to every call (from graphc.eager's generator, as eager
dropout draws); other executables take it as a feed (`rng_key=...`).
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np

from graphc.eager import creation
from graphc.ir.errors import GraphcError, ShapeError
from graphc.ir.graph import Graph, active_graph
from graphc.ir.types import TensorType
from graphc.ops import argmax, cast, fold_in, log, log1p, maximum, random_uniform, softmax, where
from graphc.ops.custom import stopped
from graphc.ops.random import KEY
from graphc.ops.symbolic import Symbol

__all__ = [
    "alpha_dropout",
    "dropout",
    "dropout1d",
    "dropout2d",
    "dropout3d",
    "feature_alpha_dropout",
    "gumbel_softmax",
]
# SELU's negative saturation, -scale * alpha: where alpha dropout sets the dropped values
_SELU_SATURATION = -1.0507009873554804934193349852946 * 1.6732632423543772848170429916717
_USES: weakref.WeakKeyDictionary[Graph, int] = weakref.WeakKeyDictionary()


def _outermost() -> Graph | None:
    from graphc.ir.graph import _declaring  # the stack of graphs being declared

    graphs = _declaring()
    return graphs[0] if graphs else None


def next_key(like: Any) -> Any:
    """A key for one random draw: from the graph's `rng_key` placeholder while
    declaring or tracing, else from graphc.eager's global generator."""
    root = _outermost()
    if root is None and isinstance(like, Symbol):
        root = like.graph
    if root is None:
        return np.int64(creation.generator().integers(-(2**63), 2**63 - 1))
    if KEY in root:
        key = root.node(KEY)
    else:
        key = root.add_placeholder(KEY, TensorType((), "int64"))
    count = _USES.get(root, 0)
    _USES[root] = count + 1
    if active_graph() is None:
        raise GraphcError("dropout: no graph is being declared for the graph value it got")
    return fold_in(Symbol(key), count)


def dropout(
    input: Any,  # noqa: A002 - torch's name
    p: float = 0.5,
    training: bool = True,
    inplace: bool = False,
    *,
    key: Any = None,
) -> Any:
    """Zero each element with probability `p` and scale the rest by 1/(1-p) while
    `training` (torch.nn.functional.dropout); the identity otherwise.
    `inplace=True` is accepted and computes out of place, as the activations do: the
    result is a new tensor and the input keeps its values.

    >>> import graphc.eager as ge
    >>> from graphc.nn import functional as F
    >>> _ = ge.manual_seed(0)
    >>> y = F.dropout(ge.ones(1000), p=0.25)
    >>> sorted(set(y.tolist())), 700 < int((y > 0).sum().item()) < 800
    ([0.0, 1.3333333730697632], True)
    """
    _check_p(p, "dropout")
    if not training or p == 0.0:
        return input
    return _masked(input, p, tuple(input.shape), key)


def _check_p(p: float, op: str) -> None:
    if not 0.0 <= p <= 1.0:
        raise GraphcError(f"{op}: p must be between 0 and 1, got {p}")


def _keep(input: Any, p: float, mask_shape: tuple, key: Any) -> Any:
    """A boolean mask of `mask_shape`, each entry True with probability 1 - p."""
    if key is None:
        key = next_key(input)
    return random_uniform(key, shape=mask_shape, dtype=input.dtype) >= p


def _masked(input: Any, p: float, mask_shape: tuple, key: Any) -> Any:
    """input scaled by 1/(1-p) where a mask of `mask_shape` (broadcast against it) keeps
    it, zero elsewhere."""
    keep = _keep(input, p, mask_shape, key)
    return where(keep, input * (1.0 / (1.0 - p)) if p < 1.0 else input * 0.0, 0.0)


def _channel_mask_shape(shape: tuple) -> tuple:
    """One mask entry per (example, channel) of an (N, C, ...) input (torch's feature
    dropout; a 2-D input (N, C) gets one per element)."""
    return shape[:2] + (1,) * (len(shape) - 2)


def _feature_dropout(input: Any, p: float, training: bool, op: str, ranks: tuple,  # noqa: A002
                     key: Any, strict: bool) -> Any:  # fmt: skip
    """Channel dropout of an input of rank ranks[1] (batched) or ranks[0] (one example,
    given a batch dim of one for the mask). Other ranks are torch's deprecated forms:
    refused when `strict` (dropout1d), else masked per (dim 0, dim 1), as torch does."""
    _check_p(p, op)
    rank = len(input.shape)
    if strict and rank not in ranks:
        raise ShapeError(
            f"{op}: expected a {ranks[0]}D (unbatched) or {ranks[1]}D (batched) input, got "
            f"shape {tuple(input.shape)}"
        )
    if not training or p == 0.0:
        return input
    shape = tuple(input.shape)
    if rank < 2:  # torch's feature dropout needs (N, C, ...)
        raise ShapeError(f"{op}: expected an input with a channel dim, got shape {shape}")
    if rank == ranks[0] and op != "dropout2d":  # (C, ...): one entry per channel
        return _masked(input, p, shape[:1] + (1,) * (rank - 1), key)
    return _masked(input, p, _channel_mask_shape(shape), key)


def dropout1d(input: Any, p: float = 0.5, training: bool = True, inplace: bool = False,  # noqa: A002
              *, key: Any = None) -> Any:  # fmt: skip
    """Zero whole channels of an (N, C, L) or (C, L) input, each with probability `p`,
    and scale the rest by 1/(1-p) while `training` (torch.nn.functional.dropout1d).

    >>> import graphc.eager as ge
    >>> from graphc.nn import functional as F
    >>> _ = ge.manual_seed(0)
    >>> y = F.dropout1d(ge.ones(2, 100, 3), p=0.5).numpy()
    >>> bool((y.min(axis=2) == y.max(axis=2)).all())   # a channel is kept or dropped whole
    True
    """
    return _feature_dropout(input, p, training, "dropout1d", (2, 3), key, strict=True)


def dropout2d(input: Any, p: float = 0.5, training: bool = True, inplace: bool = False,  # noqa: A002
              *, key: Any = None) -> Any:  # fmt: skip
    """Zero whole channels of an (N, C, H, W) input, each with probability `p`, and scale
    the rest by 1/(1-p) while `training` (torch.nn.functional.dropout2d). As torch's, a
    3-D input is taken as (N, C, L) (channels of a batch, not an image without its batch
    dim) and other ranks mask per entry of their first two dims.

    >>> import graphc.eager as ge
    >>> from graphc.nn import functional as F
    >>> F.dropout2d(ge.ones(1, 2, 3, 3), training=False).shape
    (1, 2, 3, 3)
    """
    return _feature_dropout(input, p, training, "dropout2d", (3, 4), key, strict=False)


def dropout3d(input: Any, p: float = 0.5, training: bool = True, inplace: bool = False,  # noqa: A002
              *, key: Any = None) -> Any:  # fmt: skip
    """Zero whole channels of an (N, C, D, H, W) or (C, D, H, W) input, each with
    probability `p`, and scale the rest by 1/(1-p) while `training`
    (torch.nn.functional.dropout3d); other ranks mask per entry of their first two dims.

    >>> import graphc.eager as ge
    >>> from graphc.nn import functional as F
    >>> F.dropout3d(ge.ones(2, 2, 2, 2), p=1.0).abs().sum().item()
    0.0
    """
    return _feature_dropout(input, p, training, "dropout3d", (4, 5), key, strict=False)


def _alpha_masked(input: Any, p: float, mask_shape: tuple, key: Any) -> Any:
    """Alpha dropout with a mask of `mask_shape`: dropped entries become SELU's
    saturation value, then an affine map a * x + b restores the mean and variance
    (zero and one for inputs of zero mean and unit variance), with torch's a and b."""
    if p == 1.0:  # torch: every entry dropped gives zeros
        return input * 0.0
    keep = _keep(input, p, mask_shape, key)
    alpha = _SELU_SATURATION
    a = 1.0 / ((alpha * alpha * p + 1.0) * (1.0 - p)) ** 0.5
    b = -a * alpha * p
    return where(keep, input * a + b, a * alpha + b)


def alpha_dropout(input: Any, p: float = 0.5, training: bool = False, inplace: bool = False,  # noqa: A002
                  *, key: Any = None) -> Any:  # fmt: skip
    """Dropout for SELU networks (torch.nn.functional.alpha_dropout): while `training`,
    each element is set, with probability `p`, to SELU's negative saturation, and all are
    then scaled and shifted so that the mean and variance stay as they were.

    >>> import graphc.eager as ge
    >>> from graphc.nn import functional as F
    >>> F.alpha_dropout(ge.ones(3), 0.2).tolist()   # training=False by default, as torch's
    [1.0, 1.0, 1.0]
    """
    _check_p(p, "alpha_dropout")
    if not training or p == 0.0:
        return input
    return _alpha_masked(input, p, tuple(input.shape), key)


def feature_alpha_dropout(input: Any, p: float = 0.5, training: bool = False,  # noqa: A002
                          inplace: bool = False, *, key: Any = None) -> Any:  # fmt: skip
    """Alpha dropout of whole channels of an (N, C, ...) input
    (torch.nn.functional.feature_alpha_dropout).

    >>> import graphc.eager as ge
    >>> from graphc.nn import functional as F
    >>> F.feature_alpha_dropout(ge.ones(2, 3, 4), 0.5, training=False).shape
    (2, 3, 4)
    """
    _check_p(p, "feature_alpha_dropout")
    if not training or p == 0.0:
        return input
    shape = tuple(input.shape)
    if len(shape) < 2:
        raise ShapeError(
            f"feature_alpha_dropout: expected an input with a channel dim, got shape {shape}"
        )
    return _alpha_masked(input, p, _channel_mask_shape(shape), key)


def gumbel_softmax(logits: Any, tau: float = 1.0, hard: bool = False, eps: float = 1e-10,
                   dim: int = -1, *, key: Any = None) -> Any:  # fmt: skip
    """softmax((logits + g) / tau) along `dim` with g Gumbel(0, 1) noise, a sample of the
    relaxed categorical distribution (torch.nn.functional.gumbel_softmax); with `hard`,
    the one-hot of its largest entry in the forward and the soft sample's gradient (the
    straight-through estimator). `eps` is accepted and unused, as torch's.

    >>> import graphc.eager as ge
    >>> from graphc.nn import functional as F
    >>> y = F.gumbel_softmax(ge.zeros(4, 3), hard=True)
    >>> y.sum(-1).tolist()
    [1.0, 1.0, 1.0, 1.0]
    """
    if tau <= 0:
        raise GraphcError(f"gumbel_softmax: tau must be positive, got {tau}")
    shape = tuple(logits.shape)
    if key is None:
        key = next_key(logits)
    uniform = random_uniform(key, shape=shape, dtype=logits.dtype)
    # -log of an Exponential(1) draw (-log(1 - u)), kept off 0 so no noise is infinite
    exponential = maximum(-log1p(-uniform), float(np.finfo(np.dtype(logits.dtype)).tiny))
    soft = softmax((logits - log(exponential)) / tau, axis=dim)
    if not hard:
        return soft
    axis = dim % len(shape)
    positions = np.arange(shape[axis]).reshape((-1,) + (1,) * (len(shape) - axis - 1))
    one_hot = cast(argmax(soft, axis=axis, keepdims=True) == positions, soft.dtype)
    return one_hot - stopped(soft) + soft
