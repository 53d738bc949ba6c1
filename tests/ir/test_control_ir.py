"""Graphs with bodies (cond, scan, while_loop) and several results, through every form.

Text, JSON (in memory and as a file) and networkx give back a graph that prints the
same text and runs to the same bits (gc.run), nested bodies included: cond in scan in
cond, scan in scan, while_loop with captured values, symbolic dims, and the gradient
graphs whose scans carry residuals. The malformed bodies are in test_control_verify.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import graphc as gc
from graphc.ir.graph import MAX_NESTING
from tests.control_programs import PROGRAMS
from tests.edge_values import bits_differ

F64 = "float64"


def declared_nested() -> gc.Graph:
    """cond in scan in cond, declared with `with g:`; w is read two bodies deep."""
    g = gc.Graph("declared")
    with g:
        x = gc.placeholder("x", shape=(3,), dtype=F64)
        xs = gc.placeholder("xs", shape=(4, 3), dtype=F64)
        w = gc.placeholder("w", shape=(3,), dtype=F64)

        def outer(c: gc.Symbol, x_t: gc.Symbol) -> tuple:
            c2 = gc.cond(gc.sum(c) > 0, lambda a: gc.tanh(a * w + x_t), lambda a: a - w, c)
            return c2, (c2 * 2.0, gc.sum(c2))

        last, (ys, sums) = gc.cond(
            gc.sum(x) > -0.5,
            lambda v: gc.scan(outer, v, xs, reverse=True),
            lambda v: (v, (xs * v, gc.sum(xs, axis=1))),
            x,
        )
        gc.output(last, name="last")
        gc.output(ys, name="ys")
        gc.output(sums, name="sums")
    return g


def scan_in_scan() -> gc.Graph:
    def f(a: gc.Symbol, xs: gc.Symbol) -> tuple:
        def outer(c: gc.Symbol, row: gc.Symbol) -> tuple:
            inner, zs = gc.scan(lambda h, v: (gc.sin(h) + v, h * v), c, row)
            return inner, zs

        return gc.scan(outer, a, xs)

    return gc.trace(f, gc.TensorSpec((2,), F64), gc.TensorSpec((3, 4, 2), F64))


def while_with_captures() -> gc.Graph:
    def f(x: gc.Symbol, limit: gc.Symbol, step: gc.Symbol) -> tuple:
        count, value = gc.while_loop(
            lambda c: gc.sum(c[1] * c[1]) < limit,
            lambda c: (c[0] + 1, c[1] * 1.5 + step),
            (np.int64(0), x),
        )
        return count, value

    return gc.trace(f, gc.TensorSpec((3,), F64), gc.TensorSpec((), F64), gc.TensorSpec((3,), F64))


def fori_traced_bounds() -> gc.Graph:
    return gc.trace(
        lambda x, n: gc.fori_loop(0, n, lambda i, v: v * 0.5 + gc.cast(i, v.dtype), x),
        gc.TensorSpec((None, 2), F64),
        gc.TensorSpec((), "int64"),
    )


def rnn_gradients() -> gc.Graph:
    return gc.gradients(PROGRAMS["rnn"].graph(), wrt=["h", "xs", "w"])


def nested_gradients() -> gc.Graph:
    return gc.gradients(PROGRAMS["nested"].graph(), wrt=["x", "xs", "w"])


def batched_split() -> gc.Graph:
    return gc.split_backward(PROGRAMS["batched_rnn"].graph(), wrt=["h", "xs", "w"])[1]


def empty_results() -> gc.Graph:
    """A cond and a scan with no results at all: their type is `()`."""

    def f(x: gc.Symbol) -> gc.Symbol:
        gc.cond(gc.sum(x) > 0, lambda a: None, lambda a: None, x)
        gc.scan(lambda c, v: (None, None), None, x)
        return x * 2.0

    return gc.trace(f, gc.TensorSpec((3,), F64))


GRAPHS: dict[str, Callable[[], gc.Graph]] = {
    "declared_nested": declared_nested,
    "scan_in_scan": scan_in_scan,
    "while_with_captures": while_with_captures,
    "fori_traced_bounds": fori_traced_bounds,
    "nested_program": lambda: PROGRAMS["nested"].graph(),
    "batched_rnn": lambda: PROGRAMS["batched_rnn"].graph(),
    "rnn_gradients": rnn_gradients,
    "nested_gradients": nested_gradients,
    "batched_split_backward": batched_split,
    "empty_results": empty_results,
}


def feeds_for(g: gc.Graph, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    feeds = {}
    for p in g.inputs:
        shape = tuple(2 if isinstance(d, str) else d for d in p.type.shape)
        if np.issubdtype(p.type.dtype, np.integer):
            feeds[p.name] = np.asarray(rng.integers(0, 4), p.type.dtype).reshape(shape)
        elif p.name == "limit":
            feeds[p.name] = np.asarray(rng.uniform(5.0, 50.0), p.type.dtype)
        else:
            feeds[p.name] = rng.uniform(-1.0, 1.0, shape).astype(p.type.dtype)
    return feeds


def copies(g: gc.Graph, tmp_path: Path) -> dict[str, gc.Graph]:
    path = tmp_path / "graph.json"
    gc.save(g, path)
    return {
        "text": gc.parse(str(g)),
        "json": gc.from_json(gc.to_json(g)),
        "json_compact": gc.from_json(gc.to_json(g, indent=None)),
        "file": gc.load(path),
        "networkx": gc.from_networkx(gc.to_networkx(g)),
    }


@pytest.mark.parametrize("name", list(GRAPHS))
def test_round_trips_print_and_run_the_same(name: str, tmp_path: Path) -> None:
    g = GRAPHS[name]()
    gc.verify(g)
    text = str(g)
    for how, copy in copies(g, tmp_path).items():
        assert str(copy) == text, f"{name} via {how} prints differently:\n{text}\n---\n{copy}"
        gc.verify(copy)
        for seed in range(3):
            feeds = feeds_for(g, seed)
            want, got = gc.run(g, feeds), gc.run(copy, feeds)
            assert len(got) == len(want)
            for k, (a, b) in enumerate(zip(got, want)):
                why = bits_differ(a, b)
                assert why is None, f"{name} via {how}, output {k}, seed {seed}: {why}\n{text}"


@pytest.mark.parametrize("name", list(GRAPHS))
def test_round_trips_are_fixed_points(name: str) -> None:
    """Reading back what a read-back graph prints changes nothing (no drift of names)."""
    g = GRAPHS[name]()
    once = gc.parse(str(g))
    assert str(gc.parse(str(once))) == str(once)
    again = gc.from_json(gc.to_json(gc.from_json(gc.to_json(g))))
    assert gc.to_json(again) == gc.to_json(gc.from_json(gc.to_json(g)))


def test_nested_bodies_keep_their_structure() -> None:
    g = gc.parse(str(declared_nested()))
    cond = next(n for n in g.op_nodes if n.op == "cond")
    then_body, else_body = cond.attrs["then_body"], cond.attrs["else_body"]
    scan = next(n for n in then_body.op_nodes if n.op == "scan")
    assert scan.attrs["reverse"] is True and scan.attrs["length"] == 4
    inner = next(n for n in scan.attrs["body"].op_nodes if n.op == "cond")
    # w, read two bodies down, is an operand at every level in between
    assert "w" in [x.name for x in cond.inputs]
    assert any(p.name.startswith("w") for p in scan.attrs["body"].inputs)
    assert any(p.name.startswith("w") for p in inner.attrs["then_body"].inputs)
    assert [str(t) for t in cond.type.items] == ["f64[3]", "f64[4,3]", "f64[4]"]
    assert len(else_body.outputs) == 3


def test_networkx_keeps_bodies_and_tuple_types() -> None:
    g = declared_nested()
    d = gc.to_networkx(g)
    cond = next(k for k, v in d.nodes(data=True) if v["op"] == "cond")
    assert isinstance(d.nodes[cond]["type"], gc.ir.types.TupleType)
    assert isinstance(d.nodes[cond]["attrs"]["then_body"], gc.Graph)
    readers = [k for k in d.successors(cond)]
    assert readers and all(d.nodes[k]["op"] == "result" for k in readers)


def test_json_writes_a_tuple_type_as_a_list_and_a_body_as_a_nested_document() -> None:
    document = json.loads(gc.to_json(scan_in_scan()))
    scan = next(n for n in document["nodes"] if n.get("op") == "scan")
    assert isinstance(scan["type"], list) and len(scan["type"]) == 2
    body = scan["attrs"]["body"]["graph"]
    assert body["format"] == "graphc" and any(n.get("op") == "scan" for n in body["nodes"])


def nested_scans(depth: int) -> str:
    """A graph whose scan bodies nest `depth` deep, as text."""
    if depth == 0:
        return "graph b(%c: f32[3]) {\n  output %o = %c\n}"
    inner = nested_scans(depth - 1)
    return (
        "graph b(%c: f32[3]) {\n"
        f"  %scan: (f32[3],) = scan(%c, body={inner}, length=1, reverse=False, num_carry=1, "
        "num_xs=0)\n  %r: f32[3] = result(%scan, index=0)\n  output %o = %r\n}"
    )


def test_bodies_nested_deeper_than_the_limit_are_refused_by_name() -> None:
    shallow = gc.parse(nested_scans(20))
    assert str(gc.parse(str(shallow))) == str(shallow)
    assert str(gc.from_json(gc.to_json(shallow))) == str(shallow)
    with pytest.raises(gc.ParseError, match="nested more than 64 deep"):
        gc.parse(nested_scans(70))
    with pytest.raises(gc.ParseError, match="nested more than 64 deep"):
        gc.from_json(_deep_json(70))


def nested_conds(levels: int) -> gc.Graph:
    """A traced function whose conds nest `levels` deep (the outermost graph adds one)."""

    def level(x: Any, k: int) -> Any:
        if k == 0:
            return (x * x).sum()
        return gc.cond(x.sum() > 0, lambda x: level(x, k - 1), lambda x: (x - 1.0).sum(), x)

    return gc.trace(lambda x: level(x, levels), gc.TensorSpec((3,), "float64"))


def test_what_tracing_builds_the_loaders_read_back_and_deeper_is_refused_when_built() -> None:
    deepest = nested_conds(MAX_NESTING - 1)
    assert deepest.nesting == MAX_NESTING
    text = str(deepest)
    assert str(gc.parse(text)) == text
    assert str(gc.from_json(gc.to_json(deepest))) == text
    x = np.array([1.0, -2.0, 3.0])
    assert gc.compile(gc.parse(text))(x) == gc.run(deepest, {"x": x})[0] == 14.0
    with pytest.raises(gc.VerifyError, match=f"nest graphs {MAX_NESTING + 1} deep"):
        nested_conds(MAX_NESTING)


def _deep_json(depth: int) -> str:
    document = json.loads(gc.to_json(gc.parse(nested_scans(1))))
    leaf = document
    for _ in range(depth):
        document = json.loads(json.dumps(leaf))
        scan = next(n for n in document["nodes"] if n.get("op") == "scan")
        scan["attrs"]["body"] = {"graph": leaf}
        leaf = document
    return json.dumps(document)
