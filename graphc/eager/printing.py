"""PyTorch's tensor printing, so that examples print what the tutorials show.

`tensor([[3., 3.],\n        [3., 3.]], grad_fn=<AddBackward0>)`: whole floats get a
trailing dot, others four decimals, scientific notation when magnitudes spread over more
than three decades; every element is padded to a common width; rows wrap at 80 columns;
tensors of more than 1000 elements show their first and last three entries per dim.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from graphc.ir.types import is_float

PRECISION = 4
LINEWIDTH = 80
THRESHOLD = 1000
EDGEITEMS = 3
PREFIX = "tensor("


class _Formatter:
    """Chooses one format (int-like, fixed or scientific) and width for all elements."""

    def __init__(self, values: np.ndarray) -> None:
        self.floating = is_float(values.dtype)
        self.int_mode = True
        self.sci_mode = False
        self.width = 1
        flat = values.reshape(-1)
        if not self.floating:
            for value in flat.tolist():
                self.width = max(self.width, len(str(value)))
            return
        finite = flat[np.isfinite(flat) & (flat != 0)].astype(np.float64)
        if finite.size == 0:
            return
        magnitudes = np.abs(finite)
        low, high = float(magnitudes.min()), float(magnitudes.max())
        self.int_mode = bool(np.all(finite == np.ceil(finite)))
        spread = high / low > 1000.0 or high > 1.0e8
        if self.int_mode:
            self.sci_mode = spread
            extra = 0 if spread else 1  # room for the trailing "."
        else:
            self.sci_mode = spread or low < 1.0e-4
            extra = 0
        for value in finite.tolist():
            self.width = max(self.width, len(self._plain(value)) + extra)

    def _plain(self, value: float) -> str:
        if self.sci_mode:
            return f"{value:.{PRECISION}e}"
        if self.int_mode:
            return f"{value:.0f}"
        return f"{value:.{PRECISION}f}"

    def format(self, value: object) -> str:
        if self.floating:
            number = float(value)  # type: ignore[arg-type]
            text = self._plain(number)
            if self.int_mode and not self.sci_mode and math.isfinite(number):
                text += "."
        else:
            text = str(value)
        return " " * (self.width - len(text)) + text


def _summarized(values: np.ndarray) -> np.ndarray:
    """The entries that a summarized print shows, for choosing the format."""
    if values.ndim == 0:
        return values
    if values.shape[0] > 2 * EDGEITEMS:
        values = np.concatenate([values[:EDGEITEMS], values[-EDGEITEMS:]])
    if values.ndim == 1:
        return values
    return np.stack([_summarized(row) for row in values])


def _vector(values: np.ndarray, indent: int, summarize: bool, fmt: _Formatter) -> str:
    per_line = max(1, (LINEWIDTH - indent) // (fmt.width + 2))
    if summarize and values.shape[0] > 2 * EDGEITEMS:
        items = [fmt.format(v) for v in values[:EDGEITEMS].tolist()] + [" ..."]
        items += [fmt.format(v) for v in values[-EDGEITEMS:].tolist()]
    else:
        items = [fmt.format(v) for v in values.tolist()]
    lines = [", ".join(items[i : i + per_line]) for i in range(0, len(items), per_line)]
    return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"


def _nested(values: np.ndarray, indent: int, summarize: bool, fmt: _Formatter) -> str:
    if values.ndim == 0:
        return fmt.format(values.item())
    if values.ndim == 1:
        return _vector(values, indent, summarize, fmt)
    rows = range(values.shape[0])
    if summarize and values.shape[0] > 2 * EDGEITEMS:
        head = [_nested(values[i], indent + 1, summarize, fmt) for i in rows[:EDGEITEMS]]
        tail = [_nested(values[i], indent + 1, summarize, fmt) for i in rows[-EDGEITEMS:]]
        parts = head + ["..."] + tail
    else:
        parts = [_nested(values[i], indent + 1, summarize, fmt) for i in rows]
    return "[" + ("," + "\n" * (values.ndim - 1) + " " * (indent + 1)).join(parts) + "]"


def format_values(values: np.ndarray, indent: int = len(PREFIX)) -> str:
    """The bracketed body of a tensor's print, e.g. `[[1., 2.],\\n        [3., 4.]]`."""
    if values.size == 0:
        return "[]"
    summarize = values.size > THRESHOLD
    fmt = _Formatter(_summarized(values) if summarize else values)
    return _nested(values, indent, summarize, fmt)


def format_tensor(values: np.ndarray, suffixes: Sequence[str]) -> str:
    """`tensor(<values>, <suffixes>)` laid out as PyTorch does."""
    body = PREFIX + format_values(values)
    parts = [body]
    last_line = len(body) - body.rfind("\n") + 1
    for suffix in suffixes:
        if last_line + len(suffix) + 2 > LINEWIDTH:
            parts.append(",\n" + " " * len(PREFIX) + suffix)
            last_line = len(PREFIX) + len(suffix)
        else:
            parts.append(", " + suffix)
            last_line += len(suffix) + 2
    return "".join(parts) + ")"


def default_suffixes(values: np.ndarray) -> list[str]:
    """The `size=` and `dtype=` notes PyTorch adds for empty or non-default tensors."""
    suffixes = []
    if values.size == 0 and values.ndim != 1:
        suffixes.append(f"size={tuple(values.shape)}")
    # an empty tensor shows no values to tell int64 or bool by, so torch names them too
    implied = (np.float32,) if values.size == 0 else (np.float32, np.int64, np.bool_)
    if values.dtype not in implied:
        suffixes.append(f"dtype={values.dtype.name}")
    return suffixes
