"""Where the native MLP step's time goes against the machine's multiply-add peak.

    python tools/mlp_roofline.py [batch] [rounds]      # default 512 and 15; needs cc

Times, in interleaved rounds in one process (each figure a median of ten calls after
0.15 s of untimed ones, as `graphc bench` warms each block: a peer's idle threads stop
spinning meanwhile; the report the median over rounds):

- the MLP 784-256-256-10 SGD step of `graphc bench` on the native backend;
- the step's eight matrix products alone (the same shapes and layouts, plain products on
  placeholders, one native plan: x W1^T, h1 W2^T, h2 W3^T forward; dz W3, d2 W2 for the
  input gradients; dz^T h2, d2^T h1, d1^T x for the weight gradients);
- jax.jit's step with donated parameters, as `graphc bench` runs it (when jax is
  installed);
- tools/fma_peak.py's multiply-add loop on every thread.

It prints each figure as a share of jax's step and the products' GFLOP/s as a share of
the peak, with what the MLP goal asks (native >= JAX_DONATED_SPEEDUP x faster than
jax.jit, with the project's 1.1x margin on top). docs/bench-results.md quotes it.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fma_peak  # noqa: E402

import graphc as gc  # noqa: E402
from graphc.bench import mlp  # noqa: E402
from graphc.bench.goals import JAX_DONATED_SPEEDUP, NOISE  # noqa: E402

WARMUP = 0.15  # seconds of untimed calls before each block (graphc bench's full runs)


def products(batch: int) -> tuple[gc.Executable, list[np.ndarray], float]:
    """A native plan of the step's eight products (outputs p0 .. p7, in the order of the
    module's docstring), feeds for it (x, h1, h2, dz, d2, d1, w1, w2, w3) and their
    flops."""
    n_in, n1, n2, n_out = mlp.SIZES
    shapes = {
        "x": (batch, n_in),
        "h1": (batch, n1),
        "h2": (batch, n2),
        "dz": (batch, n_out),
        "d2": (batch, n2),
        "d1": (batch, n1),
        "w1": (n1, n_in),
        "w2": (n2, n1),
        "w3": (n_out, n2),
    }
    g = gc.Graph("mlp_products")
    with g:
        v = {name: gc.placeholder(name, shape, "float32") for name, shape in shapes.items()}
        t = gc.transpose
        pairs = [
            (v["x"], t(v["w1"])),
            (v["h1"], t(v["w2"])),
            (v["h2"], t(v["w3"])),
            (v["dz"], v["w3"]),
            (v["d2"], v["w2"]),
            (t(v["dz"]), v["h2"]),
            (t(v["d2"]), v["h1"]),
            (t(v["d1"]), v["x"]),
        ]
        for i, (a, b) in enumerate(pairs):
            gc.output(gc.matmul(a, b), name=f"p{i}")
    flops = 0.0
    for a, b in pairs:
        (m, k), n = a.type.shape, b.type.shape[1]
        flops += 2.0 * m * k * n
    exe = gc.compile(g, backend="native", wait=True)
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype(np.float32) for s in shapes.values()]
    exe(*args)
    exe.wait()  # the entry in C, built for the signature of the first call
    return exe, args, flops


def main() -> int:
    batch = int(sys.argv[1]) if len(sys.argv) > 1 else 512
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 15
    threads = len(os.sched_getaffinity(0))
    inputs = mlp._inputs({"batch": batch})
    x, y = inputs["args"]
    trainer = mlp.train_step(x, y, 2, False, "native")
    trainer.step(x, y)
    trainer.executable.wait()
    calls: dict[str, Callable[[], object]] = {"step": lambda: trainer.step(x, y)}
    plan, feeds, flops = products(batch)
    calls["products"] = lambda: plan(*feeds)
    try:
        calls["jax"] = mlp._jax({"batch": batch}, inputs).call
    except ImportError:
        print("jax is not installed: no jax.jit step")
    with tempfile.TemporaryDirectory() as tmp:
        peak_lib = fma_peak.library(tmp)
        iters = 2_000_000
        calls["peak"] = lambda: peak_lib.fma_seconds(iters, threads)
        peak_flops = peak_lib.fma_flops(iters, threads)
        times: dict[str, list[float]] = {name: [] for name in calls}
        for _ in range(rounds):
            for name, call in calls.items():
                settled = time.perf_counter() + WARMUP
                while time.perf_counter() < settled:
                    call()
                runs = []
                for _ in range(10):
                    start = time.perf_counter()
                    call()
                    runs.append(time.perf_counter() - start)
                times[name].append(statistics.median(runs))
    med = {name: statistics.median(values) for name, values in times.items()}
    share = [flops / p / (peak_flops / q) for p, q in zip(times["products"], times["peak"])]
    print(f"MLP step at batch {batch} on native, {rounds} interleaved rounds, {threads} threads")
    print(f"  the step            {med['step'] * 1e3:8.3f} ms")
    print(f"  its eight products  {med['products'] * 1e3:8.3f} ms  ({flops / 1e6:.1f} MFLOP)")
    peak = peak_flops / med["peak"] / 1e9
    print(f"  multiply-add peak   {peak:8.1f} GFLOP/s on {threads} threads")
    print(f"  the products at {100 * statistics.median(share):.1f} % of the peak (per round)")
    if "jax" in times:
        jax_time = times["jax"]

        def of_jax(name: str) -> float:
            return statistics.median(a / b for a, b in zip(times[name], jax_time))

        at_peak = statistics.median(
            flops / (peak_flops / q) / j for q, j in zip(times["peak"], jax_time)
        )
        print(f"  jax.jit's step      {med['jax'] * 1e3:8.3f} ms")
        print("in jax's time (per-round ratios):")
        print(f"  the step {of_jax('step'):.3f}; its products alone {of_jax('products'):.3f};")
        print(f"  the products at the peak {at_peak:.3f}")
        print(
            f"  the goal asks {1 / JAX_DONATED_SPEEDUP:.3f}, and "
            f"{1 / JAX_DONATED_SPEEDUP / NOISE:.3f} with the 1.1x margin"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
