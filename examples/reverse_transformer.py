"""A small transformer learns to reverse digit strings, trained eagerly and compiled.

Token and position embeddings, two encoder layers (nn.TransformerEncoderLayer, d=32,
4 heads), a linear read-out per position; the target is the input reversed. Both runs
start from the same seed and take the same minibatches; they end with the same
parameters and accuracy. Adam in float64.

    python examples/reverse_transformer.py --steps 400   # losses in out/reverse_transformer/
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

import graphc as gc
import graphc.eager as ge
from graphc import nn, optim
from graphc.nn import functional as F
from graphc.nn import init

# every file an example writes goes under --out; by default out/<example>/ at the
# repository's root, a folder git ignores
OUT = Path(__file__).resolve().parents[1] / "out" / "reverse_transformer"
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


class Reverser(nn.Module):
    def __init__(self, length: int, d: int = 32, layers: int = 2, seed: int = 0) -> None:
        super().__init__()
        f64 = {"dtype": "float64"}
        rng = np.random.default_rng(seed)
        self.tokens = nn.Embedding(10, d, **f64)
        init.normal_(self.tokens.weight, 0.0, 0.5, generator=rng)
        self.positions = ge.zeros(length, d, dtype="float64", requires_grad=True)
        init.normal_(self.positions, 0.0, 0.5, generator=rng)
        layer = nn.TransformerEncoderLayer(
            d, 4, 2 * d, dropout=0.0, batch_first=True, generator=rng, **f64
        )
        self.encoder = nn.TransformerEncoder(layer, layers)
        self.read_out = nn.Linear(d, 10, generator=rng, **f64)

    def forward(self, digits: Any) -> Any:
        return self.read_out(self.encoder(self.tokens(digits) + self.positions))


def loss_fn(logits: Any, target: Any) -> Any:
    """Mean cross-entropy over every position: the log-probability of each target
    digit, picked along the class axis."""
    picked = gc.take_along_axis(F.log_softmax(logits, dim=-1), target[..., None], axis=-1)
    return -gc.mean(picked)


def batches(length: int, size: int, steps: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 10, size=(size, length)) for _ in range(steps)]


def accuracy(model: nn.Module, digits: np.ndarray) -> tuple[float, float]:
    """Per-digit and whole-string accuracy of the reversal."""
    with ge.no_grad():
        guess = model(ge.from_numpy(digits)).numpy().argmax(axis=-1)
    right = guess == digits[:, ::-1]
    return float(right.mean()), float(right.all(axis=1).mean())


def write_losses(results: dict[str, Any], path: Path) -> Path:
    """Both modes' loss at every step, as CSV columns `eager,static`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    curves = np.column_stack([results[mode]["losses"] for mode in ("eager", "static")])
    np.savetxt(path, curves, delimiter=",", header="eager,static", comments="")
    return path


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--length", type=int, default=6, help="digits per string (default: %(default)s)"
    )
    parser.add_argument(
        "--steps", type=int, default=400, help="training steps (default: %(default)s)"
    )
    parser.add_argument(
        "--batch-size", type=int, default=64, help="strings per step (default: %(default)s)"
    )
    parser.add_argument(
        "--lr", type=float, default=3e-3, help="Adam's learning rate (default: %(default)s)"
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of the data and the initial weights (default: %(default)s)",
    )
    parser.add_argument(
        "--out", type=Path, default=OUT, help="for losses.csv (out/reverse_transformer/)"
    )
    args = parser.parse_args(argv)

    data = batches(args.length, args.batch_size, args.steps, args.seed)
    test = np.random.default_rng(args.seed + 1).integers(0, 10, size=(500, args.length))
    print(
        f"reverse {args.length}-digit strings: 2-layer transformer (d=32, 4 heads), "
        f"Adam lr={args.lr:g}, {args.steps} steps of batch {args.batch_size}"
    )
    results: dict[str, Any] = {}
    for mode in ("eager", "static"):
        model = Reverser(args.length, seed=args.seed)
        opt = optim.Adam(model.parameters(), lr=args.lr)
        if mode == "static":
            compiled = gc.compile_train_step(model, loss_fn, opt, (data[0], data[0][:, ::-1]))
        losses, start = [], time.perf_counter()
        for digits in data:
            target = np.ascontiguousarray(digits[:, ::-1])
            if mode == "static":
                losses.append(float(compiled(digits, target)))
                continue
            opt.zero_grad()
            loss = loss_fn(model(ge.from_numpy(digits)), ge.from_numpy(target))
            loss.backward()
            opt.step()
            losses.append(loss.item())
        seconds = time.perf_counter() - start
        if mode == "static":
            compiled.sync_to_model()
        digit_acc, string_acc = accuracy(model, test)
        results[mode] = {
            "losses": losses, "digit_accuracy": digit_acc, "string_accuracy": string_acc,
            "ms_per_step": 1e3 * seconds / args.steps, "state": model.state_dict(),
        }  # fmt: skip
    print(f"{'':8}{'final loss':>12}{'digits':>9}{'strings':>9}{'ms/step':>10}")
    for mode in ("eager", "static"):
        r = results[mode]
        print(
            f"{mode:8}{r['losses'][-1]:>12.5f}{r['digit_accuracy']:>9.2%}"
            f"{r['string_accuracy']:>9.2%}{r['ms_per_step']:>10.3f}"
        )
    # measured against each tensor's largest magnitude: the key projection's bias gets a
    # gradient that is zero but for rounding (softmax ignores a shift of every score), so
    # per element it is noise that Adam scales up, in both modes alike
    a, b = results["eager"]["state"], results["static"]["state"]
    difference = max(float(np.max(np.abs(a[k] - b[k])) / np.max(np.abs(a[k]))) for k in a)
    print(f"largest difference between the modes' parameters: {difference:.2e} (of each max)")
    results["max_rel_diff"] = difference
    results["losses_csv"] = write_losses(results, args.out / "losses.csv")
    print(f"losses per step, both modes: {results['losses_csv']}")
    stop_unless_modes_agree(difference)
    return results


if __name__ == "__main__":
    main(sys.argv[1:])
