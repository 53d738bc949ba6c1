"""Normalization and activation layers against PyTorch: state_dict keys and round trips,
values and gradients, and batch norm's running statistics after eager and compiled
training steps."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
from graphc import nn, optim
from tests.conftest import needs_torch, torch

RNG = np.random.default_rng(0)


def to_torch(state: dict[str, np.ndarray]) -> dict[str, Any]:
    return {k: torch.from_numpy(np.array(v)) for k, v in state.items()}


def assert_state_close(ours: dict, theirs: dict, rtol: float = 1e-5, atol: float = 1e-6) -> None:
    theirs = {k: v.detach().numpy() if hasattr(v, "detach") else v for k, v in theirs.items()}
    assert list(ours) == list(theirs)
    for key in theirs:
        assert ours[key].dtype == theirs[key].dtype, key
        np.testing.assert_allclose(ours[key], theirs[key], rtol=rtol, atol=atol, err_msg=key)


# -- state_dict: PyTorch's keys, order and values ------------------------------------------


def _pairs() -> list[tuple[nn.Module, Any]]:
    return [
        (nn.BatchNorm1d(3), torch.nn.BatchNorm1d(3)),
        (nn.BatchNorm2d(4, affine=False), torch.nn.BatchNorm2d(4, affine=False)),
        (nn.BatchNorm2d(2, track_running_stats=False, bias=False),
         torch.nn.BatchNorm2d(2, track_running_stats=False, bias=False)),
        (nn.LayerNorm((3, 4)), torch.nn.LayerNorm((3, 4))),
        (nn.LayerNorm(5, bias=False), torch.nn.LayerNorm(5, bias=False)),
        (nn.GroupNorm(2, 4), torch.nn.GroupNorm(2, 4)),
        (nn.GroupNorm(1, 3, bias=False), torch.nn.GroupNorm(1, 3, bias=False)),
        (nn.Sequential(nn.BatchNorm1d(3), nn.Linear(3, 2, generator=0), nn.LayerNorm(2)),
         torch.nn.Sequential(torch.nn.BatchNorm1d(3), torch.nn.Linear(3, 2), torch.nn.LayerNorm(2))),
    ]  # fmt: skip


@needs_torch
@pytest.mark.parametrize("index", range(8))
def test_state_dict_has_torchs_keys_and_round_trips_both_ways(index: int) -> None:
    ours, theirs = _pairs()[index]
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert repr(ours).replace("generator=0", "") == repr(theirs) or isinstance(ours, nn.Sequential)
    # PyTorch's values into graphc, changed first so the copy is seen
    with torch.no_grad():
        for value in theirs.state_dict().values():
            value.copy_(torch.tensor(RNG.normal(size=value.shape) * 3)) if value.is_floating_point() \
                else value.fill_(7)  # fmt: skip
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    assert_state_close(ours.state_dict(), theirs.state_dict(), rtol=0, atol=0)
    # and back
    fresh = _pairs()[index][1]
    fresh.load_state_dict(to_torch(ours.state_dict()))
    assert_state_close(ours.state_dict(), fresh.state_dict(), rtol=0, atol=0)


@needs_torch
@pytest.mark.parametrize(
    "make",
    [
        lambda m: m.Softplus(2.0, 5.0),
        lambda m: m.LeakyReLU(0.2),
        lambda m: m.ELU(0.5, inplace=True),
        lambda m: m.CELU(1.5),
        lambda m: m.SELU(),
        lambda m: m.SiLU(),
        lambda m: m.Mish(),
        lambda m: m.GELU(),
        lambda m: m.GELU(approximate="tanh"),
        lambda m: m.Hardsigmoid(),
        lambda m: m.Hardswish(),
        lambda m: m.Hardtanh(-2.0, 2.0),
        lambda m: m.ReLU6(inplace=True),
        lambda m: m.Softsign(),
        lambda m: m.LogSigmoid(),
        lambda m: m.Softmax(dim=1),
        lambda m: m.LogSoftmax(dim=0),
    ],
    ids=[
        "Softplus(2.0, 5.0)",
        "LeakyReLU(0.2)",
        "ELU(0.5, inplace=True)",
        "CELU(1.5)",
        "SELU()",
        "SiLU()",
        "Mish()",
        "GELU()",
        "GELU(approximate=tanh)",
        "Hardsigmoid()",
        "Hardswish()",
        "Hardtanh(-2.0, 2.0)",
        "ReLU6(inplace=True)",
        "Softsign()",
        "LogSigmoid()",
        "Softmax(dim=1)",
        "LogSoftmax(dim=0)",
    ],
)
def test_activation_layers_match_torch(make: Any) -> None:
    ours, theirs = make(nn), make(torch.nn)
    assert repr(ours) == repr(theirs)
    x = RNG.normal(0, 3, (4, 5))
    xt, tt = ge.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    y, yt = ours(xt), theirs(tt.clone())  # PyTorch's inplace=True needs a non-leaf
    np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy(), rtol=1e-10, atol=1e-12)
    (y * y).sum().backward()
    (yt * yt).sum().backward()
    np.testing.assert_allclose(xt.grad.numpy(), tt.grad.numpy(), rtol=1e-6, atol=1e-9)
    assert x.tolist() == xt.detach().numpy().tolist()  # inplace=True leaves the input alone
    g = gc.trace(ours, x)
    np.testing.assert_array_equal(g(x), y.detach().numpy())


@needs_torch
@pytest.mark.parametrize(
    "make",
    [
        lambda m: m.LayerNorm((3, 4), eps=1e-3),
        lambda m: m.GroupNorm(3, 6),
        lambda m: m.BatchNorm2d(3),
    ],
)
def test_norm_layers_match_torch_values_and_parameter_gradients(make: Any) -> None:
    ours, theirs = make(nn), make(torch.nn)
    with torch.no_grad():
        for p in theirs.parameters():
            p.copy_(torch.tensor(RNG.normal(size=p.shape), dtype=torch.float32))
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    shape = (2, 6, 3, 4) if isinstance(ours, nn.GroupNorm) else (2, 3, 3, 4)
    x = RNG.normal(1, 2, shape).astype(np.float32)
    y, yt = ours(ge.tensor(x)), theirs(torch.tensor(x))
    np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy(), rtol=2e-5, atol=2e-5)
    (y * y).sum().backward()
    (yt * yt).sum().backward()
    grads = {n: p.grad.numpy() for n, p in ours.named_parameters()}
    for name, p in theirs.named_parameters():
        np.testing.assert_allclose(grads[name], p.grad.numpy(), rtol=1e-4, atol=1e-4)


# -- batch norm: running statistics after eager and compiled training ------------------------


def _model(seed: int, momentum: Any = 0.1, lib: Any = nn) -> Any:
    extra = {"generator": seed} if lib is nn else {}
    bn = lib.BatchNorm1d(4, momentum=None)
    return lib.Sequential(
        lib.BatchNorm2d(2, momentum=momentum),
        lib.Flatten(),
        lib.Linear(18, 4, **extra),
        bn,
        lib.Tanh(),
        lib.Linear(4, 3, **extra),
    )


def _batches(steps: int) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(1)
    x = rng.normal(1.0, 2.0, (20, 2, 3, 3)).astype(np.float32)
    y = rng.normal(size=(20, 3)).astype(np.float32)
    sizes = [8, 8, 4]  # the last batch of each pass is smaller: another plan, same state
    out, start = [], 0
    for t in range(steps):
        size = sizes[t % 3]
        out.append((x[start : start + size] * (1 + t % 2), y[start : start + size]))
        start = (start + size) % 20
    return out


@needs_torch
@pytest.mark.parametrize("momentum", [0.1, None])
@pytest.mark.parametrize("opt_level", [0, 2])
def test_batch_norm_training_matches_torch_eagerly_and_compiled(
    momentum: Any, opt_level: int
) -> None:
    eager, compiled = _model(0, momentum), _model(0, momentum)
    theirs = _model(0, momentum, torch.nn)
    theirs.load_state_dict(to_torch(eager.state_dict()))
    opt_e = optim.SGD(eager.parameters(), lr=0.05, momentum=0.9)
    opt_c = optim.SGD(compiled.parameters(), lr=0.05, momentum=0.9)
    opt_t = torch.optim.SGD(theirs.parameters(), lr=0.05, momentum=0.9)
    loss_fn = nn.MSELoss()
    batches = _batches(7)
    # on numpy: the compiled step runs eager's kernels, so it gives eager's bits (native's
    # own kernels are held to their declared bounds: tests/runtime/test_differential.py)
    step = gc.compile_train_step(
        compiled, loss_fn, opt_c, batches[0], opt_level=opt_level, backend="numpy"
    )
    for xb, yb in batches:
        opt_e.zero_grad()
        loss = loss_fn(eager(ge.from_numpy(xb)), ge.from_numpy(yb))
        loss.backward()
        opt_e.step()
        assert float(step(xb, yb)) == loss.item()  # the same kernels: the same bits
        opt_t.zero_grad()
        torch.nn.functional.mse_loss(theirs(torch.from_numpy(xb)), torch.from_numpy(yb)).backward()
        opt_t.step()
    assert_state_close(eager.state_dict(), theirs.state_dict())
    assert eager.state_dict()["0.num_batches_tracked"] == 7
    assert sorted(step.buffers()) == sorted(
        k for k in eager.state_dict() if "running" in k or "num" in k
    )
    step.sync_to_model()
    for key, value in eager.state_dict().items():
        np.testing.assert_array_equal(compiled.state_dict()[key], value, err_msg=key)
    # eval mode: the running statistics, as in PyTorch
    eager.eval()
    theirs.eval()
    x = batches[0][0]
    np.testing.assert_allclose(eager(ge.from_numpy(x)).detach().numpy(),
                               theirs(torch.from_numpy(x)).detach().numpy(), rtol=1e-4, atol=1e-5)  # fmt: skip


@needs_torch
def test_a_batch_norm_applied_twice_updates_twice_eagerly_and_compiled() -> None:
    def make(lib: Any) -> Any:
        bn = lib.BatchNorm1d(3, momentum=0.3)
        return lib.Sequential(bn, lib.Linear(3, 3, **({"generator": 2} if lib is nn else {})), bn)

    eager, compiled, theirs = make(nn), make(nn), make(torch.nn)
    theirs.load_state_dict(to_torch(eager.state_dict()))
    opt = optim.SGD(compiled.parameters(), lr=0.1)
    x = RNG.normal(size=(6, 3)).astype(np.float32)
    y = RNG.normal(size=(6, 3)).astype(np.float32)
    step = gc.compile_train_step(compiled, nn.MSELoss(), opt, (x, y))
    step(x, y)
    eager(ge.from_numpy(x))
    theirs(torch.from_numpy(x))
    assert eager.state_dict()["0.num_batches_tracked"] == 2
    assert_state_close(eager.state_dict(), theirs.state_dict())
    buffers = step.buffers()
    for key in ("0.running_mean", "0.running_var", "0.num_batches_tracked"):
        np.testing.assert_allclose(buffers[key], eager.state_dict()[key], rtol=1e-6, err_msg=key)


def test_a_plain_trace_of_a_training_batch_norm_stays_pure() -> None:
    bn = nn.BatchNorm1d(2)
    x = RNG.normal(size=(5, 2)).astype(np.float32)
    g = gc.trace(bn, x)
    used = {o.inputs[0] for o in g.outputs}
    for node in reversed(g.nodes):
        if node in used:
            used.update(node.inputs)
    assert [n.name for n in g.nodes if n not in used and n.kind == "op"] == []  # no dead nodes
    assert set(gc.lifted_tensors(g).values()) == {bn.weight, bn.bias}  # stats: not lifted
    out = g(x, **gc.lifted_feeds(g))
    np.testing.assert_array_equal(bn.running_mean.numpy(), [0.0, 0.0])
    assert bn.num_batches_tracked.item() == 0
    np.testing.assert_allclose(
        out, (x - x.mean(0)) / np.sqrt(x.var(0) + 1e-5), rtol=1e-5, atol=1e-6
    )


@needs_torch
def test_batch_norm_without_running_stats_or_affine_matches_torch() -> None:
    ours = nn.BatchNorm2d(3, affine=False, track_running_stats=False)
    theirs = torch.nn.BatchNorm2d(3, affine=False, track_running_stats=False)
    assert ours.state_dict() == {} and list(ours.parameters()) == []
    x = RNG.normal(size=(2, 3, 2, 2)).astype(np.float32)
    for mode in ("train", "eval"):  # batch statistics in both modes
        getattr(ours, mode)()
        getattr(theirs, mode)()
        np.testing.assert_allclose(ours(ge.from_numpy(x)).numpy(),
                                   theirs(torch.from_numpy(x)).numpy(), rtol=1e-5, atol=1e-6)  # fmt: skip


def test_batch_norm_checks_its_input() -> None:
    with pytest.raises(gc.ShapeError, match="expected 4D input"):
        nn.BatchNorm2d(3)(ge.ones(2, 3))
    with pytest.raises(gc.ShapeError, match="channels"):
        nn.BatchNorm1d(3)(ge.ones(2, 4))
    with pytest.raises(gc.GraphcError, match="divisible"):
        nn.GroupNorm(3, 4)
    bn = nn.BatchNorm1d(2)
    bn(ge.ones(3, 2) * 5)
    bn.reset_running_stats()
    assert bn.running_mean.tolist() == [0.0, 0.0] and bn.num_batches_tracked.item() == 0


@needs_torch
@pytest.mark.parametrize("groups, shape", [(1, ("B", 3, "H", "W")), (3, ("B", 6, "T"))])
def test_group_norm_traces_over_symbolic_positions(groups: int, shape: tuple) -> None:
    """GroupNorm over positions of symbolic size (a fully convolutional model's H and W)
    was a trace-time error, "reshape: cannot infer -1 of ('B', 1, -1)"."""
    layer = nn.GroupNorm(groups, shape[1], dtype="float64")
    g = gc.trace(layer, gc.TensorSpec(shape, "float64"))
    for sizes in ((2, 4, 5), (1, 3, 7)):
        x = np.random.default_rng(0).standard_normal(
            (sizes[0], shape[1], *sizes[1 : len(shape) - 1])
        )
        want = torch.nn.functional.group_norm(torch.tensor(x), groups).numpy()
        np.testing.assert_allclose(g(x, **gc.lifted_feeds(g)), want, rtol=1e-12, atol=1e-12)
