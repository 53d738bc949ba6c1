"""Views: tensors that share their base's memory and version counter, as in PyTorch.

The view ops (`slice`, `reshape` when numpy can view, `transpose`, `broadcast_to`)
still record their op on the tape (SliceBackward0, ViewBackward0, ...), but the
result's `_data` is a numpy view of the input's array: each op's view function is its
"eager_view" rule (`view_of`), which the eager kind asks before running the kernel. A
view remembers its root base and the chain of view ops from it (`_steps`), which serves
three purposes:

- an in-place op on a view writes the base's memory (numpy does that), and the base's
  history is rewritten as PyTorch's CopySlices does: the new base is
  `where(mask, unview(result), old_base)`, so the gradient of the written window goes
  to the in-place op's history and the rest to the base's old history;
- after the shared version counter moved (an in-place op on the base or on any view of
  it), a view's `grad_fn` and `requires_grad` are regenerated lazily from the base's
  current history by replaying the chain (so `v = x[1]; x.add_(r)` makes v require
  grad through r); only views pay for that check (`grad_fn` and `_requires_grad` are
  properties of `ViewTensor` alone, plain tensors keep plain attributes);
- the mask of the window a view covers is the chain replayed on a boolean array.

A view made under no_grad has no history to replay: once the counter moved while its
base requires grad, reading its `grad_fn` (or using it in an op in grad mode) raises,
as torch does, rather than silently cutting the gradient.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from graphc.eager.grad_fn import OpBackward, move_retained
from graphc.eager.grad_mode import STATE, enable_grad
from graphc.eager.tensor import Tensor, make
from graphc.ir.errors import AutodiffError, IndexRangeError, ShapeError
from graphc.ir.registry import OpDef, register_rule
from graphc.ir.types import is_float
from graphc.ops import elementwise as E
from graphc.ops import indexing as I
from graphc.ops import shape as S

_new = object.__new__
_RESHAPE_HAS_COPY = np.lib.NumpyVersion(np.__version__) >= "2.1.0"


ViewKernel = Callable[..., np.ndarray | None]  # (input array, **canonical attrs) -> view


def view_of(op: str) -> Callable[[ViewKernel], ViewKernel]:
    """Register the decorated function as op `op`'s "eager_view" rule: the numpy view of
    the input's array the op gives for its canonical attrs, or None when there is none
    (the eager kind then runs the op's kernel, a copy)."""

    def register(fn: ViewKernel) -> ViewKernel:
        return register_rule(op, "eager_view", fn)

    return register


@view_of("slice")
def _slice_view(x: np.ndarray, index: str) -> np.ndarray:
    items = I.parse_index(index)
    if Ellipsis not in items:
        items = (*items, Ellipsis)  # x[0] of a vector is a scalar copy; x[0, ...] a 0-d view
    try:
        return x[items]
    except IndexError as exc:
        raise IndexRangeError(f"getitem: {exc} (index [{index}])") from None


@view_of("reshape")
def _reshape_view(x: np.ndarray, shape: tuple) -> np.ndarray | None:
    """A view of x with this shape, or None when numpy would have to copy."""
    if _RESHAPE_HAS_COPY:
        try:
            return np.reshape(x, shape, copy=False)
        except ValueError:
            return None
    result = np.reshape(x, shape)
    return result if result.size == 0 or np.may_share_memory(result, x) else None


@view_of("transpose")
def _transpose_view(x: np.ndarray, axes: tuple | None) -> np.ndarray:
    return np.transpose(x, axes)


@view_of("broadcast_to")
def _broadcast_view(x: np.ndarray, shape: tuple) -> np.ndarray:
    return np.broadcast_to(x, shape)


NO_GRAD_VIEW_REBASED = (
    "a view was created in no_grad mode and its base or another view of its base has "
    "been modified in place since, while the base requires grad: whether the view "
    "should see that history is ambiguous, so (as in torch) it is forbidden; create the "
    "view and do the in-place op both inside no_grad (untracked) or both outside (tracked)"
)


class ViewTensor(Tensor):
    """A tensor whose memory is a window of its base's (see the module docstring)."""

    _grad_fn: Any = None
    _fn_version = 0
    _tracks = False  # made while grad mode was on: its history follows the base's

    _wants_grad = False  # what _requires_grad holds once the history is current

    @property  # type: ignore[override]
    def grad_fn(self) -> Any:
        if self._fn_version != self._counter[0] and self._base._requires_grad:  # type: ignore[union-attr]
            if not self._tracks:
                raise AutodiffError(NO_GRAD_VIEW_REBASED)
            regenerate(self)
        return self._grad_fn

    @grad_fn.setter
    def grad_fn(self, fn: Any) -> None:
        self._grad_fn = fn
        self._fn_version = self._counter[0]

    @property  # type: ignore[override]
    def _requires_grad(self) -> bool:
        """Read after the history is brought up to date: an in-place op on the base with
        an input that requires grad (`x.add_(r)`) makes its earlier views require grad."""
        if self._fn_version != self._counter[0]:
            if not self._tracks and self._base._requires_grad:  # type: ignore[union-attr]
                return True  # as torch says; its grad_fn raises NO_GRAD_VIEW_REBASED
            self.grad_fn  # noqa: B018 - regenerates the history if the base's changed
        return self._wants_grad

    @_requires_grad.setter
    def _requires_grad(self, flag: bool) -> None:
        self._wants_grad = flag


def make_view(opdef: OpDef, x: Tensor, attrs: dict, array: np.ndarray) -> ViewTensor:
    """The result of view op `opdef` on `x`: shares x's memory and version counter."""
    out = _new(ViewTensor)
    out._data = array
    out._counter = counter = x._counter
    base = x._base
    step = (opdef, attrs, x._data.shape)
    if base is None:
        out._base = x
        out._steps = (step,)
    else:
        out._base = base
        out._steps = (*x._steps, step)  # type: ignore[attr-defined]
    if STATE.enabled:
        out._tracks = True
        if x._requires_grad and opdef.vjp is not None and is_float(array.dtype):
            out._grad_fn = OpBackward(opdef, attrs, [x], array, counter)
            out._requires_grad = True
    out._fn_version = counter[0]
    return out


def regenerate(view: ViewTensor) -> None:
    """Replay the view's chain on its base, so its history is the base's current one."""
    from graphc.eager.value_kind import EAGER

    t: Tensor = view._base  # type: ignore[assignment]
    with enable_grad():
        for opdef, attrs, _ in view._steps:  # type: ignore[attr-defined]
            t = EAGER.apply(opdef, [t], attrs)
    view._grad_fn = t._grad_fn if isinstance(t, ViewTensor) else t.grad_fn
    view._requires_grad = t._requires_grad
    view._fn_version = view._counter[0]


def check_view_inplace(x: Tensor, op: str) -> None:
    """PyTorch's refusal of in-place ops on a view of a leaf that requires grad."""
    base = x._base
    if base is None:
        return
    if STATE.enabled and x._requires_grad and x.grad_fn is None:  # a view that is a leaf
        raise AutodiffError(
            f"{op}: a leaf tensor that requires grad is being used in an in-place operation; "
            "update it under `with no_grad():` (or work on a copy)"
        )
    if not (STATE.enabled and base._requires_grad):
        return
    if base.grad_fn is None:
        raise AutodiffError(
            f"{op}: a view of a leaf tensor that requires grad is being used in an in-place "
            "operation; update it under `with no_grad():` (or work on a copy)"
        )
    if not x._tracks:
        raise_untracked(op)


def raise_untracked(op: str) -> None:
    """A view made under no_grad has no recorded history: the base's cannot be rewritten."""
    raise AutodiffError(
        f"{op}: a view was created in no_grad mode and is being modified in place with "
        "grad mode enabled; create the view with grad mode enabled (or clone() it)"
    )


def _unview(opdef: OpDef, attrs: dict, value: Tensor, shape: tuple) -> Tensor:
    """The tape op that puts a view-shaped value back in its input's shape."""
    name = opdef.name
    if name == "slice":
        return I.unslice(value, shape=shape, index=attrs["index"])
    if name == "reshape":
        return S.reshape(value, shape)
    if name == "transpose":
        axes = attrs["axes"]
        axes = range(len(shape))[::-1] if axes is None else axes
        return S.transpose(value, tuple(np.argsort(axes).tolist()))
    raise ShapeError(f"in-place write through a {name} view is not supported")


class CopySlices(OpBackward):
    """The node that rewrote a base's history after an in-place op on one of its views."""

    __slots__ = ()

    def name(self) -> str:
        return "CopySlices"


def rebase_history(view: ViewTensor, result: Tensor) -> None:
    """After `result` was written into `view`'s memory: the base's new history (CopySlices)."""
    root: Tensor = view._base  # type: ignore[assignment]
    if result.dtype != view._data.dtype:
        result = E.cast(result, view._data.dtype)
    placed = result
    for opdef, attrs, shape in reversed(view._steps):  # type: ignore[attr-defined]
        placed = _unview(opdef, attrs, placed, shape)
    mask = np.zeros(root._data.shape, np.bool_)
    window = mask
    for opdef, attrs, _ in view._steps:  # type: ignore[attr-defined]
        window = opdef.rules["eager_view"](window, **attrs)
    window[...] = True
    if not mask.all():
        old = make(root._data)  # where's rule reads only the mask, never old's values
        old.grad_fn = root.grad_fn
        old._output_nr = root._output_nr
        old._requires_grad = root._requires_grad
        placed = E.where(make(mask), placed, old)
    node = placed.grad_fn
    if type(node) is OpBackward:
        node.__class__ = CopySlices  # same slots; only the name differs, as torch shows it
    old_node, old_nr = root.grad_fn, root._output_nr
    root.grad_fn = node
    root._output_nr = placed._output_nr
    root._requires_grad = True
    node.rebase_output(root)
    move_retained(root, old_node, old_nr)
    view._requires_grad = True
    view._fn_version = -1  # regenerate its grad_fn from the new base on next use
