"""An MLP on scikit-learn's bundled 8x8 digits, trained eagerly and as one compiled step.

Both runs start from the same seed (the same split, initial weights and minibatch
order) and use Adam in float64; they end with the same parameters and the same
test accuracy. The eager run is the PyTorch-style loop; the static run is
`gc.compile_train_step`, whose parameters and Adam state live in the executable's
buffers and are updated in place. The training shows a progress bar on a terminal
(tqdm, when installed; elsewhere a plain line every 10 %) and the loss curves go to a
plot under --out (matplotlib, optional).

Needs scikit-learn for the data: pip install scikit-learn

    python examples/digits_mlp.py --epochs 10     # the plot in out/digits_mlp/
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

import graphc as gc
import graphc.eager as ge
from graphc import nn, optim

# every file an example writes goes under --out; by default out/<example>/ at the
# repository's root, a folder git ignores
OUT = Path(__file__).resolve().parents[1] / "out" / "digits_mlp"
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


def load_digits_or_exit() -> tuple[np.ndarray, np.ndarray]:
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        print(
            "digits_mlp.py needs scikit-learn for its bundled digits data: "
            "pip install scikit-learn",
            file=sys.stderr,
        )
        raise SystemExit(2) from None
    digits = load_digits()
    return digits.data / 16.0, digits.target.astype(np.int64)


def split(x: np.ndarray, y: np.ndarray, test_fraction: float, seed: int) -> tuple[np.ndarray, ...]:
    order = np.random.default_rng(seed).permutation(len(x))
    n_test = int(round(len(x) * test_fraction))
    test, train = order[:n_test], order[n_test:]
    return x[train], y[train], x[test], y[test]


def batches(n: int, batch_size: int, epochs: int, seed: int) -> Iterator[np.ndarray]:
    """Row indices of each minibatch: `epochs` reshuffled passes (full batches only)."""
    rng = np.random.default_rng(seed + 1)
    for _ in range(epochs):
        order = rng.permutation(n)
        for start in range(0, n - batch_size + 1, batch_size):
            yield order[start : start + batch_size]


def build(hidden: int, seed: int, lr: float) -> tuple[nn.Module, optim.Optimizer]:
    model = nn.Sequential(
        nn.Linear(64, hidden, dtype="float64", generator=seed),
        nn.ReLU(),
        nn.Linear(hidden, 10, dtype="float64", generator=seed + 1),
    )
    return model, optim.Adam(model.parameters(), lr=lr)


def progress(total: int, description: str, enabled: bool) -> Any:
    """A progress bar with `update(n)`, `set_postfix_str(text)` and `close()`: tqdm's
    when stderr is a terminal (redrawn in place there, in a log it would be one long
    line), plain lines otherwise."""
    if enabled and sys.stderr.isatty():
        try:
            from tqdm import tqdm

            return tqdm(total=total, desc=description, file=sys.stderr, leave=False)
        except ImportError:
            pass
    return PlainProgress(total, description, enabled)


class PlainProgress:
    """Without tqdm or a terminal: a line every 10 % (or nothing when disabled)."""

    def __init__(self, total: int, description: str, enabled: bool) -> None:
        self.total, self.description, self.enabled = total, description, enabled
        self.done, self.postfix, self.next_report = 0, "", 0.1

    def update(self, n: int = 1) -> None:
        self.done += n
        if self.enabled and self.done >= self.next_report * self.total:
            self.next_report += 0.1
            print(f"{self.description}: {self.done}/{self.total} {self.postfix}", file=sys.stderr)

    def set_postfix_str(self, text: str) -> None:
        self.postfix = text

    def close(self) -> None:
        pass


def train(
    mode: str, step: Callable[[np.ndarray, np.ndarray], float], data: tuple, args: Any
) -> tuple[list[float], float]:
    x_train, y_train = data[0], data[1]
    total = (len(x_train) // args.batch_size) * args.epochs
    bar = progress(total, f"{mode:6}", not args.no_progress)
    losses: list[float] = []
    seconds = 0.0
    for index in batches(len(x_train), args.batch_size, args.epochs, args.seed):
        xb, yb = x_train[index], y_train[index]
        start = time.perf_counter()
        losses.append(step(xb, yb))
        seconds += time.perf_counter() - start
        bar.update(1)
        if len(losses) % 10 == 0:
            bar.set_postfix_str(f"loss {losses[-1]:.4f}")
    bar.close()
    return losses, seconds


def eager_step(model: nn.Module, opt: optim.Optimizer) -> Callable[..., float]:
    loss_fn = nn.CrossEntropyLoss()

    def step(xb: np.ndarray, yb: np.ndarray) -> float:
        opt.zero_grad()
        loss = loss_fn(model(ge.from_numpy(xb)), ge.from_numpy(yb))
        loss.backward()
        opt.step()
        return loss.item()

    return step


def accuracy(model: nn.Module, x: np.ndarray, y: np.ndarray) -> float:
    with ge.no_grad():
        logits = model(ge.from_numpy(x)).numpy()
    return float(np.mean(logits.argmax(axis=1) == y))


def plot_losses(curves: dict[str, list[float]], path: Path) -> Path | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("note: matplotlib is not installed; no loss plot (pip install matplotlib)")
        return None
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for (mode, losses), style in zip(curves.items(), ["-", "--"]):
        ax.plot(losses, style, label=mode, linewidth=1.2)
    ax.set(xlabel="step", ylabel="cross-entropy loss", yscale="log", title="digits MLP")
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--epochs",
        type=int,
        default=10,
        help="passes over the training images (default: %(default)s)",
    )
    parser.add_argument(
        "--hidden", type=int, default=64, help="hidden units (default: %(default)s)"
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
    parser.add_argument("--out", type=Path, default=OUT, help="for the plot (out/digits_mlp/)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--no-plot", action="store_true", help="write no loss plot")
    args = parser.parse_args(argv)

    x, y = load_digits_or_exit()
    data = split(x, y, 0.2, args.seed)
    x_train, y_train, x_test, y_test = data
    print(
        f"digits: {len(x_train)} train / {len(x_test)} test images, MLP 64-{args.hidden}-10, "
        f"Adam lr={args.lr:g}, {args.epochs} epochs of batch {args.batch_size}"
    )

    results: dict[str, Any] = {}
    for mode in ("eager", "static"):
        model, opt = build(args.hidden, args.seed, args.lr)
        if mode == "eager":
            step = eager_step(model, opt)
        else:
            example = (x_train[: args.batch_size], y_train[: args.batch_size])
            compiled = gc.compile_train_step(model, nn.CrossEntropyLoss(), opt, example)

            def step(xb: np.ndarray, yb: np.ndarray, compiled: Any = compiled) -> float:
                return float(compiled(xb, yb))

        losses, seconds = train(mode, step, data, args)
        if mode == "static":
            compiled.sync_to_model()  # the parameters lived in the executable until now
        results[mode] = {
            "losses": losses,
            "ms_per_step": 1e3 * seconds / max(1, len(losses)),
            "train_accuracy": accuracy(model, x_train, y_train),
            "test_accuracy": accuracy(model, x_test, y_test),
            "state": model.state_dict(),
        }

    print(f"{'':8}{'final loss':>12}{'train acc':>11}{'test acc':>10}{'ms/step':>10}")
    for mode in ("eager", "static"):
        r = results[mode]
        print(
            f"{mode:8}{r['losses'][-1]:>12.5f}{r['train_accuracy']:>11.2%}"
            f"{r['test_accuracy']:>10.2%}{r['ms_per_step']:>10.3f}"
        )
    a, b = results["eager"]["state"], results["static"]["state"]
    difference = max(
        float(np.max(np.abs(a[k] - b[k]) / np.maximum(np.abs(a[k]), 1e-12))) for k in a
    )
    print(f"largest relative difference between the modes' parameters: {difference:.2e}")
    print("(the static ms/step includes planning on the first call)")
    results["max_rel_diff"] = difference
    if not args.no_plot:
        curves = {mode: results[mode]["losses"] for mode in ("eager", "static")}
        results["plot"] = plot_losses(curves, args.out / "digits_loss.png")
        if results["plot"] is not None:
            print(f"loss curves: {results['plot']}")
    stop_unless_modes_agree(difference)
    return results


if __name__ == "__main__":
    main(sys.argv[1:])
