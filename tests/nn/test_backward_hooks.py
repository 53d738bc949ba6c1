"""Module.register_full_backward_hook and register_full_backward_pre_hook against torch
2.13: what the hooks see (gradients with respect to the call's own inputs and outputs,
None for an input that takes none), replacing gradients, several inputs and outputs,
inputs that need no gradient, removal, and no effect without recording."""

from __future__ import annotations

import numpy as np

import graphc.eager as ge
from graphc import nn
from tests.conftest import needs_torch, torch

RNG = np.random.default_rng(20)


def model(lib):
    extra = {"generator": 0} if lib is nn else {}
    return lib.Sequential(lib.Linear(3, 4, **extra), lib.Tanh(), lib.Linear(4, 2, **extra))


def arrays(values) -> list:
    return [None if v is None else v.detach().numpy().copy() for v in values]


@needs_torch
def test_backward_hooks_see_and_replace_gradients_as_torch() -> None:
    ours, theirs = model(nn), model(torch.nn)
    theirs.load_state_dict({k: torch.tensor(v) for k, v in ours.state_dict().items()})
    seen: dict[str, list] = {"ours": [], "theirs": []}

    def recorder(key: str):
        def hook(module, grad_input, grad_output):
            seen[key].append((arrays(grad_input), arrays(grad_output)))
            return tuple(g * 3 for g in grad_input)  # the input's gradient, tripled

        return hook

    def pre(module, grad_output):
        return (grad_output[0] * 0.5,)  # the output's gradient, halved

    for net, key in ((ours, "ours"), (theirs, "theirs")):
        net[1].register_full_backward_hook(recorder(key))
        net[2].register_full_backward_pre_hook(pre)
    x = RNG.standard_normal((5, 3)).astype(np.float32)
    a, b = ge.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    seed = RNG.standard_normal((5, 2)).astype(np.float32)
    (ours(a) * ge.tensor(seed)).sum().backward()
    (theirs(b) * torch.tensor(seed)).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-5, atol=1e-6)
    for p, q in zip(ours.parameters(), theirs.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-5, atol=1e-6)
    assert len(seen["ours"]) == len(seen["theirs"]) == 1
    for mine, want in zip(seen["ours"][0], seen["theirs"][0]):
        for m, w in zip(mine, want):
            np.testing.assert_allclose(m, w, rtol=1e-5, atol=1e-6)


@needs_torch
def test_inputs_without_gradients_and_several_outputs_as_torch() -> None:
    class Split(torch.nn.Module):
        def forward(self, x, scale, y):
            return x * scale, (x * y).sum()

    class OurSplit(nn.Module):
        def forward(self, x, scale, y):
            return x * scale, (x * y).sum()

    x, y = RNG.standard_normal(4), RNG.standard_normal(4)
    results = []
    for module, lib in ((OurSplit(), ge), (Split(), torch)):
        seen = []
        module.register_full_backward_hook(
            lambda m, gi, go, seen=seen: seen.append((arrays(gi), arrays(go)))
        )
        a = lib.tensor(x, requires_grad=True)
        first, second = module(a, 2.0, lib.tensor(y))  # a number and a constant tensor
        (first.sum() * 3 + second).backward()
        results.append(seen)
    (ours,), (theirs,) = results
    # zeros for the tensor that needs no gradient, None for the number, as torch's
    assert [g is None for g in ours[0]] == [g is None for g in theirs[0]] == [False, True, False]
    for mine, want in zip(ours[0] + ours[1], theirs[0] + theirs[1]):
        if want is not None:
            np.testing.assert_allclose(mine, want, rtol=1e-12)
    # an output that needs no gradient: None in grad_output, as torch's
    results = []
    for module, lib in ((OurSplit(), ge), (Split(), torch)):
        seen = []
        module.register_full_backward_hook(
            lambda m, gi, go, seen=seen: seen.append((arrays(gi), arrays(go)))
        )
        first, second = module(lib.tensor(x), 2.0, lib.tensor(y, requires_grad=True))
        second.backward()
        results.append(seen[0])
    assert [g is None for g in results[0][1]] == [g is None for g in results[1][1]] == [True, False]
    np.testing.assert_allclose(results[0][0][2], results[1][0][2], rtol=1e-12)
    np.testing.assert_array_equal(results[0][0][0], results[1][0][0])  # zeros for x
    # no input takes a gradient: the hook still runs once the outputs' gradients are known
    calls = []
    layer = nn.Linear(2, 1, generator=0)
    handle = layer.register_full_backward_hook(lambda m, gi, go: calls.append(gi))
    layer(ge.ones(3, 2)).sum().backward()
    assert calls == [(None,)]
    handle.remove()
    layer(ge.ones(3, 2)).sum().backward()
    with ge.no_grad():
        layer.register_full_backward_hook(lambda m, gi, go: calls.append(gi))
        layer(ge.ones(3, 2))
    assert len(calls) == 1
