"""The graphc error hierarchy.

Every mistake a user can make surfaces as a subclass of `GraphcError` whose message
names the node, placeholder or op involved and what was expected versus what came.
Each class also derives from the builtin exceptions a Python or PyTorch user would
catch in the same situation, so their `except` clauses keep working: PyTorch raises
RuntimeError for shape, dtype and autograd mistakes (so do ours, besides ValueError
or TypeError), and IndexError for an index out of range.
"""

from __future__ import annotations


class GraphcError(Exception):
    """Base class of every error graphc raises on purpose."""

    def __init__(self, *args: object, node: str | None = None) -> None:
        super().__init__(*args)
        self.node = node  # the node whose step raised it, where the runner knows it


class ShapeError(GraphcError, ValueError, RuntimeError):
    """Shapes do not fit an op's type rule, or a feed's shape is wrong."""


class DTypeError(GraphcError, TypeError, RuntimeError):
    """A dtype is unsupported or does not fit an op's type rule."""


class IndexRangeError(ShapeError, IndexError):
    """An index (of take, one_hot, getitem) is out of range for the dim it indexes."""


class DivisionByZeroError(GraphcError, ZeroDivisionError, RuntimeError):
    """An integer divided by zero (numpy answers 0 with a warning; PyTorch raises a
    RuntimeError)."""


class ArgumentError(GraphcError, ValueError, RuntimeError):
    """An argument's value torch refuses: clamp() without bounds, an unknown
    rounding_mode (torch: RuntimeError; ValueError where torch checks in Python), on
    eager tensors and graph values alike."""


class FeedError(GraphcError, ValueError):
    """A feed is missing, unexpected, or of the wrong shape or dtype."""


class UnknownOpError(GraphcError, KeyError):
    """An op name that is not in the registry."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class GraphMismatchError(GraphcError, ValueError):
    """A value from one Graph was used while building another."""


class VerifyError(GraphcError, ValueError):
    """A graph breaks an IR invariant (order, names, arity, types)."""


class CycleError(VerifyError):
    """A graph's edges form a cycle."""


class ParseError(GraphcError, ValueError):
    """Malformed graph text or JSON; the message names the line or field."""


class TracingError(GraphcError, RuntimeError):
    """Tracing met something a static graph cannot express."""


class TensorTypeError(GraphcError, TypeError):
    """A tensor or graph value used where Python needs another kind of object: len() or
    iteration of a 0-d one, a non-integer tensor as an index (torch: TypeError)."""


class NumericsError(GraphcError, FloatingPointError):
    """A NaN or infinity appeared while `check_numerics=True`."""


class AutodiffError(GraphcError, ValueError, RuntimeError):
    """A gradient was asked for something that cannot be differentiated."""
