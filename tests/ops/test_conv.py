"""Convolutions against PyTorch: values, gradients and second derivatives of conv1d,
conv2d, conv_transpose1d and conv_transpose2d over stride, padding (incl. asymmetric),
dilation and groups edge cases, in float32 and float64, eagerly and as compiled graphs.

The op case table (tests/cases/conv.py) already checks every op against a numpy
reference, finite differences and the runtime; this file holds graphc to PyTorch's
semantics, its functional spellings and errors, and to its own determinism.
"""

from __future__ import annotations

import doctest
import importlib
import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
from graphc.nn import functional as F
from graphc.ops import conv_kernels
from tests.cases.conv import conv2d_ref
from tests.conftest import needs_torch, torch
from tests.differential import check_levels

RNG = np.random.default_rng(0)
TOL = {"float32": {"rtol": 2e-5, "atol": 2e-5}, "float64": {"rtol": 1e-10, "atol": 1e-10}}

# (input shape, weight shape, attrs): every edge case the issue names
CONV2D = [
    ((2, 3, 6, 5), (4, 3, 3, 3), {}),
    ((2, 3, 4, 4), (5, 3, 1, 1), {"stride": 2}),  # 1x1 kernel
    ((2, 2, 3, 4), (3, 2, 3, 4), {}),  # kernel = input size
    ((2, 4, 5, 5), (4, 1, 3, 3), {"groups": 4, "padding": 1}),  # depthwise
    ((1, 4, 6, 6), (8, 1, 3, 3), {"groups": 4, "stride": 2}),  # depthwise, multiplier 2
    ((1, 6, 5, 4), (4, 3, 2, 2), {"groups": 2}),
    ((2, 2, 8, 7), (3, 2, 3, 3), {"dilation": 2, "padding": 2}),
    ((2, 2, 7, 7), (3, 2, 2, 2), {"stride": 3}),  # stride > kernel
    ((1, 2, 6, 6), (2, 2, 3, 3), {"stride": 2, "padding": 1}),
    ((1, 2, 7, 8), (2, 2, 3, 2), {"stride": (2, 3), "dilation": (1, 2), "padding": (0, 1)}),
    ((1, 2, 5, 6), (3, 2, 3, 4), {"padding": "same"}),  # even kernel: the odd pad at the end
    ((1, 2, 5, 6), (3, 2, 3, 3), {"padding": "same", "dilation": 2}),
    ((1, 2, 5, 6), (3, 2, 3, 3), {"stride": (2,), "padding": (1,), "dilation": [2]}),
    ((0, 2, 4, 4), (3, 2, 3, 3), {"padding": 1}),  # empty batch
]
CONV_TRANSPOSE2D = [
    ((2, 3, 3, 3), (3, 2, 3, 3), {}),
    ((1, 2, 3, 3), (2, 3, 3, 3), {"stride": 2, "padding": 1, "output_padding": 1}),
    ((2, 3, 3, 4), (3, 2, 1, 1), {"stride": 2}),  # 1x1 kernel
    ((2, 4, 4, 4), (4, 1, 3, 3), {"groups": 4, "stride": 2}),  # depthwise
    ((1, 4, 3, 3), (4, 3, 2, 2), {"groups": 2, "dilation": 2}),
    ((2, 2, 3, 3), (2, 2, 3, 3), {"dilation": 2, "padding": 1, "output_padding": 1, "stride": 2}),
    ((1, 2, 3, 3), (2, 2, 2, 2), {"stride": 3, "output_padding": 2}),  # stride > kernel
    ((1, 2, 4, 3), (2, 2, 3, 3), {"stride": (2, 1), "padding": (1, 0)}),
    ((2, 2, 1, 1), (2, 3, 3, 4), {}),  # kernel = output size
    ((0, 2, 3, 3), (2, 3, 3, 3), {"stride": 2}),
]
CONV1D = [
    ((2, 3, 9), (4, 3, 3), {}),
    ((2, 4, 9), (4, 1, 3), {"groups": 4, "padding": 1, "stride": 2}),
    ((2, 2, 9), (3, 2, 2), {"dilation": 2, "padding": 2, "stride": 3}),
    ((1, 2, 6), (2, 2, 4), {"padding": "same"}),
    ((1, 2, 6), (2, 2, 6), {}),
]
CONV_TRANSPOSE1D = [
    ((2, 3, 5), (3, 2, 3), {"stride": 2, "padding": 1, "output_padding": 1}),
    ((2, 4, 5), (4, 1, 2), {"groups": 4, "dilation": 3}),
]


def _ids(cases: list) -> list[str]:
    return [f"{x}-{w}-{a}".replace(" ", "") for x, w, a in cases]


def _torch_fn(name: str) -> Callable[..., Any]:
    return getattr(torch.nn.functional, name)


def compare_with_torch(
    name: str, x_shape: tuple, w_shape: tuple, attrs: dict, dtype: str, bias: bool = True
) -> None:
    """F.<name> (eager) against torch.nn.functional.<name>: the output, and the gradients
    of the input, the weight and the bias for a random output cotangent."""
    x = RNG.standard_normal(x_shape).astype(dtype)
    w = RNG.standard_normal(w_shape).astype(dtype)
    out_channels = w_shape[0] if "transpose" not in name else w_shape[1] * attrs.get("groups", 1)
    b = RNG.standard_normal(out_channels).astype(dtype) if bias else None
    tensors = [torch.tensor(v, requires_grad=True) for v in (x, w, b) if v is not None]
    want = _torch_fn(name)(*tensors[:2], tensors[2] if bias else None, **attrs)
    ct = RNG.standard_normal(tuple(want.shape)).astype(dtype)
    want.backward(torch.tensor(ct))
    ours = [ge.tensor(v, requires_grad=True) for v in (x, w, b) if v is not None]
    got = getattr(F, name)(*ours[:2], ours[2] if bias else None, **attrs)
    assert got.dtype == np.dtype(dtype) and got.shape == tuple(want.shape)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), **TOL[dtype])
    got.backward(ge.tensor(ct))
    for mine, theirs, what in zip(ours, tensors, ("input", "weight", "bias")):
        assert mine.grad.dtype == np.dtype(dtype), what
        np.testing.assert_allclose(
            mine.grad.numpy(), theirs.grad.numpy(), **TOL[dtype], err_msg=f"d/d{what}"
        )


@needs_torch
@pytest.mark.filterwarnings("ignore:Using padding='same'")  # torch copies the input: fine
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(("x_shape", "w_shape", "attrs"), CONV2D, ids=_ids(CONV2D))
def test_conv2d_matches_torch(x_shape: tuple, w_shape: tuple, attrs: dict, dtype: str) -> None:
    compare_with_torch("conv2d", x_shape, w_shape, attrs, dtype)


@needs_torch
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(
    ("x_shape", "w_shape", "attrs"), CONV_TRANSPOSE2D, ids=_ids(CONV_TRANSPOSE2D)
)
def test_conv_transpose2d_matches_torch(
    x_shape: tuple, w_shape: tuple, attrs: dict, dtype: str
) -> None:
    compare_with_torch("conv_transpose2d", x_shape, w_shape, attrs, dtype)


@needs_torch
@pytest.mark.filterwarnings("ignore:Using padding='same'")
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(("x_shape", "w_shape", "attrs"), CONV1D, ids=_ids(CONV1D))
def test_conv1d_matches_torch(x_shape: tuple, w_shape: tuple, attrs: dict, dtype: str) -> None:
    compare_with_torch("conv1d", x_shape, w_shape, attrs, dtype)


@needs_torch
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(
    ("x_shape", "w_shape", "attrs"), CONV_TRANSPOSE1D, ids=_ids(CONV_TRANSPOSE1D)
)
def test_conv_transpose1d_matches_torch(
    x_shape: tuple, w_shape: tuple, attrs: dict, dtype: str
) -> None:
    compare_with_torch("conv_transpose1d", x_shape, w_shape, attrs, dtype)


@needs_torch
def test_convolutions_without_bias_and_unbatched_match_torch() -> None:
    compare_with_torch("conv2d", (2, 3, 5, 5), (4, 3, 3, 3), {"padding": 1}, "float64", bias=False)
    x, w = RNG.standard_normal((3, 5, 5)), RNG.standard_normal((4, 3, 3, 3))
    want = torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(w), stride=2)
    got = F.conv2d(ge.tensor(x), ge.tensor(w), stride=2)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)
    x1, w1 = RNG.standard_normal((2, 7)), RNG.standard_normal((2, 1, 3))
    want = torch.nn.functional.conv_transpose1d(torch.tensor(x1), torch.tensor(w1), groups=2)
    np.testing.assert_allclose(F.conv_transpose1d(x1, w1, groups=2), want.numpy(), rtol=1e-12)


@needs_torch
@pytest.mark.parametrize("padding", [(1, 0, 2, 1), (0, 2, 0, 0), (3, 1, 0, 2)])
def test_asymmetric_padding_is_torch_pad_then_conv(padding: tuple) -> None:
    top, left, bottom, right = padding
    x, w = RNG.standard_normal((2, 2, 5, 6)), RNG.standard_normal((3, 2, 3, 2))
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    padded = torch.nn.functional.pad(tx, (left, right, top, bottom))  # F.pad: last dim first
    want = torch.nn.functional.conv2d(padded, tw, stride=(2, 1))
    want.sum().backward()
    ex, ew = ge.tensor(x, requires_grad=True), ge.tensor(w, requires_grad=True)
    got = gc.conv2d(ex, ew, stride=(2, 1), padding=padding)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12)
    got.sum().backward()
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(ew.grad.numpy(), tw.grad.numpy(), rtol=1e-12)


def _double_backward(fn: Callable, module: Any, x: Any, w: Any, seed: Any) -> list:
    """d/d(x, w) of sum(seed * d sum(fn(x, w)^2)/dx): second derivatives through both
    gradients (a gradient penalty), in `module`'s autograd (torch or graphc.eager)."""
    y = fn(x, w)
    (gx,) = module.autograd.grad((y * y).sum(), [x], create_graph=True)
    return list(module.autograd.grad((gx * seed).sum(), [x, w]))


@needs_torch
@pytest.mark.parametrize(
    ("name", "x_shape", "w_shape", "attrs"),
    [
        ("conv2d", (2, 4, 6, 5), (4, 2, 3, 2), {"stride": 2, "padding": 1, "groups": 2}),
        ("conv2d", (1, 2, 7, 7), (3, 2, 3, 3), {"dilation": 2, "stride": (3, 1)}),
        ("conv_transpose2d", (1, 4, 3, 4), (4, 1, 3, 3), {"stride": 2, "groups": 2, "output_padding": 1}),
    ],
)  # fmt: skip
def test_second_derivatives_match_torch(
    name: str, x_shape: tuple, w_shape: tuple, attrs: dict
) -> None:
    x, w = RNG.standard_normal(x_shape), RNG.standard_normal(w_shape)
    seed = RNG.standard_normal(x_shape)
    want = _double_backward(
        lambda a, b: _torch_fn(name)(a, b, **attrs),
        torch,
        torch.tensor(x, requires_grad=True),
        torch.tensor(w, requires_grad=True),
        torch.tensor(seed),
    )
    got = _double_backward(
        lambda a, b: getattr(F, name)(a, b, **attrs),
        ge,
        ge.tensor(x, requires_grad=True),
        ge.tensor(w, requires_grad=True),
        ge.tensor(seed),
    )
    for mine, theirs in zip(got, want):
        np.testing.assert_allclose(mine.numpy(), theirs.numpy(), rtol=1e-10, atol=1e-10)


# -- graphs: compiled plans agree with the reference interpreter ---------------------------


def _conv_net(x: Any, w1: Any, w2: Any, w3: Any) -> Any:
    """Every conv op and its gradients in one graph."""
    y = gc.relu(gc.conv2d(x, w1, stride=2, padding=(1, 0, 2, 1)))
    y = gc.conv2d(y, w2, padding="same", dilation=2, groups=2)
    y = gc.conv_transpose2d(y, w3, stride=2, padding=1, output_padding=1, groups=2)
    return gc.sum(gc.tanh(y))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("batch", [3, None])
def test_compiled_gradient_graphs_match_the_reference(dtype: str, batch: Any) -> None:
    """Bit for bit on numpy; on native each convolution (its own summation order) within
    its declared bound, all else bit for bit (tests/differential.py)."""
    shapes = [(3, 2, 9, 8), (4, 2, 3, 3), (4, 2, 3, 3), (4, 3, 2, 2)]
    specs = [gc.TensorSpec((batch,) + shapes[0][1:], dtype)] + [
        gc.TensorSpec(s, dtype) for s in shapes[1:]
    ]
    g = gc.trace(_conv_net, *specs)
    gg = gc.gradients(g, wrt=[p.name for p in g.inputs])
    gc.verify(gg)
    feeds = {p.name: RNG.standard_normal(s).astype(dtype) for p, s in zip(g.inputs, shapes)}
    check_levels(gg, [feeds], levels=(0, 2))
    want = gc.run(gg, feeds)
    tensors = [ge.tensor(feeds[p.name], requires_grad=True) for p in g.inputs]
    _conv_net(*tensors).backward()
    for t, grad in zip(tensors, want[1:]):
        np.testing.assert_allclose(t.grad.numpy(), grad, **TOL[dtype])


def test_grouped_weight_gradient_with_a_symbolic_batch() -> None:
    # the batch cannot merge with the groups: one convolution per group instead
    g = gc.trace(lambda x, w: gc.sum(gc.conv2d(x, w, groups=3) ** 2),
                 gc.TensorSpec((None, 6, 5, 5), "float64"), gc.TensorSpec((6, 2, 3, 3), "float64"))  # fmt: skip
    gg = gc.gradients(g, wrt=[g.inputs[1].name])
    x, w = RNG.standard_normal((4, 6, 5, 5)), RNG.standard_normal((6, 2, 3, 3))
    _, dw = gc.compile(gg, opt_level=2)(x, w)
    tw = ge.tensor(w, requires_grad=True)
    (gc.conv2d(ge.tensor(x), tw, groups=3) ** 2).sum().backward()
    np.testing.assert_allclose(dw, tw.grad.numpy(), rtol=1e-12)


def test_symbolic_spatial_dims_pass_where_the_size_is_kept() -> None:
    g = gc.Graph("same")
    with g:
        x = gc.placeholder("x", shape=("B", 2, "H", "W"))
        w = gc.placeholder("w", shape=(3, 2, 3, 3))
        y = gc.conv2d(x, w, padding="same")
        assert y.shape == ("B", 3, "H", "W")
        z = gc.conv_transpose2d(y, gc.placeholder("v", shape=(3, 2, 3, 3)), padding=1)
        assert z.shape == ("B", 2, "H", "W")
        with pytest.raises(gc.ShapeError, match="conv2d: the spatial dim 'H' must be a known size"):
            gc.conv2d(x, w, stride=2)


@pytest.mark.parametrize("transposed", [False, True])
def test_an_image_without_height_gets_zero_gradients(transposed: bool) -> None:
    # graphc convolves an empty height with padding (PyTorch refuses it): no gradient
    # reaches x or the weight, where the general rules built a convolution whose window
    # did not fit (found by the random gradient graphs of tests/edge_layers.py)
    def net(x: Any, w: Any) -> Any:
        if transposed:
            return gc.sum(gc.conv_transpose2d(x, w, None, 2, (1, 0), (0, 1), 2, (2, 1)))
        return gc.sum(gc.conv2d(x, w, stride=2, padding=1))

    w_shape = (2, 2, 3, 2) if transposed else (1, 2, 2, 1)
    g = gc.trace(net, gc.TensorSpec((1, 2, 0, 3), "float64"), gc.TensorSpec(w_shape, "float64"))
    gg = gc.gradients(g, wrt=[p.name for p in g.inputs])
    w = RNG.standard_normal(w_shape)
    for level in (0, 2):
        total, dx, dw = gc.compile(gg, opt_level=level)(np.zeros((1, 2, 0, 3)), w)
        assert total == 0 and dx.shape == (1, 2, 0, 3)
        np.testing.assert_array_equal(dw, np.zeros(w_shape))


# -- kernels: deterministic, chunking invisible, the out= contract on odd buffers --------------


@pytest.mark.parametrize(("x_shape", "w_shape", "attrs"), CONV2D[:10], ids=_ids(CONV2D[:10]))
def test_conv2d_kernel_chunks_give_the_same_values(
    monkeypatch: pytest.MonkeyPatch, x_shape: tuple, w_shape: tuple, attrs: dict
) -> None:
    x, w = RNG.standard_normal(x_shape), RNG.standard_normal(w_shape)
    whole = gc.conv2d(x, w, **attrs)
    monkeypatch.setattr(conv_kernels, "SCRATCH_BYTES", 1)  # one image per chunk
    np.testing.assert_allclose(gc.conv2d(x, w, **attrs), whole, rtol=1e-13, atol=1e-13)
    np.testing.assert_array_equal(gc.conv2d(x, w, **attrs), gc.conv2d(x, w, **attrs))
    ct = RNG.standard_normal(whole.shape)
    monkeypatch.undo()
    want = gc.conv_transpose2d(ct, w, **{k: v for k, v in attrs.items() if k != "padding"})
    monkeypatch.setattr(conv_kernels, "SCRATCH_BYTES", 1)
    got = gc.conv_transpose2d(ct, w, **{k: v for k, v in attrs.items() if k != "padding"})
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("pieces", [1, 2, 7])
def test_a_weight_gradient_summed_in_pieces_matches_the_reference(
    monkeypatch: pytest.MonkeyPatch, pieces: int
) -> None:
    """A kernel larger than the output (a weight gradient's shape) contracts at most
    DEPTH_PIECE terms per matmul and adds the pieces: any piece size gives the sum."""
    x = RNG.standard_normal((3, 5, 12, 12))  # (images, channels, H, W)
    w = RNG.standard_normal((4, 5, 10, 10))  # depth 500
    monkeypatch.setattr(conv_kernels, "DEPTH_PIECE", -(-500 // pieces))
    assert len(conv_kernels._pieces(500)) == pieces
    got = conv_kernels.conv2d_kernel(x, w, padding=(1, 0, 1, 2))
    np.testing.assert_allclose(got, conv2d_ref(x, w, padding=(1, 0, 1, 2)), rtol=1e-12, atol=1e-11)


def test_kernels_accept_strided_inputs_and_out_buffers() -> None:
    x = RNG.standard_normal((5, 3, 8, 9)).transpose(1, 0, 3, 2)  # (3, 5, 9, 8), strided
    w = RNG.standard_normal((4, 5, 3, 3))
    want = conv_kernels.conv2d_kernel(np.ascontiguousarray(x), w, padding=(1, 0, 1, 2))
    got = conv_kernels.conv2d_kernel(x, w, padding=(1, 0, 1, 2))
    np.testing.assert_array_equal(got, want)
    out = np.full((3, 4, 8, 9), 7.0).transpose(0, 1, 3, 2)  # a non-contiguous out=
    assert conv_kernels.conv2d_kernel(x, w, out=out, padding=(1, 0, 1, 2)) is out
    np.testing.assert_array_equal(out, want)


def test_mixed_float_dtypes_promote_and_gradients_keep_each_dtype() -> None:
    x = ge.tensor(RNG.standard_normal((1, 2, 4, 4)).astype(np.float32), requires_grad=True)
    w = ge.tensor(RNG.standard_normal((3, 2, 3, 3)), requires_grad=True)
    y = gc.conv2d(x, w)
    assert y.dtype == np.float64
    y.sum().backward()
    assert x.grad.dtype == np.float32 and w.grad.dtype == np.float64


# -- errors name the op and what was expected ---------------------------------------------------


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: gc.conv2d(np.ones((1, 3, 5, 5)), np.ones((4, 2, 3, 3))), gc.ShapeError, "conv2d: with groups=1 a weight of shape"),
        (lambda: gc.conv2d(np.ones((1, 4, 5, 5)), np.ones((3, 2, 3, 3)), groups=2), gc.ShapeError, "out channels divisible by groups"),
        (lambda: gc.conv2d(np.ones((1, 1, 2, 2)), np.ones((1, 1, 3, 3))), gc.ShapeError, "larger than the padded input"),
        (lambda: gc.conv2d(np.ones((1, 1, 5)), np.ones((1, 1, 3, 3))), gc.ShapeError, "conv2d: the input \\(N, C, H, W\\) must have rank 4"),
        (lambda: gc.conv2d(np.ones((1, 1, 5, 5), np.int64), np.ones((1, 1, 3, 3), np.int64)), gc.DTypeError, "conv2d: needs a floating"),
        (lambda: gc.conv2d(np.ones((1, 1, 5, 5)), np.ones((1, 1, 3, 3)), stride=0), gc.GraphcError, "stride must be >= 1"),
        (lambda: gc.conv2d(np.ones((1, 1, 5, 5)), np.ones((1, 1, 3, 3)), padding=-1), gc.GraphcError, "padding must be >= 0"),
        (lambda: gc.conv2d(np.ones((1, 1, 5, 5)), np.ones((1, 1, 3, 3)), padding=(1, 2, 3)), gc.GraphcError, "four \\(top, left, bottom, right\\)"),
        (lambda: gc.conv2d(np.ones((1, 1, 5, 5)), np.ones((1, 1, 3, 3)), stride=2, padding="same"), gc.GraphcError, "not supported for strided"),
        (lambda: gc.conv2d(np.ones((1, 1, 5, 5)), np.ones((1, 1, 3, 3)), padding="full"), gc.GraphcError, "'valid', 'same' or ints"),
        (lambda: gc.conv2d(np.ones((1, 1, 5, 5)), np.ones((1, 1, 3, 3)), stride=1.5), gc.GraphcError, "stride must be ints"),
        (lambda: F.conv2d(np.ones((1, 1, 5, 5)), np.ones((1, 1, 3, 3)), padding=(1, 0, 1, 0)), gc.GraphcError, "gc.conv2d"),
        (lambda: F.conv2d(np.ones((5, 5)), np.ones((1, 1, 3, 3))), gc.ShapeError, "expected a 3-D \\(unbatched\\) or 4-D"),
        (lambda: F.conv_transpose2d(np.ones((1, 1, 3, 3)), np.ones((1, 1, 3, 3)), output_padding=1), gc.GraphcError, "smaller than either stride or dilation"),
        (lambda: gc.conv_transpose2d(np.ones((1, 2, 3, 3)), np.ones((3, 1, 3, 3))), gc.ShapeError, "takes 3 input channels"),
        (lambda: gc.conv_transpose2d(np.ones((1, 1, 2, 2)), np.ones((1, 1, 2, 2)), padding=2), gc.ShapeError, "crops more than"),
        (lambda: gc.conv1d(np.ones((1, 1, 5)), np.ones((1, 1, 3)), padding=(1, 2, 3)), gc.ShapeError, "conv1d: padding takes one int or two"),
    ],
)  # fmt: skip
def test_mistakes_raise_errors_naming_the_op(call: Callable, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        call()


@needs_torch
def test_torch_refuses_what_graphc_refuses() -> None:
    for call in (
        lambda: torch.nn.functional.conv2d(torch.ones(1, 3, 5, 5), torch.ones(4, 2, 3, 3)),
        lambda: torch.nn.functional.conv2d(torch.ones(1, 1, 2, 2), torch.ones(1, 1, 3, 3)),
        lambda: torch.nn.functional.conv2d(torch.ones(1, 1, 5, 5), torch.ones(1, 1, 3, 3), stride=2, padding="same"),
        lambda: torch.nn.functional.conv_transpose2d(torch.ones(1, 1, 3, 3), torch.ones(1, 1, 3, 3), output_padding=1),
    ):  # fmt: skip
        with pytest.raises(RuntimeError):
            call()


@pytest.mark.parametrize(
    "name",
    [
        "graphc.ops.conv",
        "graphc.nn.functional.conv",
        "graphc.ops.pool",
        "graphc.nn.functional.pool",
    ],
)
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_every_case_grid_is_deterministic() -> None:
    for (xs, ws, attrs), dtype in itertools.product(CONV2D, ["float32", "float64"]):
        x, w = RNG.standard_normal(xs).astype(dtype), RNG.standard_normal(ws).astype(dtype)
        np.testing.assert_array_equal(
            F.conv2d(x, w, **attrs), F.conv2d(x.copy(), w.copy(), **attrs)
        )
