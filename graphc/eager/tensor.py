"""The eager `Tensor`: a numpy array plus PyTorch's autograd bookkeeping.

Ops on tensors run at once through the op registry's kernels (see value_kind.py); when
grad mode is on and an input requires grad, the result also gets a `grad_fn`, a record
of the autograd tape whose backward calls the op's own VJP rule.

Attributes live in the instance dict with class-level defaults, so making a tensor
costs two attribute writes; the rest is set only where it differs.
"""

from __future__ import annotations

import copy
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from graphc.eager import printing
from graphc.eager.composites import CompositeMethods
from graphc.eager.counting import CountingMethods
from graphc.eager.errors import TensorTypeError
from graphc.eager.inplace import InPlaceMethods
from graphc.eager.methods import EagerMethods
from graphc.ir.errors import AutodiffError, DTypeError, ShapeError
from graphc.ir.graph import rich_display
from graphc.ir.types import as_dtype, is_float
from graphc.ops.methods import ValueMethods

_new = object.__new__


def make(array: np.ndarray) -> Tensor:
    """A tensor over `array` (no copy, no checks): the fast path of every op."""
    t = _new(Tensor)
    t._data = array
    t._counter = [0]
    return t


def as_array(data: Any, dtype: Any = None) -> np.ndarray:
    """A fresh C-ordered array of supported dtype (a Fortran-ordered or strided source is
    copied into C order, as torch.tensor copies into contiguous memory: compiled plans
    read C order, so eager sums in the same order); Python floats become float32."""
    if isinstance(data, Tensor):
        array = np.array(data._data, dtype=dtype, order="C")
    elif isinstance(data, (np.ndarray, np.generic)):
        array = np.array(data, dtype=dtype, order="C")
    else:
        if isinstance(data, (list, tuple)):
            data = [x._data if isinstance(x, Tensor) else x for x in data]
        array = np.array(data, dtype=dtype)
        if dtype is None and array.dtype == np.float64:
            array = array.astype(np.float32)
    try:
        as_dtype(array.dtype)
    except DTypeError as exc:
        raise DTypeError(f"tensor(): {exc} (from {type(data).__name__})") from None
    return array


def check_grad(t: Tensor, grad: Any) -> None:
    """What torch checks when `.grad` is assigned: a tensor of t's shape and dtype."""
    if not isinstance(grad, Tensor):
        raise TensorTypeError(
            f"assigned grad expected to be a Tensor or None but got grad of type "
            f"{type(grad).__name__}"
        )
    if grad.shape != t.shape:
        raise ShapeError(
            f"attempting to assign a gradient of shape {grad.shape} to a tensor of shape "
            f"{t.shape}; the gradient and the tensor must have the same shape"
        )
    if grad.dtype != t.dtype:
        raise DTypeError(
            f"attempting to assign a gradient of dtype {grad.dtype} to a tensor of dtype "
            f"{t.dtype}; the gradient and the tensor must have the same dtype"
        )


class Tensor(EagerMethods, CompositeMethods, CountingMethods, InPlaceMethods, ValueMethods):
    """An n-dimensional array that can record how it was computed, PyTorch style.

    >>> from graphc.eager import tensor
    >>> x = tensor([1.0, 2.0], requires_grad=True)
    >>> y = (x * x).sum()
    >>> y.backward()
    >>> x.grad
    tensor([2., 4.])
    """

    # defaults for the instance dict (see the module docstring)
    _requires_grad = False
    _grad: Tensor | None = None
    grad_fn: Any = None
    _output_nr = 0
    _accumulator: Any = None
    _hooks: dict | None = None
    _retains_grad = False
    _post_accumulate_hooks: dict | None = None  # a leaf's {hook id: hook(tensor)}
    _base: Tensor | None = None  # for views (views.py): the tensor whose memory they share
    _steps: tuple = ()  # for views: the view ops that lead from _base to them
    _counter: list[int]  # [version]: one list shared by a base, its views and aliases

    def __init__(self, *data: Any, requires_grad: bool = False) -> None:
        """torch.Tensor's legacy constructor: `Tensor(2, 3)` is a float32 tensor of that
        shape (zeros here), `Tensor(data)` float32 values, `Tensor(t)` an alias of t."""
        if not data or all(isinstance(d, (int, np.integer)) for d in data):
            if any(isinstance(d, bool) or d < 0 for d in data):
                raise ShapeError(f"Tensor(): sizes must be non-negative ints, got {data}")
            self._data = np.zeros(data if data else (0,), np.float32)
            self._counter = [0]
        elif len(data) > 1:
            raise TensorTypeError(f"Tensor(): takes sizes (ints) or one sequence, got {data}")
        elif isinstance(data[0], Tensor):
            # torch.Tensor(t) is an alias of t: same memory and version counter
            self._data = data[0]._data
            self._counter = data[0]._counter
        elif isinstance(data[0], np.ndarray) and data[0].dtype == np.float32:
            self._data = data[0]  # torch.Tensor(array) of the default dtype shares its memory
            self._counter = [0]
        elif isinstance(data[0], (float, bool, np.generic)):
            raise TensorTypeError(
                f"Tensor(): data must be a sequence, got {type(data[0]).__name__} (use "
                "tensor(value) for a 0-d tensor)"
            )
        else:
            self._data = as_array(data[0], np.float32)  # float32 whatever the input's dtype
            self._counter = [0]
        if requires_grad:
            self.requires_grad = True

    # -- data and metadata ------------------------------------------------------------

    @property
    def data(self) -> Tensor:
        """The same memory as a tensor outside the tape (PyTorch's `.data`)."""
        return make(self._data)

    @data.setter
    def data(self, value: Any) -> None:
        array = value._data if isinstance(value, Tensor) else as_array(value)
        if self._requires_grad and not is_float(array.dtype):
            raise DTypeError(
                f"data set to a tensor that requires gradients must be of a floating point "
                f"dtype, got {array.dtype}"
            )
        self._data = array

    @property
    def shape(self) -> tuple[int, ...]:
        return self._data.shape

    @property
    def dtype(self) -> np.dtype:
        return self._data.dtype

    @property
    def device(self) -> str:
        return "cpu"

    @property
    def made_by(self) -> str | None:
        """The registry op whose recorded backward this tensor's gradient goes through
        (None for a leaf or a tensor made outside the tape): what a graph value's
        `made_by` says, so that a vjp rule choosing by it chooses alike in both engines."""
        opdef = getattr(self.grad_fn, "opdef", None)
        return None if opdef is None else opdef.name

    @property
    def requires_grad(self) -> bool:
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, flag: bool) -> None:
        if self.grad_fn is not None:  # even to True, as torch's attribute (not requires_grad_)
            raise AutodiffError(
                "you can only change requires_grad flags of leaf tensors; "
                "use .detach() to get a non-leaf tensor's values without grad"
            )
        if flag and not is_float(self._data.dtype):
            raise DTypeError(
                f"only tensors of floating point dtype can require gradients, got {self.dtype}"
            )
        self._requires_grad = bool(flag)

    @property
    def grad(self) -> Tensor | None:
        """The gradient accumulated by backward (leaves, and tensors that retain_grad)."""
        return self._grad

    @grad.setter
    def grad(self, value: Tensor | None) -> None:
        if value is not None:
            check_grad(self, value)
        self._grad = value

    @property
    def is_leaf(self) -> bool:
        """True for tensors the user made (and results of ops that need no grad)."""
        return self.grad_fn is None

    @property
    def retains_grad(self) -> bool:
        return self._retains_grad

    @property
    def _version(self) -> int:
        """How many in-place writes this tensor's memory has seen, as an int read now: the
        counter is shared with the tensor's base and views (a write through any of them
        counts), as torch's `x._version`."""
        return self._counter[0]

    _version_number = _version

    # -- conversion -----------------------------------------------------------------

    def numpy(self) -> np.ndarray:
        """The underlying array (shared memory). As in torch, not while requiring grad."""
        if self._requires_grad:
            raise AutodiffError(
                "can't call numpy() on a tensor that requires grad; use tensor.detach().numpy()"
            )
        return self._data

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        if dtype is not None and dtype != self._data.dtype:
            return self._data.astype(dtype)
        return self._data.copy() if copy else self._data

    def item(self) -> Any:
        """The value of a one-element tensor as a Python number."""
        if self._data.size != 1:
            raise ShapeError(  # a RuntimeError for item(), a ValueError for float(): both, as torch
                f"item(): a tensor with {self._data.size} elements cannot be converted to a scalar"
            )
        return self._data.item()

    def tolist(self) -> Any:
        return self._data.tolist()

    def __len__(self) -> int:
        if not self._data.ndim:
            raise TensorTypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    def __iter__(self) -> Iterator[Tensor]:
        if not self._data.ndim:
            raise TensorTypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self._data.shape[0]))

    def __bool__(self) -> bool:
        return bool(self.item())

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __index__(self) -> int:
        if self._data.dtype.kind not in "iu" or self._data.size != 1:
            raise TensorTypeError(
                "only integer tensors of a single element can be used as an index"
            )
        return int(self._data.item())

    def __format__(self, spec: str) -> str:
        if self._data.ndim == 0:  # f"{loss}" is the number, as torch's
            return format(self._data.item(), spec)
        return format(repr(self), spec)

    def __deepcopy__(self, memo: dict) -> Tensor:
        """A new leaf with a copy of the values, `requires_grad` and `.grad` (torch's). Its
        own: hooks and the tape's node for the original's gradient are not shared (the
        copy's gradient went to the original while the original's graph was alive)."""
        if self.grad_fn is not None:
            raise AutodiffError(
                "only tensors created explicitly by the user (graph leaves) can be deep-copied; "
                "deep-copy t.detach() (and set requires_grad on the copy) instead"
            )
        copied = _new(Tensor if self._base is not None else type(self))
        memo[id(self)] = copied
        copied._data = self._data.copy()
        copied._counter = [0]
        for name, value in self.__dict__.items():  # a subclass's own attributes
            if not name.startswith("_"):
                setattr(copied, name, copy.deepcopy(value, memo))
        copied._requires_grad = self._requires_grad
        if self._grad is not None:
            copied._grad = copy.deepcopy(self._grad, memo)
        return copied

    def __repr__(self) -> str:
        suffixes = printing.default_suffixes(self._data)
        try:
            grad_fn = self.grad_fn
        except AutodiffError:  # a view whose history cannot be told (views.py), as torch
            suffixes.append("grad_fn=<Invalid>")
            return printing.format_tensor(self._data, suffixes)
        if grad_fn is not None:
            suffixes.append(f"grad_fn=<{grad_fn.name()}>")
        elif self._requires_grad:
            suffixes.append("requires_grad=True")
        return printing.format_tensor(self._data, suffixes)

    __str__ = __repr__

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        """In notebooks: the text, and a picture of the tape when there is one."""
        bundle = {"text/plain": repr(self)}
        if self.grad_fn is not None:
            bundle.update(rich_display(self))
        return bundle

    # -- autograd -------------------------------------------------------------------

    def backward(
        self,
        gradient: Any = None,
        retain_graph: bool | None = None,
        create_graph: bool = False,
        inputs: Any = None,
    ) -> None:
        """Accumulate d self / d leaf into each leaf's `.grad` (see `autograd.backward`)."""
        from graphc.eager import autograd

        autograd.backward(self, gradient, retain_graph, create_graph, inputs=inputs)

    def detach(self) -> Tensor:
        """A tensor sharing this one's memory (and version counter), outside the tape."""
        t = make(self._data)
        t._counter = self._counter
        return t

    def detach_(self) -> Tensor:
        """Cut this tensor from the tape, in place: it becomes a leaf without grad."""
        if self._base is not None:
            raise AutodiffError(
                "can't detach views in place (the base's history still reaches them); "
                "use detach() instead"
            )
        self.grad_fn = None
        self._output_nr = 0
        self._requires_grad = False
        return self

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        """Set `requires_grad` in place and return self (a non-leaf tensor requires grad
        already: True is a no-op for it, as in torch)."""
        if not (requires_grad and self.grad_fn is not None):
            self.requires_grad = requires_grad
        return self

    def retain_grad(self) -> None:
        """Keep `.grad` of this non-leaf tensor after backward (leaves always keep it)."""
        if not self._requires_grad:
            raise AutodiffError("can't retain_grad on a tensor that has requires_grad=False")
        if self.grad_fn is None or self._retains_grad:
            return
        self.grad_fn.retain_output(self._output_nr, weakref.ref(self))
        self._retains_grad = True

    def register_hook(self, hook: Callable[[Tensor], Tensor | None]) -> Any:
        """Call `hook(grad)` when this tensor's gradient is computed; a returned tensor
        replaces the gradient. Returns a handle whose `remove()` unregisters the hook.

        >>> from graphc.eager import tensor
        >>> x = tensor([1.0, 2.0], requires_grad=True)
        >>> handle = x.register_hook(lambda g: g * 2)
        >>> (x * 3).sum().backward()
        >>> x.grad
        tensor([6., 6.])
        >>> handle.remove()
        """
        from graphc.eager.grad_fn import HookHandle

        if not self._requires_grad:
            raise AutodiffError("cannot register a hook on a tensor that doesn't require grad")
        if self.grad_fn is None:
            if self._hooks is None:
                self._hooks = {}
            return HookHandle(self._hooks, hook)
        return HookHandle(self.grad_fn.output_hooks(self._output_nr), hook)

    def register_post_accumulate_grad_hook(self, hook: Callable[[Tensor], None]) -> Any:
        """Call `hook(self)` each time backward has accumulated into this leaf's `.grad`
        (where an optimizer can step one parameter at once). Returns a removable handle."""
        from graphc.eager.grad_fn import HookHandle

        if not self._requires_grad:
            raise AutodiffError("cannot register a hook on a tensor that doesn't require grad")
        if self.grad_fn is not None:
            raise AutodiffError(
                "post accumulate grad hooks cannot be registered on non-leaf tensors"
            )
        if self._post_accumulate_hooks is None:
            self._post_accumulate_hooks = {}
        return HookHandle(self._post_accumulate_hooks, hook)
