"""Dropout, with torch.nn.functional's signature, drawing its mask from a key.

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
from graphc.ir.errors import GraphcError
from graphc.ir.graph import Graph, active_graph
from graphc.ir.types import TensorType
from graphc.ops import fold_in, random_uniform, where
from graphc.ops.random import KEY
from graphc.ops.symbolic import Symbol

__all__ = ["dropout"]
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
    if not 0.0 <= p <= 1.0:
        raise GraphcError(f"dropout: p must be between 0 and 1, got {p}")
    if not training or p == 0.0:
        return input
    if key is None:
        key = next_key(input)
    keep = random_uniform(key, shape=tuple(input.shape), dtype=input.dtype) >= p
    return where(keep, input * (1.0 / (1.0 - p)) if p < 1.0 else input * 0.0, 0.0)
