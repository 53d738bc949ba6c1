"""Grad mode: whether ops on tensors record the autograd tape.

As in PyTorch the switch is per thread (graphc/ops/grad_state.py holds it: tracing
reads it too), and `no_grad`, `enable_grad`, `set_grad_enabled` and `inference_mode`
work both as context managers and as decorators; a decorated generator function runs
its body in the mode on each resume and gives the caller back its own mode at each
yield.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Generator
from typing import Any, TypeVar

from graphc.ops.grad_state import STATE  # one switch for tensors and graph values

F = TypeVar("F", bound=Callable[..., Any])


def is_grad_enabled() -> bool:
    """True when ops on tensors that require grad record the tape.

    >>> is_grad_enabled()
    True
    """
    return STATE.enabled


class _GradModeSwitch:
    """A context manager and decorator that sets grad mode, then restores it."""

    mode: bool = True

    def __init__(self) -> None:
        self._previous: list[bool] = []

    def __enter__(self) -> None:
        self._previous.append(STATE.enabled)
        STATE.enabled = self.mode

    def __exit__(self, *exc: object) -> None:
        STATE.enabled = self._previous.pop()

    def __call__(self, fn: F) -> F:
        mode = self.mode
        if inspect.isgeneratorfunction(fn):
            # calling fn only makes the generator: the mode must hold while its body runs
            @functools.wraps(fn)
            def generator(*args: Any, **kwargs: Any) -> Any:
                return (yield from _generator_in_mode(fn(*args, **kwargs), mode))

            return generator  # type: ignore[return-value]

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            return _in_mode(mode, fn, *args, **kwargs)

        return wrapper  # type: ignore[return-value]


def _in_mode(mode: bool, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """`fn(*args, **kwargs)` with grad mode set to `mode`, restored after."""
    previous = STATE.enabled
    STATE.enabled = mode
    try:
        return fn(*args, **kwargs)
    finally:
        STATE.enabled = previous


def _generator_in_mode(gen: Generator, mode: bool) -> Generator:
    """Drive `gen`, each resume of its body in grad mode `mode` and the caller's mode
    restored at each yield (what torch does for a decorated generator function): what
    the caller sends or throws in is passed on, and gen's return value is returned."""
    try:
        response = _in_mode(mode, gen.send, None)
        while True:
            try:
                request = yield response
            except GeneratorExit:
                _in_mode(mode, gen.close)
                raise
            except BaseException as exc:  # thrown in by the caller: gen may handle it
                response = _in_mode(mode, gen.throw, exc)
            else:
                response = _in_mode(mode, gen.send, request)
    except StopIteration as stop:
        return stop.value


class no_grad(_GradModeSwitch):  # noqa: N801 - PyTorch's name
    """Do not record the tape: results of ops do not require grad.

    >>> from graphc.eager import tensor
    >>> x = tensor([1.0], requires_grad=True)
    >>> with no_grad():
    ...     y = x * 2
    >>> y.requires_grad
    False

    Also a decorator: `@no_grad()` (or `@no_grad`).
    """

    mode = False

    def __new__(cls, fn: Callable[..., Any] | None = None) -> Any:
        self = super().__new__(cls)
        if fn is not None:  # used as a bare decorator: @no_grad
            self.__init__()
            return self(fn)
        return self

    def __init__(self, fn: Callable[..., Any] | None = None) -> None:
        super().__init__()


class enable_grad(no_grad):  # noqa: N801 - PyTorch's name
    """Record the tape again inside a `no_grad` region; a context manager or decorator."""

    mode = True


class set_grad_enabled(_GradModeSwitch):  # noqa: N801 - PyTorch's name
    """Set grad mode to `mode`: at once when called, restored on leaving a `with` block.

    >>> with set_grad_enabled(False):
    ...     is_grad_enabled()
    False
    >>> is_grad_enabled()
    True
    """

    def __init__(self, mode: bool) -> None:
        super().__init__()
        self.mode = bool(mode)
        self._before = STATE.enabled
        STATE.enabled = self.mode  # like torch: a plain call switches the mode right away

    def __enter__(self) -> None:
        self._previous.append(self._before)  # STATE already holds self.mode (see __init__)
        STATE.enabled = self.mode

    def __call__(self, fn: F) -> F:
        STATE.enabled = self._before  # as a decorator it only applies inside calls of fn
        return super().__call__(fn)


class inference_mode(_GradModeSwitch):  # noqa: N801 - PyTorch's name
    """PyTorch's inference mode, which here is grad mode off (`inference_mode(False)`:
    on, as in torch); a context manager or decorator (`@inference_mode` too).

    >>> with inference_mode():
    ...     is_grad_enabled()
    False
    """

    def __new__(cls, mode: Any = True) -> Any:
        self = super().__new__(cls)
        if callable(mode):  # used as a bare decorator: @inference_mode
            self.__init__()
            return self(mode)
        return self

    def __init__(self, mode: Any = True) -> None:
        super().__init__()
        self.mode = not mode
