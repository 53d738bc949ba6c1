"""The machine's float32 multiply-add peak: what no GEMM on it can beat.

Compiles and runs a loop of independent AVX-512 fused multiply-adds (12 chains a thread,
enough to cover the instruction's latency on both pipes), on one thread and on all of
them, and prints GFLOP/s (a multiply-add counted as two). docs/bench-results.md reads
goals against it.

    python tools/fma_peak.py            # needs cc with -fopenmp and an AVX-512 CPU
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

SOURCE = r"""
#include <immintrin.h>
#include <stdio.h>
#include <omp.h>
int main(void) {
    long iters = 200000000L;
    int most = omp_get_max_threads();
    for (int nt = 1; nt <= most; nt++) {
        double t0 = omp_get_wtime();
        float sink = 0;
        #pragma omp parallel num_threads(nt) reduction(+:sink)
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
        double flops = (double)nt * (iters / 12) * 12 * 16 * 2;
        printf("%d thread(s): %.1f GFLOP/s (checksum %g)\n", nt, flops / seconds / 1e9, sink);
    }
    return 0;
}
"""


def main() -> int:
    compiler = os.environ.get("CC", "cc")
    with tempfile.TemporaryDirectory() as tmp:
        source, binary = Path(tmp) / "peak.c", Path(tmp) / "peak"
        source.write_text(SOURCE)
        flags = ["-O2", "-march=native", "-fopenmp"]
        subprocess.run([compiler, *flags, str(source), "-o", str(binary)], check=True)
        return subprocess.run([str(binary)], check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
