"""One SGD training step of LeNet-5 on 1x28x28 images (issue 15), float32.

The network is the PyTorch tutorials' LeNet: conv 5x5 (1 -> 6, padding 2), ReLU, max
pool 2; conv 5x5 (6 -> 16), ReLU, max pool 2; flatten (400); linear 120, ReLU, linear
84, ReLU, linear 10; softmax cross-entropy, SGD with lr 0.01. Every mode starts from
the same parameters (`initial_parameters`, torch's layout and `nn.Sequential` names),
returns the loss of the step and updates its own copy of the parameters in place, as
in the `mlp` workload, whose structure this follows: graphc eager runs `graphc.nn`
with `backward()` and `SGD.step()`; graphc's O0 and O2 modes compile the whole step with
`gc.compile_train_step` (parameters are executable state; numpy backend, and O2 on the
native one too); PyTorch eager runs the same
`torch.nn.Sequential` with its multi-tensor (``foreach``) SGD; torch-compile wraps the
model and loss in `torch.compile` (forward, and through AOTAutograd the backward, are
compiled; the foreach update stays eager: `.backward()` and `step()` are graph breaks
to dynamo); `jax.jit` compiles a hand-written step (`lax.conv_general_dilated`,
`lax.reduce_window`) with its parameters donated.

There is no hand-written numpy step: a convolution's forward, its two gradients and
max pooling's gradient by im2col and BLAS are what graphc's own conv and pool kernels
are (graphc/ops/conv_kernels.py, maxpool.py), so a numpy baseline would time a second
copy of the same code, and a naive one would be an unfair straw man.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from graphc import nn
from graphc.bench import peers, torch_compile
from graphc.bench.core import (
    QUICK_SKIP_DEFAULT_COLD,
    QUICK_SKIP_JAX,
    TORCH_COMPILE,
    Case,
    Prepared,
    Workload,
    as_arrays,
)
from graphc.bench.first_result import classifier_args, jax_first_call
from graphc.bench.modes import Classifier, not_applicable

CLASSES = 10
LR = 0.01
# name prefix -> (weight shape, fan in): torch's nn.Sequential indices of the layers below
LAYERS = {
    "0": ((6, 1, 5, 5), 25),
    "3": ((16, 6, 5, 5), 150),
    "7": ((120, 400), 400),
    "9": ((84, 120), 120),
    "11": ((CLASSES, 84), 84),
}
NAMES = tuple(f"{k}.{p}" for k in LAYERS for p in ("weight", "bias"))
FULL_CASE, QUICK_CASE = "batch 64", "batch 8"  # goals name FULL_CASE


def initial_parameters(seed: int = 0) -> dict[str, np.ndarray]:
    """He-scaled weights and small biases, float32, the same for every mode."""
    rng = np.random.default_rng(seed)
    params = {}
    for prefix, (shape, fan_in) in LAYERS.items():
        weight = rng.standard_normal(shape) * np.sqrt(2 / fan_in)
        params[f"{prefix}.weight"] = weight.astype(np.float32)
        params[f"{prefix}.bias"] = (0.01 * rng.standard_normal(shape[0])).astype(np.float32)
    return params


def model() -> nn.Sequential:
    """LeNet-5 in graphc.nn, holding `initial_parameters()`."""
    lenet = nn.Sequential(
        nn.Conv2d(1, 6, 5, padding=2, generator=0), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(6, 16, 5, generator=0), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(400, 120, generator=0), nn.ReLU(),
        nn.Linear(120, 84, generator=0), nn.ReLU(),
        nn.Linear(84, CLASSES, generator=0),
    )  # fmt: skip
    lenet.load_state_dict(initial_parameters())
    return lenet


def torch_model(torch: Any) -> Any:
    """The same LeNet-5 as a torch.nn.Sequential, holding `initial_parameters()`."""
    tnn = torch.nn
    lenet = tnn.Sequential(
        tnn.Conv2d(1, 6, 5, padding=2), tnn.ReLU(), tnn.MaxPool2d(2),
        tnn.Conv2d(6, 16, 5), tnn.ReLU(), tnn.MaxPool2d(2),
        tnn.Flatten(),
        tnn.Linear(400, 120), tnn.ReLU(),
        tnn.Linear(120, 84), tnn.ReLU(),
        tnn.Linear(84, CLASSES),
    )  # fmt: skip
    lenet.load_state_dict({k: torch.from_numpy(v) for k, v in initial_parameters().items()})
    return lenet


def make_inputs(params: dict[str, Any]) -> dict[str, Any]:
    """A batch of images (N, 1, 28, 28) and labels (N,) int64."""
    rng = np.random.default_rng(2)
    batch = params["batch"]
    x = rng.standard_normal((batch, 1, 28, 28)).astype(np.float32)
    y = rng.integers(0, CLASSES, batch).astype(np.int64)
    return {"args": (x, y)}


# -- graphc ---------------------------------------------------------------------------


GRAPHC = Classifier(model, LR, NAMES)  # graphc's eager and compiled modes
train_step = GRAPHC.train_step


# -- peers ----------------------------------------------------------------------------


def _torch_step(compiled: bool) -> Any:
    def build(params: dict[str, Any], inputs: dict[str, Any]) -> Prepared:
        torch = peers.torch()
        x, y = (torch.from_numpy(a) for a in inputs["args"])
        lenet = torch_model(torch)
        optimizer = torch.optim.SGD(lenet.parameters(), lr=LR, foreach=True)
        loss_fn = torch.nn.CrossEntropyLoss()

        def loss_of(x: Any, y: Any) -> Any:
            return loss_fn(lenet(x), y)

        forward = torch_compile.compiled(torch, loss_of) if compiled else loss_of

        def call() -> Any:
            optimizer.zero_grad(set_to_none=True)
            loss = forward(x, y)
            loss.backward()
            optimizer.step()
            return loss

        named = dict(lenet.named_parameters())

        def arrays(loss: Any) -> list[np.ndarray]:
            return as_arrays([loss, *(named[n] for n in NAMES)])

        if not compiled:
            return Prepared(call, arrays, None)
        initial = {k: torch.from_numpy(v) for k, v in initial_parameters().items()}
        reset = lambda: lenet.load_state_dict(initial)  # noqa: E731 - in place: step one again
        return torch_compile.prepared(call, arrays, torch_compile.TRAIN_NOTE, reset)

    return build


def jax_train_step(jax: Any) -> Any:
    """The jitted step (weights, x, y) -> (loss, new weights), weights donated."""
    import jax.numpy as jnp
    from jax import lax

    def conv(x: Any, w: Any, b: Any, pad: int) -> Any:
        y = lax.conv_general_dilated(
            x, w, (1, 1), [(pad, pad), (pad, pad)], dimension_numbers=("NCHW", "OIHW", "NCHW")
        )
        return y + b[None, :, None, None]

    def pool(x: Any) -> Any:
        return lax.reduce_window(x, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")

    def loss(weights: tuple, x: Any, y: Any) -> Any:
        c1, d1, c2, d2, w1, b1, w2, b2, w3, b3 = weights
        h = pool(jax.nn.relu(conv(x, c1, d1, 2)))
        h = pool(jax.nn.relu(conv(h, c2, d2, 0)))
        h = h.reshape(h.shape[0], -1)
        h = jax.nn.relu(h @ w1.T + b1)
        h = jax.nn.relu(h @ w2.T + b2)
        logp = jax.nn.log_softmax(h @ w3.T + b3, axis=1)
        return -jnp.take_along_axis(logp, y[:, None], axis=1).mean()

    def step(weights: tuple, x: Any, y: Any) -> Any:
        value, grads = jax.value_and_grad(loss)(weights, x, y)
        return value, tuple(w - LR * g for w, g in zip(weights, grads))

    return jax.jit(step, donate_argnums=0)


def _jax(params: dict[str, Any], inputs: dict[str, Any]) -> Prepared:
    jax = peers.jax()
    import jax.numpy as jnp

    x = jnp.asarray(inputs["args"][0])
    y = jnp.asarray(inputs["args"][1].astype(np.int32))
    initial = initial_parameters()
    state = [tuple(jnp.asarray(initial[n]) for n in NAMES)]
    step = jax_train_step(jax).lower(state[0], x, y).compile()  # compiled here, not timed

    def call() -> Any:
        value, state[0] = jax.block_until_ready(step(state[0], x, y))
        return value

    def arrays(value: Any) -> list[np.ndarray]:
        return [np.asarray(value), *map(np.asarray, state[0])]

    return Prepared(call, arrays, None, note="hand-written, parameters donated")


WORKLOAD = Workload(
    name="cnn",
    description=(
        "LeNet-5 training step on 1x28x28 (conv-ReLU-maxpool x2, 3 linear, softmax CE, "
        "SGD lr 0.01), float32"
    ),
    unit="step",
    cases=[
        Case(
            QUICK_CASE,
            {"batch": 8},
            full=False,
            quick_skip_modes={**torch_compile.QUICK_SKIP, **QUICK_SKIP_JAX},
            quick_skip_cold=QUICK_SKIP_DEFAULT_COLD,
        ),
        Case(FULL_CASE, {"batch": 64}, quick=False),
    ],
    make_inputs=make_inputs,
    builders={
        "graphc-eager": GRAPHC.eager,
        **GRAPHC.static_modes(),
        "numpy": not_applicable("not written: it would be graphc's own im2col kernels again"),
        "torch": _torch_step(compiled=False),
        TORCH_COMPILE: _torch_step(compiled=True),
        "jax": _jax,
    },
    reference="torch",
    first_result=GRAPHC.first_results(
        jax_first_call(
            lambda jax, params: jax_train_step(jax), classifier_args(initial_parameters, NAMES)
        )
    ),
)
