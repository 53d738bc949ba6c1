"""Tensor methods that change dtype or make copies, with PyTorch's names."""

from __future__ import annotations

from typing import Any

import numpy as np

from graphc.ir.types import as_dtype
from graphc.ops import elementwise as E


class ConversionMethods:
    """`to`, `float()`, `double()`, `clone()`, `new_zeros()`, ... (mixed into `Tensor`)."""

    dtype: np.dtype

    def to(self, *args: Any, dtype: Any = None, **kwargs: Any) -> Any:
        """`to(dtype)`; devices other than "cpu" do not exist here and are ignored."""
        for arg in args:
            if not (isinstance(arg, str) and arg.startswith("cpu")):
                dtype = arg
        if dtype is None or as_dtype(dtype) == self.dtype:  # type: ignore[attr-defined]
            return self
        return E.cast(self, dtype)

    def type(self, dtype: Any = None) -> Any:
        if dtype is None:
            return f"graphc.{self.dtype.name}"  # type: ignore[attr-defined]
        return self.to(dtype)

    def float(self) -> Any:
        return self.to(np.float32)

    def double(self) -> Any:
        return self.to(np.float64)

    def long(self) -> Any:
        return self.to(np.int64)

    def int(self) -> Any:
        return self.to(np.int32)

    def bool(self) -> Any:
        return self.to(np.bool_)

    def cast(self, dtype: Any) -> Any:
        return E.cast(self, dtype)

    def full_like(self, value: Any) -> Any:
        """A tensor like this one filled with `value` (the op; see also new_full)."""
        return E.full_like(self, value)

    def cpu(self) -> Any:
        return self

    def contiguous(self) -> Any:
        """Self when its memory is in row-major order, else a row-major copy on the tape."""
        if self._data.flags.c_contiguous:  # type: ignore[attr-defined]
            return self
        out = E.cast(self, self.dtype)
        out._data = np.ascontiguousarray(out._data)
        if out.grad_fn is not None:
            out.grad_fn.rebase_output(out)
        return out

    def is_contiguous(self) -> bool:
        """True when the memory is in row-major order without gaps (a copy is not needed)."""
        return bool(self._data.flags.c_contiguous)  # type: ignore[attr-defined]

    def clone(self) -> Any:
        """A copy that stays on the tape (gradients flow back to self)."""
        return E.cast(self, self.dtype)  # type: ignore[attr-defined]

    def new_tensor(self, data: Any) -> Any:
        from graphc.eager.creation import tensor

        return tensor(data, dtype=self.dtype)  # type: ignore[attr-defined]

    def new_zeros(self, *shape: Any) -> Any:
        from graphc.eager.creation import zeros

        return zeros(*shape, dtype=self.dtype)  # type: ignore[attr-defined]

    def new_ones(self, *shape: Any) -> Any:
        from graphc.eager.creation import ones

        return ones(*shape, dtype=self.dtype)  # type: ignore[attr-defined]
