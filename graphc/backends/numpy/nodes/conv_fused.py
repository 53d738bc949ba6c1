"""`conv2d_fused`: conv2d, then an elementwise body on its result, as one node.

Made by `fuse_conv_body` (graphc.backends.numpy.fusion.conv_epilogue) from `conv2d -> fused`, as in a
batch norm in eval mode, a residual add and a ReLU after a convolution. The attr `body`
is the fused node's body with the convolution as its first placeholder; the node's
inputs are x, w, then the body's other inputs. Each of those must be the same for
every image or have one row per image (at most four axes, and with four a first axis
of 1 or N), so that it can be cut into the convolution's chunks of images.

The kernel is the member ops' own kernels: the convolution writes into the output
buffer and, as each chunk of images is final (still in cache), the body runs on it in
place (`run_body`: each op into a reused buffer of one chunk), so the output is read
once more from cache instead of once per op from memory. Elementwise ops give the
same bits on a chunk as on the whole array, so the node computes its members' results
bit for bit. conv2d_epilogue is the same idea for the bias and activation that
nn.Conv2d builds, fused before elementwise fusion runs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from graphc.backends.numpy.nodes.fused import BodySlots, run_body
from graphc.ir.errors import GraphcError, ShapeError
from graphc.ir.registry import REQUIRED, get_op, register_rule
from graphc.ir.types import TensorType
from graphc.ops.body import body_types, check_body
from graphc.ops.conv_kernels import CHUNK_EPILOGUE, Epilogue, conv2d_kernel, conv2d_scratch
from graphc.ops.defop import VARIADIC, defop

OP = "conv2d_fused"


def per_image(value: TensorType, out: TensorType) -> bool:
    """Whether `value` can be cut into the images of the (N, C, H, W) `out`: it has at
    most four axes, and with four its first is 1 or N."""
    return value.rank < 4 or (value.rank == 4 and value.shape[0] in (1, out.shape[0]))


def _conv(types: tuple[TensorType, ...], body: Any, conv: dict) -> tuple[dict, TensorType]:
    """conv2d's canonical attrs and result type, its errors said of conv2d_fused."""
    if len(types) < 2:
        raise GraphcError(f"{OP}: needs x and w, got {len(types)} inputs")
    check_body(body, len(types) - 1, OP)
    try:
        attrs = get_op("conv2d").canonicalize(types[0], types[1], **conv)  # type: ignore[misc]
        return attrs, get_op("conv2d").infer(types[0], types[1], **attrs)
    except GraphcError as exc:
        raise type(exc)(f"{OP}: {exc}") from None


def _canon(*types: TensorType, body: Any, **conv: Any) -> dict:
    return {**_conv(types, body, conv)[0], "body": body}


def _infer(*types: TensorType, body: Any, **conv: Any) -> TensorType:
    result = _conv(types, body, conv)[1]
    typed = body_types(body, (result, *types[2:]), OP)
    root = typed[check_body(body, len(types) - 1, OP)]
    if root != result:
        raise ShapeError(
            f"{OP}: the body '{body.name}' must keep the convolution's type {result}, gives {root}"
        )
    for placeholder, t in zip(body.inputs[1:], types[2:]):
        if not per_image(t, result):
            raise ShapeError(
                f"{OP}: the body's input '{placeholder.name}' {t} cannot be cut into the "
                f"images of {result}: it needs at most 4 axes, and with 4 a first axis "
                f"of 1 or {result.shape[0]}"
            )
    return root


def chunk_epilogue(*others: np.ndarray, body: Any, **conv: Any) -> Epilogue:
    """The node's work after the convolution, run in place on each chunk of images as
    the convolution finishes it (numpy's im2col here, a backend's own convolution of the
    same geometry elsewhere): the body, on the chunk and the matching rows of `others`."""
    slots = BodySlots(body)
    buffers: list[np.ndarray] = []

    def finish(chunk: np.ndarray, images: slice) -> None:
        if not buffers:  # the first chunk is the largest
            buffers.extend(np.empty(chunk.size, dtype) for dtype in slots.dtypes)
        parts = [a[images] if a.ndim == 4 and a.shape[0] != 1 else a for a in others]
        run_body(body, slots, buffers, [chunk, *parts], chunk)

    return finish


def _kernel(
    x: np.ndarray, w: np.ndarray, *others: np.ndarray, out: np.ndarray | None = None,
    body: Any, **conv: Any,
) -> np.ndarray:  # fmt: skip
    return conv2d_kernel(x, w, out=out, epilogue=chunk_epilogue(*others, body=body), **conv)


def _cost(out: TensorType, *inputs: TensorType, body: Any, **conv: Any) -> int:
    total = get_op("conv2d").flops(out, inputs[0], inputs[1], **conv)
    return total + get_op("fused").flops(out, out, *inputs[2:], body=body)


def _scratch(out: TensorType, *inputs: TensorType, body: Any, **attrs: Any) -> int:
    x, w = inputs[:2]
    if not all(isinstance(d, int) for d in (*x.shape, *w.shape, *out.shape)):
        return 0
    conv = (x.shape, w.shape, out.shape, x.dtype, w.dtype)
    geometry = (attrs["stride"], attrs["padding"], attrs["groups"])
    return conv2d_scratch(*conv, *geometry, epilogue_copies=BodySlots(body).count)


conv2d_fused = defop(
    OP,
    inputs=VARIADIC,
    infer=_infer,
    kernel=_kernel,
    attrs={
        "body": REQUIRED,
        "stride": (1, 1),
        "padding": (0, 0, 0, 0),
        "dilation": (1, 1),
        "groups": 1,
    },  # fmt: skip
    bodies=("body",),
    canonicalize=_canon,
    cost=_cost,
    scratch=_scratch,
    props=("fusion",),
    doc="An elementwise body on conv2d(x, w) and more inputs, as one node; made by "
    "gc.backends.numpy.fusion.fuse_conv_body.",
)
# what a backend's own convolution of the same geometry runs after each chunk of images
# (the native backend's: backends/native/conv.py)
register_rule("conv2d_fused", CHUNK_EPILOGUE, chunk_epilogue)
