"""Embedding: a lookup table of learned rows, PyTorch's nn.Embedding."""

from __future__ import annotations

from typing import Any

import numpy as np

from graphc.eager import Tensor, no_grad, tensor, zeros
from graphc.ir.errors import GraphcError, IndexRangeError, ShapeError
from graphc.ir.types import as_dtype
from graphc.nn import init
from graphc.nn.functional.arrays import embedding
from graphc.nn.module import Module

__all__ = ["Embedding"]


class Embedding(Module):
    """Row `i` of `weight` (num_embeddings, embedding_dim) for each index i of the input.

    Initialized as torch does: weight from N(0, 1) drawn from `generator` (a seed, a
    numpy Generator, or graphc.eager's global one), the row `padding_idx` zeroed; that
    row gets no gradient. With `max_norm` the rows looked up are renormalized in place
    first, as torch's (eagerly only; see F.embedding). state_dict key: `weight`.

    >>> import graphc.eager as ge
    >>> from graphc import nn
    >>> layer = nn.Embedding(10, 3, padding_idx=0, generator=0)
    >>> layer(ge.tensor([[1, 2, 0]])).shape
    (1, 3, 3)
    >>> layer.weight[0].tolist()
    [0.0, 0.0, 0.0]
    """

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        padding_idx: int | None = None,
        max_norm: float | None = None,
        norm_type: float = 2.0,
        scale_grad_by_freq: bool = False,
        sparse: bool = False,
        _weight: Any = None,
        _freeze: bool = False,
        dtype: Any = "float32",
        generator: init.Generator = None,
    ) -> None:
        super().__init__()
        if scale_grad_by_freq:
            raise GraphcError("Embedding: scale_grad_by_freq is not supported")
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise IndexRangeError(
                    f"Embedding: padding_idx {padding_idx} must be within num_embeddings "
                    f"{num_embeddings}"
                )
            padding_idx = padding_idx % num_embeddings
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.padding_idx = padding_idx
        self.max_norm, self.norm_type = max_norm, norm_type
        self.sparse = sparse
        if _weight is None:
            weight = zeros(num_embeddings, embedding_dim, dtype=as_dtype(dtype))
            init.normal_(weight, generator=init.as_generator(generator))
            if padding_idx is not None:
                with no_grad():
                    weight[padding_idx] = 0.0
        else:
            weight = tensor(np.asarray(_weight), dtype=as_dtype(dtype))
            if tuple(weight.shape) != (num_embeddings, embedding_dim):
                raise ShapeError(
                    f"Embedding: _weight has shape {tuple(weight.shape)}, expected "
                    f"({num_embeddings}, {embedding_dim})"
                )
        if _freeze:  # kept in state_dict, not trained
            self.register_buffer("weight", weight)
        else:
            self.weight = weight.requires_grad_()

    @classmethod
    def from_pretrained(
        cls,
        embeddings: Any,
        freeze: bool = True,
        padding_idx: int | None = None,
        **options: Any,
    ) -> Embedding:
        """An Embedding holding `embeddings` (2-D); trained only if freeze=False."""
        weight = np.asarray(embeddings.numpy() if isinstance(embeddings, Tensor) else embeddings)
        if weight.ndim != 2:
            raise ShapeError(
                f"Embedding.from_pretrained: embeddings must be 2-D, got {weight.shape}"
            )
        options.setdefault("dtype", weight.dtype)
        return cls(*weight.shape, padding_idx, _weight=weight, _freeze=freeze, **options)

    def forward(self, indices: Any) -> Any:
        return embedding(indices, self.weight, self.padding_idx, self.max_norm, self.norm_type)

    def extra_repr(self) -> str:
        text = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            text += f", padding_idx={self.padding_idx}"
        if self.max_norm is not None:
            text += f", max_norm={self.max_norm}"
        if self.max_norm is not None and self.norm_type != 2:
            text += f", norm_type={self.norm_type}"
        return text
