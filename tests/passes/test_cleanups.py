"""fold_constants, eliminate_common_subexpressions, eliminate_dead_code, the driver."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings

import graphc as gc
from graphc.passes import fold
from graphc.passes.report import PassLog
from graphc.passes.rewrite import Rewriter
from graphc.passes.simplify import ALGEBRA, EXACT, simplify_fast_math
from tests.budget import draws
from tests.passes.passcheck import check_pass
from tests.strategies import random_graphs


def test_fold_runs_the_kernels_in_cascade() -> None:
    before = """graph g(%x: f64[2]) {
      %a: f64[2] = constant(value=[1.0, 4.0])
      %b: f64[2] = sqrt(%a)
      %c: f64[2] = exp(%b)
      %d: f64[2] = add(%x, %c)
      output %y = %d
    }"""
    c = np.exp(np.sqrt([1.0, 4.0]))
    after = f"""graph g(%x: f64[2]) {{
      %c: f64[2] = constant(value=[{float(c[0])!r}, {float(c[1])!r}])
      %d: f64[2] = add(%x, %c)
      output %y = %d
    }}"""
    check_pass(gc.passes.fold_constants, before, after)


def test_fold_type_only_ops_on_concrete_shapes() -> None:
    before = """graph g(%x: f64[2,3]) {
      %f: f64[2,3] = full_like(%x, value=2)
      %n: f64[] = count(shape=(2, 3), axis=None, dtype=f64)
      %a: f64[2,3] = mul(%x, %f)
      %b: f64[2,3] = div(%a, %n)
      output %y = %b
    }"""
    after = """graph g(%x: f64[2,3]) {
      %f: f64[2,3] = constant(value=[[2.0, 2.0, 2.0], [2.0, 2.0, 2.0]])
      %n: f64[] = constant(value=6.0)
      %a: f64[2,3] = mul(%x, %f)
      %b: f64[2,3] = div(%a, %n)
      output %y = %b
    }"""
    check_pass(gc.passes.fold_constants, before, after)


def test_fold_leaves_symbolic_and_huge_results() -> None:
    text = """graph g(%x: f64[B]) {
      %f: f64[B] = full_like(%x, value=2)
      %n: f64[] = count(shape=("B",), axis=None, dtype=f64)
      %g: f64[B] = div(%f, %n)
      %c: f64[] = constant(value=1.0)
      %big: f64[300,300] = broadcast_to(%c, shape=(300, 300))
      %s: f64[] = sum(%big, axis=None, keepdims=False)
      %m: f64[B] = mul(%g, %s)
      output %y = %m
    }"""
    assert fold.FOLD_LIMIT < 300 * 300
    check_pass(gc.passes.fold_constants, text, text)


def test_fold_does_not_materialize_broadcasts() -> None:
    """A scalar broadcast to (64, 10) stays a broadcast: folding it would grow data."""
    text = """graph g(%x: f64[64,10]) {
      %c: f64[] = constant(value=-0.5)
      %b: f64[64,10] = broadcast_to(%c, shape=(64, 10))
      %f: f64[64,10] = full_like(%x, value=1)
      %m: f64[64,10] = mul(%b, %f)
      output %y = %m
    }"""
    assert fold.SMALL < 64 * 10 <= fold.FOLD_LIMIT
    check_pass(gc.passes.fold_constants, text, text)


def test_fold_skips_a_kernel_that_raises() -> None:
    text = """graph g(%x: i64[2]) {
      %a: i64[2] = constant(value=[2, 3])
      %b: i64[2] = constant(value=[-1, 1])
      %p: i64[2] = pow(%a, %b)
      %s: i64[2] = add(%x, %p)
      output %y = %s
    }"""
    assert str(gc.passes.fold_constants(gc.parse(text))) == str(gc.parse(text))


def test_cse_merges_ops_commuted_inputs_and_equal_constants() -> None:
    before = """graph g(%x: f64[3], %w: f64[3]) {
      %c1: f64[] = constant(value=2.0)
      %c2: f64[] = constant(value=2.0)
      %a: f64[3] = mul(%x, %c1)
      %b: f64[3] = mul(%c2, %x)
      %e: f64[3] = add(%a, %w)
      %f: f64[3] = add(%w, %b)
      %g: f64[3] = sub(%e, %f)
      output %y = %g
    }"""
    after = """graph g(%x: f64[3], %w: f64[3]) {
      %c1: f64[] = constant(value=2.0)
      %a: f64[3] = mul(%x, %c1)
      %e: f64[3] = add(%a, %w)
      %g: f64[3] = sub(%e, %e)
      output %y = %g
    }"""
    check_pass(gc.passes.eliminate_common_subexpressions, before, after)


def test_cse_keeps_different_attrs_dtypes_and_signed_zeros_apart() -> None:
    text = """graph g(%x: f64[3,4]) {
      %a: f64[3] = sum(%x, axis=(1,), keepdims=False)
      %b: f64[4] = sum(%x, axis=(0,), keepdims=False)
      %z: f64[] = constant(value=0.0)
      %n: f64[] = constant(value=-0.0)
      %i: i64[] = constant(value=0)
      output %y1 = %a
      output %y2 = %b
      output %y3 = %z
      output %y4 = %n
      output %y5 = %i
    }"""
    check_pass(gc.passes.eliminate_common_subexpressions, text, text)


def test_cse_compares_large_constants_whole_without_copying_them() -> None:
    """Big constants are keyed without a copy of their bytes (a model's weights would be
    held twice), hashed on a sample and compared whole: twins merge, and constants that
    differ in one byte the sample skips, or only in a NaN's payload, stay apart."""
    from graphc.passes.cse import SAMPLE, attr_key

    base = np.random.default_rng(0).standard_normal(SAMPLE * 4).astype(np.float32)
    assert np.shares_memory(attr_key(base).array, base)
    nudged = base.copy()
    nudged[1] = np.nextafter(nudged[1], np.float32(np.inf))  # between sampled bytes
    payload = base.copy()
    payload[5] = np.array(0x7FC00001, np.uint32).view(np.float32)
    quiet = base.copy()
    quiet[5] = np.nan
    g = gc.Graph("g")
    with g:
        for i, value in enumerate((base, base.copy(), nudged, payload, quiet)):
            gc.output(gc.constant(value, name=f"c{i}"), name=f"y{i}")
    result = gc.passes.eliminate_common_subexpressions(g)
    assert [n.name for n in result.op_nodes] == ["c0", "c2", "c3", "c4"]
    for out, value in zip(result.outputs, (base, base, nudged, payload, quiet)):
        assert out.inputs[0].value.tobytes() == value.tobytes()


def test_cse_returns_a_graph_with_nothing_to_merge_as_it_is() -> None:
    """No copy when no two nodes have one key; the same text as a copying walk gives."""
    text = """graph g(%x: f64[3]) {
      %c: f64[] = constant(value=2.0)
      %a: f64[3] = mul(%x, %c)
      %b: f64[3] = add(%a, %c)
      output %y = %b
    }"""
    g = gc.parse(text)
    assert gc.passes.eliminate_common_subexpressions(g) is g
    merged = gc.parse(text.replace("add(%a, %c)", "mul(%x, %c)"))
    result = gc.passes.eliminate_common_subexpressions(merged)
    assert result is not merged and len(result.nodes) == len(merged.nodes) - 1


def test_dce_keeps_placeholders_and_outputs() -> None:
    before = """graph g(%x: f64[3], %unused: f64[2]) {
      %a: f64[3] = exp(%x)
      %b: f64[3] = sin(%a)
      %c: f64[3] = cos(%x)
      output %y = %c
    }"""
    after = """graph g(%x: f64[3], %unused: f64[2]) {
      %c: f64[3] = cos(%x)
      output %y = %c
    }"""
    check_pass(gc.passes.eliminate_dead_code, before, after)


def test_dce_returns_a_graph_with_nothing_dead_as_it_is() -> None:
    """Nothing to remove: the graph itself (no copy, as rewrite does); something to
    remove: a new graph, the input unchanged."""
    whole = gc.parse("graph g(%x: f64[3]) {\n  %a: f64[3] = exp(%x)\n  output %y = %a\n}")
    assert gc.passes.eliminate_dead_code(whole) is whole
    dead = gc.parse(
        "graph g(%x: f64[3]) {\n  %a: f64[3] = exp(%x)\n  %b: f64[3] = sin(%x)\n  output %y = %a\n}"
    )
    text = str(dead)
    result = gc.passes.eliminate_dead_code(dead)
    assert result is not dead and str(dead) == text and len(result.nodes) == 3


def test_new_names_never_collide_with_later_names() -> None:
    # the replacement for x*x*2*3 is called 'mul...' while the old graph has 'mul_1' later
    before = """graph g(%x: f64[3]) {
      %c: f64[] = constant(value=2.0)
      %mul: f64[3] = mul(%x, %c)
      %d: f64[] = constant(value=3.0)
      %m2: f64[3] = mul(%mul, %d)
      %mul_1: f64[3] = sin(%m2)
      output %y = %mul_1
    }"""
    result = check_pass(
        simplify_fast_math,  # (x*c)*d folds its scales only with fast_math
        before,
        """graph g(%x: f64[3]) {
          %const: f64[] = constant(value=6.0)
          %mul_2: f64[3] = mul(%x, %const)
          %mul_1: f64[3] = sin(%mul_2)
          output %y = %mul_1
        }""",
    )
    assert len({n.name for n in result.nodes}) == len(result.nodes)


@settings(max_examples=draws(60), derandomize=True)
@given(random_graphs(min_ops=15, max_ops=25, symbolic=True))
def test_one_walk_reaches_the_fixed_point(graph: gc.Graph) -> None:
    """After simplify, a second walk of the same rules fires nothing (default and
    fast_math rule sets alike)."""
    for fast_math, rules in ((False, EXACT), (True, ALGEBRA)):
        once = gc.passes.simplify(gc.passes.fold_constants(graph), fast_math=fast_math)
        again = Rewriter(once, rules, PassLog("again"))
        again.walk()
        assert not again.fired, str(once)


def test_logs_count_what_fired() -> None:
    g = gc.parse("""graph g(%x: f64[3]) {
      %one: f64[] = constant(value=1.0)
      %a: f64[3] = mul(%x, %one)
      %b: f64[3] = mul(%a, %one)
      output %y = %b
    }""")
    log = PassLog("simplify")
    gc.passes.simplify(g, log=log)
    assert log.counts == {"mul(x, 1)": 2}
    assert "2 x mul(x, 1)" in log.lines()


def test_a_declined_replacement_leaves_no_nodes_and_no_tallies() -> None:
    """A replacement whose own inner rewrite fired (x*1 -> x) but whose result has the
    wrong type is declined: its nodes go (DCE) and the report does not name its rules."""
    from graphc.passes.patterns import X, ops
    from graphc.passes.rewrite import rewrite, rule

    (neg,) = ops("neg")

    def widened(m):  # type: ignore[no-untyped-def]
        one = m.constant(np.ones((), m.x.type.dtype))
        return m.emit("cast", m.emit("mul", m.x, one), dtype="float64")  # f64 != f32

    x_times_one = next(r for r in ALGEBRA if str(r) == "mul(x, 1)")
    g = gc.parse("""graph g(%x: f32[3]) {
      %n: f32[3] = neg(%x)
      output %y = %n
    }""")
    log = PassLog("simplify")
    result = rewrite(g, [rule(neg(X), widened), x_times_one], log)
    assert str(result) == str(g)
    assert not log.counts


def test_a_rule_returning_the_candidate_declines_and_a_stray_node_is_named() -> None:
    """Returning the candidate (m.node) means "leave it"; returning a node of the graph
    being rewritten, or no node at all, is the rule's bug, named at once (it used to
    surface as a graph mismatch on a later node)."""
    from graphc.passes.patterns import X, ops
    from graphc.passes.rewrite import RuleError, rewrite, rule

    exp, neg = ops("exp", "neg")
    g = gc.parse("""graph g(%x: f32[3]) {
      %a: f32[3] = exp(%x)
      %b: f32[3] = neg(%a)
      output %y = %b
    }""")
    log = PassLog("custom")
    kept = rewrite(g, [rule(exp(X), lambda m: m.node)], log)
    gc.verify(kept)
    assert str(kept) == str(g) and not log.counts
    for stray in (lambda m: g.node("a"), lambda m: g.node("x"), lambda m: 3):
        with pytest.raises(RuleError, match=r"rule neg\(x\) on node 'b'"):
            rewrite(g, [rule(neg(X), stray)])
