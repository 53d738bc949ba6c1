"""Kernels' working memory (OpDef.scratch): each rule against what its kernel really
allocates (tracemalloc), and the planner's peak bytes and `explain()` counting it."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import graphc as gc
from graphc.ir.registry import REQUIRED, all_ops, get_op
from graphc.ir.types import TensorType
from graphc.runtime.explain import peak_bytes

RNG = np.random.default_rng(0)


def traced(call: Callable[[], Any]) -> int:
    """The most bytes `call` holds at once beyond what it started with (after a warm-up)."""
    call()
    tracemalloc.start()
    try:
        base, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        call()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak - base


def slack(dtype: np.dtype) -> int:
    # numpy's ufunc iterator buffers strided operands, at most 8192 elements each, and
    # the iterator and small Python objects take a few KiB more (numpy 2.0: 4.2 KiB)
    return 3 * 8192 * np.dtype(dtype).itemsize + 16384


def rule_and_measured(op: str, arrays: list[np.ndarray], **given: Any) -> tuple[int, int]:
    """The scratch rule of `op` on these arrays and what its kernel allocates, into an
    `out=` of the inferred type (as the planner gives it)."""
    opdef = get_op(op)
    types = [TensorType(a.shape, a.dtype) for a in arrays]
    attrs = {k: v for k, v in {**opdef.attrs, **given}.items() if v is not REQUIRED}
    if opdef.canonicalize is not None:
        attrs = opdef.canonicalize(*types, **attrs)
    out_type = opdef.infer(*types, **attrs)
    out = np.empty(out_type.shape, out_type.dtype)
    rule = opdef.scratch_bytes(out_type, *types, **attrs)
    return rule, traced(lambda: opdef.kernel(*arrays, out=out, **attrs))


def normal(*shape: int, dtype: Any = np.float32) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


def weight_grad_operands(n: int, c: int, o: int, hw: int, k: int) -> list[np.ndarray]:
    """conv2d's operands in a weight gradient: the input and the output gradient, both
    transposed views (N becomes the channels)."""
    x = normal(n, c, hw, hw)
    ct = normal(n, o, hw - k + 1, hw - k + 1)
    return [x.transpose(1, 0, 2, 3), ct.transpose(1, 0, 2, 3)]


CONV2D = [
    ("plain", [normal(4, 3, 16, 16), normal(8, 3, 3, 3)], {}),
    ("padded", [normal(4, 3, 16, 16), normal(8, 3, 3, 3)], {"padding": 1}),
    ("stride", [normal(4, 3, 17, 17), normal(8, 3, 3, 3)], {"stride": 2, "padding": 1}),
    ("dilation", [normal(2, 4, 20, 20), normal(6, 4, 3, 3)], {"dilation": 2, "padding": 2}),
    ("groups", [normal(3, 8, 12, 12), normal(12, 2, 3, 3)], {"groups": 4, "padding": 1}),
    ("depthwise", [normal(3, 6, 12, 12), normal(6, 1, 3, 3)], {"groups": 6, "padding": 1}),
    ("big batch", [normal(64, 6, 14, 14), normal(16, 6, 5, 5)], {}),
    ("float64", [normal(4, 3, 10, 10, dtype=np.float64), normal(5, 3, 3, 3)], {"padding": 1}),
    # conv1d is conv2d on a unit height
    ("conv1d", [normal(4, 3, 1, 50), normal(8, 3, 1, 5)], {"stride": (1, 2), "padding": 2}),
    ("weight gradient", weight_grad_operands(16, 3, 6, 20, 5), {}),
    ("weight gradient padded", weight_grad_operands(8, 1, 6, 24, 5), {"padding": 2}),
]


@pytest.mark.parametrize("case", CONV2D, ids=[c[0] for c in CONV2D])
def test_conv2d_rule_covers_the_kernel(case: tuple) -> None:
    _, arrays, attrs = case
    rule, measured = rule_and_measured("conv2d", arrays, **attrs)
    dtype = np.result_type(*arrays)
    assert measured <= rule + slack(dtype)
    # and is no gross overestimate: the weight counts once more than a contiguous one costs
    assert rule <= measured + arrays[1].size * dtype.itemsize + slack(dtype)


CONV_TRANSPOSE = [
    ("plain", [normal(4, 8, 10, 10), normal(8, 3, 3, 3)], {}),
    ("stride", [normal(4, 8, 9, 9), normal(8, 3, 3, 3)], {"stride": 2, "padding": 1}),
    ("dilation groups", [normal(2, 6, 8, 8), normal(6, 2, 3, 3)], {"dilation": 2, "groups": 3}),
    ("depthwise", [normal(3, 5, 8, 8), normal(5, 1, 3, 3)], {"groups": 5}),
    ("big batch", [normal(64, 16, 10, 10), normal(16, 6, 5, 5)], {}),
    ("conv_transpose1d", [normal(4, 8, 1, 30), normal(8, 3, 1, 4)], {"stride": (1, 2)}),
]


@pytest.mark.parametrize("case", CONV_TRANSPOSE, ids=[c[0] for c in CONV_TRANSPOSE])
def test_conv_transpose2d_rule_covers_the_kernel(case: tuple) -> None:
    _, arrays, attrs = case
    rule, measured = rule_and_measured("conv_transpose2d", arrays, **attrs)
    assert measured <= rule + slack(np.float32)
    assert rule <= measured + arrays[1].nbytes + slack(np.float32)


@pytest.mark.parametrize("activation", [None, "relu", "tanh", "sigmoid", "gelu"])
@pytest.mark.parametrize("groups", [1, 6])
def test_conv2d_epilogue_rule_counts_the_activation(activation: Any, groups: int) -> None:
    x, w, b = normal(8, 6, 16, 16), normal(12 if groups == 1 else 6, 6 // groups, 3, 3), None
    b = normal(w.shape[0], 1, 1)
    attrs = {"padding": 1, "groups": groups, "bias": True, "activation": activation}
    rule, measured = rule_and_measured("conv2d_epilogue", [x, w, b], **attrs)
    assert measured <= rule + slack(np.float32)
    assert rule <= measured + w.nbytes + slack(np.float32)


def _affine_residual_relu(conv: tuple, others: list[np.ndarray], compare: bool) -> gc.Graph:
    """relu((c - m) * s + r) (a batch norm and a residual), or with a comparison whose
    bool value needs a slot of its own: where(c > m, c * s, r)."""
    body = gc.Graph("body")
    with body:
        c = gc.placeholder("c", conv, "float32")
        m, s, r = (gc.placeholder(f"o{k}", o.shape, "float32") for k, o in enumerate(others))
        value = gc.where(c > m, c * s, r) if compare else gc.relu((c - m) * s + r)
        gc.output(value, name="out")
    return body


@pytest.mark.parametrize("compare", [False, True])
@pytest.mark.parametrize("geometry", [{"padding": 1}, {"stride": 2}, {"groups": 6, "padding": 1}])
def test_conv2d_fused_rule_counts_the_body_slots(geometry: dict, compare: bool) -> None:
    x = normal(8, 6, 16, 16)
    w = normal(6, 1 if "groups" in geometry else 6, 3, 3)
    out = gc.conv2d(np.zeros(x.shape, x.dtype), w, **geometry).shape
    others = [normal(6, 1, 1), normal(6, 1, 1), normal(*out)]
    body = _affine_residual_relu(out, others, compare)
    rule, measured = rule_and_measured("conv2d_fused", [x, w, *others], body=body, **geometry)
    assert measured <= rule + slack(np.float32)
    assert rule <= measured + w.nbytes + slack(np.float32)


POOLS = [((8, 6, 28, 28), 2, 2), ((8, 6, 28, 28), 3, 1), ((4, 3, 17, 17), 3, 2)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("with_nan", [False, True])
@pytest.mark.parametrize("shape, kernel, stride", POOLS)
def test_max_pool_gradient_rules_cover_the_kernels(
    shape: tuple, kernel: int, stride: int, with_nan: bool, dtype: Any
) -> None:
    x = normal(*shape, dtype=dtype)
    if with_nan:
        x[0, 0, 0, 0] = np.nan  # the kernels then keep a nan mask too
    window = {"kernel_size": kernel, "stride": stride}
    pooled = gc.max_pool2d(x, kernel, stride)
    ct = normal(*pooled.shape, dtype=dtype)
    for op, arrays in [
        ("max_pool2d_backward", [ct, x, pooled]),
        ("max_pool2d_select", [x, x, pooled]),
    ]:
        rule, measured = rule_and_measured(op, arrays, **window)
        assert measured <= rule + slack(dtype), op
        assert rule <= 2 * measured, op


@pytest.mark.parametrize("shape, kernel, stride", POOLS)
def test_avg_pool_gradient_rule_covers_the_kernel(shape: tuple, kernel: int, stride: int) -> None:
    pooled = gc.avg_pool2d(normal(*shape), kernel, stride, padding=1)
    ct = normal(*pooled.shape)
    attrs = {"kernel_size": kernel, "stride": stride, "padding": 1, "input_size": shape[2:]}
    rule, measured = rule_and_measured("avg_pool2d_backward", [ct], **attrs)
    assert measured <= rule + slack(np.float32)
    assert rule <= measured + slack(np.float32)


@pytest.mark.parametrize("shape, kernel, stride", POOLS)
def test_a_half_float_avg_pool_declares_its_float32_sums(
    shape: tuple, kernel: int, stride: int
) -> None:
    """float16 windows are summed in float32 (an output-sized temporary, in the rule);
    float32 ones in place (only the divisors)."""
    window = {"kernel_size": kernel, "stride": stride, "padding": 1}
    for dtype in (np.float16, np.float32):
        rule, measured = rule_and_measured("avg_pool2d", [normal(*shape, dtype=dtype)], **window)
        assert measured <= rule + slack(np.float32)  # (float32 buffers: the sums' casts)
        assert rule <= measured + slack(np.float32)
        pooled = gc.avg_pool2d(normal(*shape), kernel, stride, padding=1)
        assert (rule >= pooled.size * 4) is (dtype == np.float16)


def test_the_ops_with_scratch_rules() -> None:
    """The convolution and pooling kernels with big temporaries have rules (and cases
    above); ops without a rule have no scratch."""
    with_rules = {name for name, opdef in all_ops().items() if opdef.scratch is not None}
    assert with_rules >= {
        "conv2d",
        "conv_transpose2d",
        "conv2d_epilogue",
        "max_pool2d_backward",
        "max_pool2d_select",
        "avg_pool2d_backward",
        "avg_pool2d",  # float16's float32 sums
    }
    assert "max_pool2d" not in with_rules
    assert (
        get_op("add").scratch_bytes(TensorType((4,), np.float32), TensorType((4,), np.float32)) == 0
    )


def conv_graph() -> gc.Graph:
    g = gc.Graph("conv")
    with g:
        x = gc.placeholder("x", shape=("B", 3, 16, 16))
        w = gc.placeholder("w", shape=(8, 3, 3, 3))
        gc.output(gc.sum(gc.relu(gc.conv2d(x, w, padding=1))), name="total")
    return g


def test_conv1d_steps_carry_the_scratch_of_their_conv2d() -> None:
    g = gc.Graph("conv1d")
    with g:
        x = gc.placeholder("x", shape=(4, 3, 50))
        w = gc.placeholder("w", shape=(8, 3, 5))
        gc.output(gc.conv1d(x, w, padding=2), name="y")
    plan = gc.compile(g, opt_level=0).plan()
    (conv,) = [s for s in plan.steps if s.node.op == "conv2d"]
    assert (
        conv.scratch
        == rule_and_measured(
            "conv2d", [normal(4, 3, 1, 50), normal(8, 3, 1, 5)], padding=(0, 2, 0, 2)
        )[0]
    )


def test_peak_bytes_include_the_conv_scratch() -> None:
    exe = gc.compile(conv_graph(), opt_level=0)
    x, w = normal(4, 3, 16, 16), normal(8, 3, 3, 3)
    plan = exe.plan(x=x, w=w)
    conv = next(s for s in plan.steps if s.node.op == "conv2d")
    expected, _ = rule_and_measured("conv2d", [x, w], padding=1)
    assert conv.scratch == expected > 0
    out_bytes = 4 * 8 * 16 * 16 * 4
    # step 0: the convolution's result and its im2col buffer; relu then runs in place
    assert peak_bytes(plan) == out_bytes + conv.scratch
    assert sum(s.scratch for s in plan.steps) == conv.scratch


def test_explain_shows_scratch() -> None:
    exe = gc.compile(conv_graph(), opt_level=2)
    x, w = normal(2, 3, 16, 16), normal(8, 3, 3, 3)
    text = exe.explain(x=x, w=w)
    plan = exe.plan(x=x, w=w)
    (conv,) = [s for s in plan.steps if s.scratch]
    line = next(li for li in text.splitlines() if li.strip().startswith(f"{conv.index} "))
    assert "scratch" in line
    assert f"of which kernels' scratch (step {conv.index})" in text


def test_plans_without_scratch_are_unchanged() -> None:
    g = gc.Graph("chain")
    with g:
        x = gc.placeholder("x", shape=(64, 64))
        gc.output(gc.sum((x @ x) @ x), name="total")
    exe = gc.compile(g, opt_level=0)
    plan = exe.plan()
    assert all(s.scratch == 0 for s in plan.steps)
    assert peak_bytes(plan) == 2 * 64 * 64 * 4
    assert "scratch" not in exe.explain()


def test_a_compiled_gradient_allocates_no_more_than_its_scratch() -> None:
    """Per call (the arena already exists), what a conv training graph allocates beyond
    its arena is the largest step scratch plus its outputs."""
    g = conv_graph()
    grads = gc.gradients(g, wrt=["x", "w"])
    exe = gc.compile(grads, opt_level=2)
    x, w = normal(8, 3, 16, 16), normal(8, 3, 3, 3)
    plan = exe.plan(x=x, w=w)
    measured = traced(lambda: exe(x=x, w=w))
    largest = max(s.scratch for s in plan.steps)
    assert largest > 0
    assert measured <= largest + plan.output_bytes + slack(np.float32)
