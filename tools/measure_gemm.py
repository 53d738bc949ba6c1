"""Which GEMM, in which orientation, for the MLP 784-256-256-10 step (float32)?

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python tools/measure_gemm.py [rounds]

(this sandbox's environment forces OpenBLAS onto its Haswell kernels; unset, numpy's
OpenBLAS picks its AVX-512 ones.) Measures, at batch 32 and 512, every GEMM of one
training step with torch-layout weights W (out, in):

- forward  y = x @ W.T:   numpy NT (`x @ W.T`), NN on a contiguous W.T, and the product
  computed transposed, `W @ x.T` into an (out, B) buffer;
- backward dX = dY @ W:   numpy NN;
- weight gradient dY.T @ X and the SGD update W -= lr * dY.T @ X: numpy as the fast_math
  plan runs it (scale the small operand, matmul, subtract), and as ONE cblas_sgemm on
  numpy's own OpenBLAS with alpha = -lr, beta = 1 accumulating into W;
- the same products through cblas_sgemm called directly (ctypes), cython-blis
  (`blis.py.gemm`) and scipy.linalg.blas.sgemm (scipy's own OpenBLAS: a second pool);
- the cost of a second BLAS thread pool: numpy's sgemm alternating with scipy's, and
  with blis's, against each alone.

Rounds are interleaved (every variant once per round, in a shuffled order); a round's
figure is the median of a few calls, the report the median over rounds. blis and scipy
are measured only if installed (`pip install blis scipy`): graphc never imports them.
"""

from __future__ import annotations

import ctypes
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

SIZES = (784, 256, 256, 10)
LR = np.float32(0.01)
ROW_MAJOR, NO_TRANS, TRANS = 101, 111, 112


def openblas() -> tuple[Callable[..., None], str]:
    """numpy's bundled OpenBLAS's cblas_sgemm (ILP64 in numpy 2's wheels) and its name."""
    libs = Path(np.__file__).parent.parent / "numpy.libs"
    for path in sorted(libs.glob("libscipy_openblas*.so*")) + sorted(libs.glob("libopenblas*")):
        lib = ctypes.CDLL(str(path))
        for symbol, integer in (
            ("scipy_cblas_sgemm64_", ctypes.c_int64),
            ("cblas_sgemm64_", ctypes.c_int64),
            ("scipy_cblas_sgemm", ctypes.c_int),
            ("cblas_sgemm", ctypes.c_int),
        ):
            fn = getattr(lib, symbol, None)
            if fn is None:
                continue
            fn.restype = None
            p, i, f = ctypes.c_void_p, integer, ctypes.c_float
            fn.argtypes = [
                ctypes.c_int,
                ctypes.c_int,
                ctypes.c_int,
                i,
                i,
                i,
                f,
                p,
                i,
                p,
                i,
                f,
                p,
                i,
            ]
            return fn, f"{path.name}:{symbol}"
    raise SystemExit("numpy's OpenBLAS was not found under numpy.libs")


SGEMM, SGEMM_NAME = openblas()


def cblas(a: np.ndarray, b: np.ndarray, c: np.ndarray, ta: bool, tb: bool,
          alpha: float = 1.0, beta: float = 0.0) -> Callable[[], None]:  # fmt: skip
    """A call of cblas_sgemm computing c = alpha op(a) op(b) + beta c (row-major)."""
    m, n = c.shape
    k = a.shape[0] if ta else a.shape[1]
    args = (ROW_MAJOR, TRANS if ta else NO_TRANS, TRANS if tb else NO_TRANS, m, n, k, alpha,
            a.ctypes.data, a.shape[1], b.ctypes.data, b.shape[1], beta, c.ctypes.data, n)  # fmt: skip
    return lambda keep=(a, b, c): SGEMM(*args)  # `keep`: the arrays outlive the call


def timed(call: Callable[[], object], reps: int) -> float:
    """Median microseconds of `reps` calls."""
    times = []
    for _ in range(reps):
        start = time.perf_counter_ns()
        call()
        times.append(time.perf_counter_ns() - start)
    return statistics.median(times) / 1e3


def run(variants: dict[str, Callable[[], object]], rounds: int, reps: int) -> dict[str, float]:
    """Median over interleaved rounds of each variant's per-round median."""
    for call in variants.values():  # warm up: threads, page faults, blis's buffers
        for _ in range(3):
            call()
    samples: dict[str, list[float]] = {name: [] for name in variants}
    names = list(variants)
    for _ in range(rounds):
        random.shuffle(names)
        for name in names:
            samples[name].append(timed(variants[name], reps))
    return {name: statistics.median(v) for name, v in samples.items()}


def optional(module: str) -> object | None:
    try:
        return __import__(module, fromlist=["_"])
    except ImportError:
        return None


BLIS = optional("blis.py")
SCIPY_BLAS = optional("scipy.linalg.blas")


def scipy_sgemm(a: np.ndarray, b: np.ndarray, c: np.ndarray, ta: bool, tb: bool,
                alpha: float = 1.0, beta: float = 0.0) -> Callable[[], object]:  # fmt: skip
    """scipy's Fortran sgemm on C-ordered arrays without copies: row-major C = op(A) op(B)
    is column-major C^T = op(B)^T op(A)^T, and a C-ordered array's .T is Fortran-ordered."""
    fn = SCIPY_BLAS.sgemm  # type: ignore[union-attr]
    return lambda: fn(alpha, b.T, a.T, beta=beta, c=c.T, trans_a=tb, trans_b=ta, overwrite_c=1)


def blis_gemm(a: np.ndarray, b: np.ndarray, c: np.ndarray, ta: bool, tb: bool,
              alpha: float = 1.0, beta: float = 0.0) -> Callable[[], object]:  # fmt: skip
    fn = BLIS.gemm  # type: ignore[union-attr]
    return lambda: fn(a, b, out=c, trans1=ta, trans2=tb, alpha=alpha, beta=beta)


def gemm_variants(batch: int, rng: np.random.Generator) -> dict[str, Callable[[], object]]:
    """Every product of one step at this batch, per library and orientation."""
    out: dict[str, Callable[[], object]] = {}
    libraries = {"cblas": cblas}
    if BLIS is not None:
        libraries["blis"] = blis_gemm
    if SCIPY_BLAS is not None:
        libraries["scipy"] = scipy_sgemm
    for fan_in, fan_out in zip(SIZES[:-1], SIZES[1:]):
        tag = f"{fan_in}->{fan_out}"
        x = rng.standard_normal((batch, fan_in), np.float32)
        w = rng.standard_normal((fan_out, fan_in), np.float32)
        wt = np.ascontiguousarray(w.T)
        dy = rng.standard_normal((batch, fan_out), np.float32)
        y = np.empty((batch, fan_out), np.float32)
        yt = np.empty((fan_out, batch), np.float32)
        dx = np.empty((batch, fan_in), np.float32)
        g = np.empty((fan_out, fan_in), np.float32)
        gt = np.empty((fan_in, fan_out), np.float32)
        out[f"fwd {tag} numpy x@W.T (NT)"] = lambda x=x, w=w, y=y: np.matmul(x, w.T, out=y)
        out[f"fwd {tag} numpy x@WT (NN)"] = lambda x=x, wt=wt, y=y: np.matmul(x, wt, out=y)
        out[f"fwd {tag} numpy W@x.T (out,B)"] = lambda x=x, w=w, yt=yt: np.matmul(w, x.T, out=yt)
        out[f"wgrad {tag} numpy dY.T@X"] = lambda dy=dy, x=x, g=g: np.matmul(dy.T, x, out=g)
        out[f"wgrad {tag} numpy X.T@dY (in,out)"] = lambda dy=dy, x=x, gt=gt: np.matmul(
            x.T, dy, out=gt
        )
        if fan_out != SIZES[1] or fan_in != SIZES[0]:  # the first layer needs no dX
            out[f"dX {tag} numpy dY@W (NN)"] = lambda dy=dy, w=w, dx=dx: np.matmul(dy, w, out=dx)
        for lib, make in libraries.items():
            out[f"fwd {tag} {lib} NT"] = make(x, w, y, False, True)
            out[f"fwd {tag} {lib} W@x.T"] = make(w, x, yt, False, True)
            out[f"wgrad {tag} {lib} dY.T@X"] = make(dy, x, g, True, False)
            wcopy = w.copy()
            out[f"update {tag} {lib} W+=-lr dY.T@X"] = make(dy, x, wcopy, True, False, -LR, 1.0)
        wcopy = w.copy()
        scratch = np.empty_like(g)
        dys = np.empty_like(dy)

        def numpy_update(dy=dy, x=x, w=wcopy, g=scratch, dys=dys) -> None:
            np.multiply(dy, LR, out=dys)  # the fast_math plan: scale the small operand,
            np.matmul(dys.T, x, out=g)  # one matmul into an arena buffer,
            np.subtract(w, g, out=w)  # then the subtraction into the parameter

        out[f"update {tag} numpy scale,matmul,sub"] = numpy_update
    return out


def pool_variants(rng: np.random.Generator) -> dict[str, Callable[[], object]]:
    """numpy's sgemm alone, and alternating with another library's (a second pool)."""
    a = rng.standard_normal((32, 784), np.float32)
    w = rng.standard_normal((256, 784), np.float32)
    c1, c2 = np.empty((32, 256), np.float32), np.empty((32, 256), np.float32)
    numpy_call = cblas(a, w, c1, False, True)
    out: dict[str, Callable[[], object]] = {
        "pool numpy sgemm x2": lambda: (numpy_call(), numpy_call())
    }
    for lib, make in (("scipy", scipy_sgemm if SCIPY_BLAS else None),
                      ("blis", blis_gemm if BLIS else None)):  # fmt: skip
        if make is None:
            continue
        other = make(a, w, c2, False, True)
        out[f"pool {lib} sgemm x2"] = lambda other=other: (other(), other())
        out[f"pool numpy+{lib} alternating"] = lambda other=other: (numpy_call(), other())
    return out


def agreement(rng: np.random.Generator) -> list[str]:
    """How far orientations and libraries differ (max |diff| / max |value|)."""
    lines = []
    for batch in (32, 512):
        x = rng.standard_normal((batch, 784), np.float32)
        w = rng.standard_normal((256, 784), np.float32)
        nt = x @ w.T
        lines += [
            f"b{batch} x@W.T vs x@WT: {_rel(nt, x @ np.ascontiguousarray(w.T)):.2e}",
            f"b{batch} x@W.T vs (W@x.T).T: {_rel(nt, (w @ x.T).T):.2e}",
        ]
    c = np.empty_like(nt)
    cblas(x, w, c, False, True)()
    lines.append(f"x@W.T numpy vs cblas NT: {_rel(nt, c):.2e} (bit-equal: {np.array_equal(nt, c)})")
    for batch in (32, 512):
        dy = rng.standard_normal((batch, 256), np.float32)
        x = rng.standard_normal((batch, 784), np.float32)
        w0 = rng.standard_normal((256, 784), np.float32)
        reference = w0 - (dy * LR).T @ x
        folded = w0.copy()
        cblas(dy, x, folded, True, False, -LR, 1.0)()
        lines.append(
            f"b{batch} update scale,matmul,sub vs one sgemm beta=1: {_rel(reference, folded):.2e}"
        )
    return lines


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(a.astype(np.float64) - b)) / np.max(np.abs(a)))


def main(rounds: int) -> None:
    import threadpoolctl

    pools = threadpoolctl.threadpool_info()
    print(f"OpenBLAS: {SGEMM_NAME}; OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE')}")
    for pool in pools:
        print(f"  pool {pool['prefix']} {pool['version']} {pool['architecture']} "
              f"threads={pool['num_threads']}")  # fmt: skip
    print(f"blis: {'yes' if BLIS else 'not installed'}, scipy: {'yes' if SCIPY_BLAS else 'no'}")
    rng = np.random.default_rng(0)
    for line in agreement(rng):
        print(" ", line)
    for batch in (32, 512):
        reps = 20 if batch == 32 else 5
        results = run(gemm_variants(batch, rng), rounds, reps)
        print(f"\nbatch {batch} (median us over {rounds} interleaved rounds)")
        for name in sorted(results):
            print(f"  {name:45s} {results[name]:9.1f}")
    results = run(pool_variants(rng), rounds, 20)
    print("\nthread pools (two calls of x(32,784) @ W.T each)")
    for name in sorted(results):
        print(f"  {name:45s} {results[name]:9.1f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 15)
