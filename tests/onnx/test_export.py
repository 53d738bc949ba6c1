"""graphc -> ONNX: every op case exported, checked by onnx's full checker, run by
onnxruntime and compared with graphc; random edge graphs exported and imported back.

Refusals allowed, each an OnnxError naming the node and op: the counter-based random
ops (no ONNX op draws their stream), ops made by gradient rules (an exported model is an
inference graph), int64 max pooling (ONNX's MaxPool has no int64), and forms that need
a later opset (exported again at that opset, which must work). Where onnxruntime has
no kernel for a valid model (float64 Conv, Erf, AveragePool), the run is skipped with
that reason; any other refusal or mismatch fails.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

onnx = pytest.importorskip("onnx")

import graphc as gc  # noqa: E402
from graphc.ir.registry import ops_with  # noqa: E402
from graphc.ir.types import as_dtype, is_float  # noqa: E402
from graphc.onnx import OnnxError  # noqa: E402
from tests.budget import draws, sample  # noqa: E402
from tests.edge_graphs import edge_graphs  # noqa: E402
from tests.edge_values import assert_bits_equal, edge_feeds  # noqa: E402
from tests.op_cases import BUILDER_CASES, all_cases, build_graph  # noqa: E402

NO_ONNX_FORM = {"random_uniform", "random_normal", "fold_in"} | ops_with("fusion")
# ONNX ops without a form for a dtype, refused by name (the integer forms ONNX defines)
REFUSALS = (
    "MaxPool has no int64 form",
    "MaxPool has no uint64 form",
    "Pow has no",
    "MatMul has no",
)
TOLERANCE = {np.dtype(np.float32): (1e-5, 1e-6), np.dtype(np.float64): (1e-10, 1e-15)}


def _graphs() -> list[tuple[str, gc.Graph, object]]:
    graphs = []
    for case in all_cases() + BUILDER_CASES:
        try:
            graphs.append((case.id, build_graph(case), case))
        except gc.GraphcError:  # cases that test a builder's refusal
            continue
    return graphs


GRAPHS = _graphs()
EXPORTED = sample(GRAPHS, key=lambda g: g[2].op, ident=lambda g: g[0])


def _export(graph: gc.Graph, opset: int | None = None) -> object | None:
    """The checked model, or None when the graph holds an op with no ONNX form."""
    try:
        model = gc.onnx.export_model(graph, opset=opset)
    except OnnxError as exc:
        needs = re.search(r"needs opset (\d+)", str(exc))
        if needs and opset is None:  # a later opset has the form: exported there
            return _export(graph, int(needs.group(1)))
        ops = {n.op for n in graph.op_nodes}
        named = any(f"(op {op})" in str(exc) for op in ops)
        assert named and ((ops & NO_ONNX_FORM) or any(r in str(exc) for r in REFUSALS)), str(exc)
        return None
    onnx.checker.check_model(model, full_check=True)
    return model


def _session(model: object) -> object:
    ort = pytest.importorskip("onnxruntime")
    try:
        return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception as exc:  # noqa: BLE001 - onnxruntime's own exception types
        if "NOT_IMPLEMENTED" in str(exc):
            kernel = re.search(r"implementation for (\w+)", str(exc))
            pytest.skip(f"onnxruntime has no kernel for {kernel.group(1) if kernel else exc}")
        raise


def _compare(got: list[np.ndarray], want: list[np.ndarray], how: str) -> None:
    assert len(got) == len(want)
    for k, (a, b) in enumerate(zip(got, want)):
        assert a.dtype == b.dtype and a.shape == b.shape, (how, k, a.dtype, b.dtype, a.shape)
        rtol, atol = TOLERANCE.get(a.dtype, (0, 0))
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, equal_nan=True, err_msg=how)


@pytest.mark.parametrize("name, graph, case", EXPORTED, ids=[g[0] for g in EXPORTED])
def test_op_case_runs_in_onnxruntime(name: str, graph: gc.Graph, case: object) -> None:
    model = _export(graph)
    if model is None:
        return
    session = _session(model)
    feeds = {p.name: x for p, x in zip(graph.inputs, case.inputs(0))}
    with np.errstate(all="ignore"):
        want = gc.run(graph, feeds)
    _compare(session.run(None, feeds), want, f"{name}: onnxruntime")
    assert [o.name for o in model.graph.output] == [o.name for o in graph.outputs]


def test_refused_op_is_named() -> None:
    g = gc.Graph("noise")
    with g:
        key = gc.placeholder("key", (), "int64")
        gc.output(gc.random_normal(key, shape=(3,)), name="z")
    with pytest.raises(OnnxError, match=r"node 'random_normal' \(op random_normal\)"):
        gc.onnx.export_model(g)


def test_a_graph_without_outputs_is_refused_by_name() -> None:
    """Its model passed the checker, and onnxruntime refused to load it."""
    g = gc.Graph("nothing")
    with g:
        gc.placeholder("x", (3,))
    with pytest.raises(OnnxError, match="graph 'nothing' has no outputs"):
        gc.onnx.export_model(g)


def test_symbolic_dims_stay_symbolic() -> None:
    g = gc.trace(lambda x: gc.reshape(x, ("B", 2, 3)).sum(axis=1), gc.TensorSpec(("B", 6)))
    model = gc.onnx.export_model(g)
    dims = model.graph.input[0].type.tensor_type.shape.dim
    assert [d.dim_param or d.dim_value for d in dims] == ["B", 6]
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for batch in (0, 1, 5):
        x = np.arange(batch * 6, dtype=np.float32).reshape(batch, 6)
        _compare(session.run(None, {g.inputs[0].name: x}), gc.run(g, {g.inputs[0].name: x}), "B")


def test_opset_below_13_or_past_the_newest_read_is_refused() -> None:
    """An opset newer than graphc knows (29: onnx 1.23's is 28) was written as asked, a
    model onnxruntime and graphc's own import refuse: the export refuses it by name."""
    g = gc.trace(lambda x: x + 1.0, gc.TensorSpec((2,)))
    with pytest.raises(OnnxError, match="opset 11"):
        gc.onnx.export_model(g, opset=11)
    with pytest.raises(OnnxError, match="opset 29 is not supported; graphc writes opsets 13 to 28"):
        gc.onnx.export_model(g, opset=29)
    assert gc.onnx.import_model(gc.onnx.export_model(g, opset=28)).inputs[0].name == "x"


def test_saved_file_loads(tmp_path: object) -> None:
    g = gc.trace(lambda x: gc.tanh(x) * 2.0, gc.TensorSpec((2, 3)))
    path = tmp_path / "m.onnx"  # type: ignore[operator]
    gc.onnx.export_model(g, path)
    back = gc.onnx.import_model(str(path))
    x = np.linspace(-2, 2, 6, dtype=np.float32).reshape(2, 3)
    assert_bits_equal(gc.run(back, {"x": x}), gc.run(g, {"x": x}), "saved and loaded")


# exported as a decomposition graphc reads back as several ops: equal within rounding
DECOMPOSED = {
    "gelu", "gelu_exact", "sum_to", "elu", "expm1", "log1p", "softplus",
    "max_pool2d_backward", "avg_pool2d_backward", "layer_norm_grad",  # sums in another order
    "atan2",  # Atan of a quotient (ONNX has no Atan2)
    "log2", "log10",  # Log over log(base), in float64: numpy's float32 kernels are 2-3 ulps off
    "logaddexp",  # numpy's steps, its log1p written as Kahan's form
}  # fmt: skip


def _decomposed(n: object) -> bool:
    """Whether node n is exported as several ops that graphc reads back as several."""
    a = n.attrs
    return (
        n.op in DECOMPOSED
        or (n.op in ("matmul_epilogue", "conv2d_epilogue") and a["activation"])
        or (n.op == "avg_pool2d" and a["divisor_override"] is not None)
        or (n.op == "layer_norm" and n.type.dtype == np.float64)  # float32 epsilon attr
        or (n.op == "remainder" and is_float(n.type.dtype))
    )


def _flattens_symbolic(graph: gc.Graph) -> bool:
    return any(
        n.op in ("argmax", "argmin")
        and n.attrs["axis"] is None
        and any(isinstance(d, str) for d in n.inputs[0].type.shape)
        for n in graph.op_nodes
    )


def _round_trip_exact(graph: gc.Graph) -> bool:
    return not any(_decomposed(n) for n in graph.op_nodes)


def test_op_cases_round_trip() -> None:
    """import(export(g)) computes what g does: bit for bit, or within rounding where
    the export is a decomposition (see _decomposed)."""
    checked = 0
    for name, graph, case in GRAPHS:
        model = _export(graph)
        if model is None:
            continue
        back = gc.onnx.import_model(model)
        feeds = {p.name: x for p, x in zip(graph.inputs, case.inputs(0))}
        with np.errstate(all="ignore"):
            got, want = gc.run(back, feeds), gc.run(graph, feeds)
        if _round_trip_exact(graph):
            assert_bits_equal(got, want, name)
        else:
            _compare(got, want, name)
        checked += 1
    assert checked > 500


# without the small dtypes (float16, bfloat16, int8, int16, uint8-uint64): the exporter
# still writes some ONNX ops that have no form for some of them (IsInf of float16, at
# the default opset: an invalid model); Neg of unsigned ints, and Pow, MatMul and
# MaxPool of dtypes ONNX lacks, are handled (test_small_integer_forms_are_written_or_refused)
@settings(max_examples=draws(150), derandomize=True, deadline=None)
@given(edge_graphs(small_dtypes=False), st.integers(0, 2**16))
def test_edge_graphs_round_trip(graph: gc.Graph, seed: int) -> None:
    """import(export(g)) computes what g does on hostile values, bit for bit (within
    rounding for decomposed ops), and names, hostile ones too, survive as ONNX strings."""
    model = _export(graph)
    if model is None:  # an op with no ONNX form for its dtype, refused by name (REFUSALS)
        return
    feeds = edge_feeds(graph, seed)
    try:
        back = gc.onnx.import_model(model)
    except OnnxError as exc:
        if "cannot infer -1" not in str(exc):
            # the importer computes constant parts as it reads them: one that fails (an
            # integer division by zero) fails the import, as it fails every run of graph
            with np.errstate(all="ignore"), pytest.raises(gc.GraphcError):
                gc.run(graph, feeds)
            return
        # argmax over all elements flattens first, and graphc's types cannot say how
        # many elements a symbolic shape (3, B) has
        assert _flattens_symbolic(graph), str(exc)
        return
    assert [p.name for p in back.inputs] == [p.name for p in graph.inputs]
    assert [o.name for o in back.outputs] == [o.name for o in graph.outputs]
    with np.errstate(all="ignore"):
        try:
            want = gc.run(graph, feeds)
        except gc.GraphcError:
            # an index out of range: the imported graph refuses too, except for one_hot's
            # label check, which ONNX's OneHot does not make (it gives a row of zeros)
            if not any(n.op == "one_hot" for n in graph.op_nodes):
                with pytest.raises(gc.GraphcError):
                    gc.run(back, feeds)
            return
        got = gc.run(back, feeds)
    if _round_trip_exact(graph):
        assert_bits_equal(got, want, f"{graph}")
    else:
        _compare(got, want, f"{graph}")


def _ort_run(graph: gc.Graph, feeds: dict) -> list[np.ndarray]:
    return _session(_export(graph)).run(None, feeds)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_numpy_semantics_kept_where_onnx_ops_differ(dtype: str) -> None:
    """Exported forms keep numpy's answers where the plain ONNX op would not: the first
    nan is argmax's answer, an empty mean is nan, float64 sigmoid keeps its accuracy,
    a sum of bools is an or, a reshape to size 0 is not 'copy the dim'."""
    g = gc.Graph("semantics")
    with g:
        x = gc.placeholder("x", (2, 4), dtype)
        e = gc.placeholder("e", (0, 3), dtype)
        b = gc.placeholder("b", (0, 3), "bool")
        gc.output(gc.argmax(x, axis=1), name="am")
        gc.output(gc.argmin(x), name="an")
        gc.output(gc.mean(e, axis=0), name="empty_mean")
        gc.output(gc.sigmoid(x), name="s")
        gc.output(gc.sum_to(b, (3,)), name="any")
        gc.output(gc.reshape(e, (3, 0)), name="r")
    x = np.array([[1, np.nan, 5, np.nan], [-80, 2, -np.inf, 2]], dtype)
    feeds = {"x": x, "e": np.zeros((0, 3), dtype), "b": np.zeros((0, 3), bool)}
    with np.errstate(all="ignore"):
        want = gc.run(g, feeds)
    got = _ort_run(g, feeds)
    _compare(got, want, "onnxruntime")
    assert got[0].tolist() == [1, 1] and got[1] == 1  # the first nan; the first of tied 2s
    assert np.isnan(got[2]).all() and not got[4].any()
    if dtype == "float64":  # onnxruntime's own float64 Sigmoid would give 0 here; its exp
        # is within an ulp or two of numpy's (1.32's differs from 1.2x's in the last bit)
        assert want[3][1, 0] > 0 and abs(got[3][1, 0] / want[3][1, 0] - 1) < 4 * 2.0**-52


def _round_trip(graph: gc.Graph, feeds: dict) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(the imported graph's results, graph's own), after onnx's full check."""
    model = gc.onnx.export_model(graph)
    onnx.checker.check_model(model, full_check=True)
    with np.errstate(all="ignore"):
        return gc.run(gc.onnx.import_model(model), feeds), gc.run(graph, feeds)


def test_ceil_mode_pools_drop_a_window_starting_in_the_end_padding() -> None:
    """A last window that would start in the end padding is dropped, as PyTorch does:
    onnxruntime does too, ONNX's shape rule before opset 22 does not, so the export
    slices it off (onnx's checker refused the model), and a divisor_override divides
    the sum of a last partial window, not its mean times the kernel's size."""
    g = gc.Graph("ceil")
    with g:
        x = gc.placeholder("x", (1, 2, 3, 3), "float32")
        gc.output(gc.max_pool2d(x, 2, 2, 1, ceil_mode=True), name="max")
        gc.output(gc.avg_pool2d(x, 2, 2, 1, ceil_mode=True, count_include_pad=False), name="avg")
        gc.output(gc.avg_pool2d(x, 2, 2, 1, True, False, divisor_override=1), name="sums")
        gc.output(gc.avg_pool2d(x, (2, 3), 2, (1, 0, 0, 1), True, True, 3), name="thirds")
    x = np.random.default_rng(0).standard_normal((1, 2, 3, 3)).astype(np.float32)
    got, want = _round_trip(g, {"x": x})
    assert [a.shape for a in want] == [(1, 2, 2, 2)] * 3 + [(1, 2, 2, 2)]
    _compare(got, want, "round trip")
    _compare(_ort_run(g, {"x": x}), want, "onnxruntime")


def test_flip_and_sort_along_a_symbolic_dim_round_trip() -> None:
    """flip exports as a reversing Slice and argsort as a TopK of k = the dim: both
    came back refused when the dim is symbolic (getitem slices a symbolic dim forwards
    only; TopK's k had to be an int)."""
    g = gc.Graph("symbolic")
    with g:
        x = gc.placeholder("x", ("B", 3), "float64")
        gc.output(gc.flip(x, 0), name="flipped")
        gc.output(gc.argsort(x, axis=0, descending=True), name="order")
        gc.output(gc.sort(x, axis=0).values, name="sorted")
    x = np.array([[3.0, np.nan, 1.0], [-0.0, 2.0, 1.0], [0.0, -np.inf, 1.0]])
    got, want = _round_trip(g, {"x": x})
    assert_bits_equal(got, want, "round trip")


def test_clip_of_bools_exports_as_or_and() -> None:
    """ONNX's Clip has no bool form (onnx's checker refused the model): on bools a lower
    bound is an or and an upper one an and."""
    g = gc.Graph("bools")
    with g:
        x = gc.placeholder("x", (4,), "bool")
        gc.output(gc.clip(x, a_max=False), name="none")
        gc.output(gc.clip(x, True, None), name="all")
        gc.output(gc.clip(x, False, True), name="same")
    x = np.array([True, False, True, False])
    got, want = _round_trip(g, {"x": x})
    assert_bits_equal(got, want, "round trip")
    assert_bits_equal(_ort_run(g, {"x": x}), want, "onnxruntime")


@pytest.mark.parametrize("mode", ["reflect", "edge", "wrap"])
def test_unpad_exports_in_the_kernels_order_and_keeps_negative_zeros(mode: str) -> None:
    """pad's adjoint (a training graph's) folds the borders back one position at a time;
    interior -0.0s must stay -0.0 (adding a zero update everywhere would make them +0.0)."""
    g = gc.Graph("unpad")
    with g:
        ct = gc.placeholder("ct", (5, 8), "float64")
        gc.output(gc.unpad(ct, ((1, 1), (2, 1)), mode=mode), name="folded")
    ct = np.full((5, 8), -0.0)  # folds of -0.0 onto -0.0 stay -0.0
    ct[0, 0], ct[2, 0], ct[4, 7], ct[1, 4] = np.nan, 3.0, 1e16, -1e-310
    got, want = _round_trip(g, {"ct": ct})
    assert_bits_equal(got, want, "round trip")
    assert np.signbit(want[0][want[0] == 0]).any()
    assert_bits_equal(_ort_run(g, {"ct": ct}), want, "onnxruntime")


@pytest.mark.parametrize("reduction", ["sum", "prod", "max", "min", "logsumexp", "mean"])
def test_a_reduction_over_no_axis_exports_as_the_elements(reduction: str) -> None:
    """axis=() reduces nothing in graphc (numpy); an empty axes list in ONNX reduces
    everything. The export keeps graphc's answer, bit for bit (sum adds numpy's zero)."""
    g = gc.Graph("none")
    with g:
        x = gc.placeholder("x", (2, 3), "float32")
        gc.output(getattr(gc, reduction)(x, axis=(), keepdims=True), name="y")
    x = np.array([[1.0, np.inf, -np.inf], [np.nan, -0.0, 2.5]], np.float32)
    want = gc.run(g, {"x": x})
    with np.errstate(all="ignore"):
        assert_bits_equal(_ort_run(g, {"x": x}), want, "onnxruntime")
        got, _ = _round_trip(g, {"x": x})
    assert_bits_equal(got, want, "round trip")


def test_small_integer_forms_are_written_or_refused() -> None:
    """neg of unsigned ints is 0 - x (ONNX's Neg takes signed ones), wrapping as numpy's;
    Pow, MatMul and MaxPool of an integer dtype ONNX defines no form for are refused by
    name, where the exporter wrote invalid models (and MaxPool of uint64 went through
    float64: 2**64 - 2 came back as 0)."""
    ort = pytest.importorskip("onnxruntime")
    u = np.array([0, 1, 200, 255], np.uint8)
    model = _export(gc.trace(lambda x: -x, u))
    assert model is not None
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_array_equal(session.run(None, {"x": u})[0], np.negative(u))
    refused = [
        (lambda x, y: x**y, (np.array([3, 4], np.int8),) * 2, "Pow has no int8 form"),
        (lambda a, b: a @ b, (np.ones((2, 2), np.uint8),) * 2, "MatMul has no uint8 form"),
        (
            lambda x: gc.max_pool2d(x, 2),
            (np.full((1, 1, 2, 2), 2**64 - 2, np.uint64),),
            "MaxPool has no uint64 form",
        ),
    ]
    for f, args, message in refused:
        with pytest.raises(OnnxError, match=message):
            gc.onnx.export_model(gc.trace(f, *args))
    for dtype in (np.int32, np.uint32):  # forms ONNX has: written, and checked
        a = np.arange(4, dtype=dtype).reshape(2, 2)
        assert _export(gc.trace(lambda x, y: x @ y, a, a)) is not None


@pytest.mark.parametrize("dtype", ["int64", "int8", "uint64"])
def test_an_integer_power_by_a_known_exponent_is_exact(dtype: str) -> None:
    """onnxruntime's integer Pow goes through float64 ((2**62 + 3) ** 1 was 2**62, ** 5
    saturated), and ONNX's Pow has no 8-bit integers: a known exponent >= 0 is written
    as Muls by repeated squaring, wrapping as numpy's power does (x ** 0: ones)."""
    info = np.iinfo(dtype)
    x = np.array([info.max // 2 + 3, 3, 7, 2, 0, info.max], dtype)
    g = gc.trace(lambda v: (v**0, v**1, v**2, v**5, v**17), x)
    want = gc.run(g, {"v": x})
    assert_bits_equal(_round_trip(g, {"v": x})[0], want, "round trip")
    if dtype == "int64":  # (onnxruntime has no 8-bit or unsigned 64-bit Mul kernel)
        assert_bits_equal(_ort_run(g, {"v": x}), want, "onnxruntime")


def test_output_names_like_the_writers_own_names_stay_single() -> None:
    """An output named as the writer names its values ('shape', 'identity', 'concat')
    gave a model defining that name twice (onnx's checker refused it): the outputs'
    names are taken before any value is written."""
    g = gc.Graph("names")
    with g:
        x = gc.placeholder("x", ("B", 3), "int64")
        gc.output(gc.reshape(x, (3, "B")), name="shape")
        gc.output(gc.floor(x) + 1, name="identity")
        gc.output(gc.abs(x > 2), name="concat")
    x = np.arange(6).reshape(2, 3)
    got, want = _round_trip(g, {"x": x})
    assert_bits_equal(got, want, "round trip")
    assert_bits_equal(_ort_run(g, {"x": x}), want, "onnxruntime")


def test_max_and_min_reductions_export_for_every_dtype_and_keep_nans() -> None:
    """ReduceMax and ReduceMin have no int16 or uint16 form (onnx's checker refused the
    model): those reduce as int32. onnxruntime's skip a nan that is not first, where
    numpy's max and min are nan: the export says nan where a nan is reduced."""
    pytest.importorskip("onnxruntime")
    for dtype in (np.int16, np.uint16):
        x = np.array([[3, 0, 7], [np.iinfo(dtype).max, np.iinfo(dtype).min, 1]], dtype)
        g = gc.trace(lambda v: (gc.max(v, axis=1), gc.min(v, axis=0), gc.max(v)), x)
        want = gc.run(g, {"v": x})
        assert_bits_equal(_ort_run(g, {"v": x}), want, str(dtype))
        assert_bits_equal(_round_trip(g, {"v": x})[0], want, str(dtype))
    x = np.array([[1, 2.5, -3], [6, 7, np.nan], [np.nan, -0.0, np.inf]], np.float32)
    g = gc.trace(lambda v: (gc.max(v, axis=1), gc.min(v, axis=0), gc.max(v)), x)
    want = gc.run(g, {"v": x})
    assert_bits_equal(_ort_run(g, {"v": x}), want, "nan")
    assert np.isnan(want[0][1:]).all() and np.isnan(want[1][0]) and np.isnan(want[2])


def test_max_pool_of_a_window_holding_a_nan_is_nan() -> None:
    """graphc's max_pool2d (as torch's) is nan over a window holding a nan; onnxruntime's
    MaxPool skips nans, so the export says nan where the pooled nan flags are set."""
    pytest.importorskip("onnxruntime")
    x = np.arange(32, dtype=np.float64).reshape(1, 2, 4, 4)
    x[0, 0, 1, 2], x[0, 1, 3, 3], x[0, 1, 0, 0] = np.nan, np.nan, np.inf
    g = gc.trace(lambda v: (gc.max_pool2d(v, 2), gc.max_pool2d(v, 3, 1, 1)), x)
    want = gc.run(g, {"v": x})
    assert np.isnan(want[0]).sum() == 2 and np.isnan(want[1]).sum() == 13
    assert_bits_equal(_ort_run(g, {"v": x}), want, "onnxruntime")
    assert_bits_equal(_round_trip(g, {"v": x})[0], want, "round trip")


def test_ceil_mode_pools_declare_the_shape_onnxruntime_computes() -> None:
    """A ceil_mode pool dropping a window that starts in the end padding was written
    with ONNX's shape rule keeping it (then sliced off): onnxruntime, which drops it
    itself, planned a later value of the declared size into the smaller buffer and
    failed ("Shape mismatch attempting to re-use buffer"). The end pad is now cut to
    the last kept window, so the declared and computed shapes agree; gradients too."""
    pytest.importorskip("onnxruntime")
    g = gc.Graph("late")
    with g:
        x = gc.placeholder("x", (1, 2, 3, 3), "float32")  # pooled (2, 2); ONNX's rule: (3, 3)
        p = gc.max_pool2d(x, 2, 2, 1, ceil_mode=True)
        gc.output(p, name="max")
        gc.output(gc.avg_pool2d(x, 2, 2, 1, ceil_mode=True, count_include_pad=True), name="avg")
        gc.output(gc.exp(x) + gc.sum(p), name="after")
        gc.output(gc.sum(gc.max_pool2d(x * x, 3, 2, 1, ceil_mode=True)), name="loss")
    gg = gc.gradients(g, wrt=["x"], outputs=["loss"])
    x = np.random.default_rng(0).standard_normal((1, 2, 3, 3)).astype(np.float32)
    for graph in (g, gg):
        want = gc.run(graph, {"x": x})
        assert [a.shape for a in want[:2]] == [(1, 2, 2, 2)] * 2
        _compare(_ort_run(graph, {"x": x}), want, "onnxruntime")
        assert "Slice" not in {n.op_type for n in _export(graph).graph.node}


def test_float64_gelu_keeps_its_accuracy_at_opset_20_and_later() -> None:
    """From opset 20 gelu was written as ONNX's Gelu, which onnxruntime computes in
    float64 to about float32's accuracy (5e-9 off at 1); float64 is written as graphc
    computes it, at every opset (float32 keeps the one op)."""
    pytest.importorskip("onnxruntime")
    x = np.array([-3.0, -1.0, 0.5, 1.0, 2.0, 10.0])
    g = gc.trace(gc.gelu, x)
    want = gc.run(g, {"x": x})
    for opset in (17, 21):
        model = _export(g, opset)
        got = _session(model).run(None, {"x": x})
        np.testing.assert_allclose(got[0], want[0], rtol=1e-14, atol=1e-15)
    single = gc.trace(gc.gelu, x.astype(np.float32))
    assert "Gelu" in {n.op_type for n in _export(single, 21).graph.node}


def test_argsort_of_bfloat16_is_a_valid_model() -> None:
    """argsort (and sort, take_along_axis of it) of bfloat16 wrote TopK of bfloat16,
    which ONNX's TopK has only from opset 24 (onnx's checker refused the model): it
    sorts the values cast to float32, which holds each of them."""
    bfloat16 = pytest.importorskip("ml_dtypes").bfloat16
    x = np.array([[3.5, -0.0, np.nan, 0.0], [1e30, -1e30, 2.0, 2.0]], bfloat16)
    g = gc.trace(lambda v: (gc.argsort(v, axis=1), gc.sort(v, axis=1, descending=True).values), x)
    got, want = _round_trip(g, {"v": x})
    assert_bits_equal(got, want, "round trip")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_a_mean_of_half_floats_rounds_once(dtype: str) -> None:
    """graphc's mean of float16 or bfloat16 sums in float32 and rounds the mean once (as
    numpy and torch do); the export rounded the sum to the half dtype, then the quotient
    (a mean of 7 bfloat16 values was 1 bfloat16 step off for 1 case in 5)."""
    if dtype == "bfloat16":
        pytest.importorskip("ml_dtypes")
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((40, 7)) * 100).astype(gc.ir.types.as_dtype(dtype))
    g = gc.trace(lambda v: (gc.mean(v, axis=1), gc.mean(v)), x)
    got, want = _round_trip(g, {"v": x})
    assert_bits_equal(got, want, dtype)
    if dtype == "float16":
        assert_bits_equal(_ort_run(g, {"v": x}), want, "onnxruntime")


def test_float64_log_softmax_keeps_nans_and_infinities() -> None:
    """onnxruntime's float64 LogSoftmax skips a nan when it finds a row's maximum and
    gives finite numbers for a row holding a nan or +inf (float32's and Softmax are
    right): float64 log_softmax is written as graphc's kernel computes it."""
    pytest.importorskip("onnxruntime")
    inf, nan = np.inf, np.nan
    x = np.array([[6000, 7, nan, 1], [1, 2, 3, nan], [inf, 1, 2, 3], [-inf, 1, 2, 745]])
    g = gc.trace(lambda v: gc.log_softmax(v, axis=1), x)
    with np.errstate(all="ignore"):
        want = gc.run(g, {"v": x})
        assert_bits_equal(_round_trip(g, {"v": x})[0], want, "round trip")
    _compare(_ort_run(g, {"v": x}), want, "onnxruntime")
    assert np.isnan(want[0][:3]).all()


def test_a_cnn_training_graph_over_a_symbolic_batch_reads_back() -> None:
    """The pools' gradients were written over x flattened whole (Size of x; a Reshape to
    (N*C, 1, OH, OW)): a product of the symbolic batch, which no graphc shape holds, so
    the exported training graph did not import back. They work per (H, W) plane now
    (max pool: positions within the plane, ScatterElements along it; avg pool: a
    ConvTranspose with a group per channel): the model runs in onnxruntime and reads back
    at any batch size."""
    g = gc.Graph("cnn")
    with g:
        x = gc.placeholder("x", ("B", 2, 6, 6))
        w = gc.placeholder("w", (3, 2, 3, 3))
        h = gc.relu(gc.conv2d(x, w, None, stride=1, padding=1))
        h = gc.avg_pool2d(gc.max_pool2d(h, 3, 2, 1, ceil_mode=True), 2, 2, 0, ceil_mode=True)
        gc.output(gc.sum(h * h), name="loss")
    grads = gc.gradients(g, wrt=["w", "x"])
    back = gc.onnx.import_model(_export(grads))
    rng = np.random.default_rng(0)
    wv = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    for batch in (2, 3):
        feeds = {"x": rng.standard_normal((batch, 2, 6, 6)).astype(np.float32), "w": wv}
        want = gc.run(grads, feeds)
        _compare(gc.run(back, feeds), want, f"round trip at {batch}")
        _compare(_ort_run(grads, feeds), want, f"onnxruntime at {batch}")


def test_slices_past_the_start_with_negative_steps_and_their_gradients() -> None:
    """ONNX's Slice clamps a start before the first element to it under a negative step,
    numpy's takes nothing: x[-3::-2] of a 1-element axis was that element in the
    exported model. Slices of known dims are written as the positions Python takes."""
    pytest.importorskip("onnxruntime")
    x = np.arange(10.0).reshape(2, 5) - 4.5
    index = (slice(-3, None, -2), slice(4, 0, -3))
    g = gc.trace(lambda v: (v[index] * 3.0, v[:, -7::-1], v[1:, ::-2]), x)
    want = gc.run(g, {"v": x})
    assert want[0].shape == (0, 2) and want[1].shape == (2, 0)
    assert_bits_equal(_ort_run(g, {"v": x}), want, "onnxruntime")
    assert_bits_equal(_round_trip(g, {"v": x})[0], want, "round trip")


def test_training_graphs_with_slices_and_batched_matmuls_over_a_symbolic_batch() -> None:
    """A slice's gradient (zeros with ct placed) was a ScatterND over the flat positions
    of the whole shape, and matmul's weight gradient flattened (B, T) into rows: both a
    product of the symbolic batch, so those training graphs exported but did not read
    back. The gradient is ct padded with zeros (strided and reversed windows too), and
    the weight gradient a matmul batched over B then summed; a 0-d sum of -0.0 is +0.0,
    as numpy's (it was written as Identity)."""

    def loss(v: object, w: object) -> object:
        h = gc.tanh(v[:, 1:, ::-2] @ w)  # (B, 2, 2) @ (2, 3)
        return gc.sum(h * h) + gc.sum(v[:, 0, -1] * 2.0)

    g = gc.trace(loss, gc.TensorSpec(("B", 3, 4)), np.ones((2, 3), np.float32))
    grads = gc.gradients(g, wrt=list(p.name for p in g.inputs))
    back = gc.onnx.import_model(_export(grads))
    rng = np.random.default_rng(0)
    for batch in (2, 3):
        feeds = {"v": rng.standard_normal((batch, 3, 4)).astype(np.float32)}
        feeds["w"] = rng.standard_normal((2, 3)).astype(np.float32)
        want = gc.run(grads, feeds)
        _compare(gc.run(back, feeds), want, f"round trip at {batch}")
        _compare(_ort_run(grads, feeds), want, f"onnxruntime at {batch}")
    zero = gc.trace(lambda v: gc.sum(v), np.array(-0.0))
    assert not np.signbit(_round_trip(zero, {"v": np.array(-0.0)})[0][0])


def test_bfloat16_layers_and_small_integer_sums_are_valid_models() -> None:
    """ConstantOfShape (full_like, zeros) has bfloat16 from opset 20, Conv, ConvTranspose
    and the pools from 22, and ReduceSum no 8- or 16-bit integers: the export wrote those
    forms anyway, models onnx's checker refused. bfloat16 runs in float32 there (graphc
    computes it so, rounding the result) and sum_to of small integers in int64 (the low
    bits wrap alike): valid, and read back bit for bit."""
    bfloat16 = pytest.importorskip("ml_dtypes").bfloat16
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 2, 5, 5)).astype(bfloat16)
    k = rng.standard_normal((3, 2, 3, 3)).astype(bfloat16)
    g = gc.trace(
        lambda v, w: (
            gc.conv2d(v, w, None, stride=1, padding=1),
            gc.max_pool2d(v, 2, 2, 1, ceil_mode=True),
            gc.avg_pool2d(v, 3, 2, 1, divisor_override=4),
            gc.full_like(v, 1.5),
        ),
        x, k,
    )  # fmt: skip
    got, want = _round_trip(g, {"v": x, "w": k})
    assert_bits_equal(got, want, "bfloat16")
    small = np.array([[100, 120], [-128, 1]], np.int8)
    g = gc.trace(lambda v: gc.sum_to(v, (1, 2)), small)
    got, want = _round_trip(g, {"v": small})
    assert_bits_equal(got, want, "int8")
    assert want[0].dtype == np.int8 and want[0].tolist() == [[-28, 121]]


def test_clip_with_one_bound_keeps_infinities() -> None:
    """onnxruntime's Clip without a max (or a min) clamps to the dtype's finite extreme,
    so clip(x, -1, None) of inf gave 3.4e38: a single bound is written as Max or Min,
    numpy's answer; an integer max pool's window of padding only is the dtype's least
    value, as graphc's (it came back 0 from the float64 pool)."""
    pytest.importorskip("onnxruntime")
    x = np.array([np.inf, -np.inf, np.nan, 5.0, -5.0], np.float32)
    g = gc.trace(lambda v: (gc.clip(v, -1.0, None), gc.clip(v, None, 1.0)), x)
    want = gc.run(g, {"v": x})
    assert want[0][0] == np.inf and want[1][1] == -np.inf
    assert_bits_equal(_ort_run(g, {"v": x}), want, "onnxruntime")
    small = np.full((1, 2, 3, 3), 7, np.int16)
    g = gc.trace(lambda v: gc.max_pool2d(v, 1, 2, 1), small)
    got, want = _round_trip(g, {"v": small})
    assert_bits_equal(got, want, "round trip")
    assert want[0][0, 0, 0, 0] == np.iinfo(np.int16).min


def test_a_broadcast_to_no_elements_is_empty_in_onnxruntime_too() -> None:
    """onnxruntime's Expand kept a dim of 1 that numpy's broadcasting (and ONNX's rule)
    takes to 0, so broadcast_to((2, 0, 3)) came back (2, 1, 3); an empty result is now
    written as an empty fill (found by the numpy-names helper)."""
    pytest.importorskip("onnxruntime")
    x = np.ones((2, 3), np.float32)
    g = gc.trace(lambda v: gc.broadcast_to(gc.reshape(v, (2, 1, 3)), (2, 0, 3)), x)
    got = _ort_run(g, {"v": x})
    assert got[0].shape == (2, 0, 3)
    back, want = _round_trip(g, {"v": x})
    assert back[0].shape == want[0].shape == (2, 0, 3)


def _same_or_both_nan(got: np.ndarray, want: np.ndarray, what: str) -> None:
    """Bits equal where graphc's result is a number; nan where it is nan (the sign and
    payload of a nan are the platform's)."""
    wide_got, wide_want = got.astype(np.float64), want.astype(np.float64)
    assert got.dtype == want.dtype and got.shape == want.shape, what
    nan = np.isnan(wide_want)
    assert np.array_equal(np.isnan(wide_got), nan), what
    assert got[~nan].tobytes() == want[~nan].tobytes(), what


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_16_bit_float_math_is_a_valid_model_computing_graphcs_bits(dtype: str) -> None:
    """ONNX's Sin, Atan, Round, ... have no bfloat16 form and IsInf (log1p, expm1,
    arctan2) none for 16-bit floats before opset 20 (models the checker refused), and an
    op written as several (sigmoid, log1p, arctan2) rounded each step: an elementwise op
    on a 16-bit float is now written as graphc computes it, in float32 with the result
    rounded once (ops/defop.py), the same bits."""
    if dtype == "bfloat16":
        pytest.importorskip("ml_dtypes")
    from onnx.reference import ReferenceEvaluator

    rng = np.random.default_rng(0)
    special = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, 0.5, -0.5, 3e4, -1.0]
    x = np.concatenate([rng.normal(size=14) * 3, special]).astype(as_dtype(dtype))
    y = x[::-1].copy()
    unary = "exp log tanh sigmoid sin cos tan arcsin arccos arctan sinh cosh arcsinh arccosh "
    unary += "arctanh sqrt abs floor ceil round erf log1p expm1 relu log2 log10 reciprocal sign"
    binary = "add subtract multiply divide power maximum minimum arctan2 logaddexp greater"
    spec = gc.TensorSpec((x.size,), dtype)
    for name in unary.split() + binary.split():
        f = getattr(gc, name)
        g = gc.trace(f, *([spec] if name in unary else [spec, spec]))
        feeds = dict(zip([p.name for p in g.inputs], [x, y]))
        want = gc.run(g, feeds)[0]
        if name == "sign":  # ml_dtypes' own sign loop keeps -0.0; float32's (numpy's) gives 0
            want = np.where(want == 0, np.zeros_like(want), want)
        model = gc.onnx.export_model(g, opset=17)
        onnx.checker.check_model(model, full_check=True)
        _same_or_both_nan(ReferenceEvaluator(model).run(None, feeds)[0], want, name)


def test_float16_log1p_expm1_and_arctan2_run_in_onnxruntime_before_opset_20() -> None:
    """They wrote IsInf of float16, which only opset 20 has: the model was invalid at
    the default opset 17. onnxruntime's float32 kernels are not numpy's to the bit."""
    pytest.importorskip("onnxruntime")
    x = np.array([0.5, -0.9, 1e-4, 6e4, np.inf, -np.inf, np.nan, -1, 0, 11.0], np.float16)
    spec = gc.TensorSpec((x.size,), "float16")
    for g in (
        gc.trace(gc.log1p, spec),
        gc.trace(gc.expm1, spec),
        gc.trace(lambda a, b: gc.arctan2(a, b), spec, spec),
    ):
        feeds = dict(zip([p.name for p in g.inputs], [x, x[::-1].copy()]))
        for opset in (17, 20):
            model = gc.onnx.export_model(g, opset=opset)
            onnx.checker.check_model(model, full_check=True)
            got = _session(model).run(None, feeds)[0]
            want = gc.run(g, feeds)[0]
            np.testing.assert_allclose(got, want, rtol=1e-3, atol=0, err_msg=f"{g.name} {opset}")


def test_an_arange_over_a_symbolic_length_reads_back() -> None:
    """export writes gc.arange("B") as Range(0, Shape(x)[0], 1); import refused it
    ("Range's start, limit and delta must be known"): a Range counting 0, 1, ... up to
    a symbolic dim is graphc's arange of that dim again."""
    g = gc.trace(lambda x: x[:, 0] + gc.arange("B", dtype="float32"), gc.TensorSpec(("B", 3)))
    again = gc.onnx.import_model(gc.onnx.export_model(g))
    assert [n.op for n in again.op_nodes if n.op == "arange"] == ["arange"]
    for batch in (0, 2, 5):
        x = np.random.default_rng(batch).standard_normal((batch, 3)).astype(np.float32)
        np.testing.assert_array_equal(again(x), g(x))


def test_a_transposed_constant_reads_back_as_a_transpose() -> None:
    """Import folded Transpose(initializer) into a C-ordered copy, and a product reading
    it rounded otherwise than graphc's product of the transposed view: one ulp off the
    exported graph (the edge soak's case). It stays a transpose of the constant now."""
    c = np.array([[0.30054528, 0.62569845, -1.8918492], [0.02622891, 0.5886739, -0.92379767]])
    g = gc.Graph("transposed")
    with g:
        y = gc.placeholder("y", shape=(2, 3))
        s = gc.reshape(gc.sum(y, axis=1), (2, 1))
        gc.output(gc.matmul(gc.transpose(gc.constant(c.astype(np.float32)), (1, 0)), s), name="out")
    back = gc.onnx.import_model(gc.onnx.export_model(g))
    assert "transpose" in [n.op for n in back.op_nodes]
    rng = np.random.default_rng(0)
    for _ in range(200):
        feed = {"y": rng.standard_normal((2, 3)).astype(np.float32) * 10}
        np.testing.assert_array_equal(gc.run(back, feed)[0], gc.run(g, feed)[0])


def test_without_the_onnx_package_export_and_import_say_how_to_install_it(monkeypatch) -> None:
    """onnx is an optional extra: without it, export_model and import_model raised a
    bare ModuleNotFoundError naming 'onnx' (found by the first-hour hunt)."""
    import sys

    g = gc.trace(gc.exp, gc.TensorSpec((2,)))
    model = gc.onnx.export_model(g)
    monkeypatch.setitem(sys.modules, "onnx", None)  # import onnx now raises ImportError
    for call in (lambda: gc.onnx.export_model(g), lambda: gc.onnx.import_model(model)):
        with pytest.raises(OnnxError, match=r"need the onnx package: pip install onnx"):
            call()
