"""simplify_control_flow and the passes inside bodies: text in, text out, same bits."""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
from graphc.passes.control import simplify_control_flow
from tests.edge_values import bits_differ
from tests.passes.passcheck import check_pass
from tests.strategies import random_feeds


def same_bits(before: gc.Graph, after: gc.Graph, seeds: range = range(3)) -> None:
    for seed in seeds:
        feeds = random_feeds(before, seed=seed)
        for want, got in zip(gc.run(before, feeds), gc.run(after, feeds)):
            assert bits_differ(got, want) is None, f"{before}\n->\n{after}"


def simplified(text: str) -> gc.Graph:
    graph = gc.parse(text)
    result = gc.passes.eliminate_dead_code(simplify_control_flow(graph))
    gc.verify(result)
    same_bits(graph, result)
    return result


def test_a_cond_on_a_constant_predicate_becomes_its_branch() -> None:
    check_pass(
        lambda g: gc.passes.eliminate_dead_code(simplify_control_flow(g)),
        """graph g(%x: f64[3]) {
          %p: bool[] = constant(value=False)
          %c: (f64[3], f64[3]) = cond(%p, %x, then_body=graph t(%a: f64[3]) {
            %e: f64[3] = exp(%a)
            output %o = %e
            output %o2 = %a
          }, else_body=graph f(%a: f64[3]) {
            %n: f64[3] = neg(%a)
            %s: f64[3] = sin(%n)
            output %o = %s
            output %o2 = %n
          })
          %r: f64[3] = result(%c, index=0)
          output %y = %r
        }""",
        """graph g(%x: f64[3]) {
          %n: f64[3] = neg(%x)
          %s: f64[3] = sin(%n)
          output %y = %s
        }""",
    )


def test_a_cond_drops_the_results_nobody_reads_and_the_operands_then_unused() -> None:
    result = simplified("""graph g(%p: bool[], %x: f64[3], %z: f64[3]) {
      %c: (f64[3], f64[3]) = cond(%p, %x, %z, then_body=graph t(%a: f64[3], %b: f64[3]) {
        %e: f64[3] = exp(%a)
        %m: f64[3] = mul(%b, %b)
        output %o = %e
        output %o2 = %m
      }, else_body=graph f(%a: f64[3], %b: f64[3]) {
        %n: f64[3] = neg(%a)
        output %o = %n
        output %o2 = %b
      })
      %r: f64[3] = result(%c, index=0)
      %unused: f64[3] = result(%c, index=1)
      output %y = %r
    }""")
    (cond,) = [n for n in result.op_nodes if n.op == "cond"]
    assert [x.name for x in cond.inputs] == ["p", "x"]
    assert str(cond.type) == "(f64[3],)"
    assert all(len(cond.attrs[k].inputs) == 1 for k in ("then_body", "else_body"))


SCAN = """graph g(%h: f64[2], %xs: f64[4,2], %ws: f64[4,2], %k: f64[2], %q: f64[2]) {
  %s: (f64[2], f64[2], f64[2], f64[4,2], f64[4,2]) = scan(%h, %h, %h, %xs, %ws, %k, %q, body=graph b(%a: f64[2], %b: f64[2], %c: f64[2], %x: f64[2], %w: f64[2], %k: f64[2], %q: f64[2]) {
    %a2: f64[2] = add(%a, %x)
    %b2: f64[2] = mul(%b, %c)
    %c2: f64[2] = add(%c, %w)
    %y: f64[2] = mul(%a, %k)
    %z: f64[2] = mul(%b, %q)
    output %oa = %a2
    output %ob = %b2
    output %oc = %c2
    output %oy = %y
    output %oz = %z
  }, length=4, reverse=False, num_carry=3, num_xs=2)
  %r0: f64[2] = result(%s, index=0)
  %r1: f64[2] = result(%s, index=1)
  %r2: f64[2] = result(%s, index=2)
  %r3: f64[4,2] = result(%s, index=3)
  %r4: f64[4,2] = result(%s, index=4)
  %t: f64[2] = add(%r0, %r0)
  output %y = %t
  output %ys = %r3
}"""


def test_a_scan_keeps_the_carries_its_read_results_need_and_drops_the_rest() -> None:
    result = simplified(SCAN)
    (scan,) = [n for n in result.op_nodes if n.op == "scan"]
    body = scan.attrs["body"]
    # a feeds y (read), which reads k; b and c, ws, q and z are dead
    assert [p.name for p in body.inputs] == ["a", "x", "k"]
    assert [o.name for o in body.outputs] == ["oa", "oy"]
    assert (scan.attrs["num_carry"], scan.attrs["num_xs"]) == (1, 1)
    assert [x.name for x in scan.inputs] == ["h", "xs", "k"]


@pytest.mark.parametrize("backend", ["numpy", "native"])
@pytest.mark.parametrize("level", [0, 2])
def test_a_scan_left_with_no_operand_still_runs(backend: str, level: int) -> None:
    """A body that reads neither carry nor row: every operand is dead, and the loop is
    called with only its outputs (the code once read `scan_loop(, out=...)`)."""
    xs = np.arange(3, dtype=np.float32)
    for reverse in (False, True):

        def fn(xs: gc.Symbol, reverse: bool = reverse) -> gc.Symbol:
            return gc.scan(lambda c, v: (c + v, 1), 0.0, xs, reverse=reverse)[1]

        g = gc.trace(fn, gc.TensorSpec(("B",), "float32"))
        if level:
            (scan,) = [n for n in gc.optimize(g).op_nodes if n.op == "scan"]
            assert scan.inputs == ()
        exe = gc.compile(g, opt_level=level, backend=backend, wait=True)
        np.testing.assert_array_equal(exe(xs), [1, 1, 1])
        assert exe(np.zeros(0, np.float32)).shape == (0,)
    mapped = gc.trace(
        lambda xs: gc.map(lambda v: np.float32(2.0), xs), gc.TensorSpec((3,), "float32")
    )
    np.testing.assert_array_equal(
        gc.compile(mapped, opt_level=level, backend=backend)(xs), [2, 2, 2]
    )


def test_a_carry_that_a_live_carry_reads_stays_live() -> None:
    text = SCAN.replace("output %ys = %r3", "output %ys = %r1")  # reads b, so c too
    result = simplified(text)
    (scan,) = [n for n in result.op_nodes if n.op == "scan"]
    assert [p.name for p in scan.attrs["body"].inputs] == ["a", "b", "c", "x", "w"]
    assert scan.attrs["num_carry"] == 3 and scan.attrs["num_xs"] == 2  # q and z still go


def test_loop_invariant_ops_move_out_of_a_scan_body() -> None:
    result = simplified("""graph g(%h: f64[2,3], %xs: f64[5,2,3], %w: f64[3,3]) {
      %s: (f64[2,3],) = scan(%h, %xs, %w, body=graph b(%c: f64[2,3], %x: f64[2,3], %w: f64[3,3]) {
        %t: f64[3,3] = transpose(%w, axes=(1, 0))
        %two: f64[] = constant(value=2.0)
        %tw: f64[3,3] = mul(%t, %two)
        %m: f64[2,3] = matmul(%c, %tw)
        %e: f64[2,3] = add(%m, %x)
        %h2: f64[2,3] = tanh(%e)
        output %o = %h2
      }, length=5, reverse=False, num_carry=1, num_xs=1)
      %r: f64[2,3] = result(%s, index=0)
      output %y = %r
    }""")
    outer = [n.op for n in result.op_nodes]
    assert outer[:3] == ["transpose", "constant", "mul"], result
    body = next(n for n in result.op_nodes if n.op == "scan").attrs["body"]
    assert [n.op for n in body.op_nodes] == ["matmul", "add", "tanh"]
    assert body.inputs[-1].type == gc.TensorType((3, 3), "float64")


def test_ops_on_constants_alone_stay_in_the_body() -> None:
    """A transpose of a constant (a recurrent weight) is invariant too, but stays in the
    body: it costs nothing there, and the body's matmul then sees a weight derived from
    constants, which the native backend packs once (backends/native/matmul.py). The op
    on a const placeholder still moves out."""
    result = simplified("""graph g(%h: f32[2,3], %xs: f32[5,2,3], %u: f32[3]) {
      %s: (f32[2,3],) = scan(%h, %xs, %u, body=graph b(%c: f32[2,3], %x: f32[2,3], %u: f32[3]) {
        %w: f32[3,3] = constant(value=[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]])
        %t: f32[3,3] = transpose(%w, axes=(1, 0))
        %m: f32[2,3] = matmul(%c, %t)
        %e: f32[3] = exp(%u)
        %a: f32[2,3] = add(%m, %e)
        %y: f32[2,3] = add(%a, %x)
        output %o = %y
      }, length=5, reverse=False, num_carry=1, num_xs=1)
      %r: f32[2,3] = result(%s, index=0)
      output %y = %r
    }""")
    outer = [n.op for n in result.op_nodes]
    assert "exp" in outer and "transpose" not in outer, result
    body = next(n for n in result.op_nodes if n.op == "scan").attrs["body"]
    assert [n.op for n in body.op_nodes if not n.is_constant] == [
        "transpose",
        "matmul",
        "add",
        "add",
    ]


def test_a_while_loop_keeps_the_carries_that_decide_when_to_stop() -> None:
    result = simplified("""graph g(%x: f64[2], %n: i64[]) {
      %w: (f64[2], i64[], f64[2]) = while_loop(%x, %n, %x, cond_body=graph c(%a: f64[2], %i: i64[], %b: f64[2]) {
        %k: i64[] = constant(value=5)
        %lt: bool[] = lt(%i, %k)
        output %o = %lt
      }, body=graph b(%a: f64[2], %i: i64[], %b: f64[2]) {
        %a2: f64[2] = sin(%a)
        %one: i64[] = constant(value=1)
        %i2: i64[] = add(%i, %one)
        %b2: f64[2] = exp(%b)
        output %oa = %a2
        output %oi = %i2
        output %ob = %b2
      }, num_carry=3, num_cond_consts=0)
      %r: f64[2] = result(%w, index=0)
      output %y = %r
    }""")
    (loop,) = [n for n in result.op_nodes if n.op == "while_loop"]
    assert [p.name for p in loop.attrs["body"].inputs] == ["a", "i"]
    assert loop.attrs["num_carry"] == 2


def test_the_level_runs_inside_bodies_fusing_at_o2() -> None:
    def f(h, xs):
        return gc.scan(lambda c, x: (gc.tanh(c * 2.0 + x) * 1.0, c), h, xs)[0]

    g = gc.trace(f, gc.TensorSpec((3,), "float64"), gc.TensorSpec((4, 3), "float64"))
    o1 = gc.optimize(g, level=1)
    body = next(n for n in o1.op_nodes if n.op == "scan").attrs["body"]
    assert "mul(%add" not in str(body) and "constant(value=1.0)" not in str(body)  # x*1 -> x
    o2 = gc.fuse(gc.optimize(g, level=2), backend="numpy")
    body = next(n for n in o2.op_nodes if n.op == "scan").attrs["body"]
    assert [n.op for n in body.op_nodes if not n.is_constant] == ["fused"]
    same_bits(g, o2)


@pytest.mark.parametrize("level", [1, 2])
def test_gradients_of_a_scan_optimize_to_the_same_bits(level: int) -> None:
    def f(h, xs, w):
        def step(c, x):
            a, b = c
            return (gc.tanh(a @ (gc.transpose(w) * 2.0) + x), b + 1.0), (a, b)

        (a, _), (ys_a, _) = gc.scan(step, (h, h), xs)
        return gc.sum(a) + gc.sum(ys_a)

    spec = [gc.TensorSpec(s, "float64") for s in ((2, 3), (4, 2, 3), (3, 3))]
    gg = gc.gradients(gc.trace(f, *spec), wrt=["h", "w"])
    optimized = gc.optimize(gg, level=level)
    same_bits(gg, optimized)
    # the dead carry b left the forward scan
    forward = next(n for n in optimized.op_nodes if n.op == "scan" and n.attrs["reverse"] is False)
    assert forward.attrs["num_carry"] == 1
    rng = np.random.default_rng(0)
    feeds = {p.name: rng.standard_normal(p.type.shape) for p in gg.inputs}
    compiled = gc.compile(gg, opt_level=level)(**feeds)
    for got, want in zip(compiled, gc.run(gg, feeds)):
        assert bits_differ(got, want) is None
