"""gc.optimize: levels, the report, the verify switch, locations, inputs untouched."""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
from graphc.passes import pipeline
from tests.passes.passcheck import same_numbers

TEXT = """graph g(%x: f64[B,4], %w: f64[4]) {
  %one: f64[] = constant(value=1.0)
  %a: f64[B,4] = mul(%x, %one)
  %e: f64[B,4] = exp(%a)
  %f: f64[B,4] = exp(%x)
  %s: f64[B,4] = add(%e, %f)
  %t: f64[B,4] = tanh(%s)
  %u: f64[B,4] = mul(%t, %w)
  %dead: f64[B,4] = sin(%x)
  output %y = %u
}"""


def test_levels() -> None:
    g = gc.parse(TEXT)
    o0, o1, o2 = (gc.optimize(g, level=k) for k in (0, 1, 2))
    assert str(o0) == str(g)
    assert [n.op for n in o1.op_nodes] == ["exp", "add", "tanh", "mul"]
    assert [n.op for n in o2.op_nodes] == ["exp", "add", "tanh", "mul"]  # backend-free
    fused = gc.fuse(o2, backend="numpy")
    assert [n.op for n in fused.op_nodes] == ["fused"]
    for o in (o1, o2, fused):
        same_numbers(g, o)
    assert str(g) == str(gc.parse(TEXT))  # the input graph is unchanged
    feeds = {"x": np.ones((2, 4)), "w": np.ones(4)}
    planned = gc.compile(g, backend="numpy").plan(**feeds).graph
    assert [n.op for n in planned.op_nodes] == ["fused"]  # compile fuses at O2
    assert [n.op for n in gc.compile(g, opt_level=1).plan(**feeds).graph.op_nodes] == [
        "exp",
        "add",
        "tanh",
        "mul",
    ]


def test_report_lists_passes_with_counts_and_times() -> None:
    g = gc.parse(TEXT)
    result, report = gc.optimize(g, level=2, explain=True)
    names = [p.name for p in report.passes]
    assert names[:5] == [
        "fold_constants",
        "simplify",
        "simplify_control_flow",
        "eliminate_common_subexpressions",
        "eliminate_dead_code",
    ]
    assert "optimize_bodies" in names
    assert not any(name.startswith("fuse") for name in names)
    assert report.nodes_before == len(g.nodes) and report.nodes_after == len(result.nodes)
    for before, after in zip(report.passes, report.passes[1:]):
        assert before.nodes_after == after.nodes_before
    assert all(p.seconds >= 0 for p in report.passes)
    text = str(report)
    assert text.startswith(
        f"optimization at O2 (exact rules only): {len(g.nodes)} -> {len(result.nodes)} nodes"
    )
    assert "mul(x, 1)" in text and "merged a repeated op" in text
    fused, fusion = gc.fuse(result, backend="numpy", explain=True)
    names = [p.name for p in fusion.passes]
    assert "fuse_elementwise" in names and "fuse_matmul_epilogue" in names
    assert "fused 'fused'" in str(fusion) and fusion.nodes_after == len(fused.nodes)
    assert str(fusion).startswith("the numpy backend's fusion step (exact rules only): ")
    with pytest.raises(gc.GraphcError, match="backend"):
        gc.fuse(result, backend="no_such_backend")
    with pytest.raises(gc.GraphcError, match="fuse"):
        gc.fuse("not a graph")  # type: ignore[arg-type]


def test_cleanups_repeat_when_cse_exposes_algebra() -> None:
    g = gc.parse("""graph g(%x: i64[3]) {
      %c: i64[] = constant(value=3)
      %k: i64[] = constant(value=3)
      %a: i64[3] = mul(%x, %c)
      %b: i64[3] = mul(%x, %k)
      %d: i64[3] = sub(%a, %b)
      output %y = %d
    }""")
    result, report = gc.optimize(g, level=1, explain=True)
    assert [n.op for n in result.op_nodes] == ["constant"]
    assert len(report.find("simplify")) == 2
    np.testing.assert_array_equal(gc.run(result, {"x": np.arange(3)})[0], np.zeros(3))


def test_fast_math_cleanups_repeat_after_a_batch_norm_fold_so_o2_is_idempotent() -> None:
    """A scale folded into a matmul's weight leaves a bias add of zeros (no shift was
    folded): the round that made it runs again, so x + 0 goes now and not on a second
    optimize (which must find nothing to do)."""
    g = gc.parse("""graph g(%x: f64[4,3]) {
      %w: f64[3,2] = constant(value=[[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]])
      %s: f64[2] = constant(value=[2.0, 0.5])
      %m: f64[4,2] = matmul(%x, %w)
      %a: f64[4,2] = mul(%m, %s)
      %f: f64[4,2] = floor(%a)
      output %y = %f
    }""")
    once = gc.optimize(g, level=2, fast_math=True)
    assert [n.op for n in once.op_nodes] == ["constant", "matmul", "floor"]
    assert str(gc.optimize(once, level=2, fast_math=True)) == str(once)
    x = np.random.default_rng(0).standard_normal((4, 3)) * 10
    want = np.floor(x @ (np.arange(6.0).reshape(3, 2) * [2.0, 0.5]))
    np.testing.assert_array_equal(gc.run(once, {"x": x})[0], want)


def test_level_zero_report_and_bad_level() -> None:
    g = gc.parse(TEXT)
    result, report = gc.optimize(g, level=0, explain=True)
    assert result is g and report.passes == []
    assert "no passes" in str(report)
    for bad in (7, True, 2.0, "2"):
        with pytest.raises(gc.GraphcError, match="level must be one of"):
            gc.optimize(g, level=bad)  # type: ignore[arg-type]
    assert str(gc.optimize(g, level=np.int64(2))) == str(gc.optimize(g, level=2))
    with pytest.raises(gc.GraphcError, match="optimize: expected a gc.Graph, got str"):
        gc.optimize(TEXT)  # type: ignore[arg-type]


def _broken_pass(graph: gc.Graph, log: object = None) -> gc.Graph:
    bad = gc.Graph(graph.name)
    x = bad.add_placeholder("x", gc.TensorType((3,), "float64"))
    bad.add_op("exp", [x], {}, gc.TensorType((4,), "float64"), name="e")  # wrong type
    return bad


def test_verify_after_every_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    g = gc.parse(TEXT)
    monkeypatch.setitem(pipeline.LEVELS, 9, ((), (_broken_pass,)))
    assert gc.optimize(g, level=9, verify=False) is not None
    with pytest.raises(gc.VerifyError, match="after pass _broken_pass"):
        gc.optimize(g, level=9, verify=True)
    monkeypatch.setenv("GRAPHC_VERIFY_PASSES", "1")
    with pytest.raises(gc.VerifyError, match="node 'e'"):
        gc.optimize(g, level=9)


def test_locations_survive_every_level() -> None:
    g = gc.Graph("g")
    with g:
        x = gc.placeholder("x", shape=(3,), dtype="float64")
        y = gc.tanh(x * 2.0) * 3.0
        z = gc.sum(y)
        gc.output(z, name="z")
    locs = {n.loc for n in g.op_nodes}
    for level in (1, 2):
        result = gc.optimize(g, level=level)
        for n in result.op_nodes:
            assert n.loc in locs, (level, n)


def test_passes_are_exported() -> None:
    for name in (
        "simplify",
        "fold_constants",
        "eliminate_common_subexpressions",
        "eliminate_dead_code",
        "fold_batch_norm",
        "fold_sgd_updates",
        "scale_before_transposes",
        "optimize",
    ):
        assert callable(getattr(gc.passes, name))
    assert gc.optimize is gc.passes.optimize
    # fusion passes are the backends', beside the nodes they make
    for name in ("fuse_elementwise", "fuse_matmul_epilogue", "fuse_conv_epilogue"):
        assert not hasattr(gc.passes, name)
        assert callable(getattr(gc.backends.numpy.fusion, name))


def test_fast_math_is_named_in_the_report_with_the_value_changing_rules_that_fired() -> None:
    g = gc.parse("""graph g(%x: f64[3]) {
      %c: f64[] = constant(value=3.0)
      %d: f64[] = constant(value=0.5)
      %a: f64[3] = mul(%x, %c)
      %b: f64[3] = mul(%a, %d)
      output %y = %b
    }""")
    exact, report = gc.optimize(g, level=1, explain=True)
    assert "mul" in [n.op for n in exact.op_nodes] and len(exact.op_nodes) == 4
    assert report.value_changing == [] and "(exact rules only)" in str(report)
    fast, report = gc.optimize(g, level=1, explain=True, fast_math=True)
    assert len(fast.op_nodes) == 2
    assert report.value_changing == ["mul(mul(x, c), d) [fast_math]"]
    assert "(fast_math: value-changing rules allowed)" in str(report)
    assert "simplify_fast_math" in [p.name for p in report.passes]
    exe = gc.compile(g, fast_math=True)
    first = exe.explain().splitlines()[0]
    assert first == (
        "compiled at O2 (fast_math: value-changing rules allowed; "
        "fired: mul(mul(x, c), d) [fast_math])"
    )
    assert gc.compile(g).explain().startswith("compiled at O2 (exact)")
