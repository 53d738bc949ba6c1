"""Adam on float32 parameters: torch computes the bias corrections from the step as a
Python float (a double), so graphc does too, in the eager step and the compiled one."""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
from graphc import nn, optim

W0 = np.array([1.0, -2.0, 3.0], np.float32)
STEPS = 100


def reference_adam_float32(w: np.ndarray, steps: int, lr: float = 0.01) -> np.ndarray:
    """torch's Adam on float32 with the gradient of sum(w**2): the moments in float32, the
    bias corrections in double, rounded to float32 where they scale the update."""
    beta1, beta2, eps = 0.9, 0.999, 1e-8
    f32 = np.float32
    m, v = np.zeros_like(w), np.zeros_like(w)
    for t in range(1, steps + 1):
        g = w * f32(2)
        m = f32(beta1) * m + f32(1 - beta1) * g
        v = f32(beta2) * v + f32(1 - beta2) * (g * g)
        step_size = f32(lr / (1 - beta1**t))
        correction = f32(np.sqrt(1 - beta2**t))
        w = w - step_size * (m / (np.sqrt(v) / correction + f32(eps)))
    return w


def eager_adam(steps: int) -> np.ndarray:
    w = ge.tensor(W0, requires_grad=True)
    opt = optim.Adam([w], lr=0.01)
    for _ in range(steps):
        opt.zero_grad()
        (w**2).sum().backward()
        opt.step()
    assert w.dtype == np.float32 and opt.state[0]["step"].item() == steps
    return w.detach().numpy()


def test_float32_adam_takes_the_bias_corrections_in_double() -> None:
    got = eager_adam(STEPS)
    float32_corrections = [-3.4e-06, 5.5e-06, -6.7e-06]  # what they gave (torch - graphc)
    np.testing.assert_allclose(got, reference_adam_float32(W0, STEPS), rtol=0, atol=1e-7)
    assert np.abs(got - reference_adam_float32(W0, STEPS)).max() < min(
        map(abs, float32_corrections)
    )


def test_float32_adam_matches_torch() -> None:
    torch = pytest.importorskip("torch")
    w = torch.tensor(W0, requires_grad=True)
    opt = torch.optim.Adam([w], lr=0.01)
    for _ in range(STEPS):
        opt.zero_grad()
        (w**2).sum().backward()
        opt.step()
    # float32 rounding of the per-step arithmetic only (it was ~6e-6 apart)
    np.testing.assert_allclose(eager_adam(STEPS), w.detach().numpy(), rtol=0, atol=3e-7)


def test_float32_static_step_equals_the_eager_step() -> None:
    for opt_level in (0, 2):
        _check_static_equals_eager(opt_level)


def _check_static_equals_eager(opt_level: int) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 4)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64)

    def model() -> nn.Module:
        return nn.Linear(4, 2, generator=0)

    eager_model, static_model = model(), model()
    eager_opt = optim.Adam(eager_model.parameters(), lr=0.05)
    static_opt = optim.Adam(static_model.parameters(), lr=0.05)
    loss_fn = nn.CrossEntropyLoss()
    step = gc.compile_train_step(static_model, loss_fn, static_opt, (x, y), opt_level)
    for _ in range(20):
        eager_opt.zero_grad()
        loss_fn(eager_model(ge.from_numpy(x)), ge.from_numpy(y)).backward()
        eager_opt.step()
        step(x, y)
    step.sync_to_model()
    for (name, a), (_, b) in zip(eager_model.named_parameters(), static_model.named_parameters()):
        assert a.dtype == np.float32
        np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-6, err_msg=name)
