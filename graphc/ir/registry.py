"""What an op is, as far as the IR is concerned, and the table of known ops.

The IR defines the *shape* of an op definition and keeps the table; `graphc.ops`
fills it, one block per op. The verifier, the printer and the runtimes look ops up
here, so none of them needs to import `graphc.ops`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

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
    bodies       attrs holding body Graphs, in the op's order: cond's branches, a loop's
                 condition and body, a fused group's members. Passes and pictures ask
                 it which attrs to look into, never a list of their own
    permutes     the value is a view of its input with the axes' memory order permuted
                 (transpose); every other op's value is C-contiguous. matmul and
                 reductions round by memory order, so runtimes and folding keep this
    cost         FLOP estimate for statistics and fusion decisions
    scratch      bytes of working memory the kernel allocates for itself besides its
                 result (im2col buffers, padded copies), given concrete types and an
                 `out=` buffer; the planner counts them in the step's live bytes
    props        algebraic and structural properties the passes and translators ask
                 about, from the vocabulary `PROPS` (commutative, non_negative, ...);
                 `has(prop)` asks, so no op-name set lives outside this record
    rules        rules other layers register for this op, by kind (`register_rule`):
                 a native C emitter, ONNX export, the batch split, ...
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
    bodies: tuple[str, ...] = ()
    permutes: bool = False
    cost: CostRule | None = None
    scratch: ScratchRule | None = None
    doc: str = ""
    props: frozenset[str] = frozenset()
    rules: dict[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        unknown = set(self.props) - set(PROPS)
        if unknown:
            raise ValueError(
                f"op '{self.name}': unknown props {sorted(unknown)}; known: {sorted(PROPS)}"
            )
        strays = set(self.bodies) - set(self.attrs)
        if strays:
            raise ValueError(f"op '{self.name}': bodies {sorted(strays)} are not among its attrs")
        if not isinstance(self.infer, MemoizedRule):
            object.__setattr__(self, "infer", MemoizedRule(self.infer))

    def has(self, prop: str) -> bool:
        """Whether the op has property `prop` (one of `PROPS`)."""
        if prop not in PROPS:
            raise ValueError(f"unknown op property '{prop}'; known: {sorted(PROPS)}")
        return prop in self.props

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


class MemoizedRule:
    """An op's type rule, remembering its results by input types and attrs.

    A type rule is a pure function of them, and a compile asks it the same question
    several times per node (tracing, verifying, fusing, generating code: 20,000 calls
    for a 5,000-op chain, most of its types one and the same). Only attrs of plain
    values are keys: scalars (their Python type included, so 1, 1.0 and True differ),
    strings, dtypes and tuples of them; a body graph or an array is asked every time.
    A rule that raises is asked again next time. At most `SIZE` answers are kept per op.
    """

    SIZE = 4096
    __slots__ = ("rule", "answers", "__wrapped__")

    def __init__(self, rule: TypeRule) -> None:
        self.rule = self.__wrapped__ = rule
        self.answers: dict[tuple, Any] = {}

    def __call__(self, *types: Any, **attrs: Any) -> Any:
        plain = attrs_key(attrs)
        if plain is None:
            return self.rule(*types, **attrs)
        key = (types, plain)
        try:
            answer = self.answers.get(key)
        except TypeError:  # an unhashable input: not a type
            return self.rule(*types, **attrs)
        if answer is None:
            answer = self.rule(*types, **attrs)
            if len(self.answers) >= self.SIZE:
                self.answers.clear()
            self.answers[key] = answer
        return answer


def attrs_key(attrs: Mapping[str, Any]) -> tuple | None:
    """A hashable key for `attrs` when every value is plain (scalars with their Python
    type, so 1, 1.0 and True differ, and a float's sign, so 0.0 and -0.0 do; strings;
    dtypes; tuples of them), else None."""
    try:
        return tuple((k, _plain(v)) for k, v in attrs.items())
    except _NotPlainError:
        return None


class _NotPlainError(Exception):
    pass


_PLAIN = (int, str, bool, type(None), complex)  # (floats: with their sign, below)


def _plain(value: Any) -> Any:
    """`value` with its type, when it is a plain value a key may hold."""
    kind = type(value)
    if kind is float:  # -0.0 == 0.0 in Python, but attrs compare bit for bit (verify)
        return kind, value, math.copysign(1.0, value)
    if kind in _PLAIN:
        return kind, value
    if kind is tuple:
        return tuple(_plain(v) for v in value)
    if isinstance(value, np.dtype):
        return np.dtype, value
    raise _NotPlainError


# The properties an op may declare (`OpDef.props`), each with the promise it makes.
# Passes, runtimes and translators ask `get_op(name).has(prop)` or `ops_with(prop)`;
# tests/ir/test_op_contract.py checks each promise on the ops that declare it.
PROPS: dict[str, str] = {
    "commutative": "f(a, b) == f(b, a) bit for bit (for one nan payload)",
    "comparison": "a bool result, comparing its two operands after promoting both to "
    "their common dtype",
    "non_negative": "every result is >= 0 or nan (save an integer's wrap-around: abs of "
    "int32's minimum is itself, as in numpy)",
    "activation": "elementwise of one tensor, no attrs, a float input's type kept, the "
    "kernel safe with out= its input: an epilogue may end with it",
    "allocates_one_temporary": "its kernel allocates one temporary the size of its input, "
    "even when given out=",
    "one_element_identity": "on one element, the result is the input's value bit for bit",
    "one_element_sum": "on one element v, the result is v + 0 (-0.0 becomes +0.0), as "
    "numpy's sum of one element; one to the input's own shape may be v itself",
    "reads_only_type": "the result depends on its inputs' shapes and dtypes, never on their values",
    "fusion": "made only by a backend's fusion step (gc.fuse; gc.compile at O2), after every "
    "transformation: no gradient, ONNX or batch-split rule, and nothing before the plan "
    "meets it",
}


def register_rule(op: str, kind: str, rule: Any) -> Any:
    """Attach a rule of `kind` to registered op `op` (its translators' and transforms'
    rules live with the op, not in tables of their own); returns `rule`."""
    opdef = get_op(op)
    if kind in opdef.rules:
        raise ValueError(f"op '{op}' already has a '{kind}' rule")
    opdef.rules[kind] = rule
    return rule


def ops_with(prop: str) -> frozenset[str]:
    """The names of the registered ops that declare `prop`."""
    if prop not in PROPS:
        raise ValueError(f"unknown op property '{prop}'; known: {sorted(PROPS)}")
    return frozenset(name for name, opdef in _REGISTRY.items() if prop in opdef.props)


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


def read_attrs(op: str | None, attrs: dict[str, Any]) -> dict[str, Any]:
    """The attrs of a node read from a file (text or JSON): `attrs` with each attr of
    `op` whose default is None and which the file leaves out set to None, in the op's
    order. An op gains an attribute that way (one_hot's ignore_index), and a graph saved
    before it loads; any other attr left out is still an error (verify's). An unknown op
    keeps `attrs` as they are, for verify to name."""
    opdef = _REGISTRY.get(op) if isinstance(op, str) else None
    if opdef is None or attrs.keys() == opdef.attrs.keys():
        return attrs
    added = {key for key, default in opdef.attrs.items() if default is None and key not in attrs}
    if not added:
        return attrs
    ordered = {key: attrs.get(key) for key in opdef.attrs if key in attrs or key in added}
    ordered.update((key, value) for key, value in attrs.items() if key not in ordered)  # unknown
    return ordered


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
