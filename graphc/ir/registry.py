"""What an op is, as far as the IR is concerned, and the table of known ops.

The IR defines the *shape* of an op definition and keeps the table; `graphc.ops`
fills it, one block per op. The verifier, the printer and the runtimes look ops up
here, so none of them needs to import `graphc.ops`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from graphc.ir.errors import UnknownOpError
from graphc.ir.types import TensorType, bind_shape

TypeRule = Callable[..., TensorType]  # infer(*input_types, **attrs) -> output type
Kernel = Callable[..., Any]  # kernel(*arrays, out=None, **attrs) -> array
VJPRule = Callable[..., tuple]  # vjp(ct, out, *inputs, needs=..., **attrs) -> cts
CostRule = Callable[..., int]  # cost(output_type, *input_types, **attrs) -> FLOPs
ScratchRule = Callable[..., int]  # scratch(output_type, *input_types, **attrs) -> bytes


@dataclass(frozen=True)
class OpDef:
    """Everything graphc knows about one op.

    name         the op's name in the IR and the registry
    arity        number of tensor inputs; None for variadic ops (concat)
    attrs        attribute names with their defaults (`REQUIRED` if none)
    infer        type rule: input `TensorType`s and attrs -> output `TensorType`
    kernel       numpy implementation; writes into `out=` when given one
    vjp          gradient rule written with graphc ops; None if not differentiable
    canonicalize attrs -> attrs in one canonical form (axes sorted, ...), given types
    elementwise  output element i depends only on input elements i (broadcast)
    pure         no side effects; safe to fold, deduplicate and remove when unused
    inplace      the kernel may be given an input's buffer as `out`
    inplace_inputs  the inputs (by position) of a NON-elementwise op whose buffer the
                 kernel may be given as `out`: it reads each element of such an input
                 only for the same element of its result, which has the input's type
                 (gemm's c, accumulated into)
    shape_attrs  attrs holding shapes (or one dim, as scan's length), whose symbolic
                 dims are bound at run time
    permutes     the value is a view of its input with the axes' memory order permuted
                 (transpose); every other op's value is C-contiguous. matmul and
                 reductions round by memory order, so runtimes and folding keep this
    cost         FLOP estimate for statistics and fusion decisions
    scratch      bytes of working memory the kernel allocates for itself besides its
                 result (im2col buffers, padded copies), given concrete types and an
                 `out=` buffer; the planner counts them in the step's live bytes
    """

    name: str
    arity: int | None
    infer: TypeRule
    kernel: Kernel
    attrs: Mapping[str, Any] = field(default_factory=dict)
    vjp: VJPRule | None = None
    canonicalize: Callable[..., dict] | None = None
    elementwise: bool = False
    pure: bool = True
    inplace: bool = False
    inplace_inputs: tuple[int, ...] = ()
    shape_attrs: tuple[str, ...] = ()
    permutes: bool = False
    cost: CostRule | None = None
    scratch: ScratchRule | None = None
    doc: str = ""

    def flops(self, out: TensorType, *inputs: TensorType, **attrs: Any) -> int:
        if self.cost is not None:
            return int(self.cost(out, *inputs, **attrs))
        return out.size or 0 if self.elementwise else 0

    def scratch_bytes(self, out: TensorType, *inputs: TensorType, **attrs: Any) -> int:
        """The kernel's own working memory on these (concrete) types; 0 without a rule."""
        if self.scratch is None:
            return 0
        return int(self.scratch(out, *inputs, **attrs))


REQUIRED = object()  # marks an attribute without a default

_REGISTRY: dict[str, OpDef] = {}


def register(opdef: OpDef) -> OpDef:
    if opdef.name in _REGISTRY:
        raise ValueError(f"op '{opdef.name}' is registered twice")
    _REGISTRY[opdef.name] = opdef
    return opdef


def get_op(name: str) -> OpDef:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UnknownOpError(f"unknown op '{name}'") from None


def all_ops() -> dict[str, OpDef]:
    """A snapshot of the registry, by name."""
    return dict(_REGISTRY)


def bound_attrs(node: Any, bindings: Mapping[str, Any]) -> dict[str, Any]:
    """An op node's attrs with the symbolic dims of its shape attrs replaced by `bindings`."""
    opdef = get_op(node.op)
    if not opdef.shape_attrs or not bindings:
        return node.attrs
    attrs = dict(node.attrs)
    for key in opdef.shape_attrs:
        value = attrs[key]
        if isinstance(value, str):  # one dim
            attrs[key] = bindings.get(value, value)
        elif isinstance(value, (tuple, list)):
            attrs[key] = bind_shape(value, bindings)
    return attrs


def attr_dims(value: Any) -> tuple:
    """The dims a shape attr holds: its shape, or its one dim."""
    if value is None:
        return ()
    return (value,) if isinstance(value, (int, str)) else tuple(value)
