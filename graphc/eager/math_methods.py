"""Tensor methods for the elementwise math of real models (erf, log1p, floor, ...)."""

from __future__ import annotations


class MathMethods:
    """Mixed into Tensor."""
