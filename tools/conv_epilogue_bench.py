"""Measure the conv epilogue: conv2d + bias + ReLU at O2 with and without fuse_conv_epilogue.

    python tools/conv_epilogue_bench.py [--rounds 40] [--activation relu]

Shapes: LeNet's second convolution (64x6x14x14 by 16x6x5x5) and a ResNet block's 3x3
convolution (32x64x28x28 by 64x64x3x3, padding 1), float32. Variants, timed in
interleaved rounds (each round runs every variant once, in a rotating order) and
reported as medians: the convolution alone, O0, O2 without the conv epilogue (the
add and activation then run as a chunked fused node), O2 with it. Also checks that
the fused result has the unfused bits and prints each plan's intermediate bytes.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np

import graphc as gc
from graphc.ops.conv_ops import conv2d
from graphc.passes import pipeline

SHAPES = {
    "lenet": ((64, 6, 14, 14), (16, 6, 5, 5), 0),
    "resnet": ((32, 64, 28, 28), (64, 64, 3, 3), 1),
}


def block(xs: tuple, ws: tuple, padding: int, activation: str | None) -> gc.Graph:
    g = gc.Graph("conv_bias_act")
    with g:
        x, w = gc.placeholder("x", xs), gc.placeholder("w", ws)
        b = gc.placeholder("b", (ws[0],))
        y = gc.conv2d(x, w, b, padding=padding)
        gc.output(y if activation is None else getattr(gc, activation)(y), name="y")
    return g


def conv_only(xs: tuple, ws: tuple, padding: int) -> gc.Graph:
    g = gc.Graph("conv")
    with g:
        x, w = gc.placeholder("x", xs), gc.placeholder("w", ws)
        gc.output(conv2d(x, w, padding=padding), name="y")
    return g


def without_conv_epilogue(graph: gc.Graph) -> gc.Executable:
    """gc.compile at O2 with fuse_conv_epilogue left out of the pipeline."""
    saved = pipeline.LEVELS[2]
    once = tuple(p for p in saved[1] if p.__name__ != "fuse_conv_epilogue")
    pipeline.LEVELS[2] = (saved[0], once)
    try:
        return gc.compile(graph, opt_level=2)
    finally:
        pipeline.LEVELS[2] = saved


def intermediate_bytes(exe: gc.Executable, feeds: dict) -> str:
    lines = exe.explain(**feeds).splitlines()
    return next(line.split(":")[1].strip() for line in lines if line.startswith("peak bytes"))


def measure(name: str, rounds: int, activation: str | None) -> None:
    xs, ws, padding = SHAPES[name]
    rng = np.random.default_rng(0)
    feeds = {
        "x": rng.standard_normal(xs, dtype=np.float32),
        "w": rng.standard_normal(ws, dtype=np.float32) * 0.1,
        "b": rng.standard_normal(ws[0], dtype=np.float32),
    }
    g = block(xs, ws, padding, activation)
    variants: dict[str, tuple[gc.Executable, dict]] = {
        "conv2d alone": (gc.compile(conv_only(xs, ws, padding)), {"x": feeds["x"], "w": feeds["w"]}),
        "O0": (gc.compile(g, opt_level=0), feeds),
        "O2 without conv epilogue": (without_conv_epilogue(g), feeds),
        "O2 with conv epilogue": (gc.compile(g, opt_level=2), feeds),
    }  # fmt: skip
    want = variants["O0"][0](**feeds)
    for label in ("O2 without conv epilogue", "O2 with conv epilogue"):
        got = variants[label][0](**feeds)
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), label
    times: dict[str, list[float]] = {label: [] for label in variants}
    labels = list(variants)
    for r in range(rounds + 2):  # two warm-up rounds, not kept
        order = labels[r % len(labels) :] + labels[: r % len(labels)]
        for label in order:
            exe, f = variants[label]
            start = time.perf_counter()
            exe(**f)
            if r >= 2:
                times[label].append(time.perf_counter() - start)
    shape = "x".join(map(str, want.shape))
    print(f"\n{name}: x {xs} * w {ws}, padding {padding}, + bias, {activation} -> {shape}")
    base = statistics.median(times["O2 without conv epilogue"])
    for label, ts in times.items():
        med = statistics.median(ts)
        extra = ""
        if label.startswith("O"):
            exe, f = variants[label]
            extra = f"  intermediates {intermediate_bytes(exe, f)}"
        print(f"  {label:<26} {med * 1e3:8.3f} ms  ({med / base:5.2f}x of O2 without){extra}")


def main(argv: list[str] | None = None, run: Callable[..., None] = measure) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--activation", default="relu")
    args = parser.parse_args(argv)
    activation = None if args.activation == "none" else args.activation
    for name in SHAPES:
        run(name, args.rounds, activation)


if __name__ == "__main__":
    main()
