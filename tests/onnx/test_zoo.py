"""A model zoo built with graphc.nn (MLP, LeNet-style CNN, transformer encoder layer,
GRU, LSTM, ResNet block with batch norm, and a model with cond and loops): each traced
with a symbolic batch, exported with its weights as initializers, run in onnxruntime
(rtol 1e-4 against graphc), imported back and exported again, outputs kept."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import graphc as gc  # noqa: E402
import graphc.eager as ge  # noqa: E402
from graphc import nn  # noqa: E402
from graphc.bench.zoo_models import LastOutput, branchy  # noqa: E402

RNG = np.random.default_rng(0)


class ResidualBlock(nn.Module):
    def __init__(self, channels: int = 8) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False, generator=0)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False, generator=1)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x: Any) -> Any:
        y = nn.functional.relu(self.bn1(self.conv1(x)))
        return nn.functional.relu(self.bn2(self.conv2(y)) + x)


def _resnet() -> nn.Module:
    block = ResidualBlock()
    with ge.no_grad():  # running statistics that are not the identity
        for bn in (block.bn1, block.bn2):
            bn.running_mean.copy_(ge.tensor(RNG.uniform(-0.5, 0.5, 8).astype(np.float32)))
            bn.running_var.copy_(ge.tensor(RNG.uniform(0.5, 2.0, 8).astype(np.float32)))
    return block.eval()


ZOO = {
    "mlp": (lambda: nn.Sequential(nn.Linear(10, 16, generator=0), nn.ReLU(), nn.Linear(16, 3, generator=1)), (10,)),
    "lenet": (
        lambda: nn.Sequential(
            nn.Conv2d(1, 4, 3, padding=1, generator=0), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(4, 8, 3, generator=1), nn.ReLU(), nn.AvgPool2d(2), nn.Flatten(),
            nn.Linear(32, 5, generator=2),
        ),
        (1, 12, 12),
    ),
    "transformer": (
        lambda: nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True, generator=0).eval(),
        (6, 16),
    ),
    "gru": (lambda: LastOutput(nn.GRU(5, 6, batch_first=True, bidirectional=True, generator=0)), (7, 5)),
    "lstm": (lambda: LastOutput(nn.LSTM(5, 6, num_layers=2, batch_first=True, generator=0)), (7, 5)),
    "resnet_block": (_resnet, (8, 6, 6)),
    "cond_and_loops": (lambda: branchy, (4,)),
}  # fmt: skip


def _session(model: Any) -> Any:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def _close(got: list[np.ndarray], want: list[np.ndarray], rtol: float, what: str) -> None:
    assert len(got) == len(want), what
    for a, b in zip(got, want):
        assert a.shape == b.shape and a.dtype == b.dtype, what
        np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol, err_msg=what)


@pytest.mark.parametrize("name", list(ZOO))
def test_zoo_model_runs_in_onnxruntime_and_round_trips(name: str) -> None:
    make, shape = ZOO[name]
    model = make()
    graph = gc.trace(model, gc.TensorSpec(("batch", *shape)))
    weights = gc.lifted_feeds(graph)
    exported = gc.onnx.export_model(graph, initializers=weights)
    onnx.checker.check_model(exported, full_check=True)
    assert [i.name for i in exported.graph.input] == [graph.inputs[0].name]
    again = gc.onnx.import_model(exported)
    twice = gc.onnx.export_model(again)
    onnx.checker.check_model(twice, full_check=True)
    for batch in (1, 3):
        x = RNG.standard_normal((batch, *shape)).astype(np.float32)
        want = gc.run(graph, {graph.inputs[0].name: x, **weights})
        feeds = {graph.inputs[0].name: x}
        _close(_session(exported).run(None, feeds), want, 1e-4, f"{name}: onnxruntime")
        _close(gc.run(again, feeds), want, 1e-5, f"{name}: imported back")
        compiled = gc.compile(again, opt_level=2)(**feeds)
        _close(
            list(compiled) if isinstance(compiled, tuple) else [compiled], want, 1e-5, f"{name}: O2"
        )
        _close(_session(twice).run(None, feeds), want, 1e-4, f"{name}: exported again")


def test_initializers_must_name_placeholders_with_their_types() -> None:
    g = gc.trace(lambda x, w: x @ w, gc.TensorSpec((2, 3)), gc.TensorSpec((3, 4)))
    with pytest.raises(gc.onnx.OnnxError, match=r"initializers \['v'\] name no placeholder"):
        gc.onnx.export_model(g, initializers={"v": np.zeros(3)})
    with pytest.raises(gc.onnx.OnnxError, match="placeholder 'w'"):
        gc.onnx.export_model(g, initializers={"w": np.zeros((3, 4))})  # float64, not float32


@pytest.mark.parametrize("name", ["mlp", "lenet", "transformer", "resnet_block"])
def test_training_graphs_export_too(name: str) -> None:
    """The forward + backward graph of each model's loss: gradients of every weight,
    computed by onnxruntime as by graphc (pool and norm gradients included)."""
    make, shape = ZOO[name]
    model = make()
    loss = gc.trace(lambda x: gc.mean(model(x) ** 2), gc.TensorSpec(("batch", *shape)))
    weights = gc.lifted_feeds(loss)
    joint = gc.gradients(loss, wrt=list(weights))
    exported = gc.onnx.export_model(joint)
    onnx.checker.check_model(exported, full_check=True)
    x = RNG.standard_normal((3, *shape)).astype(np.float32)
    feeds = {loss.inputs[0].name: x, **weights}
    want = gc.run(joint, feeds)
    assert len(want) == 1 + len(weights)
    _close(_session(exported).run(None, feeds), want, 1e-4, f"{name}: gradients in onnxruntime")
