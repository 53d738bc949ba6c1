"""The ONNX model zoo of the `onnx` workload, built with graphc.nn, and a 1,000-node model.

Each zoo model is what tests/onnx/test_zoo.py exports, at the sizes of the issue-15
workloads where one exists: the MLP 784-256-256-10 of `mlp`, LeNet-5 of `cnn`, the
encoder layer of `transformer` (d 128, 4 heads, ff 512, here on 32 tokens), a GRU and an
LSTM (64 -> 128, 32 steps, batch first; the last layer's outputs), the basic block of
`resnet_block` (batch norm in eval mode, 32 channels at 14x14) and a model with a cond
on the data, a fixed-count loop and a loop on the data (ONNX If, Loop and Loop). A
model is traced with a symbolic batch and exported with its weights as initializers,
so one ONNX model serves every batch.

`chain_model` builds the import benchmark's model directly with onnx.helper: a residual
MLP of `CHAIN_NODES` nodes, each block MatMul, Add, Tanh, Add, with its own weights.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import graphc as gc
from graphc import nn
from graphc.bench import cnn, resnet_block, transformer
from graphc.bench import mlp as mlp_workload

MLP_SIZES = (784, 256, 256, 10)
TRANSFORMER = {"d_model": 128, "nhead": 4, "ff": 512}
RECURRENT = {"inputs": 64, "hidden": 128, "steps": 32}
RESNET_CHANNELS, RESNET_SIZE = 32, 14
CHAIN_NODES, CHAIN_WIDTH = 1000, 64
OPSET = 17


class LastOutput(nn.Module):
    """A recurrent layer's first result (the last layer's outputs at every step)."""

    def __init__(self, layer: nn.Module) -> None:
        super().__init__()
        self.layer = layer

    def forward(self, x: Any) -> Any:
        return self.layer(x)[0]


def mlp() -> nn.Module:
    """The `mlp` workload's network, holding its initial parameters."""
    return mlp_workload.model()


def transformer_layer() -> nn.Module:
    """The `transformer` workload's encoder layer (post-norm, ReLU) in eval mode."""
    return transformer.layer(TRANSFORMER).eval()


def gru() -> nn.Module:
    sizes = RECURRENT
    return LastOutput(nn.GRU(sizes["inputs"], sizes["hidden"], batch_first=True, generator=0))


def lstm() -> nn.Module:
    sizes = RECURRENT
    return LastOutput(nn.LSTM(sizes["inputs"], sizes["hidden"], batch_first=True, generator=0))


def branchy(x: Any) -> Any:
    """A cond on the data, a fixed-count loop (a scan) and a loop on the data."""
    y = gc.cond(gc.sum(x) > 0, lambda v: v * 2.0, lambda v: gc.tanh(v), x)
    y = gc.fori_loop(0, 3, lambda i, v: v * 0.5 + gc.cast(i, "float32"), y)
    return gc.while_loop(lambda v: gc.max(gc.abs(v)) > 1.0, lambda v: v * 0.5, y)


# name -> (the model, one sample's shape); the order of the report's cases
ZOO: dict[str, tuple[Callable[[], Any], tuple[int, ...]]] = {
    "mlp": (mlp, (MLP_SIZES[0],)),
    "lenet": (cnn.model, (1, 28, 28)),
    "transformer": (transformer_layer, (RECURRENT["steps"], TRANSFORMER["d_model"])),
    "gru": (gru, (RECURRENT["steps"], RECURRENT["inputs"])),
    "lstm": (lstm, (RECURRENT["steps"], RECURRENT["inputs"])),
    "resnet_block": (
        lambda: resnet_block.block(RESNET_CHANNELS),
        (RESNET_CHANNELS, RESNET_SIZE, RESNET_SIZE),
    ),
    "if_loop": (lambda: branchy, (256,)),
}


def export(name: str) -> tuple[bytes, str]:
    """The zoo model `name` as serialized ONNX, and the name of its one input."""
    make, shape = ZOO[name]
    graph = gc.trace(make(), gc.TensorSpec(("batch", *shape)))
    model = gc.onnx.export_model(graph, initializers=gc.lifted_feeds(graph))
    return model.SerializeToString(), graph.inputs[0].name


def chain_model(nodes: int = CHAIN_NODES, width: int = CHAIN_WIDTH, seed: int = 0) -> bytes:
    """A residual MLP of `nodes` ONNX nodes (h = h + tanh(h @ W_i + b_i), four nodes per
    block), input "x" of shape (N, width), serialized."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    body, weights = [], []
    h = "x"
    for i in range(nodes // 4):
        # weights of norm 0.5: rounding errors shrink through the blocks instead of growing
        w = (0.5 * rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32)
        b = (0.1 * rng.standard_normal(width)).astype(np.float32)
        weights += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(b, f"b{i}")]
        body += [
            helper.make_node("MatMul", [h, f"w{i}"], [f"mm{i}"]),
            helper.make_node("Add", [f"mm{i}", f"b{i}"], [f"pre{i}"]),
            helper.make_node("Tanh", [f"pre{i}"], [f"act{i}"]),
            helper.make_node("Add", [h, f"act{i}"], [f"h{i}"]),
        ]
        h = f"h{i}"
    body[-1].output[0] = "y"
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", width])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", width])
    graph = helper.make_graph(body, "chain", [x], [y], initializer=weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    onnx.checker.check_model(model)
    return model.SerializeToString()
