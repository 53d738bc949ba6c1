"""conv2d, conv2d_epilogue and conv2d_fused on the native backend.

Two parts, each taken where it applies:

- the convolution: the direct C kernel (direct_conv.py) for stride-1 float32
  convolutions whose kernel is no larger than their output; Winograd's F(2x2, 3x3)
  (winograd.py) before it for the 3x3 ones of dilation 1 and one group that
  `winograd.preferred` gives it (more than one input channel; with AVX-512, 32 or more
  and an output 14 wide or more), with the same epilogue program on its output rows;
  for a plain conv2d whose kernel is larger
  (a weight gradient), the wide kernel (wide_conv.py) where it applies; numpy's im2col
  and BLAS otherwise (`direct_reason`, `winograd.reason` and `wide_conv.wide_reason`
  say why not). The choice depends on the channels, image and kernel sizes only, never on
  the batch, so an image's bits never depend on its batch; and conv2d, conv2d_epilogue
  and conv2d_fused make the same choice for one geometry, so the levels agree bit for
  bit (the three are in the backend's `inexact`);
- the epilogue (conv2d_epilogue's bias and activation) or body (conv2d_fused's
  elementwise ops): one C kernel run on each chunk of images as it is final, at every
  size, so that a plan at another batch size needs no other kernel. Exact (a group with
  an inexact op is never made a body for this backend), so numpy's ops would give the
  same bits; they used to run bodies under native.SMALL elements, and took longer there
  too (a step of conv2d_fused, interleaved medians: a float64 body over 864 elements,
  118 us with numpy's ops, 64 with the C kernel; float32 bodies over 2,000-4,000
  elements at batch 1, 45-87 us against 21-43).

conv_transpose2d of stride 1 (a convolution's input gradient) is the direct kernel's
convolution of the flipped weight (`lower_conv_transpose`).

The body's kernel is built once from the step's full types, like a fused step's. Its
sizes are arguments, so the closure that `chunk_epilogue` makes calls it per chunk with
the chunk's element count, the chunk as both output and first operand (the
convolution), the other operands cut to the chunk's images (made C-contiguous if they
are not), and the block or stride arguments of the chunk's shape.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from graphc.backends.native import calls, direct_conv, matmul, wide_conv, winograd
from graphc.backends.native.kernels import (
    BLOCK,
    FULL,
    STRIDED,
    TRANSPOSED,
    DeclinedError,
    Kernel,
    block_of,
    build_kernel,
    contiguous_descriptor,
    epilogue_body,
)
from graphc.backends.numpy.nodes.conv_epilogue import per_channel
from graphc.ir.graph import Graph
from graphc.ir.registry import get_op
from graphc.ir.types import TensorType
from graphc.ops.conv_kernels import CHUNK_EPILOGUE, conv2d_kernel, no_epilogue
from graphc.runtime.codegen import Generator
from graphc.runtime.plan import Step

CONV_ATTRS = ("stride", "padding", "dilation", "groups")
DIRECT = Kernel(
    name=direct_conv.NAME,
    source=direct_conv.source(),
    operands=[],
    ops=["conv2d"],
    params=direct_conv.PARAMS,
)


def direct_reason(x: TensorType, w: TensorType, out: TensorType, attrs: dict) -> str | None:
    """None when the direct C kernel computes this convolution, else why it does not."""
    if x.dtype != np.float32 or w.dtype != np.float32:
        return "the direct convolution is float32 only"
    if tuple(attrs["stride"]) != (1, 1):
        return "the direct convolution takes stride 1"
    if not all(isinstance(d, int) for d in (*x.shape[1:], *w.shape, *out.shape[1:])):
        return "the direct convolution needs static channels and image sizes"
    out_ch, per_group, kh, kw = w.shape
    if per_group == 1 and out_ch == attrs["groups"]:
        return "depthwise: numpy's per-tap kernel"
    if kh * kw > math.prod(out.shape[2:]):  # type: ignore[arg-type]
        return LARGER_KERNEL
    return None


LARGER_KERNEL = "a kernel larger than its output (a weight gradient)"
WINOGRAD_FIRST = (
    "Winograd's F(2x2, 3x3) runs this 3x3 convolution: fewer multiply-adds than the direct "
    "convolution's (winograd.preferred)"
)


def _kernel_choice(
    x: TensorType, w: TensorType, out: TensorType, attrs: dict
) -> tuple[str | None, bool]:
    """Why the direct kernel does not run (None: it does), and whether Winograd runs:
    on the 3x3 convolutions it applies to that `winograd.preferred` gives it (by the
    geometry, the same for every level and batch)."""
    if winograd.reason(x, w, out, attrs) is None and winograd.preferred(w, out):
        return WINOGRAD_FIRST, True
    return direct_reason(x, w, out, attrs), False


def lower_conv(gen: Generator, step: Step, out: str) -> list[str] | None:
    """The step as the direct convolution and/or its epilogue or body as a C kernel per
    chunk of images, or None (numpy runs the whole step) when neither applies. The
    body's kernel runs at every size (the module's docstring says why)."""
    plan = gen.plan
    out_t = plan.values[step.output].type
    x_t, w_t = (plan.values[v].type for v in step.inputs[:2])
    reason, wino = _kernel_choice(x_t, w_t, out_t, step.attrs)
    wide = None
    if reason == LARGER_KERNEL:
        why = wide_conv.wide_reason(x_t, w_t, out_t, step.attrs)
        if why is None:
            wide = _wide_runner(gen)
        else:
            reason = f"{reason}: {why}"
    program = _program(gen, step) if reason is None or wino else None
    if program is not None and wino:
        return _winograd_step(gen, step, out, *program)
    if program is not None:  # one call per step, its arguments made per thread
        return _direct_step(gen, step, out, *program)
    direct = wide or (_winograd_runner(gen) if wino else None if reason else _runner(gen))
    name = wide_conv.NAME if wide else winograd.NAME if wino else DIRECT.name
    body, others = _body(gen, step)
    epilogue = None
    if body is not None:
        try:
            epilogue = _body_epilogue(gen, body, others, out_t)
        except DeclinedError as exc:
            reason = f"{reason}; the body: {exc}"
    if direct is None and epilogue is None:
        calls.plan_state(gen)["declined"][step.index] = str(reason)
        return None
    x, w = gen.array(step.inputs[0]), gen.array(step.inputs[1])
    if direct is None:  # numpy's convolution with the C body
        conv = gen.const(conv2d_kernel, "kernel_conv2d")
        geometry = gen.const({k: step.attrs[k] for k in CONV_ATTRS}, "geometry")
        return [f"{conv}({x}, {w}, out={out}, epilogue={epilogue}, **{geometry})"]
    lines = [f"# the convolution in C ({name}), the C body per chunk"]
    if epilogue is None:
        lines = [f"# the convolution in C ({name}), numpy's epilogue per chunk"]
        epilogue = _numpy_epilogue(gen, step)
    a, ints = step.attrs, lambda values: tuple(int(v) for v in values)  # literals
    geometry = f"{ints(a['padding'])}, {ints(a['dilation'])}, {int(a['groups'])}"
    return lines + [f"{direct}({x}, {w}, {out}, {geometry}, {epilogue})"]


def _numpy_epilogue(gen: Generator, step: Step) -> str:
    """Source making the step's work after the convolution with numpy's ops, per chunk
    of images: the node's own "chunk_epilogue" rule (nothing for a plain conv2d)."""
    make = get_op(step.node.op).rules.get(CHUNK_EPILOGUE)  # type: ignore[arg-type]
    if make is None:  # a plain conv2d
        return gen.const(no_epilogue, "no_epilogue")
    others = "".join(f"{gen.array(v)}, " for v in step.inputs[2:])
    attrs = gen.const(dict(step.attrs), "attrs")
    return f"{gen.const(make, 'chunk_epilogue')}({others}**{attrs})"


def _direct_step(gen: Generator, step: Step, out: str, codes: str, operands: list) -> list[str]:
    """The call of the direct kernel with the step's epilogue program: addresses of
    static arrays taken once per thread, of the others per call."""
    a, plan = step.attrs, gen.plan
    w_t = plan.values[step.inputs[1]].type
    geometry = (a["padding"], a["dilation"], a["groups"])
    lines = [f"# the direct convolution ({DIRECT.name}), its epilogue in registers"]
    weight = lambda lines: calls.value_address(gen, step.inputs[1], lines)  # noqa: E731
    return _call_direct(gen, step, out, w_t.shape, geometry, codes, operands, lines, weight)


def _call_direct(
    gen: Generator,
    step: Step,
    out: str,
    w_shape: tuple,
    geometry: tuple,
    codes: str,
    operands: list,
    lines: list[str],
    weight: Callable[[list[str]], str],
) -> list[str]:
    """`lines` and the direct kernel's call on the step's input 0 and the weight of
    `w_shape` whose address `weight` gives (after the input's), with `geometry`
    (padding, dilation, groups) and the epilogue program `codes` on `operands`."""
    plan = gen.plan
    x_t = plan.values[step.inputs[0]].type
    out_t = plan.values[step.output].type
    name = gen.fresh("conv_step")
    ints = lambda values: tuple(int(v) for v in values)  # noqa: E731 - literals
    shapes = f"{ints(x_t.shape)}, {ints(w_shape)}, {ints(out_t.shape)}"
    padding, dilation, groups = geometry
    geometry_source = f"{ints(padding)}, {ints(dilation)}, {int(groups)}"
    make = gen.const(direct_conv.prepared, "prepared")
    gen.setup_lines.append(
        f"{name}, {name}_nulls, {name}_pad = {make}({shapes}, {geometry_source}, {codes})"
    )
    fn = _direct_kernel(gen)
    if not x_t.shape[0]:
        return lines + ["# (no images)"]
    x = calls.value_address(gen, step.inputs[0], lines)
    w = weight(lines)
    args = [str(x_t.shape[0]), x, w, calls.address(gen, out, step.output in gen.static, lines)]
    args.append(f"*{name}")
    for operand in operands:
        if operand is None:  # relu: the step takes no operand
            args.append(gen.const(calls.NULL, "null"))
        else:
            args.append(calls.operand(gen, operand[0], operand[1], lines))
    lines.append(f"{fn}({', '.join(args)}, *{name}_nulls)")
    return lines


def transposed_as_conv(
    x: TensorType, w: TensorType, out: TensorType, attrs: dict
) -> tuple[tuple, tuple] | str:
    """A conv_transpose2d of stride 1 as the direct kernel's conv2d of the same input:
    (the shape of its weight, w's channels swapped and taps reversed, and its padding:
    the dilated kernel's extent less the transpose's own), or why not."""
    if tuple(attrs["stride"]) != (1, 1):
        return "a transposed convolution of stride 1 only"
    if attrs["groups"] != 1:
        return "a transposed convolution of one group only"
    if not all(isinstance(d, int) and d > 0 for d in (*x.shape, *w.shape, *out.shape)):
        return "a transposed convolution of static, non-empty shapes only"
    in_ch, out_ch, kh, kw = w.shape
    (dh, dw), (top, left, bottom, right) = attrs["dilation"], attrs["padding"]
    extra_h, extra_w = attrs["output_padding"]
    padding = (
        dh * (kh - 1) - top,
        dw * (kw - 1) - left,
        dh * (kh - 1) - bottom + extra_h,
        dw * (kw - 1) - right + extra_w,
    )
    if min(padding) < 0:
        return "padding past the dilated kernel"
    flipped_t = TensorType((out_ch, in_ch, kh, kw), w.dtype)
    conv_attrs = {"stride": (1, 1), "dilation": attrs["dilation"], "groups": 1}
    reason = direct_reason(x, flipped_t, out, conv_attrs)
    return reason if reason is not None else (flipped_t.shape, padding)


def flipped(w: np.ndarray, out: np.ndarray) -> bool:
    """Write into `out` the conv2d weight (O, C, kH, kW) equal to conv_transpose2d's w
    (C, O, kH, kW): its channels swapped and its taps reversed. Whether it is finite:
    the convolution multiplies the weight by the padding's zeros too, where the
    transpose's scatter never does, so an inf or nan in it would make nan where numpy's
    kernel gives inf or a number."""
    np.copyto(out, w.transpose(1, 0, 2, 3)[:, :, ::-1, ::-1])
    return bool(np.isfinite(out).all())


def lower_conv_transpose(gen: Generator, step: Step, out: str) -> list[str] | None:
    """A stride-1 conv_transpose2d (a convolution's input gradient) as the direct kernel's
    convolution of the flipped weight, flipped once when it is a constant, else on
    every call into a buffer of the thread's; numpy's kernel on a call whose weight is
    not finite (see `flipped`). None (numpy's im2col) where that does not apply. Its
    sums run in the direct kernel's order: inexact, like conv2d's."""
    plan = gen.plan
    x_t, w_t = (plan.values[v].type for v in step.inputs[:2])
    found = transposed_as_conv(x_t, w_t, plan.values[step.output].type, step.attrs)
    if isinstance(found, str):
        calls.plan_state(gen)["declined"][step.index] = found
        return None
    w_shape, padding = found
    flip = gen.const(flipped, "flipped")
    source = gen.array(step.inputs[1])
    name = gen.fresh("flipped_w")
    zeros = gen.const(np.zeros, "zeros")
    gen.setup_lines.append(
        f"{name} = {zeros}({tuple(w_shape)}, dtype={gen.const(np.float32, 'f32')})"
    )
    lines = [f"# conv_transpose2d as the direct convolution ({DIRECT.name}) of the flipped weight"]
    if step.inputs[1] in plan.constants:
        gen.setup_lines.append(f"{name}_finite = {flip}({source}, {name})")
    else:
        lines.append(f"{name}_finite = {flip}({source}, {name})")
    weight = lambda lines: calls.address(gen, name, True, lines)  # noqa: E731
    codes = gen.const(np.zeros(0, np.int64), "codes")
    geometry = (padding, step.attrs["dilation"], 1)
    lines = _call_direct(gen, step, out, w_shape, geometry, codes, [], lines, weight)
    kernel = gen.const(get_op("conv_transpose2d").kernel, "kernel_conv_transpose2d")
    inputs = ", ".join(gen.array(v) for v in step.inputs)
    attrs = gen.const(dict(step.attrs), "attrs")
    numpy_call = f"{kernel}({inputs}, out={out}, **{attrs})"
    lines[-1] = f"{lines[-1]} if {name}_finite else {numpy_call}"
    return lines


def _program(gen: Generator, step: Step) -> tuple[str, list] | None:
    """The direct kernel's epilogue program for the step: the name of its codes and, per
    program step, its operand's source and whether it is static (None for relu); empty
    for a plain conv2d; None when the elementwise work is not a chain of float32 ops in
    direct_conv.CODES on operands of one value, one value per channel or the output's
    shape (a chunk epilogue then runs it), or a shape is symbolic."""
    plan = gen.plan
    types = [plan.values[v].type for v in (*step.inputs[:2], step.output)]
    if not all(isinstance(d, int) for t in types for d in t.shape):
        return None
    body, others = _body(gen, step)
    if body is None:
        if step.node.op != "conv2d":
            return None
        return gen.const(np.zeros(0, np.int64), "codes"), []
    links = direct_conv.chain(body)
    if links is None:
        return None
    out_t = gen.plan.values[step.output].type
    codes, operands = [], []
    leaves = {p: others[k - 1] for k, p in enumerate(body.inputs) if k}
    for op, leaf, swap in links:
        kind = 0
        if leaf is not None:
            value = leaves.get(leaf)
            t = leaf.type if value is None else gen.plan.values[value].type
            if t.dtype != np.float32:
                return None
            if t.size == 1:
                kind = direct_conv.SCALAR
            elif t.shape == out_t.shape:
                kind = direct_conv.FULL
            elif per_channel(t, out_t):
                kind = direct_conv.CHANNEL
            else:
                return None
            if value is None:  # a constant of the body
                operands.append((gen.const(np.ascontiguousarray(leaf.value), "body_c"), True))
            else:
                operands.append((gen.array(value), calls.in_order(gen, value)))
        else:
            operands.append(None)  # relu: the step takes no operand
        codes.append(direct_conv.CODES[op] | kind << 4 | int(swap) << 6)
    return gen.const(np.array(codes, np.int64), "codes"), operands


def _direct_kernel(gen: Generator) -> str:
    """The direct kernel's name, noting that one more step calls it."""
    if DIRECT.name in calls.plan_state(gen)["kernels"]:
        calls.plan_state(gen)["calls"] += 1
    else:
        calls.record(gen, DIRECT)
    return DIRECT.name


def _runner(gen: Generator) -> str:
    """The name of this plan's runner of the direct kernel (made once per thread), for
    a step whose body runs per chunk."""
    state = calls.plan_state(gen)
    kernel = _direct_kernel(gen)
    if "direct" not in state:
        name = gen.fresh("direct_conv")
        gen.setup_lines.append(f"{name} = {gen.const(direct_conv.runner, 'runner')}({kernel})")
        state["direct"] = name
    return state["direct"]


def _winograd_scratch(gen: Generator) -> str:
    """The name of the scratch this plan's Winograd steps share (made once per thread:
    the steps of a thread run one after another), room for the largest of them."""
    state = calls.plan_state(gen)
    if "winograd_scratch" not in state:
        plan, size = gen.plan, 1
        for step in plan.steps:
            if gen.backend.lowerings.get(step.node.op) is not lower_conv:
                continue
            x_t, w_t = (plan.values[v].type for v in step.inputs[:2])
            out_t = plan.values[step.output].type
            if _kernel_choice(x_t, w_t, out_t, step.attrs)[1]:
                shape = (0, *x_t.shape[1:])
                size = max(size, winograd.scratch_size(shape, w_t.shape, step.attrs["padding"]))
        name = gen.fresh("winograd_scratch")
        make = gen.const(matmul.aligned, "aligned")
        gen.setup_lines.append(f"{name} = {make}({size})")
        state["winograd_scratch"] = name
    return state["winograd_scratch"]


def _winograd_kernels(gen: Generator) -> None:
    """Note that one more step calls the Winograd kernel (its program kernel, for the
    images it computes again, comes with it: one step, one call counted)."""
    state = calls.plan_state(gen)
    if winograd.NAME in state["kernels"]:
        state["calls"] += 1
    else:
        calls.record(gen, winograd.KERNEL)
        state["kernels"][winograd.PROGRAM_NAME] = winograd.PROGRAM
        gen.namespace.setdefault(winograd.PROGRAM_NAME, None)


def _winograd_step(gen: Generator, step: Step, out: str, codes: str, operands: list) -> list[str]:
    """The call of the Winograd kernel with the step's epilogue program: addresses of
    static arrays taken once per thread, of the others per call; the per-thread
    winograd.Convolution holds the transformed weight (made at setup when the weight is
    constant), the scratch and the flags, and computes again the images the call
    flags (its status). The generated code makes the call, so an entry's tape records
    it (the tape has the convolution compute those images: Kernel.repairs)."""
    plan = gen.plan
    x_t, w_t = (plan.values[v].type for v in step.inputs[:2])
    _winograd_kernels(gen)
    lines = [
        f"# the Winograd convolution ({winograd.NAME})" + (", its epilogue in C" * bool(operands))
    ]
    if not x_t.shape[0]:
        return lines + ["# (no images)"]
    name = gen.fresh("winograd")
    make = gen.const(winograd.Convolution, "winograd")
    ints = lambda values: tuple(int(v) for v in values)  # noqa: E731 - literals
    shapes = f"{ints(x_t.shape)}, {ints(w_t.shape)}, {ints(step.attrs['padding'])}"
    weight = gen.array(step.inputs[1]) if step.inputs[1] in plan.constants else "None"
    kernels = f"{winograd.NAME}, {winograd.PROGRAM_NAME}"
    gen.setup_lines += [
        f"{name} = {make}({kernels}, {shapes}, {codes}, {weight}, {_winograd_scratch(gen)})",
        f"{name}_u, {name}_tail, {name}_keep = {name}.words()",
    ]
    x = calls.value_address(gen, step.inputs[0], lines)
    w = calls.value_address(gen, step.inputs[1], lines)
    y = calls.address(gen, out, step.output in gen.static, lines)
    null = gen.const(calls.NULL, "null")
    program = [null if o is None else calls.operand(gen, o[0], o[1], lines) for o in operands]
    program += [null] * (winograd.MAX_OPERANDS - len(operands))
    call = f"{winograd.NAME}({x_t.shape[0]}, {x}, {w}, {name}_u, {y}, *{name}_tail, {', '.join(program)})"
    arrays = [gen.array(v) for v in step.inputs[:2]] + [out]
    arrays += ["None" if o is None else o[0] for o in operands]
    return [*lines, f"if {call}:", f"    {name}.again({', '.join(arrays)})"]


def _winograd_runner(gen: Generator) -> str:
    """The name of this plan's runner of the Winograd kernel (made once per thread), for
    a step whose body runs per chunk."""
    state = calls.plan_state(gen)
    _winograd_kernels(gen)
    if "winograd" not in state:
        name = gen.fresh("winograd_conv")
        make = gen.const(winograd.runner, "winograd_runner")
        scratch = _winograd_scratch(gen)
        kernels = f"{winograd.NAME}, {winograd.PROGRAM_NAME}"
        gen.setup_lines.append(f"{name} = {make}({kernels}, {scratch})")
        state["winograd"] = name
    return state["winograd"]


def _wide_runner(gen: Generator) -> str:
    """The name of this plan's runner of the wide kernel (made once per thread)."""
    state = calls.plan_state(gen)
    calls.record(gen, wide_conv.KERNEL)
    if "wide" not in state:
        name = gen.fresh("wide_conv")
        make = gen.const(wide_conv.runner, "wide_runner")
        gen.setup_lines.append(f"{name} = {make}({wide_conv.NAME})")
        state["wide"] = name
    return state["wide"]


def _body(gen: Generator, step: Step) -> tuple[Graph | None, list[str]]:
    """The step's elementwise work after the convolution, as a body whose placeholder 0
    is the convolution, and the values its other placeholders read."""
    op, attrs = step.node.op, step.attrs
    if op == "conv2d_fused":
        return attrs["body"], list(step.inputs[2:])
    if op == "conv2d_epilogue" and (attrs.get("bias") or attrs.get("activation")):
        out_t = gen.plan.values[step.output].type
        bias = step.inputs[2] if attrs.get("bias") else None
        bias_t = gen.plan.values[bias].type if bias is not None else None
        return epilogue_body(out_t, bias_t, attrs.get("activation")), [bias] if bias else []
    return None, []


def _body_epilogue(gen: Generator, body: Graph, others: list[str], out_t: TensorType) -> str:
    """Source making the epilogue that runs `body`'s C kernel on each chunk of images."""
    plan = gen.plan
    types = [out_t, *(plan.values[x].type for x in others)]
    known = {
        k + 1: np.asarray(plan.nodes[x].value) for k, x in enumerate(others) if x in plan.constants
    }
    arrays = [gen.array(x) for x in others]
    for c in (n for n in body.nodes if n.is_constant):
        array = np.ascontiguousarray(c.value)
        types.append(TensorType.of(array))
        arrays.append(gen.const(array, "body_c"))
    kernel = build_kernel(body, types, out_t, known)
    if kernel.operands[0].mode != FULL or any(o.mode == TRANSPOSED for o in kernel.operands):
        raise DeclinedError("an operand of the body is a transposed view, cut per chunk")
    calls.record(gen, kernel)
    modes = gen.const(tuple(o.mode for o in kernel.operands[1:]), "modes")
    make = gen.const(chunk_epilogue, "chunk_epilogue")
    operands = f"({', '.join(arrays)},)" if arrays else "()"
    return f"{make}({kernel.name}, {modes}, {operands})"


def chunk_epilogue(
    kernel: Callable[..., None], modes: Sequence[str], operands: Sequence[np.ndarray]
) -> Callable[[np.ndarray, slice], None]:
    """conv2d_kernel's epilogue calling `kernel` on a chunk of images in place."""
    now, address = calls.address_now, calls.static_address

    def run(chunk: np.ndarray, images: slice) -> None:
        at = now(chunk)
        args: list[Any] = [chunk.size, at, at]
        alive = []  # the arrays whose addresses the call takes
        for mode, array in zip(modes, operands):
            if array.ndim == 4 and array.shape[0] != 1:
                array = array[images]
            array = np.ascontiguousarray(array)
            alive.append(array)
            args.append(now(array))
            if mode == BLOCK:
                args += block_of(array.shape, chunk.shape)  # type: ignore[arg-type]
            elif mode == STRIDED:
                descriptor = contiguous_descriptor(array.shape, chunk.shape)
                alive.append(descriptor)
                args.append(address(descriptor))
        kernel(*args)

    return run
