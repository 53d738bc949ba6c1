"""Tensor methods for array manipulation (flip, tril, cumsum, sort, topk, split, ...)."""

from __future__ import annotations


class ArrayMethods:
    """Mixed into Tensor."""
