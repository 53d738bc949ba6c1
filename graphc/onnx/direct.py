"""Ops that are one ONNX op: one table, read by the importer and the writer alike.

An entry says that a graphc op and an ONNX op type compute the same function of the
same inputs, neither with attributes, plus the few facts the two directions need: the
opset from which the op type reads as the op, the dtypes whose result ONNX's op does
not give (its Add takes no bools: a bool add is written as Or), and a direction that is
code instead (ONNX's Div of integers truncates, so Div has a handler of its own).

Importing graphc.onnx registers each entry as its op's "onnx" rule
(`get_op("add").rules["onnx"]`), which the writer calls as it calls an exporter
function, and as the import handler of its op type. An op whose form is code registers
its exporter function as its "onnx" rule instead (`@exporter`, exporters*.py); an op
type read by code has a `@handler` (handlers*.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from graphc.ir.graph import Node
from graphc.ir.registry import register_rule
from graphc.onnx.importer import (
    Context,
    OnnxError,
    Value,
    handler,
    is_dims,
    symbolic_hint,
    symbols_in,
)
from graphc.onnx.writer import Exporter, Writer, computed
from graphc.ops.dispatch import bind


@dataclass(frozen=True)
class Direct:
    """graphc's `op` is ONNX's `op_type`: the same function of the same inputs.

    since      the first opset in which op_type reads as op
    on_bool    how a bool result is written where op_type takes no bools: another op
               type on the same inputs (add: Or), or an exporter function
    on_int     the same for an integer result (floor: Identity, integers are whole)
    cast_from  the first input cast to the dtype the op computes in (where's condition
               stays bool)
    reads      False if op_type means more than op: a handler of its own reads it
    writes     False if op is written as more than op_type: its exporter is code, and
               that function is its "onnx" rule
    """

    op: str
    op_type: str
    since: int = 1
    on_bool: str | Exporter | None = None
    on_int: str | Exporter | None = None
    cast_from: int = 0
    reads: bool = True
    writes: bool = True

    def __call__(self, w: Writer, node: Node, ins: list[str]) -> list[str]:
        """Write `node`: an entry is its op's exporter."""
        kind = node.type.dtype.kind
        form = self.on_bool if kind == "b" else self.on_int if kind in "iu" else None
        if form is None:
            return [w.one(self.op_type, computed(w, node, ins, self.cast_from))]
        if isinstance(form, str):
            return [w.one(form, ins)]
        return form(w, node, ins)

    def read(self, ctx: Context, inputs: list[Value], attrs: dict) -> list[Value]:
        """Read a node of op_type: its handler."""
        # Add, Sub, Mul and the comparisons had these before opset 7; the schema check
        # refuses them on the other op types
        if "broadcast" in attrs or "axis" in attrs:
            raise ctx.error("legacy broadcast/axis attributes (opset < 7) are not supported")
        if any(is_dims(v) for v in inputs) and symbols_in(inputs):  # (Mul of batch and heads)
            raise ctx.error(f"cannot compute a shape by {self.op_type}{symbolic_hint(inputs)}")
        return [bind(self.op, *inputs)]


def _max_with_zero(w: Writer, node: Node, ins: list[str]) -> list[str]:
    """relu of integers (ONNX's Relu takes floats until opset 14)."""
    return [w.one("Max", [ins[0], w.const(np.zeros((), node.type.dtype))])]


def _negate_int(w: Writer, node: Node, ins: list[str]) -> list[str]:
    """neg of integers: ONNX's Neg takes signed ones only; an unsigned one is 0 - x,
    which wraps as numpy's negative does."""
    if node.type.dtype.kind == "i":
        return [w.one("Neg", ins)]
    return [w.one("Sub", [w.const(np.zeros((), node.type.dtype)), ins[0]])]


def _only(op_type: str, dtypes: tuple) -> Exporter:
    """An integer form of op_type that ONNX defines for `dtypes` only; any other dtype is
    refused by name (a model ONNX's checker and onnxruntime would refuse)."""

    def write(w: Writer, node: Node, ins: list[str]) -> list[str]:
        dtype = node.type.dtype
        if dtype not in dtypes:
            known = ", ".join(str(np.dtype(d)) for d in dtypes)
            raise OnnxError(
                f"export_model: {node.describe()}: ONNX's {op_type} has no {dtype} form "
                f"(its integer forms: {known}); cast to one of them (or to float) first"
            )
        return [w.one(op_type, computed(w, node, ins))]

    return write


def _integer_power(w: Writer, node: Node, ins: list[str]) -> list[str]:
    """An integer power: by a known exponent >= 0, Muls by repeated squaring (onnxruntime's
    integer Pow goes through float64: (2**62 + 3) ** 1 was 2**62; products wrap modulo
    2**bits in any order, as numpy's do); by another, Pow where ONNX defines it."""
    exponent = node.inputs[1]
    if not (exponent.is_constant and np.ndim(exponent.value) == 0 and exponent.value >= 0):
        return _only("Pow", (np.int32, np.int64))(w, node, ins)
    left, square = int(exponent.value), computed(w, node, ins)[0]
    result = None
    while left:
        if left & 1:
            result = square if result is None else w.one("Mul", [result, square])
        left >>= 1
        if left:
            square = w.one("Mul", [square, square])
    if result is None:  # x ** 0: ones of x's shape
        result = w.filled(w.one("Shape", [square]), 1, node.type.dtype)
    return [result]


def _any_product(w: Writer, node: Node, ins: list[str]) -> list[str]:
    """matmul of bools, any(a and b): the count of true products, > 0."""
    a, b = (w.cast(n, np.bool_, np.int32) for n in ins)
    count = w.one("MatMul", [a, b])
    return [w.one("Greater", [count, w.const(np.zeros((), np.int32))])]


DIRECT = (
    # one input
    Direct("neg", "Neg", on_int=_negate_int),
    Direct("abs", "Abs", on_bool="Identity"),
    Direct("exp", "Exp"),
    Direct("log", "Log"),
    Direct("sqrt", "Sqrt"),
    Direct("sin", "Sin"),
    Direct("cos", "Cos"),
    Direct("tanh", "Tanh"),
    Direct("sign", "Sign"),
    Direct("erf", "Erf"),
    Direct("atan", "Atan", since=7),
    Direct("sinh", "Sinh", since=9),
    Direct("relu", "Relu", on_int=_max_with_zero),
    Direct("floor", "Floor", on_int="Identity"),
    Direct("ceil", "Ceil", on_int="Identity"),
    Direct("reciprocal", "Reciprocal", reads=False),  # read as 1 / x
    Direct("sigmoid", "Sigmoid", writes=False),  # float64 written as graphc computes it
    Direct("round", "Round", writes=False),  # decimals: x scaled, rounded, scaled back
    # two or three inputs
    Direct("add", "Add", on_bool="Or"),
    Direct("sub", "Sub"),
    Direct("mul", "Mul", on_bool="And"),
    Direct("div", "Div", reads=False),  # Div of integers truncates; graphc's divides
    Direct("pow", "Pow", reads=False, on_int=_integer_power),  # keeps the base's type
    # (numpy promotes)
    Direct("maximum", "Max", on_bool="Or", reads=False),  # Max and Min take any number
    Direct("minimum", "Min", on_bool="And", reads=False),
    Direct("eq", "Equal"),
    Direct("lt", "Less"),
    Direct("le", "LessOrEqual"),
    Direct("gt", "Greater"),
    Direct("ge", "GreaterOrEqual"),
    Direct(
        "matmul",
        "MatMul",
        on_bool=_any_product,
        on_int=_only("MatMul", (np.int32, np.int64, np.uint32, np.uint64)),
    ),
    Direct("where", "Where", since=9, cast_from=1),
)

for _entry in DIRECT:
    if _entry.writes:
        register_rule(_entry.op, "onnx", _entry)
    if _entry.reads:
        handler(_entry.op_type, since=_entry.since)(_entry.read)

__all__ = ["DIRECT", "Direct"]
