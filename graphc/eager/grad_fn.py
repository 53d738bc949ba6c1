"""The records of the autograd tape: a tensor's `grad_fn`.

An `OpBackward` remembers one op application (the op, its canonical attrs, its input
tensors and its output array) and runs the op's registered VJP rule. `AccumulateGrad`
is where gradients of a leaf end up. Edges are `next_functions`: one `(node, output
index)` pair per input, `(None, 0)` for inputs that need no gradient, as in PyTorch.

Saved tensors are checked against their version counters when the VJP rule *uses* them
(a stale one raises on use), so modifying a value a rule only needs the shape of is not
an error; they are dropped after backward unless `retain_graph=True`.
"""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from graphc.eager.grad_mode import STATE
from graphc.eager.tensor import Tensor, make
from graphc.ir.errors import AutodiffError
from graphc.ir.registry import OpDef, register_rule
from graphc.ops import elementwise as E
from graphc.ops import indexing as I

FREED_MESSAGE = (
    "{name}: trying to backward through the graph a second time (or to use saved tensors "
    "after they have been freed). Saved values of the graph are freed when you call "
    ".backward() or autograd.grad(). Specify retain_graph=True if you need to backward "
    "through the graph a second time."
)

_hook_ids = itertools.count()
_NO_EDGE = (None, 0)


class HookHandle:
    """Returned by `register_hook`; `remove()` unregisters the hook."""

    def __init__(self, hooks: dict, hook: Callable) -> None:
        self._hooks = hooks
        self.id = next(_hook_ids)
        hooks[self.id] = hook

    def remove(self) -> None:
        self._hooks.pop(self.id, None)


def edge(x: Tensor) -> tuple[GradFn | None, int]:
    """Where the gradient of tensor `x` goes: its grad_fn, its leaf accumulator, or nowhere."""
    if x.grad_fn is not None:
        return x.grad_fn, x._output_nr
    if x._requires_grad:
        return accumulator(x), 0
    return None, 0


def accumulator(leaf: Tensor) -> AccumulateGrad:
    """The leaf's AccumulateGrad node, shared by every op that uses the leaf."""
    ref = leaf._accumulator
    node = ref() if ref is not None else None
    if node is None:
        node = AccumulateGrad(leaf)
        leaf._accumulator = weakref.ref(node)
    return node


class GradFn:
    """A step of the backward pass, a tensor's `grad_fn` (PyTorch's `torch.autograd.graph.Node`)."""

    num_outputs = 1
    next_functions: tuple = ()
    _output_hooks: dict | None = None  # output index -> {hook id: hook}
    _retained: dict | None = None  # output index -> weakref to a tensor that retains grad
    _pre_hooks: dict | None = None  # {hook id: hook(grad_outputs)}
    _post_hooks: dict | None = None  # {hook id: hook(grad_inputs, grad_outputs)}

    def name(self) -> str:
        return type(self).__name__

    def register_prehook(self, hook: Callable[[tuple], Any]) -> HookHandle:
        """Call `hook(grad_outputs)` before this node runs (after the tensors' hooks); a
        returned tuple replaces the gradients of its outputs."""
        if self._pre_hooks is None:
            self._pre_hooks = {}
        return HookHandle(self._pre_hooks, hook)

    def register_hook(self, hook: Callable[[tuple, tuple], Any]) -> HookHandle:
        """Call `hook(grad_inputs, grad_outputs)` after this node ran: grad_inputs are the
        gradients it computed, one per `next_functions` edge (None where there is none);
        a returned tuple replaces them."""
        if self._post_hooks is None:
            self._post_hooks = {}
        return HookHandle(self._post_hooks, hook)

    def __repr__(self) -> str:
        return f"<{self.name()} object at {hex(id(self))}>"

    def apply(self, grads: list[Any], wanted: Any = None) -> tuple:
        """Gradients for `next_functions` from the gradients of this node's outputs.

        `wanted`, when given, is the set of nodes worth sending gradients to.
        """
        raise NotImplementedError

    def release(self) -> None:
        """Drop saved values (after a backward without retain_graph)."""

    def output_hooks(self, index: int) -> dict:
        if self._output_hooks is None:
            self._output_hooks = {}
        return self._output_hooks.setdefault(index, {})

    def retain_output(self, index: int, ref: weakref.ref) -> None:
        if self._retained is None:
            self._retained = {}
        self._retained[index] = ref


def move_retained(t: Tensor, old: GradFn | None, old_nr: int) -> None:
    """An in-place op rebased `t` from output `old_nr` of `old` onto its new grad_fn: a
    retained `.grad` follows it (torch's is the gradient of the new value), while hooks
    registered before stay where they were (they see the old value's gradient, as torch)."""
    if not t._retains_grad or old is None or t.grad_fn is old:
        return
    retained = old._retained
    if retained is not None and old_nr in retained and retained[old_nr]() is t:
        del retained[old_nr]
    t.grad_fn.retain_output(t._output_nr, weakref.ref(t))


class AccumulateGrad(GradFn):
    """Adds incoming gradients into a leaf tensor's `.grad`."""

    def __init__(self, leaf: Tensor) -> None:
        self.variable = leaf

    def apply(self, grads: list[Any], wanted: Any = None) -> tuple:
        leaf = self.variable
        accumulate_into(leaf, grads[0])
        if leaf._post_accumulate_hooks:
            for hook in list(leaf._post_accumulate_hooks.values()):
                hook(leaf)
        return ()


def accumulate_into(tensor: Tensor, grad: Tensor, in_place: bool = True) -> None:
    """Add `grad` into `tensor.grad`, by PyTorch's rules (its AccumulateGrad).

    In grad mode (a backward with create_graph) `.grad` becomes a new tensor with history,
    a copy of `grad` or the old `.grad` plus `grad`, so a reference to the old `.grad`
    keeps its values and the new one can be differentiated. Otherwise the first gradient
    is a private copy (`grad` may be another tensor's gradient or the caller's seed) and
    later ones are added into it in place, unless `in_place=False` (a non-leaf's retained
    gradient, which torch replaces as well).
    """
    old = tensor._grad  # written past the `grad` setter's checks: these are the engine's own
    if old is None:
        if STATE.enabled:
            tensor._grad = E.cast(grad, tensor._data.dtype)  # a copy on the tape (clone)
        else:
            tensor._grad = make(np.array(grad._data, dtype=tensor._data.dtype))
    elif STATE.enabled or not in_place:
        tensor._grad = old + grad
    else:
        np.add(old._data, grad._data, out=old._data, casting="same_kind")
        old._counter[0] += 1


class _StaleTensor(Tensor):
    """A saved tensor that may not be read: modified in place since it was saved, or freed
    by a backward without retain_graph. Its shape and dtype stay readable (rules that need
    only those still run, as torch's nodes that saved only sizes); its values raise."""

    def __init__(self, shape: tuple, dtype: np.dtype, message: str) -> None:
        self._shape = shape  # not the array: a freed graph must not keep its memory
        self._dtype = dtype
        self._message = message

    @property
    def _data(self) -> np.ndarray:  # type: ignore[override]
        raise AutodiffError(self._message)

    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape

    @property
    def dtype(self) -> np.dtype:
        return self._dtype

    def __repr__(self) -> str:
        return f"<unreadable saved tensor of shape {self._shape}>"


def stale(name: str, what: str, array: np.ndarray, saved: int, now: int) -> _StaleTensor:
    return _StaleTensor(
        array.shape,
        array.dtype,
        f"one of the values needed for gradient computation has been modified by an in-place "
        f"operation: {what} of {name} is at version {now}; expected version {saved}. "
        "Compute a new tensor instead of modifying it in place (or .clone() it first).",
    )


def freed(name: str, shape: tuple, dtype: np.dtype) -> _StaleTensor:
    """A saved value after its graph was freed: reading it is the retain_graph error."""
    return _StaleTensor(shape, dtype, FREED_MESSAGE.format(name=name))


class OpBackward(GradFn):
    """The backward of one application of a registry op: calls the op's `vjp` rule."""

    __slots__ = (
        "opdef",
        "attrs",
        "next_functions",
        "_inputs",
        "_versions",
        "_out",
        "_out_counter",
        "_out_version",
        "_output_hooks",
        "_retained",
        "_name",
        "_pre_hooks",
        "_post_hooks",
    )

    def __init__(
        self, opdef: OpDef, attrs: dict, inputs: list[Tensor], out: np.ndarray, counter: list
    ) -> None:
        self.opdef = opdef
        self.attrs = attrs
        edges = []
        versions = []
        for x in inputs:  # edge(x), spelled out: this runs once per recorded op
            fn = x.grad_fn
            if fn is not None:
                edges.append((fn, x._output_nr))
            elif x._requires_grad:
                edges.append((accumulator(x), 0))
            else:
                edges.append(_NO_EDGE)
            versions.append(x._counter[0])
        self.next_functions = tuple(edges)
        self._inputs = inputs
        self._versions = versions
        self._out = out
        self._out_counter = counter
        self._out_version = counter[0]
        self._output_hooks = None
        self._retained = None
        self._name = None
        self._pre_hooks = None
        self._post_hooks = None

    def name(self) -> str:
        if self._name is not None:  # given by the method that made it (see `spelled`)
            return self._name
        name = self.opdef.name
        if name in ("sum", "mean") and self.attrs.get("axis") is not None:
            return f"{name.title()}Backward1"  # torch's overload with dim=
        if name == "slice":
            return _slice_grad_fn(self.attrs["index"])
        if name == "matmul":
            return _matmul_grad_fn(self._inputs)
        named = self.opdef.rules.get("torch_grad_fn")
        return named or "".join(p.title() for p in name.split("_")) + "Backward0"

    def rebase_output(self, tensor: Tensor) -> None:
        """An in-place op wrote this node's output into `tensor`: track that memory."""
        self._out = tensor._data
        self._out_counter = tensor._counter
        self._out_version = tensor._counter[0]

    def release(self) -> None:
        """Free the saved values, keeping shapes and dtypes: a second backward through a
        rule that reads no values (sum, add, reshape) still works, as in torch."""
        if self._out_counter is None:
            return
        # only shapes and dtypes are kept; shells are made if a backward comes again
        self._inputs = [(x._data.shape, x._data.dtype) for x in self._inputs]
        self._out = (self._out.shape, self._out.dtype)
        self._out_counter = None

    def apply(self, grads: list[Any], wanted: Any = None) -> tuple:
        inputs = self._inputs
        counter = self._out_counter
        if counter is None:  # released: shells that raise the freed error when read
            name = self.name()
            unpacked = inputs = [freed(name, *meta) for meta in inputs]
            out: Tensor = freed(name, *self._out)
        else:
            out, unpacked = self._unpack(inputs, counter)
        needs = needed_edges(self.next_functions, wanted)
        results = self.opdef.vjp(grads[0], out, *unpacked, needs=needs, **self.attrs)
        return check_grads(self, results, [x.shape for x in inputs], needs)

    def _unpack(self, inputs: list[Tensor], counter: list) -> tuple[Tensor, list[Tensor]]:
        """The saved output and inputs, stale ones replaced by shells that raise on use."""
        unpacked = list(inputs)
        for i, (x, saved) in enumerate(zip(inputs, self._versions)):
            if x._counter[0] != saved:
                unpacked[i] = stale(self.name(), f"input {i}", x._data, saved, x._counter[0])
        if counter[0] != self._out_version:
            out: Tensor = stale(self.name(), "the output", self._out, self._out_version, counter[0])
        else:
            out = make(self._out)
            out._counter = counter
            if STATE.enabled:  # create_graph: the backward is itself recorded
                out.grad_fn = self  # the output as the tape knows it, for higher orders
                out._requires_grad = True
        return out, unpacked


# PyTorch's names for the backward of these ops, where they differ from "<Op>Backward0"
# (OpBackward.name): each op's "torch_grad_fn" rule
register_rule("cast", "torch_grad_fn", "ToCopyBackward0")
register_rule("clip", "torch_grad_fn", "ClampBackward1")
register_rule("concat", "torch_grad_fn", "CatBackward0")
register_rule("transpose", "torch_grad_fn", "PermuteBackward0")
register_rule("reshape", "torch_grad_fn", "ViewBackward0")
register_rule("broadcast_to", "torch_grad_fn", "ExpandBackward0")
register_rule("take", "torch_grad_fn", "IndexSelectBackward0")
register_rule("matmul", "torch_grad_fn", "MmBackward0")
register_rule("gemm", "torch_grad_fn", "AddmmBackward0")


def _matmul_grad_fn(inputs: list) -> str:
    """torch names matmul's node by the operands' ranks (the kernel it picks): dot, mv,
    mm, a vector times a matrix squeezed, batches a view of bmm's result."""
    ranks = tuple(len(x[0] if isinstance(x, tuple) else x.shape) for x in inputs)
    named = {(1, 1): "DotBackward0", (2, 1): "MvBackward0", (2, 2): "MmBackward0"}
    if ranks == (1, 2):
        return "SqueezeBackward4"
    return named.get(ranks, "UnsafeViewBackward0")


def _slice_grad_fn(index: str) -> str:
    """torch applies an index item by item, skipping plain `:` and `...`; its grad_fn is
    the last item's: SelectBackward0 for an int, UnsqueezeBackward0 for None."""
    items = [
        item
        for item in I.parse_index(index)
        if item is not Ellipsis and not (isinstance(item, slice) and item == slice(None))
    ]
    if not items or isinstance(items[-1], slice):
        return "SliceBackward0"
    return "UnsqueezeBackward0" if items[-1] is None else "SelectBackward0"


def spelled(t: Any, name: str) -> Any:
    """Give the node that just made `t` torch's name for the method spelled: one op serves
    several (transpose for t(), permute and transpose(0, 1); reshape for view, squeeze and
    unsqueeze), and torch names the node after the method. `t` may be a graph value
    (while tracing) or need no grad: then nothing changes."""
    node = getattr(t, "grad_fn", None)
    if isinstance(node, OpBackward):
        node._name = name
    return t


def needed_edges(edges: tuple, wanted: Any) -> tuple[bool, ...]:
    """Which inputs need a gradient: those with an edge (to a wanted node)."""
    if wanted is None:
        return tuple([node is not None for node, _ in edges])
    return tuple([node is not None and node in wanted for node, _ in edges])


def check_grads(node: GradFn, grads: Any, shapes: list[tuple], needs: tuple) -> tuple:
    """Gradients as tensors of the inputs' shapes, or a clear error naming the rule."""
    if not isinstance(grads, (tuple, list)):
        grads = (grads,)
    if len(grads) < len(needs):
        raise AutodiffError(
            f"{node.name()}: the gradient rule returned {len(grads)} gradients "
            f"for {len(needs)} inputs"
        )
    checked = []
    for grad, need, shape in zip(grads, needs, shapes):
        if not need or grad is None:
            checked.append(None)
            continue
        if not isinstance(grad, Tensor):
            grad = make(np.asarray(grad))
        if grad._data.shape != shape:
            raise AutodiffError(
                f"{node.name()}: the gradient for input {len(checked)} has shape "
                f"{grad._data.shape}, but the input has shape {shape}"
            )
        checked.append(grad)
    return tuple(checked)
