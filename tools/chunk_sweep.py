"""How the fused-kernel chunk size (graphc.backends.numpy.fused.CHUNK) affects the GELU chain.

    python tools/chunk_sweep.py [N]      # N elements, default 1e6

The measurement behind CHUNK's value (PERF-NOTES: 16K-64K elements beat whole-array
passes for long chains at 1e7). Medians of repeated calls; compare within one run.
"""

from __future__ import annotations

import statistics
import sys
import time

import numpy as np

import graphc as gc
from graphc.backends.numpy import fused
from graphc.bench.gelu import gelu

SIZES = (4096, 16384, 32768, 65536, 131072, 10**9)  # 10**9: one whole-array pass


def median_ms(call: object, repeat: int = 7) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def main(n: int) -> None:
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    graph = gc.trace(lambda v: gelu(v, gc.tanh), x)
    saved = fused.CHUNK
    try:
        for size in SIZES:
            fused.CHUNK = size
            exe = gc.compile(graph, opt_level=2)
            exe(x)
            label = "whole array" if size >= n else f"{size:>7}"
            print(f"chunk {label}: {median_ms(lambda exe=exe: exe(x)):.3f} ms")
    finally:
        fused.CHUNK = saved


if __name__ == "__main__":
    main(int(float(sys.argv[1])) if len(sys.argv) > 1 else 10**6)
