"""Differences from torch 2.13 a tester found in graphc.eager, one section each.

Every case asserts graphc's values directly, and where torch is installed runs the same
code on torch and asserts the two agree (the torch half skips without torch).
"""

from __future__ import annotations

from typing import Any

import pytest

import graphc.eager as ge
from graphc.eager.errors import TensorTypeError
from graphc.ir.errors import AutodiffError, DTypeError, ShapeError


def _torch() -> Any:
    return pytest.importorskip("torch")


def _values(t: Any) -> Any:
    return t.detach().tolist()


# -- ctx.mark_dirty ----------------------------------------------------------------------------


def _dirty_function(lib: Any) -> Any:
    class AddOne(lib.autograd.Function):
        @staticmethod
        def forward(ctx: Any, a: Any, b: Any) -> Any:
            a.add_(1)
            ctx.mark_dirty(a)
            ctx.save_for_backward(a)
            return a, b * 2

        @staticmethod
        def backward(ctx: Any, g: Any, gb: Any) -> Any:
            (a,) = ctx.saved_tensors  # the written values, at the bumped version
            return g * 2, gb * a

    return AddOne


def _mark_dirty(lib: Any) -> dict[str, Any]:
    add_one = _dirty_function(lib)
    m = lib.tensor([1.0, 2.0], requires_grad=True)
    n = m * 1
    r, s = add_one.apply(n, m)
    seen: dict[str, Any] = {
        "same object": r is n,
        "version": n._version,
        "grad_fn": n.grad_fn.name(),
        "values": _values(n),
    }
    (n.sum() + s.sum()).backward()
    seen["grad"] = _values(m.grad)
    try:
        add_one.apply(lib.tensor([1.0], requires_grad=True), m)
        seen["leaf"] = "no error"
    except RuntimeError as exc:
        seen["leaf"] = "a leaf Variable that requires grad" in str(exc)
    base = m * 1
    view = base[0:1]
    add_one_alone = _single_dirty_function(lib)
    add_one_alone.apply(view)
    seen["base"] = _values(base)
    base.sum().backward()
    seen["grad through a view"] = _values(m.grad)
    return seen


def _single_dirty_function(lib: Any) -> Any:
    class AddOneAlone(lib.autograd.Function):
        @staticmethod
        def forward(ctx: Any, a: Any) -> Any:
            a.add_(1)
            ctx.mark_dirty(a)
            return a

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            return g * 2

    return AddOneAlone


def test_mark_dirty_rebases_the_input_onto_the_function() -> None:
    seen = _mark_dirty(ge)
    assert seen == {
        "same object": True,
        "version": 2,  # add_ in forward, and the bump of mark_dirty
        "grad_fn": "AddOneBackward",
        "values": [2.0, 3.0],
        "grad": [2.0 + 2.0, 2.0 + 3.0],  # through AddOne's backward: 2, plus 1 * a
        "leaf": True,
        "base": [2.0, 2.0],
        "grad through a view": [4.0 + 2.0, 5.0 + 1.0],  # accumulated onto the first
    }


def test_mark_dirty_matches_torch() -> None:
    assert _mark_dirty(ge) == _mark_dirty(_torch())


def test_mark_dirty_of_an_input_not_returned_is_an_error() -> None:
    class Doubled(ge.autograd.Function):
        @staticmethod
        def forward(ctx: Any, a: Any) -> Any:
            ctx.mark_dirty(a)
            return a * 2

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            return g

    with pytest.raises(AutodiffError, match="marked as dirty"):
        Doubled.apply(ge.tensor([1.0], requires_grad=True) * 1)


def test_mark_dirty_of_a_leaf_under_no_grad_is_fine() -> None:
    leaf = ge.tensor([1.0], requires_grad=True)
    with ge.no_grad():
        _single_dirty_function(ge).apply(leaf)
    assert leaf.tolist() == [2.0] and leaf.grad_fn is None


# -- max(dim) / min(dim): the whole gradient to the index returned ------------------------------


def _extremum_grads(lib: Any) -> dict[str, Any]:
    seen = {}
    for name in ("x.max(1)[0]", "x.min(1)[0]", "x.max(1, keepdim=True)[0]", "x.max(dim=0).values",
                 "x.max()", "x.min()", "x.amax(1)", "x.amax()"):  # fmt: skip
        x = lib.tensor([[1.0, 3.0, 3.0], [1.0, 1.0, 0.0]], requires_grad=True)
        y = eval(name, {"x": x})
        weights = lib.arange(1.0, y.numel() + 1).reshape(y.shape)
        (y * weights).sum().backward()
        seen[name] = _values(x.grad)
    values, indices = lib.tensor([[1.0, 3.0, 3.0]]).max(1)
    seen["indices"] = indices.tolist()
    return seen


def test_max_along_a_dim_sends_the_gradient_to_its_index() -> None:
    assert _extremum_grads(ge) == {
        "x.max(1)[0]": [[0.0, 1.0, 0.0], [2.0, 0.0, 0.0]],
        "x.min(1)[0]": [[1.0, 0.0, 0.0], [0.0, 0.0, 2.0]],
        "x.max(1, keepdim=True)[0]": [[0.0, 1.0, 0.0], [2.0, 0.0, 0.0]],
        "x.max(dim=0).values": [[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]],
        # without a dim, and amax, share the gradient among ties (torch too)
        "x.max()": [[0.0, 0.5, 0.5], [0.0, 0.0, 0.0]],
        "x.min()": [[0.0, 0.0, 0.0], [0.0, 0.0, 1.0]],
        "x.amax(1)": [[0.0, 0.5, 0.5], [1.0, 1.0, 0.0]],
        "x.amax()": [[0.0, 0.5, 0.5], [0.0, 0.0, 0.0]],
        "indices": [1],
    }


def test_max_along_a_dim_matches_torch() -> None:
    assert _extremum_grads(ge) == _extremum_grads(_torch())


def test_max_along_a_dim_of_ints_and_of_one_element() -> None:
    values, indices = ge.tensor([[4, 9, 9]]).max(1)
    assert values.tolist() == [9] and values.dtype == ge.int64 and indices.tolist() == [1]
    values, indices = ge.tensor(2.0, requires_grad=True).max(0)
    assert values.tolist() == 2.0 and indices.tolist() == 0


# -- the module function equal, masked_fill's dtype, empty all/any, mean of ints -----------------


def _misc(lib: Any) -> dict[str, Any]:
    ints = lib.tensor([1, 2, 3])
    mask = lib.tensor([True, False, True])
    filled = ints.masked_fill(mask, 2.5)
    in_place = lib.tensor([1, 2, 3]).masked_fill_(mask, -2.5)
    value = lib.tensor(3.0, requires_grad=True)
    floats = lib.tensor([1.0, 2.0, 3.0]).masked_fill(mask, value)
    floats.sum().backward()
    empty = lib.zeros(2, 0)
    return {
        "equal": lib.equal(lib.tensor([1.0, 2.0]), lib.tensor([1.0, 3.0])),
        "equal, same": lib.equal(lib.tensor([1.0, 2.0]), lib.tensor([1.0, 2.0])),
        "filled": (filled.tolist(), str(filled.dtype).split(".")[-1]),
        "filled in place": in_place.tolist(),
        "value's grad": value.grad.tolist(),
        "fill names": (
            floats.grad_fn.name(),
            (lib.tensor([1.0]) * value).masked_fill(lib.tensor([True]), 1.0).grad_fn.name(),
        ),  # fmt: skip
        "all, any of none": (lib.zeros(0).all().item(), lib.zeros(0).any().item()),
        "along an empty dim": (empty.all(1).tolist(), empty.any(1).tolist()),
        "along a full dim": (empty.all(0).tolist(), str(empty.all(0).dtype).split(".")[-1]),
        "ints": (lib.tensor([[1, 0], [1, 1]]).all(1).tolist(), lib.tensor([0, 2]).any().item()),
    }


def test_equal_masked_fill_and_empty_all_any_as_torch() -> None:
    assert _misc(ge) == {
        "equal": False,
        "equal, same": True,
        "filled": ([2, 2, 2], "int64"),  # 2.5 cast to the tensor's dtype
        "filled in place": [-2, 2, -2],
        "value's grad": 2.0,
        "fill names": ("MaskedFillBackward1", "MaskedFillBackward0"),
        "all, any of none": (True, False),
        "along an empty dim": ([True, True], [False, False]),
        "along a full dim": ([], "bool"),
        "ints": ([False, True], True),
    }
    assert type(ge.equal(ge.tensor([1.0]), ge.tensor([1.0]))) is bool


def test_equal_masked_fill_and_empty_all_any_match_torch() -> None:
    assert _misc(ge) == _misc(_torch())


def test_mean_and_var_of_ints_raise() -> None:
    for reduction in ("mean", "var", "std"):
        for x in (ge.tensor([1, 2]), ge.tensor([True, False])):
            with pytest.raises(DTypeError, match="floating point"):
                getattr(x, reduction)()
            with pytest.raises(RuntimeError):  # what torch raises
                getattr(ge, reduction)(x, 0)
        assert getattr(ge.tensor([1.0, 3.0]), reduction)().item() > 0


# -- grad_fn names -------------------------------------------------------------------------------

GRAD_FN_NAMES = {
    "x[0]": "SelectBackward0",
    "x[:, 1]": "SelectBackward0",
    "x[0:1, 1]": "SelectBackward0",
    "x[1, :]": "SelectBackward0",
    "x[..., 0]": "SelectBackward0",
    "x[0, 1:]": "SliceBackward0",
    "x[0:1]": "SliceBackward0",
    "x[:]": "SliceBackward0",
    "x[None]": "UnsqueezeBackward0",
    "x[0, None]": "UnsqueezeBackward0",
    "x.select(1, 0)": "SelectBackward0",
    "x.narrow(1, 0, 2)": "SliceBackward0",
    "x[0].t()": "TBackward0",
    "x.transpose(0, 1)": "TransposeBackward0",
    "x.swapaxes(0, 1)": "TransposeBackward0",
    "x.permute(1, 0, 2)": "PermuteBackward0",
    "lib.transpose(x, 0, 1)": "TransposeBackward0",
    "lib.t(x[0])": "TBackward0",
    "x.unsqueeze(-1)": "UnsqueezeBackward0",
    "lib.unsqueeze(x, 0)": "UnsqueezeBackward0",
    "x[0:1].squeeze()": "SqueezeBackward0",
    "x[0:1].squeeze(0)": "SqueezeBackward1",
    "x.squeeze(1)": "SqueezeBackward1",
    "x[0:1].squeeze((0,))": "SqueezeBackward2",
    "lib.squeeze(x[0:1])": "SqueezeBackward0",
    "lib.stack([x, x], 1)": "StackBackward0",
    "x.clone()": "CloneBackward0",
    "x.transpose(0, 1).contiguous()": "CloneBackward0",
    "x.max()": "MaxBackward1",
    "x.min()": "MinBackward1",
    "lib.max(x)": "MaxBackward1",
    "x.max(1)[0]": "MaxBackward0",
    "x.min(dim=2, keepdim=True).values": "MinBackward0",
    "x.amax(1)": "AmaxBackward0",
    "x.amin()": "AminBackward0",
    "lib.amax(x, 1)": "AmaxBackward0",
    "x.masked_fill(x > 0, 1.0)": "MaskedFillBackward0",
    "x.reshape(24)": "ViewBackward0",
    "lib.cat([x, x])": "CatBackward0",
    "x.double()": "ToCopyBackward0",
}


def _grad_fn_names(lib: Any) -> dict[str, str]:
    x = lib.ones(2, 3, 4, requires_grad=True)
    return {code: eval(code, {"x": x, "lib": lib}).grad_fn.name() for code in GRAD_FN_NAMES}


def test_grad_fn_names_of_methods_sharing_an_op() -> None:
    assert _grad_fn_names(ge) == GRAD_FN_NAMES


def test_grad_fn_names_match_torch() -> None:
    assert _grad_fn_names(_torch()) == GRAD_FN_NAMES


# -- a retained grad follows an in-place op; hooks registered before stay ------------------------


def _retained_after_in_place(lib: Any) -> dict[str, Any]:
    seen: dict[str, Any] = {}

    def watch(key: str) -> Any:
        def hook(g: Any) -> None:
            seen[key] = _values(g)

        return hook

    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    y.retain_grad()
    y.register_hook(watch("hook before"))
    y.mul_(3)
    y.register_hook(watch("hook after"))
    (y * lib.tensor([1.0, 10.0])).sum().backward()
    seen["grad"], seen["x"] = _values(y.grad), _values(x.grad)
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    y.retain_grad()
    y[0:1].mul_(3)  # through a view: the base's history becomes CopySlices
    (y * lib.tensor([1.0, 10.0])).sum().backward()
    seen["base grad"], seen["base x"] = _values(y.grad), _values(x.grad)
    return seen


def test_retained_grad_is_of_the_value_after_an_in_place_op() -> None:
    assert _retained_after_in_place(ge) == {
        "hook before": [3.0, 30.0],  # the gradient of the old value
        "hook after": [1.0, 10.0],
        "grad": [1.0, 10.0],  # of the new value
        "x": [6.0, 60.0],
        "base grad": [1.0, 10.0],
        "base x": [6.0, 20.0],
    }


def test_retained_grad_after_an_in_place_op_matches_torch() -> None:
    assert _retained_after_in_place(ge) == _retained_after_in_place(_torch())


# -- autograd.grad and tensor hooks of the inputs asked for --------------------------------------


def _grads_with_hooks(lib: Any) -> dict[str, Any]:
    def hooked() -> tuple[Any, Any]:
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        h = x * 3
        h.register_hook(lambda g: g * 100)
        return x, h

    seen = {}
    x, h = hooked()
    seen["h and x"] = [_values(g) for g in lib.autograd.grad((h * h).sum(), [h, x])]
    x, h = hooked()
    seen["x and h"] = [_values(g) for g in lib.autograd.grad((h * h).sum(), [x, h])]
    x, h = hooked()
    seen["h alone"] = _values(lib.autograd.grad((h * h).sum(), h)[0])
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    x.register_hook(lambda g: g * 100)
    seen["a leaf"] = _values(lib.autograd.grad((x * x).sum(), x)[0])
    x, h = hooked()
    (h * h).sum().backward(inputs=[h, x])
    seen["backward(inputs=)"] = [_values(h.grad), _values(x.grad)]
    return seen


def test_grad_captures_a_running_node_before_its_hooks() -> None:
    assert _grads_with_hooks(ge) == {
        # h's node runs for x as well: its gradient is taken before h's hook (x's is after)
        "h and x": [[6.0, 12.0], [1800.0, 3600.0]],
        "x and h": [[1800.0, 3600.0], [6.0, 12.0]],
        # a node that runs only to be read gets its hooks first
        "h alone": [600.0, 1200.0],
        "a leaf": [200.0, 400.0],
        "backward(inputs=)": [[600.0, 1200.0], [1800.0, 3600.0]],  # retained: after hooks
    }


def test_grad_and_hooks_match_torch() -> None:
    assert _grads_with_hooks(ge) == _grads_with_hooks(_torch())


# -- no "modified by an inplace operation" error where backward never reads the value -----------


def _after_in_place(lib: Any) -> dict[str, Any]:
    seen = {}
    for code in ("a.max(0)[0]", "a.min(0)[0]", "2 / a", "1 / a", "a.sort()[0]"):
        x = lib.tensor([0.5, 1.0, 2.0], requires_grad=True)
        a = x * 1
        y = eval(code, {"a": a})
        a.add_(1)
        y.sum().backward()
        seen[code] = [round(v, 6) for v in _values(x.grad)]
    seen["2 / a, grad_fn"] = (2 / x).grad_fn.name()
    seen["2 / a, values"] = _values(2 / lib.tensor([0.5, 4.0]))
    return seen


def test_backward_reads_no_value_written_in_place_after_max_dim_or_a_scalar_over_x() -> None:
    assert _after_in_place(ge) == {
        "a.max(0)[0]": [0.0, 0.0, 1.0],  # only the indices are needed
        "a.min(0)[0]": [1.0, 0.0, 0.0],
        "2 / a": [-8.0, -2.0, -0.5],  # reciprocal(a) * 2: the result is needed, not a
        "1 / a": [-4.0, -1.0, -0.25],
        "a.sort()[0]": [1.0, 1.0, 1.0],
        "2 / a, grad_fn": "MulBackward0",
        "2 / a, values": [4.0, 0.5],
    }


def test_backward_after_in_place_matches_torch() -> None:
    assert _after_in_place(ge) == _after_in_place(_torch())


# -- assigning .grad, and hooks returning another kind of gradient --------------------------------


def _grad_checks(lib: Any) -> dict[str, Any]:
    def outcome(action: Any) -> str:
        try:
            action()
        except RuntimeError:  # torch's for size and dtype; ShapeError, DTypeError here
            return "RuntimeError"
        except TypeError:  # torch's for a non-tensor, graphc's TensorTypeError
            return "TypeError"
        return "ok"

    def assign(value: Any) -> Any:
        def action() -> None:
            x = lib.tensor([1.0, 2.0], requires_grad=True)
            x.grad = value
            (x * 2).sum().backward()

        return action

    def hooked(hook: Any, leaf: bool) -> Any:
        def action() -> None:
            x = lib.tensor([1.0, 2.0], requires_grad=True)
            h = x if leaf else x * 1
            h.register_hook(hook)
            (h * 2).sum().backward()

        return action

    seen = {
        "shape": outcome(assign(lib.zeros(3))),
        "rank": outcome(assign(lib.zeros(1, 2))),
        "dtype": outcome(assign(lib.zeros(2, dtype=lib.float64))),
        "list": outcome(assign([1.0, 2.0])),
        "fits": outcome(assign(lib.ones(2))),
        "None": outcome(assign(None)),
    }
    for leaf in (True, False):
        where = "leaf" if leaf else "non-leaf"
        seen[f"{where}: dtype"] = outcome(hooked(lambda g: g.double(), leaf))
        seen[f"{where}: shape"] = outcome(hooked(lambda g: g.sum(), leaf))
        seen[f"{where}: list"] = outcome(hooked(lambda g: [1.0, 2.0], leaf))
        seen[f"{where}: values"] = outcome(hooked(lambda g: g * 3, leaf))
    return seen


def test_grad_assignment_and_hooks_keep_shape_and_dtype() -> None:
    x = ge.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(ShapeError, match="shape"):
        x.grad = ge.zeros(3)
    with pytest.raises(DTypeError, match="dtype"):
        x.grad = ge.zeros(2, dtype=ge.float64)
    with pytest.raises(TensorTypeError):
        x.grad = [1.0, 2.0]
    x.register_hook(lambda g: g.double())
    with pytest.raises(DTypeError, match="changed the type of value"):
        (x * 2).sum().backward()
    assert _grad_checks(ge) == {
        "shape": "RuntimeError",
        "rank": "RuntimeError",
        "dtype": "RuntimeError",
        "list": "TypeError",
        "fits": "ok",
        "None": "ok",
        **{
            f"{where}: {change}": outcome
            for where in ("leaf", "non-leaf")
            for change, outcome in [
                ("dtype", "RuntimeError"),
                ("shape", "RuntimeError"),
                ("list", "TypeError"),
                ("values", "ok"),
            ]
        },
    }


def test_grad_assignment_and_hooks_match_torch() -> None:
    assert _grad_checks(ge) == _grad_checks(_torch())


# -- double backward through relu and its piecewise-linear kin (not fixed yet) -------------------


@pytest.mark.xfail(
    strict=True,
    reason="the vjp rules of relu, leaky_relu and hardtanh in graphc/ops mask ct by a comparison "
    "(no gradient), where torch's threshold_backward is a function of the output with a zero "
    "derivative; the fix belongs to those rules",
)
def test_gradient_of_relu_is_differentiable_with_zero_second_derivative() -> None:
    import graphc.nn.functional as F

    for activation in (ge.relu, lambda u: F.leaky_relu(u, 0.1), F.hardtanh, F.relu6):
        u = ge.tensor([0.5, -1.0], requires_grad=True)
        (g,) = ge.autograd.grad(activation(u).sum(), u, create_graph=True)
        assert g.requires_grad
        (second,) = ge.autograd.grad(g.sum(), u, allow_unused=True)
        assert second is not None and second.tolist() == [0.0, 0.0]


# -- torch-style functions on traced values, and torch's names for new ops' nodes ---------------


def _torch_style_model(lib: Any) -> Any:
    """A function written against torch's module functions, with dim= and positions."""

    def model(x: Any) -> Any:
        a = lib.sum(x, dim=1) + lib.amax(x, 1) + lib.max(x, dim=1)[0] + lib.logsumexp(x, 1)
        b = lib.nansum(x, dim=1) + lib.var(x, 1) + lib.mean(x, 1, keepdim=True)[:, 0]
        c = lib.diagonal(lib.reshape(x, (2, 2, 3)), 0, 1, 0).sum(dim=0)
        d = lib.median(x, 1)[0] + lib.median(x, dim=1, keepdim=True)[0][:, 0]
        return a + b + lib.t(lib.clamp(lib.transpose(x, 0, 1), -0.5, 0.5)).sum(1) + c.sum() + d

    return model


def test_torch_style_functions_trace_as_the_op_functions_do() -> None:
    """graphc.eager.sum(x, dim=1) and its kin took only tensors: tracing a model written
    with them failed converting the graph value to an array. They take graph values now,
    giving the eager result (and torch's)."""
    import numpy as np

    import graphc as gc

    x = np.random.default_rng(3).standard_normal((4, 3))
    model = _torch_style_model(ge)
    eager = model(ge.tensor(x)).numpy()
    np.testing.assert_allclose(gc.trace(model, x)(x), eager, rtol=1e-13)
    torch = _torch()
    want = _torch_style_model(torch)(torch.tensor(x)).numpy()
    np.testing.assert_allclose(eager, want, rtol=1e-12)


def test_nansum_and_diagonal_nodes_have_torchs_names() -> None:
    def names(lib: Any) -> list[str]:
        x = lib.ones(3, 3, requires_grad=True)
        made = [x.nansum(), x.nansum(1), lib.nansum(x, dim=0), x.diagonal(), lib.diagonal(x, 1)]
        made += [x.diagonal(0, 1, 0), x.cumprod(0), x.tan(), x.atan2(x), x[0].outer(x[1])]
        return [t.grad_fn.name() for t in made]

    got = names(ge)
    assert got[:6] == ["NansumBackward0"] * 3 + ["DiagonalBackward0"] * 3
    assert got == names(_torch())
