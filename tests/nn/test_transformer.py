"""nn.TransformerEncoderLayer and TransformerEncoder against PyTorch, both modes."""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
from graphc import nn
from tests.conftest import needs_torch, torch

RNG = np.random.default_rng(0)

OPTIONS = [
    {},
    {"norm_first": True},
    {"activation": "gelu"},
    {"batch_first": True},
    {"norm_first": True, "activation": "gelu", "batch_first": True},
]


def _pair(options: dict) -> tuple[object, object]:
    ours = nn.TransformerEncoderLayer(
        8, 2, 16, dropout=0.0, dtype="float64", generator=0, **options
    )
    theirs = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, dtype=torch.float64, **options)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    # torch's weights into ours: a torch state_dict of numpy arrays loads as it is
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    return ours, theirs


@needs_torch
@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: ",".join(o) or "default")
def test_encoder_layer_matches_torch(options: dict) -> None:
    ours, theirs = _pair(options)
    x = RNG.standard_normal((3, 5, 8))
    length, batch = (5, 3) if options.get("batch_first") else (3, 5)
    mask = RNG.random((length, length)) > 0.8
    np.fill_diagonal(mask, False)  # every query attends somewhere
    padding = np.zeros((batch, length), np.bool_)
    padding[:, -1] = True  # the last key of every sequence is padding
    for kwargs in ({}, {"src_mask": mask}, {"src_key_padding_mask": padding}):
        xs, xt = ge.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        out = ours(xs, **{k: ge.tensor(v) for k, v in kwargs.items()})
        want = theirs(xt, **{k: torch.tensor(v) for k, v in kwargs.items()})
        np.testing.assert_allclose(out.detach().numpy(), want.detach().numpy(), atol=1e-12)
        (out * out).sum().backward()
        (want * want).sum().backward()
        np.testing.assert_allclose(xs.grad.numpy(), xt.grad.numpy(), atol=1e-10)
        for name, p in ours.named_parameters():
            t = dict(theirs.named_parameters())[name]
            np.testing.assert_allclose(p.grad.numpy(), t.grad.numpy(), atol=1e-10, err_msg=name)
            p.grad, t.grad = None, None


@needs_torch
def test_encoder_stack_with_a_final_norm_matches_torch() -> None:
    layer = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, dtype=torch.float64)
    theirs = torch.nn.TransformerEncoder(
        layer, 2, norm=torch.nn.LayerNorm(8, dtype=torch.float64), enable_nested_tensor=False
    )
    ours = nn.TransformerEncoder(
        nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, dtype="float64"), 2,
        norm=nn.LayerNorm(8, dtype="float64"),
    )  # fmt: skip
    assert list(ours.state_dict()) == list(theirs.state_dict())
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    x = RNG.standard_normal((5, 2, 8))
    causal = ~np.tril(np.ones((5, 5), np.bool_))
    out = ours(ge.tensor(x), mask=ge.tensor(causal))
    want = theirs(torch.tensor(x), mask=torch.tensor(causal))
    np.testing.assert_allclose(out.detach().numpy(), want.detach().numpy(), atol=1e-12)


def test_stacked_layers_start_equal_as_separate_copies() -> None:
    stack = nn.TransformerEncoder(nn.TransformerEncoderLayer(4, 2, 8, generator=0), 2)
    first, second = (dict(m.named_parameters()) for m in stack.layers)
    assert all(np.array_equal(first[k].detach().numpy(), second[k].detach().numpy()) for k in first)
    assert first["linear1.weight"] is not second["linear1.weight"]  # copies, not shared


def test_traced_layer_runs_any_batch_as_eager_and_drops_out_only_in_training() -> None:
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.5, batch_first=True, generator=1)
    layer.eval()
    g = gc.trace(layer, gc.TensorSpec((None, 6, 8)))
    exe = gc.compile(g, opt_level=2)
    for batch in (3, 1):
        x = RNG.standard_normal((batch, 6, 8)).astype(np.float32)
        want = layer(ge.tensor(x)).detach().numpy()
        np.testing.assert_allclose(exe(x, **gc.lifted_feeds(g)), want, rtol=1e-5, atol=1e-5)
    layer.train()
    x = ge.tensor(RNG.standard_normal((2, 6, 8)).astype(np.float32))
    a, b = layer(x).detach().numpy(), layer(x).detach().numpy()
    assert not np.array_equal(a, b)  # two dropout draws


def test_unknown_activation_is_named() -> None:
    with pytest.raises(gc.GraphcError, match="relu or gelu, not 'swish'"):
        nn.TransformerEncoderLayer(8, 2, activation="swish")
