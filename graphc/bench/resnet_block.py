"""Inference of one ResNet basic block (issue 15), float32, batch norm in eval mode.

y = relu(bn2(conv2(relu(bn1(conv1(x))))) + x), both convolutions 3x3, stride 1,
padding 1, no bias, 64 -> 64 channels, on (32, 64, 28, 28): ResNet-18's first stage at
a smaller image. The batch norms use running statistics (`eval()`), set to values away
from (0, 1) so that they matter. Every mode computes y from the same weights
(`initial_state`, torch's `state_dict` names):

- graphc eager: the `graphc.nn` block under `no_grad`;
- graphc-O0 / O2 (and fast_math where it changes the plan) on the numpy backend, O2 (and
  fast_math) on the native one: `gc.trace` of the same block, `gc.compile`, fed the
  weights as arrays (the trace's lifted placeholders, in order);
- PyTorch eager (`no_grad`) and torch-compile: `torch.nn` modules of the same names;
- `jax.jit` of a hand-written block (`lax.conv_general_dilated`, batch norm written out),
  the weights as arguments, nothing donated (inference: every input lives on).

There is no hand-written numpy mode, for the `cnn` workload's reason: graphc's conv2d
kernel is already im2col and one BLAS call per image (graphc/ops/conv_kernels.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np

import graphc as gc
import graphc.eager as ge
from graphc import nn
from graphc.bench import peers, torch_compile
from graphc.bench.core import (
    QUICK_SKIP_DEFAULT_COLD,
    QUICK_SKIP_JAX,
    TORCH_COMPILE,
    Case,
    Prepared,
    Workload,
)
from graphc.bench.first_result import graph_starts, jax_first_call
from graphc.bench.modes import graph_modes, not_applicable, plain

FULL = {"batch": 32, "channels": 64, "size": 28}
QUICK = {"batch": 4, "channels": 16, "size": 14}
FULL_CASE, QUICK_CASE = "32x64x28x28", "4x16x14x14"  # goals name FULL_CASE
EPS = 1e-5


class BasicBlock(nn.Module):
    """conv3x3-BN-ReLU-conv3x3-BN, plus the input, ReLU (graphc.nn, torch's names)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False, generator=0)
        self.bn1 = nn.BatchNorm2d(channels, eps=EPS)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False, generator=0)
        self.bn2 = nn.BatchNorm2d(channels, eps=EPS)

    def forward(self, x: Any) -> Any:
        h = gc.relu(self.bn1(self.conv1(x)))
        return gc.relu(self.bn2(self.conv2(h)) + x)


def initial_state(channels: int, seed: int = 0) -> dict[str, np.ndarray]:
    """He-scaled conv weights; batch norm scales, shifts and running statistics, float32."""
    rng = np.random.default_rng(seed)
    state: dict[str, np.ndarray] = {}
    for k in (1, 2):
        weight = rng.standard_normal((channels, channels, 3, 3)) * np.sqrt(2 / (9 * channels))
        state[f"conv{k}.weight"] = weight
        state[f"bn{k}.weight"] = rng.uniform(0.5, 1.5, channels)
        state[f"bn{k}.bias"] = 0.1 * rng.standard_normal(channels)
        state[f"bn{k}.running_mean"] = 0.1 * rng.standard_normal(channels)
        state[f"bn{k}.running_var"] = rng.uniform(0.5, 2.0, channels)
    state = {k: v.astype(np.float32) for k, v in state.items()}
    for k in (1, 2):
        state[f"bn{k}.num_batches_tracked"] = np.array(100, np.int64)
    return state


def block(channels: int) -> BasicBlock:
    """The graphc block in eval mode, holding `initial_state(channels)`."""
    module = BasicBlock(channels)
    module.load_state_dict(initial_state(channels))
    module.eval()
    return module


def make_inputs(params: dict[str, Any]) -> dict[str, Any]:
    """x (N, C, H, W) float32; the graphc block, made once and shared by graphc's modes."""
    rng = np.random.default_rng(2)
    shape = (params["batch"], params["channels"], params["size"], params["size"])
    x = rng.standard_normal(shape).astype(np.float32)
    return {"x": x, "block": block(params["channels"])}


# -- graphc ---------------------------------------------------------------------------


def _graph(inputs: dict[str, Any]) -> gc.Graph:
    """The traced block; its lifted weights, in placeholder order, follow x in `args`."""
    x = inputs["x"]
    graph = gc.trace(inputs["block"], gc.TensorSpec(x.shape, x.dtype))
    feeds = gc.lifted_feeds(graph)
    inputs["args"] = (x, *(feeds[p.name] for p in graph.inputs[1:]))
    return graph


def _eager(params: dict[str, Any], inputs: dict[str, Any]) -> Prepared:
    module, x = inputs["block"], ge.from_numpy(inputs["x"])

    def call() -> Any:
        with ge.no_grad():
            return module(x)

    return plain(call)


# -- peers ----------------------------------------------------------------------------


def torch_block(torch: Any, channels: int) -> Any:
    """The same block in torch.nn, eval mode, holding `initial_state(channels)`."""
    tnn = torch.nn

    class Block(tnn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = tnn.Conv2d(channels, channels, 3, padding=1, bias=False)
            self.bn1 = tnn.BatchNorm2d(channels, eps=EPS)
            self.conv2 = tnn.Conv2d(channels, channels, 3, padding=1, bias=False)
            self.bn2 = tnn.BatchNorm2d(channels, eps=EPS)

        def forward(self, x: Any) -> Any:
            h = torch.relu(self.bn1(self.conv1(x)))
            return torch.relu(self.bn2(self.conv2(h)) + x)

    module = Block()
    state = {k: torch.from_numpy(v) for k, v in initial_state(channels).items()}
    module.load_state_dict(state)
    return module.eval()


def _torch(compiled: bool) -> Any:
    def build(params: dict[str, Any], inputs: dict[str, Any]) -> Prepared:
        torch = peers.torch()
        module = torch_block(torch, params["channels"])
        x = torch.from_numpy(inputs["x"])
        forward = torch_compile.compiled(torch, module) if compiled else module

        def call() -> Any:
            with torch.no_grad():
                return forward(x)

        if not compiled:
            return plain(call, None)
        return torch_compile.prepared(call, lambda y: [y.numpy()], "eval module, no_grad")

    return build


def jax_block(jax: Any) -> Any:
    """The jitted block (weights, x) -> y; weights as `initial_state`'s names."""
    import jax.numpy as jnp
    from jax import lax

    def conv(x: Any, w: Any) -> Any:
        dims = ("NCHW", "OIHW", "NCHW")
        return lax.conv_general_dilated(x, w, (1, 1), [(1, 1), (1, 1)], dimension_numbers=dims)

    def batch_norm(x: Any, weights: dict[str, Any], k: int) -> Any:
        scale = weights[f"bn{k}.weight"] / jnp.sqrt(weights[f"bn{k}.running_var"] + EPS)
        shift = weights[f"bn{k}.bias"] - weights[f"bn{k}.running_mean"] * scale
        return x * scale[None, :, None, None] + shift[None, :, None, None]

    def forward(weights: dict[str, Any], x: Any) -> Any:
        h = jax.nn.relu(batch_norm(conv(x, weights["conv1.weight"]), weights, 1))
        return jax.nn.relu(batch_norm(conv(h, weights["conv2.weight"]), weights, 2) + x)

    return jax.jit(forward)


def _jax(params: dict[str, Any], inputs: dict[str, Any]) -> Prepared:
    jax = peers.jax()
    import jax.numpy as jnp

    state = initial_state(params["channels"])
    weights = {k: jnp.asarray(v) for k, v in state.items() if "num_batches" not in k}
    x = jnp.asarray(inputs["x"])
    forward = jax_block(jax).lower(weights, x).compile()  # compiled here, not timed
    return plain(lambda: jax.block_until_ready(forward(weights, x)), None)


def _jax_block_args(jax: Any, params: dict[str, Any], inputs: dict[str, Any]) -> tuple[Any, ...]:
    """(weights, x) for the jitted block's first call, as numpy arrays (inference: a
    user's weights and images)."""
    state = initial_state(params["channels"])
    return {k: v for k, v in state.items() if "num_batches" not in k}, inputs["x"]


WORKLOAD = Workload(
    name="resnet_block",
    description=(
        "ResNet basic block inference (conv3x3-BN-ReLU-conv3x3-BN + x, ReLU; BN eval), "
        "float32, (N, C, H, W)"
    ),
    unit="call",
    cases=[
        Case(
            QUICK_CASE,
            QUICK,
            full=False,
            quick_skip_modes={**torch_compile.QUICK_SKIP, **QUICK_SKIP_JAX},
            quick_skip_cold=QUICK_SKIP_DEFAULT_COLD,
        ),
        Case(FULL_CASE, FULL, quick=False),
    ],
    make_inputs=make_inputs,
    builders={
        **graph_modes(
            _graph,
            eager=_eager,
            numpy=not_applicable("not written: it would be graphc's own im2col kernel again"),
            torch=_torch(compiled=False),
            jax=_jax,
        ),
        TORCH_COMPILE: _torch(compiled=True),
    },
    reference="torch",
    first_result=graph_starts(
        _graph, jax=jax_first_call(lambda jax, params: jax_block(jax), _jax_block_args)
    ),
)
