"""The tutorials' linear regression, y = 2x + 3 plus noise, trained eagerly and statically.

Both runs start from the same seed: the same data, the same initial nn.Linear(1, 1),
the same minibatches in the same order, SGD with the same settings. The eager run
is the PyTorch-style loop (zero_grad, forward, backward, step); the static run
compiles forward, backward and update into one graph with `gc.compile_train_step`.
Both print their parameters, which agree to rounding.

    python examples/linear_regression.py --steps 300   # losses in out/linear_regression/
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

import graphc as gc
import graphc.eager as ge
from graphc import nn, optim

# every file an example writes goes under --out; by default out/<example>/ at the
# repository's root, a folder git ignores
OUT = Path(__file__).resolve().parents[1] / "out" / "linear_regression"
# the modes' parameters agree to rounding; more than this is a bug (tests/examples)
AGREE = 1e-5


def stop_unless_modes_agree(difference: float) -> None:
    """Both modes take the same steps from the same start, so their parameters may
    differ by rounding only; past that, say so and exit non-zero, not just print it."""
    if difference > AGREE:
        raise SystemExit(
            f"eager and static training disagree: their parameters differ by {difference:.1e}"
            f" (relative), more than rounding ({AGREE:g}). This is a graphc bug: please"
            " report it. GRAPHC_BACKEND=numpy runs the static step on the numpy backend alone."
        )


def make_data(n: int, noise: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1.0, 1.0, (n, 1))
    y = 2.0 * x + 3.0 + noise * rng.standard_normal((n, 1))
    return x, y


def minibatches(
    x: np.ndarray, y: np.ndarray, batch_size: int, steps: int, seed: int
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """`steps` batches from reshuffled passes over the data (the last of a pass may be short)."""
    rng = np.random.default_rng(seed)
    step = 0
    while True:
        order = rng.permutation(len(x))
        for start in range(0, len(x), batch_size):
            if step == steps:
                return
            index = order[start : start + batch_size]
            yield x[index], y[index]
            step += 1


def build(seed: int, lr: float, momentum: float) -> tuple[nn.Module, optim.Optimizer]:
    model = nn.Linear(1, 1, dtype="float64", generator=seed)
    return model, optim.SGD(model.parameters(), lr=lr, momentum=momentum)


def train_eager(model: nn.Module, opt: optim.Optimizer, batches: Any) -> tuple[list, float]:
    """The PyTorch-style loop; returns the losses and the seconds spent in it."""
    loss_fn = nn.MSELoss()
    losses = []
    start = time.perf_counter()
    for xb, yb in batches:
        opt.zero_grad()
        loss = loss_fn(model(ge.from_numpy(xb)), ge.from_numpy(yb))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, time.perf_counter() - start


def train_static(
    model: nn.Module, opt: optim.Optimizer, batches: Any, example: Any
) -> tuple[list, float]:
    """One compiled step per batch; returns the losses and the seconds spent stepping."""
    step = gc.compile_train_step(model, nn.MSELoss(), opt, example)
    step(*example)  # plan for this batch shape now, outside the timed loop...
    step.load_from_model()  # ...and undo that step: parameters and state from the model
    losses = []
    start = time.perf_counter()
    for xb, yb in batches:
        losses.append(float(step(xb, yb)))
    seconds = time.perf_counter() - start
    step.sync_to_model()  # the parameters lived in the executable until now
    return losses, seconds


def parameters(model: nn.Module) -> dict[str, float]:
    return {name: float(p.detach().numpy().ravel()[0]) for name, p in model.named_parameters()}


def write_losses(results: dict[str, Any], path: Path) -> Path:
    """Both modes' loss at every step, as CSV columns `eager,static`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    curves = np.column_stack([results[mode]["losses"] for mode in ("eager", "static")])
    np.savetxt(path, curves, delimiter=",", header="eager,static", comments="")
    return path


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--samples",
        type=int,
        default=200,
        help="points of y = 2x + 3 + noise (default: %(default)s)",
    )
    parser.add_argument("--steps", type=int, default=300, help="SGD steps (default: %(default)s)")
    parser.add_argument(
        "--batch-size", type=int, default=32, help="points per step (default: %(default)s)"
    )
    parser.add_argument(
        "--lr", type=float, default=0.1, help="SGD's learning rate (default: %(default)s)"
    )
    parser.add_argument(
        "--momentum", type=float, default=0.5, help="SGD's momentum (default: %(default)s)"
    )
    parser.add_argument(
        "--noise",
        type=float,
        default=0.1,
        help="standard deviation of the noise (default: %(default)s)",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of the data, initial weights and batch order (default: %(default)s)",
    )
    parser.add_argument(
        "--out", type=Path, default=OUT, help="for losses.csv (out/linear_regression/)"
    )
    args = parser.parse_args(argv)

    x, y = make_data(args.samples, args.noise, args.seed)

    def batches() -> Iterator[tuple[np.ndarray, np.ndarray]]:
        return minibatches(x, y, args.batch_size, args.steps, args.seed)

    results: dict[str, Any] = {}
    for mode in ("eager", "static"):
        model, opt = build(args.seed, args.lr, args.momentum)
        if mode == "eager":
            losses, seconds = train_eager(model, opt, batches())
        else:
            losses, seconds = train_static(model, opt, batches(), next(batches()))
        results[mode] = {"params": parameters(model), "losses": losses, "seconds": seconds}

    print(
        f"y = 2x + 3 + noise: {args.samples} samples, {args.steps} SGD steps of {args.batch_size}"
    )
    print(f"{'':8}{'weight':>12}{'bias':>12}{'last loss':>12}{'ms/step':>10}")
    for mode in ("eager", "static"):
        r = results[mode]
        ms = 1e3 * r["seconds"] / max(1, args.steps)
        weight, bias = r["params"]["weight"], r["params"]["bias"]
        print(f"{mode:8}{weight:>12.6f}{bias:>12.6f}{r['losses'][-1]:>12.6f}{ms:>10.3f}")
    a, b = results["eager"]["params"], results["static"]["params"]
    difference = max(abs(a[k] - b[k]) / max(abs(a[k]), 1e-30) for k in a)
    print(f"largest relative difference between the modes: {difference:.2e}")
    results["max_rel_diff"] = difference
    results["losses_csv"] = write_losses(results, args.out / "losses.csv")
    print(f"losses per step, both modes: {results['losses_csv']}")
    stop_unless_modes_agree(difference)
    return results


if __name__ == "__main__":
    main(sys.argv[1:])
