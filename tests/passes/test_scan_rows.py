"""Rows a scan body takes at its step counter become xs (passes/scan_rows.py): text in,
text out, same bits; and every condition the rewrite needs, each failing alone."""

from __future__ import annotations

import numpy as np
import pytest

import graphc as gc
from graphc.passes.control import simplify_control_flow
from tests.edge_values import bits_differ
from tests.passes.passcheck import check_pass
from tests.strategies import random_feeds

LOOP = """graph g(%h: f64[2], %xs: f64[4,2]) {
  %zero: i64[] = constant(value=0)
  %s: (i64[], f64[2], f64[4,2]) = scan(%zero, %h, %xs, body=graph b(%i: i64[], %a: f64[2], %x: f64[4,2]) {
    %row: f64[2] = take(%x, %i, axis=0)
    %a2: f64[2] = mul(%a, %row)
    %one: i64[] = constant(value=1)
    %i2: i64[] = add(%i, %one)
    output %oi = %i2
    output %oa = %a2
    output %oy = %row
  }, length=4, reverse=False, num_carry=2, num_xs=0)
  %r1: f64[2] = result(%s, index=1)
  %r2: f64[4,2] = result(%s, index=2)
  output %y = %r1
  output %ys = %r2
}"""


def cleaned(graph: gc.Graph) -> gc.Graph:
    return gc.passes.eliminate_dead_code(simplify_control_flow(graph))


def same_bits(before: gc.Graph, after: gc.Graph) -> None:
    for seed in range(3):
        feeds = random_feeds(before, seed=seed)
        for want, got in zip(gc.run(before, feeds), gc.run(after, feeds)):
            assert bits_differ(got, want) is None, f"{before}\n->\n{after}"


def body_ops(graph: gc.Graph) -> list[str]:
    (scan,) = [n for n in graph.op_nodes if n.op == "scan"]
    return [n.op for n in scan.attrs["body"].op_nodes]


def test_a_row_taken_at_the_counter_becomes_an_xs_and_the_counter_leaves() -> None:
    check_pass(
        cleaned,
        LOOP,
        """graph g(%h: f64[2], %xs: f64[4,2]) {
          %s: (f64[2], f64[4,2]) = scan(%h, %xs, body=graph b(%a: f64[2], %row: f64[2]) {
            %a2: f64[2] = mul(%a, %row)
            output %oa = %a2
            output %oy = %row
          }, length=4, reverse=False, num_carry=1, num_xs=1)
          %result: f64[2] = result(%s, index=0)
          %result_1: f64[4,2] = result(%s, index=1)
          output %y = %result
          output %ys = %result_1
        }""",
    )


def test_a_counter_read_elsewhere_stays_and_keeps_its_values() -> None:
    text = LOOP.replace(
        "%a2: f64[2] = mul(%a, %row)",
        "%a2: f64[2] = mul(%a, %row)\n    %f: f64[] = cast(%i, dtype=f64)\n    %a3: f64[2] = add(%a2, %f)",
    ).replace("output %oa = %a2", "output %oa = %a3")
    text = text.replace(
        "output %ys = %r2",
        "output %ys = %r2\n  %r0: i64[] = result(%s, index=0)\n  output %n = %r0",
    )
    graph = gc.parse(text)
    result = cleaned(graph)
    gc.verify(result)
    assert "take" not in body_ops(result)
    (scan,) = [n for n in result.op_nodes if n.op == "scan"]
    assert (scan.attrs["num_carry"], scan.attrs["num_xs"]) == (2, 1)
    same_bits(graph, result)
    assert int(gc.run(result, random_feeds(graph, seed=0))[2]) == 4


def test_takes_of_one_array_share_one_xs_and_an_xs_already_there_keeps_its_place() -> None:
    text = """graph g(%h: f64[2], %xs: f64[3,2], %w: f64[3,2]) {
      %zero: i32[] = constant(value=0)
      %s: (i32[], f64[2]) = scan(%zero, %h, %w, %xs, body=graph b(%i: i32[], %a: f64[2], %v: f64[2], %x: f64[3,2]) {
        %r: f64[2] = take(%x, %i, axis=0)
        %r2: f64[2] = take(%x, %i, axis=0)
        %m: f64[2] = mul(%r, %r2)
        %s1: f64[2] = add(%m, %v)
        %a2: f64[2] = add(%a, %s1)
        %one: i32[] = constant(value=1)
        %i2: i32[] = add(%one, %i)
        output %oi = %i2
        output %oa = %a2
      }, length=3, reverse=False, num_carry=2, num_xs=1)
      %r1: f64[2] = result(%s, index=1)
      output %y = %r1
    }"""
    graph = gc.parse(text)
    result = cleaned(graph)
    gc.verify(result)
    (scan,) = [n for n in result.op_nodes if n.op == "scan"]
    assert [x.name for x in scan.inputs] == ["h", "w", "xs"]
    assert [p.name for p in scan.attrs["body"].inputs] == ["a", "v", "r"]
    assert scan.attrs["num_xs"] == 2 and "take" not in body_ops(result)
    same_bits(graph, result)


@pytest.mark.parametrize(
    "change",
    [
        ("reverse=False", "reverse=True"),  # the counter runs up, the steps down
        ("constant(value=0)", "constant(value=1)"),  # starts at 1: rows 1.. and out of range
        ("%one: i64[] = constant(value=1)", "%one: i64[] = constant(value=2)"),
        ("take(%x, %i, axis=0)", "take(%x, %i, axis=1)"),
        ("%i2: i64[] = add(%i, %one)", "%i2: i64[] = sub(%i, %one)"),
    ],
)
def test_no_rewrite_unless_the_counter_reads_exactly_the_loops_rows(change: tuple) -> None:
    text = LOOP.replace(*change)
    if "axis=1" in change[1]:  # a take along axis 1 of a (4, 2): make it square to type
        text = text.replace("f64[4,2]", "f64[4,4]").replace("f64[2]", "f64[4]")
    assert text != LOOP
    graph = gc.parse(text)
    assert "take" in body_ops(cleaned(graph))


def test_no_rewrite_of_an_array_with_more_rows_than_steps() -> None:
    graph = gc.parse(
        LOOP.replace("%xs: f64[4,2]", "%xs: f64[5,2]").replace("%x: f64[4,2]", "%x: f64[5,2]")
    )
    result = cleaned(graph)
    assert "take" in body_ops(result)
    same_bits(graph, result)


def test_no_rewrite_where_the_counter_cannot_hold_every_step() -> None:
    # typed only, never run: 2**31 + 1 steps need index 2**31, past int32's largest
    big, fits = 2**31 + 1, 2**31
    text = LOOP.replace("i64", "i32").replace("length=4", f"length={big}")
    text = text.replace("f64[4,2]", f"f64[{big},2]")
    assert "take" in body_ops(cleaned(gc.parse(text)))
    text = text.replace(str(big), str(fits))  # steps 0 .. 2**31 - 1 fit
    assert "take" not in body_ops(cleaned(gc.parse(text)))


def test_a_symbolic_length_needs_an_int64_counter() -> None:
    text = LOOP.replace("4,2", "T,2").replace("length=4", 'length="T"')
    graph = gc.parse(text)
    result = cleaned(graph)
    assert "take" not in body_ops(result)
    xs = np.arange(10.0).reshape(5, 2)
    for want, got in zip(
        gc.run(graph, {"h": np.ones(2), "xs": xs}), gc.run(result, {"h": np.ones(2), "xs": xs})
    ):
        assert bits_differ(got, want) is None
    assert "take" in body_ops(cleaned(gc.parse(text.replace("i64", "i32"))))


def test_the_imported_onnx_loop_of_an_lstm_reads_its_rows_as_xs() -> None:
    pytest.importorskip("onnx")
    from graphc.bench import zoo_models

    data, name = zoo_models.export("lstm")
    graph = gc.onnx.import_model(data)
    optimized = gc.optimize(graph, level=1)
    assert "take" not in body_ops(optimized)
    x = np.random.default_rng(0).standard_normal((2, *zoo_models.ZOO["lstm"][1])).astype(np.float32)
    assert (
        bits_differ(gc.compile(optimized, backend="numpy")(x), gc.run(graph, {name: x})[0]) is None
    )
