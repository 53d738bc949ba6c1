"""The benchmark's baselines are what an expert writes, and compute what graphc computes.

Issue 13 ("fair benchmarks"): the numpy GELU one-liner computes the cube as x*x*x (as
graphc's pow does), the tiny-graph numpy baseline runs on numpy scalars (as graphc's
scalar plans do), jax's MLP step donates its parameters (graphc updates in place),
and the trace + compile workload times graphc's tracing as jax's compile time
includes jax's. None of these needs jax or torch; the peer checks skip without them.
graphc's static modes run on the backend they are named after (issue 17), or say why
they cannot: a native mode never times numpy under its name.
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np
import pytest

import graphc as gc
from graphc.bench import gelu, mlp, modes, tiny, trace_compile, xent
from graphc.bench.core import (
    BASELINE,
    COPYTO,
    FAST_MATH,
    FAST_MATH_NATIVE,
    MODES,
    NATIVE,
    NotApplicableError,
    Prepared,
    UnavailableError,
)
from graphc.bench.modes import BackendMismatchError, fast_math_same
from graphc.runtime.backend import BackendUnavailableError, available_backends, get_backend

needs_native = pytest.mark.skipif(
    "native" not in available_backends(), reason="the native backend cannot run here"
)


def _build(workload: Any, mode: str, params: dict[str, Any]) -> tuple[Prepared, dict[str, Any]]:
    inputs = workload.make_inputs(params)
    return workload.builders[mode](params, inputs), inputs


def _bits(values: Any) -> list[np.ndarray]:
    return [np.asarray(v).reshape(-1).view(np.uint32) for v in values]


def test_gelu_one_liner_cubes_by_multiplying() -> None:
    source = inspect.getsource(gelu.numpy_gelu)
    assert "x * x * x" in source and "**" not in source


def test_gelu_one_liner_is_bit_identical_to_graphc_exact_levels() -> None:
    x = np.random.default_rng(3).standard_normal(10_000, dtype=np.float32)
    x = np.concatenate([x, np.float32([0.0, -0.0, 1e-30, 30.0, -30.0, 1e4, -1e4])])
    graph = gelu._graph({"args": (x,)})
    with np.errstate(all="ignore"):  # 1e4 cubed overflows to inf in every mode
        want = gelu.numpy_gelu(x)
        for level in (0, 1, 2):  # numpy's kernels (native's gelu is within a bound of them)
            got = gc.compile(graph, opt_level=level, backend="numpy")(x)
            np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_gelu_chunked_baseline_agrees_with_the_one_liner() -> None:
    x = np.random.default_rng(4).standard_normal(50_000, dtype=np.float32)
    call, _ = gelu.chunked_gelu(x, 8192)
    np.testing.assert_allclose(call(), gelu.numpy_gelu(x), rtol=1e-5, atol=1e-6)


def test_gelu_fast_math_mode_runs_and_agrees() -> None:
    prepared, inputs = _build(gelu.WORKLOAD, FAST_MATH, {"n": 1000})
    (x,) = inputs["args"]
    np.testing.assert_allclose(prepared.call(), gelu.numpy_gelu(x), rtol=1e-6, atol=1e-7)


def test_tiny_numpy_baseline_runs_on_numpy_scalars_and_matches_graphc() -> None:
    prepared, inputs = _build(tiny.WORKLOAD, "numpy", {})
    results = prepared.call()
    assert all(type(r) is np.float32 for r in results)  # scalars, not 1-element arrays
    graph = tiny._graph(inputs)
    for level in (0, 2):
        got = gc.compile(graph, opt_level=level)(*inputs["args"])
        assert len(got) == len(results)
        for a, b in zip(_bits(got), _bits(results)):
            np.testing.assert_array_equal(a, b)
    x, w = (np.float32(v) for v in (-3.5, 1e-20))
    y, dx, dw = tiny.numpy_tiny(x, w)
    assert (y, dx, dw) == ((x + w) * (w + 1), w + 1, (w + 1) + (x + w))


def test_fast_math_mode_is_not_applicable_where_it_changes_nothing() -> None:
    assert FAST_MATH in MODES and MODES.index(FAST_MATH) == MODES.index(BASELINE) + 1
    with pytest.raises(NotApplicableError, match="same plan"):
        _build(tiny.WORKLOAD, FAST_MATH, {})
    assert fast_math_same() == f"fast_math changes nothing here (same plan as {BASELINE})"
    assert NATIVE in fast_math_same("native")


def test_gelu_copyto_floor_copies_into_one_preallocated_output() -> None:
    prepared, inputs = _build(gelu.WORKLOAD, COPYTO, {"n": 1000})
    (x,) = inputs["args"]
    first, second = prepared.call(), prepared.call()
    assert first is second and first is not x  # the same output buffer, every call
    assert first.ctypes.data % 64 == 0  # on a cache line, as graphc's large outputs
    np.testing.assert_array_equal(first, x)
    assert not prepared.checked and prepared.resident_bytes == x.nbytes
    with pytest.raises(NotApplicableError, match="GELU"):
        _build(tiny.WORKLOAD, COPYTO, {})


@needs_native
@pytest.mark.parametrize("workload", [gelu.WORKLOAD, xent.WORKLOAD])
def test_native_modes_run_native_kernels_and_agree(workload: Any) -> None:
    params = workload.cases[0].params
    inputs = workload.make_inputs(params)
    want = workload.builders[BASELINE](params, inputs)
    for mode in (NATIVE, FAST_MATH_NATIVE):
        try:
            prepared = workload.builders[mode](params, inputs)
        except NotApplicableError as exc:
            assert mode == FAST_MATH_NATIVE and "same plan as graphc-O2 (native)" in str(exc)
            continue
        assert prepared.note.startswith("native ") and "C kernels" in prepared.note
        for got, ref in zip(prepared.arrays(prepared.call()), want.arrays(want.call())):
            np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)


@needs_native
def test_native_train_step_runs_native_kernels() -> None:
    prepared, _ = _build(mlp.WORKLOAD, NATIVE, {"batch": 4})
    assert prepared.note.startswith("native ") and "C kernels" in prepared.note
    assert np.isfinite(float(prepared.call()))


def test_native_modes_are_unavailable_where_native_cannot_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(modes, "available_backends", lambda: ["numpy"])
    for workload, params in ((gelu.WORKLOAD, {"n": 100}), (mlp.WORKLOAD, {"batch": 4})):
        for mode in (NATIVE, FAST_MATH_NATIVE):
            with pytest.raises(UnavailableError, match="native backend cannot run here"):
                _build(workload, mode, params)
        _build(workload, BASELINE, params)  # numpy's modes still run


@needs_native
def test_a_native_plan_that_falls_back_to_numpy_is_an_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def fail(gen: Any) -> None:
        raise BackendUnavailableError("no kernels today")

    monkeypatch.setattr(get_backend("native"), "finish", fail)
    # the error says why, from the runtime's fallback warning
    with pytest.raises(BackendMismatchError, match="ran on numpy: .*no kernels today"):
        _build(gelu.WORKLOAD, NATIVE, {"n": 1234})


def test_mlp_fast_math_step_agrees_with_the_exact_step() -> None:
    x, y = mlp._inputs({"batch": 8})["args"]
    exact, fast = (mlp.train_step(x, y, 2, fm) for fm in (False, True))
    np.testing.assert_allclose(fast.step(x, y), exact.step(x, y), rtol=1e-6)
    for name, value in exact.parameters().items():
        np.testing.assert_allclose(fast.parameters()[name], value, rtol=1e-5, atol=1e-7)


def test_trace_compile_times_tracing_too(monkeypatch: pytest.MonkeyPatch) -> None:
    traced: list[int] = []
    real = trace_compile.graphc_trace

    def counting(k: int, x: np.ndarray) -> gc.Graph:
        traced.append(k)
        return real(k, x)

    monkeypatch.setattr(trace_compile, "graphc_trace", counting)
    prepared, inputs = _build(trace_compile.WORKLOAD, BASELINE, {"k": 8})
    before = len(traced)
    exe = prepared.call()
    assert len(traced) == before + 1  # each timed build traces the Python function again
    (x,) = inputs["args"]
    assert prepared.arrays(exe)[0].shape == x.shape
    assert "trace" in prepared.note and "compile" in prepared.note


def test_jax_mlp_step_donates_its_parameters() -> None:
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    step = mlp.jax_train_step(jax)
    x, y = mlp._inputs({"batch": 4})["args"]
    initial = mlp.initial_parameters()
    weights = tuple(jnp.asarray(initial[n]) for n in mlp.NAMES)
    args = (weights, jnp.asarray(x), jnp.asarray(y.astype(np.int32)))
    info = step.lower(*args).args_info
    donated = [a.donated for a in jax.tree_util.tree_leaves(info)]
    assert donated == [True] * len(mlp.NAMES) + [False, False]
    prepared, _ = _build(mlp.WORKLOAD, "jax", {"batch": 4})
    loss = prepared.call()
    assert np.isfinite(np.asarray(loss))


def test_jax_gelu_is_jax_own_op() -> None:
    jax = pytest.importorskip("jax")
    fn = gelu.jax_gelu(jax.numpy)
    x = np.linspace(-4, 4, 101, dtype=np.float32)
    np.testing.assert_allclose(np.asarray(jax.jit(fn)(x)), gelu.numpy_gelu(x), atol=2e-6)


def test_torch_gelu_is_torch_fused_op() -> None:
    torch = pytest.importorskip("torch")
    prepared, inputs = _build(gelu.WORKLOAD, "torch", {"n": 1000})
    (x,) = inputs["args"]
    got = prepared.call()
    assert isinstance(got, torch.Tensor)
    np.testing.assert_allclose(got.numpy(), gelu.numpy_gelu(x), atol=2e-6)
    assert "approximate" in inspect.getsource(gelu._torch)


@pytest.mark.parametrize("mode", ["onnxruntime-1thread", "onnxruntime"])
def test_xent_onnxruntime_runs_graphcs_exported_joint_graph(mode: str) -> None:
    """The onnxruntime peer of the cross-entropy head: graphc's loss-and-gradient graph
    exported to ONNX gives the hand-written numpy's loss and gradient."""
    pytest.importorskip("onnxruntime")
    prepared, inputs = _build(xent.WORKLOAD, mode, {"n": 64, "c": 10})
    want = xent.numpy_cross_entropy(*inputs["args"])
    got = prepared.arrays(prepared.call())
    assert "ONNX" in prepared.note and len(got) == 2
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
