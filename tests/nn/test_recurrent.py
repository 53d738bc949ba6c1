"""RNN, GRU and LSTM: PyTorch's values and gradients, eagerly and as compiled scans."""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
from graphc import nn
from tests.conftest import needs_torch, torch
from tests.differential import check_levels

KINDS = {"RNN": nn.RNN, "RNN_relu": nn.RNN, "GRU": nn.GRU, "LSTM": nn.LSTM}
OPTIONS = [
    {},
    {"num_layers": 2},
    {"bidirectional": True},
    {"num_layers": 2, "bidirectional": True, "batch_first": True},
    {"bias": False},
]


def make(kind: str, **options: object) -> nn.Module:
    extra = {"nonlinearity": "relu"} if kind == "RNN_relu" else {}
    return KINDS[kind](3, 4, generator=0, dtype="float64", **extra, **options)


def twin(kind: str, module: nn.Module, **options: object) -> object:
    cls = getattr(torch.nn, kind.split("_")[0])
    extra = {"nonlinearity": "relu"} if kind == "RNN_relu" else {}
    t = cls(3, 4, dtype=torch.float64, **extra, **options)
    t.load_state_dict({k: torch.tensor(v) for k, v in module.state_dict().items()})
    return t


def flat_state(state: object) -> list:
    return list(state) if isinstance(state, tuple) else [state]


@needs_torch
@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: ",".join(o) or "default")
@pytest.mark.parametrize("kind", list(KINDS))
def test_outputs_states_and_gradients_match_torch(kind: str, options: dict) -> None:
    module = make(kind, **options)
    reference = twin(kind, module, **options)
    assert sorted(module.state_dict()) == sorted(reference.state_dict())
    shape = (2, 5, 3) if options.get("batch_first") else (5, 2, 3)
    x = np.random.default_rng(1).standard_normal(shape)
    ours = ge.tensor(x, requires_grad=True)
    theirs = torch.tensor(x, requires_grad=True)
    out, state = module(ours)
    t_out, t_state = reference(theirs)
    np.testing.assert_allclose(out.detach().numpy(), t_out.detach().numpy(), atol=1e-12)
    for s, t in zip(flat_state(state), flat_state(t_state)):
        np.testing.assert_allclose(s.detach().numpy(), t.detach().numpy(), atol=1e-12)
    loss = (out * out).sum() + sum((s * s).sum() for s in flat_state(state))
    t_loss = (t_out * t_out).sum() + sum((s * s).sum() for s in flat_state(t_state))
    loss.backward()
    t_loss.backward()
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), atol=1e-10)
    for name, p in module.named_parameters():
        np.testing.assert_allclose(
            p.grad.numpy(), dict(reference.named_parameters())[name].grad.numpy(), atol=1e-10
        )


@needs_torch
@pytest.mark.parametrize("kind", list(KINDS))
def test_an_initial_state_and_unbatched_input_as_torch(kind: str) -> None:
    module = make(kind, num_layers=2)
    reference = twin(kind, module, num_layers=2)
    rng = np.random.default_rng(2)
    x = rng.standard_normal((6, 3))  # unbatched: (seq, features)
    h = rng.standard_normal((2, 4))
    hx = (h, rng.standard_normal((2, 4))) if kind == "LSTM" else h
    wrap = (lambda v: tuple(ge.tensor(a) for a in v)) if kind == "LSTM" else ge.tensor
    twrap = (lambda v: tuple(torch.tensor(a) for a in v)) if kind == "LSTM" else torch.tensor
    out, state = module(ge.tensor(x), wrap(hx))
    t_out, t_state = reference(torch.tensor(x), twrap(hx))
    np.testing.assert_allclose(out.detach().numpy(), t_out.detach().numpy(), atol=1e-12)
    for s, t in zip(flat_state(state), flat_state(t_state)):
        np.testing.assert_allclose(s.detach().numpy(), t.detach().numpy(), atol=1e-12)


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_traced_layer_is_one_scan_per_direction_whatever_the_length(kind: str) -> None:
    module = make(kind, num_layers=2, bidirectional=True)

    def last_output(x):
        return module(x)[0]

    sizes = []
    for steps in (3, 40):
        g = gc.trace(last_output, gc.TensorSpec((steps, 2, 3), "float64"))
        assert sum(n.op == "scan" for n in g.op_nodes) == 4
        sizes.append(len(g.nodes))
        x = np.random.default_rng(steps).standard_normal((steps, 2, 3))
        want = module(ge.tensor(x))[0].detach().numpy()
        feeds = gc.lifted_feeds(g)
        named = {g.inputs[0].name: x, **feeds}
        # the reference runs eager's kernels in the same order: eager's bits
        np.testing.assert_array_equal(gc.run(g, named)[0], want)
        # compiled: bit for bit on numpy, native's within its declared bounds
        # (tests/differential.py)
        check_levels(g, [named], levels=(0, 2))
    assert sizes[0] == sizes[1]


@pytest.mark.parametrize("kind", ["GRU", "LSTM"])
def test_static_gradients_of_a_traced_layer_equal_the_eager_tape(kind: str) -> None:
    module = make(kind)

    def loss(x):
        out = module(x)[0]
        return gc.sum(out * out)

    g = gc.trace(loss, gc.TensorSpec((4, 2, 3), "float64"))
    names = [p.name for p in g.inputs]
    gg = gc.gradients(g, wrt=names)
    x = np.random.default_rng(3).standard_normal((4, 2, 3))
    values = gc.compile(gg, opt_level=2)(x, **gc.lifted_feeds(g))
    tensor = ge.tensor(x, requires_grad=True)
    eager = loss(tensor)
    eager.backward()
    np.testing.assert_allclose(values[0], eager.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(values[1], tensor.grad.numpy(), rtol=1e-10, atol=1e-12)
    lifted = gc.lifted_tensors(g)  # placeholder name -> the module's parameter
    assert len(lifted) == len(list(module.parameters())) == len(names) - 1
    for name, grad in zip(names[1:], values[2:]):
        np.testing.assert_allclose(grad, lifted[name].grad.numpy(), rtol=1e-10, atol=1e-12)


def test_errors_name_the_layer_and_what_was_expected() -> None:
    with pytest.raises(gc.ShapeError, match=r"GRU: input has 5 features, expected 3"):
        nn.GRU(3, 4, generator=0)(ge.ones(2, 1, 5))
    with pytest.raises(gc.GraphcError, match="nonlinearity"):
        nn.RNN(3, 4, nonlinearity="sigmoid")
    with pytest.raises(gc.ShapeError, match=r"hx must have shape \(1, batch, 4\)"):
        nn.RNN(3, 4, generator=0)(ge.ones(2, 1, 3), ge.zeros(2, 1, 4))


def test_a_traced_layer_runs_at_any_batch_size() -> None:
    module = nn.LSTM(3, 4, generator=0, batch_first=True)
    g = gc.trace(lambda x: module(x)[0], gc.TensorSpec((None, 7, 3)))
    feed_sets = []
    for batch in (1, 5):
        x = np.random.default_rng(batch).standard_normal((batch, 7, 3)).astype(np.float32)
        want = module(ge.tensor(x))[0].detach().numpy()
        feed_sets.append({g.inputs[0].name: x, **gc.lifted_feeds(g)})
        # the reference runs eager's kernels: eager's bits
        np.testing.assert_array_equal(gc.run(g, feed_sets[-1])[0], want)
    # one executable at both batch sizes: bit for bit on numpy, native's within its
    # declared bounds (tests/differential.py)
    check_levels(g, feed_sets, levels=(2,))
