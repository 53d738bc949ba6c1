"""InstanceNorm1d/2d/3d and F.instance_norm against PyTorch: values, input and parameter
gradients, running statistics in training, eval mode, state_dict and repr, and the
same layers inside gc.jit and a compiled training step."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
from graphc import nn, optim
from graphc.nn import functional as F
from tests.conftest import needs_torch, torch

RNG = np.random.default_rng(7)

CASES = [
    ("InstanceNorm1d", (4, 3, 5), {}),
    ("InstanceNorm1d", (3, 6), {"affine": True, "track_running_stats": True}),  # no batch dim
    ("InstanceNorm2d", (2, 3, 4, 5), {"affine": True}),
    ("InstanceNorm2d", (2, 3, 3, 3), {"track_running_stats": True, "momentum": 0.3}),
    ("InstanceNorm2d", (2, 3, 2, 3), {"track_running_stats": True, "momentum": None}),
    ("InstanceNorm3d", (2, 3, 2, 3, 2), {"affine": True, "track_running_stats": True}),
]


@needs_torch
@pytest.mark.parametrize("kind, shape, options", CASES)
def test_instance_norm_layers_match_torch(kind: str, shape: tuple, options: dict) -> None:
    ours, theirs = getattr(nn, kind)(3, **options), getattr(torch.nn, kind)(3, **options)
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    if ours.affine:  # weights other than ones and zeros, in both
        for p in theirs.parameters():
            torch.nn.init.normal_(p)
        ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    for _ in range(2):  # training: the running statistics move twice
        x = RNG.normal(1.0, 2.0, shape).astype(np.float32)
        a, b = ge.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        out, want = ours(a), theirs(b)
        np.testing.assert_allclose(out.detach().numpy(), want.detach().numpy(), atol=2e-5)
        seed = RNG.normal(size=want.shape).astype(np.float32)
        (out * ge.tensor(seed)).sum().backward()
        (want * torch.tensor(seed)).sum().backward()
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-4, atol=2e-5)
        for (name, p), q in zip(ours.named_parameters(), theirs.parameters()):
            np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-4, err_msg=name)
    for key, value in theirs.state_dict().items():  # num_batches_tracked stays 0, as torch's
        np.testing.assert_allclose(ours.state_dict()[key], value.numpy(), rtol=1e-5, err_msg=key)
    ours.eval()
    theirs.eval()  # the running statistics where tracked, else the input's own
    np.testing.assert_allclose(
        ours(ge.tensor(x)).detach().numpy(), theirs(torch.tensor(x)).detach().numpy(), atol=2e-5
    )


@needs_torch
def test_functional_instance_norm_matches_torch_with_running_stats() -> None:
    x = RNG.normal(size=(3, 2, 7)).astype(np.float64)
    ours_stats = [ge.zeros(2, dtype="float64"), ge.ones(2, dtype="float64")]
    their_stats = [torch.zeros(2, dtype=torch.float64), torch.ones(2, dtype=torch.float64)]
    out = F.instance_norm(ge.tensor(x), *ours_stats, momentum=0.5)
    want = torch.nn.functional.instance_norm(torch.tensor(x), *their_stats, momentum=0.5)
    np.testing.assert_allclose(out.numpy(), want.numpy(), rtol=1e-12)
    for mine, theirs in zip(ours_stats, their_stats):
        np.testing.assert_allclose(mine.numpy(), theirs.numpy(), rtol=1e-12)
    out = F.instance_norm(ge.tensor(x), *ours_stats, use_input_stats=False)
    want = torch.nn.functional.instance_norm(torch.tensor(x), *their_stats, use_input_stats=False)
    np.testing.assert_allclose(out.numpy(), want.numpy(), rtol=1e-12)


def _model(lib: Any) -> Any:
    extra = {"generator": 3} if lib is nn else {}
    return lib.Sequential(
        lib.Conv2d(2, 4, 3, bias=False, **extra),  # instance norm cancels a bias's gradient
        lib.InstanceNorm2d(4, affine=True, track_running_stats=True),
        lib.ReLU(),
        lib.AdaptiveMaxPool2d((2, 3)),  # 5 x 5 into bins that do not divide it
        lib.Flatten(),
        lib.Linear(24, 2, **extra),
    )


@needs_torch
def test_instance_norm_and_adaptive_max_pool_train_as_torch_in_a_compiled_step() -> None:
    eager, compiled, theirs = _model(nn), _model(nn), _model(torch.nn)
    theirs.load_state_dict({k: torch.from_numpy(v) for k, v in eager.state_dict().items()})
    compiled.load_state_dict(eager.state_dict())
    opts = [optim.Adam(m.parameters(), lr=0.01) for m in (eager, compiled)]
    opt_t = torch.optim.Adam(theirs.parameters(), lr=0.01)
    x = RNG.normal(size=(6, 2, 7, 7)).astype(np.float32)
    y = RNG.normal(size=(6, 2)).astype(np.float32)
    step = gc.compile_train_step(compiled, nn.MSELoss(), opts[1], (x, y))
    for t in range(3):
        xb = x * (1 + t)
        opts[0].zero_grad()
        loss = nn.MSELoss()(eager(ge.tensor(xb)), ge.tensor(y))
        loss.backward()
        opts[0].step()
        np.testing.assert_allclose(float(step(xb, y)), loss.item(), rtol=1e-5)
        opt_t.zero_grad()
        torch.nn.functional.mse_loss(theirs(torch.tensor(xb)), torch.tensor(y)).backward()
        opt_t.step()
    step.sync_to_model()
    for key, value in theirs.state_dict().items():
        for model in (eager, compiled):
            np.testing.assert_allclose(
                model.state_dict()[key], value.numpy(), rtol=1e-4, atol=1e-5, err_msg=key
            )
    # and in eval mode, traced and jitted: the running statistics, as torch's
    for model in (eager, theirs):
        model.eval()
    want = theirs(torch.tensor(x)).detach().numpy()
    np.testing.assert_allclose(gc.jit(eager)(x), want, rtol=1e-4, atol=1e-5)


def test_instance_norm_mistakes_are_named_errors() -> None:
    with pytest.raises(gc.ShapeError, match=r"InstanceNorm2d: expected 3D or 4D input"):
        nn.InstanceNorm2d(3)(ge.ones(2, 3))
    with pytest.raises(gc.ShapeError, match=r"InstanceNorm1d\(3\): input has 4 channels"):
        nn.InstanceNorm1d(3, affine=True)(ge.ones(2, 4, 5))
    # without per-channel state any channel count goes, as in torch
    assert nn.InstanceNorm1d(3)(ge.tensor(RNG.normal(size=(2, 4, 5)))).shape == (2, 4, 5)
    with pytest.raises(gc.ShapeError, match="more than 1 spatial element"):
        nn.InstanceNorm2d(3)(ge.ones(2, 3, 1, 1))
    with pytest.raises(gc.GraphcError, match="use_input_stats=False .* needs running_mean"):
        F.instance_norm(ge.ones(2, 3, 4), use_input_stats=False)
    with pytest.raises(gc.ShapeError, match=r"running_mean must have shape \(3,\)"):
        F.instance_norm(ge.ones(2, 3, 4), ge.zeros(2), ge.ones(2))


def test_instance_norm_traces_with_symbolic_batch_and_positions() -> None:
    """group_norm's reshape to (N, C, -1) could not infer -1 beside a symbolic batch, so a
    trace with symbolic H and W failed; the layer normalizes dims 2.. directly."""
    layer = nn.InstanceNorm2d(3, affine=True)
    g = gc.trace(layer, gc.TensorSpec(("B", 3, "H", "W")))
    for shape in ((2, 3, 4, 5), (1, 3, 6, 2)):
        x = RNG.normal(size=shape).astype(np.float32)
        want = layer(ge.tensor(x)).detach().numpy()
        np.testing.assert_allclose(g(x, **gc.lifted_feeds(g)), want, rtol=1e-6, atol=1e-6)
