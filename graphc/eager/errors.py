"""Errors only the eager side raises; the rest come from graphc.ir.errors.

Each derives from the builtin exception PyTorch raises in the same situation, so a
PyTorch user's `except` clauses keep working.
"""

from __future__ import annotations

from graphc.ir.errors import ArgumentError, GraphcError

__all__ = ["ArgumentError", "TensorTypeError"]  # ArgumentError: graph values raise it too


class TensorTypeError(GraphcError, TypeError):
    """A tensor used where Python needs another kind of object: len() or iteration of a
    0-d tensor, a non-integer tensor as an index (torch: TypeError)."""
