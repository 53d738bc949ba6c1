"""Measurements behind the runtime's performance goals (issue 6), side by side in one run.

    python -m graphc.bench.runtime_goals            # all figures
    python -m graphc.bench.runtime_goals chunks     # the fused chunk-size sweep

Figures are medians of repeated timings; compare the ratios, not absolute times
(the machine is shared). `measure_*` functions return dicts; only `main` prints.
"""

from __future__ import annotations

import math
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import graphc as gc
from graphc.runtime import fused

GELU_C, GELU_A = math.sqrt(2.0 / math.pi), 0.044715


def median_seconds(fn: Callable[[], Any], repeat: int = 7, number: int | None = None) -> float:
    """Median over `repeat` runs of the time per call (`number` calls per run)."""
    if number is None:
        start = time.perf_counter()
        fn()
        once = time.perf_counter() - start
        number = max(1, int(0.05 / max(once, 1e-7)))
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - start) / number)
    return statistics.median(times)


# -- tiny graph: forward and both gradients of y = (x + w)(w + 1) -------------------------


def tiny_graph() -> gc.Graph:
    g = gc.Graph("tiny")
    with g:
        x = gc.placeholder("x", shape=(1,))
        w = gc.placeholder("w", shape=(1,))
        gc.output(gc.sum((x + w) * (w + 1.0)), name="y")
    return gc.gradients(g, wrt=["x", "w"])


def measure_tiny() -> dict[str, float]:
    exe = gc.compile(tiny_graph())
    x, w = np.ones(1, np.float32), np.full(1, 2.0, np.float32)

    def by_hand() -> tuple:
        a = x + w
        b = w + np.float32(1.0)
        return np.add.reduce(a * b), b, a + b

    def eager() -> tuple:
        from graphc import eager as E

        xt, wt = E.tensor(x, requires_grad=True), E.tensor(w, requires_grad=True)
        y = ((xt + wt) * (wt + 1.0)).sum()
        y.backward()
        return y, xt.grad, wt.grad

    return {
        "graphc O2 (us)": 1e6 * median_seconds(lambda: exe(x, w)),
        "numpy by hand (us)": 1e6 * median_seconds(by_hand),
        "graphc eager (us)": 1e6 * median_seconds(eager),
    }


# -- GELU chain, tanh form with x**3 --------------------------------------------------------


def gelu_graph() -> gc.Graph:
    g = gc.Graph("gelu")
    with g:
        x = gc.placeholder("x", shape=("N",))
        gc.output(0.5 * x * (1.0 + gc.tanh(GELU_C * (x + GELU_A * x**3))), name="y")
    return g


def gelu_numpy(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.tanh(GELU_C * (x + GELU_A * x**3)))


def gelu_chunked(chunk: int = 32768) -> Callable[[np.ndarray], np.ndarray]:
    """The best hand-written numpy: preallocated chunk buffers, x*x*x, ops in place."""
    a = np.empty(chunk, np.float32)
    b = np.empty(chunk, np.float32)
    c_half, c_gelu, c_a = np.float32(0.5), np.float32(GELU_C), np.float32(GELU_A)

    def run(x: np.ndarray) -> np.ndarray:
        out = np.empty_like(x)
        for lo in range(0, x.size, chunk):
            xs = x[lo : lo + chunk]
            n = xs.size
            t, u = a[:n], b[:n]
            np.multiply(xs, xs, out=t)
            np.multiply(t, xs, out=t)
            np.multiply(t, c_a, out=t)
            np.add(t, xs, out=t)
            np.multiply(t, c_gelu, out=t)
            np.tanh(t, out=t)
            np.add(t, 1, out=t)
            np.multiply(xs, c_half, out=u)
            np.multiply(t, u, out=out[lo : lo + chunk])
        return out

    return run


def measure_gelu(n: int) -> dict[str, float]:
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    o2 = gc.compile(gelu_graph(), opt_level=2)
    o0 = gc.compile(gelu_graph(), opt_level=0)
    chunked = gelu_chunked()
    np.testing.assert_allclose(o2(x), gelu_numpy(x), rtol=1e-4, atol=1e-5)
    repeat = 7 if n <= 10**6 else 5
    return {
        "numpy one-liner (ms)": 1e3 * median_seconds(lambda: gelu_numpy(x), repeat),
        "hand chunked (ms)": 1e3 * median_seconds(lambda: chunked(x), repeat),
        "graphc O0 (ms)": 1e3 * median_seconds(lambda: o0(x), repeat),
        "graphc O2 (ms)": 1e3 * median_seconds(lambda: o2(x), repeat),
    }


def measure_chunks(
    n: int, sizes: tuple[int, ...] = (4096, 16384, 32768, 65536, 131072, 10**8)
) -> dict[int, float]:
    """O2 GELU time per chunk size (10**8: one whole-array pass)."""
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    saved = fused.CHUNK
    result = {}
    try:
        for size in sizes:
            fused.CHUNK = size
            exe = gc.compile(gelu_graph(), opt_level=2)
            result[size] = 1e3 * median_seconds(lambda exe=exe: exe(x), 5)  # type: ignore[misc]
    finally:
        fused.CHUNK = saved
    return result


# -- compile time of a long elementwise chain ---------------------------------------------


def chain_graph(length: int) -> gc.Graph:
    g = gc.Graph("chain")
    with g:
        x = gc.placeholder("x", shape=(16,))
        y = x
        for i in range(length):
            y = gc.tanh(y) if i % 2 else y * 1.0001
        gc.output(y, name="y")
    return g


def measure_compile(length: int) -> dict[str, float]:
    g = chain_graph(length)
    result = {}
    for level in (0, 2):
        start = time.perf_counter()
        exe = gc.compile(g, opt_level=level)
        result[f"compile O{level} (s)"] = time.perf_counter() - start
        exe(np.ones(16, np.float32))
    return result


def main(argv: list[str]) -> None:
    if argv[1:2] == ["chunks"]:
        for n in (10**6, 10**7):
            print(
                f"chunk sweep at {n:.0e}:", {k: round(v, 2) for k, v in measure_chunks(n).items()}
            )
        return
    print("tiny graph:", {k: round(v, 2) for k, v in measure_tiny().items()})
    for n in (10**6, 10**7):
        figures = measure_gelu(n)
        ratio_np = figures["numpy one-liner (ms)"] / figures["graphc O2 (ms)"]
        ratio_hand = figures["graphc O2 (ms)"] / figures["hand chunked (ms)"]
        print(
            f"gelu {n:.0e}:",
            {k: round(v, 2) for k, v in figures.items()},
            f"speed-up vs one-liner {ratio_np:.2f}x, vs hand chunked {ratio_hand:.2f}x the time",
        )
    for length in (5000, 50000):
        print(
            f"chain of {length} ops:", {k: round(v, 3) for k, v in measure_compile(length).items()}
        )


if __name__ == "__main__":
    main(sys.argv)
