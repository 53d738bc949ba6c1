"""Models exported by PyTorch's two ONNX exporters (TorchScript at opset 17, and
torch.export at opset 18, which needs onnxscript), imported into graphc: a CNN,
recurrent networks, a transformer block and an embedding model, each compared with
PyTorch and onnxruntime, by the reference and compiled at O2, at two batch sizes (the
batch dim is symbolic)."""

from __future__ import annotations

import io
import warnings

import numpy as np
import pytest

from tests.budget import full
from tests.conftest import needs_torch, torch

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import graphc as gc  # noqa: E402

pytestmark = needs_torch


# torch.export's exporter (torch's default) in the quick run; the TorchScript one too with --full
EXPORTERS = ["torchscript", "dynamo"] if full() else ["dynamo"]


@pytest.fixture(params=EXPORTERS)
def exporter(request: pytest.FixtureRequest) -> str:
    if request.param == "dynamo":
        pytest.importorskip("onnxscript", reason="torch.export's ONNX exporter needs onnxscript")
    return request.param


def _export(model: object, example: tuple, names: list[str], axis: int, how: str) -> bytes:
    buffer = io.BytesIO()
    with warnings.catch_warnings():  # the TorchScript exporter's deprecation notice
        warnings.simplefilter("ignore")
        if how == "torchscript":
            dynamic = {n: {axis: "batch"} for n in names}
            torch.onnx.export(
                model, example, buffer, dynamo=False, opset_version=17, input_names=names,
                dynamic_axes=dynamic,
            )  # fmt: skip
            return buffer.getvalue()
        batch = torch.export.Dim("batch", min=1)
        program = torch.onnx.export(
            model, example, dynamo=True, opset_version=18, input_names=names,
            dynamic_shapes=tuple({axis: batch} for _ in names), verbose=False,
        )  # fmt: skip
        return program.model_proto.SerializeToString()


def _check(
    model: object, inputs: list[np.ndarray], how: str, dynamic_axis: int = 0, tol: float = 1e-5
) -> gc.Graph:
    """Export `model` (eval mode), import it, and hold graphc to torch and onnxruntime."""
    model.eval()
    names = [f"in{k}" for k in range(len(inputs))]
    example = tuple(torch.from_numpy(x) for x in inputs)
    blob = _export(model, example, names, dynamic_axis, how)
    graph = gc.onnx.import_model(blob)
    assert all(isinstance(p.type.shape[dynamic_axis], str) for p in graph.inputs)
    exe = gc.compile(graph, opt_level=2)
    session = ort.InferenceSession(blob, providers=["CPUExecutionProvider"])
    for batch in (inputs[0].shape[dynamic_axis], 1):
        feeds = {
            n: np.take(x, np.arange(batch) % x.shape[dynamic_axis], axis=dynamic_axis)
            for n, x in zip(names, inputs)
        }
        with torch.no_grad():
            want = model(*(torch.from_numpy(x) for x in feeds.values()))
        want = [w.numpy() for w in (want if isinstance(want, tuple) else (want,))]
        onnx_out = session.run(None, feeds)
        compiled = exe(**feeds)
        compiled = list(compiled) if isinstance(compiled, tuple) else [compiled]
        reference = gc.run(graph, feeds)
        for got in (reference, compiled):
            for a, b, c in zip(got, onnx_out, want):
                assert a.shape == b.shape == c.shape and a.dtype == b.dtype
                np.testing.assert_allclose(a, c, rtol=tol, atol=tol)
                np.testing.assert_allclose(a, b, rtol=tol, atol=tol)
    return graph


def test_cnn(exporter: str) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
        torch.nn.MaxPool2d(2), torch.nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=2),
        torch.nn.LeakyReLU(0.1), torch.nn.AvgPool2d(2, ceil_mode=True),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Dropout(0.3),
        torch.nn.Linear(8, 4), torch.nn.GELU(),
    )  # fmt: skip
    with torch.no_grad():  # running statistics that are not the identity
        model[1].running_mean.uniform_(-1, 1)
        model[1].running_var.uniform_(0.5, 2)
    x = np.random.default_rng(0).normal(size=(5, 3, 16, 16)).astype(np.float32)
    graph = _check(model, [x], exporter)
    ops = {n.op for n in graph.op_nodes}
    assert {"conv2d", "max_pool2d", "avg_pool2d"} <= ops


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"] if full() else ["RNN"])
def test_recurrent(kind: str, exporter: str) -> None:
    torch.manual_seed(1)
    layer = getattr(torch.nn, kind)(6, 5, num_layers=2, bidirectional=True, batch_first=True)

    class Last(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.rnn = layer

        def forward(self, x: object) -> object:
            y, _ = self.rnn(x)
            return y

    x = np.random.default_rng(1).normal(size=(3, 7, 6)).astype(np.float32)
    graph = _check(Last(), [x], exporter)
    if exporter == "torchscript":  # (torch.export writes the RNN unrolled, its LSTM/GRU not)
        assert "scan" in {n.op for n in graph.op_nodes}


class _Block(torch.nn.Module if torch is not None else object):  # type: ignore[misc]
    """A pre-norm transformer encoder block, attention written out (torch's own
    TransformerEncoderLayer does not go through its TorchScript exporter)."""

    def __init__(self, d: int = 16, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.qkv, self.proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
        self.ff = torch.nn.Sequential(
            torch.nn.Linear(d, 2 * d), torch.nn.GELU(), torch.nn.Linear(2 * d, d)
        )

    def forward(self, x: object) -> object:
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).chunk(3, dim=-1)
        split = lambda z: z.reshape(b, t, self.heads, d // self.heads).transpose(1, 2)  # noqa: E731
        q, k, v = split(q), split(k), split(v)
        att = torch.softmax(q @ k.transpose(-2, -1) / (d // self.heads) ** 0.5, dim=-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, t, d))
        return x + self.ff(self.norm2(x))


@pytest.mark.slow  # torch.export of a transformer layer; the quick run keeps the CNN's and the RNN's
def test_transformer_block(exporter: str) -> None:
    torch.manual_seed(2)
    x = np.random.default_rng(2).normal(size=(2, 6, 16)).astype(np.float32)
    graph = _check(_Block(), [x], exporter, tol=1e-4)
    assert "layer_norm" in {n.op for n in graph.op_nodes}


@pytest.mark.slow  # torch.export of another model
def test_embedding_bag_of_words(exporter: str) -> None:
    torch.manual_seed(3)

    class Bag(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = torch.nn.Embedding(20, 8)
            self.out = torch.nn.Linear(8, 3)

        def forward(self, ids: object) -> object:
            return torch.log_softmax(self.out(self.emb(ids).mean(1)), dim=-1)

    ids = np.random.default_rng(3).integers(0, 20, size=(4, 9))
    _check(Bag(), [ids], exporter)
