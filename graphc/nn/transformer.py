"""Transformers with PyTorch's names, parameters and defaults: TransformerEncoderLayer,
TransformerEncoder, TransformerDecoderLayer, TransformerDecoder and Transformer.

The encoder layer is torch's: self-attention (nn.MultiheadAttention, `self_attn`) and a
feed-forward block (`linear1`, activation, `dropout`, `linear2`), each with a residual
connection and a LayerNorm (`norm1`, `norm2`), after the block (post-norm, torch's
default) or before it (`norm_first=True`); `dropout1` and `dropout2` on the two
branches. The decoder layer puts attention to the encoder's output (`multihead_attn`,
`norm2`, `dropout2`) between the two (its feed-forward block's are `norm3`,
`dropout3`). The state_dict keys are torch's, so a torch model's weights load as they are.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import numpy as np

from graphc.eager import tensor
from graphc.ir.errors import GraphcError, ShapeError
from graphc.ir.types import as_dtype
from graphc.nn import functional as F
from graphc.nn import init
from graphc.nn.attention import MultiheadAttention
from graphc.nn.containers import ModuleList
from graphc.nn.layers import Linear
from graphc.nn.module import Module
from graphc.nn.norm import LayerNorm
from graphc.nn.regularization import Dropout

__all__ = [
    "Transformer",
    "TransformerDecoder",
    "TransformerDecoderLayer",
    "TransformerEncoder",
    "TransformerEncoderLayer",
]

_ACTIVATIONS: dict[str, Callable[[Any], Any]] = {"relu": F.relu, "gelu": F.gelu}


def _activation(layer: str, activation: str | Callable[[Any], Any]) -> Callable[[Any], Any]:
    if not isinstance(activation, str):
        return activation
    if activation not in _ACTIVATIONS:
        raise GraphcError(f"{layer}: activation should be relu or gelu, not {activation!r}")
    return _ACTIVATIONS[activation]


class TransformerEncoderLayer(Module):
    """torch.nn.TransformerEncoderLayer.

    >>> import graphc.eager as ge
    >>> from graphc import nn
    >>> layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0,
    ...                                    batch_first=True, generator=0)
    >>> layer(ge.ones(3, 5, 8)).shape
    (3, 5, 8)
    """

    def __init__(
        self,
        d_model: int,
        nhead: int,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation: str | Callable[[Any], Any] = "relu",
        layer_norm_eps: float = 1e-5,
        batch_first: bool = False,
        norm_first: bool = False,
        bias: bool = True,
        dtype: Any = "float32",
        generator: init.Generator = None,
    ) -> None:
        super().__init__()
        rng = init.as_generator(generator)
        self.self_attn = MultiheadAttention(
            d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first,
            dtype=dtype, generator=rng,
        )  # fmt: skip
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, dtype=dtype, generator=rng)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, dtype=dtype, generator=rng)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.dropout1, self.dropout2 = Dropout(dropout), Dropout(dropout)
        self.activation = _activation("TransformerEncoderLayer", activation)

    def forward(
        self,
        src: Any,
        src_mask: Any = None,
        src_key_padding_mask: Any = None,
        is_causal: bool = False,
    ) -> Any:
        x = src
        if self.norm_first:
            x = x + self._attention(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            return x + self._feed_forward(self.norm2(x))
        x = self.norm1(x + self._attention(x, src_mask, src_key_padding_mask, is_causal))
        return self.norm2(x + self._feed_forward(x))

    def _attention(self, x: Any, mask: Any, padding: Any, is_causal: bool) -> Any:
        out, _ = self.self_attn(
            x, x, x, attn_mask=mask, key_padding_mask=padding, need_weights=False,
            is_causal=is_causal,
        )  # fmt: skip
        return self.dropout1(out)

    def _feed_forward(self, x: Any) -> Any:
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerEncoder(Module):
    """torch.nn.TransformerEncoder: `num_layers` copies of `encoder_layer` (`layers.0`,
    `layers.1`, ...; each a deep copy, so they start equal, as torch's), then `norm`."""

    def __init__(
        self, encoder_layer: TransformerEncoderLayer, num_layers: int, norm: Any = None
    ) -> None:
        super().__init__()
        self.layers = ModuleList([copy.deepcopy(encoder_layer) for _ in range(num_layers)])
        self.num_layers, self.norm = num_layers, norm

    def forward(
        self, src: Any, mask: Any = None, src_key_padding_mask: Any = None, is_causal: bool = False
    ) -> Any:
        x = src
        for layer in self.layers:
            x = layer(
                x, src_mask=mask, src_key_padding_mask=src_key_padding_mask, is_causal=is_causal
            )
        return x if self.norm is None else self.norm(x)


class TransformerDecoderLayer(Module):
    """torch.nn.TransformerDecoderLayer: self-attention over `tgt`, attention to the
    encoder's output `memory`, then the feed-forward block, each with a residual
    connection and a LayerNorm (after, or before with `norm_first`).

    >>> import graphc.eager as ge
    >>> from graphc import nn
    >>> layer = nn.TransformerDecoderLayer(8, 2, dim_feedforward=16, dropout=0.0,
    ...                                    batch_first=True, generator=0)
    >>> layer(ge.ones(3, 4, 8), ge.ones(3, 6, 8)).shape
    (3, 4, 8)
    """

    def __init__(
        self,
        d_model: int,
        nhead: int,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation: str | Callable[[Any], Any] = "relu",
        layer_norm_eps: float = 1e-5,
        batch_first: bool = False,
        norm_first: bool = False,
        bias: bool = True,
        dtype: Any = "float32",
        generator: init.Generator = None,
    ) -> None:
        super().__init__()
        rng = init.as_generator(generator)
        for name in ("self_attn", "multihead_attn"):
            attention = MultiheadAttention(
                d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first,
                dtype=dtype, generator=rng,
            )  # fmt: skip
            setattr(self, name, attention)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, dtype=dtype, generator=rng)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, dtype=dtype, generator=rng)
        self.norm_first = norm_first
        for k in (1, 2, 3):
            setattr(self, f"norm{k}", LayerNorm(d_model, layer_norm_eps, bias=bias, dtype=dtype))
        for k in (1, 2, 3):
            setattr(self, f"dropout{k}", Dropout(dropout))
        self.activation = _activation("TransformerDecoderLayer", activation)

    def forward(
        self,
        tgt: Any,
        memory: Any,
        tgt_mask: Any = None,
        memory_mask: Any = None,
        tgt_key_padding_mask: Any = None,
        memory_key_padding_mask: Any = None,
        tgt_is_causal: bool = False,
        memory_is_causal: bool = False,
    ) -> Any:
        x = tgt
        attend_self = (tgt_mask, tgt_key_padding_mask, bool(tgt_is_causal))
        attend_memory = (memory_mask, memory_key_padding_mask, bool(memory_is_causal))
        if self.norm_first:
            x = x + self._attention(self.self_attn, self.norm1(x), None, *attend_self)
            x = x + self._attention(self.multihead_attn, self.norm2(x), memory, *attend_memory)
            return x + self._feed_forward(self.norm3(x))
        x = self.norm1(x + self._attention(self.self_attn, x, None, *attend_self))
        x = self.norm2(x + self._attention(self.multihead_attn, x, memory, *attend_memory))
        return self.norm3(x + self._feed_forward(x))

    def _attention(
        self, attention: Module, x: Any, memory: Any, mask: Any, padding: Any, is_causal: bool
    ) -> Any:
        source = x if memory is None else memory
        out, _ = attention(
            x, source, source, attn_mask=mask, key_padding_mask=padding, need_weights=False,
            is_causal=is_causal,
        )  # fmt: skip
        return (self.dropout1 if memory is None else self.dropout2)(out)

    def _feed_forward(self, x: Any) -> Any:
        return self.dropout3(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerDecoder(Module):
    """torch.nn.TransformerDecoder: `num_layers` copies of `decoder_layer` (`layers.0`,
    ...; deep copies, as torch's), then `norm`."""

    def __init__(
        self, decoder_layer: TransformerDecoderLayer, num_layers: int, norm: Any = None
    ) -> None:
        super().__init__()
        self.layers = ModuleList([copy.deepcopy(decoder_layer) for _ in range(num_layers)])
        self.num_layers, self.norm = num_layers, norm

    def forward(
        self,
        tgt: Any,
        memory: Any,
        tgt_mask: Any = None,
        memory_mask: Any = None,
        tgt_key_padding_mask: Any = None,
        memory_key_padding_mask: Any = None,
        tgt_is_causal: bool | None = None,
        memory_is_causal: bool = False,
    ) -> Any:
        x = tgt
        for layer in self.layers:
            x = layer(
                x, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask,
                bool(tgt_is_causal), memory_is_causal,
            )  # fmt: skip
        return x if self.norm is None else self.norm(x)


class Transformer(Module):
    """torch.nn.Transformer: an encoder and a decoder (each ending in a LayerNorm), every
    weight matrix drawn xavier-uniform as torch's.

    >>> import graphc.eager as ge
    >>> from graphc import nn
    >>> model = nn.Transformer(8, 2, 1, 1, 16, dropout=0.0, batch_first=True, generator=0)
    >>> model(ge.ones(3, 5, 8), ge.ones(3, 4, 8)).shape
    (3, 4, 8)
    """

    def __init__(
        self,
        d_model: int = 512,
        nhead: int = 8,
        num_encoder_layers: int = 6,
        num_decoder_layers: int = 6,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation: str | Callable[[Any], Any] = "relu",
        custom_encoder: Any = None,
        custom_decoder: Any = None,
        layer_norm_eps: float = 1e-5,
        batch_first: bool = False,
        norm_first: bool = False,
        bias: bool = True,
        dtype: Any = "float32",
        generator: init.Generator = None,
    ) -> None:
        super().__init__()
        rng = init.as_generator(generator)
        shared = dict(
            dim_feedforward=dim_feedforward, dropout=dropout, activation=activation,
            layer_norm_eps=layer_norm_eps, batch_first=batch_first, norm_first=norm_first,
            bias=bias, dtype=dtype, generator=rng,
        )  # fmt: skip

        def norm() -> LayerNorm:
            return LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)

        self.encoder = custom_encoder
        if custom_encoder is None:
            layer = TransformerEncoderLayer(d_model, nhead, **shared)
            self.encoder = TransformerEncoder(layer, num_encoder_layers, norm())
        self.decoder = custom_decoder
        if custom_decoder is None:
            layer = TransformerDecoderLayer(d_model, nhead, **shared)
            self.decoder = TransformerDecoder(layer, num_decoder_layers, norm())
        for p in self.parameters():  # torch's _reset_parameters
            if len(p.shape) > 1:
                init.xavier_uniform_(p, generator=rng)
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first

    def forward(
        self,
        src: Any,
        tgt: Any,
        src_mask: Any = None,
        tgt_mask: Any = None,
        memory_mask: Any = None,
        src_key_padding_mask: Any = None,
        tgt_key_padding_mask: Any = None,
        memory_key_padding_mask: Any = None,
        src_is_causal: bool | None = None,
        tgt_is_causal: bool | None = None,
        memory_is_causal: bool = False,
    ) -> Any:
        batch_axis = 0 if self.batch_first else 1
        if len(src.shape) == 3 and src.shape[batch_axis] != tgt.shape[batch_axis]:
            raise ShapeError(
                f"Transformer: src of shape {tuple(src.shape)} and tgt of shape "
                f"{tuple(tgt.shape)} must have the same batch size"
            )
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise ShapeError(
                f"Transformer: the features of src {tuple(src.shape)} and tgt "
                f"{tuple(tgt.shape)} must be d_model ({self.d_model})"
            )
        memory = self.encoder(src, src_mask, src_key_padding_mask, bool(src_is_causal))
        return self.decoder(
            tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask,
            tgt_is_causal, memory_is_causal,
        )  # fmt: skip

    @staticmethod
    def generate_square_subsequent_mask(size: int, dtype: Any = "float32") -> Any:
        """A float (size, size) mask: 0 on and below the diagonal, -inf above (each
        position attends to itself and the ones before), as torch's."""
        mask = np.triu(np.full((size, size), -np.inf), 1)
        return tensor(mask.astype(as_dtype(dtype)))
