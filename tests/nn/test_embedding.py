"""nn.Embedding: PyTorch's parameters, init, padding row and state_dict; the same values
and gradients as torch; traced and compiled like eager; trained both ways alike."""

from __future__ import annotations

import doctest
from typing import Any

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
from graphc import nn, optim
from graphc.nn import sparse
from tests.conftest import needs_torch, torch


def test_docstring_examples() -> None:
    result = doctest.testmod(sparse)
    assert result.attempted > 0 and result.failed == 0


def test_parameters_init_and_padding_row_are_torchs() -> None:
    layer = nn.Embedding(1000, 64, padding_idx=-1, generator=0)
    assert layer.padding_idx == 999 and layer.weight.requires_grad and layer.weight.is_leaf
    assert [name for name, _ in layer.named_parameters()] == ["weight"]
    weight = layer.weight.detach().numpy()
    assert weight.shape == (1000, 64) and weight.dtype == np.float32
    assert not weight[999].any()
    assert abs(weight[:999].mean()) < 0.01 and abs(weight[:999].std() - 1.0) < 0.01  # N(0, 1)
    again = nn.Embedding(1000, 64, padding_idx=-1, generator=0).weight.detach().numpy()
    np.testing.assert_array_equal(weight, again)
    assert repr(layer) == "Embedding(1000, 64, padding_idx=999)"
    assert repr(nn.Embedding(3, 2)) == "Embedding(3, 2)"


@needs_torch
@pytest.mark.parametrize("padding_idx", [None, 1, -2])
def test_values_and_gradients_match_torch_given_its_state_dict(padding_idx: Any) -> None:
    reference = torch.nn.Embedding(6, 4, padding_idx=padding_idx).double()
    layer = nn.Embedding(6, 4, padding_idx=padding_idx, dtype="float64")
    result = layer.load_state_dict({k: v.numpy() for k, v in reference.state_dict().items()})
    assert tuple(result) == ([], [])
    ids = np.array([[1, 4, 4, 0], [4, 1, 5, 2]])
    ct = np.random.default_rng(0).standard_normal((2, 4, 4))
    want = reference(torch.tensor(ids))
    (want * torch.tensor(ct)).sum().backward()
    got = layer(ge.tensor(ids))
    (got * ge.tensor(ct)).sum().backward()
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(layer.weight.grad.numpy(), reference.weight.grad.numpy(), rtol=1e-12)
    assert layer.state_dict().keys() == reference.state_dict().keys()


def test_out_of_range_ids_are_index_errors_as_in_torch() -> None:
    layer = nn.Embedding(4, 2, generator=0)
    for ids in ([4], [-1]):
        with pytest.raises(IndexError, match="out of range for 4 embeddings"):
            layer(ge.tensor(ids))
    with pytest.raises(IndexError, match="padding_idx 4 must be within"):
        nn.Embedding(4, 2, padding_idx=4)
    with pytest.raises(gc.GraphcError, match="scale_grad_by_freq"):
        nn.Embedding(4, 2, scale_grad_by_freq=True)


def test_from_pretrained_freezes_by_default_and_keeps_the_state_dict_key() -> None:
    table = np.arange(6.0).reshape(3, 2)
    frozen = nn.Embedding.from_pretrained(table)
    # a parameter that does not require grad, as torch's (a buffer before: parameters()
    # differed from torch's, and an optimizer over them did not list it)
    assert list(frozen.state_dict()) == ["weight"]
    assert [(n, p.requires_grad) for n, p in frozen.named_parameters()] == [("weight", False)]
    assert not list(frozen.buffers())
    assert frozen(ge.tensor([2, 0])).tolist() == [[4.0, 5.0], [0.0, 1.0]]
    trained = nn.Embedding.from_pretrained(ge.tensor(table), freeze=False, padding_idx=0)
    assert [p.shape for p in trained.parameters()] == [(3, 2)]
    assert trained.weight.dtype == ge.float64 and trained.padding_idx == 0


class Bag(nn.Module):
    """Mean of the embedded tokens, then a linear classifier: a bag of words."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(12, 5, padding_idx=0, dtype="float64", generator=1)
        self.out = nn.Linear(5, 3, dtype="float64", generator=2)

    def forward(self, ids: Any) -> Any:
        return self.out(gc.mean(self.embed(ids), axis=1))


def _data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    ids = rng.integers(0, 12, (16, 6))
    return ids, (ids.max(axis=1) % 3).astype(np.int64)


def test_traced_and_compiled_forward_equals_eager_bit_for_bit() -> None:
    model, (ids, _) = Bag(), _data()
    eager = model(ge.tensor(ids)).detach().numpy()
    g = gc.trace(model, gc.TensorSpec(("B", "T"), "int64"))
    assert any(n.op == "embedding" for n in g)
    for level in (0, 2):
        got = gc.compile(g, opt_level=level)(ids, *[p.detach().numpy() for p in model.parameters()])
        assert got.tobytes() == eager.tobytes()
        shorter = gc.compile(g, opt_level=level)(
            ids[:3, :2], *[p.detach().numpy() for p in model.parameters()]
        )
        np.testing.assert_array_equal(shorter, model(ge.tensor(ids[:3, :2])).detach().numpy())


def test_training_compiled_equals_training_eagerly() -> None:
    ids, labels = _data()
    eager_model, static_model = Bag(), Bag()
    loss_fn = nn.CrossEntropyLoss()
    eager_opt = optim.SGD(eager_model.parameters(), lr=0.5)
    static_opt = optim.SGD(static_model.parameters(), lr=0.5)
    step = gc.compile_train_step(static_model, loss_fn, static_opt, (ids[:8], labels[:8]))
    eager_losses, static_losses = [], []
    for start in (0, 8) * 4:
        xb, yb = ids[start : start + 8], labels[start : start + 8]
        eager_opt.zero_grad()
        loss = loss_fn(eager_model(ge.tensor(xb)), ge.tensor(yb))
        loss.backward()
        eager_opt.step()
        eager_losses.append(float(loss.item()))
        static_losses.append(float(step.step(xb, yb)))
    np.testing.assert_allclose(static_losses, eager_losses, rtol=1e-10)
    assert eager_losses[-1] < eager_losses[0]
    step.sync_to_model()
    for (name, a), (_, b) in zip(eager_model.named_parameters(), static_model.named_parameters()):
        np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-10, err_msg=name)
    assert not eager_model.embed.weight.detach().numpy()[0].any()  # the padding row never learns
