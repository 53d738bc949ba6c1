"""Activations and elementwise math of real models (softplus, leaky_relu, elu, selu, silu, hardsigmoid, hardtanh, softsign, log1p, expm1, reciprocal, rsqrt, erf, rounding, mod, logical ops)."""

from __future__ import annotations

__all__: list[str] = []
