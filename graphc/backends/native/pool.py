"""max_pool2d and max_pool2d_backward on the native backend: one C function over every
(image, channel) plane.

numpy's kernel (ops/maxpool.py) makes one `maximum` call per kernel tap over the whole
batch, each on strided views: about 8 us for a LeNet image's 2x2 pool, most of it
per-call costs, and 120 us for a batch of 64 of LeNet's first layer. float32 2x2
windows of stride 2 wholly inside the input (LeNet's, most CNNs') are vector code
(`F32` below: 36 us for that batch; a scalar loop took 640 us there, its comparisons
branches that random data mispredicts). Any other geometry is that scalar loop: each
output row takes each tap in turn over the run of columns where it meets the input.
Measured against numpy's kernel on 3x3 pools of random data, it is still faster:
(8, 64, 28, 28) with stride 2 and padding 1, 504 us against 567; (4, 32, 28, 28) with
stride 1, 268 against 349; (1, 16, 14, 14) with stride 2, 9 against 22.

Bits: numpy's. Each output starts at -inf (the padding never wins) and meets the taps in
the same row-major order as numpy's kernel, each through numpy's `maximum(tap, running)`
(a nan in the tap wins, then one in the running maximum; of equal values the running
one: PyTorch's scan), so every output is the same sequence of the same exactly rounded
operations. float32 and float64; integer inputs stay on numpy.

max_pool2d_backward (a CNN's training step runs one per pool): numpy's kernel takes a
few whole-batch passes per tap (equality, nan tests, masks, an add): 0.35 ms for the
gradient of LeNet's first pool over a batch of 64. Here it is one pass; see BACKWARD
for why the bits are numpy's.
"""

from __future__ import annotations

import numpy as np

from graphc.backends.native import calls
from graphc.backends.native.c_sources import c_source
from graphc.backends.native.kernels import Kernel, parallel_flag
from graphc.runtime.codegen import Generator
from graphc.runtime.plan import Step

# planes, then x, out, then H, W, Ho, Wo, kH, kW, stride (rows, cols), top, left,
# dilation (rows, cols), and whether to run on the OpenMP pool (`_parallel`)
PARAMS = "pp" + "i" * 13
# output elements x taps of one call from which the planes run on the OpenMP pool: a
# pool is a few loads per output, and waking the pool costs 10-50 us here
PARALLEL_WORK = 1 << 22
# the same while the pool is warm (its workers still spin after a region, as after the
# convolution before a pool: calls.POOL_CLOCK). LeNet over 64 images on an AVX2 machine
# of two cores, interleaved medians: 756 us a call with both pools on one thread, 705
# with the first on two (2**18), 679 with both (2**16; 2**15 the same)
WARM_WORK = 1 << 16


def _parallel(work: int) -> int:
    """The kernels' `parallel` argument for this much work."""
    return parallel_flag(work, PARALLEL_WORK, WARM_WORK)


SOURCE = c_source("max_pool.h")

F64 = c_source("max_pool_f64.c")

# float32 2x2 windows of stride 2 wholly inside the input: each row of outputs from a
# pair of input rows, GC_W outputs at a time, the even and odd columns of 2 GC_W inputs
# split by shuffles, numpy's maximum (max_f32) as vector code, loads and stores of a
# row's last partial vector masked: branch-free, where a scalar loop mispredicted the
# comparisons of random data and memcpy'd tails cost a call each (140 us for LeNet's
# first pool over a batch of 64). The first tap is the running maximum of -inf and
# it, so it starts the chain.
F32 = c_source("max_pool_f32.c")

# one kernel per dtype, each with the macros (an identical redefinition is valid C)
KERNELS = {
    np.dtype(np.float32): Kernel("gc_max_pool2d_f32", SOURCE + F32, [], ["max_pool2d"], PARAMS),
    np.dtype(np.float64): Kernel("gc_max_pool2d_f64", SOURCE + F64, [], ["max_pool2d"], PARAMS),
}

# max_pool2d_backward: planes, then ct, x, pooled, grad, the winners' buffer (an int32
# per window, the plan's), then the sizes as above
BACKWARD_PARAMS = "ppppp" + "i" * 13

# Each window's cotangent goes to its winner, the first tap (row-major) whose input
# equals the pooled value, or where that is nan the last tap holding a nan (PyTorch's),
# as numpy's kernel (ops/maxpool.py) finds it; numpy then adds, tap by tap, each window's kept cotangent into the gradient
# (+0.0 first). Here the winners are found first, then each tap in turn adds the
# cotangents of the windows it won: the same additions in the same order, so the same
# bits (the +0.0 numpy adds for the windows a tap did not win changes nothing: the
# gradient never holds -0.0). 2x2 windows of stride 2 inside the input touch each
# input once: one pass, branch-free, 0.0f + ct at the winner and +0.0 elsewhere.
BACKWARD = c_source("max_pool_backward.h")

# float32: the vector pass; float64: the scalar one (each dtype its own functions, so
# that a plan with both compiles them once)
BACKWARD_F32 = c_source("max_pool_backward_f32.c")

BACKWARD_F64 = c_source("max_pool_backward_f64.c")
BACKWARD_KERNELS = {
    np.dtype(dtype): Kernel(
        f"gc_max_pool2d_backward_{t}", BACKWARD + part, [], ["max_pool2d_backward"], BACKWARD_PARAMS
    )
    for dtype, t, part in ((np.float32, "f32", BACKWARD_F32), (np.float64, "f64", BACKWARD_F64))
}


def _taps(attrs: dict) -> int:
    return attrs["kernel_size"][0] * attrs["kernel_size"][1]


def _sizes(x_shape: tuple, pooled_shape: tuple, attrs: dict) -> list[int]:
    """The C functions' geometry after their addresses: H, W, Ho, Wo, kH, kW, stride,
    top, left, dilation (PARAMS)."""
    a = attrs
    return [*x_shape[2:], *pooled_shape[2:], *a["kernel_size"], *a["stride"],
            *a["padding"][:2], *a["dilation"]]  # fmt: skip


def lower_max_pool2d(gen: Generator, step: Step, out: str) -> list[str] | None:
    """One call of the C pooling over every plane, or None (numpy's kernel) for an
    input neither float32 nor float64 or a symbolic shape."""
    x_t = gen.plan.values[step.inputs[0]].type
    out_t = gen.plan.values[step.output].type
    kernel = KERNELS.get(x_t.dtype)
    if kernel is None or not all(isinstance(d, int) for d in (*x_t.shape, *out_t.shape)):
        values = "integer" if x_t.dtype.kind in "iu" else str(x_t.dtype)  # float16
        why = f"{values} values" if kernel is None else "a symbolic shape"
        calls.plan_state(gen)["declined"][step.index] = f"max_pool2d in C: not for {why}"
        return None
    calls.record(gen, kernel)
    n, c, h, w = x_t.shape
    ho, wo = out_t.shape[2:]
    parallel = _parallel(n * c * ho * wo * _taps(step.attrs))
    lines: list[str] = []
    x_at = calls.value_address(gen, step.inputs[0], lines)
    out_at = calls.address(gen, out, step.output in gen.static, lines)
    sizes = _sizes(x_t.shape, out_t.shape, step.attrs)
    args = ", ".join(str(v) for v in [n * c, x_at, out_at, *sizes, parallel])
    return [*lines, f"{kernel.name}({args})"]


def lower_max_pool2d_backward(gen: Generator, step: Step, out: str) -> list[str] | None:
    """One call of the C routing over every plane (numpy's bits), or None (numpy's
    kernel) for other dtypes (the cotangent, input and pooled of one float dtype) or a
    symbolic shape."""
    ct_t, x_t, pooled_t = (gen.plan.values[v].type for v in step.inputs)
    kernel = BACKWARD_KERNELS.get(x_t.dtype)
    if kernel is None or ct_t.dtype != x_t.dtype or pooled_t.dtype != x_t.dtype:
        why = "values of one float dtype only"
    elif not all(isinstance(d, int) for d in (*x_t.shape, *ct_t.shape)):
        why = "static shapes only"
    else:
        why = None
    if why is not None:
        calls.plan_state(gen)["declined"][step.index] = f"max_pool2d_backward in C: {why}"
        return None
    calls.record(gen, kernel)
    a = step.attrs
    n, c, h, w = x_t.shape
    ho, wo = ct_t.shape[2:]
    parallel = _parallel(n * c * max(ho * wo * _taps(a), h * w))
    lines: list[str] = []
    ct_at, x_at, pooled_at = (calls.value_address(gen, v, lines) for v in step.inputs)
    out_at = calls.address(gen, out, step.output in gen.static, lines)
    geometry = (a["kernel_size"], a["stride"], tuple(a["padding"][:2]), a["dilation"])
    one_pass = geometry == ((2, 2), (2, 2), (0, 0), (1, 1)) and 2 * ho <= h and 2 * wo <= w
    count = 1 if one_pass else max(1, n * c * ho * wo)  # the general path's winners
    wins = gen.fresh("winners")  # made once per thread
    empty = gen.const(np.empty, "empty")
    gen.setup_lines.append(f"{wins} = {empty}({count}, {gen.const(np.int32, 'i32')})")
    wins_at = calls.address(gen, wins, True, lines)
    sizes = _sizes(x_t.shape, ct_t.shape, a)
    args = [n * c, ct_at, x_at, pooled_at, out_at, wins_at, *sizes, parallel]
    args = ", ".join(str(v) for v in args)
    return [*lines, f"{kernel.name}({args})"]
