"""torch.nn.utils.rnn's pad_sequence (reached as `graphc.nn.utils.rnn`): sequences of
different lengths padded into one batch, on the tape (gradients reach each sequence)
and traceable. Packed sequences (pack_padded_sequence) are not here: graphc's RNNs
take padded batches."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from graphc.ir.errors import GraphcError, ShapeError
from graphc.nn.functional.arrays import pad
from graphc.ops import stack

__all__ = ["pad_sequence"]


def pad_sequence(
    sequences: Sequence[Any],
    batch_first: bool = False,
    padding_value: float = 0.0,
    padding_side: str = "right",
) -> Any:
    """Stack sequences of shape (L_i, *) into (L, B, *) (or (B, L, *) with `batch_first`),
    L the longest, padding each with `padding_value` after its end (`padding_side`
    "right") or before its start ("left"), as torch.nn.utils.rnn.pad_sequence.

    >>> import graphc.eager as ge
    >>> from graphc import nn
    >>> nn.utils.rnn.pad_sequence([ge.ones(2), ge.ones(3)], batch_first=True).tolist()
    [[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]]
    """
    if padding_side not in ("left", "right"):
        raise GraphcError(
            f"pad_sequence: padding_side must be 'left' or 'right', got {padding_side!r}"
        )
    sequences = list(sequences)
    if not sequences:
        raise GraphcError("pad_sequence: got no sequences")
    rest = tuple(sequences[0].shape[1:])
    for index, s in enumerate(sequences):
        if len(s.shape) == 0 or tuple(s.shape[1:]) != rest:
            raise ShapeError(
                f"pad_sequence: sequence {index} has shape {tuple(s.shape)}; every sequence "
                f"must be (length, *{rest})"
            )
    longest = max(s.shape[0] for s in sequences)
    padded = []
    for s in sequences:
        missing = longest - s.shape[0]
        sides = (0, missing) if padding_side == "right" else (missing, 0)
        # F.pad lists the last dim first: no padding there, the sides on dim 0
        padded.append(pad(s, (0, 0) * len(rest) + sides, value=padding_value) if missing else s)
    return stack(padded, axis=0 if batch_first else 1)
