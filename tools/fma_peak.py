"""The machine's float32 multiply-add peak: what no GEMM on it can beat.

Compiles and runs a loop of independent AVX-512 fused multiply-adds (12 chains a thread,
enough to cover the instruction's latency on both pipes), on one thread and on all of
them, and prints GFLOP/s (a multiply-add counted as two). docs/bench-results.md reads
goals against it; tools/mlp_roofline.py loads the same loop as a library (`library`).

    python tools/fma_peak.py            # needs cc with -fopenmp and an AVX-512 CPU
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import tempfile
from pathlib import Path

SOURCE = r"""
#include <immintrin.h>
#include <stdio.h>
#include <omp.h>

volatile float fma_sink;  /* the chains' sums, stored so that the loop stays */

/* seconds that `threads` threads take for `iters` multiply-adds of 16 lanes each */
double fma_seconds(long iters, int threads) {
    double t0 = omp_get_wtime();
    float sink = 0;
    #pragma omp parallel num_threads(threads) reduction(+:sink)
    {
        __m512 a[12], m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
        for (int k = 0; k < 12; k++) a[k] = _mm512_set1_ps((float)k);
        for (long i = 0; i < iters / 12; i++) {
            #pragma GCC unroll 12
            for (int k = 0; k < 12; k++) a[k] = _mm512_fmadd_ps(a[k], m, c);
        }
        for (int k = 0; k < 12; k++) sink += _mm512_reduce_add_ps(a[k]);
    }
    double seconds = omp_get_wtime() - t0;
    fma_sink = sink;
    return seconds;
}

/* the flops of fma_seconds(iters, threads), a multiply-add counted as two */
double fma_flops(long iters, int threads) { return (double)threads * (iters / 12) * 12 * 16 * 2; }

#ifndef FMA_LIBRARY
int main(void) {
    long iters = 200000000L;
    for (int nt = 1; nt <= omp_get_max_threads(); nt++) {
        double seconds = fma_seconds(iters, nt);
        printf("%d thread(s): %.1f GFLOP/s\n", nt, fma_flops(iters, nt) / seconds / 1e9);
    }
    return 0;
}
#endif
"""
FLAGS = ["-O2", "-march=native", "-fopenmp"]


def library(directory: str | Path) -> ctypes.CDLL:
    """The loop as a shared library built in `directory`: fma_seconds(iters, threads) and
    fma_flops(iters, threads)."""
    source, path = Path(directory) / "peak.c", Path(directory) / "libpeak.so"
    source.write_text(SOURCE)
    compiler = os.environ.get("CC", "cc")
    command = [compiler, *FLAGS, "-DFMA_LIBRARY", "-fPIC", "-shared", str(source), "-o", str(path)]
    subprocess.run(command, check=True)
    lib = ctypes.CDLL(str(path))
    for name in ("fma_seconds", "fma_flops"):
        getattr(lib, name).argtypes = [ctypes.c_long, ctypes.c_int]
        getattr(lib, name).restype = ctypes.c_double
    return lib


def main() -> int:
    compiler = os.environ.get("CC", "cc")
    with tempfile.TemporaryDirectory() as tmp:
        source, binary = Path(tmp) / "peak.c", Path(tmp) / "peak"
        source.write_text(SOURCE)
        subprocess.run([compiler, *FLAGS, str(source), "-o", str(binary)], check=True)
        return subprocess.run([str(binary)], check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
