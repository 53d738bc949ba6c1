"""A new batch size never calls the C compiler (docs/backends.md: sizes are arguments).

A graph whose batch dim is symbolic is planned again for every batch size it is called
at, and the native backend builds each plan's kernels. Sizes that come from the batch
are arguments of the kernels, never part of their C, so the plans of later sizes must
find every kernel they call already built at the first size. Each test calls one
executable at a first batch size, notes how many compiler processes have run
(`toolchain.compiler_runs`), calls it at 19 more sizes and asserts that none ran; every
size's results are checked against the numpy backend's (bit for bit where native is
exact, within its stated bounds elsewhere). Batch size 1 is left out: an operand of one
element is a SCALAR operand there (kernels.py), a kernel of its own.

Each test starts from an empty cache directory and forgets the libraries this process
has loaded, so no kernel comes from another test's build.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import graphc as gc
from graphc import nn, optim
from graphc.backends.native import toolchain
from tests.edge_values import bits_differ
from tests.native_checks import bound_failures, needs_native, normwise

pytestmark = needs_native

FIRST = 2
# the first size's 19 successors: every size to 12, then past the sizes where a step's
# element count or a fold's result crosses a threshold (16 -> 17, rows of 8192 at 256
# -> 257 with 32 columns) and on to 300
SIZES = (*range(3, 13), 16, 17, 31, 64, 100, 101, 256, 257, 300)
# products, convolutions and softmax rows sum in another order than numpy's: their
# results, carried through a training step, within this normwise error (measured:
# a few 1e-7)
RTOL = 1e-5

Run = Callable[[int], None]  # runs the case at a batch size


@pytest.fixture(autouse=True)
def wanted(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[list[str]]:
    """The kernel sources the plans ask the toolchain for, in order (for the failure
    message), built into an empty directory, none of this process's libraries reused."""
    monkeypatch.setenv("GRAPHC_CACHE_DIR", str(tmp_path / "cache"))
    toolchain.reset(loaded=True)
    asked: list[str] = []
    build_units = toolchain.build_units

    def recording(sources: Sequence[str], *args: Any, **kwargs: Any) -> Any:
        asked.extend(sources)
        return build_units(sources, *args, **kwargs)

    monkeypatch.setattr(toolchain, "build_units", recording)
    yield asked
    toolchain.reset(loaded=True)  # later tests look in their own cache directory


def _described(source: str) -> str:
    """A kernel source by the functions it exports, with their parameters (BLOCK operands
    take z, y; STRIDED ones d; PITCHED ones o, w, p; SCALAR and FULL ones an address)."""
    found = re.findall(r"GC_EXPORT\s+\w+\s+(\w+\([^)]*\))", source)
    return "; ".join(" ".join(f.split()) for f in found) or source[:200]


def assert_no_compiler_after_the_first_size(run: Run, wanted: list[str]) -> None:
    """`run` at FIRST, then at each of SIZES: no compiler process after the first size.
    On failure, names the sizes that compiled and the kernel sources new at each."""
    run(FIRST)
    first = set(wanted)
    assert first, "the first plan builds no native kernel: nothing is tested"
    before = toolchain.compiler_runs()
    compiled = []
    for batch in SIZES:
        runs, asked = toolchain.compiler_runs(), len(wanted)
        run(batch)
        if toolchain.compiler_runs() != runs:
            new = dict.fromkeys(s for s in wanted[asked:] if s not in first)
            count = toolchain.compiler_runs() - runs
            compiled.append(f"batch {batch}: {count} compiler run(s) for")
            compiled += [f"    {_described(source)}" for source in new]
    message = f"compiled after batch {FIRST}:\n" + "\n".join(compiled)
    assert toolchain.compiler_runs() == before, message


def _check_close(got: Any, want: Any, what: str) -> None:
    why = normwise(RTOL)(np.atleast_1d(np.asarray(got)), np.atleast_1d(np.asarray(want)))
    assert why is None, f"{what}: {why}"


# -- an elementwise graph -----------------------------------------------------------


def _elementwise() -> gc.Graph:
    """tanh (libmvec's bound), an exact chain with a broadcast bias, and a row mean
    subtracted from its rows (a row kernel and a per-row operand)."""
    g = gc.Graph("elementwise")
    with g:
        x = gc.placeholder("x", shape=("B", 256), dtype="float32")
        b = gc.placeholder("b", shape=(256,), dtype="float32")
        gc.output(gc.tanh(x), name="t")
        gc.output((x * 3.0 - b) * x, name="exact")
        gc.output(x - gc.mean(x, axis=1, keepdims=True), name="centered")
    return g


def test_an_elementwise_graph_compiles_once(wanted: list[str]) -> None:
    g = _elementwise()
    exe = gc.compile(g, backend="native")
    reference = gc.compile(g, backend="numpy")
    rng = np.random.default_rng(0)
    b = rng.standard_normal(256).astype(np.float32)

    def run(batch: int) -> None:
        x = (4 * rng.standard_normal((batch, 256))).astype(np.float32)
        (t, exact, centered), (t0, exact0, centered0) = exe(x, b), reference(x, b)
        bad = bound_failures("tanh", x, t, t0)
        assert not bad.any(), f"batch {batch}: tanh beyond its bound at {np.flatnonzero(bad)}"
        for name, got, want in (("exact", exact, exact0), ("centered", centered, centered0)):
            assert bits_differ(got, want) is None, f"batch {batch}, {name}"

    assert_no_compiler_after_the_first_size(run, wanted)


# -- training steps -----------------------------------------------------------------


def _mlp() -> nn.Module:
    """The bench's MLP, 784-256-256-10 with ReLU (graphc/bench/mlp.py)."""
    return nn.Sequential(
        nn.Linear(784, 256, generator=0), nn.ReLU(),
        nn.Linear(256, 256, generator=0), nn.ReLU(),
        nn.Linear(256, 10, generator=0),
    )  # fmt: skip


def _lenet() -> nn.Module:
    """The bench's LeNet-5 (graphc/bench/cnn.py)."""
    return nn.Sequential(
        nn.Conv2d(1, 6, 5, padding=2, generator=0), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(6, 16, 5, generator=0), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(400, 120, generator=0), nn.ReLU(),
        nn.Linear(120, 84, generator=0), nn.ReLU(),
        nn.Linear(84, 10, generator=0),
    )  # fmt: skip


def _train_step(make: Callable[[], nn.Module], image: tuple[int, ...], backend: str) -> Any:
    model = make()
    x = np.zeros((FIRST, *image), np.float32)
    y = np.zeros(FIRST, np.int64)
    sgd = optim.SGD(model.parameters(), lr=0.01)
    return gc.compile_train_step(model, nn.CrossEntropyLoss(), sgd, (x, y), backend=backend)


def _classifier_run(make: Callable[[], nn.Module], image: tuple[int, ...]) -> Run:
    """One SGD step at each batch size from the model's first parameters (loaded again
    before each step), native against numpy: the loss and every parameter after it."""
    native = _train_step(make, image, "native")
    reference = _train_step(make, image, "numpy")
    rng = np.random.default_rng(1)

    def run(batch: int) -> None:
        x = rng.standard_normal((batch, *image)).astype(np.float32)
        y = rng.integers(0, 10, batch).astype(np.int64)
        losses = []
        for step in (native, reference):
            step.load_from_model()  # each size steps from the same parameters
            losses.append(step.step(x, y))
        _check_close(*losses, f"batch {batch}, loss")
        got, want = native.parameters(), reference.parameters()
        for name in want:
            _check_close(got[name], want[name], f"batch {batch}, {name} after the step")

    return run


@pytest.mark.slow  # builds a training step's kernels; the quick run keeps the two others
def test_the_mlp_training_step_compiles_once(wanted: list[str]) -> None:
    assert_no_compiler_after_the_first_size(_classifier_run(_mlp, (784,)), wanted)


@pytest.mark.slow  # long: the quick run leaves it to --rest
def test_the_cnn_training_step_compiles_once(wanted: list[str]) -> None:
    assert_no_compiler_after_the_first_size(_classifier_run(_lenet, (1, 28, 28)), wanted)


# -- a scan ------------------------------------------------------------------------

STEPS, INPUTS, HIDDEN = 5, 16, 32


def _rnn(xs: Any, h0: Any, w_ih: Any, w_hh: Any, b: Any) -> Any:
    """The bench's RNN loss (graphc/bench/rnn.py) as one gc.scan over tanh cells."""
    h, _ = gc.scan(lambda h, x: (gc.tanh(x @ w_ih + h @ w_hh + b), None), h0, xs)
    return gc.mean(h * h)


@pytest.mark.slow  # a scan's kernels and its gradient's; the quick run keeps the elementwise graph
def test_a_scan_and_its_gradient_compile_once(wanted: list[str]) -> None:
    specs = [
        gc.TensorSpec((STEPS, "B", INPUTS), np.float32),
        gc.TensorSpec(("B", HIDDEN), np.float32),
        gc.TensorSpec((INPUTS, HIDDEN), np.float32),
        gc.TensorSpec((HIDDEN, HIDDEN), np.float32),
        gc.TensorSpec((HIDDEN,), np.float32),
    ]
    g = gc.gradients(gc.trace(_rnn, *specs), wrt=["w_ih", "w_hh", "b"])
    exe = gc.compile(g, backend="native")
    reference = gc.compile(g, backend="numpy")
    rng = np.random.default_rng(2)
    weights = (
        (rng.standard_normal((INPUTS, HIDDEN)) / np.sqrt(INPUTS)).astype(np.float32),
        (rng.standard_normal((HIDDEN, HIDDEN)) / np.sqrt(HIDDEN)).astype(np.float32),
        (0.1 * rng.standard_normal(HIDDEN)).astype(np.float32),
    )

    def run(batch: int) -> None:
        xs = rng.standard_normal((STEPS, batch, INPUTS)).astype(np.float32)
        h0 = (0.1 * rng.standard_normal((batch, HIDDEN))).astype(np.float32)
        for k, (got, want) in enumerate(zip(exe(xs, h0, *weights), reference(xs, h0, *weights))):
            _check_close(got, want, f"batch {batch}, output {g.outputs[k].name}")

    assert_no_compiler_after_the_first_size(run, wanted)
