"""`matmul_epilogue`: x @ w, plus a bias, then an activation, as one node.

Made by `fuse_matmul_epilogue` (graphc.backends.numpy.fusion.epilogue). The kernel is the member
ops' own kernels: the matmul writes into the output buffer, then the bias add and
the activation run in place on it, so no intermediate array is allocated.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from graphc.ir.errors import GraphcError, ShapeError
from graphc.ir.registry import get_op, ops_with
from graphc.ir.types import TensorType
from graphc.ops.defop import VARIADIC, defop


def check_epilogue(op: str, types: tuple[TensorType, ...], bias: Any, activation: Any) -> None:
    """The checks every epilogue op makes of its activation (an op with the property
    "activation") and input count."""
    activations = tuple(sorted(ops_with("activation")))
    if activation not in (None, *activations):
        raise GraphcError(
            f"{op}: activation must be None or one of {activations}, got {activation!r}"
        )
    if len(types) != 2 + bool(bias):
        raise GraphcError(
            f"{op}: bias={bool(bias)} needs {2 + bool(bias)} inputs, got {len(types)}"
        )


def _canon(*types: TensorType, bias: bool, activation: Any) -> dict:
    check_epilogue("matmul_epilogue", types, bias, activation)
    return {"bias": bool(bias), "activation": activation}


def _infer(*types: TensorType, bias: bool, activation: Any) -> TensorType:
    _canon(*types, bias=bias, activation=activation)
    result = get_op("matmul").infer(types[0], types[1])
    if bias:
        with_bias = get_op("add").infer(result, types[2])
        if with_bias != result:
            raise ShapeError(
                f"matmul_epilogue: the bias {types[2]} would change the product's type "
                f"{result} to {with_bias}"
            )
    if activation is not None and get_op(activation).infer(result) != result:
        raise ShapeError(f"matmul_epilogue: {activation} would change the type {result}")
    return result


def _kernel(
    x: np.ndarray,
    w: np.ndarray,
    *bias_array: np.ndarray,
    out: np.ndarray | None = None,
    bias: bool = False,
    activation: Any = None,
) -> np.ndarray:
    out = get_op("matmul").kernel(x, w, out=out)
    if not isinstance(out, np.ndarray):  # 1-D @ 1-D gives a numpy scalar: make it an array
        out = np.array(out)
    bias_and_activation(bias_array, bias, activation)(out)
    return out


def bias_and_activation(
    bias_array: tuple[np.ndarray, ...], bias: bool, activation: Any
) -> Callable[[np.ndarray], None]:
    """An epilogue's work in place on its product (or a chunk of it): the bias add (the
    first of `bias_array`), then the activation, each by its op's own kernel."""
    add = get_op("add").kernel
    act = None if activation is None else get_op(activation).kernel

    def finish(value: np.ndarray) -> None:
        if bias:
            add(value, bias_array[0], out=value)
        if act is not None:
            act(value, out=value)

    return finish


def epilogue_cost(
    producer: str, out: TensorType, inputs: tuple[TensorType, ...], bias: bool, activation: Any,
    **attrs: Any,
) -> int:  # fmt: skip
    """The producer's flops, one per element for the bias, and the activation's."""
    total = get_op(producer).flops(out, inputs[0], inputs[1], **attrs)
    total += (out.size or 0) * bool(bias)
    if activation is not None:
        total += get_op(activation).flops(out, out)
    return total


def _cost(out: TensorType, *inputs: TensorType, bias: bool, activation: Any) -> int:
    return epilogue_cost("matmul", out, inputs, bias, activation)


matmul_epilogue = defop(
    "matmul_epilogue",
    inputs=VARIADIC,
    infer=_infer,
    kernel=_kernel,
    attrs={"bias": False, "activation": None},
    canonicalize=_canon,
    cost=_cost,
    props=("fusion",),
    doc="act(x @ w + b) as one node; made by gc.backends.numpy.fusion.fuse_matmul_epilogue.",
)
