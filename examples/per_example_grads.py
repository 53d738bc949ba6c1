"""Per-example gradient norms of the digits MLP: vmap of a gradient, checked by a loop.

The loss is written for one example (an image of 64 pixels and its label); its
gradient with respect to the MLP's parameters is `gc.grad(loss)`, and
`gc.vmap(..., in_axes=(None, 0, 0))` runs it on a whole batch at once: the parameters
shared, the images and labels batched. The same per-example gradients come a second
way, as graphs: the one-example loss traced, differentiated with `gc.gradients`,
batched with `gc.passes.vmap_graph` and compiled. Both are checked against a Python
loop over the examples, and each example's gradient norm (what differentially private
SGD clips) is written to --out as CSV, with the examples whose gradients are largest
printed.

Needs scikit-learn for the data: pip install scikit-learn

    python examples/per_example_grads.py --batch 256    # norms in out/per_example_grads/
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

import graphc as gc

OUT = Path(__file__).resolve().parents[1] / "out" / "per_example_grads"

Params = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def load_digits_or_exit() -> tuple[np.ndarray, np.ndarray]:
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        print(
            "per_example_grads.py needs scikit-learn for its bundled digits data: "
            "pip install scikit-learn",
            file=sys.stderr,
        )
        raise SystemExit(2) from None
    digits = load_digits()
    return digits.data / 16.0, digits.target.astype(np.int64)


def init(hidden: int, seed: int) -> Params:
    """The MLP 64-hidden-10's parameters, float64, scaled as nn.Linear's."""
    rng = np.random.default_rng(seed)
    w1 = rng.uniform(-1, 1, (64, hidden)) / np.sqrt(64)
    w2 = rng.uniform(-1, 1, (hidden, 10)) / np.sqrt(hidden)
    return w1, np.zeros(hidden), w2, np.zeros(10)


def loss(params: Any, x: Any, y: Any) -> Any:
    """The cross-entropy of ONE example: x of shape (64,), y an int label."""
    w1, b1, w2, b2 = params
    logits = gc.relu(x @ w1 + b1) @ w2 + b2
    return gc.cross_entropy(logits, y)


def norms(grads: Any) -> np.ndarray:
    """Each example's gradient norm over all parameters (grads batched on axis 0)."""
    return np.sqrt(sum(np.sum(np.square(g).reshape(len(g), -1), axis=1) for g in grads))


def by_vmap(params: Params, x: np.ndarray, y: np.ndarray) -> tuple:
    return gc.vmap(gc.grad(loss), in_axes=(None, 0, 0))(params, x, y)


def by_graphs(params: Params, x: np.ndarray, y: np.ndarray) -> tuple:
    """The same, as graph transformations: trace, gradients, vmap_graph, compile."""
    one = gc.trace(lambda w1, b1, w2, b2, x, y: loss((w1, b1, w2, b2), x, y), *params, x[0], y[0])
    grads = gc.gradients(one, wrt=["w1", "b1", "w2", "b2"])
    batched = gc.passes.vmap_graph(grads, in_axes=(None, None, None, None, 0, 0))
    _, *per_example = gc.compile(batched)(*params, x, y)
    return tuple(per_example)


def by_loop(params: Params, x: np.ndarray, y: np.ndarray) -> tuple:
    grad = gc.grad(loss)
    each = [grad(params, xi, yi) for xi, yi in zip(x, y)]
    return tuple(np.stack([g[k] for g in each]) for k in range(len(params)))


def largest_relative_difference(a: tuple, b: tuple) -> float:
    return max(
        float(np.max(np.abs(p - q) / np.maximum(np.abs(q), 1e-12), initial=0.0))
        for p, q in zip(a, b)
    )


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--batch",
        type=int,
        default=256,
        help="examples whose gradients are computed (default: %(default)s)",
    )
    parser.add_argument(
        "--hidden", type=int, default=64, help="hidden units (default: %(default)s)"
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of the weights and the examples drawn (default: %(default)s)",
    )
    parser.add_argument("--out", type=Path, default=OUT, help="for norms.csv")
    args = parser.parse_args(argv)

    images, labels = load_digits_or_exit()
    order = np.random.default_rng(args.seed).permutation(len(images))[: args.batch]
    x, y = images[order], labels[order]
    params = init(args.hidden, args.seed)
    print(f"digits MLP 64-{args.hidden}-10: per-example gradients of {len(x)} examples")

    results: dict[str, Any] = {}
    seconds: dict[str, float] = {}
    for name, way in (("vmap(grad)", by_vmap), ("vmap_graph", by_graphs), ("loop", by_loop)):
        start = time.perf_counter()
        results[name] = way(params, x, y)
        seconds[name] = time.perf_counter() - start
    loop = results["loop"]
    differences = {name: largest_relative_difference(results[name], loop) for name in results}
    for name in results:
        print(
            f"{name:>11}: {seconds[name] * 1e3:8.1f} ms (tracing included), largest relative "
            f"difference from the loop {differences[name]:.1e}"
        )
    per_example = norms(results["vmap(grad)"])
    hardest = np.argsort(per_example)[::-1][:5]
    print("largest gradient norms: " + ", ".join(
        f"#{i} (label {y[i]}) {per_example[i]:.3f}" for i in hardest
    ))  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    csv = args.out / "norms.csv"
    rows = np.column_stack([order, y, per_example])
    np.savetxt(csv, rows, delimiter=",", header="image,label,grad_norm", fmt=["%d", "%d", "%.10g"])
    print(f"per-example gradient norms: {csv}")
    return {
        "norms": per_example,
        "loop_norms": norms(loop),
        "max_rel_diff": max(differences.values()),
        "csv": csv,
        "grads": results,
    }


if __name__ == "__main__":
    main(sys.argv[1:])
