"""Each algebra rule: graph text in, expected graph text out, and the same numbers."""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
from graphc.passes.fold import FOLD
from graphc.passes.report import PassLog
from graphc.passes.rewrite import rewrite
from graphc.passes.simplify import REWRITES
from tests.passes.passcheck import assert_bits_equal, check_pass, edge_feeds, same_numbers


def graph(params: str, *body: str) -> str:
    return f"graph g({params}) {{\n" + "\n".join(body) + "\n}"


F = "%x: f64[3,4]"
I = "%x: i64[3,4]"  # noqa: E741
ZERO_F = "%z: f64[] = constant(value=0.0)"
ONE_F = "%one: f64[] = constant(value=1.0)"

# (name, graph before, graph after simplify)
CASES = [
    ("x+0", graph(F, ZERO_F, "%a: f64[3,4] = add(%x, %z)", "output %y = %a"),
     graph(F, "output %y = %x")),
    ("0+x", graph(F, ZERO_F, "%a: f64[3,4] = add(%z, %x)", "output %y = %a"),
     graph(F, "output %y = %x")),
    ("x-0", graph(F, ZERO_F, "%a: f64[3,4] = sub(%x, %z)", "output %y = %a"),
     graph(F, "output %y = %x")),
    ("0-x", graph(F, ZERO_F, "%a: f64[3,4] = sub(%z, %x)", "output %y = %a"),
     graph(F, "%neg: f64[3,4] = neg(%x)", "output %y = %neg")),
    ("x+(-0.0)", graph(F, "%z: f64[] = constant(value=-0.0)", "%a: f64[3,4] = add(%x, %z)",
                       "output %y = %a"),
     graph(F, "output %y = %x")),
    ("x+0 int", graph(I, "%z: i64[] = constant(value=0)", "%a: i64[3,4] = add(%x, %z)",
                      "output %y = %a"),
     graph(I, "output %y = %x")),
    ("x-(-0.0)", graph(F, "%z: f64[] = constant(value=-0.0)", "%a: f64[3,4] = sub(%x, %z)",
                       "output %y = %a"),
     graph(F, "output %y = %x")),
    ("(-0.0)-x", graph(F, "%z: f64[] = constant(value=-0.0)", "%a: f64[3,4] = sub(%z, %x)",
                       "output %y = %a"),
     graph(F, "%neg: f64[3,4] = neg(%x)", "output %y = %neg")),
    ("x*1", graph(F, ONE_F, "%a: f64[3,4] = mul(%x, %one)", "output %y = %a"),
     graph(F, "output %y = %x")),
    ("x*ones_like", graph(F, "%o: f64[3,4] = full_like(%x, value=1)",
                          "%a: f64[3,4] = mul(%o, %x)", "output %y = %a"),
     graph(F, "output %y = %x")),
    ("x*-1", graph(F, "%m: f64[] = constant(value=-1.0)", "%a: f64[3,4] = mul(%x, %m)",
                   "output %y = %a"),
     graph(F, "%neg: f64[3,4] = neg(%x)", "output %y = %neg")),
    ("x*0 int", graph(I, "%z: i64[] = constant(value=0)", "%a: i64[3,4] = mul(%x, %z)",
                      "output %y = %a"),
     graph(I, "%const: i64[3,4] = constant(value=[[0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]])", "output %y = %const")),
    ("x*0 int, symbolic", graph("%x: i64[B]", "%z: i64[] = constant(value=0)",
                                "%a: i64[B] = mul(%z, %x)", "output %y = %a"),
     graph("%x: i64[B]", "%full_like: i64[B] = full_like(%x, value=0)", "output %y = %full_like")),
    ("x/1", graph(F, ONE_F, "%a: f64[3,4] = div(%x, %one)", "output %y = %a"),
     graph(F, "output %y = %x")),
    ("--x", graph(F, "%a: f64[3,4] = neg(%x)", "%b: f64[3,4] = neg(%a)", "output %y = %b"),
     graph(F, "output %y = %x")),
    ("x-x int", graph(I, "%a: i64[3,4] = sub(%x, %x)", "output %y = %a"),
     graph(I, "%const: i64[3,4] = constant(value=[[0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]])", "output %y = %const")),
    ("x+(-y)", graph(F + ", %w: f64[4]", "%n: f64[4] = neg(%w)", "%a: f64[3,4] = add(%x, %n)",
                     "output %y = %a"),
     graph(F + ", %w: f64[4]", "%sub: f64[3,4] = sub(%x, %w)", "output %y = %sub")),
    ("x-(-y)", graph(F + ", %w: f64[4]", "%n: f64[4] = neg(%w)", "%a: f64[3,4] = sub(%x, %n)",
                     "output %y = %a"),
     graph(F + ", %w: f64[4]", "%add: f64[3,4] = add(%x, %w)", "output %y = %add")),
    ("transpose id", graph(F, "%t: f64[3,4] = transpose(%x, axes=(0, 1))", "output %y = %t"),
     graph(F, "output %y = %x")),
    ("transpose transpose", graph("%x: f64[2,3,4]",
                                  "%t: f64[3,4,2] = transpose(%x, axes=(1, 2, 0))",
                                  "%u: f64[2,4,3] = transpose(%t, axes=(2, 1, 0))",
                                  "output %y = %u"),
     graph("%x: f64[2,3,4]", "%transpose: f64[2,4,3] = transpose(%x, axes=(0, 2, 1))",
           "output %y = %transpose")),
    ("transpose transpose id", graph(F, "%t: f64[4,3] = transpose(%x, axes=(1, 0))",
                                     "%u: f64[3,4] = transpose(%t, axes=(1, 0))",
                                     "output %y = %u"),
     graph(F, "output %y = %x")),
    ("(x^T @ g)^T", graph("%x: f64[5,3], %g: f64[5,4]",
                          "%t: f64[3,5] = transpose(%x, axes=(1, 0))",
                          "%m: f64[3,4] = matmul(%t, %g)",
                          "%u: f64[4,3] = transpose(%m, axes=(1, 0))", "output %y = %u"),
     graph("%x: f64[5,3], %g: f64[5,4]", "%transpose: f64[4,5] = transpose(%g, axes=(1, 0))",
           "%matmul: f64[4,3] = matmul(%transpose, %x)", "output %y = %matmul")),
    ("reshape(broadcast_to(c))", graph("%x: f64[512,10]", "%c: f64[1] = constant(value=[-0.5])",
                                       "%b: f64[512] = broadcast_to(%c, shape=(512,))",
                                       "%r: f64[512,1] = reshape(%b, shape=(512, 1))",
                                       "%m: f64[512,10] = mul(%r, %x)", "output %y = %m"),
     graph("%x: f64[512,10]", "%const: f64[] = constant(value=-0.5)",
           "%mul: f64[512,10] = mul(%const, %x)", "output %y = %mul")),
    ("reshape same", graph(F, "%r: f64[3,4] = reshape(%x, shape=(3, 4))", "output %y = %r"),
     graph(F, "output %y = %x")),
    ("reshape chain", graph(F, "%r: f64[12] = reshape(%x, shape=(12,))",
                            "%s: f64[2,6] = reshape(%r, shape=(2, 6))", "output %y = %s"),
     graph(F, "%reshape: f64[2,6] = reshape(%x, shape=(2, 6))", "output %y = %reshape")),
    ("reshape chain back", graph(F, "%r: f64[12] = reshape(%x, shape=(12,))",
                                 "%s: f64[3,4] = reshape(%r, shape=(3, 4))", "output %y = %s"),
     graph(F, "output %y = %x")),
    ("broadcast_to same", graph(F, "%b: f64[3,4] = broadcast_to(%x, shape=(3, 4))",
                                "output %y = %b"),
     graph(F, "output %y = %x")),
    ("broadcast_to chain", graph("%x: f64[4]", "%b: f64[3,4] = broadcast_to(%x, shape=(3, 4))",
                                 "%c: f64[2,3,4] = broadcast_to(%b, shape=(2, 3, 4))",
                                 "output %y = %c"),
     graph("%x: f64[4]", "%broadcast_to: f64[2,3,4] = broadcast_to(%x, shape=(2, 3, 4))",
           "output %y = %broadcast_to")),
    ("sum_to same", graph(F, "%s: f64[3,4] = sum_to(%x, shape=(3, 4))", "output %y = %s"),
     graph(F, "output %y = %x")),
    ("sum_to chain", graph(F, "%s: f64[1,4] = sum_to(%x, shape=(1, 4))",
                           "%t: f64[4] = sum_to(%s, shape=(4,))", "output %y = %t"),
     graph(F, "%sum_to: f64[4] = sum_to(%x, shape=(4,))", "output %y = %sum_to")),
    ("cast same", graph(F, "%c: f64[3,4] = cast(%x, dtype=f64)", "output %y = %c"),
     graph(F, "output %y = %x")),
    ("broadcast_to(w)*c", graph("%w: f64[1,4]", "%c: f64[] = constant(value=2.0)",
                                "%b: f64[3,4] = broadcast_to(%w, shape=(3, 4))",
                                "%a: f64[3,4] = mul(%c, %b)", "output %y = %a"),
     graph("%w: f64[1,4]", "%c: f64[] = constant(value=2.0)", "%mul: f64[1,4] = mul(%w, %c)",
           "%broadcast_to: f64[3,4] = broadcast_to(%mul, shape=(3, 4))",
           "output %y = %broadcast_to")),
    *[(f"{op}(broadcast_to(w), x)",
       graph(F + ", %w: f64[4]", "%b: f64[3,4] = broadcast_to(%w, shape=(3, 4))",
             f"%a: f64[3,4] = {op}(%b, %x)", "output %y = %a"),
       graph(F + ", %w: f64[4]", f"%{op}: f64[3,4] = {op}(%w, %x)", f"output %y = %{op}"))
      for op in ("add", "mul", "sub", "div")],
    *[(f"{op}(x, broadcast_to(w))",
       graph(F + ", %w: f64[4]", "%b: f64[3,4] = broadcast_to(%w, shape=(3, 4))",
             f"%a: f64[3,4] = {op}(%x, %b)", "output %y = %a"),
       graph(F + ", %w: f64[4]", f"%{op}: f64[3,4] = {op}(%x, %w)", f"output %y = %{op}"))
      for op in ("sub", "div")],
    *[(f"where({args})",
       graph(F + ", %c: bool[3,4], %w: f64[4]", "%b: f64[3,4] = broadcast_to(%w, shape=(3, 4))",
             f"%a: f64[3,4] = where(%c, {args.replace('broadcast_to(w)', '%b').replace('x', '%x')})",
             "output %y = %a"),
       graph(F + ", %c: bool[3,4], %w: f64[4]",
             f"%where: f64[3,4] = where(%c, {args.replace('broadcast_to(w)', '%w').replace('x', '%x')})",
             "output %y = %where"))
      for args in ("broadcast_to(w), x", "x, broadcast_to(w)")],
    *[(f"where({flag}, x, w)",
       graph(F + ", %w: f64[3,4]", f"%c: bool[] = constant(value={flag})",
             "%a: f64[3,4] = where(%c, %x, %w)", "output %y = %a"),
       graph(F + ", %w: f64[3,4]", f"output %y = %{kept}"))
      for flag, kept in (("True", "x"), ("False", "w"))],
    ("where(any nan of x, nan, max x) -> max x: ONNX's NaN check read back",
     graph(F, "%n: bool[3,4] = ne(%x, %x)", "%i: i32[3,4] = cast(%n, dtype=i32)",
           "%s: i32[4] = max(%i, axis=(0,), keepdims=False)", "%z: i32[] = constant(value=0)",
           "%g: bool[4] = gt(%s, %z)", "%c: f64[] = constant(value=nan)",
           "%m: f64[4] = max(%x, axis=(0,), keepdims=False)", "%a: f64[4] = where(%g, %c, %m)",
           "output %y = %a"),
     graph(F, "%m: f64[4] = max(%x, axis=(0,), keepdims=False)", "output %y = %m")),
    ("where(any nan of x in a window, nan, max_pool2d x) -> max_pool2d x",
     graph("%x: f32[1,2,4,4]", "%n: bool[1,2,4,4] = ne(%x, %x)",
           "%i: f32[1,2,4,4] = cast(%n, dtype=f32)",
           "%s: f32[1,2,2,2] = max_pool2d(%i, kernel_size=(2, 2), stride=(2, 2), padding=(0, 0, 0, 0), dilation=(1, 1), ceil_mode=False)",
           "%z: f32[] = constant(value=0.0)", "%g: bool[1,2,2,2] = gt(%s, %z)",
           "%c: f32[] = constant(value=nan)",
           "%m: f32[1,2,2,2] = max_pool2d(%x, kernel_size=(2, 2), stride=(2, 2), padding=(0, 0, 0, 0), dilation=(1, 1), ceil_mode=False)",
           "%a: f32[1,2,2,2] = where(%g, %c, %m)", "output %y = %a"),
     graph("%x: f32[1,2,4,4]",
           "%m: f32[1,2,2,2] = max_pool2d(%x, kernel_size=(2, 2), stride=(2, 2), padding=(0, 0, 0, 0), dilation=(1, 1), ceil_mode=False)",
           "output %y = %m")),
    ("where(true, c, x): c not of the result's shape",
     graph(F, "%c: bool[] = constant(value=True)", ZERO_F, "%a: f64[3,4] = where(%c, %z, %x)",
           "output %y = %a"),
     graph(F, "%c: bool[] = constant(value=True)", ZERO_F, "%a: f64[3,4] = where(%c, %z, %x)",
           "output %y = %a")),
    ("exp(log x), x >= 0", graph(F, "%a: f64[3,4] = abs(%x)", "%l: f64[3,4] = log(%a)",
                                 "%e: f64[3,4] = exp(%l)", "output %y = %e"),
     graph(F, "%a: f64[3,4] = abs(%x)", "output %y = %a")),
    ("log(exp x)", graph(F, "%e: f64[3,4] = exp(%x)", "%l: f64[3,4] = log(%e)",
                         "output %y = %l"),
     graph(F, "output %y = %x")),
    ("log(softmax x)", graph(F, "%s: f64[3,4] = softmax(%x, axis=1)",
                             "%l: f64[3,4] = log(%s)", "output %y = %l"),
     graph(F, "%log_softmax: f64[3,4] = log_softmax(%x, axis=1)", "output %y = %log_softmax")),
    ("log(sum(exp x))", graph(F, "%e: f64[3,4] = exp(%x)",
                              "%s: f64[3] = sum(%e, axis=(1,), keepdims=False)",
                              "%l: f64[3] = log(%s)", "output %y = %l"),
     graph(F, "%logsumexp: f64[3] = logsumexp(%x, axis=(1,), keepdims=False)",
           "output %y = %logsumexp")),
    ("x - logsumexp(x)", graph(F, "%s: f64[3,1] = logsumexp(%x, axis=(1,), keepdims=True)",
                               "%d: f64[3,4] = sub(%x, %s)", "output %y = %d"),
     graph(F, "%log_softmax: f64[3,4] = log_softmax(%x, axis=1)", "output %y = %log_softmax")),
    ("(x*c)*d", graph(F, "%c: f64[] = constant(value=3.0)", "%d: f64[] = constant(value=0.5)",
                      "%a: f64[3,4] = mul(%c, %x)", "%b: f64[3,4] = mul(%a, %d)",
                      "output %y = %b"),
     graph(F, "%const: f64[] = constant(value=1.5)", "%mul: f64[3,4] = mul(%x, %const)",
           "output %y = %mul")),
    ("(x*c)/d", graph(F, "%c: f64[] = constant(value=3.0)", "%d: f64[] = constant(value=2.0)",
                      "%a: f64[3,4] = mul(%x, %c)", "%b: f64[3,4] = div(%a, %d)",
                      "output %y = %b"),
     graph(F, "%const: f64[] = constant(value=1.5)", "%mul: f64[3,4] = mul(%x, %const)",
           "output %y = %mul")),
    ("(-x)*c", graph(F, "%c: f64[] = constant(value=3.0)", "%n: f64[3,4] = neg(%x)",
                     "%a: f64[3,4] = mul(%n, %c)", "output %y = %a"),
     graph(F, "%const: f64[] = constant(value=-3.0)", "%mul: f64[3,4] = mul(%x, %const)",
           "output %y = %mul")),
    ("(x*c)*y", graph(F + ", %w: f64[3,4]", "%c: f64[] = constant(value=0.5)",
                      "%a: f64[3,4] = mul(%x, %c)", "%b: f64[3,4] = mul(%a, %w)", "output %y = %b"),
     graph(F + ", %w: f64[3,4]", "%c: f64[] = constant(value=0.5)", "%mul: f64[3,4] = mul(%x, %w)",
           "%mul_1: f64[3,4] = mul(%mul, %c)", "output %y = %mul_1")),
    ("(x@y)*c, x smaller", graph("%x: f64[8,2], %g: f64[2,8]", "%c: f64[] = constant(value=0.5)",
                                 "%m: f64[8,8] = matmul(%x, %g)", "%a: f64[8,8] = mul(%c, %m)",
                                 "output %y = %a"),
     graph("%x: f64[8,2], %g: f64[2,8]", "%c: f64[] = constant(value=0.5)",
           "%mul: f64[8,2] = mul(%x, %c)", "%matmul: f64[8,8] = matmul(%mul, %g)",
           "output %y = %matmul")),
    ("(x@y)*c, y smaller", graph("%x: f64[8,3], %g: f64[3,6]", "%c: f64[] = constant(value=-0.01)",
                                 "%m: f64[8,6] = matmul(%x, %g)", "%a: f64[8,6] = mul(%m, %c)",
                                 "output %y = %a"),
     graph("%x: f64[8,3], %g: f64[3,6]", "%c: f64[] = constant(value=-0.01)",
           "%mul: f64[3,6] = mul(%g, %c)", "%matmul: f64[8,6] = matmul(%x, %mul)",
           "output %y = %matmul")),
    ("T(x)*c", graph(F, "%c: f64[] = constant(value=0.5)", "%t: f64[4,3] = transpose(%x, axes=(1, 0))",
                     "%a: f64[4,3] = mul(%c, %t)", "%e: f64[4,3] = exp(%a)", "output %y = %e"),
     graph(F, "%c: f64[] = constant(value=0.5)", "%mul: f64[3,4] = mul(%x, %c)",
           "%transpose: f64[4,3] = transpose(%mul, axes=(1, 0))", "%e: f64[4,3] = exp(%transpose)",
           "output %y = %e")),
    ("(T(x)@y)*c", graph("%x: f64[2,8], %g: f64[2,8]", "%c: f64[] = constant(value=0.5)",
                         "%t: f64[8,2] = transpose(%x, axes=(1, 0))",
                         "%m: f64[8,8] = matmul(%t, %g)", "%a: f64[8,8] = mul(%m, %c)",
                         "output %y = %a"),
     graph("%x: f64[2,8], %g: f64[2,8]", "%c: f64[] = constant(value=0.5)",
           "%mul: f64[2,8] = mul(%x, %c)", "%transpose: f64[8,2] = transpose(%mul, axes=(1, 0))",
           "%matmul: f64[8,8] = matmul(%transpose, %g)", "output %y = %matmul")),
    ("w - T(g*c)@x (SGD)", graph("%w: f64[4,5], %g: f64[3,4], %x: f64[3,5]",
                                 "%c: f64[] = constant(value=0.01)", "%s: f64[3,4] = mul(%g, %c)",
                                 "%t: f64[4,3] = transpose(%s, axes=(1, 0))",
                                 "%m: f64[4,5] = matmul(%t, %x)", "%u: f64[4,5] = sub(%w, %m)",
                                 "output %y = %u"),
     graph("%w: f64[4,5], %g: f64[3,4], %x: f64[3,5]",
           "%gemm: f64[4,5] = gemm(%g, %x, %w, alpha=-0.01, beta=1.0, trans_a=True, trans_b=False)",
           "output %y = %gemm")),
    ("w - (a@T(b))*c", graph("%w: f64[4,5], %a: f64[4,3], %b: f64[5,3]",
                             "%c: f64[] = constant(value=2.0)",
                             "%t: f64[3,5] = transpose(%b, axes=(1, 0))",
                             "%m: f64[4,5] = matmul(%a, %t)", "%s: f64[4,5] = mul(%m, %c)",
                             "%u: f64[4,5] = sub(%w, %s)", "output %y = %u"),
     graph("%w: f64[4,5], %a: f64[4,3], %b: f64[5,3]",
           "%gemm: f64[4,5] = gemm(%a, %b, %w, alpha=-2.0, beta=1.0, trans_a=False, trans_b=True)",
           "output %y = %gemm")),
    ("x/4", graph(F, "%c: f64[] = constant(value=4.0)", "%a: f64[3,4] = div(%x, %c)",
                  "output %y = %a"),
     graph(F, "%const_1: f64[] = constant(value=0.25)", "%mul: f64[3,4] = mul(%x, %const_1)",
           "output %y = %mul")),
    ("x**0", graph(F, ZERO_F, "%p: f64[3,4] = pow(%x, %z)", "output %y = %p"),
     graph(F, "%full_like: f64[3,4] = constant(value=[[1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0]])",
           "output %y = %full_like")),
    ("x**1", graph(F, ONE_F, "%p: f64[3,4] = pow(%x, %one)", "output %y = %p"),
     graph(F, "output %y = %x")),
    ("x**1, an exponent of several elements",
     graph(F, "%c: f64[4] = constant(value=[1.0, 1.0, 1.0, 1.0])", "%p: f64[3,4] = pow(%x, %c)",
           "output %y = %p"),
     graph(F, "output %y = %x")),
    ("x**2, an exponent of several elements",
     graph(F, "%c: f64[4] = constant(value=[2.0, 2.0, 2.0, 2.0])", "%p: f64[3,4] = pow(%x, %c)",
           "output %y = %p"),
     graph(F, "%mul: f64[3,4] = mul(%x, %x)", "output %y = %mul")),
    ("x**3, an exponent of several elements",
     graph(F, "%c: f64[4] = constant(value=[3.0, 3.0, 3.0, 3.0])", "%p: f64[3,4] = pow(%x, %c)",
           "output %y = %p"),
     graph(F, "%mul: f64[3,4] = mul(%x, %x)", "%mul_1: f64[3,4] = mul(%mul, %x)",
           "output %y = %mul_1")),
    ("x**2", graph(F, "%c: f64[] = constant(value=2.0)", "%p: f64[3,4] = pow(%x, %c)",
                   "output %y = %p"),
     graph(F, "%mul: f64[3,4] = mul(%x, %x)", "output %y = %mul")),
    ("x**3", graph(F, "%c: f64[] = constant(value=3.0)", "%p: f64[3,4] = pow(%x, %c)",
                   "output %y = %p"),
     graph(F, "%mul: f64[3,4] = mul(%x, %x)", "%mul_1: f64[3,4] = mul(%mul, %x)",
           "output %y = %mul_1")),
]  # fmt: skip


def every_rule(graph: gc.Graph, log: PassLog | None = None, fast_math: bool = True) -> gc.Graph:
    """simplify with the rewrites a backend's fusion step chooses too (`REWRITES`)."""
    rules = REWRITES if fast_math else [r for r in REWRITES if r.exact]
    return rewrite(graph, [*rules, FOLD], log)


@pytest.mark.parametrize("before, after", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_rule(before: str, after: str) -> None:
    """With fast_math every rule may run: each case rewrites to exactly its text."""
    check_pass(every_rule, before, after)


def _fired(text: str, fast_math: bool) -> tuple[gc.Graph, gc.Graph, set[str]]:
    log = PassLog("simplify")
    before = gc.parse(text)
    after = every_rule(before, log=log, fast_math=fast_math)
    return before, after, set(log.counts)


EXACT_NAMES = {str(r) for r in REWRITES if r.exact} | {str(FOLD)}
CHANGING_NAMES = {str(r) for r in REWRITES if not r.exact}


@pytest.mark.parametrize("before", [c[1] for c in CASES], ids=[c[0] for c in CASES])
def test_by_default_only_exact_rules_run_and_they_are_exact_bit_for_bit(before: str) -> None:
    graph_before, graph_after, fired = _fired(before, fast_math=False)
    assert fired <= EXACT_NAMES, fired - EXACT_NAMES
    for seed in range(8):
        feeds = edge_feeds(graph_before, seed)
        for want, got in zip(gc.run(graph_before, feeds), gc.run(graph_after, feeds)):
            assert_bits_equal(got, want, f"{graph_before}\n->\n{graph_after}\n{feeds}")


@pytest.mark.parametrize("before", [c[1] for c in CASES], ids=[c[0] for c in CASES])
def test_value_changing_rules_run_only_with_fast_math(before: str) -> None:
    _, _, fast = _fired(before, fast_math=True)
    _, _, default = _fired(before, fast_math=False)
    assert not default & CHANGING_NAMES
    assert fast & CHANGING_NAMES or fast == default


# rules that must NOT apply: the graph comes out unchanged
UNCHANGED = [
    ("x*0 float (inf*0 is nan)", graph(F, ZERO_F, "%a: f64[3,4] = mul(%x, %z)", "output %y = %a")),
    ("x-x float (inf-inf is nan)", graph(F, "%a: f64[3,4] = sub(%x, %x)", "output %y = %a")),
    ("exp(log x), x maybe negative", graph(F, "%l: f64[3,4] = log(%x)",
                                           "%e: f64[3,4] = exp(%l)", "output %y = %e")),
    ("x+0 broadcasts x", graph("%x: f64[4]", "%z: f64[3,4] = constant(value=b64\"" +
                               "A" * 128 + "\")", "%a: f64[3,4] = add(%x, %z)",
                               "output %y = %a")),
    ("x*1 promotes", graph("%x: f32[3]", ONE_F, "%a: f64[3] = mul(%x, %one)", "output %y = %a")),
    ("transpose of a square matrix", graph("%x: f64[3,3]",
                                           "%t: f64[3,3] = transpose(%x, axes=(1, 0))",
                                           "output %y = %t")),
    ("(x @ y)^T with no transpose to cancel", graph("%x: f64[3,5], %g: f64[5,4]",
                                                    "%m: f64[3,4] = matmul(%x, %g)",
                                                    "%u: f64[4,3] = transpose(%m, axes=(1, 0))",
                                                    "output %y = %u")),
    # log_softmax's gradient reads exp(log_softmax x) while the loss keeps log_softmax x:
    # one fused exp pass beats recomputing softmax from x, so this is left alone
    ("exp(log_softmax x)", graph(F, "%s: f64[3,4] = log_softmax(%x, axis=0)",
                                 "%e: f64[3,4] = exp(%s)", "output %y = %e")),
    ("(x@y)*c, |c| > 1 could overflow", graph("%x: f64[8,2], %g: f64[2,8]",
                                              "%c: f64[] = constant(value=4.0)",
                                              "%m: f64[8,8] = matmul(%x, %g)",
                                              "%a: f64[8,8] = mul(%c, %m)", "output %y = %a")),
    ("(x@y)*c, operands larger than the product", graph("%x: f64[2,8], %g: f64[8,2]",
                                                       "%c: f64[] = constant(value=0.5)",
                                                       "%m: f64[2,2] = matmul(%x, %g)",
                                                       "%a: f64[2,2] = mul(%c, %m)",
                                                       "output %y = %a")),
    ("(x@y)*c, product also used", graph("%x: f64[8,2], %g: f64[2,8]",
                                         "%c: f64[] = constant(value=0.5)",
                                         "%m: f64[8,8] = matmul(%x, %g)",
                                         "%a: f64[8,8] = mul(%c, %m)", "output %y = %a",
                                         "output %z = %m")),
    ("(x@y)*c, symbolic sizes", graph("%x: f64[B,2], %g: f64[2,8]",
                                      "%c: f64[] = constant(value=0.5)",
                                      "%m: f64[B,8] = matmul(%x, %g)",
                                      "%a: f64[B,8] = mul(%c, %m)", "output %y = %a")),
    ("T(x)*c, c of higher rank", graph(F, "%c: f64[1,1,1] = constant(value=[[[0.5]]])",
                                       "%t: f64[4,3] = transpose(%x, axes=(1, 0))",
                                       "%a: f64[1,4,3] = mul(%t, %c)", "output %y = %a")),
    ("w - a@b, product also used", graph("%w: f64[4,5], %a: f64[4,3], %b: f64[3,5]",
                                          "%m: f64[4,5] = matmul(%a, %b)",
                                          "%u: f64[4,5] = sub(%w, %m)", "output %y = %u",
                                          "output %z = %m")),
    ("w - a@b, batched", graph("%w: f64[2,4,5], %a: f64[2,4,3], %b: f64[3,5]",
                               "%m: f64[2,4,5] = matmul(%a, %b)",
                               "%u: f64[2,4,5] = sub(%w, %m)", "output %y = %u")),
    ("w - a@b, w wider than the product", graph("%w: f64[2,4,5], %a: f64[4,3], %b: f64[3,5]",
                                                "%m: f64[4,5] = matmul(%a, %b)",
                                                "%u: f64[2,4,5] = sub(%w, %m)", "output %y = %u")),
    ("x/3 (1/3 is not exact)", graph(F, "%c: f64[] = constant(value=3.0)",
                                     "%a: f64[3,4] = div(%x, %c)", "output %y = %a")),
    ("x - logsumexp over 2 axes", graph(F, "%s: f64[1,1] = logsumexp(%x, axis=None, keepdims=True)",
                                        "%d: f64[3,4] = sub(%x, %s)", "output %y = %d")),
]  # fmt: skip


@pytest.mark.parametrize("text", [c[1] for c in UNCHANGED], ids=[c[0] for c in UNCHANGED])
def test_rule_does_not_apply(text: str) -> None:
    check_pass(gc.passes.simplify, text, text)


def test_every_rule_has_a_case() -> None:
    """Each rule of the table fires on at least one case above (by the report's tallies)."""
    fired: set[str] = set()
    for _, before, _ in CASES:
        fired |= _fired(before, fast_math=True)[2] | _fired(before, fast_math=False)[2]
    assert {str(r) for r in REWRITES} - fired == set()


def test_rules_run_to_a_fixed_point() -> None:
    """Rewrites cascade: neg(neg(x*1)) + 0, then **2, collapses in one call."""
    text = graph(
        F,
        "%z: f64[] = constant(value=-0.0)",
        ONE_F,
        "%two: f64[] = constant(value=2.0)",
        "%a: f64[3,4] = mul(%x, %one)",
        "%b: f64[3,4] = neg(%a)",
        "%c: f64[3,4] = neg(%b)",
        "%d: f64[3,4] = add(%c, %z)",
        "%e: f64[3,4] = pow(%d, %two)",
        "output %y = %e",
    )
    check_pass(
        gc.passes.simplify, text, graph(F, "%mul: f64[3,4] = mul(%x, %x)", "output %y = %mul")
    )


def test_replacements_keep_the_source_location() -> None:
    g = gc.Graph("g")
    with g:
        x = gc.placeholder("x", shape=(3,), dtype="float64")
        y = (x * 2.0) * 3.0
        gc.output(y, name="y")
    loc = y.node.loc
    result = gc.passes.simplify(g, fast_math=True)
    (node,) = [n for n in result.op_nodes if n.op == "mul"]
    assert node.loc == loc and "test_rules.py" in loc
    same_numbers(g, result)


def test_simplify_symbolic_shapes() -> None:
    text = graph(
        "%x: f64[B,4]",
        '%r: f64[B,4] = reshape(%x, shape=("B", 4))',
        '%s: f64[B,4] = sum_to(%r, shape=("B", 4))',
        "output %y = %s",
    )
    result = gc.passes.simplify(gc.parse(text))
    assert str(result) == str(gc.parse(graph("%x: f64[B,4]", "output %y = %x")))
    x = np.arange(8.0).reshape(2, 4)
    np.testing.assert_array_equal(gc.run(result, {"x": x})[0], x)


def test_the_driver_returns_the_graph_itself_only_when_a_walk_would_copy_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`rewrite` skips its walk when no rule matches any node as it stands
    (`Rewriter.fires`): on every case above, with and without fast_math, the result
    prints as the walk's does, and is the graph itself only when no rule fired."""
    from graphc.passes.rewrite import Rewriter

    texts = [c[1] for c in CASES] + [c[1] for c in UNCHANGED]
    skipped = 0
    for fast_math in (False, True):
        for text in texts:
            g = gc.parse(text)
            log = PassLog("simplify")
            shortcut = every_rule(g, log=log, fast_math=fast_math)
            with monkeypatch.context() as m:
                m.setattr(Rewriter, "fires", lambda self: True)
                walked = every_rule(gc.parse(text), fast_math=fast_math)
            assert str(shortcut) == str(walked), text
            if shortcut is g:
                assert not log.counts, text
                skipped += 1
    assert skipped >= len(UNCHANGED), f"walks skipped: {skipped}"


def test_a_rewritten_node_keeps_its_name_scope() -> None:
    """Found by the IR hunt: rewrites and folds dropped meta["scope"], so a picture of
    the optimized graph lost the module group of the nodes a rule made."""
    g = gc.Graph("scoped")
    with g:
        x = gc.placeholder("x", shape=(3,))
        with gc.name_scope("enc"):
            y = gc.exp(x) ** 2  # pow(., 2) -> mul(., .) at O1
        gc.output(y, name="y")
    optimized = gc.optimize(g, level=1)
    (mul,) = [n for n in optimized.op_nodes if n.op == "mul"]
    assert mul.meta.get("scope") == "enc"
