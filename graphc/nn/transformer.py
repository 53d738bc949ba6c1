"""Transformer encoder layers with PyTorch's names, parameters and defaults:
TransformerEncoderLayer and TransformerEncoder.

The layer is torch's: self-attention (nn.MultiheadAttention, `self_attn`) and a
feed-forward block (`linear1`, activation, `dropout`, `linear2`), each with a residual
connection and a LayerNorm (`norm1`, `norm2`), after the block (post-norm, torch's
default) or before it (`norm_first=True`); `dropout1` and `dropout2` on the two
branches. The state_dict keys are torch's, so a torch layer's weights load as they are.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from graphc.ir.errors import GraphcError
from graphc.nn import functional as F
from graphc.nn import init
from graphc.nn.attention import MultiheadAttention
from graphc.nn.containers import ModuleList
from graphc.nn.layers import Linear
from graphc.nn.module import Module
from graphc.nn.norm import LayerNorm
from graphc.nn.regularization import Dropout

__all__ = ["TransformerEncoder", "TransformerEncoderLayer"]

_ACTIVATIONS: dict[str, Callable[[Any], Any]] = {"relu": F.relu, "gelu": F.gelu}


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
        if isinstance(activation, str):
            if activation not in _ACTIVATIONS:
                raise GraphcError(
                    f"TransformerEncoderLayer: activation should be relu or gelu, not {activation!r}"
                )
            activation = _ACTIVATIONS[activation]
        self.activation = activation

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
