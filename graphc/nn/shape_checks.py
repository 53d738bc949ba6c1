"""Shape checks a layer cannot make while tracing with a symbolic batch, made at run time.

A layer refuses some input shapes eagerly (batch norm in training mode refuses an input
with one value per channel, as PyTorch does: its unbiased variance would divide by
zero). Traced with a symbolic batch axis ``B``, the shape is not known yet, so the layer
hands the check to `defer_shape_check`; whoever runs the traced graph with state it must
not corrupt (`compile_train_step`) records the checks with `recording_shape_checks` and
runs them with the fed sizes before each step (`run_shape_checks`), so a refused batch
raises the layer's own error and leaves the state untouched.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import NamedTuple

from graphc.ir.errors import GraphcError
from graphc.ir.types import Dim, bind_shape


class ShapeCheck(NamedTuple):
    """A traced shape (dims may be symbols) and what refuses a concrete one: `problem`
    returns the error message for a refused shape, None for an accepted one."""

    shape: tuple[Dim, ...]
    problem: Callable[[tuple[int, ...]], str | None]
    error: type[GraphcError]


class _Recorders(threading.local):
    def __init__(self) -> None:
        self.stack: list[list[ShapeCheck]] = []


_RECORDERS = _Recorders()


@contextmanager
def recording_shape_checks() -> Iterator[list[ShapeCheck]]:
    """Collect the checks `defer_shape_check` is given inside (a list, filled in order).

    >>> import graphc as gc
    >>> from graphc import nn
    >>> with recording_shape_checks() as checks:
    ...     g = gc.trace(nn.BatchNorm1d(2), gc.TensorSpec(("B", 2)))
    >>> run_shape_checks(checks, {"B": 1})
    Traceback (most recent call last):
    graphc.ir.errors.ShapeError: batch_norm: expected more than 1 value per channel when training, got input of shape (1, 2)
    """  # noqa: E501
    checks: list[ShapeCheck] = []
    _RECORDERS.stack.append(checks)
    try:
        yield checks
    finally:
        _RECORDERS.stack.remove(checks)


def defer_shape_check(
    shape: Sequence[Dim],
    problem: Callable[[tuple[int, ...]], str | None],
    error: type[GraphcError],
) -> None:
    """Check a shape that holds symbols when the sizes are known: recorded for the
    innermost `recording_shape_checks` (dropped when nothing records). A concrete shape
    is the caller's to check at once."""
    if _RECORDERS.stack and any(isinstance(d, str) for d in shape):
        _RECORDERS.stack[-1].append(ShapeCheck(tuple(shape), problem, error))


def run_shape_checks(checks: Sequence[ShapeCheck], bindings: Mapping[str, int]) -> None:
    """Raise the first refusal among `checks` with the symbols bound to `bindings`."""
    for check in checks:
        shape = bind_shape(check.shape, bindings)
        if any(isinstance(d, str) for d in shape):
            continue  # a symbol the caller does not bind: the runtime's shape checks apply
        message = check.problem(shape)  # type: ignore[arg-type]
        if message is not None:
            raise check.error(message)
