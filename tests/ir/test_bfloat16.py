"""bfloat16 (ml_dtypes'): text and JSON, its type rules, every elementwise op case and
the other ops computed in float32 and rounded to bfloat16, gradients, eager tensors
against torch, the native backend keeping its steps on numpy, ONNX, and the named error
without ml_dtypes."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass

import numpy as np
import pytest

ml_dtypes = pytest.importorskip("ml_dtypes", reason="bfloat16 needs ml_dtypes (onnx or jax)")

import graphc as gc  # noqa: E402
import graphc.eager as ge  # noqa: E402
from graphc.ir import types  # noqa: E402
from graphc.ir.registry import get_op  # noqa: E402
from tests.budget import sample  # noqa: E402
from tests.op_cases import FLOAT, OpCase, all_cases  # noqa: E402

BF16 = np.dtype(ml_dtypes.bfloat16)
UINT16 = np.dtype(np.uint16)


def bits(x: np.ndarray) -> np.ndarray:
    """bfloat16 values as their bits, every nan as one nan."""
    x = np.asarray(x)
    assert x.dtype == BF16, x.dtype
    out = x.view(UINT16).copy()
    out[np.isnan(x.astype(np.float32))] = 0x7FC0
    return out


def same_bits(got: np.ndarray, want: np.ndarray, what: str = "") -> None:
    np.testing.assert_array_equal(bits(got), bits(want), err_msg=what)


def same_bytes(got: np.ndarray, want: np.ndarray, what: str) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape, what
    assert np.ascontiguousarray(got).tobytes() == np.ascontiguousarray(want).tobytes(), what


def ulps_apart(got: np.ndarray, want: np.ndarray) -> int:
    """The most bfloat16 steps between got and want (nans equal, infs exact)."""
    a, b = np.asarray(got).astype(np.float64), np.asarray(want).astype(np.float64)
    nan = np.isnan(a) & np.isnan(b)
    exact = (a == b) | nan
    if exact.all():
        return 0
    step = np.spacing(np.abs(b).astype(BF16).astype(np.float32) * 1.0, dtype=np.float32)
    step = np.maximum(step * 2.0**16, 2.0**-133)  # bfloat16 has 16 fewer mantissa bits
    return int(np.max(np.where(exact, 0, np.ceil(np.abs(a - b) / step))))


# -- the dtype -----------------------------------------------------------------------------


def test_bf16_is_a_dtype_by_every_name() -> None:
    assert gc.TensorType((2,), "bf16").dtype == BF16
    assert types.as_dtype("bfloat16") == types.as_dtype(ml_dtypes.bfloat16) == BF16
    assert types.DTYPES["bf16"] == BF16 and types.dtype_name(BF16) == "bf16"
    assert types.is_float(BF16) and not types.is_float(np.dtype(np.int8))
    assert types.finfo(BF16).eps == 2.0**-7
    assert ge.bfloat16 == BF16


@pytest.mark.slow  # a child interpreter importing graphc: about a second
def test_importing_graphc_does_not_import_ml_dtypes() -> None:
    """ml_dtypes takes about half a second to import: graphc imports it when a bfloat16
    is met, and at once only when another library imported it already."""
    check = (
        "import sys, graphc, numpy as np; assert 'ml_dtypes' not in sys.modules; "
        "graphc.TensorType((2,), 'f32'); assert 'ml_dtypes' not in sys.modules; "
        "print(graphc.TensorType((2,), 'bf16'))"
    )
    run = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True)
    assert run.stdout.strip() == "bf16[2]", run.stderr


def without_ml_dtypes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ml_dtypes", None)  # import ml_dtypes: ImportError
    monkeypatch.delitem(types.DTYPES, "bf16")
    monkeypatch.delitem(types._SHORT_NAME, BF16)


def test_without_ml_dtypes_bfloat16_is_a_named_error(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("onnx")  # (imported before ml_dtypes goes: onnx imports it)
    from graphc.onnx.importer import numpy_dtype

    without_ml_dtypes(monkeypatch)
    for name in ("bf16", "bfloat16"):
        with pytest.raises(gc.DTypeError, match="bfloat16 needs the ml_dtypes package: pip"):
            gc.TensorType((2,), name)
    with pytest.raises(gc.ParseError, match="'bf16': bfloat16 needs the ml_dtypes package"):
        gc.parse("graph g(%x: bf16[2]) {\n  output %y = %x\n}")
    with pytest.raises(gc.ParseError, match="dtype: bfloat16 needs the ml_dtypes package"):
        gc.from_json(gc.to_json(small_graph()).replace('"f32"', '"bf16"'))
    with pytest.raises(gc.DTypeError, match="bfloat16 needs the ml_dtypes"):
        ge.tensor([1.0], dtype="bfloat16")
    assert gc.TensorType((2,), "f32").dtype == np.float32  # the rest is unchanged
    with pytest.raises(gc.onnx.OnnxError, match="x: element type BFLOAT16: bfloat16 needs"):
        numpy_dtype(16, "x")


# -- text and JSON -------------------------------------------------------------------------


def extremes() -> np.ndarray:
    info = types.finfo(BF16)
    return np.array(
        [0.1, -0.0, float(info.max), float(info.smallest_subnormal), 1 / 3, np.inf, np.nan], BF16
    )


def small_graph() -> gc.Graph:
    g = gc.Graph("bf")
    with g:
        x = gc.placeholder("x", shape=("B", 7), dtype="float32")
        gc.output(gc.exp(x), name="y")
    return g


def every_bf16_form() -> gc.Graph:
    g = gc.Graph("bf16")
    with g:
        x = gc.placeholder("x", shape=("B", 7), dtype="bf16")
        c = gc.constant(extremes(), name="c")
        gc.output(gc.maximum(x, c), name="max")
        gc.output(gc.cast(x, "float32"), name="wide")
        gc.output(gc.cast(gc.cast(x, "float32"), "bfloat16"), name="narrow")
    return g


def feeds() -> dict[str, np.ndarray]:
    return {"x": np.random.default_rng(0).standard_normal((3, 7)).astype(BF16)}


def test_text_and_json_round_trip_keep_every_bit() -> None:
    g = every_bf16_form()
    text = str(g)
    assert "%x: bf16[B,7]" in text and "dtype=bf16)" in text
    doc = json.loads(gc.to_json(g))
    assert {"shape": ["B", 7], "dtype": "bf16"} in [n.get("type") for n in doc["nodes"]]
    for again in (gc.parse(text), gc.from_json(gc.to_json(g))):
        assert str(again) == text
        [a] = [n.value for n in g.nodes if n.name == "c"]
        [b] = [n.value for n in again.nodes if n.name == "c"]
        assert b.dtype == BF16 and a.tobytes() == b.tobytes()
        for x, y in zip(gc.run(g, feeds()), gc.run(again, feeds())):
            assert x.dtype == y.dtype
            assert x.tobytes() == y.tobytes()


def test_literals_that_do_not_fit_bf16_are_refused() -> None:
    with pytest.raises(gc.ParseError, match="does not fit dtype bf16"):
        gc.parse("graph t() {\n  %c: bf16[] = constant(value=1e39)\n  output %o = %c\n}")


def test_feeds_of_a_bf16_placeholder() -> None:
    g = gc.Graph("feed")
    with g:
        x = gc.placeholder("x", shape=(2,), dtype="bf16")
        gc.output(x * 2.0, name="y")
    same_bits(g(x=[1.5, 2]), np.array([3, 4], BF16))  # a Python list takes the dtype
    with pytest.raises(gc.FeedError, match="1e\\+39 does not fit dtype bfloat16"):
        g(x=[1e39, 2])
    with pytest.raises(gc.FeedError, match="cast it with .astype\\(ml_dtypes.bfloat16\\)"):
        g(x=np.ones(2, np.float32))


# -- type rules ----------------------------------------------------------------------------

# bfloat16 meeting each dtype: numpy's result_type with ml_dtypes (and jax's, for floats)
PROMOTED = {
    "bool": "bf16", "i8": "bf16", "u8": "bf16", "bf16": "bf16", "f16": "f32", "f32": "f32",
    "f64": "f64", "i16": "f32", "u16": "f32", "i32": "f64", "u32": "f64", "i64": "f64",
    "u64": "f64",
}  # fmt: skip


def rule_dtype(op: object, *dtypes: object) -> np.dtype:
    g = gc.Graph("rule")
    with g:
        xs = [gc.placeholder(f"x{i}", shape=(2, 2), dtype=d) for i, d in enumerate(dtypes)]
        gc.output(op(*xs), name="out")
    return g.outputs[0].type.dtype


@pytest.mark.parametrize("other", sorted(PROMOTED))
def test_promotion(other: str) -> None:
    want = types.as_dtype(PROMOTED[other])
    assert want == np.result_type(BF16, types.as_dtype(other))
    assert rule_dtype(gc.add, "bf16", other) == rule_dtype(gc.add, other, "bf16") == want
    assert rule_dtype(gc.lt, "bf16", other) == np.bool_
    assert rule_dtype(gc.where, "bool", "bf16", other) == want
    if other not in ("bool",):
        assert rule_dtype(gc.matmul, "bf16", other) == want  # numpy's matmul: float32
    x = np.ones(2, BF16)  # NEP 50: Python scalars take the array's dtype
    assert gc.add(x, 1).dtype == gc.mul(x, 0.5).dtype == BF16
    assert rule_dtype(gc.tanh, "bf16") == rule_dtype(gc.sigmoid, "bf16") == BF16


@pytest.mark.parametrize("other", ["bool", "i8", "u8", "i16", "u16"])
def test_python_scalars_take_the_promoted_dtype_of_several_operands(other: str) -> None:
    """A Python scalar beside bf16 and another strong dtype takes their promoted dtype
    with it (numpy promoting all three at once gives float64: where(cond, 0, bf16 ct),
    clip's gradient, was float64 and refused by autodiff)."""
    want = np.result_type(np.result_type(BF16, types.as_dtype(other)), 1.0)
    g = gc.Graph("weak")
    with g:
        x = gc.placeholder("x", (2,), "bf16")
        y = gc.placeholder("y", (2,), other)
        c = gc.placeholder("c", (2,), "bool")
        assert gc.where(c, 0, x).dtype == gc.where(c, x, 0.5).dtype == BF16
        assert gc.where(y > 0, x, 1.0).dtype == BF16
        assert gc.add(gc.where(c, x, y), 1.0).dtype == want
    g = gc.Graph("clipped")
    with g:
        x = gc.placeholder("x", (2,), "bf16")
        gc.output(gc.sum(gc.clip(x, -1.0, 1e30)), name="out")
    joint = gc.gradients(g, wrt=["x"])
    grad = gc.run(joint, {"x": np.array([-2.0, 0.5], BF16)})[1]
    same_bits(grad, np.array([0.0, 1.0], BF16))
    eager = gc.where(np.array([True, False]), 0, np.array([1.0, 2.0], BF16))
    same_bits(eager, np.array([0.0, 2.0], BF16))


def test_float_promotion_is_jaxs() -> None:
    """With the floats, bool, int8 and uint8 graphc's bfloat16 promotes as jax's (wider
    ints: numpy's float64, where jax keeps bfloat16)."""
    jnp = pytest.importorskip("jax.numpy")
    for other in ("f16", "f32", "f64", "bool", "i8", "u8"):
        want = np.dtype(jnp.promote_types(jnp.bfloat16, types.as_dtype(other)))
        assert rule_dtype(gc.add, "bf16", other) == want, other


# -- every elementwise op case, in bfloat16 ------------------------------------------------


@dataclass(frozen=True)
class InBf16:
    case: OpCase

    @property
    def id(self) -> str:
        return f"{self.case.op}-{self.case.label}"

    def inputs(self) -> list[np.ndarray] | None:
        """The case's float inputs drawn in bfloat16 (others keep their dtype); None where
        its fixed values do not fit."""
        rng = np.random.default_rng(0)
        arrays = []
        for arg in self.case.args:
            if arg.dtype != FLOAT:
                arrays.append(arg.draw(rng, "float64"))
                continue
            drawn = np.asarray(arg.draw(rng, "float64"), np.float64)
            value = drawn.astype(BF16)
            if np.any(np.isfinite(drawn) & ~np.isfinite(value.astype(np.float32))):
                return None  # a finite value past bfloat16's range
            arrays.append(value)
        return arrays


def wide(xs: list[np.ndarray]) -> list[np.ndarray]:
    return [x.astype(np.float32) if x.dtype == BF16 else x for x in xs]


def elementwise_cases() -> list[InBf16]:
    return [
        InBf16(c)
        for c in all_cases()
        if get_op(c.op).elementwise
        and not get_op(c.op).has("fusion")
        and c.float_dtype == "float64"
        and any(a.dtype == FLOAT for a in c.args)
    ]


def in_float32_rounded(case: OpCase, xs: list[np.ndarray], got: np.ndarray) -> np.ndarray:
    """The case computed on float32 copies of the bfloat16 inputs, rounded to got's dtype."""
    want = np.asarray(case.build(*wide(xs)))
    return want.astype(got.dtype) if want.dtype != got.dtype else want


def engines(case: OpCase, xs: list[np.ndarray]) -> dict[str, np.ndarray]:
    g = gc.Graph("bf16_case")
    with g:
        ps = [gc.placeholder(f"x{i}", shape=x.shape, dtype=x.dtype) for i, x in enumerate(xs)]
        gc.output(case.build(*ps), name="out")
    feeds = {f"x{i}": x for i, x in enumerate(xs)}
    with np.errstate(all="ignore"):
        return {
            "type": np.empty(0, g.outputs[0].type.dtype),
            "reference": gc.run(g, feeds)[0],
            "O0": gc.compile(g, opt_level=0)(**feeds),
            "O2": gc.compile(g, opt_level=2)(**feeds),
            "native": gc.compile(g, opt_level=2, backend="native", wait=True)(**feeds),
            "eager": ge.tensor(case.build(*[ge.tensor(x) for x in xs])).numpy(),
        }


@pytest.mark.parametrize(
    "item", sample(elementwise_cases(), lambda r: r.case.op), ids=lambda r: r.id
)
def test_elementwise_case_in_bf16(item: InBf16) -> None:
    """A ufunc op runs ml_dtypes' bfloat16 loop (float32 math, rounded: within one
    bfloat16 step of numpy's float32 rounded, bit for bit for + - * / and exact ops);
    pow by 2 or 3 is products rounded in bfloat16 (its meaning); every other op computes
    in float32 and rounds once, bit for bit. Every engine gives the kernel's bits."""
    xs = item.inputs()
    if xs is None:
        pytest.skip(f"{item.id}: the case's fixed values do not fit bfloat16")
    with np.errstate(all="ignore"):
        got = np.asarray(item.case.build(*xs))
        want = in_float32_rounded(item.case, xs, got)
    if got.dtype == BF16:
        kernel = get_op(item.case.op).kernel
        if hasattr(kernel, "ufunc"):
            assert ulps_apart(got, want) <= 1
        elif getattr(kernel, "rounds_half", False):  # pow's x*x*x: a rounding a product
            assert ulps_apart(got, want) <= 2
        else:
            same_bits(got, want)
    else:
        np.testing.assert_array_equal(got, want)
    for how, value in engines(item.case, xs).items():
        assert value.dtype == got.dtype, how
        if how != "type":
            same_bytes(value, got, how)


def test_every_float_elementwise_op_meets_bf16() -> None:
    ops = {r.case.op for r in elementwise_cases()}
    assert len(ops) > 40 and {"add", "exp", "sigmoid", "gelu", "erf", "where"} <= ops


def other_cases() -> list[InBf16]:
    """Every case with float inputs of an op that is not elementwise."""
    return [
        InBf16(c)
        for c in all_cases()
        if not get_op(c.op).elementwise
        and not get_op(c.op).has("fusion")
        and c.float_dtype == "float64"
        and any(a.dtype == FLOAT for a in c.args)
        and c.op != "gemm"  # one BLAS call, float32 and float64 only (named error)
    ]


@pytest.mark.parametrize("item", sample(other_cases(), lambda r: r.case.op), ids=lambda r: r.id)
def test_other_op_case_in_bf16(item: InBf16) -> None:
    """Reductions, matmul, convolutions, norms, indexing, control flow... in bfloat16:
    the type rule's dtype, close to float32's answer, the same bits from every engine.
    (Eager tensors give the bits to match: on plain arrays a case's `@` is numpy's own,
    whose bfloat16 product is float32.)"""
    xs = item.inputs()
    if xs is None:
        pytest.skip(f"{item.id}: the case's fixed values do not fit bfloat16")
    with np.errstate(all="ignore"):
        got = ge.tensor(item.case.build(*[ge.tensor(x) for x in xs])).numpy()
        want = np.asarray(item.case.build(*wide(xs)))
    np.testing.assert_allclose(
        got.astype(np.float64), want.astype(np.float64), 0.05, 0.05, equal_nan=True
    )
    for how, value in engines(item.case, xs).items():
        assert value.dtype == got.dtype, how
        if how != "type":
            same_bytes(value, got, how)


def test_gemm_on_bf16_is_a_named_error() -> None:
    x = np.ones((2, 2), BF16)
    with pytest.raises(gc.DTypeError, match="gemm: operands must all be float32 or"):
        gc.gemm(x, x, x)


# -- a reduction and a matmul, rounded once ------------------------------------------------


def test_sum_and_matmul_compute_in_float32_and_round_once() -> None:
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((5, 999)) * 10).astype(BF16)
    w = rng.standard_normal((999, 3)).astype(BF16)
    x32, w32 = x.astype(np.float32), w.astype(np.float32)
    same_bits(gc.sum(x, axis=1), x32.sum(axis=1).astype(BF16))
    same_bits(gc.mean(x, axis=1), x32.mean(axis=1).astype(BF16))
    same_bits(gc.matmul(x, w), (x32 @ w32).astype(BF16))
    # a sum accumulated in bfloat16 (numpy's reduce on ml_dtypes' add) would lose most bits
    assert not np.array_equal(bits(np.add.reduce(x, axis=1)), bits(gc.sum(x, axis=1)))
    g = gc.Graph("sums")
    with g:
        p = gc.placeholder("x", shape=("B", 999), dtype="bf16")
        q = gc.placeholder("w", shape=(999, 3), dtype="bf16")
        gc.output(gc.sum(p, axis=1), name="s")
        gc.output(gc.relu(p @ q + 1.0), name="h")  # matmul, then its epilogue at O2
    want = [x32.sum(axis=1).astype(BF16), np.maximum((x32 @ w32).astype(BF16) + 1, 0)]
    for how in ("reference", 0, 2, "native"):
        if how == "reference":
            got = gc.run(g, {"x": x, "w": w})
        else:
            backend = "native" if how == "native" else "numpy"
            exe = gc.compile(g, opt_level=2 if how == "native" else how, backend=backend, wait=True)
            got = exe(x=x, w=w)
        for a, b in zip(got, want):
            same_bits(a, b, str(how))


def test_plans_count_the_float32_copies_as_scratch() -> None:
    """A bfloat16 step computed in float32 holds float32 copies of its bfloat16 operands
    and its float32 result: the planner counts them as the step's scratch, and that is
    what the kernel allocates (tracemalloc)."""
    from graphc.ops.defop import float32_copy_bytes
    from tests.runtime.test_scratch import slack, traced

    rng = np.random.default_rng(6)
    x = rng.standard_normal((64, 1000)).astype(BF16)
    w = rng.standard_normal((1000, 32)).astype(BF16)
    for op, arrays, attrs in [
        ("sum", [x], {"axis": (1,), "keepdims": False}),
        ("matmul", [x, w], {}),
    ]:
        opdef = get_op(op)
        types_in = [gc.TensorType(a.shape, a.dtype) for a in arrays]
        out_type = opdef.infer(*types_in, **attrs)
        out = np.empty(out_type.shape, out_type.dtype)
        rule = float32_copy_bytes(opdef.kernel, out_type, types_in)
        measured = traced(lambda: opdef.kernel(*arrays, out=out, **attrs))  # noqa: B023
        assert rule > 0 and measured <= rule + slack(np.float32), op
        assert rule <= measured + slack(np.float32), op
    assert float32_copy_bytes(get_op("sum").kernel, out_type, [gc.TensorType((4,), "f32")]) == 0
    g = gc.Graph("s")
    with g:
        p = gc.placeholder("x", shape=("B", 1000), dtype="bf16")
        gc.output(gc.sum(gc.exp(p), axis=1), name="s")
    assert "scratch 250.2 KiB" in gc.compile(g).explain(x=x)  # 4 * (64 * 1000 + 64) bytes


# -- gradients -----------------------------------------------------------------------------


def mlp(dtype: str) -> gc.Graph:
    g = gc.Graph("mlp")
    with g:
        x = gc.placeholder("x", shape=("B", 6), dtype=dtype)
        w = gc.placeholder("w", shape=(6, 4), dtype=dtype)
        b = gc.placeholder("b", shape=(4,), dtype=dtype)
        h = gc.tanh(x @ w + b)
        gc.output(gc.mean(gc.sigmoid(h) * h), name="loss")
    return g


def test_gradients_in_bf16_are_close_to_float32s() -> None:
    rng = np.random.default_rng(2)
    values = {"x": rng.standard_normal((8, 6)), "w": rng.standard_normal((6, 4)) / 2,
              "b": rng.standard_normal(4)}  # fmt: skip
    got = gc.run(
        gc.gradients(mlp("bf16"), wrt=["w", "b"]), {k: v.astype(BF16) for k, v in values.items()}
    )
    want = gc.run(
        gc.gradients(mlp("f32"), wrt=["w", "b"]),
        {k: v.astype(np.float32) for k, v in values.items()},
    )
    for a, b in zip(got, want):
        assert a.dtype == BF16
        np.testing.assert_allclose(a.astype(np.float32), b, rtol=3e-2, atol=3e-3)
    # every level and backend gives the reference's bits (O2: a matmul epilogue with
    # tanh, a fused group), and so does the eager tape
    ts = {k: ge.tensor(v.astype(BF16), requires_grad=True) for k, v in values.items()}
    h = ge.tanh(ts["x"] @ ts["w"] + ts["b"])
    loss = ge.mean(ge.sigmoid(h) * h)
    loss.backward()
    same_bits(loss.detach().numpy(), got[0])
    same_bits(ts["w"].grad.numpy(), got[1])
    same_bits(ts["b"].grad.numpy(), got[2])
    graph = gc.gradients(mlp("bf16"), wrt=["w", "b"])
    feeds = {k: v.astype(BF16) for k, v in values.items()}
    for level, backend in ((0, "numpy"), (2, "numpy"), (2, "native")):
        compiled = gc.compile(graph, opt_level=level, backend=backend, wait=True)(**feeds)
        for a, b in zip(compiled, got):
            same_bits(a, b, f"O{level} {backend}")


def test_bf16_gradient_of_each_op_is_float32s_rounded() -> None:
    """The gradient graph of a bfloat16 op runs its rule's ops in bfloat16: close to
    the float32 gradient (float64 finite differences check the rules elsewhere)."""
    rng = np.random.default_rng(3)
    x = rng.uniform(0.5, 2.0, (4, 5))
    for op in (gc.exp, gc.log, gc.tanh, gc.sigmoid, gc.gelu, gc.softplus, gc.sqrt):
        grads = []
        for dtype in (BF16, np.float32):
            g = gc.Graph("one")
            with g:
                p = gc.placeholder("x", shape=(4, 5), dtype=dtype)
                gc.output(gc.sum(op(p)), name="y")
            grads.append(gc.run(gc.gradients(g, wrt=["x"]), {"x": x.astype(dtype)})[1])
        assert grads[0].dtype == BF16
        np.testing.assert_allclose(grads[0].astype(np.float32), grads[1], rtol=2e-2, atol=1e-3)


# -- eager, against torch ------------------------------------------------------------------


def test_eager_bf16_tensors() -> None:
    t = ge.tensor([1.0, 2.5, -3.0], dtype="bfloat16")
    assert t.dtype == BF16 == ge.bfloat16
    assert t.to(ge.float32).dtype == np.float32 and t.to(ge.float32).to(ge.bfloat16).dtype == BF16
    assert ge.tensor([1.0]).bfloat16().dtype == BF16
    assert "dtype=bfloat16" in repr(t)
    assert ge.zeros(3, dtype=ge.bfloat16).dtype == BF16


def test_eager_bf16_against_torch() -> None:
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    a = rng.standard_normal((16, 32)).astype(np.float32)
    b = rng.standard_normal((32, 8)).astype(np.float32)
    ta, tb = ge.tensor(a).bfloat16(), ge.tensor(b).bfloat16()
    pa, pb = torch.tensor(a).bfloat16(), torch.tensor(b).bfloat16()
    # the inputs round alike
    np.testing.assert_array_equal(ta.numpy().astype(np.float32), pa.float().numpy())
    pairs = [
        (ta + ta * 3, pa + pa * 3),
        (ge.exp(ta), torch.exp(pa)),
        (ge.tanh(ta), torch.tanh(pa)),
        (ge.sigmoid(ta), torch.sigmoid(pa)),
        (ge.relu(ta) - ta / 7, torch.relu(pa) - pa / 7),
        (ta @ tb, pa @ pb),
        (ta.sum(dim=1), pa.sum(dim=1)),
    ]
    for ours, theirs in pairs:
        assert ours.dtype == BF16 and theirs.dtype == torch.bfloat16
        got, want = ours.numpy().astype(np.float32), theirs.float().numpy()
        # within bfloat16 rounding (one step of 2**-8 relative, doubled for the sums)
        np.testing.assert_allclose(got, want, rtol=2**-7, atol=2**-7 * np.abs(want).max() / 8)


# -- native --------------------------------------------------------------------------------


def test_native_backend_keeps_bf16_steps_on_numpy() -> None:
    g = gc.Graph("n")
    with g:
        x = gc.placeholder("x", shape=("B", 7), dtype="bf16")
        gc.output(gc.tanh(x) * 2.0 + x, name="y")
    x = feeds()["x"]
    exe = gc.compile(g, opt_level=2, backend="native", wait=True)
    same_bits(exe(x=x), gc.compile(g, opt_level=2)(x=x))
    same_bits(exe(x=x), gc.run(g, {"x": x})[0])
    explained = exe.explain(x=x)
    assert "no step of this plan runs native" in explained
    assert "no native kernels for bfloat16" in explained


# -- ONNX ----------------------------------------------------------------------------------


def test_onnx_round_trip_of_bf16() -> None:
    onnx = pytest.importorskip("onnx")
    g = gc.Graph("onnx_bf16")
    with g:
        x = gc.placeholder("x", shape=("B", 7), dtype="bf16")
        c = gc.constant(extremes(), name="c")
        y = gc.maximum(x, c) * 2.0
        gc.output(y, name="y")
        gc.output(gc.cast(y, "float32"), name="wide")
        gc.output(gc.cast(gc.cast(x, "float32"), "bf16"), name="narrow")
    model = gc.onnx.export_model(g)
    onnx.checker.check_model(model, full_check=True)
    [init] = [t for t in model.graph.initializer if list(t.dims) == [7]]
    assert init.data_type == onnx.TensorProto.BFLOAT16
    same_bits(onnx.numpy_helper.to_array(init).view(BF16), extremes())
    again = gc.onnx.import_model(model)
    assert again.inputs[0].type == g.inputs[0].type
    for a, b in zip(gc.run(g, feeds()), gc.run(again, feeds())):
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes()


def test_onnx_bf16_initializer_in_int32_data() -> None:
    """A BFLOAT16 tensor may hold each value's bits in int32_data (raw_data is the other
    form): both read as the same bits."""
    onnx = pytest.importorskip("onnx")
    from graphc.onnx.importer import tensor_value

    values = extremes()
    as_bits = onnx.helper.make_tensor(  # onnx rounds the float values to bits in int32_data
        "t", onnx.TensorProto.BFLOAT16, [values.size], values.astype(np.float32).tolist()
    )
    assert len(as_bits.int32_data) == values.size and not as_bits.raw_data
    raw = onnx.helper.make_tensor(
        "t", onnx.TensorProto.BFLOAT16, [values.size], values.tobytes(), raw=True
    )
    same_bits(tensor_value(as_bits, "t"), values)
    same_bits(tensor_value(raw, "t"), values)


def test_onnxruntime_rounds_a_bf16_cast_as_graphc() -> None:
    """onnxruntime's CPU kernels have Cast for bfloat16 (not Mul): a float32 value cast
    to bfloat16 and back gives graphc's bits there."""
    ort = pytest.importorskip("onnxruntime")
    g = gc.Graph("cast_bf16")
    with g:
        x = gc.placeholder("x", shape=("B", 3), dtype="float32")
        gc.output(gc.cast(gc.cast(x, "bf16"), "float32"), name="z")
    session = ort.InferenceSession(gc.onnx.export_model(g).SerializeToString())
    x = np.random.default_rng(5).standard_normal((500, 3)).astype(np.float32)
    x[:3] = [[np.inf, -0.0, np.nan], [3.0e38, 1e-40, -1e-45], [1 + 2**-8, 1 + 3 * 2**-8, -1.5]]
    [theirs] = session.run(None, {"x": x})
    np.testing.assert_array_equal(theirs, gc.run(g, {"x": x})[0])
