"""conv2d_fused on the native backend: numpy's convolution (the same BLAS calls, so the
same bits), then its elementwise body as one C kernel on each chunk of images, instead
of numpy's one pass per op over the chunk.

The kernel is built once from the step's full types, like a fused step's. Its sizes are
arguments, so the closure that `chunk_epilogue` makes calls it per chunk with the chunk's
element count, the chunk as both output and first operand (the body's convolution), the
other operands cut to the chunk's images (made C-contiguous if they are not), and the
block or stride arguments of the chunk's shape. The body holds only exact ops (the
pipeline leaves groups with an inexact op unfused for this backend), so the C loop gives
numpy's bits.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from graphc.ir.types import TensorType
from graphc.ops.conv_kernels import conv2d_kernel
from graphc.runtime.codegen import Generator
from graphc.runtime.native import calls
from graphc.runtime.native.kernels import (
    BLOCK,
    FULL,
    STRIDED,
    TRANSPOSED,
    DeclinedError,
    block_of,
    build_kernel,
    contiguous_descriptor,
)
from graphc.runtime.plan import Step

CONV_ATTRS = ("stride", "padding", "dilation", "groups")


def lower_conv2d_fused(gen: Generator, step: Step, out: str) -> list[str] | None:
    """numpy's conv2d into the output with the body's C kernel as its epilogue, or None
    (numpy runs the whole step) when the body has no C form."""
    plan = gen.plan
    out_t = plan.values[step.output].type
    body = step.attrs["body"]
    others = list(step.inputs[2:])
    types = [out_t, *(plan.values[x].type for x in others)]
    known = {
        k + 1: np.asarray(plan.nodes[x].value) for k, x in enumerate(others) if x in plan.constants
    }
    arrays = [gen.array(x) for x in others]
    for c in (n for n in body.nodes if n.is_constant):
        array = np.ascontiguousarray(c.value)
        types.append(TensorType.of(array))
        arrays.append(gen.const(array, f"{step.output}_c"))
    try:
        kernel = build_kernel(body, types, out_t, known)
        if kernel.operands[0].mode != FULL or any(o.mode == TRANSPOSED for o in kernel.operands):
            raise DeclinedError("an operand of the body is a transposed view, cut per chunk")
    except DeclinedError as exc:
        calls.plan_state(gen)["declined"][step.index] = str(exc)
        return None
    calls.record(gen, kernel)
    modes = gen.const(tuple(o.mode for o in kernel.operands[1:]), "modes")
    make = gen.const(chunk_epilogue, "chunk_epilogue")
    conv = gen.const(conv2d_kernel, "kernel_conv2d")
    geometry = gen.const({k: step.attrs[k] for k in CONV_ATTRS}, "geometry")
    x, w = gen.array(step.inputs[0]), gen.array(step.inputs[1])
    operands = f"({', '.join(arrays)},)" if arrays else "()"
    epilogue = f"{make}({kernel.name}, {modes}, {operands})"
    return [
        f"# native kernel {kernel.name} on each chunk of images: {' '.join(kernel.ops)}",
        f"{conv}({x}, {w}, out={out}, epilogue={epilogue}, **{geometry})",
    ]


def chunk_epilogue(
    kernel: Callable[..., None], modes: Sequence[str], operands: Sequence[np.ndarray]
) -> Callable[[np.ndarray, slice], None]:
    """conv2d_kernel's epilogue calling `kernel` on a chunk of images in place."""
    address = calls.static_address

    def run(chunk: np.ndarray, images: slice) -> None:
        args: list[Any] = [chunk.size, address(chunk), address(chunk)]
        alive = []  # the arrays whose addresses the call takes
        for mode, array in zip(modes, operands):
            if array.ndim == 4 and array.shape[0] != 1:
                array = array[images]
            array = np.ascontiguousarray(array)
            alive.append(array)
            args.append(address(array))
            if mode == BLOCK:
                args += block_of(array.shape, chunk.shape)  # type: ignore[arg-type]
            elif mode == STRIDED:
                descriptor = contiguous_descriptor(array.shape, chunk.shape)
                alive.append(descriptor)
                args.append(address(descriptor))
        kernel(*args)

    return run
