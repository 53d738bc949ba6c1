"""Embedding and EmbeddingBag: lookup tables of learned rows, PyTorch's nn.Embedding and
nn.EmbeddingBag (the sums, means or maxima of bags of rows)."""

from __future__ import annotations

from typing import Any

import numpy as np

from graphc.eager import Tensor, no_grad, tensor, zeros
from graphc.ir.errors import GraphcError, IndexRangeError, ShapeError
from graphc.ir.types import as_dtype
from graphc.nn import init
from graphc.nn.functional.arrays import embedding
from graphc.nn.functional.bags import embedding_bag
from graphc.nn.module import Module
from graphc.nn.parameter import Parameter

__all__ = ["Embedding", "EmbeddingBag"]


class _Table(Module):
    """What Embedding and EmbeddingBag share: the table `weight`, its initialization
    (N(0, 1) from `generator`, the row `padding_idx` zeroed) and its checks."""

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
            raise GraphcError(f"{type(self).__name__}: scale_grad_by_freq is not supported")
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise IndexRangeError(
                    f"{type(self).__name__}: padding_idx {padding_idx} must be within "
                    f"num_embeddings "
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
                    f"{type(self).__name__}: _weight has shape {tuple(weight.shape)}, expected "
                    f"({num_embeddings}, {embedding_dim})"
                )
        if _freeze:  # a parameter that is not trained, as torch's
            self.weight = Parameter(weight, requires_grad=False)
        else:
            self.weight = weight.requires_grad_()


class Embedding(_Table):
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


class EmbeddingBag(_Table):
    """The sum, mean or max of each bag of rows of `weight` (num_embeddings,
    embedding_dim): torch.nn.EmbeddingBag, initialized as Embedding (N(0, 1), the row
    `padding_idx` zeroed). Bags are a 2-D input, or a 1-D input with `offsets` (see
    graphc.nn.functional.embedding_bag).

    >>> import graphc.eager as ge
    >>> from graphc import nn
    >>> bags = nn.EmbeddingBag(10, 3, mode="sum", generator=0)
    >>> bags(ge.tensor([1, 2, 4, 5, 4]), ge.tensor([0, 2])).shape
    (2, 3)
    """

    def __init__(
        self,
        num_embeddings: int,
        embedding_dim: int,
        max_norm: float | None = None,
        norm_type: float = 2.0,
        scale_grad_by_freq: bool = False,
        mode: str = "mean",
        sparse: bool = False,
        _weight: Any = None,
        include_last_offset: bool = False,
        padding_idx: int | None = None,
        dtype: Any = "float32",
        generator: init.Generator = None,
    ) -> None:
        if mode not in ("sum", "mean", "max"):
            raise GraphcError(f"EmbeddingBag: mode must be 'sum', 'mean' or 'max', got {mode!r}")
        super().__init__(
            num_embeddings, embedding_dim, padding_idx, max_norm, norm_type, scale_grad_by_freq,
            sparse, _weight, dtype=dtype, generator=generator,
        )  # fmt: skip
        self.mode, self.include_last_offset = mode, include_last_offset

    @classmethod
    def from_pretrained(
        cls,
        embeddings: Any,
        freeze: bool = True,
        max_norm: float | None = None,
        norm_type: float = 2.0,
        scale_grad_by_freq: bool = False,
        mode: str = "mean",
        sparse: bool = False,
        include_last_offset: bool = False,
        padding_idx: int | None = None,
    ) -> EmbeddingBag:
        """An EmbeddingBag holding `embeddings` (2-D); trained only if freeze=False."""
        weight = np.asarray(embeddings.numpy() if isinstance(embeddings, Tensor) else embeddings)
        if weight.ndim != 2:
            raise ShapeError(
                f"EmbeddingBag.from_pretrained: embeddings must be 2-D, got {weight.shape}"
            )
        bag = cls(
            *weight.shape, max_norm, norm_type, scale_grad_by_freq, mode, sparse, weight,
            include_last_offset, padding_idx, dtype=weight.dtype,
        )  # fmt: skip
        bag.weight.requires_grad_(not freeze)
        return bag

    def forward(self, input: Any, offsets: Any = None, per_sample_weights: Any = None) -> Any:  # noqa: A002
        return embedding_bag(
            input, self.weight, offsets, self.max_norm, self.norm_type, False, self.mode,
            self.sparse, per_sample_weights, self.include_last_offset, self.padding_idx,
        )  # fmt: skip

    def extra_repr(self) -> str:
        text = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.max_norm is not None:
            text += f", max_norm={self.max_norm}"
        if self.max_norm is not None and self.norm_type != 2:
            text += f", norm_type={self.norm_type}"
        text += f", mode={self.mode!r}"
        if self.padding_idx is not None:
            text += f", padding_idx={self.padding_idx}"
        return text
