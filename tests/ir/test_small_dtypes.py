"""The small dtypes (int8, int16, uint8-uint64, float16): text and JSON, numpy 2's type
rules, every elementwise op case computed on them against numpy, float16 gradients,
eager tensors, the native backend keeping their steps on numpy, and ONNX."""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass

import numpy as np
import pytest

import graphc as gc
import graphc.eager as ge
from graphc.ir.registry import get_op
from graphc.ir.types import DTYPES, bfloat16
from tests.budget import sample
from tests.op_cases import FLOAT, OpCase, all_cases

SMALL = ["float16", "int8", "int16", "uint8", "uint16", "uint32", "uint64"]
with contextlib.suppress(gc.DTypeError):  # bfloat16 joins it where ml_dtypes is installed
    bfloat16()  # (its own tests: tests/ir/test_bfloat16.py)
EVERY = [str(d) for d in DTYPES.values()]


# -- text and JSON ------------------------------------------------------------------------


def extremes(dtype: str) -> np.ndarray:
    """The values a literal of `dtype` must keep: its limits, and for float16 its
    subnormals, a value no decimal of few digits holds, inf and nan."""
    dt = np.dtype(dtype)
    if dt.kind == "f":
        info = np.finfo(dt)
        return np.array([0.1, -0.0, info.max, info.smallest_subnormal, np.inf, np.nan], dt)
    info = np.iinfo(dt)
    return np.array([info.min, info.max, 0, 1, info.min + 1, info.max - 1], dt)


def every_small_dtype() -> gc.Graph:
    g = gc.Graph("small")
    with g:
        for dtype in SMALL:
            short = gc.ir.types.dtype_name(np.dtype(dtype))
            x = gc.placeholder(f"x_{short}", shape=("B", 6), dtype=dtype)
            c = gc.constant(extremes(dtype), name=f"c_{short}")
            gc.output(gc.maximum(x, c), name=f"max_{short}")
            gc.output(gc.cast(x, "float32"), name=f"wide_{short}")
    return g


def test_text_names_the_small_dtypes() -> None:
    text = str(every_small_dtype())
    for short in ("f16", "i8", "i16", "u8", "u16", "u32", "u64"):
        assert f"%x_{short}: {short}[B,6]" in text
    assert "18446744073709551615" in text and "-128" in text and "65504.0" in text


def feeds_of(g: gc.Graph) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    feeds = {}
    for p in g.inputs:
        info = np.iinfo(p.type.dtype) if p.type.dtype.kind in "iu" else None
        if info is None:
            feeds[p.name] = rng.standard_normal((3, 6)).astype(p.type.dtype)
        else:
            feeds[p.name] = rng.integers(info.min, info.max, (3, 6), dtype=p.type.dtype)
    return feeds


def assert_same_results(a: gc.Graph, b: gc.Graph) -> None:
    feeds = feeds_of(a)
    for x, y in zip(gc.run(a, feeds), gc.run(b, feeds)):
        assert x.dtype == y.dtype
        np.testing.assert_array_equal(x, y)


def test_text_round_trip_keeps_every_bit() -> None:
    g = every_small_dtype()
    again = gc.parse(str(g))
    assert str(again) == str(g)
    for name in ("c_f16", "c_u64", "c_i8"):
        [a] = [n for n in g.nodes if n.name == name]
        [b] = [n for n in again.nodes if n.name == name]
        assert a.value.dtype == b.value.dtype
        assert a.value.tobytes() == b.value.tobytes()
    assert_same_results(g, again)


def test_json_round_trip_keeps_every_bit() -> None:
    g = every_small_dtype()
    doc = json.loads(gc.to_json(g))
    assert {"shape": ["B", 6], "dtype": "u64"} in [n.get("type") for n in doc["nodes"]]
    again = gc.from_json(gc.to_json(g))
    assert str(again) == str(g)
    assert_same_results(g, again)


def test_literals_that_do_not_fit_the_dtype_are_refused() -> None:
    for text in (
        "graph t() {\n  %c: u8[] = constant(value=256)\n  output %o = %c\n}",
        "graph t() {\n  %c: i8[] = constant(value=-129)\n  output %o = %c\n}",
        "graph t() {\n  %c: f16[] = constant(value=1e5)\n  output %o = %c\n}",
        "graph t() {\n  %c: u64[] = constant(value=-1)\n  output %o = %c\n}",
    ):
        with pytest.raises(gc.ParseError, match="does not fit dtype"):
            gc.parse(text)


# -- type rules ---------------------------------------------------------------------------


def rule_dtype(op: object, *dtypes: str) -> np.dtype:
    g = gc.Graph("rule")
    with g:
        xs = [gc.placeholder(f"x{i}", shape=(2,), dtype=d) for i, d in enumerate(dtypes)]
        gc.output(op(*xs), name="out")
    return g.outputs[0].type.dtype


@pytest.mark.parametrize("dtype", SMALL)
def test_promotion_is_numpy_2s(dtype: str) -> None:
    for other in EVERY:
        if {dtype, other} == {"bool"}:
            continue
        assert rule_dtype(gc.add, dtype, other) == np.result_type(dtype, other), other
        assert rule_dtype(gc.lt, dtype, other) == np.bool_
        assert rule_dtype(gc.where, "bool", dtype, other) == np.result_type(dtype, other)
    # NEP 50: a Python scalar takes the array's dtype when its kind allows
    x = np.ones(2, dtype)
    assert gc.add(x, 1).dtype == np.add(x, 1).dtype == np.dtype(dtype)
    assert gc.mul(x, 0.5).dtype == np.multiply(x, 0.5).dtype
    assert rule_dtype(gc.tanh, dtype) == np.tanh(x).dtype  # int8 and uint8: float16


def test_python_ints_out_of_range_are_named_errors() -> None:
    u8 = np.ones(2, np.uint8)
    with pytest.raises(gc.DTypeError, match="add.*-1 out of bounds for uint8"):
        gc.add(u8, -1)
    g = gc.Graph("t")
    with g:
        x = gc.placeholder("x", shape=(2,), dtype="int8")
        with pytest.raises(gc.DTypeError, match="300 out of bounds for int8"):
            gc.mul(x, 300)


def test_float_functions_of_bools_are_still_refused() -> None:
    # numpy gives float16 for log(bool), torch float32: no answer both agree on
    with pytest.raises(gc.DTypeError, match="log.*bool.*float16"):
        gc.log(np.ones(2, bool))
    assert gc.log(np.ones(2, np.float16)).dtype == np.float16
    assert gc.sqrt(np.ones(2, np.uint8)).dtype == np.sqrt(np.ones(2, np.uint8)).dtype


# -- every elementwise op case, retyped ---------------------------------------------------


@dataclass(frozen=True)
class Retyped:
    case: OpCase
    dtype: str

    @property
    def id(self) -> str:
        return f"{self.case.op}-{self.case.label}-{self.dtype}"

    def inputs(self) -> list[np.ndarray] | None:
        """The case's inputs drawn in `dtype` (its float and integer ones; bools stay);
        None where the case's values cannot be had in it."""
        rng = np.random.default_rng(0)
        dt = np.dtype(self.dtype)
        arrays = []
        for arg in self.case.args:
            if arg.kind == "fixed":
                if arg.dtype != FLOAT:  # indices and the like keep their dtype
                    arrays.append(np.array(arg.value, arg.dtype))
                    continue
                if dt.kind != "f":
                    return None
                with np.errstate(over="ignore"):
                    value = np.array(arg.value, np.float64).astype(dt)
                if not np.all(np.isfinite(value)):
                    return None
                arrays.append(value)
            elif arg.kind == "bool" or arg.dtype == "bool":
                arrays.append(rng.random(arg.shape) < 0.5)
            elif dt.kind == "f":
                source = arg.dtype if arg.dtype != FLOAT else "float64"
                arrays.append(arg.draw(rng, "float64").astype(dt if arg.dtype == FLOAT else source))
            else:
                low, high = (arg.low, arg.high) if arg.kind == "int" else (-4, 5)
                if arg.kind == "positive":
                    low = 1
                if dt.kind == "u":
                    low = max(low, 0)
                if high <= low:
                    return None
                values = rng.integers(low, high, arg.shape)
                if arg.kind == "away":
                    values[values == 0] = 1
                arrays.append(values.astype(dt))
        return arrays


# refusals that hold for these dtype kinds as for int64 (their tests are elsewhere)
REFUSED = {
    ("round", "decimals"): ("iu", "decimals=2 needs a float input"),
    ("pow", "same"): ("i", "negative integer powers"),
    ("pow", "bcast"): ("i", "negative integer powers"),
}


def retyped_cases() -> list[Retyped]:
    found = []
    for case in all_cases():
        op = get_op(case.op)
        if not op.elementwise or op.has("fusion") or case.float_dtype == "float32":
            continue
        for dtype in SMALL:
            found.append(Retyped(case, dtype))
    return found


def native_within_bound(op: str, got: np.ndarray, want: np.ndarray) -> str | None:
    """None when the native engine's `got` is `want` within the op's stated ulp bound (an
    inexact op computed natively: an integer input is converted to float64, which native
    computes, libmvec's exp say), else why not. Ops with no bound must give the bits."""
    from graphc.backends.native.cexpr import ulp_bounds
    from tests.edge_values import bits_differ

    bound = ulp_bounds().get(op)
    if bound is None or got.dtype not in (np.float32, np.float64):
        return bits_differ(got, want)
    finite = np.isfinite(want)
    if not np.array_equal(np.isfinite(got), finite) or not np.array_equal(
        got[~finite], want[~finite], equal_nan=True
    ):
        return "its nans or infinities differ"
    try:
        np.testing.assert_array_max_ulp(got[finite], want[finite], maxulp=bound)
    except AssertionError as exc:
        return str(exc)
    return None


def compared(got: np.ndarray, want: np.ndarray, dtype: str) -> None:
    low = "float16" in (str(got.dtype), dtype)
    rtol, atol = (4e-3, 1e-3) if low else (1e-6, 1e-6)
    np.testing.assert_allclose(
        got.astype(np.float64), np.asarray(want).astype(np.float64), rtol, atol, equal_nan=True
    )


@pytest.mark.parametrize(
    "item", sample(retyped_cases(), key=lambda r: (r.case.op, r.dtype)), ids=lambda r: r.id
)
def test_elementwise_case_on_small_dtype(item: Retyped) -> None:
    xs = item.inputs()
    if xs is None:
        pytest.skip(f"{item.id}: the case's fixed values do not fit {item.dtype}")
    kinds, refused = REFUSED.get((item.case.op, item.case.label), ("", ""))
    if np.dtype(item.dtype).kind in kinds:
        with pytest.raises(gc.DTypeError, match=refused):
            item.case.build(*xs)
        return
    with np.errstate(all="ignore"):
        got = np.asarray(item.case.build(*xs))
        want = item.case.reference(*xs)
    compared(got, want, item.dtype)
    # the type rule says what the kernel gives; every engine gives the kernel's bits
    # (native an inexact op's within its bound: native_within_bound)
    g = gc.Graph("retyped")
    with g:
        ps = [gc.placeholder(f"x{i}", shape=x.shape, dtype=x.dtype) for i, x in enumerate(xs)]
        gc.output(item.case.build(*ps), name="out")
    assert g.outputs[0].type.dtype == got.dtype
    feeds = {f"x{i}": x for i, x in enumerate(xs)}
    with np.errstate(all="ignore"):
        results = {
            "reference": gc.run(g, feeds)[0],
            "O2": gc.compile(g, opt_level=2)(**feeds),
            "native": gc.compile(g, opt_level=2, backend="native", wait=True)(**feeds),
        }
    for how, value in results.items():
        assert value.dtype == got.dtype, how
        if how == "native":
            why = native_within_bound(item.case.op, value, got)
            assert why is None, f"native: {why}"
        else:
            np.testing.assert_array_equal(value, got, err_msg=how)


def float16_cases() -> list[Retyped]:
    return [r for r in retyped_cases() if r.dtype == "float16"]


@pytest.mark.parametrize(
    "item", sample(float16_cases(), key=lambda r: r.case.op), ids=lambda r: r.id
)
def test_float16_edge_values_give_the_kernels_bits_on_every_engine(item: Retyped) -> None:
    """nan, inf, -0.0, float16's largest and its subnormals: the engines agree bit for
    bit with the op's kernel (integer and bool inputs stay tame: indices, exponents;
    native, which computes an integer input's inexact op in float64, within the op's
    stated bound)."""
    from tests.edge_values import bits_differ, edge_array

    xs = item.inputs()
    if xs is None:
        pytest.skip(f"{item.id}: the case's fixed values do not fit float16")
    rng = np.random.default_rng(5)
    xs = [edge_array(rng, x.shape, x.dtype) if x.dtype == np.float16 else x for x in xs]
    g = gc.Graph("edges")
    with g:
        ps = [gc.placeholder(f"x{i}", shape=x.shape, dtype=x.dtype) for i, x in enumerate(xs)]
        gc.output(item.case.build(*ps), name="out")
    feeds = {f"x{i}": x for i, x in enumerate(xs)}
    with np.errstate(all="ignore"):
        want = np.asarray(item.case.build(*xs))
        for how, got in (
            ("reference", gc.run(g, feeds)[0]),
            ("O2", gc.compile(g, opt_level=2)(**feeds)),
            ("native", gc.compile(g, opt_level=2, backend="native", wait=True)(**feeds)),
        ):
            why = (
                native_within_bound(item.case.op, got, want)
                if how == "native"
                else bits_differ(got, want)
            )
            assert why is None, (how, why)


def float16_cases_of_other_ops() -> list[Retyped]:
    """Every case with float inputs of an op that is not elementwise, in float16."""
    return [
        Retyped(c, "float16")
        for c in all_cases()
        if not get_op(c.op).elementwise
        and not get_op(c.op).has("fusion")
        and c.float_dtype == "float64"
        and any(a.dtype == FLOAT for a in c.args)
    ]


@pytest.mark.parametrize(
    "item", sample(float16_cases_of_other_ops(), key=lambda r: r.case.op), ids=lambda r: r.id
)
def test_float16_case_of_every_other_op(item: Retyped) -> None:
    """Reductions, matmul, convolutions, pooling, norms, indexing, control flow...
    in float16: numpy's answer within float16's precision, the type rule's dtype, and
    the same bits from every engine."""
    xs = item.inputs()
    if xs is None or any(x.dtype == np.float16 and not np.all(np.isfinite(x)) for x in xs):
        pytest.skip(f"{item.id}: the case's values do not fit float16")
    if item.case.op == "gemm":  # one BLAS call: the SGD fold makes it for float32/64 only
        with pytest.raises(gc.DTypeError, match="gemm: operands must all be float32 or"):
            item.case.build(*xs)
        return
    with np.errstate(all="ignore"):
        got = np.asarray(item.case.build(*xs))
        want = item.case.reference(*xs)
    tolerance = 2e-2 if item.case.op in ("var", "std", "logsumexp") else 4e-3
    np.testing.assert_allclose(
        got.astype(np.float64), np.asarray(want).astype(np.float64), tolerance, tolerance,
        equal_nan=True,
    )  # fmt: skip
    g = gc.Graph("retyped")
    with g:
        ps = [gc.placeholder(f"x{i}", shape=x.shape, dtype=x.dtype) for i, x in enumerate(xs)]
        gc.output(item.case.build(*ps), name="out")
    assert g.outputs[0].type.dtype == got.dtype
    feeds = {f"x{i}": x for i, x in enumerate(xs)}
    with np.errstate(all="ignore"):
        for how, value in (
            ("reference", gc.run(g, feeds)[0]),
            ("O2", gc.compile(g, opt_level=2)(**feeds)),
            ("native", gc.compile(g, opt_level=2, backend="native", wait=True)(**feeds)),
        ):
            assert value.dtype == got.dtype, how
            np.testing.assert_array_equal(value, got, err_msg=how)


def test_every_elementwise_op_meets_every_small_dtype() -> None:
    covered = {(r.case.op, r.dtype) for r in retyped_cases()}
    ops = {r.case.op for r in retyped_cases()}
    assert len(ops) > 40
    assert covered == {(op, d) for op in ops for d in SMALL}


# -- kernels that compute float16 in float32 ----------------------------------------------


def test_float16_mean_sums_in_float32_with_or_without_out() -> None:
    x = (np.random.default_rng(0).standard_normal((5, 300)) * 100).astype(np.float16)
    kernel = get_op("mean").kernel
    want = np.mean(x, axis=1)  # numpy sums float16 in float32 when it allocates
    np.testing.assert_array_equal(kernel(x, axis=(1,)), want)
    np.testing.assert_array_equal(kernel(x, np.empty(5, np.float16), axis=(1,)), want)


@pytest.mark.parametrize("groups", [1, 3])
def test_float16_convolutions_round_once(groups: int) -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 9, 9)).astype(np.float16)
    w = rng.standard_normal((3, 3 // groups, 3, 3)).astype(np.float16)
    wide = gc.conv2d(x.astype(np.float32), w.astype(np.float32), padding=1, groups=groups)
    got = gc.conv2d(x, w, padding=1, groups=groups)
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, wide.astype(np.float16))
    into = get_op("conv2d").kernel(x, w, np.empty_like(got), padding=(1, 1, 1, 1), groups=groups)
    np.testing.assert_array_equal(into, got)
    back = gc.conv_transpose2d(x, w, groups=groups)  # (in, out/groups, kH, kW): w fits
    wide_back = gc.conv_transpose2d(x.astype(np.float32), w.astype(np.float32), groups=groups)
    np.testing.assert_array_equal(back, wide_back.astype(np.float16))


def test_float16_convolution_scratch_rules_cover_what_they_allocate() -> None:
    from tests.runtime.test_scratch import rule_and_measured, slack

    rng = np.random.default_rng(2)

    def normal(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape).astype(np.float16)

    for op, arrays, attrs in [
        ("conv2d", [normal(4, 3, 16, 16), normal(8, 3, 3, 3)], {"padding": 1}),
        ("conv2d", [normal(3, 6, 12, 12), normal(6, 1, 3, 3)], {"groups": 6, "padding": 1}),
        ("conv_transpose2d", [normal(4, 3, 8, 8), normal(3, 5, 3, 3)], {"stride": 2}),
    ]:
        rule, measured = rule_and_measured(op, arrays, **attrs)
        assert measured <= rule + slack(np.float32), (op, attrs)
        assert rule <= 2 * measured + slack(np.float32), (op, attrs)


def test_max_pool_on_float16_and_unsigned() -> None:
    x = np.random.default_rng(3).standard_normal((1, 2, 4, 4)).astype(np.float16)
    pooled = gc.max_pool2d(x, 2)
    np.testing.assert_array_equal(pooled, x.reshape(1, 2, 2, 2, 2, 2).max(axis=(3, 5)))
    u = (np.arange(32, dtype=np.uint8) * 7).reshape(1, 2, 4, 4)
    np.testing.assert_array_equal(gc.max_pool2d(u, 2), u.reshape(1, 2, 2, 2, 2, 2).max((3, 5)))
    grad = gc.grad(lambda v: gc.sum(gc.max_pool2d(v, 2)))(x)
    assert grad.dtype == np.float16 and grad.sum() == 8


# -- gradients ----------------------------------------------------------------------------


def differentiable_cases() -> list[OpCase]:
    return [
        c
        for c in all_cases()
        if c.has_grad and c.float_dtype == "float64" and get_op(c.op).elementwise
    ]


@pytest.mark.parametrize("case", sample(differentiable_cases()), ids=lambda c: c.id)
def test_float16_gradients_are_float64_gradients_rounded(case: OpCase) -> None:
    """float16 differentiates as the other floats: its gradients (checked against
    finite differences in float64 by the op-case tests) within float16's precision."""
    x64 = case.inputs(0)
    with np.errstate(all="ignore"):
        x16 = [x.astype(np.float16) if x.dtype == np.float64 else x for x in x64]
        if any(not np.all(np.isfinite(x)) for x in x16 if x.dtype == np.float16):
            pytest.skip("the case's values overflow float16")
    wrt = [i for i, d in enumerate(case.differentiable) if d]

    def loss(*xs: np.ndarray) -> object:
        out = case.build(*xs)
        return gc.sum(out * gc.cast(gc.full_like(out, 0.5), out.dtype))

    with np.errstate(all="ignore"):
        want = gc.grad(loss, argnums=tuple(wrt))(
            *[x.astype(np.float16).astype(np.float64) if x.dtype == np.float64 else x for x in x64]
        )
        got = gc.grad(loss, argnums=tuple(wrt))(*x16)
    for g16, g64 in zip(got, want):
        assert g16.dtype == np.float16
        scale = np.maximum(1.0, np.abs(g64))
        assert np.all(np.abs(g16.astype(np.float64) - g64) <= 2e-2 * scale), (g16, g64)


def test_integer_dtypes_are_not_differentiable() -> None:
    g = gc.Graph("t")
    with g:
        x = gc.placeholder("x", shape=(3,), dtype="int8")
        y = gc.placeholder("y", shape=(3,), dtype="float16")
        gc.output(gc.sum(gc.cast(x, "float16") * y), name="loss")
    with pytest.raises(gc.AutodiffError, match="wrt placeholder 'x' has dtype int8"):
        gc.gradients(g, wrt=["x"])
    dy = gc.gradients(g, wrt=["y"])
    _, grad = gc.run(dy, {"x": np.array([1, -2, 3], np.int8), "y": np.ones(3, np.float16)})
    assert grad.dtype == np.float16 and grad.tolist() == [1, -2, 3]
    with pytest.raises(gc.GraphcError, match="floating point"):
        ge.tensor([1, 2], dtype=ge.uint8, requires_grad=True)


# -- eager --------------------------------------------------------------------------------


def test_eager_tensors_hold_the_small_dtypes() -> None:
    names = {
        "float16": (ge.float16, ge.half),
        "int8": (ge.int8,),
        "int16": (ge.int16, ge.short),
        "uint8": (ge.uint8,),
        "uint16": (ge.uint16,),
        "uint32": (ge.uint32,),
        "uint64": (ge.uint64,),
    }
    for dtype, spellings in names.items():
        for spelling in spellings:
            assert spelling == np.dtype(dtype)
        t = ge.tensor([1, 2, 3], dtype=dtype)
        assert t.dtype == np.dtype(dtype) and t.to(ge.float32).dtype == np.float32
        assert ge.tensor([1.0]).to(dtype).dtype == np.dtype(dtype)
        assert (t + 1).dtype == np.dtype(dtype)
    x = ge.tensor([1.5, -2.0])
    assert x.half().dtype == np.float16 and x.short().dtype == np.int16
    assert x.char().dtype == np.int8 and x.byte().dtype == np.uint8
    np.testing.assert_array_equal((ge.tensor([200], dtype="uint8") + 100).numpy(), [44])


def test_eager_float16_backward_matches_the_graph() -> None:
    values = np.array([0.5, -1.25, 2.0], np.float16)
    x = ge.tensor(values, requires_grad=True)
    (gc.tanh(x) * x).sum().backward()
    want = gc.grad(lambda v: gc.sum(gc.tanh(v) * v))(values)
    assert x.grad.dtype == np.float16
    np.testing.assert_array_equal(x.grad.numpy(), want)
    t64 = np.tanh(values.astype(np.float64))
    np.testing.assert_allclose(want, t64 + values * (1 - t64**2), rtol=4e-3, atol=1e-3)


def test_eager_against_torch() -> None:
    torch = pytest.importorskip("torch")
    a = np.array([[1, -7, 100], [127, -128, 3]], np.int8)
    b = np.array([[2, 3, 4], [5, 6, 7]], np.int8)
    for op in ("add", "mul", "sub", "maximum"):
        ours = getattr(gc, op)(ge.tensor(a), ge.tensor(b)).numpy()
        theirs = getattr(torch, op)(torch.tensor(a), torch.tensor(b)).numpy()
        assert ours.dtype == theirs.dtype
        np.testing.assert_array_equal(ours, theirs)
    h = np.array([0.1, 65504.0, -3.5, 1e-5], np.float16)
    with np.errstate(over="ignore"):  # 65504 squared is inf in float16, in both
        ours = (ge.tensor(h) * ge.tensor(h)).numpy()
    theirs = (torch.tensor(h) * torch.tensor(h)).numpy()
    np.testing.assert_array_equal(ours, theirs)


# -- the native backend -------------------------------------------------------------------


def test_native_keeps_small_dtype_steps_on_numpy_with_numpys_bits() -> None:
    g = gc.Graph("mixed")
    with g:
        x = gc.placeholder("x", shape=(4,), dtype="int8")
        h = gc.placeholder("h", shape=(4,), dtype="float16")
        y = gc.placeholder("y", shape=(4,), dtype="float32")
        gc.output(x * x + x, name="a")
        gc.output(gc.tanh(h) * h, name="b")
        gc.output(gc.tanh(y) * 2.0 + y, name="c")
    feeds = {
        "x": np.array([1, -2, 100, 127], np.int8),
        "h": np.array([0.5, -3.0, 60000.0, 1e-4], np.float16),
        "y": np.ones(4, np.float32),
    }
    native = gc.compile(g, opt_level=2, backend="native", wait=True)
    numpy = gc.compile(g, opt_level=2, backend="numpy")
    with np.errstate(all="ignore"):
        for got, want in zip(native(**feeds), numpy(**feeds)):
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got, want)
    explained = native.explain(**feeds)
    if "native:" in explained:  # with a C compiler: the int8 and float16 steps stay
        assert "stays on numpy: no native kernels for int8" in explained
        assert "stays on numpy: no native kernels for float16" in explained


def test_native_pooling_names_why_float16_stays_on_numpy() -> None:
    g = gc.Graph("pool")
    with g:
        x = gc.placeholder("x", shape=(1, 2, 4, 4), dtype="float16")
        gc.output(gc.max_pool2d(x, 2), name="y")
    x = np.random.default_rng(4).standard_normal((1, 2, 4, 4)).astype(np.float16)
    native = gc.compile(g, backend="native", wait=True)
    np.testing.assert_array_equal(native(x), gc.max_pool2d(x, 2))
    explained = native.explain(x)
    if "native:" in explained:
        assert "max_pool2d in C: not for float16 values" in explained


# -- ONNX ---------------------------------------------------------------------------------


def small_graph(with_max: bool) -> gc.Graph:
    g = gc.Graph("small")
    with g:
        for dtype in SMALL:
            short = gc.ir.types.dtype_name(np.dtype(dtype))
            x = gc.placeholder(f"x_{short}", shape=(3, 6), dtype=dtype)
            c = gc.constant(extremes(dtype), name=f"c_{short}")
            if with_max:  # onnxruntime has no Max kernel for some of these dtypes
                gc.output(gc.maximum(x, c), name=f"max_{short}")
            gc.output(gc.cast(x, "float64"), name=f"wide_{short}")
            gc.output(gc.cast(gc.cast(x, "float64"), dtype), name=f"narrow_{short}")
            gc.output(c, name=f"const_{short}")
    return g


def test_onnx_export_and_import_round_trip() -> None:
    onnx = pytest.importorskip("onnx")
    g = small_graph(with_max=True)
    model = gc.onnx.export_model(g)
    types = {i.name: i.type.tensor_type.elem_type for i in model.graph.input}
    assert types["x_f16"] == onnx.TensorProto.FLOAT16 and types["x_u64"] == onnx.TensorProto.UINT64
    again = gc.onnx.import_model(model)
    feeds = feeds_of(g)
    for x, y in zip(gc.run(g, feeds), gc.run(again, feeds)):
        assert x.dtype == y.dtype
        np.testing.assert_array_equal(x, y)


def test_onnxruntime_runs_the_export() -> None:
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    g = small_graph(with_max=False)
    session = ort.InferenceSession(gc.onnx.export_model(g).SerializeToString())
    feeds = feeds_of(g)
    for x, y in zip(gc.run(g, feeds), session.run(None, feeds)):
        assert x.dtype == y.dtype
        np.testing.assert_array_equal(x, y)


def test_onnx_element_types_graphc_lacks_are_named() -> None:
    onnx = pytest.importorskip("onnx")
    from graphc.onnx.importer import SUPPORTED_TYPES, numpy_dtype

    assert "FLOAT16" in SUPPORTED_TYPES and "UINT64" in SUPPORTED_TYPES
    for code, name in [(onnx.TensorProto.FLOAT8E4M3FN, "FLOAT8E4M3FN"), (8, "STRING")]:
        with pytest.raises(gc.onnx.OnnxError, match=f"element type {name} is not supported"):
            numpy_dtype(code, "x")


def test_clip_bounds_past_the_dtypes_range() -> None:
    """numpy 2.1 and later keep an int bound past the range when it limits nothing (2.0
    raised OverflowError) and refuse one that would limit everything: graphc does the
    first on every numpy and names the second; ONNX gets the range's edge."""
    x = np.array([0, 1, 5, 255], np.uint8)
    np.testing.assert_array_equal(gc.clip(x, -1, 2), np.minimum(x, 2))
    np.testing.assert_array_equal(gc.clip(x, -1, 300), x)
    np.testing.assert_array_equal(gc.clip(x.astype(np.int32), 3, 2**40), np.maximum(x, 3))
    for bounds in [(300, 400), (-5, -1), (None, -3)]:
        with pytest.raises(gc.DTypeError, match="clip: the bounds .* past every uint8 value"):
            gc.clip(x, *bounds)
    pytest.importorskip("onnx")
    g = gc.Graph("clip")
    with g:
        p = gc.placeholder("x", shape=(4,), dtype="uint8")
        gc.output(gc.clip(p, -1, 2), name="low")
        gc.output(gc.clip(p, 1, 300), name="high")
    again = gc.onnx.import_model(gc.onnx.export_model(g))
    for got, want in zip(gc.run(again, {"x": x}), gc.run(g, {"x": x})):
        assert got.dtype == np.uint8
        np.testing.assert_array_equal(got, want)
