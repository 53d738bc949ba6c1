"""The errors eager code names, defined in graphc.ir.errors with the rest (graph values
raise them too).

Each derives from the builtin exception PyTorch raises in the same situation, so a
PyTorch user's `except` clauses keep working.
"""

from __future__ import annotations

from graphc.ir.errors import ArgumentError, TensorTypeError

# graph values raise these too (len() of a 0-d one: TensorTypeError)
__all__ = ["ArgumentError", "TensorTypeError"]
