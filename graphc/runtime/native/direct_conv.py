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
tests/runtime/test_native_direct_conv.py holds them within the componentwise bound of a
sum of K products, 2 (K + 2) eps sum |w| |x|, of numpy's kernel.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from graphc.ir.graph import OP, Graph, Node
from graphc.runtime.native import calls

NAME = "gc_direct_conv2d_f32"
# the C function's parameters after the image count: x, w, out, scratch; then C, H, W,
# O, groups, kH, kW, top, left, bottom, right, dilation (rows, cols), PARALLEL_WORK;
# images per chunk, the first image's index; the epilogue program's length, codes and
# MAX_OPERANDS operands
MAX_OPERANDS = 6  # DC_OPS in the C
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
# the register tile, output channels by vectors of output columns, by vector width: its
# OB * PB accumulators, PB loaded vectors and a broadcast weight fit the 32 registers of
# AVX-512 (16 of AVX2). Measured with 16 lanes (one thread): 8 x 3 against 4 x 4, LeNet's
# first layer over 64 images 112 against 123 us, the ResNet block's 3x3 on 2 images 547
# against 563 us; 6 x 4 and 6 x 3 in between
TILES = {"512": (8, 3), "256": (3, 3)}

SOURCE = r"""
/* ---- direct convolution (graphc/runtime/native/direct_conv.py) ---- */
#ifdef __AVX512F__
#define DC_OB @OB512@
#define DC_PB @PB512@
#else
#define DC_OB @OB256@
#define DC_PB @PB256@
#endif
#define DC_OPS 6

/* the accumulators of ob output channels by pb vectors of positions into tmp: the
   vector k reads the padded channel at src[k] plus each tap's offset */
GC_INLINE void dc_tile(const float *x, const float *w, const int64_t *offs, int64_t K,
                       const int64_t *src, float *tmp, const int ob, const int pb) {
    vf32 acc[DC_OB][DC_PB];
    for (int o = 0; o < DC_OB; o++)
        for (int k = 0; k < DC_PB; k++) acc[o][k] = sp_f32(0.0f);
    for (int64_t t = 0; t < K; t++) {
        const float *at = x + offs[t];
        vf32 v[DC_PB];
        for (int k = 0; k < pb; k++) memcpy(&v[k], at + src[k], GC_VB);
        for (int o = 0; o < ob; o++) {
            vf32 s = sp_f32(w[o * K + t]);
            for (int k = 0; k < pb; k++) acc[o][k] = fma_f32(s, v[k], acc[o][k]);
        }
    }
    for (int o = 0; o < ob; o++)
        for (int k = 0; k < pb; k++) memcpy(tmp + (o * DC_PB + k) * GC_W, &acc[o][k], GC_VB);
}

/* the tile with (ob, pb) as constants, so each case is unrolled and kept in registers */
static void dc_tile_any(const float *x, const float *w, const int64_t *offs, int64_t K,
                        const int64_t *src, float *tmp, int ob, int pb) {
    switch ((ob - 1) * DC_PB + (pb - 1)) {
#define DC_CASE(o, p) case (o - 1) * DC_PB + (p - 1): dc_tile(x, w, offs, K, src, tmp, o, p); break;
#ifdef __AVX512F__
@CASES512@
#else
@CASES256@
#endif
#undef DC_CASE
    }
}

/* The epilogue program: step s is codes[s] = op | kind << 4 | swap << 6 with operand
   ops[s]; op 0-5 are add, sub, mul, div, maximum, minimum of (value, operand), or of
   (operand, value) when swap, 6 is relu; the operand has one value per output channel
   (kind 1), the output's shape (2, `at` elements in for this tile), or one value (3).
   The same IEEE operations as numpy's ufuncs (max_f32 is numpy's maximum), in the same
   order, so the same bits. Applied to the tile in tmp, one step at a time, then stored. */
static void dc_finish(float *tmp, float *y, int64_t plane_out, const int64_t *dst,
                      const int64_t *lanes, int ob, int pb, int64_t o0, int64_t at,
                      int64_t steps, const int64_t *codes, const float *const *ops) {
    /* each step's operand and op chosen once per tile, not per vector: dispatching
       per vector was 14% of a ResNet block's time */
    for (int64_t s = 0; s < steps; s++) {
        int64_t code = codes[s], op = code & 15, kind = (code >> 4) & 3, swap = (code >> 6) & 1;
        const float *p = ops[s];
        vf32 u[DC_OB][DC_PB];
        if (kind == 2) {
            for (int o = 0; o < ob; o++)
                for (int k = 0; k < pb; k++)
                    u[o][k] = ldm_f32(p + at + o * plane_out + dst[k], lanes[k]);
        } else {
            for (int o = 0; o < ob; o++) {
                vf32 c = sp_f32(kind == 1 ? p[o0 + o] : kind == 3 ? p[0] : 0.0f);
                for (int k = 0; k < pb; k++) u[o][k] = c;
            }
        }
#define DC_APPLY(expr) \
        for (int o = 0; o < ob; o++) \
            for (int k = 0; k < pb; k++) { \
                float *t = tmp + (o * DC_PB + k) * GC_W; \
                vf32 v; \
                memcpy(&v, t, GC_VB); \
                vf32 a = swap ? u[o][k] : v, b = swap ? v : u[o][k]; \
                v = expr; \
                memcpy(t, &v, GC_VB); \
            }
        switch (op) {
            case 0: DC_APPLY(a + b) break;
            case 1: DC_APPLY(a - b) break;
            case 2: DC_APPLY(a * b) break;
            case 3: DC_APPLY(a / b) break;
            case 4: DC_APPLY(max_f32(a, b)) break;
            case 5: DC_APPLY(min_f32(a, b)) break;
            default: DC_APPLY(max_f32(v, sp_f32(0.0f))) break;
        }
#undef DC_APPLY
    }
    for (int o = 0; o < ob; o++)
        for (int k = 0; k < pb; k++) {
            vf32 v;
            memcpy(&v, tmp + (o * DC_PB + k) * GC_W, GC_VB);
            stm_f32(y + o * plane_out + dst[k], v, lanes[k]);
        }
}

/* n floats zeroed, or copied, by masked vector stores: rows are short (a ResNet block's
   14 floats), and a memset and a memcpy call per row took 5% of its time */
GC_INLINE void dc_zero(float *p, int64_t n) {
    for (int64_t k = 0; k < n; k += GC_W) stm_f32(p + k, sp_f32(0.0f), n - k < GC_W ? n - k : GC_W);
}
GC_INLINE void dc_copy(float *d, const float *s, int64_t n) {
    for (int64_t k = 0; k < n; k += GC_W) {
        int64_t m = n - k < GC_W ? n - k : GC_W;
        stm_f32(d + k, ldm_f32(s + k, m), m);
    }
}

static void dc_pad(const float *x, float *pad, int64_t H, int64_t W, int64_t top,
                   int64_t left, int64_t right, int64_t Wp, int64_t plane) {
    dc_zero(pad, top * Wp);
#ifdef __AVX512F__
    if (Wp <= GC_W) {  /* a padded row in one vector: the row loaded, moved right by
                          `left` lanes with zeros around it, stored once */
        vi32 lane;
        for (int k = 0; k < GC_W; k++) lane[k] = k;
        __m512i at = (__m512i)(lane - (int32_t)left);
        __mmask16 keep = (__mmask16)(((1u << W) - 1) << left);
        for (int64_t h = 0; h < H; h++) {
            vf32 row = ldm_f32(x + h * W, W);
            stm_f32(pad + (top + h) * Wp, (vf32)_mm512_maskz_permutexvar_ps(keep, at, (gc_ps)row), Wp);
        }
        dc_zero(pad + (top + H) * Wp, plane - (top + H) * Wp);
        return;
    }
#endif
    for (int64_t h = 0; h < H; h++) {
        float *row = pad + (top + h) * Wp;
        dc_zero(row, left);
        dc_copy(row + left, x + h * W, W);
        dc_zero(row + left + W, right);
    }
    dc_zero(pad + (top + H) * Wp, plane - (top + H) * Wp);
}

typedef struct {
    float *pad; const float *w; float *y; const int64_t *offs;
    int64_t C, O, groups, K, plane, Wp, Ho, Wo, ntiles_o, first, steps;
    const int64_t *codes; const float *ops[DC_OPS];
} dc_conv;

/* one task: ob <= DC_OB output channels of one image and group, every output row in
   vectors of GC_W columns (the last one of a row partial), DC_PB vectors a tile */
static void dc_task(const dc_conv *c, int64_t task) {
    int64_t Og = c->O / c->groups, Cg = c->C / c->groups, per = c->groups * c->ntiles_o;
    int64_t image = task / per, g = (task % per) / c->ntiles_o;
    int64_t o0 = g * Og + (task % c->ntiles_o) * DC_OB;
    int ob = (int)(g * Og + Og - o0 < DC_OB ? g * Og + Og - o0 : DC_OB);
    const float *x = c->pad + (image * c->C + g * Cg) * c->plane;
    int64_t plane_out = c->Ho * c->Wo, at = (image * c->O + o0) * plane_out;
    int64_t at_ops = ((c->first + image) * c->O + o0) * plane_out;
    int64_t per_row = (c->Wo + GC_W - 1) / GC_W, count = c->Ho * per_row;
    float tmp[DC_OB * DC_PB * GC_W];
    for (int64_t v0 = 0; v0 < count; v0 += DC_PB) {
        int pb = (int)(count - v0 < DC_PB ? count - v0 : DC_PB);
        int64_t src[DC_PB], dst[DC_PB], lanes[DC_PB];
        for (int k = 0; k < pb; k++) {
            int64_t r = (v0 + k) / per_row, col = ((v0 + k) % per_row) * GC_W;
            src[k] = r * c->Wp + col;
            dst[k] = r * c->Wo + col;
            lanes[k] = c->Wo - col < GC_W ? c->Wo - col : GC_W;
        }
        dc_tile_any(x, c->w + o0 * c->K, c->offs, c->K, src, tmp, ob, pb);
        dc_finish(tmp, c->y + at, plane_out, dst, lanes, ob, pb, o0, at_ops, c->steps,
                  c->codes, c->ops);
    }
}

/* c's output and first image for the images from s0 on */
GC_INLINE void dc_at(dc_conv *c, const dc_conv *conv, int64_t s0) {
    c->y = conv->y + s0 * c->O * c->Ho * c->Wo;
    c->first = conv->first + s0;
}

/* plane r (image and channel) of the images from s0 on, padded into c's buffer */
GC_INLINE void dc_pad_plane(const dc_conv *c, const float *x, int64_t s0, int64_t r, int64_t H,
                            int64_t W, int64_t top, int64_t left, int64_t right) {
    dc_pad(x + (s0 * c->C + r) * H * W, c->pad + r * c->plane, H, W, top, left, right, c->Wp,
           c->plane);
}

/* the images `chunk` at a time: each thread of a team takes its share of each loop (or
   the calling thread all of them, outside a parallel region) */
static void dc_chunks(const dc_conv *conv, const float *x, int64_t m, int64_t chunk, int64_t H,
                      int64_t W, int64_t top, int64_t left, int64_t right) {
    dc_conv c = *conv;  /* this thread's: the chunk's output and first image */
    int64_t per = c.groups * c.ntiles_o;
    for (int64_t s0 = 0; s0 < m; s0 += chunk) {
        int64_t mm = m - s0 < chunk ? m - s0 : chunk;
        dc_at(&c, conv, s0);
        #pragma omp for schedule(static)
        for (int64_t r = 0; r < mm * c.C; r++) dc_pad_plane(&c, x, s0, r, H, W, top, left, right);
        #pragma omp for schedule(static)
        for (int64_t task = 0; task < mm * per; task++) dc_task(&c, task);
    }
}

/* the images split between the threads of a team, each padding and convolving its own
   share, `slots` images at a time, through its own part of the padded buffer (its
   slots and a zeroed slack): no barrier until the region ends, where sharing each
   chunk's two loops cost two per chunk, and a passive OpenMP worker sleeps and is woken
   at each (the ResNet block's two 3x3s over 64 images: 2.1 ms with the loops shared,
   about 1.5 with the images split) */
static void dc_images(const dc_conv *conv, const float *x, int64_t m, int64_t slots, int64_t H,
                      int64_t W, int64_t top, int64_t left, int64_t right) {
    int t = 0, T = 1;
#ifdef _OPENMP
    t = omp_get_thread_num();
    T = omp_get_num_threads();
#endif
    dc_conv c = *conv;
    int64_t per = c.groups * c.ntiles_o, lo = m * t / T, hi = m * (t + 1) / T;
    c.pad = conv->pad + t * (slots * c.C * c.plane + SLACK_ELEMENTS);
    memset(c.pad + slots * c.C * c.plane, 0, sizeof(float) * SLACK_ELEMENTS);
    for (int64_t s0 = lo; s0 < hi; s0 += slots) {
        int64_t mm = hi - s0 < slots ? hi - s0 : slots;
        dc_at(&c, conv, s0);
        for (int64_t r = 0; r < mm * c.C; r++) dc_pad_plane(&c, x, s0, r, H, W, top, left, right);
        for (int64_t task = 0; task < mm * per; task++) dc_task(&c, task);
    }
}

/* m images, `chunk` at a time through the padded buffer (which holds `chunk` images
   and DC_MAX_THREADS slacks), all chunks in one OpenMP region when the work pays for
   waking the pool (waking it once per chunk cost about 50 us each): the images split
   between the threads when each gets two or more and a slot of the buffer, else each
   chunk's padding and tiles shared; `first`: the index of image 0 in the program's
   full operands */
GC_EXPORT void gc_direct_conv2d_f32(int64_t m, const float *x, const float *w, float *y,
        float *pad, int64_t C, int64_t H, int64_t W, int64_t O, int64_t groups, int64_t kh,
        int64_t kw, int64_t top, int64_t left, int64_t bottom, int64_t right, int64_t dh,
        int64_t dw, int64_t parallel_work, int64_t chunk, int64_t first, int64_t steps,
        const int64_t *codes, const float *op0, const float *op1, const float *op2,
        const float *op3, const float *op4, const float *op5) {
    int64_t Hp = H + top + bottom, Wp = W + left + right;
    int64_t Ho = Hp - (kh - 1) * dh, Wo = Wp - (kw - 1) * dw, plane = (Hp + 1) * Wp;
    int64_t Cg = C / groups, Og = O / groups, K = Cg * kh * kw;
    int64_t ntiles_o = (Og + DC_OB - 1) / DC_OB;
    /* the taps' offsets: on the stack, or past every thread's slack in the padded
       buffer (`_chunks` makes room for them; no allocation that could fail here) */
    int64_t offs_stack[512], *offs = offs_stack;
    if (K > 512) {
        float *tail = pad + chunk * C * plane + SLACK_ELEMENTS * DC_MAX_THREADS;
        offs = (int64_t *)(tail + ((uintptr_t)tail % sizeof(int64_t) ? 1 : 0));
    }
    for (int64_t c = 0, t = 0; c < Cg; c++)
        for (int64_t i = 0; i < kh; i++)
            for (int64_t j = 0; j < kw; j++) offs[t++] = c * plane + i * dh * Wp + j * dw;
    memset(pad + chunk * C * plane, 0, sizeof(float) * SLACK_ELEMENTS);
    dc_conv conv = {pad, w, y, offs, C, O, groups, K, plane, Wp, Ho, Wo, ntiles_o, first, steps,
                    codes, {op0, op1, op2, op3, op4, op5}};
    int64_t work = m * O * Ho * ((Wo + GC_W - 1) / GC_W) * K;
    int threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    int64_t slots = chunk / threads;
    if (work >= parallel_work && m >= 2 * threads && slots >= 1 && threads <= DC_MAX_THREADS) {
        #pragma omp parallel num_threads(threads)
        dc_images(&conv, x, m, slots, H, W, top, left, right);
    } else if (work >= parallel_work && m * groups * ntiles_o > 1) {
        #pragma omp parallel
        dc_chunks(&conv, x, m, chunk, H, W, top, left, right);
    } else {
        dc_chunks(&conv, x, m, chunk, H, W, top, left, right);  /* the loops run serially */
    }
}
"""


def source() -> str:
    """The kernel's C (after the native header), with this module's constants."""
    text = SOURCE
    for isa, (ob, pb) in TILES.items():
        cases = "\n".join(
            "    " + " ".join(f"DC_CASE({o}, {p})" for p in range(1, pb + 1))
            for o in range(1, ob + 1)
        )
        text = text.replace(f"@OB{isa}@", str(ob)).replace(f"@PB{isa}@", str(pb))
        text = text.replace(f"@CASES{isa}@", cases)
    head = "#include <stdlib.h>\n#ifdef _OPENMP\n#include <omp.h>\n#endif\n"
    return head + f"#define SLACK_ELEMENTS {SLACK}\n#define DC_MAX_THREADS {MAX_THREADS}\n" + text


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
    """conv2d_kernel's `direct` hook calling the C function `fn` on chunks of images:
    (x, w, out, padding, dilation, groups, epilogue), float32, out C-contiguous; the
    epilogue (a body with no C chain: conv.py) runs after each chunk, on a warm output."""
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
            part = out[images]
            m = part.shape[0]
            fn(m, now(x[images]), w_at, now(part), pad_at, *sizes, m, start, *no_program)
            epilogue(part, images)

    return run
