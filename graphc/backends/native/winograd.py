"""Winograd F(2x2, 3x3): the native backend's float32 3x3 convolutions.

On 256-bit vectors (no AVX-512: direct_conv.WIDE_REGISTERS) a 3x3 convolution with more
than one input channel was numpy's im2col and one BLAS product, 36 multiply-adds per 2x2
outputs and input channel at the ~110 GFLOP/s OpenBLAS reaches on the two cores here:
the ResNet block's two (32, 64, 28, 28) 3x3 convolutions, 2 x 1.85 GFLOP, could not beat
torch.compile that way, nor can the direct kernel, which makes as many. F(2x2, 3x3) makes
each 2x2 block of outputs from a 4x4 tile of the input (tiles overlap by 2) with 16
multiply-adds per input channel: for each of the 16 points xi of the transform,
M[xi] = U[xi] V[xi], U = G g G^T the transformed weights (O x C), V = B^T d B the
transformed tiles (C x tiles), then y = A^T m A; 2.25x fewer multiply-adds.

The C (csrc/winograd.c, after matmul.c in one unit) takes one image's band of tile rows
(at most `BAND_BYTES` of transformed values; several whole images where they fit,
their tiles side by side in one product, whose columns are padded to whole panels
once: 14x14 images, 49 tiles each, (64, 32, 14, 14) 1.60 -> 1.48 ms, (8, 128, 14, 14)
2.44 -> 2.19, 28x28 within noise) a task, on the OpenMP pool from `PARALLEL_WORK`, each
thread through its own scratch (`layout`): each input row split into its even and odd
columns (a tile's four columns are then four contiguous loads), B^T d B of a vector of
tiles at a time (`LANES`) into V, the 16 products by matmul.c's register tiles reading
V's panels where they lie (6 x 16 tiles, 12 x 32 with AVX-512, fused multiply-adds),
A^T m A of a vector of tiles at a time into the output,
two rows of a channel at a time; then the band's rows of that channel (one run of
memory) are checked for values that are not finite and run through the epilogue
program in place (the chain of direct_conv.chain, with its codes: conv2d_epilogue's
bias and relu, conv2d_fused's batch norm, residual and relu) while they are in the
first cache, the program once per band rather than once per pair of rows (its dispatch
and partial vectors per 28 floats of a 14 x 14 image were 17 % of the ResNet block's
time at batch 64). The 16 planes of V and of M are a cache line
more than their rows apart: 64 rows of 208 floats are 13 x 4 KB, and the transforms'
16 streams at one place then shared one set of the first cache (one thread, the
(32, 64, 28, 28) convolution: 20.2 -> 15.7 ms). With fewer images than threads, the
bands are made smaller so that every thread has one.

Measured (2026-12-03, the 2-core AVX2 EPYC, medians of 15 interleaved rounds against
numpy's conv2d, 2 threads): (32, 64, 28, 28) -> 64 channels 8.0 ms against 19.0
(one thread: 15.7 against 36.1, of which the products 62 %, about 85 GFLOP/s, and the
transforms 26 %); (64, 32, 14, 14) 2.1 against 6.0 ms; (8, 64, 56, 56) 7.9 against 22.7;
(8, 128, 14, 14) 3.0 against 6.3; (2, 16, 12, 12) 69 against 104 us; (1, 32, 14, 14)
121 against 137 us. The ResNet block (graphc/bench/resnet_block.py) on native, compiled
with and without this kernel in one process, interleaved: 2.4-2.7x faster at batch 32
(16.7 against 40.2 ms in the quietest run), 1.6x at batch 1; `graphc bench`: 16.6 ms,
torch.compile 22.8 ms (docs/backends.md).

Bits: each output is computed in one order whatever the batch, the bands or the
threads: U in double from the float32 weight, rounded once; V by two roundings; the
products of each xi a fused multiply-add chain over the input channels in order from
+0.0 (matmul.c's tile); A^T m A by four roundings; the program numpy's operations in
numpy's order. Not numpy's order, so conv2d, conv2d_epilogue and conv2d_fused are
inexact on native, and the levels agree bit for bit (they make one choice per
geometry: conv.py). The bound: the computed y of each output is within

    2.02 (C + 7) eps sum_c |w[o, c]|_1 |x[c, window]|_1

of the exact convolution (C + 7 roundings on the way, each of at most eps / 2 relative
to the same computation on absolute values, and gamma_n <= 1.01 n eps / 2 while
n eps / 2 <= 0.01; that computation on absolute values, |A^T| (|G| |g| |G^T| *
|B^T| |d| |B|) |A|, weights each |w_k| |x_l| of the output's own 3x3 window by at most 4
and no input outside it). tests/backends/test_native_winograd.py holds it against
float64 convolutions, and against numpy's conv2d with numpy's own share added.

Values that are not finite: B^T d B of a lone inf holds inf and -inf, which A^T m A
adds (nan where the direct sums give inf), and the transforms of large finite values
may overflow. So an image whose convolution has a value that is not finite (the C's
flag) is computed again by numpy's kernel, then the program: nan and inf where numpy
has them, and an image's bits never depend on the others in its batch.

A fed weight is transformed on every call (it may change between calls; the caller's
array is never written), a constant one once per thread; `LANES` channels at a time
(one by one, (1, 32, 14, 14) -> 32 took 84 us on a Zen 4, 42 since; a constant weight
37).

With AVX-512 the kernel runs on 16 lanes (`LANES`: its scratch and panels are sized by
it), and conv.py gives it the 3x3 layers of 32 input channels or more whose output is
at least 14 wide (`preferred`; the direct kernel, written for those registers, wins on
the others). Until 2026-12-04 it ran on 256-bit vectors only, measured there and
unmeasured with AVX-512; on a Zen 4, which runs a 512-bit multiply-add as two halves,
the ResNet block took 21.5 ms with the direct kernel, 16.0-17.9 with this one built
for 256-bit vectors, and 12.6 with it on 16 lanes (torch.compile: 17.7-18.3).
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from graphc.backends.native import calls, direct_conv, matmul
from graphc.backends.native.c_sources import c_source, defines
from graphc.backends.native.kernels import Kernel
from graphc.ir.types import TensorType
from graphc.ops.conv_kernels import contiguous_result, conv2d_kernel, deliver

NAME = "gc_winograd_f32"
PROGRAM_NAME = "gc_winograd_program_f32"
MAX_OPERANDS = direct_conv.MAX_OPERANDS  # the epilogue program's (WG_OPS in the C)
# after the image count: x, w, u, y, scratch, flags; C, H, W, O, top, left, bottom,
# right, rows, group, ldv, rowlen, per_thread, slots, transform, PARALLEL_WORK,
# WARM_WORK, first, steps; the program's codes and MAX_OPERANDS operands
PARAMS = "p" * 6 + "i" * 19 + "p" * (1 + MAX_OPERANDS)
# after the image count: y; O, plane, first, steps; codes and operands
PROGRAM_PARAMS = "p" + "i" * 4 + "p" * (1 + MAX_OPERANDS)
LANES = 16 if direct_conv.WIDE_REGISTERS else 8  # GC_W: floats a vector
PANEL = 2 * LANES  # MM_NR: a product's panel of columns (tiles), two vectors
# on 512-bit vectors, the input channels and output width from which this kernel rather
# than the direct one runs a 3x3 convolution (`preferred`). Measured on a Zen 4 (AVX-512
# as two 256-bit halves), 2 threads, fed weights, bias and relu after, each convolution
# called alone, medians (direct against Winograd): from 32 channels and 14 wide,
# (32, 64, 28, 28) -> 64: 10.3 against 5.9 ms; (64, 32, 14, 14) -> 32: 1.31 against
# 1.10-1.26 ms; (32, 32, 14, 14): 655 against 520 us; (1, 32, 14, 14): 41 against 43
# (on one thread: the pool's threshold, `PARALLEL_WORK`). Below: 16 channels, (4, 16,
# 14, 14) 43 against 50 us, (32, 16, 14, 14) 178 against 250; 3 and 8 channels,
# (32, 3, 32, 32) -> 16 195 against 384-410, (4, 8, 32, 32) 57 against 68. Outputs 7 wide
# (a tile row fills 4 of 16 lanes) ran faster by Winograd from 64 channels over 8 to 64
# images ((16, 64, 7, 7) 375 against 297 us) but not over one: (1, 256, 7, 7) 370
# against 1,033, most of it transforming the fed weight's 65,536 kernels
WIDE_MIN_CHANNELS = 32
WIDE_MIN_WIDTH = 14
# bytes of a task's transformed input and products (a band of tile rows of one image:
# V and M, 16 (C + O) floats a tile) at most, so that they stay in a core's caches
# (measured, (8, 64, 56, 56), 784 tiles an image: bands of 112 to 256 tiles, up to 2 MB,
# 7.4-7.7 ms, 392 tiles 8.3 ms, whole images 12.0 ms; at 28x28 with 64 and with 128
# channels, bands of 98 to 256 tiles were within noise); at least one tile row
BAND_BYTES = 1 << 21
# multiply-adds (counted as the direct convolution's) from which a call runs on the pool,
# and from which it does while the pool is warm (calls.POOL_CLOCK). Measured here (one
# image of 14x14 or 28x28, medians of 41 rounds): calls back to back, two threads won
# from 16 channels (35 against 45 us; 64 channels at 28x28, 569 against 780); after
# 2 ms idle, waking the sleeping worker cost this VM 1.1-1.5 ms (16 channels: 1223
# against 66 us; 64 at 28x28, 28.9 million, 2481 against 1036). With AVX-512 this kernel
# takes over convolutions that the direct kernel ran on the pool from its own threshold
# (direct_conv.PARALLEL_WORK vectors of multiply-adds), and the pool is woken as often
# as it was: from about that much work, LANES multiply-adds a vector (a Zen 4, fed
# weights, a convolution called alone, so the pool cold; direct against Winograd on one
# thread, then with this threshold: (32, 32, 14, 14) -> 32 655 against 1,025 then 520
# us; (8, 64, 14, 14) 645 against 775 then 425; (2, 64, 28, 28) 645 against 726 then
# 380-450; (1, 64, 28, 28) 355-375 against 376 then 234)
PARALLEL_WORK = direct_conv.PARALLEL_WORK * LANES if direct_conv.WIDE_REGISTERS else 1 << 26
WARM_WORK = 1 << 19
MAX_SLOTS = 16  # threads' scratch areas at most

SOURCE = (
    "#include <stdlib.h>\n#ifdef _OPENMP\n#include <omp.h>\n#endif\n"
    + defines({"MM_IN_PLACE": "INT64_MAX", "WG_OPS": MAX_OPERANDS})
    + matmul.SOURCE
    + c_source("program_ops.h")
    + c_source("winograd.c")
)


def _repair(args: list[int]) -> None:
    """Kernel.failure: a tape's call flagged images whose result is not finite; the
    convolution whose flags it wrote computes them again (Convolution.repair)."""
    _CONVOLUTIONS[args[FLAGS]].repair(args)


FLAGS = 6  # the flags' address among a call's words (after the image count: x, w, u, y, scratch)
# a nonzero status: some image is computed again by numpy (`_repair`), and a tape goes on
KERNEL = Kernel(NAME, SOURCE, [], ["conv2d"], PARAMS, status=True, failure=_repair, repairs=True)
PROGRAM = Kernel(PROGRAM_NAME, SOURCE, [], ["conv2d"], PROGRAM_PARAMS)
# each live step convolution by the address of its flags (weakly: the plan's thread owns it)
_CONVOLUTIONS: weakref.WeakValueDictionary[int, Convolution] = weakref.WeakValueDictionary()


def reason(x: TensorType, w: TensorType, out: TensorType, attrs: dict) -> str | None:
    """None when this kernel computes the convolution, else why it does not."""
    if x.dtype != np.float32 or w.dtype != np.float32:
        return "float32 only"
    if tuple(w.shape[2:]) != (3, 3):
        return "3x3 kernels only"
    if tuple(attrs["stride"]) != (1, 1) or tuple(attrs["dilation"]) != (1, 1):
        return "stride 1 and dilation 1 only"
    if attrs["groups"] != 1:
        return "one group only"
    if not all(isinstance(d, int) for d in (*x.shape[1:], *w.shape, *out.shape[1:])):
        return "static channels and image sizes only"
    if min(out.shape[2:]) < 1:  # type: ignore[type-var]
        return "an empty output"
    return None


def preferred(w: TensorType, out: TensorType) -> bool:
    """Whether this kernel rather than the direct one runs a convolution that it applies
    to (`reason`): one of more than one input channel; on 512-bit vectors, of
    `WIDE_MIN_CHANNELS` and an output `WIDE_MIN_WIDTH` wide or more. By the geometry only,
    never the batch, so that an image's bits never depend on its batch (conv.py)."""
    channels, width = w.shape[1], out.shape[3]
    if not direct_conv.WIDE_REGISTERS:
        return channels > 1  # type: ignore[operator]
    return channels >= WIDE_MIN_CHANNELS and width >= WIDE_MIN_WIDTH  # type: ignore[operator]


def layout(x_shape: tuple, w_shape: tuple, padding: tuple) -> tuple[int, int, int, int, int]:
    """(tile rows a band, images a task at most (several where an image is one band),
    ldv: a transformed row's floats, rowlen: a split row's, the floats of one thread's
    scratch) for images of `x_shape` (N, C, H, W)."""
    _, channels, height, width = x_shape
    out_ch = w_shape[0]
    top, left, bottom, right = padding
    ho, wo = height + top + bottom - 2, width + left + right - 2
    th, tw = (ho + 1) // 2, (wo + 1) // 2
    rows = max(1, min(th, BAND_BYTES // (64 * (channels + out_ch) * tw)))
    group = max(1, BAND_BYTES // (64 * (channels + out_ch) * th * tw)) if rows == th else 1
    ldv = -(-(group * rows * tw + LANES) // PANEL) * PANEL
    rowlen = -(-tw // LANES) * LANES + LANES
    split = 2 * (2 * rows + 2) * rowlen
    per_thread = split + 16 * ((channels + out_ch) * ldv + 2 * PANEL) + PANEL
    return rows, group, ldv, rowlen, -(-per_thread // PANEL) * PANEL


def scratch_size(x_shape: tuple, w_shape: tuple, padding: tuple) -> int:
    """Floats of the scratch a convolution of these shapes needs: `slots` threads'."""
    return layout(x_shape, w_shape, padding)[4] * slots()


def slots() -> int:
    """Threads whose scratch a plan's step holds (the kernel runs on at most as many)."""
    return max(1, min(MAX_SLOTS, len(os.sched_getaffinity(0))))


class Convolution:
    """One plan step's Winograd convolution, made once per thread by the plan's setup:
    its transformed weight (made here from `weight`, a constant's array, else on every
    call), its epilogue program (`codes`, empty for none), the threads' scratch
    (`scratch`, at least `scratch_size` floats, shared by the plan's steps; None: its
    own) and the flags of the images computed again. A plan's step calls the kernel
    itself, with `words()` (so that an entry's tape records it), and `again` when it
    returns 1; ``conv(x, w, out, *operands)`` runs the whole call (a chunked step's
    runner), with the program's operands (None for relu's)."""

    def __init__(
        self,
        fn: Callable[..., Any],
        program: Callable[..., None],
        x_shape: tuple,
        w_shape: tuple,
        padding: tuple,
        codes: np.ndarray,
        weight: np.ndarray | None,
        scratch: np.ndarray | None = None,
    ) -> None:
        self.fn, self.program = fn, program
        self.padding = tuple(int(p) for p in padding)
        self.codes = codes
        rows, group, ldv, rowlen, per_thread = layout(x_shape, w_shape, self.padding)
        self.slots = slots()
        if scratch is None:
            scratch = matmul.aligned(per_thread * self.slots)
        assert scratch.size >= per_thread * self.slots, "a scratch too small for the step"
        self.scratch = scratch
        out_ch, channels = w_shape[:2]
        self.w_shape = tuple(w_shape)
        self.u = matmul.aligned(16 * out_ch * channels)
        self.flags = np.zeros(max(1, x_shape[0]), np.int64)
        self.sizes = (channels, *x_shape[2:], out_ch, *self.padding, rows, group, ldv, rowlen,
                      per_thread, self.slots)  # fmt: skip
        self.transformed = weight is not None
        if weight is not None:  # a constant weight: transformed once, here (no image)
            now, null = calls.address_now, calls.NULL
            w = calls.contiguous(weight)
            fn(0, null, now(w), now(self.u), null, now(self.scratch), now(self.flags),
               *self.sizes, 1, PARALLEL_WORK, WARM_WORK, 0, 0, null,
               *[null] * MAX_OPERANDS)  # fmt: skip
        _CONVOLUTIONS[calls.address_int(self.flags)] = self

    def words(self) -> tuple[Any, tuple, tuple]:
        """The kernel's arguments that this object holds: u's address (after the weight's),
        and the scratch's, the flags', the sizes, whether to transform the weight, the
        parallel thresholds, the first image (0), the program's length and codes (after
        the output's); then what must outlive a tape of the call: this object (its
        `repair`) and the arrays those words point into."""
        address = calls.static_address
        codes = address(self.codes) if len(self.codes) else calls.NULL
        tail = (address(self.scratch), address(self.flags), *self.sizes,
                int(not self.transformed), PARALLEL_WORK, WARM_WORK, 0, len(self.codes),
                codes)  # fmt: skip
        return address(self.u), tail, (self, self.u, self.scratch, self.flags, self.codes)

    def again(self, x: np.ndarray, w: np.ndarray, out: np.ndarray, *operands: Any) -> None:
        """After a step's call returned 1: each image it flagged computed again."""
        x, w = calls.contiguous(x), calls.contiguous(w)
        arrays = [calls.contiguous(a) if a is not None else None for a in operands]
        program = [calls.address_now(a) if a is not None else calls.NULL for a in arrays]
        program += [calls.NULL] * (MAX_OPERANDS - len(program))
        self._flagged(x, w, out, program)

    def repair(self, args: list[int]) -> None:
        """What `again` does, for a tape's call: its arrays found from its words."""
        n = args[0]
        x_at, w_at, y_at = args[1], args[2], args[4]
        channels, height, width, out_ch, top, left, bottom, right = args[7:15]
        ho, wo = height + top + bottom - 2, width + left + right - 2
        x = calls.array_at(x_at, (n, channels, height, width), np.float32)
        w = calls.array_at(w_at, self.w_shape, np.float32)
        y = calls.array_at(y_at, (n, out_ch, ho, wo), np.float32)
        program = [calls.pointer(a) for a in args[-MAX_OPERANDS:]]
        self._flagged(x, w, y, program)

    def _flagged(self, x: np.ndarray, w: np.ndarray, y: np.ndarray, program: list) -> None:
        steps = len(self.codes)
        codes = calls.address_now(self.codes) if steps else calls.NULL
        for k in np.flatnonzero(self.flags[: x.shape[0]]):
            self._again(x, w, y, int(k), steps, codes, program)

    def __call__(
        self,
        x: np.ndarray,
        w: np.ndarray,
        out: np.ndarray,
        *operands: Any,
        epilogue: Callable[[np.ndarray, slice], None] | None = None,
    ) -> None:
        now, null = calls.address_now, calls.NULL
        n = x.shape[0]
        if not n:
            return
        x, w = calls.contiguous(x), calls.contiguous(w)
        target = contiguous_result(out, out.shape, out.dtype)
        if self.flags.size < n:
            del _CONVOLUTIONS[calls.address_int(self.flags)]
            self.flags = np.zeros(n, np.int64)
            _CONVOLUTIONS[calls.address_int(self.flags)] = self
        transform = int(not self.transformed)
        arrays = [calls.contiguous(a) if a is not None else None for a in operands]
        program = [now(a) if a is not None else null for a in arrays]
        program += [null] * (MAX_OPERANDS - len(program))
        codes = now(self.codes) if len(self.codes) else null
        self.fn(n, now(x), now(w), now(self.u), now(target), now(self.scratch),
                now(self.flags), *self.sizes, transform, PARALLEL_WORK, WARM_WORK, 0,
                len(self.codes), codes, *program)  # fmt: skip
        self._flagged(x, w, target, program)
        if epilogue is not None:
            epilogue(target, slice(0, n))
        deliver(target, out)

    def _again(self, x: np.ndarray, w: np.ndarray, y: np.ndarray, k: int, steps: int,
               codes: Any, program: list) -> None:  # fmt: skip
        """Image k by numpy's kernel, then the program: its Winograd convolution had a
        value that is not finite (an inf or nan fed, or a transform's overflow), whose
        arithmetic would make nan where the direct sums give inf."""
        image = y[k : k + 1]
        conv2d_kernel(x[k : k + 1], w, out=image, stride=(1, 1), padding=self.padding,
                      dilation=(1, 1), groups=1)  # fmt: skip
        if steps:
            plane = y.shape[2] * y.shape[3]
            self.program(1, calls.address_now(image), y.shape[1], plane, k, steps, codes,
                         *program)  # fmt: skip


def runner(
    fn: Callable[..., None], program: Callable[..., None], scratch: np.ndarray | None = None
) -> Callable[..., None]:
    """The convolution `run(x, w, out, padding, dilation, groups, epilogue)` with no
    program, its epilogue (a body with no C chain, or numpy's: conv.py) run after, on
    the whole batch: the shape of direct_conv.runner."""
    made: dict[tuple, Convolution] = {}
    empty = np.zeros(0, np.int64)

    def run(
        x: np.ndarray,
        w: np.ndarray,
        out: np.ndarray,
        padding: tuple,
        dilation: tuple,
        groups: int,
        epilogue: Callable[[np.ndarray, slice], None],
    ) -> None:
        key = (x.shape[1:], w.shape, tuple(padding))
        if key not in made:
            made[key] = Convolution(fn, program, x.shape, w.shape, padding, empty, None, scratch)
        made[key](x, w, out, epilogue=epilogue)

    return run
