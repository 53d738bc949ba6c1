"""The `graphc` command: demo | render | bench | inspect."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import numpy as np

import graphc as gc


def demo(args: argparse.Namespace) -> int:
    """Declare the README's small graph, print its text IR, and run it."""
    g = gc.Graph("affine")
    with g:
        x = gc.placeholder("x", shape=("B", 3), dtype="float32")
        w = gc.placeholder("w", shape=(3, 2))
        b = gc.constant(np.array([0.5, -0.5], np.float32), name="b")
        y = gc.relu(x @ w + b)
        gc.output(gc.mean(y * y), name="loss")
    print("The graph, declared once (B is a symbolic batch dim):\n")
    print(g)
    xv = np.arange(12, dtype=np.float32).reshape(4, 3) / 10
    wv = np.array([[1, -1], [0.5, 0.5], [-1, 1]], np.float32)
    print("\nRun on x (4x3) and w (3x2):  loss =", g(x=xv, w=wv))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="graphc", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("demo", help="declare, print and run a small graph").set_defaults(run=demo)
    args = parser.parse_args(argv)
    return int(args.run(args))


if __name__ == "__main__":
    sys.exit(main())
