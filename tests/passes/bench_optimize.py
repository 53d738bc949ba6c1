"""Benchmark (not a test): how long O2 takes on a long elementwise chain, and what the
pipeline does to the MLP joint graph and to y = (x + w)(w + 1).

    python tests/passes/bench_optimize.py [N]
"""

from __future__ import annotations

import statistics
import sys
import time

import graphc as gc


def chain(n: int) -> gc.Graph:
    """n elementwise ops on one (B, 16) input (plus the scalar constants they use)."""
    steps = [gc.tanh, gc.exp, gc.sin, gc.neg, lambda v: v * 1.5, lambda v: v + 1.0, gc.sigmoid]
    g = gc.Graph("chain")
    with g:
        y = gc.placeholder("x", shape=("B", 16))
        for i in range(n):
            y = steps[i % len(steps)](y)
        gc.output(y, name="y")
    return g


def mlp_joint() -> gc.Graph:
    g = gc.Graph("mlp")
    with g:
        x = gc.placeholder("x", shape=("B", 784))
        labels = gc.placeholder("labels", shape=("B",), dtype="int64")
        h = x
        for i, (n_in, n_out) in enumerate([(784, 256), (256, 256), (256, 10)]):
            w = gc.placeholder(f"w{i}", shape=(n_in, n_out))
            b = gc.placeholder(f"b{i}", shape=(n_out,))
            h = h @ w + b
            h = gc.relu(h) if i < 2 else h
        gc.output(gc.cross_entropy(h, labels), name="loss")
    return gc.gradients(g, wrt=[p.name for p in g.inputs if p.name[0] in "wb"])


def product_joint() -> gc.Graph:
    g = gc.Graph("product")
    with g:
        x = gc.placeholder("x", shape=(), dtype="float64")
        w = gc.placeholder("w", shape=(), dtype="float64")
        gc.output((x + w) * (w + 1), name="y")
    return gc.gradients(g, wrt=["x", "w"])


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
    g = chain(n)
    times = []
    for _ in range(5):
        start = time.perf_counter()
        optimized = gc.optimize(g, level=2)
        times.append(time.perf_counter() - start)
    print(f"chain of {n} ops ({len(g.nodes)} nodes) -> {len(optimized.nodes)} nodes at O2")
    print(f"  O2 time: median {statistics.median(times):.3f} s, min {min(times):.3f} s")
    for name, joint in (("MLP + cross-entropy joint graph", mlp_joint()), ("y=(x+w)(w+1) joint graph", product_joint())):  # fmt: skip
        counts = [len(gc.optimize(joint, level=k).nodes) for k in (0, 1, 2)]
        ops = [len(gc.optimize(joint, level=k).op_nodes) for k in (0, 1, 2)]
        print(f"{name}: nodes O0/O1/O2 = {counts}, ops = {ops}")
    print(gc.optimize(product_joint(), level=1))


if __name__ == "__main__":
    main()
