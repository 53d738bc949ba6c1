"""Creating tensors: `tensor`, `from_numpy`, `zeros`, `ones`, `full`, `arange`, `rand`, ...

Default dtypes follow PyTorch: Python floats give float32, Python ints int64, bools
bool. `from_numpy` shares the array's memory; everything else copies. `rand`/`randn`
draw from one generator that `manual_seed` resets.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from graphc.eager.errors import ArgumentError
from graphc.eager.tensor import Tensor, as_array, make
from graphc.ir.errors import DTypeError, ShapeError
from graphc.ir.types import as_dtype
from graphc.ops.devices import check_device
from graphc.ops.methods import sizes
from graphc.ops.random import host_generator, seed_host

_initial_seed: int | None = None


def _finish(array: np.ndarray, requires_grad: bool) -> Tensor:
    t = make(array)
    if requires_grad:
        t.requires_grad = True  # checks for a float dtype
    return t


def _size(size: tuple, keyword: dict, op: str) -> tuple:
    """The shape of `f(2, 3)`, `f((2, 3))` or `f(size=(2, 3))`, torch's three spellings;
    a negative dim is a RuntimeError, as torch's (numpy's is a ValueError)."""
    if set(keyword) - {"size"} or (keyword and size):
        raise TypeError(f"{op}() takes a size, by position or as size=, and dtype, "
                        f"requires_grad, device; got {size} and {sorted(keyword)}")  # fmt: skip
    shape = sizes((keyword["size"],) if keyword else size)
    if any(d < 0 for d in shape):
        raise ShapeError(f"{op}: dims must be non-negative, got size {shape}")
    return shape


def _on_cpu(make_tensor: Callable[..., Tensor]) -> Callable[..., Tensor]:
    """A creation function whose `device=` is checked: "cpu" or None (check_device)."""

    @functools.wraps(make_tensor)
    def made(*args: Any, **kwargs: Any) -> Tensor:
        check_device(kwargs.get("device"), make_tensor.__name__)
        return make_tensor(*args, **kwargs)

    return made


def _float_dtype(dtype: Any) -> np.dtype:
    return np.dtype(np.float32) if dtype is None else as_dtype(dtype)


@_on_cpu
def tensor(data: Any, dtype: Any = None, requires_grad: bool = False, device: Any = None) -> Tensor:
    """A new tensor holding a copy of `data` (nested lists, numbers, arrays, tensors).

    >>> tensor([1.0, 2.0], requires_grad=True)
    tensor([1., 2.], requires_grad=True)
    >>> tensor([1, 2]).dtype
    dtype('int64')
    """
    return _finish(as_array(data, None if dtype is None else as_dtype(dtype)), requires_grad)


def as_tensor(data: Any, dtype: Any = None) -> Tensor:
    """`data` itself if it is already a tensor of that dtype, else `tensor(data)`."""
    if isinstance(data, Tensor) and (dtype is None or as_dtype(dtype) == data.dtype):
        return data
    if isinstance(data, np.ndarray) and (dtype is None or as_dtype(dtype) == data.dtype):
        return from_numpy(data)
    return tensor(data, dtype)


def from_numpy(array: np.ndarray) -> Tensor:
    """A tensor sharing `array`'s memory: writes through either show in both.

    >>> a = np.zeros(2, np.float32)
    >>> t = from_numpy(a)
    >>> a[0] = 5
    >>> t
    tensor([5., 0.])
    """
    if not isinstance(array, np.ndarray):
        raise DTypeError(f"from_numpy expects a numpy array, got {type(array).__name__}")
    as_dtype(array.dtype)
    return make(array)


@_on_cpu
def zeros(*size: Any, dtype: Any = None, requires_grad: bool = False, device: Any = None,
          **size_keyword: Any) -> Tensor:  # fmt: skip
    """zeros(2, 3) or zeros((2, 3)); float32 unless dtype says otherwise."""
    return _finish(np.zeros(_size(size, size_keyword, "zeros"), _float_dtype(dtype)), requires_grad)


@_on_cpu
def ones(*size: Any, dtype: Any = None, requires_grad: bool = False, device: Any = None,
          **size_keyword: Any) -> Tensor:  # fmt: skip
    """ones(2, 3) or ones((2, 3)); float32 unless dtype says otherwise."""
    return _finish(np.ones(_size(size, size_keyword, "ones"), _float_dtype(dtype)), requires_grad)


empty = zeros


@_on_cpu
def full(
    size: Any, fill_value: Any, dtype: Any = None, requires_grad: bool = False, device: Any = None
) -> Tensor:
    """A tensor of `size` filled with `fill_value` (its dtype follows the value's)."""
    if dtype is None:
        dtype = as_array(fill_value).dtype
    return _finish(np.full(_size((size,), {}, "full"), fill_value, as_dtype(dtype)), requires_grad)


def _like(x: Any, dtype: Any) -> tuple[tuple, np.dtype]:
    return tuple(x.shape), as_dtype(x.dtype if dtype is None else dtype)


@_on_cpu
def zeros_like(
    x: Any, dtype: Any = None, requires_grad: bool = False, device: Any = None
) -> Tensor:
    shape, dt = _like(x, dtype)
    return _finish(np.zeros(shape, dt), requires_grad)


@_on_cpu
def ones_like(x: Any, dtype: Any = None, requires_grad: bool = False, device: Any = None) -> Tensor:
    shape, dt = _like(x, dtype)
    return _finish(np.ones(shape, dt), requires_grad)


@_on_cpu
def full_like(
    x: Any, fill_value: Any, dtype: Any = None, requires_grad: bool = False, device: Any = None
) -> Tensor:
    shape, dt = _like(x, dtype)
    return _finish(np.full(shape, fill_value, dt), requires_grad)


empty_like = zeros_like


@_on_cpu
def arange(
    start: Any,
    end: Any = None,
    step: Any = 1,
    dtype: Any = None,
    requires_grad: bool = False,
    device: Any = None,
) -> Tensor:
    """arange(3) -> tensor([0, 1, 2]); int64 for ints, float32 if any bound is a float."""
    if end is None:
        start, end = 0, start
    if dtype is None:
        is_int = all(isinstance(v, (int, np.integer)) for v in (start, end, step))
        dtype = np.int64 if is_int else np.float32
    if step == 0 or (end - start) * step < 0:  # numpy gives nothing (or divides by 0)
        raise ArgumentError(
            f"arange: a step of {step} never gets from {start} to {end} (the step must be "
            "nonzero, of the sign of end - start)"
        )
    return _finish(np.arange(start, end, step).astype(as_dtype(dtype)), requires_grad)


@_on_cpu
def linspace(
    start: float,
    end: float,
    steps: int,
    dtype: Any = None,
    requires_grad: bool = False,
    device: Any = None,
) -> Tensor:
    """`steps` evenly spaced values from start to end inclusive (float32)."""
    if steps < 0:
        raise ArgumentError(f"linspace: the number of steps must be non-negative, got {steps}")
    return _finish(np.linspace(start, end, steps).astype(_float_dtype(dtype)), requires_grad)


@_on_cpu
def logspace(
    start: float,
    end: float,
    steps: int,
    base: float = 10.0,
    dtype: Any = None,
    requires_grad: bool = False,
    device: Any = None,
) -> Tensor:
    """base ** linspace(start, end, steps)."""
    values = np.logspace(start, end, steps, base=base)
    return _finish(values.astype(_float_dtype(dtype)), requires_grad)


@_on_cpu
def eye(
    n: int, m: int | None = None, dtype: Any = None, requires_grad: bool = False, device: Any = None
) -> Tensor:
    """The n x m identity matrix (float32)."""
    _size((n, n if m is None else m), {}, "eye")  # negative sizes: torch's RuntimeError
    return _finish(np.eye(n, m, dtype=_float_dtype(dtype)), requires_grad)


# -- random ------------------------------------------------------------------------------


def manual_seed(seed: int) -> np.random.Generator:
    """Seed the generator behind rand/randn/randint/randperm; returns it.

    >>> _ = manual_seed(0); a = rand(2)
    >>> _ = manual_seed(0); bool((rand(2) == a).all())
    True
    """
    global _initial_seed
    _initial_seed = int(seed)
    return seed_host(seed)


def generator() -> np.random.Generator:
    """The global generator (what manual_seed seeds; ops/random.py holds it)."""
    return host_generator()


def initial_seed() -> int | None:
    return _initial_seed


@_on_cpu
def rand(*size: Any, dtype: Any = None, requires_grad: bool = False, device: Any = None,
          **size_keyword: Any) -> Tensor:  # fmt: skip
    """Uniform samples in [0, 1)."""
    values = generator().random(_size(size, size_keyword, "rand"), dtype=np.float64)
    return _finish(values.astype(_float_dtype(dtype)), requires_grad)


@_on_cpu
def randn(*size: Any, dtype: Any = None, requires_grad: bool = False, device: Any = None,
          **size_keyword: Any) -> Tensor:  # fmt: skip
    """Standard normal samples."""
    values = generator().standard_normal(_size(size, size_keyword, "randn"), dtype=np.float64)
    return _finish(values.astype(_float_dtype(dtype)), requires_grad)


@_on_cpu
def rand_like(x: Any, dtype: Any = None, requires_grad: bool = False, device: Any = None) -> Tensor:
    return rand(
        tuple(x.shape), dtype=x.dtype if dtype is None else dtype, requires_grad=requires_grad
    )


@_on_cpu
def randn_like(
    x: Any, dtype: Any = None, requires_grad: bool = False, device: Any = None
) -> Tensor:
    return randn(
        tuple(x.shape), dtype=x.dtype if dtype is None else dtype, requires_grad=requires_grad
    )


@_on_cpu
def randint(
    low: int, high: int | None = None, size: Any = (), dtype: Any = None, device: Any = None
) -> Tensor:
    """Integers in [low, high) (or [0, low) when high is omitted); int64."""
    if high is None or isinstance(high, (tuple, list)):  # randint(high, size), as torch
        low, high, size = 0, low, size if high is None else high
    if low >= high:
        raise ArgumentError(f"randint: low must be less than high, got low={low} >= high={high}")
    values = generator().integers(low, high, _size((size,), {}, "randint"))
    return make(np.asarray(values, as_dtype(np.int64 if dtype is None else dtype)))


@_on_cpu
def randperm(n: int, dtype: Any = None, device: Any = None) -> Tensor:
    """A random permutation of range(n); int64."""
    return make(generator().permutation(n).astype(as_dtype(np.int64 if dtype is None else dtype)))
