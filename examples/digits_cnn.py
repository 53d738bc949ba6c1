"""A LeNet-style CNN on scikit-learn's 8x8 digits, trained eagerly and as one compiled step.

conv 3x3 (8) - ReLU - max pool 2 - conv 3x3 (16) - ReLU - max pool 2 - linear 64-10,
Adam in float64. Both runs start from the same seed (split, initial weights, minibatch
order) and end with the same parameters and test accuracy, as in digits_mlp.py, whose
data, batching and progress helpers this example shares. Pictures of the model's
forward graph, its gradient graph and the optimized (fused) gradient graph are drawn
when graphviz's `dot` is installed.

Needs scikit-learn for the data: pip install scikit-learn

    python examples/digits_cnn.py --epochs 15     # pictures in out/digits_cnn/
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the shared digits helpers

from digits_mlp import (  # noqa: E402
    eager_step,
    load_digits_or_exit,
    split,
    stop_unless_modes_agree,
    train,
)

import graphc as gc  # noqa: E402
import graphc.eager as ge  # noqa: E402
from graphc import nn, optim  # noqa: E402

# every file an example writes goes under --out; by default out/<example>/ at the
# repository's root, a folder git ignores
OUT = Path(__file__).resolve().parents[1] / "out" / "digits_cnn"


def build(seed: int, lr: float) -> tuple[nn.Module, optim.Optimizer]:
    f64 = {"dtype": "float64"}
    model = nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1, generator=seed, **f64),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1, generator=seed + 1, **f64),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(32 * 2 * 2, 10, generator=seed + 2, **f64),
    )
    return model, optim.Adam(model.parameters(), lr=lr)


def accuracy(model: nn.Module, x: np.ndarray, y: np.ndarray) -> float:
    with ge.no_grad():
        logits = model(ge.from_numpy(x)).numpy()
    return float(np.mean(logits.argmax(axis=1) == y))


def render_pictures(model: nn.Module, example: np.ndarray, folder: Path) -> list[Path]:
    """The traced forward graph, its joint gradient graph, and that graph optimized at
    O2 and fused by the numpy backend, as gc.compile plans it (conv epilogues and fused
    elementwise groups drawn as clusters), as SVG."""
    if not gc.viz.have_dot():
        print("pictures: skipped (graphviz's `dot` is not installed: apt-get install graphviz)")
        return []
    forward = gc.trace(model, gc.TensorSpec(("B", *example.shape[1:]), example.dtype))
    weights = [p.name for p in forward.inputs[1:]]
    loss = gc.trace(
        lambda x: gc.sum(model(x) ** 2), gc.TensorSpec(("B", *example.shape[1:]), example.dtype)
    )
    joint = gc.gradients(loss, wrt=[p.name for p in loss.inputs[1:]])
    pictures = {
        "cnn_forward": forward,
        "cnn_gradients": joint,
        "cnn_gradients_O2": gc.fuse(gc.optimize(joint, 2), backend="numpy"),
    }
    written = [gc.viz.render(g, folder / f"{name}.svg") for name, g in pictures.items()]
    print(f"pictures ({len(weights)} weights):", ", ".join(str(p) for p in written))
    return written


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--epochs",
        type=int,
        default=15,
        help="passes over the training images (default: %(default)s)",
    )
    parser.add_argument(
        "--batch-size", type=int, default=32, help="images per step (default: %(default)s)"
    )
    parser.add_argument(
        "--lr", type=float, default=3e-3, help="Adam's learning rate (default: %(default)s)"
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of the split, initial weights and batch order (default: %(default)s)",
    )
    parser.add_argument("--out", type=Path, default=OUT, help="for pictures (out/digits_cnn/)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--no-render", action="store_true", help="draw no pictures")
    args = parser.parse_args(argv)

    x, y = load_digits_or_exit()
    x = x.reshape(-1, 1, 8, 8)  # images, one channel
    data = split(x, y, 0.2, args.seed)
    x_train, y_train, x_test, y_test = data
    print(
        f"digits: {len(x_train)} train / {len(x_test)} test images, LeNet-style CNN, "
        f"Adam lr={args.lr:g}, {args.epochs} epochs of batch {args.batch_size}"
    )
    results: dict[str, Any] = {}
    for mode in ("eager", "static"):
        model, opt = build(args.seed, args.lr)
        if mode == "eager":
            step = eager_step(model, opt)
        else:
            example = (x_train[: args.batch_size], y_train[: args.batch_size])
            compiled = gc.compile_train_step(model, nn.CrossEntropyLoss(), opt, example)

            def step(xb: np.ndarray, yb: np.ndarray, compiled: Any = compiled) -> float:
                return float(compiled(xb, yb))

        losses, seconds = train(mode, step, data, args)
        if mode == "static":
            compiled.sync_to_model()
        results[mode] = {
            "losses": losses,
            "ms_per_step": 1e3 * seconds / max(1, len(losses)),
            "test_accuracy": accuracy(model, x_test, y_test),
            "state": model.state_dict(),
            "model": model,
        }
    print(f"{'':8}{'final loss':>12}{'test acc':>10}{'ms/step':>10}")
    for mode in ("eager", "static"):
        r = results[mode]
        print(
            f"{mode:8}{r['losses'][-1]:>12.5f}{r['test_accuracy']:>10.2%}{r['ms_per_step']:>10.3f}"
        )
    a, b = results["eager"]["state"], results["static"]["state"]
    difference = max(
        float(np.max(np.abs(a[k] - b[k]) / np.maximum(np.abs(a[k]), 1e-12))) for k in a
    )
    print(f"largest relative difference between the modes' parameters: {difference:.2e}")
    results["max_rel_diff"] = difference
    if not args.no_render:
        results["files"] = render_pictures(results["static"]["model"], x_test[:4], args.out)
    stop_unless_modes_agree(difference)
    return results


if __name__ == "__main__":
    main(sys.argv[1:])
