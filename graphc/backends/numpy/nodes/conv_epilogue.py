"""`conv2d_epilogue`: conv2d, plus a per-channel bias, then an activation, as one node.

Made by `fuse_conv_epilogue` (graphc.backends.numpy.fusion.conv_epilogue) from `conv2d -> add(bias)
-> activation`, the form `gc.conv2d(x, w, b)` and `nn.Conv2d` build. The kernel is the
member ops' own kernels: the convolution writes into the output buffer and, as each
chunk of images is final (still in cache), the bias add and the activation run on it
in place, so no full-size intermediate is allocated and the output is read once more
from cache instead of twice from memory. Elementwise ops give the same bits on a chunk
as on the whole array, so the node computes its members' results bit for bit.

The bias varies along the channels only (shape (C, 1, 1), or one element), which is
what lets it be added chunk by chunk of images; other adds stay unfused.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from graphc.backends.numpy.nodes.epilogue import bias_and_activation, check_epilogue, epilogue_cost
from graphc.ir.errors import GraphcError, ShapeError
from graphc.ir.registry import get_op, register_rule
from graphc.ir.types import TensorType, format_shape
from graphc.ops.conv_kernels import CHUNK_EPILOGUE, Epilogue, conv2d_kernel, conv2d_scratch
from graphc.ops.defop import VARIADIC, defop

CONV_ATTRS = ("stride", "padding", "dilation", "groups")


def per_channel(bias: TensorType, out: TensorType) -> bool:
    """Whether `bias` varies along the channel axis of the (N, C, H, W) `out` only."""
    if bias.rank > 4:
        return False
    shape = (1,) * (4 - bias.rank) + tuple(bias.shape)
    return shape[0] == 1 and shape[2] == 1 and shape[3] == 1 and shape[1] in (1, out.shape[1])


def _canon(*types: TensorType, bias: Any, activation: Any, **conv: Any) -> dict:
    check_epilogue("conv2d_epilogue", types, bias, activation)
    with _named():
        attrs = get_op("conv2d").canonicalize(types[0], types[1], **conv)  # type: ignore[misc]
    return {**attrs, "bias": bool(bias), "activation": activation}


@contextmanager
def _named() -> Iterator[None]:
    """conv2d's own errors, said of conv2d_epilogue."""
    try:
        yield
    except GraphcError as exc:
        raise type(exc)(f"conv2d_epilogue: {exc}") from None


def _infer(*types: TensorType, bias: bool, activation: Any, **conv: Any) -> TensorType:
    _canon(*types, bias=bias, activation=activation, **conv)
    with _named():
        result = get_op("conv2d").infer(types[0], types[1], **conv)
    if bias:
        with_bias = get_op("add").infer(result, types[2])
        if with_bias != result or not per_channel(types[2], result):
            raise ShapeError(
                f"conv2d_epilogue: the bias must be per channel, shape (C, 1, 1), and keep "
                f"the convolution's type {result}; got {types[2]} (shape "
                f"{format_shape(types[2].shape)})"
            )
    if activation is not None and get_op(activation).infer(result) != result:
        raise ShapeError(f"conv2d_epilogue: {activation} would change the type {result}")
    return result


def chunk_epilogue(*bias_array: np.ndarray, bias: bool, activation: Any, **conv: Any) -> Epilogue:
    """The node's work after the convolution, run in place on each chunk of images as
    the convolution finishes it (numpy's im2col here, a backend's own convolution of the
    same geometry elsewhere): the bias add, then the activation."""
    finish = bias_and_activation(bias_array, bias, activation)
    return lambda chunk, images: finish(chunk)


def _kernel(
    x: np.ndarray,
    w: np.ndarray,
    *bias_array: np.ndarray,
    out: np.ndarray | None = None,
    bias: bool = False,
    activation: Any = None,
    **conv: Any,
) -> np.ndarray:
    finish = chunk_epilogue(*bias_array, bias=bias, activation=activation)
    return conv2d_kernel(x, w, out=out, epilogue=finish, **conv)


def _cost(out: TensorType, *inputs: TensorType, bias: bool, activation: Any, **conv: Any) -> int:
    return epilogue_cost("conv2d", out, inputs, bias, activation, **conv)


def _scratch(out: TensorType, *inputs: TensorType, activation: Any, **attrs: Any) -> int:
    x, w = inputs[:2]
    if not all(isinstance(d, int) for d in (*x.shape, *w.shape, *out.shape)):
        return 0
    # an activation whose kernel makes a temporary the size of its input (gelu, sigmoid;
    # measured with tracemalloc in tests/runtime/test_scratch.py) needs one more copy
    copies = int(activation is not None and get_op(activation).has("allocates_one_temporary"))
    conv = (x.shape, w.shape, out.shape, x.dtype, w.dtype, attrs["stride"], attrs["padding"],
            attrs["groups"])  # fmt: skip
    return conv2d_scratch(*conv, epilogue_copies=copies)


conv2d_epilogue = defop(
    "conv2d_epilogue",
    inputs=VARIADIC,
    infer=_infer,
    kernel=_kernel,
    attrs={
        "stride": (1, 1),
        "padding": (0, 0, 0, 0),
        "dilation": (1, 1),
        "groups": 1,
        "bias": False,
        "activation": None,
    },
    canonicalize=_canon,
    cost=_cost,
    scratch=_scratch,
    props=("fusion",),
    doc="act(conv2d(x, w) + b) with a per-channel bias b, as one node; made by "
    "gc.backends.numpy.fusion.fuse_conv_epilogue.",
)
# what a backend's own convolution of the same geometry runs after each chunk of images
# (the native backend's: backends/native/conv.py)
register_rule("conv2d_epilogue", CHUNK_EPILOGUE, chunk_epilogue)
