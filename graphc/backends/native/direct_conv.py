"""A direct float32 convolution in C for the native backend's stride-1 conv2d.

numpy's conv2d (ops/conv_kernels.py) copies every window into an im2col buffer and
multiplies it by the weights with one BLAS call per image. For the small channel counts
of LeNet-style layers the copy and the skinny products cost more than the arithmetic
(LeNet's first layer, 6 output channels from 1, over a batch of 64: 255 us there, 115
us here on one thread), and a batch of one pays numpy's per-call costs many times.

Here each image is padded once into a scratch buffer with one spare row, so that output
(r, c) of channel o sums w[o, ci, i, j] * padded[ci, (r + i*dh) * Wp + c + j*dw] over the
group's input channels and the kernel's taps, and GC_W outputs of a row read GC_W
consecutive padded elements per tap. A tile of `DC_OB` output channels by `DC_PB`
vectors of a channel's output rows (`TILES`) stays in registers while the taps go by
(per tap: `DC_PB` unaligned loads, `DC_OB` broadcast weights, their products as fused
multiply-adds); a row's last vector is stored masked. The elementwise work that
follows the convolution, when it is a chain of add, sub, mul, div, maximum, minimum and
relu on operands of one value per channel, one value, or the output's shape (`chain`),
runs on the tile before it is stored (`dc_finish`, numpy's operations in numpy's order).
Images go through the padded buffer in chunks; padding and tiles run on the OpenMP pool
when the work pays for waking it, all chunks in one parallel region.

Bits: every output sums its terms in one order (input channel, then kernel row, then
column), each term by a fused multiply-add from +0.0, whatever the batch, the chunking
or the threads. That is not the order of numpy's BLAS call, so conv2d, conv2d_epilogue
and conv2d_fused are declared inexact on native when this kernel computes them, and
tests/backends/test_native_direct_conv.py holds them within the componentwise bound of a
sum of K products, 2 (K + 2) eps sum |w| |x|, of numpy's kernel.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from graphc.backends.native import calls, toolchain
from graphc.backends.native.c_sources import c_source, defines
from graphc.ir.graph import OP, Graph, Node
from graphc.ops.conv_kernels import contiguous_result, deliver

NAME = "gc_direct_conv2d_f32"
# the C function's parameters after the image count: x, w, out, scratch; then C, H, W,
# O, groups, kH, kW, top, left, bottom, right, dilation (rows, cols), PARALLEL_WORK;
# images per chunk, the first image's index; the epilogue program's length, codes and
# MAX_OPERANDS operands
MAX_OPERANDS = 6  # DC_OPS in the C (defined from this)
PARAMS = "pppp" + "i" * 17 + "p" * (1 + MAX_OPERANDS)
# elements of slack after the last padded image: a tile's last vector may read past it;
# the buffer holds MAX_THREADS of them, one after each thread's share (`dc_images`)
SLACK = 64
MAX_THREADS = 64
# padded images and outputs of one chunk: about the L2 of a core here (1 MB), so that an
# epilogue run per chunk finds the output warm (chosen so, not tuned)
CHUNK_BYTES = 1 << 20
# below this many vector multiply-adds a call runs on the calling thread: waking the
# OpenMP pool cost about 55 us here (LeNet's first layer over 64 images, 400,000 of
# them, took 115 us on one thread and 116 on two)
PARALLEL_WORK = 400_000
# the longest flat run of output rows (floats a channel) a task computes into a buffer on
# its stack before copying the rows out (`dc_task`): DC_OB of them, 24 KB with AVX2
FLAT = 1024
# the register tile, output channels by vectors of output columns, by vector width: its
# OB * PB accumulators, PB loaded vectors and a broadcast weight fit the 32 registers of
# AVX-512 (16 of AVX2). Measured with 16 lanes (one thread): 8 x 3 against 4 x 4, LeNet's
# first layer over 64 images 112 against 123 us, the ResNet block's 3x3 on 2 images 547
# against 563 us; 6 x 4 and 6 x 3 in between. With 8 lanes (an AVX2 machine of two
# cores, one thread, LeNet's two layers over 64 images, the kernel called from C): 6 x 2
# 487 and 698 us, 4 x 3 555 and 681, 3 x 3 567 and 887, 2 x 4 633 and 1,083
TILES = {"512": (8, 3), "256": (6, 2)}
# Whether the registers are AVX-512's (with them, this kernel beat numpy's im2col and
# BLAS on LeNet's and the ResNet block's layers: docs/backends.md). Winograd's F(2x2,
# 3x3) runs the 3x3 ones it is given first (winograd.preferred: with 256-bit vectors,
# every one of more than one input channel, with these registers the wider layers of
# more channels): on an AVX2 machine of two cores the ResNet block's (64, 64, 28, 28)
# 3x3 took 14.8 ms there, 24.8 ms here (2.25x the multiply-adds); LeNet's layers over
# 64 images took 215 and 337 us here, 1.28 and 1.10 ms on numpy
WIDE_REGISTERS = "avx512f" in toolchain.HOST.split()


def source() -> str:
    """The kernel's C (after the native header): this module's constants as #defines
    (the tiles of each ISA among them), then csrc/'s fixed C: the tile size
    (direct_conv_tiles.h), the epilogue program's ops (program_ops.h, shared with
    winograd.py), the tile (direct_conv_tile.h), its unrolled cases
    (direct_conv_any.h), the epilogue and the chunked drivers (direct_conv.c)."""
    head = "#include <stdlib.h>\n#ifdef _OPENMP\n#include <omp.h>\n#endif\n"
    constants = {"SLACK_ELEMENTS": SLACK, "DC_MAX_THREADS": MAX_THREADS, "DC_OPS": MAX_OPERANDS}
    constants["DC_FLAT"] = FLAT
    for isa, (ob, pb) in TILES.items():
        constants |= {f"DC_OB{isa}": ob, f"DC_PB{isa}": pb}
    head += defines(constants)
    parts = ("direct_conv_tiles.h", "program_ops.h", "direct_conv_tile.h", "direct_conv_any.h",
             "direct_conv.c")  # fmt: skip
    return head + "".join(c_source(name) for name in parts)


# the epilogue program's op codes (`dc_finish` in the C), and operand kinds
CODES = {"add": 0, "sub": 1, "mul": 2, "div": 3, "maximum": 4, "minimum": 5, "relu": 6}
CHANNEL, FULL, SCALAR = 1, 2, 3


def chain(body: Graph) -> list[tuple[str, Node | None, bool]] | None:
    """A body (placeholder 0: the convolution) as the chain the C epilogue runs: per op,
    its name, its other operand (a placeholder or constant of the body) and whether that
    operand comes first; None unless every op is in `CODES` and takes the previous
    result once (relu), or it and one other leaf (the binary ops), with at most
    `MAX_OPERANDS` operands."""
    current = body.inputs[0]
    links: list[tuple[str, Node | None, bool]] = []
    leaves = set(body.inputs[1:]) | {n for n in body.nodes if n.is_constant}
    for node in body.nodes:
        if node.kind != OP or node.is_constant:
            continue
        ins = list(node.inputs)
        if node.op == "relu" and ins == [current]:
            links.append(("relu", None, False))
        elif node.op in CODES and node.op != "relu" and len(ins) == 2 and ins.count(current) == 1:
            other = ins[1] if ins[0] is current else ins[0]
            if other not in leaves:
                return None
            links.append((node.op, other, ins[1] is current))
        else:
            return None
        current = node
    if body.outputs[0].inputs[0] is not current or len(links) > MAX_OPERANDS:
        return None
    return links


def prepared(
    x_shape: tuple,
    w_shape: tuple,
    out_shape: tuple,
    padding: tuple,
    dilation: tuple,
    groups: int,
    codes: np.ndarray,
) -> tuple[tuple, tuple, np.ndarray]:
    """A plan step's direct convolution with its epilogue program (see `chain` and
    `dc_finish`), its shapes known: the C function's arguments after the four addresses
    (n, x, w, out), its null operands after the program's, and the padded buffer they
    point into, made once (a plan's setup runs per thread), so that a call passes only
    addresses: ``fn(n, x, w, out, *arguments, *operands, *nulls)``."""
    now, null = calls.address_now, calls.NULL
    channels, height, width = x_shape[1:]
    out_ch, _, kh, kw = w_shape
    chunk, pad = _chunks(x_shape, w_shape, out_shape, padding)
    arguments = (now(pad), channels, height, width, out_ch, groups, kh, kw, *padding,
                 *dilation, PARALLEL_WORK, chunk, 0, len(codes),
                 now(codes) if len(codes) else null)  # fmt: skip
    return arguments, (null,) * (MAX_OPERANDS - len(codes)), pad


def _chunks(x: tuple, w: tuple, out: tuple, padding: tuple) -> tuple[int, np.ndarray]:
    """Images per chunk (padded input and output of a chunk within `CHUNK_BYTES`, at
    least one image) and the padded buffer of one chunk, with its slack, then room for
    the taps' int64 offsets when there are more than the C keeps on its stack (512)."""
    n, channels, height, width = x
    top, left, bottom, right = padding
    plane = (height + top + bottom + 1) * (width + left + right)
    per_image = (channels * plane + w[0] * out[2] * out[3]) * 4
    chunk = max(1, min(n, CHUNK_BYTES // per_image))
    taps = w[1] * w[2] * w[3]
    offsets = 2 * taps + 1 if taps > 512 else 0  # floats: int64s, and one to align them
    size = chunk * channels * plane + SLACK * MAX_THREADS + offsets
    return chunk, np.empty(size, np.float32)


def runner(fn: Callable[..., None]) -> Callable[..., None]:
    """The convolution `run(x, w, out, padding, dilation, groups, epilogue)` (float32,
    stride 1) calling the C function `fn` on chunks of images; the epilogue (a body
    with no C chain, or numpy's: conv.py) runs after each chunk, on a warm output."""
    now = calls.address_now
    no_program = (0, calls.NULL, *(calls.NULL,) * MAX_OPERANDS)

    def run(
        x: np.ndarray,
        w: np.ndarray,
        out: np.ndarray,
        padding: tuple,
        dilation: tuple,
        groups: int,
        epilogue: Callable[[np.ndarray, slice], None],
    ) -> None:
        if not out.size:
            return
        target = contiguous_result(out, out.shape, out.dtype)
        if not x.flags.c_contiguous:
            x = np.ascontiguousarray(x)
        if not w.flags.c_contiguous:
            w = np.ascontiguousarray(w)
        n, channels, height, width = x.shape
        out_ch, _, kh, kw = w.shape
        chunk, pad = _chunks(x.shape, w.shape, out.shape, padding)
        sizes = (channels, height, width, out_ch, groups, kh, kw, *padding, *dilation,
                 PARALLEL_WORK)  # fmt: skip
        w_at, pad_at = now(w), now(pad)
        for start in range(0, n, chunk):
            images = slice(start, min(n, start + chunk))
            part = target[images]
            m = part.shape[0]
            fn(m, now(x[images]), w_at, now(part), pad_at, *sizes, m, start, *no_program)
            epilogue(part, images)
        deliver(target, out)

    return run
